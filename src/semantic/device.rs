//! Tensors left on the accelerator: model outputs (and what is computed from them)
//! that no `.cpu()`, `.numpy()`, `.tolist()` or `.item()` moved off the device, whatever
//! the grad mode; and containers concatenated after a loop.

use super::*;

/// Methods that move a tensor to the host or turn it into Python values.
const TO_HOST: &[&str] = &["cpu", "numpy", "tolist", "item"];

/// Tensor methods whose result is not a per-item tensor left where the tensor is: a
/// shape, a count, a dict view, or a reduction to one number per batch. Any other
/// method of a tensor (`argsort`, `topk`, `gather`, `eq`, `softmax`, indexing) keeps
/// its result on the tensor's device.
const NOT_KEPT: &[&str] = &[
    "size",
    "dim",
    "numel",
    "nelement",
    "element_size",
    "data_ptr",
    "keys",
    "items",
    "values",
    "sum",
    "mean",
    "count_nonzero",
    "norm",
    "std",
    "var",
    "all",
    "any",
    "prod",
];

impl<'a> SemanticModel<'a> {
    /// Whether `expr` at `site` is a model output (or computed from one by tensor
    /// operations) that stays on the device the model runs on: nothing on the way moved
    /// it to the host.
    pub fn device_output(&self, expr: Node<'_>, site: Site) -> bool {
        self.device_output_at(expr, site, 0)
    }

    fn device_output_at(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        if depth > 12 {
            return false;
        }
        let e = unwrap_parens(expr);
        match e.kind_str() {
            "call" => {
                let Some(f) = e.field("function") else {
                    return false;
                };
                if f.kind_str() == "attribute" {
                    let m = f.field("attribute").map_or("", |a| self.text(a));
                    let recv = f.field("object").expect("attribute");
                    if TO_HOST.contains(&m) {
                        return false;
                    }
                    if m == names::TO_METHOD {
                        // `.to("cpu")`, `.to(device)`: a move somewhere else.
                        return false;
                    }
                    if let Some(q) = self.qualified(f) {
                        let functional = q.segments().len() == 4 && q.has_module("functional");
                        if q.is_torch() && (q.segments().len() <= 3 || functional) {
                            // `torch.sigmoid(out)`, `torch.argmax(out, 1)`, `F.normalize(out)`
                            return self
                                .positional_args(e)
                                .next()
                                .is_some_and(|a| self.device_output_at(a, site, depth + 1));
                        }
                    }
                    // A method of a model output keeps it on the device; a method of a
                    // model is a forward (below).
                    if NOT_KEPT.contains(&m) {
                        return false;
                    }
                    if self.device_output_at(recv, site, depth + 1) {
                        return true;
                    }
                }
                // A forward: `model(x)`, `self.net(x)`, `model.forward(x)`, or another
                // method of a model that is no part of the module API
                // (`model.detect_objects(locs, scores)`, `model.encode(x)`).
                let method_forward = f.kind_str() == "attribute"
                    && f.field("attribute").is_some_and(|a| {
                        let m = self.text(a);
                        names::FORWARD_METHODS.contains(&m)
                            || !names::is_module_api_method(m)
                                && f.field("object")
                                    .is_some_and(|o| self.value(o, site) == Value::Module)
                    });
                let callee = if method_forward {
                    f.field("object").expect("attribute")
                } else {
                    f
                };
                self.value(callee, site) == Value::Module
                    && (self.placed_on_device(callee, site) || self.inputs_moved(e, site))
            }
            // `100.0 * feats @ classifier`, `scale * F.normalize(emb)`: arithmetic on a
            // device tensor stays on its device.
            "binary_operator" => {
                e.field("left")
                    .is_some_and(|l| self.device_output_at(l, site, depth + 1))
                    || e.field("right")
                        .is_some_and(|r| self.device_output_at(r, site, depth + 1))
            }
            // `out.logits`, `outputs[0]`
            "attribute" => e
                .field("object")
                .is_some_and(|o| self.device_output_at(o, site, depth + 1)),
            "subscript" => e
                .field("value")
                .is_some_and(|o| self.device_output_at(o, site, depth + 1)),
            "identifier" => {
                // A loss is one number per batch: reduced already, whatever holds it.
                if self.text(e).to_ascii_lowercase().contains("loss") {
                    return false;
                }
                let Some(b) = self.binding_of(e, site) else {
                    return false;
                };
                let (Some(v), s) = (b.value, b.site) else {
                    return false;
                };
                match b.kind {
                    // `feat, label = emb[i], ids[i]`: the element bound.
                    BindingKind::Assign if b.index.is_some() => {
                        let v = unwrap_parens(v);
                        let element = if matches!(v.kind_str(), "tuple" | "expression_list") {
                            let mut c = v.walk();
                            let items: Vec<Node<'_>> = v
                                .named_children(&mut c)
                                .filter(|n| n.kind_str() != "comment")
                                .collect();
                            b.index.and_then(|i| items.get(i as usize).copied())
                        } else {
                            Some(v)
                        };
                        element.is_some_and(|x| self.device_output_at(x, s, depth + 1))
                    }
                    BindingKind::Assign => self.device_output_at(v, s, depth + 1),
                    // `feats /= feats.norm(dim=-1, keepdim=True)`: updated in place, the
                    // value stays where it was.
                    BindingKind::Augmented => {
                        let prev = self
                            .resolve(e, site, e.start_byte())
                            .and_then(|id| self.previous_binding(id));
                        prev.is_some_and(|p| {
                            let pb = &self.bindings[p];
                            pb.kind == BindingKind::Assign
                                && pb.index.is_none()
                                && pb
                                    .value
                                    .is_some_and(|pv| self.device_output_at(pv, pb.site, depth + 1))
                        })
                    }
                    // `for i, pred in enumerate(preds)`: an item of a device output.
                    BindingKind::ForTarget => {
                        let v = unwrap_parens(v);
                        let inner = if v.kind_str() == "call"
                            && v.field("function")
                                .is_some_and(|f| self.text(f) == "enumerate")
                        {
                            self.positional_args(v).next()
                        } else {
                            Some(v)
                        };
                        inner.is_some_and(|i| self.device_output_at(i, s, depth + 1))
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Whether `container` (a plain name) is concatenated or stacked after the loop
    /// `l`, in the same function: `torch.cat(preds)`, `torch.stack(outputs, 0)`.
    pub fn concatenated_after(&self, container: Node<'_>, l: LoopId) -> bool {
        if container.kind_str() != "identifier" {
            return false;
        }
        let name = self.text(container);
        let lp = self.loop_(l);
        let f = self.function_of(lp.scope);
        let end = lp.node.end_byte();
        self.calls.iter().any(|c| {
            if c.node.start_byte() < end || self.function_of(c.site.scope) != f {
                return false;
            }
            // Handed whole to a helper after the loop (`calculate_map(det_boxes, ...)`,
            // `compute_metrics(preds, labels)`): it held every batch until then.
            let handed = c.function.kind_str() != "identifier"
                || !names::is_detaching_builtin(self.text(c.function))
                    && !names::is_passthrough_builtin(self.text(c.function))
                    && !matches!(self.text(c.function), "print" | "isinstance" | "type");
            // A NumPy function cannot take CUDA tensors: what it is handed is on the host.
            let helper = handed
                && self
                    .qualified(c.function)
                    .is_none_or(|q| !q.is_torch() && q.first() != Some("numpy"))
                && self
                    .positional_args(c.node)
                    .any(|a| self.text(unwrap_parens(a)) == name);
            helper
                || self.qualified(c.function).is_some_and(|q| {
                    q.is_torch()
                        && matches!(
                            q.last(),
                            Some("cat" | "stack" | "vstack" | "hstack" | "concat" | "concatenate")
                        )
                }) && self.positional_args(c.node).next().is_some_and(|a| {
                    self.text(unwrap_parens(a)) == name || self.comprehension_over(a, name)
                })
        })
    }

    /// Whether the container `container`, concatenated after loop `l` in the same
    /// function, goes to the host there: the concatenation is moved at once
    /// (`torch.cat(scores).tolist()`), or the name bound to it is later moved, turned
    /// into Python values or handed to a saver (`save_image(outputs, ...)`). A
    /// concatenation used on the device (the latents of a batch decoded in slices)
    /// would be built there whatever the loop did.
    pub fn concatenation_leaves_device(&self, container: Node<'_>, l: LoopId) -> bool {
        if container.kind_str() != "identifier" {
            return false;
        }
        let name = self.text(container);
        let lp = self.loop_(l);
        let f = self.function_of(lp.scope);
        let end = lp.node.end_byte();
        let host_method = |n: Node<'_>| {
            n.kind_str() == "attribute"
                && n.field("attribute")
                    .is_some_and(|a| TO_HOST.contains(&self.text(a)))
        };
        self.calls.iter().any(|c| {
            if c.node.start_byte() < end || self.function_of(c.site.scope) != f {
                return false;
            }
            let concatenates = self.qualified(c.function).is_some_and(|q| {
                q.is_torch() && matches!(q.last(), Some("cat" | "stack" | "vstack" | "hstack"))
            }) && self
                .positional_args(c.node)
                .next()
                .is_some_and(|a| self.text(unwrap_parens(a)) == name);
            if !concatenates {
                return false;
            }
            // `torch.cat(x).view(n, -1).cpu()`: up the chain of method calls.
            let mut n = c.node;
            while let Some(p) = n.parent() {
                match p.kind_str() {
                    "attribute" if host_method(p) => return true,
                    "attribute" | "call" | "parenthesized_expression" => n = p,
                    _ => break,
                }
            }
            let Some(assign) = n.parent().filter(|p| p.kind_str() == "assignment") else {
                return false;
            };
            let Some(target) = assign
                .field("left")
                .filter(|t| t.kind_str() == "identifier")
            else {
                return false;
            };
            let after = assign.end_byte();
            let Some(binding) = self.resolve(target, c.site, after) else {
                return false;
            };
            // Reads of this binding, not of a later one computed from it on the device.
            let reads = |n: Node<'_>, site: Site| {
                let n = unwrap_parens(n);
                n.kind_str() == "identifier"
                    && self.resolve(n, site, n.start_byte()) == Some(binding)
            };
            self.calls.iter().any(|r| {
                if r.node.start_byte() < after || self.function_of(r.site.scope) != f {
                    return false;
                }
                let func = r.function;
                let moved =
                    host_method(func) && func.field("object").is_some_and(|o| reads(o, r.site));
                let saved = self.text(func).to_ascii_lowercase().contains("save")
                    && self.positional_args(r.node).any(|a| reads(a, r.site));
                moved || saved
            })
        })
    }

    /// Whether `expr` is the target of a comprehension that walks the container `name`
    /// (`[torch.cat(x, 0) for x in zip(*stats)]`: each field of a list of tuples,
    /// concatenated).
    fn comprehension_over(&self, expr: Node<'_>, name: &str) -> bool {
        let e = unwrap_parens(expr);
        if e.kind_str() != "identifier" {
            return false;
        }
        let mut p = e.parent();
        while let Some(n) = p {
            if matches!(n.kind_str(), "list_comprehension" | "generator_expression") {
                let mut c = n.walk();
                let found = n.named_children(&mut c).any(|cl| {
                    cl.kind_str() == "for_in_clause"
                        && cl
                            .field("left")
                            .is_some_and(|l| self.text(l) == self.text(e))
                        && cl.field("right").is_some_and(|r| {
                            let r = unwrap_parens(r);
                            // `stats`, `zip(*stats)`
                            self.text(r) == name
                                || r.kind_str() == "call"
                                    && r.field("function").is_some_and(|f| self.text(f) == "zip")
                                    && r.field("arguments").is_some_and(|a| {
                                        let mut w = a.walk();
                                        let hit = a.named_children(&mut w).any(|x| {
                                            x.kind_str() == "list_splat"
                                                && x.named_child(0)
                                                    .is_some_and(|i| self.text(i) == name)
                                        });
                                        hit
                                    })
                        })
                });
                return found;
            }
            if n.kind_str().ends_with("statement") {
                return false;
            }
            p = n.parent();
        }
        false
    }

    /// `acc = torch.cat([acc, out])`: a value rebound to itself concatenated with
    /// something else along the batch dimension. Gives the read of the previous value
    /// and what is added.
    pub fn self_concatenation<'t>(
        &self,
        target: Node<'t>,
        value: Node<'t>,
    ) -> Option<(Node<'t>, Node<'t>)> {
        let value = unwrap_parens(value);
        if value.kind_str() != "call" {
            return None;
        }
        let q = self.qualified(value.field("function")?)?;
        if !(q.is_torch() && matches!(q.last(), Some("cat" | "concat" | "vstack"))) {
            return None;
        }
        // Along the batch dimension: `torch.cat([tokens, nxt], dim=1)` extends each
        // sequence (a generation loop's state), it does not stack batches.
        let dim = self
            .keyword_arg(value, "dim")
            .or_else(|| self.keyword_arg(value, "axis"))
            .or_else(|| self.positional_args(value).nth(1));
        if dim.is_some_and(|d| self.text(unwrap_parens(d)) != "0") {
            return None;
        }
        let seq = unwrap_parens(self.positional_args(value).next()?);
        if !matches!(seq.kind_str(), "list" | "tuple") || seq.named_child_count() != 2 {
            return None;
        }
        let name = self.text(target);
        let (a, b) = (seq.named_child(0)?, seq.named_child(1)?);
        let is_prev = |n: Node<'_>| {
            let n = unwrap_parens(n);
            n.kind_str() == "identifier" && self.text(n) == name
        };
        match (is_prev(a), is_prev(b)) {
            (true, false) => Some((unwrap_parens(a), b)),
            (false, true) => Some((unwrap_parens(b), a)),
            _ => None,
        }
    }

    /// Whether a model was placed on a device in this file: `.cuda()` / `.to(...)` on
    /// its name, or in the value bound to it, or `device_map=` at its load. A model never
    /// placed runs on the CPU, where its outputs cost no device memory.
    fn placed_on_device(&self, model: Node<'_>, site: Site) -> bool {
        let name = self.text(model);
        let moves =
            |t: &str| t.contains(".cuda(") || t.contains(".to(") || t.contains("device_map");
        if let Some(b) = self.binding_of(model, site) {
            if b.value
                .is_some_and(|v| moves(self.text(v)) || self.handed_device(v))
            {
                return true;
            }
        }
        self.calls.iter().any(|c| {
            self.method_call(c).is_some_and(|(recv, m)| {
                matches!(m, "cuda" | "to") && self.text(unwrap_parens(recv)) == name
            })
        })
    }

    /// `load_classifier(path, device).eval()`, `Net(cfg, device=args.device)`: a
    /// builder or loader handed the device puts what it returns there.
    fn handed_device(&self, value: Node<'_>) -> bool {
        let device_like = |a: Node<'_>| {
            let a = unwrap_parens(a);
            matches!(a.kind_str(), "identifier" | "attribute") && {
                let t = self.text(a);
                let last = t.rsplit('.').next().unwrap_or(t);
                last.to_ascii_lowercase().contains("device")
            }
        };
        // Through a method chain on the result (`.eval()`, `.float()`).
        let mut v = unwrap_parens(value);
        while v.kind_str() == "call" {
            if self.any_argument_value(v, device_like) {
                return true;
            }
            match v.field("function") {
                Some(f) if f.kind_str() == "attribute" => {
                    v = unwrap_parens(f.field("object").expect("attribute"));
                }
                _ => return false,
            }
        }
        false
    }

    /// Whether a forward's inputs are moved to a device on the way in
    /// (`model(x.to(device))`, `x = x.cuda()` before it).
    fn inputs_moved(&self, call: Node<'_>, site: Site) -> bool {
        let Some(args) = call.field("arguments") else {
            return false;
        };
        let mut c = args.walk();
        let inputs: Vec<Node<'_>> = args
            .named_children(&mut c)
            .filter_map(|a| match a.kind_str() {
                "keyword_argument" => a.field("value"),
                "comment" | "list_splat" | "dictionary_splat" => None,
                _ => Some(a),
            })
            .collect();
        inputs.into_iter().any(|a| self.moved_input(a, site, 0))
    }

    /// Whether `expr` was moved to a device (`.cuda()`, `.to(device)`) on its way here:
    /// in the expression itself, or in what the name it reads was bound to, through
    /// reshapes of the moved tensor (`x = x.to(device); x = x.permute(0, 2, 1)`).
    fn moved_input(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        let a = unwrap_parens(expr);
        // `x.to(device).cpu().numpy()`: back on the host.
        let back = a.kind_str() == "call"
            && a.field("function").is_some_and(|f| {
                f.kind_str() == "attribute"
                    && f.field("attribute")
                        .is_some_and(|m| TO_HOST.contains(&self.text(m)))
            });
        if back {
            return false;
        }
        let t = self.text(a);
        if t.contains(".cuda(") || t.contains(".to(") {
            return true;
        }
        if depth >= 4 {
            return false;
        }
        // The name the expression starts from: `x` of `x.transpose(1, 3)[:, 0]`.
        let mut root = a;
        loop {
            root = match root.kind_str() {
                "call" => match root.field("function") {
                    Some(f) if f.kind_str() == "attribute" => f,
                    _ => return false,
                },
                "attribute" => match root.field("object") {
                    Some(o) => o,
                    None => return false,
                },
                "subscript" => match root.field("value") {
                    Some(v) => v,
                    None => return false,
                },
                "parenthesized_expression" => unwrap_parens(root),
                "identifier" => break,
                _ => return false,
            };
        }
        self.binding_of(root, site).is_some_and(|b| {
            matches!(b.kind, BindingKind::Assign | BindingKind::Augmented)
                && b.value
                    .is_some_and(|v| self.moved_input(v, b.site, depth + 1))
        })
    }
}
