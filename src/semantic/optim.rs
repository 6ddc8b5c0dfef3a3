//! The optimizer loop: backward passes, optimizer steps and gradient resets.

use tree_sitter::Node;

use super::*;

/// What a call or assignment does to accumulated gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradReset<'a> {
    /// `opt.zero_grad()`: the gradients of that optimizer's parameters.
    Optimizer(Node<'a>),
    /// `model.zero_grad()`, `p.grad = None`, `p.grad.zero_()`: we can't tell whose, so
    /// every optimizer counts as reset.
    All,
}

impl<'a> SemanticModel<'a> {
    /// The backward pass a call performs, if it is one.
    pub fn backward_at(&self, call: u32) -> Option<&Backward<'a>> {
        let i = self.backwards.partition_point(|b| b.call < call);
        self.backwards.get(i).filter(|b| b.call == call)
    }

    /// The optimizer a call steps: `opt.step()`, `scaler.step(opt)`.
    pub fn optimizer_step(&self, call: u32) -> Option<Node<'a>> {
        let c = &self.calls[call as usize];
        let (recv, method) = self.method_call(c)?;
        if method != "step" {
            return None;
        }
        if self.is_optimizer(recv, c.site) {
            return Some(recv);
        }
        // `scaler.step(optimizer)` (AMP), `accelerator`-style wrappers taking the optimizer.
        let arg = self.positional_args(c.node).next()?;
        self.is_optimizer(arg, c.site).then_some(arg)
    }

    /// Whether (and whose) gradients a call resets.
    pub fn grad_reset_call(&self, call: u32) -> Option<GradReset<'a>> {
        let c = &self.calls[call as usize];
        let (recv, method) = self.method_call(c)?;
        match method {
            "zero_grad" => Some(if self.is_optimizer(recv, c.site) {
                GradReset::Optimizer(recv)
            } else {
                GradReset::All
            }),
            // `p.grad.zero_()`, `p.grad.detach_()`, `p.grad.data.zero_()`
            "zero_" | "detach_" | "fill_" | "mul_" if self.mentions_grad(recv) => {
                Some(GradReset::All)
            }
            _ => None,
        }
    }

    /// `p.grad = None` (or `= torch.zeros_like(...)`).
    pub fn grad_reset_assignment(&self, a: &Assignment<'a>) -> Option<GradReset<'a>> {
        let t = unwrap_parens(a.target);
        (t.kind() == "attribute" && t.field("attribute").map(|x| self.text(x)) == Some("grad"))
            .then_some(GradReset::All)
    }

    fn mentions_grad(&self, mut n: Node<'_>) -> bool {
        loop {
            if n.kind() != "attribute" {
                return false;
            }
            if n.field("attribute").map(|x| self.text(x)) == Some("grad") {
                return true;
            }
            match n.field("object") {
                Some(o) => n = o,
                None => return false,
            }
        }
    }

    /// Whether a call asks for gradients: a backward pass, `torch.autograd.grad`, or
    /// `requires_grad_()`.
    pub fn asks_for_grad(&self, call: u32) -> bool {
        if self.backward_at(call).is_some() {
            return true;
        }
        let c = &self.calls[call as usize];
        if self
            .method_call(c)
            .is_some_and(|(_, m)| m == "requires_grad_")
        {
            return true;
        }
        self.qualified(c.function)
            .is_some_and(|q| q.is_torch() && q.has_module("autograd") && q.last() == Some("grad"))
    }

    /// Whether a function asks for gradients itself: it backpropagates, calls
    /// `torch.autograd.grad`, or turns `requires_grad` on (saliency, adversarial
    /// examples, test-time training).
    pub fn function_wants_grad(&self, f: Option<ScopeId>) -> bool {
        let calls: Box<dyn Iterator<Item = u32>> = match f {
            Some(f) => Box::new(self.calls_by_function[f as usize].iter().copied()),
            None => Box::new((0..self.calls.len() as u32).filter(|&i| {
                self.function_of(self.calls[i as usize].site.scope)
                    .is_none()
            })),
        };
        for i in calls {
            if self.asks_for_grad(i) {
                return true;
            }
        }
        self.grad_attribute_assignments().iter().any(|&i| {
            let a = &self.assignments[i as usize];
            self.function_of(a.site.scope) == f
                && unwrap_parens(a.target)
                    .field("attribute")
                    .is_some_and(|x| self.text(x) == "requires_grad")
                && self.text(a.value) == "True"
        })
    }

    /// Whether a call runs a model forward: `model(x)`, `self.net(x)`, `model.forward(x)`.
    pub fn is_model_forward(&self, call: u32) -> bool {
        let c = &self.calls[call as usize];
        if let Some((recv, m)) = self.method_call(c) {
            if matches!(m, "forward" | "__call__") {
                return self.value(recv, c.site) == Value::Module;
            }
            if matches!(m, "generate") {
                return false;
            }
        }
        self.value(c.function, c.site) == Value::Module
    }

    /// All calls of the function `f` (or of module-level code, for `None`).
    pub fn calls_of_function(&self, f: Option<ScopeId>) -> Vec<u32> {
        match f {
            Some(f) => self.calls_by_function[f as usize].clone(),
            None => (0..self.calls.len() as u32)
                .filter(|&i| {
                    self.function_of(self.calls[i as usize].site.scope)
                        .is_none()
                })
                .collect(),
        }
    }
}
