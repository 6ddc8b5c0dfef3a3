//! What names say when nothing better is known: the vocabulary of PyTorch training code.
//! Provenance from bindings always wins over these; they are the fallback for
//! parameters, attributes set elsewhere, and values built by code in other files.

// The method vocabulary that the model recognises and that the prefilter looks for in
// the raw text: one list each, so teaching the model a name teaches the prefilter too.

/// Methods that run a backward pass (`loss.backward()`, `self.manual_backward(loss)`).
pub const BACKWARD_METHODS: &[&str] = &["backward", "manual_backward"];
/// Methods that run a module's forward explicitly (`model.forward(x)`).
pub const FORWARD_METHODS: &[&str] = &["forward", "__call__"];
/// The method that steps an optimizer (`opt.step()`, `scaler.step(opt)`).
pub const STEP_METHOD: &str = "step";
/// The loader of pretrained weights (`AutoModel.from_pretrained(...)`).
pub const PRETRAINED_LOADER: &str = "from_pretrained";
/// Methods that grow a container by one value (`losses.append(loss)`).
pub const GROWTH_METHODS: &[&str] = &["append", "appendleft", "extend", "insert"];
/// Logger methods that take a scalar to record (`self.log("loss", x)`,
/// `writer.add_scalar(tag, x, step)`, `wandb.log({...})`, `bar.set_postfix(loss=x)`):
/// a Python number serves them as well as a one-element tensor.
pub fn is_scalar_logger_method(method: &str) -> bool {
    matches!(
        method,
        "log"
            | "log_dict"
            | "log_metrics"
            | "add_scalar"
            | "add_scalars"
            | "set_postfix"
            | "info"
            | "debug"
            | "warning"
    )
}

/// Conversions to a dtype by method name (`.half()`), `to` aside.
pub const DTYPE_METHODS: &[&str] = &["half", "bfloat16", "float", "double"];
/// Moves to a device by method name (`.cuda()`), `to` aside.
pub const DEVICE_METHODS: &[&str] = &["cuda", "cpu"];

/// Context managers of other libraries documented to run their body under
/// `torch.no_grad()` (MONAI's `eval_mode(net)` also switches the nets to eval mode).
pub const LIBRARY_NO_GRAD_CONTEXTS: &[&[&str]] = &[
    &["monai", "networks", "eval_mode"],
    &["monai", "networks", "utils", "eval_mode"],
];

/// Factories of other libraries documented to build callables that run their model
/// under `torch.no_grad()`/`inference_mode()` (a transformers `pipeline`'s `__call__`):
/// what they build, and what calling it gives, carries no graph.
pub const LIBRARY_NO_GRAD_CALLABLES: &[&[&str]] = &[&["transformers", "pipeline"]];

/// `torch.Tensor` reductions: on a tensor with a graph, the result carries it.
pub const TENSOR_REDUCTIONS: &[&str] = &["mean", "sum", "norm", "prod", "max", "min", "std", "var"];
/// The general conversion (`.to(torch.float16)`, `.to(device)`).
pub const TO_METHOD: &str = "to";

/// Whether `method` converts a dtype or moves a device (`to`, `half`, `cuda`...).
pub fn is_conversion_method(method: &str) -> bool {
    method == TO_METHOD || DTYPE_METHODS.contains(&method) || DEVICE_METHODS.contains(&method)
}

/// A dotted name after import aliases are resolved (`F.cross_entropy` with
/// `import torch.nn.functional as F` is `torch.nn.functional.cross_entropy`).
/// Fixed capacity so that resolving a call never allocates.
#[derive(Clone, Copy, Debug, Default)]
pub struct QualName<'a> {
    segs: [&'a str; 8],
    len: usize,
}

impl<'a> QualName<'a> {
    pub fn push(&mut self, s: &'a str) -> bool {
        if self.len == self.segs.len() {
            return false;
        }
        self.segs[self.len] = s;
        self.len += 1;
        true
    }
    pub fn segments(&self) -> &[&'a str] {
        &self.segs[..self.len]
    }
    pub fn first(&self) -> Option<&'a str> {
        self.segments().first().copied()
    }
    pub fn last(&self) -> Option<&'a str> {
        self.segments().last().copied()
    }
    pub fn is_torch(&self) -> bool {
        self.first() == Some("torch")
    }
    /// Whether any segment other than the last equals `s` (`torch.nn.functional.x` has `nn`).
    pub fn has_module(&self, s: &str) -> bool {
        let n = self.len.saturating_sub(1);
        self.segs[..n].contains(&s)
    }
}

fn lower_eq_any(name: &str, set: &[&str]) -> bool {
    set.iter().any(|s| name.eq_ignore_ascii_case(s))
}

fn ascii_lower_contains(name: &str, needle: &str) -> bool {
    name.len() >= needle.len()
        && name
            .as_bytes()
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// A name that usually holds an `nn.Module` (`model`, `self.net`, `text_encoder`).
pub fn is_model_name(name: &str) -> bool {
    // A CamelCase name is a class: calling it constructs, it doesn't run a forward.
    let camel = name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().any(|c| c.is_ascii_lowercase());
    if camel && !matches!(name, "netG" | "netD") {
        return false;
    }
    // `get_model`, `_wrap_model`, `is_peft_model`: functions about models.
    const VERBS: &[&str] = &[
        "get", "load", "build", "init", "create", "make", "prepare", "save", "wrap", "unwrap",
        "setup", "compile", "to", "set", "is", "has", "freeze", "unfreeze", "register", "apply",
        "update", "copy", "clone", "export", "print", "log", "train", "eval", "run", "fit",
        "validate", "test", "move", "convert", "quantize", "patch", "replace", "reset", "enable",
        "disable", "check", "ensure", "maybe", "resolve", "use", "with", "num", "push", "from",
        "attach", "merge", "dispatch", "offload", "find", "select", "generate", "compute",
        "sample", "score", "evaluate", "predict", "infer", "call", "invoke", "add", "remove",
        "store", "restore", "swap", "sync",
    ];
    let trimmed = name.trim_start_matches('_');
    if let Some((first, _)) = trimmed.split_once('_') {
        if VERBS.iter().any(|v| first.eq_ignore_ascii_case(v)) {
            return false;
        }
    }
    const EXACT: &[&str] = &[
        "model",
        "net",
        "network",
        "module",
        "encoder",
        "decoder",
        "backbone",
        "teacher",
        "student",
        "generator",
        "discriminator",
        "policy",
        "critic",
        "actor",
        "classifier",
        "unet",
        "vae",
        "transformer",
        "llm",
        "lm",
        "gpt",
        "bert",
        "mlp",
        "cnn",
        "rnn",
        "lstm",
        "head",
        "ddp_model",
        "raw_model",
    ];
    if lower_eq_any(name, EXACT) || matches!(name, "G" | "D" | "netG" | "netD") {
        return true;
    }
    let lower_ends = |suffix: &str| {
        name.len() > suffix.len()
            && name.as_bytes()[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    // `model_name`, `model_path`, `model_dir` are strings: only suffixes count.
    let subnet = name.to_ascii_lowercase().ends_with("subnet");
    ["model", "net", "_encoder", "_decoder", "_backbone"]
        .iter()
        .any(|s| lower_ends(s))
        && !subnet
}

/// A class name that is (almost always) a module class when constructed:
/// `ResNet(...)`, `GPT2LMHeadModel(...)`, `AutoModelForCausalLM`.
pub fn is_model_class_name(name: &str) -> bool {
    let starts_upper = name.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    starts_upper
        && (name.ends_with("Model")
            || name.ends_with("Net")
            || name.ends_with("Network")
            || name.ends_with("Transformer")
            || name.ends_with("Module") && name != "Module"
            || name.contains("ForCausalLM")
            || name.contains("ForSequenceClassification")
            || name.contains("ForMaskedLM")
            || name.starts_with("AutoModel")
            || name == "GPT")
}

/// Names of callables that compute a loss: `criterion`, `loss_fn`, `compute_loss`.
pub fn is_loss_fn_name(name: &str) -> bool {
    if lower_eq_any(
        name,
        &[
            "criterion",
            "criteria",
            "crit",
            "loss_fn",
            "loss_func",
            "lossfn",
        ],
    ) {
        return true;
    }
    ascii_lower_contains(name, "loss") && !ascii_lower_contains(name, "log")
        || ascii_lower_contains(name, "criterion")
}

/// Names of optimizers: `optimizer`, `opt`, `self.optim`, `d_optimizer`, `opt_g`.
pub fn is_optimizer_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.contains("optim")
        || l == "opt"
        || l.starts_with("opt_")
        || l.ends_with("_opt")
        || l.starts_with("optg")
        || l.starts_with("optd")
}

/// Optimizer classes constructed by name (`AdamW(...)` from torch, bitsandbytes or transformers).
pub fn is_optimizer_class_name(name: &str) -> bool {
    const CLASSES: &[&str] = &[
        "SGD",
        "Adam",
        "AdamW",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "NAdam",
        "RAdam",
        "RMSprop",
        "Rprop",
        "LBFGS",
        "SparseAdam",
        "ASGD",
        "Adafactor",
        "Lion",
        "Lamb",
        "LAMB",
        "AdamW8bit",
        "Adam8bit",
        "PagedAdamW",
        "PagedAdamW8bit",
        "Lion8bit",
        "Muon",
        "Shampoo",
        "Sophia",
    ];
    CLASSES.contains(&name) || name.ends_with("Optimizer")
}

/// `torch.nn.functional` losses (and any `*_loss`).
/// A torch function that runs the module it is handed (`nn.parallel.data_parallel(net,
/// inputs, gpus)`): a forward, not a function about models.
pub fn is_functional_forward(q: &QualName<'_>) -> bool {
    q.last() == Some("data_parallel") && q.has_module("parallel")
}

pub fn is_functional_loss(name: &str) -> bool {
    const LOSSES: &[&str] = &[
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "ctc_loss",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
    ];
    LOSSES.contains(&name) || name.ends_with("_loss")
}

/// Tensor methods whose result has no autograd graph.
pub fn is_detaching_method(name: &str) -> bool {
    const DETACH: &[&str] = &[
        "item",
        "detach",
        "detach_",
        "tolist",
        "numpy",
        "argmax",
        "argmin",
        "argsort",
        "long",
        "int",
        "bool",
        "short",
        "byte",
        "char",
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "isfinite",
        "nonzero",
        "count_nonzero",
        "equal",
        "allclose",
        "data_ptr",
        "stride",
        "is_contiguous",
        "get_device",
        "__len__",
    ];
    DETACH.contains(&name)
}

/// Methods of a `torch.distributions` object that draw without autograd (tensors have
/// no method of these names); `rsample` is the reparameterized draw that keeps the graph.
pub fn is_no_grad_sampling_method(name: &str) -> bool {
    matches!(name, "sample" | "sample_n")
}

/// Tensor methods that return `(values, indices)`: only the values keep the graph.
pub fn is_values_indices_method(name: &str) -> bool {
    matches!(
        name,
        "max" | "min" | "topk" | "sort" | "kthvalue" | "median" | "mode" | "cummax" | "cummin"
    )
}

/// Attributes of a tensor that are plain metadata or carry no graph.
pub fn is_non_graph_attribute(name: &str) -> bool {
    matches!(
        name,
        "data"
            | "grad"
            | "shape"
            | "dtype"
            | "device"
            | "ndim"
            | "requires_grad"
            | "is_cuda"
            | "is_leaf"
            | "layout"
            | "grad_fn"
            | "names"
    )
}

/// `torch.*` functions whose results carry no graph (index results, comparisons,
/// fresh tensors built from data).
pub fn is_non_differentiable_torch_fn(name: &str) -> bool {
    const NON_DIFF: &[&str] = &[
        "argmax",
        "argmin",
        "argsort",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "equal",
        "allclose",
        "isclose",
        "isnan",
        "isinf",
        "isfinite",
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "linspace",
        "randn",
        "rand",
        "randint",
        "randperm",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "randn_like",
        "rand_like",
        "numel",
        "bucketize",
        "searchsorted",
        "unique",
        "nonzero",
        "count_nonzero",
        "manual_seed",
        "is_tensor",
        "no_grad",
        "device",
    ];
    NON_DIFF.contains(&name)
}

/// Plotting calls that turn a tensor argument into a NumPy array (matplotlib's
/// `ax.imshow(attn)`, `plt.plot(xs, ys)`): they raise on a tensor that requires
/// grad, so what reaches them keeps no graph.
pub fn is_plotting_sink(method: &str) -> bool {
    matches!(
        method,
        "imshow"
            | "matshow"
            | "plot"
            | "scatter"
            | "contour"
            | "contourf"
            | "pcolormesh"
            | "hist"
            | "bar"
            | "quiver"
            | "plot_surface"
    )
}

/// Calls that write a tensor out as an image or a logged value, converting it to NumPy
/// or bytes without its graph: torchvision's `save_image(grid, path)`, TensorBoard's
/// `writer.add_image(tag, grid, step)` / `add_scalar`, a logger's `log_image`. What
/// reaches them is read detached.
pub fn is_logging_sink(function: &str) -> bool {
    matches!(
        function,
        "save_image"
            | "add_image"
            | "add_images"
            | "add_video"
            | "add_scalar"
            | "add_scalars"
            | "add_histogram"
            | "log_image"
            | "log_images"
    )
}

/// Builtins whose result is a plain Python value.
pub fn is_detaching_builtin(name: &str) -> bool {
    matches!(
        name,
        "float"
            | "int"
            | "bool"
            | "str"
            | "len"
            | "round"
            | "repr"
            | "format"
            | "isinstance"
            | "hash"
            | "id"
            | "type"
            | "print"
            | "range"
            | "enumerate"
    )
}

/// Builtins that return (a combination of) their arguments.
pub fn is_passthrough_builtin(name: &str) -> bool {
    matches!(name, "sum" | "max" | "min" | "abs")
}

/// `from_pretrained` classes whose instances record no autograd graph when called:
/// pipelines (transformers', diffusers' `DiffusionPipeline`, `StableDiffusionPipeline`),
/// which run their models under no_grad, and TensorFlow or Flax models
/// (`TFAutoModelForQuestionAnswering`, `FlaxBertModel`).
pub fn is_foreign_or_no_grad_pretrained(class: &str) -> bool {
    let tf = class
        .strip_prefix("TF")
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase()));
    tf || class.starts_with("Flax") || class.to_ascii_lowercase().contains("pipeline")
}

/// Classes loaded with `X.from_pretrained(...)` that are not modules. `X` may be a
/// class (`AutoTokenizer`) or an attribute holding one (`model_class.tokenizer` in a
/// table of model families), so the name is compared without case or underscores.
pub fn is_non_model_pretrained(class: &str) -> bool {
    let folded: String = class
        .chars()
        .filter(|&c| c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        "tokenizer",
        "processor",
        "config",
        "featureextractor",
        "scheduler",
        "pipeline",
    ]
    .iter()
    .any(|s| folded.contains(s))
}

/// Lightning hooks that the framework already runs with grad disabled.
pub fn is_no_grad_hook(method: &str) -> bool {
    matches!(
        method,
        "validation_step"
            | "test_step"
            | "predict_step"
            | "on_validation_epoch_end"
            | "on_test_epoch_end"
            | "validation_epoch_end"
            | "test_epoch_end"
            | "on_validation_batch_end"
            | "on_test_batch_end"
            | "on_predict_batch_end"
    )
}

/// Methods that frameworks call once per step: Lightning's `*_step`, HF Trainer's
/// `compute_loss`/`training_step`/`prediction_step`, and a module's `forward`.
pub fn is_per_step_hook(method: &str) -> bool {
    matches!(
        method,
        "training_step"
            | "validation_step"
            | "test_step"
            | "predict_step"
            | "compute_loss"
            | "prediction_step"
            | "forward"
            | "on_train_batch_end"
            | "on_validation_batch_end"
            | "on_test_batch_end"
            | "on_before_backward"
            | "on_after_backward"
            | "on_before_optimizer_step"
    )
}

/// Base classes that make a class an `nn.Module` (directly or through a framework).
pub fn is_module_base(name: &str) -> bool {
    // pydantic's BaseModel is the one common `*Model` base that is not a module.
    name != "BaseModel" && name.ends_with("Module")
        || name.ends_with("ModelMixin")
        || name.ends_with("LightningModule")
        || name.ends_with("PreTrainedModel")
        || name.ends_with("Model") && name != "BaseModel"
        || name == "Module"
}

/// Receivers whose `.backward(loss)` takes the loss as an argument.
pub fn is_backward_engine(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.contains("accelerator") || l.contains("fabric") || l.contains("engine") || l == "deepspeed"
}

/// A name about data or steps: `train_loader`, `batches`, `num_epochs`, `max_iters`,
/// `dataset`, `val_dl`.
pub fn is_data_name(name: &str) -> bool {
    const TOKENS: &[&str] = &[
        "loader",
        "dataloader",
        "dl",
        "dataset",
        "ds",
        "data",
        "batch",
        "batches",
        "minibatch",
        "minibatches",
        "epoch",
        "epochs",
        "step",
        "steps",
        "iter",
        "iters",
        "iteration",
        "iterations",
        "train",
        "val",
        "valid",
        "validation",
        "test",
        "eval",
        "samples",
        "examples",
        "episode",
        "episodes",
        "rollout",
        "rollouts",
        "updates",
    ];
    let lower = name.to_ascii_lowercase();
    // `batch_size`, `num_steps_per_epoch`... are sizes; `range(batch_size)` walks the
    // items of one batch, not steps.
    if lower.split('_').any(|t| {
        matches!(
            t,
            "size" | "len" | "dim" | "idx" | "index" | "shape" | "per"
        )
    }) {
        return false;
    }
    lower.contains("loader")
        || lower
            .split('_')
            .any(|t| !t.is_empty() && TOKENS.contains(&t))
}

/// A method that only modules have among the values of training code: what it is
/// called on is a module (`eval_model.eval()`, `policy.named_parameters()`). Methods
/// tensors, optimizers or datasets share (`to`, `state_dict`, `train`) say nothing.
pub fn is_module_only_method(method: &str) -> bool {
    MODULE_ONLY_METHODS.contains(&method)
}

/// See [`is_module_only_method`].
pub const MODULE_ONLY_METHODS: &[&str] = &[
    "eval",
    "parameters",
    "named_parameters",
    "named_modules",
    "modules",
    "named_children",
];

/// Methods of `nn.Module` (and of the common framework wrappers) that do not run a
/// forward: `model.parameters()`, `model.eval()`, `model.state_dict()`, ... Any other
/// method called on a module is taken to be a forward (`model.encode(x)`, `agent.pi(s)`).
pub fn is_module_api_method(method: &str) -> bool {
    const EXACT: &[&str] = &[
        "parameters",
        "buffers",
        "children",
        "modules",
        "state_dict",
        "load_state_dict",
        "to",
        "cuda",
        "cpu",
        "half",
        "float",
        "double",
        "bfloat16",
        "type",
        "train",
        "eval",
        "zero_grad",
        "apply",
        "requires_grad_",
        "share_memory",
        "extra_repr",
        "add_module",
        "get_submodule",
        "get_parameter",
        "get_buffer",
        "module",
        "generate",
        "fit",
        "summary",
        "randn",
        "rand",
        "randint",
        "manual_seed",
        "seed",
        "chat",
        "stream_chat",
        "stream_generate",
        "save",
        "load",
        "init_weights",
        "reset_parameters",
        "tie_weights",
        "num_parameters",
        "resize_token_embeddings",
        "save_pretrained",
        "push_to_hub",
        "merge_and_unload",
        "print_trainable_parameters",
        "no_sync",
        "backward",
        "step",
        "unwrap_model",
        "compile",
        "ipu",
        "xpu",
        "float16",
        "update",
        "copy_",
        "size",
    ];
    const PREFIXES: &[&str] = &[
        "named_",
        "register_",
        // Factories of inputs or parts (`create_dummy_batch`, `build_head`).
        "create_",
        "build_",
        "set_",
        "enable_",
        "disable_",
        "get_input_embeddings",
        "get_output_embeddings",
        "gradient_checkpointing",
        "load_",
        "save_",
        "print_",
        "_apply",
        "_get_name",
        "init",
        "remove_",
        "fuse",
        "reset",
        "flatten_parameters",
        "clear",
        "detach",
        "repackage",
        "zero_",
        "num_",
        "count_",
    ];
    EXACT.contains(&method) || PREFIXES.iter().any(|p| method.starts_with(p)) || {
        // Lookups of the module's structure: `get_parameter_or_buffer(name)`.
        let l = method.to_ascii_lowercase();
        l.contains("hidden") || l.contains("parameter") || l.contains("buffer")
    }
}

/// Function names that say inference outside evaluation: sampling and generation
/// (`generate`, `sample_images`, `greedy_decode`), preview images (`save_sample`,
/// `visualize_results`), and demo scripts (`demo`, `enjoy`, `translate`).
pub fn is_inference_function_name(name: &str) -> bool {
    let l = name.trim_start_matches('_').to_ascii_lowercase();
    const PREFIXES: &[&str] = &[
        "generate",
        "sample",
        "save_sample",
        "visualize",
        "visualise",
        "demo",
        "enjoy",
        "translate",
        "greedy_decode",
        "beam_search",
        "latent_walk",
        "interpolate_latent",
        "plot_samples",
        "show_samples",
    ];
    PREFIXES.iter().any(|p| l.starts_with(p))
}

/// Calls that wrap a module and return one that runs the same forward: data and model
/// parallel wrappers and adapter builders.
pub fn is_module_wrapper(name: &str) -> bool {
    matches!(
        name,
        "DataParallel"
            | "DistributedDataParallel"
            | "DDP"
            | "FSDP"
            | "FullyShardedDataParallel"
            | "get_peft_model"
            | "prepare_model_for_kbit_training"
            | "prepare_model_for_int8_training"
    )
}

/// Integer and boolean torch dtypes (`torch.uint8`, `torch.long`): a tensor of one
/// cannot require gradients, so a conversion to one leaves the graph behind.
pub fn is_integer_dtype(name: &str) -> bool {
    matches!(
        name,
        "uint8" | "int8" | "int16" | "int32" | "int64" | "long" | "int" | "short" | "bool"
    )
}

/// A read that leaves the graph behind: a detaching method or attribute
/// (`.item()`, `.cpu().numpy()`, `.data`, `.argmax()`) or builtin (`float(...)`).
/// Whether a dataset's name or split key says it holds evaluation data: its first
/// word is `val`, `valid`, `validation`, `eval`, `evaluation`, `test` or `dev`
/// (`val_data`, `"validation"`, `test_examples`; not `train_val` or `devices`).
pub fn is_eval_split_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    let first = l.split(['_', '-']).find(|p| !p.is_empty()).unwrap_or("");
    matches!(
        first,
        "val" | "valid" | "validation" | "eval" | "evaluation" | "test" | "dev"
    )
}

pub fn is_detached_read(name: &str) -> bool {
    is_detaching_method(name) || is_non_graph_attribute(name) || is_detaching_builtin(name)
}

/// `torch.nn` module classes that hold no parameters: applied to inputs without a
/// graph, they make none.
pub fn is_parameterless_module(class: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "Upsample",
        "MaxPool",
        "AvgPool",
        "AdaptiveAvgPool",
        "AdaptiveMaxPool",
        "Dropout",
        "ReLU",
        "LeakyReLU",
        "GELU",
        "SiLU",
        "ELU",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Identity",
        "Flatten",
        "Unflatten",
        "PixelShuffle",
        "PixelUnshuffle",
        "ZeroPad",
        "ReflectionPad",
        "ReplicationPad",
        "ConstantPad",
        "Hardtanh",
        "Softplus",
        "Mish",
        "Hardswish",
        "Hardsigmoid",
        "Softsign",
        "Tanhshrink",
        "Threshold",
    ];
    PREFIXES.iter().any(|p| class.starts_with(p))
}

/// Module methods that return the module itself, seen through in a chain of
/// conversions (`model.eval().cpu()`).
pub const RETURNS_SELF_METHODS: &[&str] = &["eval", "train", "requires_grad_"];

/// Methods that place what they wrap on their object's device (`accelerator.prepare`,
/// `fabric.setup`).
pub const PLACING_PREPARE_METHODS: &[&str] = &["prepare", "setup", "prepare_model"];

/// Wrappers whose result lives where the wrapped model lives: `Some(keeps_dtype)`.
/// PEFT wrappers add new (float32) adapter weights, so the dtype is not kept.
pub fn placement_wrapper(name: &str) -> Option<bool> {
    match name {
        "DataParallel"
        | "DistributedDataParallel"
        | "DDP"
        | "FullyShardedDataParallel"
        | "FSDP"
        | "compile" => Some(true),
        "get_peft_model"
        | "PeftModel"
        | "PeftModelForCausalLM"
        // its older name, still common in fine-tuning scripts
        | "prepare_model_for_int8_training"
        | "prepare_model_for_kbit_training" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names() {
        for n in [
            "model",
            "self_model",
            "text_model",
            "resnet",
            "net",
            "ema_model",
            "G",
        ] {
            assert!(is_model_name(n), "{n}");
        }
        for n in [
            "model_name",
            "model_path",
            "subnet",
            "dataset",
            "x",
            "loss",
            "get_model",
            "_wrap_model",
            "is_peft_model",
            "ResNetModel",
            "_is_quantized_and_base_model",
        ] {
            assert!(!is_model_name(n), "{n}");
        }
    }

    #[test]
    fn loss_names() {
        for n in [
            "criterion",
            "loss_fn",
            "compute_loss",
            "contrastive_loss",
            "self_criterion",
        ] {
            assert!(is_loss_fn_name(n), "{n}");
        }
        for n in ["log_loss_every", "logits", "model"] {
            assert!(!is_loss_fn_name(n), "{n}");
        }
    }

    #[test]
    fn optimizer_names() {
        for n in [
            "optimizer",
            "opt",
            "optim",
            "d_optimizer",
            "opt_g",
            "optimizer_g",
        ] {
            assert!(is_optimizer_name(n), "{n}");
        }
        for n in ["option", "output", "options_", "loop"] {
            assert!(!is_optimizer_name(n), "{n}");
        }
    }
}
