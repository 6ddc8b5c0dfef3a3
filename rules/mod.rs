//! The registry: every rule, in code order. Adding a rule is one line here.

use crate::rule::Rule;

macro_rules! registry {
    ($($module:ident :: $rule:ident),* $(,)?) => {
        $(mod $module;)*
        /// All rules, sorted by code.
        pub static ALL: &[&Rule] = &[$(&$module::$rule),*];
    };
}

registry! {
    undetached_loss_append::UNDETACHED_LOSS_APPEND,
    undetached_loss_accumulate::UNDETACHED_LOSS_ACCUMULATE,
}

/// The rule with this code (case-insensitive).
pub fn by_code(code: &str) -> Option<&'static Rule> {
    ALL.iter()
        .copied()
        .find(|r| r.code.eq_ignore_ascii_case(code))
}
