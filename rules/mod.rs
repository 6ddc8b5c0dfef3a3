//! The registry: every rule, in code order. Adding a rule is one line here.

use crate::rule::Rule;

macro_rules! registry {
    ($($module:ident :: $rule:ident),* $(,)?) => {
        $(mod $module;)*
        /// All rules, sorted by code.
        pub static ALL: &[&Rule] = &[$(&$module::$rule),*];
        /// Each rule with the file its documentation is written in (`rules/<file>.rs`).
        static FILES: &[(&Rule, &str)] = &[$((&$module::$rule, stringify!($module))),*];
    };
}

registry! {
    unused_noqa::UNUSED_NOQA,
    missing_zero_grad::MISSING_ZERO_GRAD,
    undetached_loss_append::UNDETACHED_LOSS_APPEND,
    undetached_loss_accumulate::UNDETACHED_LOSS_ACCUMULATE,
    retain_graph_in_loop::RETAIN_GRAPH_IN_LOOP,
    eval_outputs_kept_on_device::EVAL_OUTPUTS_KEPT_ON_DEVICE,
    eval_without_no_grad::EVAL_WITHOUT_NO_GRAD,
    redundant_dtype_conversion::REDUNDANT_DTYPE_CONVERSION,
    redundant_device_move::REDUNDANT_DEVICE_MOVE,
    load_then_convert::LOAD_THEN_CONVERT,
    torch_load_without_map_location::TORCH_LOAD_WITHOUT_MAP_LOCATION,
    padding_to_max_length::PADDING_TO_MAX_LENGTH,
}

/// Rules that run only when selected by name or prefix (`--select OOM001`, `ALL`), never
/// by default: they judge the user's comments rather than the code.
static OPT_IN: &[&Rule] = &[&unused_noqa::UNUSED_NOQA];

/// Whether `rule` runs when no `select` names rules.
pub fn enabled_by_default(rule: &Rule) -> bool {
    !OPT_IN.iter().any(|r| std::ptr::eq(*r, rule))
}

/// The unused-noqa rule: the suppression stage computes it, after every other rule.
pub static UNUSED_NOQA: &Rule = &unused_noqa::UNUSED_NOQA;

/// The rule with this code (case-insensitive).
pub fn by_code(code: &str) -> Option<&'static Rule> {
    ALL.iter()
        .copied()
        .find(|r| r.code.eq_ignore_ascii_case(code))
}

/// Where a rule's documentation is read on the web: its file in the repository (the
/// doc comment there is the documentation `oomlint rule CODE` prints), under the
/// package's `repository` URL. Editors link a finding's code to it.
pub fn doc_url(code: &str) -> Option<String> {
    let rule = by_code(code)?;
    let (_, file) = FILES.iter().find(|(r, _)| std::ptr::eq(*r, rule))?;
    Some(format!(
        "{}/blob/main/rules/{file}.rs",
        env!("CARGO_PKG_REPOSITORY").trim_end_matches('/')
    ))
}

/// The rule table of the README, generated from the registry.
pub fn markdown_table() -> String {
    let mut s = String::from(
        "| Code | Name | Severity | Fix | What it flags |\n| --- | --- | --- | --- | --- |\n",
    );
    for r in ALL {
        s.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            r.code,
            r.name,
            r.severity.as_str(),
            r.fix.as_str(),
            r.summary().replace('|', "\\|")
        ));
    }
    s
}
