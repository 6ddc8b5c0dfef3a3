//! The optimizer loop: backward passes, optimizer steps and gradient resets.

use tree_sitter::Node;

use super::*;

impl<'a> SemanticModel<'a> {
    /// The backward pass a call performs, if it is one.
    pub fn backward_at(&self, call: CallId) -> Option<&Backward<'a>> {
        let i = self.backwards.partition_point(|b| b.call < call);
        self.backwards.get(i).filter(|b| b.call == call)
    }

    /// Whether a call asks for gradients where it stands: a backward pass,
    /// `torch.autograd.grad(...)`, or `x.requires_grad_()`.
    pub fn asks_for_grad_directly(&self, call: CallId) -> bool {
        if self.backward_at(call).is_some() {
            return true;
        }
        let c = &self.calls[call];
        if self
            .method_call(c)
            .is_some_and(|(_, m)| m == "requires_grad_")
        {
            return true;
        }
        self.qualified(c.function)
            .is_some_and(|q| q.is_torch() && q.has_module("autograd") && q.last() == Some("grad"))
    }

    /// Whether a call asks for gradients: [`Self::asks_for_grad_directly`], or a call of
    /// a same-file function that does ([`Self::asks_for_grad_fn`]: `self.optimize(loss)`,
    /// `backward(total_loss, scaler)`).
    pub fn asks_for_grad(&self, call: CallId) -> bool {
        self.asks_for_grad_directly(call)
            || self.callee(call).is_some_and(|g| self.asks_for_grad_fn(g))
    }

    /// Whether function `f`'s own body (not the functions nested in it) asks for
    /// gradients, directly or through the same-file functions it calls, at any depth.
    /// Computed once per file: each function asking directly, then its callers, back
    /// along the call graph.
    pub fn asks_for_grad_fn(&self, f: ScopeId) -> bool {
        self.grad_functions().contains(&f)
    }

    fn grad_functions(&self) -> &FxHashSet<ScopeId> {
        self.memo.grad_functions.get_or_init(|| {
            let mut set = FxHashSet::default();
            let mut work: Vec<ScopeId> = self
                .calls
                .ids()
                .filter(|&i| self.asks_for_grad_directly(i))
                .filter_map(|i| self.function_of(self.calls[i].site.scope))
                .collect();
            while let Some(g) = work.pop() {
                if !set.insert(g) {
                    continue;
                }
                work.extend(
                    self.callers(g)
                        .iter()
                        .filter_map(|&i| self.function_of(self.calls[i].site.scope))
                        .filter(|h| !set.contains(h)),
                );
            }
            set
        })
    }

    /// Whether one of a class's methods asks for gradients ([`Self::asks_for_grad_fn`]):
    /// an agent whose `learn` backpropagates, a GAN wrapper's `optimize_parameters`. Its
    /// other methods run between training steps (an agent's `choose_action`).
    pub fn class_trains(&self, class: ScopeId) -> bool {
        self.grad_functions()
            .iter()
            .any(|&g| self.scope(g).class == Some(class))
    }

    /// The optimizer a call steps: `opt.step()`, `scaler.step(opt)`.
    pub fn optimizer_step(&self, call: CallId) -> Option<Node<'a>> {
        let c = &self.calls[call];
        let (recv, method) = self.method_call(c)?;
        if method != names::STEP_METHOD {
            return None;
        }
        if self.is_optimizer(recv, c.site) {
            return Some(recv);
        }
        // `scaler.step(optimizer)` (AMP), `accelerator`-style wrappers taking the optimizer.
        let arg = self.positional_args(c.node).next()?;
        self.is_optimizer(arg, c.site).then_some(arg)
    }

    /// Whether (and whose) gradients a call resets: `opt.zero_grad()` those of the
    /// optimizer's parameters; `model.zero_grad()`, `p.grad.zero_()`,
    /// `p.grad.data.zero_()` we can't tell whose, so every optimizer counts as reset.
    /// A call of a project method that writes `.grad` itself (a meta-learner's
    /// `point_grad_to`, zeroing then setting each parameter's gradient) resets too.
    pub fn grad_reset(&self, call: CallId) -> Option<GradReset<'a>> {
        self.grad_reset_here(call).or_else(|| {
            let c = &self.calls[call];
            let (recv, method) = self.method_call(c)?;
            // Only a method of a model of the project: a name-keyed fact must not turn
            // `optimizer.step()` or `scaler.step(...)` into a reset because some
            // project wrapper's `step` zeroes gradients.
            if names::is_module_api_method(method)
                || method == names::STEP_METHOD
                || self.is_optimizer(recv, c.site)
            {
                return None;
            }
            self.project()
                .is_some_and(|p| p.resetting_method(method))
                .then_some(GradReset::All)
        })
    }

    /// [`Self::grad_reset`] from the call's own text alone, without the project's
    /// methods: what a file's summary says of its functions.
    pub fn grad_reset_here(&self, call: CallId) -> Option<GradReset<'a>> {
        let c = &self.calls[call];
        let (recv, method) = self.method_call(c)?;
        match method {
            "zero_grad" => Some(if self.is_optimizer(recv, c.site) {
                GradReset::Optimizer(recv)
            } else {
                GradReset::All
            }),
            "zero_" | "detach_" | "fill_" | "mul_" if self.mentions_grad(recv) => {
                Some(GradReset::All)
            }
            _ => None,
        }
    }

    /// Whether an assignment stores into a `.grad` attribute (`p.grad = None`,
    /// `p.grad = torch.zeros_like(p)`): it overwrites what backward passes summed.
    pub fn resets_grad_by_store(&self, a: AssignId) -> bool {
        unwrap_parens(self.assignments[a].target)
            .field("attribute")
            .is_some_and(|x| self.text(x) == "grad")
    }

    fn mentions_grad(&self, mut n: Node<'_>) -> bool {
        while n.kind_str() == "attribute" {
            if n.field("attribute").map(|x| self.text(x)) == Some("grad") {
                return true;
            }
            match n.field("object") {
                Some(o) => n = o,
                None => return false,
            }
        }
        false
    }

    /// All calls of the function `f` (or of module-level code, for `None`).
    pub fn calls_of_function(&self, f: Option<ScopeId>) -> Vec<CallId> {
        match f {
            Some(f) => self.calls_by_function[f].clone(),
            None => self
                .calls
                .iter_enumerated()
                .filter(|(_, c)| self.function_of(c.site.scope).is_none())
                .map(|(i, _)| i)
                .collect(),
        }
    }
}

/// Whose gradients a call resets (see [`SemanticModel::grad_reset`]).
#[derive(Clone, Copy, Debug)]
pub enum GradReset<'a> {
    /// `opt.zero_grad()`: the gradients of that optimizer's parameters.
    Optimizer(Node<'a>),
    /// Some reset we can't attribute to one optimizer: every optimizer counts as reset.
    All,
}

impl<'a> SemanticModel<'a> {
    /// Assignments to a `.grad` or `.requires_grad` attribute (`p.grad = None`), found
    /// once: the few stores the optimizer-loop facts ask about, so no query scans every
    /// assignment of the file per loop.
    pub fn grad_attribute_assignments(&self) -> &[AssignId] {
        self.memo.grad_stores.get_or_init(|| {
            self.assignments
                .ids()
                .filter(|&i| {
                    unwrap_parens(self.assignments[i].target)
                        .field("attribute")
                        .is_some_and(|x| matches!(self.text(x), "grad" | "requires_grad"))
                })
                .collect()
        })
    }

    /// Whether the call's receiver or callee expression is an optimizer by provenance or name.
    pub fn is_optimizer(&self, expr: Node<'_>, site: Site) -> bool {
        self.value(expr, site) == Value::Optimizer
    }
}

impl<'a> SemanticModel<'a> {
    /// The modules whose parameters the optimizer `opt` (at `site`) holds, as written:
    /// `G` and `D` in `Adam(itertools.chain(G.parameters(), D.parameters()))`. `None`
    /// when its parameters are not all `X.parameters()` of named modules.
    pub fn optimizer_owners(&self, opt: Node<'_>, site: Site) -> Option<Vec<&'a str>> {
        let b = self.binding_of(opt, site)?;
        let value = unwrap_parens(b.value?);
        if value.kind_str() != "call" {
            return None;
        }
        let params = self
            .positional_args(value)
            .next()
            .or_else(|| self.keyword_arg(value, "params"))?;
        let mut owners = Vec::new();
        let mut stack = vec![params];
        while let Some(n) = stack.pop() {
            if n.kind_str() == "call" {
                if let Some(f) = n.field("function") {
                    if f.kind_str() == "attribute"
                        && matches!(
                            f.field("attribute").map(|a| self.text(a)),
                            Some("parameters" | "named_parameters")
                        )
                    {
                        owners.push(self.text(f.field("object")?));
                        continue;
                    }
                }
            }
            // A tensor or list named directly: not a module's parameters.
            if n.kind_str() == "identifier"
                && n.parent().is_some_and(|p| p.kind_str() != "attribute")
            {
                let callee = n
                    .parent()
                    .and_then(|p| p.field("function"))
                    .is_some_and(|f| f.id() == n.id());
                if !callee {
                    return None;
                }
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
        owners.sort_unstable();
        owners.dedup();
        (!owners.is_empty()).then_some(owners)
    }
}
