use crate::prelude::*;
use crate::semantic::state::{Conversion, DType};
use crate::semantic::NodeExt;
use crate::semantic::LoadDType;

declare_rule! {
    /// ## What it does
    /// Flags a model loaded with `from_pretrained(...)` and then converted as a whole to
    /// another dtype: loaded without `torch_dtype` (so in float32) and then converted to a
    /// lower precision (`.half()`, `.bfloat16()`, `.to(torch.bfloat16)`), or loaded with
    /// `torch_dtype=X` and then converted to a different dtype `Y`.
    ///
    /// A float32 load cast to a dtype variable that a branch sets to float16 or
    /// bfloat16 (`weight_dtype` under mixed precision) is reported too, naming that
    /// assignment: the float32 path converts nothing, the mixed-precision path pays the
    /// float32 peak.
    ///
    /// The load may sit in the constructor of a wrapper class of the file
    /// (`RewardModel(path)` whose `__init__` calls `from_pretrained(path)`), or in one
    /// branch while another branch builds a model of the project: converting the instance
    /// converts what that path loaded.
    ///
    /// ## Why is this bad?
    /// The load materialises every weight in the dtype it loads in, and the conversion
    /// then makes the converted copy: the peak is the whole model in float32 (plus the
    /// copy being made), twice the float16 size the code wanted in the end. A 7B model
    /// peaks at 28 GB instead of 14 GB, which is often the difference between loading and
    /// an out-of-memory error.
    ///
    /// Not flagged: a conversion of only part of the model (`model.lm_head.float()`,
    /// layer norms upcast for stability), quantized loads (`load_in_8bit`,
    /// `load_in_4bit`, `quantization_config`), `torch_dtype="auto"` or a dtype in a
    /// variable in the load, a conversion to a variable that may hold a dtype we cannot
    /// read (`args.dtype`), `**kwargs` that may hold one, and tokenizers or configs.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name)  # float32
    /// model = model.half()                                # then a float16 copy
    /// ```
    ///
    /// ## How to fix
    /// Load in the dtype you want:
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
    /// ```
    pub static LOAD_THEN_CONVERT = Rule {
        code: "OOM403",
        name: "load-then-convert",
        severity: Severity::Warning,
        fix: FixAvailability::None,
        check,
        prefilter: |s| s.word(names::PRETRAINED_LOADER) && s.any_attr(&["half", "bfloat16", "float", "double", "to"]),
        parts: None,
    };
}

fn torch_name(t: DType) -> &'static str {
    match t {
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::F32 => "torch.float32",
        DType::F64 => "torch.float64",
    }
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (id, call) in model.calls.iter_enumerated() {
        let Some(conv) = model.conversion(id) else {
            continue;
        };
        let Some(to) = model.literal_conversion_dtype(&conv) else {
            branch_chosen(model, &conv, out);
            continue;
        };
        let Some(load) = model.load_converted(&conv).or_else(|| {
            // Loaded in branches: the path that loads in float32 pays the peak.
            model
                .loads_converted_on_paths(&conv)
                .into_iter()
                .find(|l| l.dtype == LoadDType::Default)
        }) else {
            continue;
        };
        let (from, how) = match load.dtype {
            LoadDType::Default if matches!(to, DType::F16 | DType::BF16) => {
                (DType::F32, "without `torch_dtype`, so in float32".to_owned())
            }
            LoadDType::Given(from, arg) if from != to => (
                from,
                format!("with `torch_dtype={}`", model.text(arg)),
            ),
            _ => continue,
        };
        let line = model.line_of(load.call);
        out.push(Diagnostic {
            range: model.range(call.node),
            message: format!(
                "the model is loaded {how} (line {line}) and then converted to {}: the load peaks at the {} size of every weight",
                to.name(),
                from.name()
            ),
            help: format!(
                "pass `torch_dtype={}` to `from_pretrained` on line {line} and drop this conversion",
                torch_name(to)
            ),
            pattern: Pattern::LoadThenConvert,
            fix: None,
            related: Vec::new(),
        });
    }
}

/// `vae.to(device, dtype=weight_dtype)` after a float32 load, where a branch sets
/// `weight_dtype` to a lower precision (mixed-precision training): on that path the load
/// peaks at float32 exactly as with a literal dtype. Reported naming the assignment; on
/// the float32 path the conversion is a no-op and costs nothing.
fn branch_chosen<'a>(model: &SemanticModel<'a>, conv: &Conversion<'a>, out: &mut Vec<Diagnostic>) {
    let Some(load) = model.load_converted(conv) else {
        return;
    };
    if !matches!(load.dtype, LoadDType::Default) {
        return;
    }
    let choices = model.conversion_dtype_choices(conv);
    let Some(&(to, at)) = choices
        .iter()
        .find(|(t, _)| matches!(t, DType::F16 | DType::BF16))
    else {
        return;
    };
    let call = &model.calls[conv.call];
    let mut assign = at;
    while assign.kind_str() != "assignment" {
        let Some(p) = assign.parent() else { return };
        assign = p;
    }
    let var = model.text(assign.field("left").unwrap_or(at));
    let line = model.line_of(load.call);
    out.push(Diagnostic {
        range: model.range(call.node),
        message: format!(
            "the model is loaded without `torch_dtype`, so in float32 (line {line}), and then converted to `{var}`, which line {} sets to {}: on that path the load peaks at the float32 size of every weight",
            model.line_of(at),
            to.name()
        ),
        help: format!(
            "pass `torch_dtype={var}` to `from_pretrained` on line {line} (choose the dtype before loading) and drop this conversion"
        ),
        pattern: Pattern::LoadThenConvert,
        fix: None,
        related: Vec::new(),
    });
}
