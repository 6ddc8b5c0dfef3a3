use crate::prelude::*;
use crate::semantic::NodeExt;
use crate::semantic::{unwrap_parens, AssignOp, Node, Site};

declare_rule! {
    /// ## What it does
    /// Flags a tensor that still carries its autograd graph (a loss, a model output,
    /// anything computed from them with grad enabled) being appended, inserted or stored
    /// into a list, dict or `self.` attribute that outlives the loop iteration.
    ///
    /// ## Why is this bad?
    /// A tensor keeps alive the whole graph that produced it. Stored in a container
    /// that survives the iteration, every step's graph survives too, and memory grows
    /// each step until CUDA runs out. How fast depends on what the graph still holds:
    /// model outputs kept in a loop that never calls `backward()` (an evaluation loop run
    /// with grad enabled) keep every activation, typically megabytes per batch; a loss
    /// kept after `backward()` has released the activations keeps only the graph's nodes,
    /// a slow leak of kilobytes per step that still ends in an OOM on long runs.
    ///
    /// Not flagged: detached values (`.item()`, `.detach()`, `float(...)`), code under
    /// `torch.no_grad()`/`torch.inference_mode()` (or Lightning's `validation_step`),
    /// containers created fresh in the same iteration (or in each step of a loop
    /// around, when the inner loop repeats a fixed count or walks chunks of that step's
    /// batch, as gradient accumulation over micro-batches does), containers that are later
    /// backpropagated (`torch.stack(losses).sum().backward()`), and objects of another
    /// package's class whose `append` is that library's (MONAI's `CumulativeAverage`
    /// detaches what it is given), and code in which nothing can require grad: a
    /// from-scratch network on plain tensors with hand-written gradients, in a file
    /// that creates no trainable tensor or model and imports none (a helper that calls
    /// a model it is handed still counts).
    ///
    /// ## Example
    /// ```python
    /// losses = []
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     optimizer.zero_grad()
    ///     losses.append(loss)  # keeps every step's graph alive
    /// ```
    ///
    /// ## How to fix
    /// Store a Python number for logging, or a detached tensor if you need one:
    /// ```python
    ///     losses.append(loss.item())     # a float
    ///     losses.append(loss.detach())   # a tensor without the graph
    /// ```
    ///
    /// ## Fix safety
    /// A finding that stores one value has a fix. It is safe (`.item()`) when the
    /// container is only summed, averaged, counted or printed later (`sum(losses)`,
    /// `np.mean(losses)`, `len(losses)`, `print(losses)`, each result only read as a
    /// number) and the value is provably one element: the numbers computed are the
    /// same. Otherwise it is unsafe (`.detach()`): the container's later users (a
    /// `torch.stack`, a caller it is returned to) get tensors that no longer require
    /// grad, which they might notice.
    pub static UNDETACHED_LOSS_APPEND = Rule {
        code: "OOM201",
        name: "undetached-loss-append",
        severity: Severity::Error,
        fix: FixAvailability::Always,
        check,
        prefilter: |s| s.graph_source() && s.per_step_context(),
        parts: Some(|s| s.graph_source() && (s.for_loop || s.per_step_context())),
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (id, call) in model.calls.iter_enumerated() {
        let Some((container, method)) = model.method_call(call) else {
            continue;
        };
        // `agent.put_data(transition)` where `put_data` appends its parameter to
        // `self.data`: the receiver keeps the argument.
        if let Some(ap) = model
            .resolve_call(id)
            .and_then(|f| model.appended_parameter(f))
        {
            // The class backpropagating through its list (REINFORCE's episode buffer,
            // reset after `train_net`) keeps the graphs on purpose.
            let used = model.flows_into_backward(ap.list, ap.site)
                || model.read_by_numpy(ap.list, ap.site);
            if let Some(value) = model.positional_args(call.node).nth(ap.position as usize) {
                if !used {
                    let target = format!("{}.{}", model.text(container), ap.attr);
                    report(model, container, &target, value, call.node, call.site, out);
                }
            }
            continue;
        }
        if !names::GROWTH_METHODS.contains(&method) {
            continue;
        }
        // A library's accumulator (`CumulativeAverage().append(loss)`) is not a list.
        if model.built_by_imported_class(container, call.site) {
            continue;
        }
        // `insert(index, value)`: the value is the second argument.
        let value = match method {
            "insert" => model.positional_args(call.node).nth(1),
            _ => model.positional_args(call.node).next(),
        };
        let Some(value) = value else { continue };
        report(model, container, model.text(container), value, call.node, call.site, out);
    }
    for a in &model.assignments {
        let target = unwrap_parens(a.target);
        match (a.op, target.kind_str()) {
            // `history[step] = loss`
            // A constant key (`logs["d_loss"] = d_loss`) is overwritten each step: it
            // keeps one graph, no more than the local does, and so is a key that varies
            // only over a loop of one call (`self.outputs[f"conv{i}"]` over layers). A
            // key that varies per iteration (`memory[:, t] = h`) grows what is kept.
            (AssignOp::Plain, "subscript")
                if !constant_key(target) && !model.key_rewritten_each_call(target, a.site) =>
            {
                if let Some(container) = target.field("value") {
                    report(model, container, model.text(container), a.value, a.node, a.site, out);
                }
            }
            // `losses += [loss]`
            (AssignOp::Augmented("+="), _)
                if matches!(unwrap_parens(a.value).kind_str(), "list" | "tuple") =>
            {
                report(model, target, model.text(target), a.value, a.node, a.site, out);
            }
            _ => {}
        }
        // `predictions = torch.cat((predictions, output))`
        for piece in model.concatenated_onto_self(a) {
            report(model, target, model.text(target), piece, a.node, a.site, out);
        }
    }
}

fn report(
    model: &SemanticModel<'_>,
    container: Node<'_>,
    target: &str,
    value: Node<'_>,
    at: Node<'_>,
    site: Site,
    out: &mut Vec<Diagnostic>,
) {
    // `self.history["loss"].append(loss)`: the container lives as long as its root.
    let mut root = unwrap_parens(container);
    while root.kind_str() == "subscript" {
        match root.field("value") {
            Some(v) => root = unwrap_parens(v),
            None => return,
        }
    }
    let Value::Graph(origin) = model.value(value, site) else {
        return;
    };
    if !model.keeps_graph_alive(root, site) || shares_kept_graph(model, root, value, site) {
        return;
    }
    let what = model.text(unwrap_parens(value));
    let what = if what.len() > 40 || what.contains('\n') {
        match origin {
            Origin::Loss => "the loss",
            Origin::Output => "the model output",
        }
        .to_owned()
    } else {
        format!("`{what}`")
    };
    // A value derived from an accumulator carries the graph that line builds up.
    let related = model
        .graph_accumulation(value, site)
        .map(|stmt| Related {
            range: model.range(stmt),
            message: built_up_by(model.text(stmt)),
        })
        .into_iter()
        .collect();
    let kept = match origin {
        Origin::Loss => "autograd graph",
        Origin::Output => "autograd graph and activations",
    };
    out.push(Diagnostic {
        range: model.range(at),
        message: format!(
            "{what} is stored in `{target}` with its {kept}, so every iteration's graph stays alive"
        ),
        help: "store `.item()` for logging, or `.detach()` to keep a tensor without its graph"
            .to_owned(),
        pattern: Pattern::KeepGraph { origin },
        fix: append_fix(model, root, value, site),
        related,
    });
}

/// `.item()` on the stored value when the container is only summed, averaged, counted
/// or printed later and the value is one element (safe), else `.detach()` (unsafe);
/// none for a list or tuple literal (`losses += [a, b]`).
fn append_fix(model: &SemanticModel<'_>, container: Node<'_>, value: Node<'_>, site: Site) -> Option<Fix> {
    if matches!(unwrap_parens(value).kind_str(), "list" | "tuple" | "dictionary" | "list_splat") {
        return None;
    }
    let safe = model.container_only_reduced(container, site) && model.is_scalar(value, site);
    let method = if safe { ".item()" } else { ".detach()" };
    let edits = model.call_on(value, method);
    let v = model.text(unwrap_parens(value));
    let title = if v.len() <= 40 && !v.contains('\n') {
        format!("Store `{v}{method}`")
    } else {
        format!("Store the value's `{method}`")
    };
    Some(if safe {
        Fix::safe(title, edits)
    } else {
        Fix::unsafe_(title, edits)
    })
}

/// Whether every index of the subscript `target` is a literal constant.
fn constant_key(target: Node<'_>) -> bool {
    let mut c = target.walk();
    let mut keys = target.children_by_field_name("subscript", &mut c).peekable();
    keys.peek().is_some() && keys.all(|k| is_constant(k))
}

fn is_constant(n: Node<'_>) -> bool {
    let n = unwrap_parens(n);
    match n.kind_str() {
        "integer" | "float" | "true" | "false" | "none" => true,
        "string" => {
            let mut c = n.walk();
            let interpolated = n.named_children(&mut c).any(|e| e.kind_str() == "interpolation");
            !interpolated
        }
        "concatenated_string" => {
            let mut c = n.walk();
            let all = n.named_children(&mut c).all(|e| is_constant(e));
            all
        }
        "unary_operator" => n.field("argument").is_some_and(|a| is_constant(a)),
        "tuple" => {
            let mut c = n.walk();
            let all = n.named_children(&mut c).all(|e| is_constant(e));
            all
        }
        _ => false,
    }
}

/// The note on a value whose graph an accumulation builds up; the statement is quoted
/// when it is short and on one line (the note gives its location either way).
fn built_up_by(stmt: &str) -> String {
    if stmt.len() <= 60 && !stmt.contains('\n') {
        format!("its graph is built up by `{stmt}`")
    } else {
        "its graph is built up by an accumulation".to_owned()
    }
}

/// `policy, q_value, value = model(state)` with `q_value` kept for a loss that is
/// backpropagated later, and `values` handed to that same loss computation: one forward
/// built one graph, which the `q_values` store keeps alive for the loss anyway, so
/// storing `value` from the same call costs nothing more.
fn shares_kept_graph(
    model: &SemanticModel<'_>,
    container: Node<'_>,
    value: Node<'_>,
    site: Site,
) -> bool {
    let mine = model.text(unwrap_parens(container));
    let value = unwrap_parens(value);
    if value.kind_str() != "identifier" {
        return false;
    }
    let Some(b) = model.binding_of(value, site) else {
        return false;
    };
    let (Some(source), Some(index)) = (b.value, b.index) else {
        return false;
    };
    model.calls.iter().any(|other| {
        if other.site.scope != site.scope || other.site.loop_ != site.loop_ {
            return false;
        }
        let Some((container, method)) = model.method_call(other) else {
            return false;
        };
        if !names::GROWTH_METHODS.contains(&method) {
            return false;
        }
        let Some(arg) = model.positional_args(other.node).next().map(unwrap_parens) else {
            return false;
        };
        arg.kind_str() == "identifier"
            && model.binding_of(arg, other.site).is_some_and(|ob| {
                ob.value.is_some_and(|v| v.id() == source.id())
                    && ob.index.is_some_and(|i| i != index)
            })
            && model.flows_into_backward(unwrap_parens(container), other.site)
            && handed_together(model, mine, model.text(unwrap_parens(container)), site)
    })
}

/// Whether one call after the loop takes both containers as arguments (the loss
/// computation that consumes the rollout).
fn handed_together(model: &SemanticModel<'_>, a: &str, b: &str, site: Site) -> bool {
    let function = model.function_of(site.scope);
    model.calls.iter().any(|c| {
        if model.function_of(c.site.scope) != function {
            return false;
        }
        let args: Vec<&str> = model
            .positional_args(c.node)
            .map(|n| model.text(unwrap_parens(n)))
            .collect();
        args.contains(&a) && args.contains(&b)
    })
}
