use crate::prelude::*;
use crate::semantic::{CallId, GradReset, Node, Site, Unit};

declare_rule! {
    /// ## What it does
    /// Flags a training loop (or a per-step hook such as a Lightning `training_step` with
    /// manual optimization) that runs `backward()` and steps an optimizer every
    /// iteration but never resets the gradients: no `optimizer.zero_grad()`,
    /// `model.zero_grad()` or `p.grad = None` anywhere in the loop body or in the
    /// same-file functions it calls.
    ///
    /// ## Why is this bad?
    /// `backward()` adds to `.grad`; it never overwrites it. Without a reset every step
    /// applies the sum of all gradients so far, so updates grow without bound, losses
    /// diverge and, with AMP, the scaler keeps skipping steps on overflow. A
    /// `zero_grad()` placed only before the loop is the classic form of this bug. Keeping
    /// gradients as `None` between steps (`zero_grad(set_to_none=True)`, the default
    /// since PyTorch 2.0) also frees their memory during the forward pass, which lowers
    /// the peak.
    ///
    /// Not flagged: gradient accumulation (`zero_grad()` inside the
    /// `if step % accum == 0:` block), a reset in a helper called every iteration, loops
    /// without an optimizer step (saliency maps, gradient probes), and an outer loop
    /// whose reset covers an inner accumulation loop.
    ///
    /// ## Example
    /// ```python
    /// optimizer.zero_grad()
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()      # gradients pile up across steps
    ///     optimizer.step()
    /// ```
    ///
    /// ## How to fix
    /// Reset once per optimizer step:
    /// ```python
    /// for x, y in loader:
    ///     optimizer.zero_grad(set_to_none=True)
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    /// ```
    ///
    /// ## Fix safety
    /// The fix inserts `OPT.zero_grad(set_to_none=True)` just before the backward pass,
    /// for the optimizer the finding names. It is unsafe: code that accumulates
    /// gradients over several backward passes on purpose (a sum of micro-batches, a
    /// loss computed in pieces) would then step on the last piece only. No fix is
    /// offered when the backward pass shares its line with other code.
    pub static MISSING_ZERO_GRAD = Rule {
        code: "OOM101",
        name: "missing-zero-grad",
        severity: Severity::Error,
        fix: FixAvailability::Sometimes,
        check,
        prefilter: |s| s.backward_pass() && s.attr(names::STEP_METHOD),
        parts: None,
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    // Inner loops come after their outer loops in `units()`: visit them first so a bug is
    // reported once, at the innermost loop that has it.
    let mut units: Vec<Unit> = model.units().collect();
    units.reverse();
    let mut reported: Vec<CallId> = Vec::new();
    for unit in units {
        let calls = model.calls_in_unit(unit);
        let backwards: Vec<CallId> = calls
            .iter()
            .copied()
            // Distributed autograd accumulates into the iteration's own context.
            .filter(|&c| model.backward_at(c).is_some_and(|b| !b.distributed))
            .collect();
        if backwards.is_empty() {
            continue;
        }
        // An optimizer created afresh each iteration (over tensors also created in the
        // iteration) has nothing to accumulate: leave it alone.
        let stepped_at: Vec<(Node<'_>, Site)> = calls
            .iter()
            .filter_map(|&c| {
                let opt = model.optimizer_step(c)?;
                let site = model.calls[c].site;
                let fresh = match (unit, model.binding_of(opt, site)) {
                    (Unit::Loop(l), Some(b)) => model.loop_within(b.site.loop_, l),
                    _ => false,
                };
                (!fresh).then_some((opt, site))
            })
            .collect();
        let steps: Vec<&str> = stepped_at.iter().map(|&(o, _)| model.text(o)).collect();
        if steps.is_empty() {
            continue;
        }
        let mut reset_all = grad_reset_assignment_in(model, unit);
        let mut reset: Vec<&str> = Vec::new();
        // The modules whose gradients the reset optimizers clear.
        let mut reset_owners: Vec<&str> = Vec::new();
        for &c in &calls {
            match model.grad_reset(c) {
                Some(GradReset::All) => reset_all = true,
                Some(GradReset::Optimizer(o)) => {
                    reset.push(model.text(o));
                    if let Some(owners) = model.optimizer_owners(o, model.calls[c].site) {
                        reset_owners.extend(owners);
                    }
                }
                None => {}
            }
        }
        if reset_all {
            continue;
        }
        let mut stepped: Vec<&str> = steps.clone();
        stepped.sort_unstable();
        stepped.dedup();
        let missing: Vec<&str> = if reset.is_empty() {
            stepped
        } else if stepped.len() > 1 {
            // Two optimizers (a GAN): name the one that is never reset.
            stepped.into_iter().filter(|s| !reset.contains(s)).collect()
        } else {
            Vec::new()
        };
        // An optimizer over modules that the other optimizers' resets all cover (an
        // InfoGAN's info optimizer over G and D) steps on fresh gradients.
        let missing: Vec<&str> = missing
            .into_iter()
            .filter(|m| {
                let owners = stepped_at
                    .iter()
                    .find(|&&(o, _)| model.text(o) == *m)
                    .and_then(|&(o, site)| model.optimizer_owners(o, site));
                !owners.is_some_and(|os| os.iter().all(|o| reset_owners.contains(o)))
            })
            .collect();
        if missing.is_empty() {
            continue;
        }
        // Once per loop: an outer loop whose backward passes were already reported for
        // an inner loop adds nothing.
        if backwards.iter().all(|b| reported.contains(b)) {
            continue;
        }
        reported.extend(&backwards);
        let first = backwards
            .iter()
            .copied()
            .min_by_key(|&b| {
                // Prefer the backward written in the loop itself over one in a helper.
                let c = &model.calls[b];
                let direct = match unit {
                    Unit::Loop(l) => model.loop_within(c.site.loop_, l),
                    Unit::Hook(h) => model.function_of(c.site.scope) == Some(h),
                };
                (!direct, c.node.start_byte())
            })
            .expect("non-empty");
        let names = missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        let what = match unit {
            Unit::Loop(_) => "this loop",
            Unit::Hook(h) => {
                if model.scope(h).name == "training_step" {
                    "every training_step"
                } else {
                    "every step"
                }
            }
        };
        out.push(Diagnostic {
            range: model.range(model.calls[first].node),
            message: format!(
                "gradients are never reset in {what}: {names} steps on gradients summed over every backward() so far"
            ),
            help: format!(
                "call `{}.zero_grad(set_to_none=True)` once per optimizer step",
                missing[0]
            ),
            pattern: Pattern::NoZeroGrad,
            fix: zero_grad_fix(model, model.calls[first].node, &missing),
            related: Vec::new(),
        });
    }
}

/// `opt.zero_grad(set_to_none=True)` on a line of its own before the statement of the
/// backward pass, for each optimizer never reset; unsafe: with gradient accumulation
/// over several backward passes per step, resetting before each one changes the step.
fn zero_grad_fix(model: &SemanticModel<'_>, backward: Node<'_>, missing: &[&str]) -> Option<Fix> {
    let stmt = model.statement_of(backward)?;
    let edits = missing
        .iter()
        .map(|opt| model.insert_line_before(stmt, &format!("{opt}.zero_grad(set_to_none=True)")))
        .collect::<Option<Vec<_>>>()?;
    let names = missing
        .iter()
        .map(|m| format!("`{m}.zero_grad(set_to_none=True)`"))
        .collect::<Vec<_>>()
        .join(" and ");
    // Several lines at one place are one edit, so they stay in order.
    let content: String = edits.iter().map(|e| e.content.as_str()).collect();
    let at = edits.first()?.range.start;
    Some(Fix::unsafe_(
        format!("Call {names} before the backward pass"),
        vec![Edit::insert(at, content)],
    ))
}

/// Whether `p.grad = ...` runs once per iteration of `unit`.
fn grad_reset_assignment_in<'a>(model: &SemanticModel<'a>, unit: Unit) -> bool {
    model.grad_attribute_assignments().iter().any(|&i| {
        model.resets_grad_by_store(i) && model.runs_in(model.assignments[i].site, unit)
    })
}
