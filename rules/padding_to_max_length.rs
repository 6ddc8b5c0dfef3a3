use crate::prelude::*;

declare_rule! {
    /// ## What it does
    /// Flags a tokenizer call in a training data path with
    /// `padding="max_length"` (or `pad_to_max_length=True`) and a `max_length` that is
    /// large (over 256), unset, or not a literal. The data path is a function mapped
    /// over a dataset (also through `partial(f, ...)`, a name bound to it, or the
    /// closure a factory returns), a function it calls, a dataset's `__getitem__` or a
    /// collate function, in a file that trains or that a training script imports; a
    /// function another file of the project maps over its training data is one too,
    /// wherever it is defined (a `utils.py` with no PyTorch import of its own).
    ///
    /// ## Why is this bad?
    /// Every example is padded to the longest length the model accepts, so every batch
    /// costs the activations of the longest possible sequence, however short its texts.
    /// Activation memory grows with the sequence length (quadratically in attention
    /// without a fused kernel): a batch of 100-token texts padded to 2048 uses about 20
    /// times the memory it needs, and the batch size that fits shrinks with it.
    ///
    /// Not flagged: TPU/XLA code (static shapes are required there), an explicit small
    /// `max_length` (256 or less, also through a name bound to a literal, or a parameter
    /// default reaching it through `self.max_len = max_len`),
    /// `max_length=tokenizer.model_max_length` (a text encoder's fixed context, such as
    /// CLIP's 77 tokens in diffusion code), tokenizer calls outside the data path of a
    /// training script (inference of single prompts, model code), and functions mapped
    /// only over evaluation data (`datasets["validation"].map(prepare_features)`, a
    /// `val_data.map(...)`), whose padded features feed prediction, not training.
    ///
    /// ## Example
    /// ```python
    /// def tokenize(batch):
    ///     return tokenizer(batch["text"], truncation=True, max_length=2048, padding="max_length")
    /// train_ds = train_ds.map(tokenize, batched=True)
    /// ```
    ///
    /// ## How to fix
    /// Truncate only, and pad each batch to its longest sequence in the collator:
    /// ```python
    /// def tokenize(batch):
    ///     return tokenizer(batch["text"], truncation=True, max_length=2048)
    /// collator = DataCollatorWithPadding(tokenizer)  # or padding="longest" per batch
    /// ```
    pub static PADDING_TO_MAX_LENGTH = Rule {
        code: "OOM502",
        name: "padding-to-max-length",
        severity: Severity::Warning,
        fix: FixAvailability::None,
        check,
        prefilter: |s| s.word("padding") || s.word("pad_to_max_length"),
        parts: None,
    };
}

/// The longest `max_length` counted as small.
const SMALL: i64 = 256;

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut xla = None;
    for call in &model.calls {
        let Some(arg) = model.pads_to_max_length(call) else {
            continue;
        };
        let max_length = model.keyword_arg(call.node, "max_length");
        if max_length.is_some_and(|m| model.text(m).ends_with("model_max_length")) {
            continue;
        }
        let known = model.literal_int_arg(call, "max_length");
        if known.is_some_and(|n| n <= SMALL) {
            continue;
        }
        if !model.in_training_data_path(call) {
            continue;
        }
        if *xla.get_or_insert_with(|| model.uses_xla()) {
            continue;
        }
        let len = match (known, max_length) {
            (Some(n), _) => format!("{n} tokens"),
            (None, Some(m)) => format!("`{}`", model.text(m)),
            (None, None) => "the tokenizer's `model_max_length`".to_owned(),
        };
        out.push(Diagnostic {
            range: model.range(call.node),
            message: format!(
                "`{}` pads every training example to {len}: each batch costs the activations of the longest possible sequence",
                model.text(arg.parent().unwrap_or(arg))
            ),
            help: "drop the padding here (keep `truncation=True`) and pad per batch: `DataCollatorWithPadding(tokenizer)` or `padding=\"longest\"`".to_owned(),
            pattern: Pattern::PadToMaxLength,
            fix: None,
            related: Vec::new(),
        });
    }
}
