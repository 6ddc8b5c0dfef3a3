//! Autograd passes over a graph: backward passes and `torch.autograd.grad`, with what
//! they ask of the graph (`retain_graph=`, `create_graph=`), and which passes follow
//! one another in the same step.

use rustc_hash::FxHashSet;

use super::*;

/// Bindings a pass's dependency walk looks at before giving up (then: shared).
const DEP_BUDGET: usize = 512;

/// One pass over an autograd graph: `loss.backward(...)`, `torch.autograd.backward(...)`,
/// `torch.autograd.grad(...)`.
#[derive(Clone, Copy, Debug)]
pub struct GraphPass<'a> {
    pub call: CallId,
    /// The `retain_graph=` argument, when given.
    pub retain_graph: Option<Node<'a>>,
    /// `create_graph=True`: a higher-order gradient that a later pass backpropagates.
    pub create_graph: bool,
}

/// `True` as written (not a variable, not `False`).
fn is_true(n: Option<Node<'_>>) -> bool {
    n.is_some_and(|n| unwrap_parens(n).kind_str() == "true")
}

impl<'a> SemanticModel<'a> {
    /// The call as a pass over an autograd graph, if it is one.
    pub fn graph_pass(&self, call: CallId) -> Option<GraphPass<'a>> {
        let c = &self.calls[call];
        let is_pass = self.backward_at(call).is_some()
            || self.qualified(c.function).is_some_and(|q| {
                q.is_torch() && q.has_module("autograd") && q.last() == Some("grad")
            });
        if !is_pass {
            return None;
        }
        Some(GraphPass {
            call,
            retain_graph: self.keyword_arg(c.node, "retain_graph"),
            create_graph: is_true(self.keyword_arg(c.node, "create_graph")),
        })
    }

    /// Whether a pass asks to keep its graph with a literal `retain_graph=True`.
    pub fn retains_graph(&self, pass: &GraphPass<'a>) -> bool {
        is_true(pass.retain_graph)
    }

    /// Whether another pass can run after `call` in the same step of `unit`: a later
    /// pass in the same function within the unit (by position), a pass in the same
    /// repetition of an inner loop around `call`, or a pass in a same-file function
    /// that the unit calls.
    pub fn pass_follows(&self, call: CallId, unit: Unit) -> bool {
        let c = &self.calls[call];
        let f = self.function_of(c.site.scope);
        let after = c.node.end_byte();
        let body = match unit {
            Unit::Loop(l) => self.loop_(l).body.byte_range(),
            Unit::Hook(s) => self.scope(s).node.byte_range(),
        };
        // An inner loop around the call (inside the unit): the pass repeats in one step.
        let repeated = match unit {
            Unit::Loop(l) => c.site.loop_ != Some(l) || self.repeats_within_step(l),
            Unit::Hook(_) => c.site.loop_.is_some(),
        };
        if repeated {
            return true;
        }
        let callees = self.unit_callees(unit);
        self.calls.iter_enumerated().any(|(i, other)| {
            if i == call || self.graph_pass(i).is_none() {
                return false;
            }
            let of = self.function_of(other.site.scope);
            // A later pass in the step reuses the retained graph only when its loss
            // reads some of it (`critic_loss` from `critic(s)` retained, then
            // `actor_loss` from a separate `actor(s)` forward: nothing reused).
            let here = of == f
                && other.node.start_byte() >= after
                && body.contains(&other.node.start_byte())
                && self.passes_share_graph(call, i);
            let called = of.is_some_and(|g| Some(g) != f && callees.contains(&g));
            here || called
        })
    }

    /// Whether another pass (of any kind) comes after `call` in its function.
    pub fn pass_later_in_function(&self, call: CallId) -> bool {
        let c = &self.calls[call];
        let f = self.function_of(c.site.scope);
        let after = c.node.end_byte();
        self.calls.iter_enumerated().any(|(i, other)| {
            i != call
                && other.node.start_byte() >= after
                && self.function_of(other.site.scope) == f
                && self.graph_pass(i).is_some()
                && !exclusive_arms(c.node, other.node)
        })
    }

    /// Whether the losses of two passes may share part of one autograd graph: some
    /// binding both read (through the bindings they are computed from, in their
    /// function) may carry a graph. A binding known to carry none (a module, a number,
    /// a detached tensor) or that is an input (a loop target, a parameter: the batch
    /// both forwards take) shares nothing. Unknown passes (`autograd.grad`), a walk
    /// past its budget, and values read through calls count as shared.
    pub fn passes_share_graph(&self, a: CallId, b: CallId) -> bool {
        let (Some(ba), Some(bb)) = (self.backward_at(a), self.backward_at(b)) else {
            return true;
        };
        let site_a = self.calls[a].site;
        let site_b = self.calls[b].site;
        let (Some(da), Some(db)) = (
            self.graph_deps(ba.loss, site_a),
            self.graph_deps(bb.loss, site_b),
        ) else {
            return true;
        };
        // Keyed by the value bound: `logits, reg = model(x)` binds two names to one
        // forward, whose graph both losses then read.
        let values = |d: &FxHashSet<BindingId>| -> FxHashSet<usize> {
            d.iter()
                .filter(|&&x| self.may_hold_graph(x))
                .filter_map(|&x| self.bindings[x].value.map(|v| v.id()))
                .collect()
        };
        !values(&da).is_disjoint(&values(&db))
    }

    /// Whether the binding `b` may hold (part of) an autograd graph: an assignment
    /// whose value is not known to be a module, an optimizer, a number or detached
    /// (imports, definitions, loop targets and parameters are inputs, not graphs).
    fn may_hold_graph(&self, b: BindingId) -> bool {
        let bd = &self.bindings[b];
        matches!(bd.kind, BindingKind::Assign | BindingKind::Augmented)
            && matches!(self.eval_binding(b, 0), Value::Graph(_) | Value::Unknown)
    }

    /// The bindings `expr` (at `site`) is computed from, transitively through the
    /// values of assignments and `+=` chains; `None` past the budget.
    fn graph_deps(&self, expr: Node<'_>, site: Site) -> Option<FxHashSet<BindingId>> {
        let mut seen: FxHashSet<BindingId> = FxHashSet::default();
        let mut work: Vec<BindingId> = Vec::new();
        let push_names = |n: Node<'_>, s: Site, work: &mut Vec<BindingId>| {
            for name in self.names_read(n, DEP_BUDGET) {
                if let Some(b) = self.resolve(name, s, name.start_byte()) {
                    work.push(b);
                }
            }
        };
        push_names(expr, site, &mut work);
        while let Some(b) = work.pop() {
            if !seen.insert(b) {
                continue;
            }
            if seen.len() > DEP_BUDGET {
                return None;
            }
            let bd = &self.bindings[b];
            // What a module, an optimizer or a number was built from is no graph.
            if !self.may_hold_graph(b) {
                continue;
            }
            match bd.kind {
                BindingKind::Assign | BindingKind::Augmented => {
                    if let Some(v) = bd.value {
                        push_names(v, bd.site, &mut work);
                    }
                    if bd.kind == BindingKind::Augmented {
                        if let Some(p) = self.previous_binding(b) {
                            work.push(p);
                        }
                    }
                }
                _ => {}
            }
        }
        Some(seen)
    }

    /// Whether the graph behind the loss of the pass `call` is kept on the instance
    /// after the function returns: a `self.` attribute the function assigns holds a
    /// value the loss is computed from (`self.outputs = outputs = model(x)`, then a
    /// loss over `outputs`), and no backward pass of the file reads that attribute:
    /// the attribute's name.
    pub fn retained_graph_kept_on_self(&self, call: CallId) -> Option<&'a str> {
        let bw = self.backward_at(call)?;
        let site = self.calls[call].site;
        let f = self.function_of(site.scope);
        let deps = self.graph_deps(bw.loss, site)?;
        let graph_deps: Vec<BindingId> = deps
            .iter()
            .copied()
            .filter(|&b| self.may_hold_graph(b))
            .collect();
        if graph_deps.is_empty() {
            return None;
        }
        self.bindings.iter().find_map(|bd| {
            if bd.kind != BindingKind::Assign || self.function_of(bd.site.scope) != f {
                return None;
            }
            if self.scope(bd.owner).kind != ScopeKind::Class {
                return None;
            }
            let v = bd.value?;
            let kept = graph_deps.iter().any(|&g| {
                let gd = &self.bindings[g];
                // The same value bound to both (`self.out = out = f(x)`), or the name.
                gd.value.is_some_and(|gv| gv.id() == v.id()) && gd.index == bd.index
                    || unwrap_parens(v).kind_str() == "identifier"
                        && self.resolve(unwrap_parens(v), bd.site, v.start_byte()) == Some(g)
            });
            (kept && !self.attr_flows_into_backward(bd.owner, bd.name)).then_some(bd.name)
        })
    }

    /// A loop that is a step loop only because it backpropagates, nested in a step
    /// loop over data (`for k in range(num_heads): losses[k].backward(...)`): its
    /// iterations are passes of one step, over a graph built before it.
    fn repeats_within_step(&self, l: LoopId) -> bool {
        let lp = self.loop_(l);
        let mut parent = lp.parent;
        let mut outer_step = false;
        while let Some(p) = parent {
            outer_step |= self.is_step_loop(p);
            parent = self.loop_(p).parent;
        }
        if !outer_step {
            return false;
        }
        let header = match lp.kind {
            LoopKind::For => lp.iter,
            LoopKind::While => lp.node.field("condition"),
        };
        let Some(h) = header else { return false };
        let mut cursor = h.walk();
        let mut stack = vec![h];
        while let Some(n) = stack.pop() {
            if n.kind_str() == "identifier" && names::is_data_name(self.text(n)) {
                return false;
            }
            stack.extend(n.named_children(&mut cursor));
        }
        true
    }
}

/// Whether `a` and `b` sit in different arms of one `if`/`elif`/`else`, so that no run
/// reaches both.
pub(super) fn exclusive_arms(a: Node<'_>, b: Node<'_>) -> bool {
    let arm_of = |stmt: Node<'_>, n: Node<'_>| -> Option<usize> {
        let mut c = stmt.walk();
        let arms: Vec<Node<'_>> = stmt
            .named_children(&mut c)
            .filter(|ch| {
                ch.kind_str() != "comment" && stmt.child_by_field_name("condition") != Some(*ch)
            })
            .collect();
        arms.iter()
            .position(|arm| arm.start_byte() <= n.start_byte() && n.end_byte() <= arm.end_byte())
    };
    let mut cur = a.parent();
    while let Some(n) = cur {
        if n.kind_str() == "if_statement"
            && n.start_byte() <= b.start_byte()
            && b.end_byte() <= n.end_byte()
        {
            if let (Some(x), Some(y)) = (arm_of(n, a), arm_of(n, b)) {
                if x != y {
                    return true;
                }
            }
        }
        cur = n.parent();
    }
    false
}
