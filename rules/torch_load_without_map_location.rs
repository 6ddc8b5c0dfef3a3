use crate::prelude::*;
use crate::semantic::{MapLocation, Node, NodeExt};

declare_rule! {
    /// ## What it does
    /// Flags `torch.load(path)` without `map_location` whose result goes into a
    /// `load_state_dict(...)` or another loader of state dicts
    /// (`set_peft_model_state_dict`): directly, through the name it is bound to,
    /// through a helper that returns it, or handed to a function of the file or the
    /// project that loads that argument so (`load_checkpoint(torch.load(path), model,
    /// optimizer)` with `model.load_state_dict(checkpoint["state_dict"])` inside). The checkpoint must come from GPU code: the
    /// file runs on CUDA devices (it calls `.cuda()`, `torch.cuda.*`, names a `"cuda"`
    /// device in a string or passes `device_map=`), or another file of its project does
    /// and the project saves checkpoints (an inference script or a helper module that
    /// loads what the training script wrote).
    ///
    /// ## Why is this bad?
    /// `torch.load` puts every tensor back on the device it was saved from. A checkpoint
    /// saved from a GPU model comes back on `cuda:0` in full, beside the model that
    /// `load_state_dict` then copies it into: the device holds the weights twice (and the
    /// optimizer state too, for a training checkpoint). In a multi-GPU job every rank
    /// loads onto `cuda:0`, so that one device holds a copy per rank and runs out of
    /// memory first; on a machine without that device the load fails.
    ///
    /// Not flagged: `map_location` given (by keyword, as the second argument, or in
    /// `**kwargs`; a splatted dict that some branch binds to a literal without the key,
    /// `kwargs = {}` on the GPU path, gives none there), projects that never use CUDA, loads of whole pickled objects (a
    /// model, a dataset, RNG states) that no `load_state_dict` receives, files known by
    /// name to hold no tensors (an index, a vocabulary, a config, metadata), scheduler
    /// and scaler states, a file the same class wrote from the CPU
    /// (`torch.save(net.cpu().state_dict(), path)`, the net moved back to the GPU after),
    /// weights in a project whose every save of weights moves them to the CPU first (a
    /// save helper with `state_dict[k] = v.cpu()` for each entry; a load that restores an
    /// optimizer too is still flagged), and, where only the project runs on CUDA: weights loaded in a class's `__init__`
    /// (a model zoo's backbone), tests, TPU code, and a file the same code saved from
    /// modules it never placed on a device.
    ///
    /// ## Example
    /// ```python
    /// model = Net().cuda()
    /// model.load_state_dict(torch.load("checkpoint.pt"))  # lands on the saving device
    /// ```
    ///
    /// ## How to fix
    /// Load onto the CPU (`load_state_dict` copies into the model wherever it is), or
    /// onto this rank's device:
    /// ```python
    /// model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu"))
    /// state = torch.load(path, map_location=f"cuda:{local_rank}")
    /// ```
    pub static TORCH_LOAD_WITHOUT_MAP_LOCATION = Rule {
        code: "OOM501",
        name: "torch-load-without-map-location",
        severity: Severity::Warning,
        fix: FixAvailability::None,
        check,
        // CUDA use may show only in strings (`"cuda:0"`), which the scan skips. The
        // `load_state_dict` may stand in a helper of another file
        // (`load_checkpoint(torch.load(path), model)`), so `torch.load` is enough.
        prefilter: |s| s.word("load") && (s.word("load_state_dict") || s.attr("load") && s.word("torch")),
        parts: Some(|s| s.word("load")),
    };
}

/// Words in a file name or variable that say the file holds no tensors.
const NON_TENSOR_FILES: &[&str] = &[
    "index", "vocab", "args", "config", "json", "meta", "hparams", "stats", "tokenizer",
];

/// Whether the file argument names a file without tensors: its strings and the names
/// it ends in (`"vocab.pt"`, `args.config_path`), not the objects they are read from
/// (`args.ckpt`, `os.path.join(args.work_dir, "model.pt")` name model files).
fn names_non_tensor_file(model: &SemanticModel<'_>, file: Node<'_>) -> bool {
    let mut stack = vec![file];
    let mut budget = 256;
    while let Some(n) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        let words = match n.kind_str() {
            "string_content" | "identifier" => Some(model.text(n)),
            "attribute" => {
                // The attribute's own name; its object is where it is read from.
                n.child_by_field_name("attribute").map(|a| model.text(a))
            }
            _ => None,
        };
        if let Some(w) = words {
            let w = w.to_ascii_lowercase();
            if NON_TENSOR_FILES.iter().any(|x| w.contains(x)) {
                return true;
            }
            continue;
        }
        if n.kind_str() == "call" {
            // `os.path.join(...)`: the function names no file.
            if let Some(a) = n.child_by_field_name("arguments") {
                stack.push(a);
            }
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    false
}

fn check(model: &SemanticModel<'_>, cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut uses_cuda = None;
    for (id, call) in model.calls.iter_enumerated() {
        let Some(load) = model.torch_load(id) else {
            continue;
        };
        if load.map_location != MapLocation::Missing {
            continue;
        }
        if load.file.is_some_and(|f| names_non_tensor_file(model, f)) {
            continue;
        }
        // Whole pickled objects (a model, a dataset, RNG states) are not a second copy of
        // weights beside a model: only what goes into a `load_state_dict` is.
        if !model.load_feeds_weights(&load) {
            continue;
        }
        let file_cuda = *uses_cuda.get_or_insert_with(|| model.runs_on_cuda());
        // A test writes the checkpoint it loads in the same run, on the device the test
        // itself picks: what the rest of the project does says nothing about it.
        if !file_cuda && cx.is_test_file {
            continue;
        }
        if !model.load_may_be_gpu(&load, file_cuda) {
            continue;
        }
        out.push(Diagnostic {
            range: model.range(call.node),
            message: "`torch.load` without `map_location` puts every tensor back on the device it was saved from: a GPU checkpoint lands on `cuda:0` beside the model, once per rank".to_owned(),
            help: "pass `map_location=\"cpu\"` (or this rank's device); `load_state_dict` copies into the model wherever it is".to_owned(),
            pattern: Pattern::CheckpointOnDevice,
            fix: None,
            related: Vec::new(),
        });
    }
}
