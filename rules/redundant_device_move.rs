use crate::prelude::*;
use crate::semantic::state::{same_device, Conversion, Device};
use crate::semantic::{LoopId, Node, NodeExt, ScopeId, Site};
use crate::semantic::unwrap_parens;

declare_rule! {
    /// ## What it does
    /// Flags a device move (`.to(device)`, `.cuda()`) of a model that is already there:
    /// placed by `from_pretrained(device_map=...)`, or moved to the same device before on
    /// every path. Also flags a move of the whole model inside a training loop.
    ///
    /// ## Why is this bad?
    /// A model loaded with `device_map=` is dispatched by accelerate, with hooks that move
    /// weights between devices (and offload to CPU or disk when they don't fit). Moving
    /// it again either duplicates weights on the GPU, fails, or silently undoes the
    /// offloading that made the model fit. A move inside the loop does nothing after the
    /// first iteration at best; when it alternates devices it copies every weight twice
    /// per step.
    ///
    /// Not flagged: moving batch tensors (`x = x.to(device)`), moves to a different
    /// device than the known one, moves where the placement is uncertain (one branch
    /// only), a model moved to the device once after a plain `from_pretrained`, a move
    /// after a new part was stored into the model (`net.fc = nn.Linear(...)`, or a
    /// helper handed a module built there, `set_module(net, name, QuantConv2d(...))`):
    /// the new part is on the CPU until moved. Moving each module of a list in turn
    /// (`for m in modules: m.to(device)`) moves each one once.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, device_map="auto")
    /// model.to("cuda")  # breaks accelerate's dispatch
    /// ```
    ///
    /// ## How to fix
    /// Drop the second move. Let `device_map` place the model, or load without it and
    /// move once, before the training loop.
    ///
    /// ## Fix safety
    /// A model moved again to where it already is gets a fix that removes the move (the
    /// call is cut from its chain; a statement left doing nothing is deleted). It is
    /// safe when an earlier move put the model on that device and the model is not
    /// touched in between: the value is provably the same. It is unsafe when
    /// `device_map=` placed it (removing the move keeps that placement, which may
    /// differ from what the move asked for). A `.to(...)` that also converts the dtype,
    /// and a move inside a training loop, have no fix.
    pub static REDUNDANT_DEVICE_MOVE = Rule {
        code: "OOM402",
        name: "redundant-device-move",
        severity: Severity::Warning,
        fix: FixAvailability::Sometimes,
        check,
        prefilter: |s| s.attr(names::TO_METHOD) || s.any_attr(names::DEVICE_METHODS),
        parts: None,
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for i in model.calls.ids() {
        let Some(conv) = model.conversion(i) else {
            continue;
        };
        let Some(target) = conv.device else {
            continue;
        };
        let call = &model.calls[i];
        let recv = unwrap_parens(conv.receiver);
        let st = model.state_before(&conv);
        // Anything loaded with `device_map=` holds weights (a model, a diffusers pipeline).
        if st.device_map.is_none() && model.value(recv, call.site) != Value::Module {
            continue;
        }
        let name = model.short_text(recv);
        let help = "drop the second move: let `device_map` place the model, or load without it and move once before the loop".to_owned();
        if let Some(m) = st.device_map {
            // `model.cpu()` before `del model`: a move off the GPU that `device_map`
            // placed it on is a real move, not a repeated one.
            if target == Some(Device::Cpu) && !model.text(m).contains("cpu") {
                continue;
            }
            out.push(Diagnostic {
                range: model.range(call.node),
                message: format!(
                    "`{name}` was already placed by `device_map={}` on line {}: moving it again duplicates weights or undoes offloading",
                    model.text(m),
                    model.line_of(m)
                ),
                help,
                pattern: Pattern::DeviceCopy,
                fix: remove_fix(model, &conv, recv, None),
                related: Vec::new(),
            });
            continue;
        }
        if let (Some(known), Some(target)) = (st.device, target) {
            let same = same_device(known.value, target)
                || match (known.value, target) {
                    (Device::Var(v, _), Device::Cuda(i)) | (Device::Cuda(i), Device::Var(v, _)) => {
                        device_var_is_cuda(model, v, i, call.site)
                    }
                    _ => false,
                };
            if same {
                out.push(Diagnostic {
                    range: model.range(call.node),
                    message: format!(
                        "`{name}` was already moved to {} on line {}: this move does nothing",
                        known.value.describe(),
                        model.line_of(known.at)
                    ),
                    help,
                    pattern: Pattern::RedundantDevice,
                    fix: remove_fix(model, &conv, recv, Some(known.at)),
                    related: Vec::new(),
                });
                continue;
            }
        }
        if let Some(l) = moved_every_iteration(model, &conv) {
            out.push(Diagnostic {
                range: model.range(call.node),
                message: format!(
                    "`{name}` is moved to {} on every iteration of the loop on line {}",
                    target.map_or("a device".to_owned(), |d| d.describe()),
                    model.line_of(model.loop_(l).node)
                ),
                help: "move the model once, before the training loop".to_owned(),
                pattern: Pattern::DeviceMoveInLoop,
                fix: None,
                related: Vec::new(),
            });
        }
    }
}

/// Removing the redundant move: safe after an earlier move to the same device when the
/// model is not touched in between (the value is the same object, in the same place);
/// unsafe after `device_map=` (the move would have changed the placement). A `.to(...)`
/// that also converts the dtype is left alone.
fn remove_fix(model: &SemanticModel<'_>, conv: &Conversion<'_>, recv: Node<'_>, moved_at: Option<Node<'_>>) -> Option<Fix> {
    if conv.dtype.is_some() {
        return None;
    }
    let call = model.calls[conv.call].node;
    let edit = model.remove_call(call)?;
    let site = model.calls[conv.call].site;
    let name = model.text(unwrap_parens(recv));
    let root = name.split(['.', '[', '(']).next().unwrap_or(name);
    let safe = moved_at.is_some_and(|at| {
        let from = at.end_byte();
        model.untouched_between(root, site.scope, from, call.start_byte())
    });
    let method = call
        .field("function")
        .and_then(|f| f.field("attribute"))
        .map_or("", |a| model.text(a));
    let args = if call.field("arguments").is_some_and(|a| a.named_child_count() > 0) {
        "..."
    } else {
        ""
    };
    let title = format!("Remove the redundant `.{method}({args})`");
    Some(if safe {
        Fix::safe(title, vec![edit])
    } else {
        Fix::unsafe_(title, vec![edit])
    })
}

/// The loop in which a model is moved on every iteration, if the model outlives the
/// iteration and the loop does not also move it elsewhere (deliberate offloading) -
/// unless both moves run on every iteration: a model sent to the CPU and back at each
/// step copies all its weights twice per step, while a round trip under an interval
/// test (`if step % save_every == 0:` around a checkpoint) is the offloading idiom.
fn moved_every_iteration<'a>(model: &SemanticModel<'a>, conv: &Conversion<'a>) -> Option<LoopId> {
    let c = &model.calls[conv.call];
    let l = model.step_loop(c.site)?;
    let recv = model.conversion_root(conv);
    if !model.lives_across_iterations(recv, c.site) {
        return None;
    }
    let key = model.name_key(recv, c.site.scope)?;
    let target = conv.device??;
    for (i, other) in model.calls_in_loop(l) {
        if i == conv.call {
            continue;
        }
        let Some(r) = model.conversion(i).map(|x| model.conversion_root(&x)) else {
            continue;
        };
        if model.name_key(r, other.site.scope) != Some(key) {
            continue;
        }
        let round_trip = || {
            model.runs_every_iteration(c.node, l) && model.runs_every_iteration(other.node, l)
        };
        if let Some(Some(d)) = model.conversion(i).and_then(|x| x.device) {
            if !same_device(d, target) && !round_trip() {
                return None;
            }
        } else if model.conversion(i).is_some_and(|x| x.device.is_some()) && !round_trip() {
            return None;
        }
    }
    Some(l)
}

/// Whether a device variable (`device`) is bound to something naming CUDA.
fn device_var_is_cuda<'a>(model: &SemanticModel<'a>, var: &'a str, index: &str, site: Site) -> bool {
    let scopes = [Some(site.scope), model.function_of(site.scope), Some(ScopeId::MODULE)];
    scopes.iter().flatten().any(|&s| {
        model
            .local_bindings(s, var)
            .any(|b| b.value.is_some_and(|v| names_cuda_index(model.text(v), index)))
    })
}

/// Whether `text` (a device variable's value) names the CUDA device `index` (`""` is
/// the current device, taken as `0`): `"cuda:1" if ... else "cpu"` is another GPU than
/// `"cuda:0"`, a move between the two copies the model.
fn names_cuda_index(text: &str, index: &str) -> bool {
    let norm = |i: &str| if i.is_empty() { "0".to_owned() } else { i.to_owned() };
    let want = norm(index);
    // Only device strings (`"cuda:1"`), not `torch.cuda.is_available()`.
    let quoted = |at: usize| text[..at].ends_with(['"', '\'']);
    text.match_indices("cuda").filter(|&(at, _)| quoted(at)).any(|(at, _)| {
        let rest = &text[at + 4..];
        let i = rest
            .strip_prefix(':')
            .map(|r| r.chars().take_while(char::is_ascii_digit).collect::<String>())
            .unwrap_or_default();
        norm(&i) == want
    })
}
