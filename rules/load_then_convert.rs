use crate::prelude::*;
use crate::semantic::state::DType;
use crate::semantic::LoadDType;

declare_rule! {
    /// ## What it does
    /// Flags a model loaded with `from_pretrained(...)` and then converted as a whole to
    /// another dtype: loaded without `torch_dtype` (so in float32) and then converted to a
    /// lower precision (`.half()`, `.bfloat16()`, `.to(torch.bfloat16)`), or loaded with
    /// `torch_dtype=X` and then converted to a different dtype `Y`.
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
    /// variable (in the load or in the conversion: `weight_dtype` is usually chosen by a
    /// branch), `**kwargs` that may hold one, and tokenizers or configs.
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
            continue;
        };
        let Some(load) = model.load_converted(&conv) else {
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
