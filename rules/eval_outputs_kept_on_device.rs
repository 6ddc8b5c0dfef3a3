use crate::prelude::*;
use crate::semantic::{unwrap_parens, AssignOp, Iteration, Node, NodeExt, Site, Unit};

declare_rule! {
    /// ## What it does
    /// Flags model outputs or predictions appended, inside an evaluation loop over a
    /// loader (under `no_grad` or not), to a list that lives across iterations while
    /// they are still on the accelerator (no `.cpu()`, `.numpy()`, `.tolist()` or
    /// `.item()` on the way in), when the list is concatenated after the loop or handed
    /// whole to a helper there, in a file that runs on CUDA (or in a project where some
    /// file does: a trainer whose `self.device` a base class in another file picks).
    ///
    /// `extend` counts like `append` (a detector's per-image boxes). A tuple of fields
    /// per item (`stats.append((correct, conf, cls))`) counts when a field is on the
    /// device, and fields concatenated after the loop (`[torch.cat(x) for x in
    /// zip(*stats)]`), or after a loop around it (a per-image loop inside the loop over
    /// batches), count as a concatenation. A helper handed the
    /// whole list after the loop (a metric over every batch's detections) held every
    /// batch until then, as a concatenation does. A loop over an array in batch-sized
    /// strides (`range(0, len(images), batch_size)`) is a loop over the evaluation set,
    /// and so is a loop over a progress bar made over the loader (`bar = tqdm(loader)`).
    /// Any other loop over strides or chunks (`range(0, n, step)`, `x.split(size)`)
    /// counts when the concatenation goes to the host after it (`.tolist()`, `.cpu()`,
    /// a saver): a batch decoded in slices and then used on the device is not flagged.
    ///
    /// ## Why is this bad?
    /// Every batch's outputs stay in device memory until the loop ends: memory grows with
    /// the size of the evaluation set, not the batch. Logits of a language model over a
    /// large vocabulary take gigabytes within a few hundred batches, which is why the
    /// Hugging Face `Trainer` has `eval_accumulation_steps`.
    ///
    /// A running tensor grown by concatenation (`y_pred = torch.cat([y_pred,
    /// model(x)])`) keeps every batch the same way.
    ///
    /// Not flagged: outputs moved to the CPU per batch, reduced per batch (sums, counts,
    /// `.item()`, a list of losses), lists handed to NumPy (which cannot take CUDA tensors), lists never
    /// concatenated nor handed on, loops that train (they or their function
    /// backpropagate or step an optimizer, as a rollout collected for a loss does, or
    /// the list collected with grad on is backpropagated after the loop, by a helper
    /// it is handed to),
    /// models never placed on a device (nor their inputs), and files that never use CUDA.
    ///
    /// ## Example
    /// ```python
    /// preds = []
    /// with torch.no_grad():
    ///     for x, _ in test_loader:
    ///         preds.append(model(x.cuda()).argmax(-1))  # stays on the GPU
    /// preds = torch.cat(preds)
    /// ```
    ///
    /// ## How to fix
    /// Move each batch to the CPU as it comes (or reduce it per batch):
    /// ```python
    ///         preds.append(model(x.cuda()).argmax(-1).cpu())
    /// ```
    pub static EVAL_OUTPUTS_KEPT_ON_DEVICE = Rule {
        code: "OOM204",
        name: "eval-outputs-kept-on-device",
        severity: Severity::Warning,
        fix: FixAvailability::None,
        check,
        prefilter: |s| {
            (s.for_loop || s.while_loop)
                && ["cat", "stack", "vstack", "hstack", "concat", "concatenate"]
                    .iter()
                    .any(|w| s.word(w))
        },
        parts: None,
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut cuda = None;
    for call in &model.calls {
        let Some((container, method)) = model.method_call(call) else {
            continue;
        };
        if !matches!(method, "append" | "extend") {
            continue;
        }
        let Some(value) = model.positional_args(call.node).next() else {
            continue;
        };
        let at = (call.node, call.site);
        check_growth(model, container, value, at, Growth::Collected, &mut cuda, out);
    }
    // `preds += [out]`, `boxes += net.postprocess(locs)`: list concatenation in place
    // grows the list like `extend`.
    for a in &model.assignments {
        if a.op != AssignOp::Augmented("+=") || unwrap_parens(a.target).kind_str() != "identifier" {
            continue;
        }
        let value = unwrap_parens(a.value);
        let grown = if matches!(value.kind_str(), "list" | "tuple") {
            value.named_child(0)
        } else if model.is_list_binding(a.target, a.site) {
            Some(value)
        } else {
            None
        };
        if let Some(v) = grown {
            check_growth(model, a.target, v, (a.node, a.site), Growth::Collected, &mut cuda, out);
        }
    }
    // `y_pred = torch.cat([y_pred, model(x)])`: the running tensor itself grows by a
    // batch each iteration (no list, no concatenation after the loop).
    for a in &model.assignments {
        if a.op != AssignOp::Plain || unwrap_parens(a.target).kind_str() != "identifier" {
            continue;
        }
        if let Some((previous, grown)) = model.self_concatenation(a.target, a.value) {
            let at = (a.node, a.site);
            check_growth(model, previous, grown, at, Growth::Concatenated, &mut cuda, out);
        }
    }
}

/// How the loop keeps each batch: in a container concatenated after the loop, or by
/// concatenating onto the running value every iteration.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Growth {
    Collected,
    Concatenated,
}

fn check_growth(
    model: &SemanticModel<'_>,
    container: Node<'_>,
    value: Node<'_>,
    (at, site): (Node<'_>, Site),
    growth: Growth,
    cuda: &mut Option<bool>,
    out: &mut Vec<Diagnostic>,
) {
    // The step loop around the store; failing that, the innermost loop outside model
    // code that evaluates in chunks (`for chunk in x.split(bs)`, `range(0, n, bs)`)
    // when the concatenation goes to the host after it: moving each chunk as it comes
    // would have kept the device free.
    let l = match (model.iteration(site), site.loop_) {
        (Some(Iteration::Loop(l)), _) => l,
        (_, Some(l))
            if model.walks_in_chunks(l)
                && !model.in_model_code(l)
                && model.concatenation_leaves_device(unwrap_parens(container), l) =>
        {
            l
        }
        _ => return,
    };
    // An evaluation loop: it neither backpropagates nor steps an optimizer.
    let unit_trains = |l| {
        model
            .calls_in_unit(Unit::Loop(l))
            .iter()
            .any(|&c| model.backward_at(c).is_some() || model.optimizer_step(c).is_some())
    };
    let mut trains = unit_trains(l);
    let mut outer = model.loop_(l).parent;
    while let Some(p) = outer {
        trains |= unit_trains(p);
        outer = model.loop_(p).parent;
    }
    // Nor does an enclosing loop or the function around it: a rollout collected for
    // the backward pass after it (bounded by its steps) is not an evaluation.
    // Chunks collected afresh for each item of an enclosing loop (a query's top-k
    // candidates scored in strides) and used on the device after: one item's worth.
    if model.walks_in_chunks(l) && !model.concatenation_leaves_device(unwrap_parens(container), l) {
        let mut enclosing = model.loop_(l).parent;
        while let Some(p) = enclosing {
            if !model.lives_across(unwrap_parens(container), site, Some(p)) {
                return;
            }
            enclosing = model.loop_(p).parent;
        }
    }
    let f = model.function_of(site.scope);
    let feeds_training = model
        .backwards
        .iter()
        .any(|b| model.function_of(model.calls[b.call].site.scope) == f);
    if trains || feeds_training {
        return;
    }
    let container = unwrap_parens(container);
    // A rollout whose log-probs a loss backpropagates after the loop (in this function
    // or a helper handed them) is training; features collected under `no_grad` for a
    // probe trained on them are data, not a graph.
    if model.grad_enabled(site) && model.flows_into_backward(container, site) {
        return;
    }
    // `losses.append(model(x, y).float())`: a model called with its targets returns
    // its loss, one number per batch, whatever expression computes it.
    if model.text(container).to_ascii_lowercase().contains("loss") {
        return;
    }
    // Concatenated after this loop, or after a loop around it (a detector's per-image
    // loop inside the loop over batches).
    let concatenated = || {
        let mut cur = Some(l);
        while let Some(x) = cur {
            if model.concatenated_after(container, x) {
                return true;
            }
            cur = model.loop_(x).parent;
        }
        false
    };
    if !model.lives_across(container, site, Some(l)) || growth == Growth::Collected && !concatenated() {
        return;
    }
    // A tuple of fields per item (`stats.append((correct, conf, cls))`): any field on
    // the device is kept there.
    let v = unwrap_parens(value);
    let on_device = if matches!(v.kind_str(), "tuple" | "list") {
        let mut c = v.walk();
        let any = v.named_children(&mut c).any(|x| model.device_output(x, site));
        any
    } else {
        model.device_output(value, site)
    };
    if !on_device {
        return;
    }
    // The file runs on CUDA, or another file of its project does (a base class that
    // picks the trainer's `self.device`).
    if !*cuda.get_or_insert_with(|| model.uses_cuda() || model.project().is_some_and(|p| p.project_gpu())) {
        return;
    }
    out.push(Diagnostic {
        range: model.range(at),
        message: match growth {
            Growth::Collected => format!(
                "`{}` collects every batch's model outputs on the device until the loop ends: memory grows with the evaluation set",
                model.text(container)
            ),
            Growth::Concatenated => format!(
                "`{}` grows by every batch's model outputs on the device, concatenated each iteration: memory grows with the evaluation set",
                model.text(container)
            ),
        },
        help: "move each batch off the device as you collect it (`.cpu()`), or reduce it per batch".to_owned(),
        pattern: Pattern::EvalOutputsOnDevice,
        fix: None,
        related: Vec::new(),
    });
}
