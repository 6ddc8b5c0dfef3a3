use crate::prelude::*;
use crate::semantic::{Iteration, Unit};

declare_rule! {
    /// ## What it does
    /// Flags `loss.backward(retain_graph=True)` (or `torch.autograd.backward(...)` /
    /// `torch.autograd.grad(...)` with `retain_graph=True`) inside a training step when no
    /// later backward pass in the same step uses the retained graph.
    ///
    /// ## Why is this bad?
    /// `retain_graph=True` keeps every tensor the graph saved for the backward pass (the
    /// activations of the forward) after the pass. When nothing backpropagates through
    /// the graph again, those activations stay alive until the name holding the loss is
    /// overwritten in the next step, after that step's forward has built its own graph:
    /// the peak holds two steps' activations instead of one. Kept anywhere longer (a
    /// list of losses, an attribute), every step's graph stays.
    ///
    /// A later pass counts only when its loss reads part of the retained graph: a
    /// critic loss retained before an actor loss computed from a separate forward is
    /// still the last pass over its graph. Outside a step loop (a method called per
    /// input, as a saliency method is), the last pass of a function is flagged when the
    /// function keeps a value of that graph on `self`, so the graph outlives the call.
    ///
    /// Not flagged: two or more passes over a shared graph in one step (GAN generator
    /// and discriminator losses, several losses over one forward, a policy and a value
    /// head), `create_graph=True` (a gradient penalty or another higher-order gradient
    /// that a later pass backpropagates), passes repeated in an inner loop of the step,
    /// `retain_graph=False` or a variable, and code outside step loops and hooks.
    ///
    /// ## Example
    /// ```python
    /// for x, y in loader:
    ///     optimizer.zero_grad()
    ///     loss = criterion(model(x), y)
    ///     loss.backward(retain_graph=True)  # nothing backpropagates through it again
    ///     optimizer.step()
    /// ```
    ///
    /// ## How to fix
    /// Drop the argument: the graph is freed as soon as the pass is done.
    /// ```python
    ///     loss.backward()
    /// ```
    /// When the graph really is needed twice, pass `retain_graph=True` only to the passes
    /// before the last one.
    pub static RETAIN_GRAPH_IN_LOOP = Rule {
        code: "OOM203",
        name: "retain-graph-in-loop",
        severity: Severity::Error,
        fix: FixAvailability::None,
        check,
        prefilter: |s| s.word("retain_graph") && s.per_step_context(),
        parts: Some(|s| s.word("retain_graph") && (s.for_loop || s.per_step_context())),
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (id, call) in model.calls.iter_enumerated() {
        let Some(pass) = model.graph_pass(id) else {
            continue;
        };
        if !model.retains_graph(&pass) || pass.create_graph {
            continue;
        }
        let unit = match model.iteration(call.site) {
            Some(Iteration::Loop(l)) => Some(Unit::Loop(l)),
            Some(Iteration::Hook) => match model.function_of(call.site.scope) {
                Some(f) => Some(Unit::Hook(f)),
                None => continue,
            },
            // A helper called from a loop, or code outside steps: its caller may run
            // the next pass, unless the graph is kept on the instance that no pass
            // reads (then it outlives every call).
            Some(Iteration::Called) | None => None,
        };
        let kept_on = match unit {
            Some(unit) if model.pass_follows(id, unit) => continue,
            Some(_) => None,
            None => {
                if call.site.loop_.is_some() || model.pass_later_in_function(id) {
                    continue;
                }
                match model.retained_graph_kept_on_self(id) {
                    Some(attr) => Some(attr),
                    None => continue,
                }
            }
        };
        let arg = pass.retain_graph.expect("retains");
        let message = match kept_on {
            None => format!(
                "`retain_graph=True` keeps this step's graph and activations alive after `{}`, and no later backward in the step uses them",
                model.text(call.function)
            ),
            Some(attr) => format!(
                "`retain_graph=True` keeps this graph and its activations alive after `{}`, and `{attr}` holds part of it after the call returns",
                model.text(call.function)
            ),
        };
        out.push(Diagnostic {
            range: model.range(call.node),
            message,
            help: format!(
                "drop `retain_graph=True` (line {}): the graph is freed when the pass is done",
                model.line_of(arg)
            ),
            pattern: Pattern::RetainGraph,
            fix: None,
            related: Vec::new(),
        });
    }
}
