use crate::prelude::*;
use crate::semantic::state::Conversion;
use crate::semantic::{CallId, unwrap_parens, BindingKind, Node, NodeExt};

declare_rule! {
    /// ## What it does
    /// Flags a dtype conversion (`.to(torch.bfloat16)`, `.half()`, `.float()`...) of a
    /// model whose dtype is already that dtype on every path to it: loaded with
    /// `from_pretrained(torch_dtype=...)` or converted the same way before. Also flags a
    /// tensor converted into a new name (`w16 = w.to(torch.float16)`) while the original
    /// stays referenced and is used afterwards, so both copies stay in memory.
    ///
    /// ## Why is this bad?
    /// A redundant conversion of a module is a no-op at best; it usually means the load
    /// and the conversion disagree about who owns the dtype, and the next edit (dropping
    /// `torch_dtype=`, say) silently loads the weights in float32 first, doubling the
    /// peak memory of the load. Converting a tensor into a second name keeps the old
    /// tensor alive as long as its name is used: two copies of the weights at once.
    ///
    /// Not flagged: a conversion to a different dtype than the known one (loading in
    /// float16 and calling `.float()` for training is a real change), conversions where
    /// the dtype is uncertain (loaded with `torch_dtype` in one branch only, or a dtype
    /// held in a variable we cannot read), `half_model = model.half()` (modules
    /// convert in place: no copy), tensors written out in the source (`torch.tensor(1)`,
    /// a literal list), and integer or boolean tensors made float for arithmetic
    /// (`lengths = torch.sum(ids != 0, dim=-1)`, then `lengths.float()`): both dtypes
    /// are needed, and neither is a copy of weights.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    /// model = model.to(torch.bfloat16)  # already bfloat16
    /// ```
    ///
    /// ## How to fix
    /// Drop the second conversion; load in the target dtype with `torch_dtype=` rather
    /// than converting after loading. For tensors, rebind the same name
    /// (`w = w.to(torch.float16)`) or `del` the original once converted.
    ///
    /// ## Fix safety
    /// A model converted to a dtype it already has gets a fix that removes the
    /// conversion (the call is cut from its chain; a statement left doing nothing is
    /// deleted). It is safe when an earlier conversion gave the model that dtype and the
    /// model is not touched in between: the value is provably the same. It is unsafe
    /// when the dtype came from `from_pretrained(torch_dtype=...)`, since some models
    /// keep a few modules in float32 on purpose and the conversion would change them.
    /// A `.to(...)` that also moves the model, and the tensor copy, have no fix.
    pub static REDUNDANT_DTYPE_CONVERSION = Rule {
        code: "OOM401",
        name: "redundant-dtype-conversion",
        severity: Severity::Warning,
        fix: FixAvailability::Sometimes,
        check,
        prefilter: |s| s.attr(names::TO_METHOD) || s.any_attr(names::DTYPE_METHODS),
        parts: None,
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for i in model.calls.ids() {
        let Some(conv) = model.conversion(i) else {
            continue;
        };
        let Some(Some(dtype)) = conv.dtype else {
            continue;
        };
        let call = &model.calls[i];
        let recv = unwrap_parens(conv.receiver);
        let is_module = model.value(recv, call.site) == Value::Module;
        if is_module {
            let st = model.state_before(&conv);
            let Some(known) = st.dtype else { continue };
            if known.value != dtype {
                continue;
            }
            let line = model.line_of(known.at);
            let how = if is_load_argument(model, known.at) {
                format!(
                    "loaded with `{}` on line {line}",
                    model.text(known.at.parent().unwrap_or(known.at))
                )
            } else {
                format!("converted on line {line}")
            };
            out.push(Diagnostic {
                range: model.range(call.node),
                message: format!(
                    "`{}` is already {} ({how}): this conversion does nothing",
                    model.short_text(recv),
                    dtype.name()
                ),
                help: "drop the second conversion; load in the target dtype with `torch_dtype=` rather than converting after loading".to_owned(),
                pattern: Pattern::RedundantDtype,
                fix: remove_fix(model, &conv, recv, known.at, !is_load_argument(model, known.at)),
                related: Vec::new(),
            });
        } else if let Some(kept) = copy_keeps_original(model, i) {
            out.push(Diagnostic {
                range: model.range(call.node),
                message: format!(
                    "`{}` is converted to {} into a new tensor while the original is used again on line {}: both copies stay in memory",
                    model.text(recv),
                    dtype.name(),
                    model.line_of(kept)
                ),
                help: format!(
                    "rebind the same name (`{0} = {0}.to(...)`) or `del {0}` once it is converted",
                    model.text(recv)
                ),
                pattern: Pattern::DtypeCopy,
                fix: None,
                related: Vec::new(),
            });
        }
    }
}

/// Removing the redundant conversion: safe when an earlier conversion made the model
/// that dtype and nothing touches it in between (the value is then the same object in
/// the same state); unsafe after a load with `torch_dtype=` (a model may keep some
/// modules in float32 on purpose, which the conversion would change). A `.to(...)` that
/// also moves the model is left alone.
fn remove_fix(model: &SemanticModel<'_>, conv: &Conversion<'_>, recv: Node<'_>, known: Node<'_>, converted: bool) -> Option<Fix> {
    if conv.device.is_some() {
        return None;
    }
    let call = model.calls[conv.call].node;
    let edit = model.remove_call(call)?;
    let site = model.calls[conv.call].site;
    let name = model.text(unwrap_parens(recv));
    let root = name.split(['.', '[', '(']).next().unwrap_or(name);
    let from = known.end_byte();
    let safe = converted && model.untouched_between(root, site.scope, from, call.start_byte());
    let title = removal_title(model, call);
    Some(if safe {
        Fix::safe(title, vec![edit])
    } else {
        Fix::unsafe_(title, vec![edit])
    })
}

/// `Remove the redundant .half()`, `... .to(...)`.
fn removal_title(model: &SemanticModel<'_>, call: Node<'_>) -> String {
    let method = call
        .field("function")
        .and_then(|f| f.field("attribute"))
        .map_or("", |a| model.text(a));
    let args = if call.field("arguments").is_some_and(|a| a.named_child_count() > 0) {
        "..."
    } else {
        ""
    };
    format!("Remove the redundant `.{method}({args})`")
}

/// Whether a node is the `torch_dtype=`/`dtype=` argument of a load.
fn is_load_argument<'a>(model: &SemanticModel<'a>, node: Node<'_>) -> bool {
    node.parent().is_some_and(|p| {
        p.kind_str() == "keyword_argument"
            && p.field("name")
                .is_some_and(|n| matches!(model.text(n), "torch_dtype" | "dtype" | "device_map"))
    })
}

/// For `w16 = w.to(torch.float16)` on a local tensor `w`: the first later read of
/// `w` in the same function (both copies are alive until then), if there is one.
fn copy_keeps_original<'a>(model: &SemanticModel<'a>, call: CallId) -> Option<Node<'a>> {
    let c = &model.calls[call];
    let (recv, method) = model.method_call(c)?;
    let recv = unwrap_parens(recv);
    if recv.kind_str() != "identifier" {
        return None;
    }
    // `.float()` and `.double()` are everyday method names (sympy's `Point.double()`);
    // they count only on what is known to be a tensor. `.half()`, `.bfloat16()` and
    // `.to(torch.float16)` say tensor themselves.
    let generic = matches!(method, "float" | "double");
    let stmt = c.node.parent().filter(|p| p.kind_str() == "assignment")?;
    if stmt.field("right")?.id() != c.node.id() {
        return None;
    }
    let target = stmt.field("left")?;
    let name = model.text(recv);
    if target.kind_str() != "identifier" || model.text(target) == name {
        return None;
    }
    // Only a local that this function created can be freed; a parameter stays alive
    // in the caller anyway.
    // ...and only a tensor it created (`w = torch.load(...)`, `w = x @ y`): a name
    // bound to an attribute or an element (`w = model.weight`) is an alias of memory
    // that stays alive anyway.
    let b = model.binding_of(recv, c.site)?;
    if b.kind != BindingKind::Assign
        || b.index.is_some()
        || model.function_of(b.site.scope) != model.function_of(c.site.scope)
        || !b
            .value
            .is_some_and(|v| matches!(unwrap_parens(v).kind_str(), "call" | "binary_operator"))
    {
        return None;
    }
    // `torch.tensor([[2, 5], [4, 2]])`: data written out in the source is a handful of
    // numbers, and a second copy of it costs nothing.
    if b.value.is_some_and(|v| built_from_literal(model, v)) {
        return None;
    }
    // Lengths and masks (`torch.sum(ids != 0, dim=-1)`) made float for a division:
    // both dtypes are needed, and neither is a copy of weights.
    if b.value.is_some_and(|v| model.integer_tensor(v)) {
        return None;
    }
    let value = model.value(recv, c.site);
    if value == Value::Module {
        return None;
    }
    if generic && !matches!(value, Value::Graph(_)) && !is_torch_call(model, b.value) {
        return None;
    }
    let body = match model.function_of(c.site.scope) {
        Some(f) => model.scope(f).node,
        None => model.root,
    };
    let after = stmt.end_byte();
    let mut cursor = body.walk();
    let mut stack = vec![body];
    let mut first: Option<Node<'a>> = None;
    while let Some(n) = stack.pop() {
        if n.end_byte() <= after {
            continue;
        }
        if n.kind_str() == "identifier" && n.start_byte() >= after && model.text(n) == name {
            // Reading `w.shape` or `w.dtype` needs no data; only real uses count.
            let metadata = n.parent().is_some_and(|p| {
                p.kind_str() == "attribute"
                    && p.field("attribute").is_some_and(|a| {
                        matches!(
                            model.text(a),
                            "shape"
                                | "dtype"
                                | "device"
                                | "ndim"
                                | "size"
                                | "dim"
                                | "requires_grad"
                                | "is_cuda"
                        )
                    })
            });
            if !metadata && first.is_none_or(|f| n.start_byte() < f.start_byte()) {
                first = Some(n);
            }
            continue;
        }
        if matches!(
            n.kind_str(),
            "function_definition" | "class_definition" | "lambda"
        ) && n.id() != body.id()
        {
            continue;
        }
        for ch in n.named_children(&mut cursor) {
            stack.push(ch);
        }
    }
    let first = first?;
    let p = first.parent()?;
    let rebound =
        p.kind_str() == "assignment" && p.field("left").is_some_and(|l| l.id() == first.id());
    let deleted = p.kind_str() == "delete_statement"
        || p.kind_str() == "expression_list"
            && p.parent().is_some_and(|g| g.kind_str() == "delete_statement");
    (!rebound && !deleted).then_some(first)
}

/// `torch.load(...)`, `torch.randn(...)`, `F.linear(...)`: a call into torch, which
/// returns tensors.
fn is_torch_call<'a>(model: &SemanticModel<'a>, v: Option<Node<'_>>) -> bool {
    let Some(v) = v.map(unwrap_parens) else {
        return false;
    };
    v.kind_str() == "call"
        && v.field("function")
            .and_then(|f| model.qualified(f))
            .is_some_and(|q| q.is_torch())
}

/// A tensor whose data is written out in the source: a list or tuple of number literals
/// (nested at most a few levels) given to a data constructor (`torch.tensor`,
/// `torch.Tensor`, `torch.as_tensor`, `FloatTensor`), or nested lists, which no shape
/// argument is (`torch.zeros((4096, 4096))` is a shape, not data).
fn built_from_literal(model: &SemanticModel<'_>, v: Node<'_>) -> bool {
    let v = unwrap_parens(v);
    if v.kind_str() != "call" {
        return false;
    }
    let Some(data) = model.positional_args(v).next().map(unwrap_parens) else {
        return false;
    };
    // `torch.tensor(1)`: a scalar is one number (but `torch.Tensor(1000, 1000)` is a
    // shape).
    if matches!(data.kind_str(), "integer" | "float" | "true" | "false") {
        return v
            .field("function")
            .is_some_and(|f| model.text(f).rsplit('.').next() == Some("tensor"));
    }
    let mut stack = vec![(data, 0u32)];
    let mut nested = false;
    let mut cursor = data.walk();
    while let Some((n, depth)) = stack.pop() {
        match n.kind_str() {
            "integer" | "float" | "true" | "false" if depth > 0 => {}
            "unary_operator" if depth > 0 => {
                stack.extend(n.named_children(&mut cursor).map(|c| (c, depth)));
            }
            "list" | "tuple" if depth < 8 => {
                nested |= depth > 0;
                stack.extend(n.named_children(&mut cursor).map(|c| (c, depth + 1)));
            }
            _ => return false,
        }
    }
    let constructor = v
        .field("function")
        .map(|f| model.text(f).rsplit('.').next().unwrap_or(""))
        .is_some_and(|name| name.to_ascii_lowercase().ends_with("tensor"));
    nested || constructor
}
