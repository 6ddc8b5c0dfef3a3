//! Which rules run: `--select`, `--extend-select` and `--ignore` take codes or prefixes.

use crate::error::UsageError;
use crate::rule::Rule;
use crate::rules;

/// Rules matching a code or prefix (`OOM201`, `OOM2`, `ALL`).
pub fn matching(selector: &str) -> Result<Vec<&'static Rule>, UsageError> {
    let s = selector.trim();
    if s.eq_ignore_ascii_case("ALL") {
        return Ok(rules::ALL.to_vec());
    }
    let found: Vec<&'static Rule> = rules::ALL
        .iter()
        .copied()
        .filter(|r| {
            r.code.len() >= s.len() && r.code[..s.len()].eq_ignore_ascii_case(s) && !s.is_empty()
        })
        .collect();
    if found.is_empty() {
        // A prefix of a family that has no rule yet (`OOM6`) is still valid.
        let family = s.len() >= 3
            && s[..3].eq_ignore_ascii_case("OOM")
            && s[3..].chars().all(|c| c.is_ascii_digit())
            && s.len() <= 6;
        if !family || s.len() == 6 {
            return Err(UsageError::UnknownRule(selector.to_owned()));
        }
    }
    Ok(found)
}

/// The enabled rules, in code order.
pub fn resolve(
    select: &[String],
    extend_select: &[String],
    ignore: &[String],
) -> Result<Vec<&'static Rule>, UsageError> {
    let mut on: Vec<&'static Rule> = if select.is_empty() {
        rules::ALL
            .iter()
            .copied()
            .filter(|r| rules::enabled_by_default(r))
            .collect()
    } else {
        let mut v = Vec::new();
        for s in select {
            v.extend(matching(s)?);
        }
        v
    };
    for s in extend_select {
        on.extend(matching(s)?);
    }
    let mut off = Vec::new();
    for s in ignore {
        off.extend(matching(s)?);
    }
    on.retain(|r| !off.iter().any(|o| std::ptr::eq(*o, *r)));
    on.sort_by_key(|r| r.code);
    on.dedup_by_key(|r| r.code);
    Ok(on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_unknown_codes() {
        assert!(!matching("OOM2").unwrap().is_empty());
        assert_eq!(matching("OOM5").unwrap().len(), 2);
        assert!(matching("OOM6").unwrap().is_empty());
        assert!(matching("OOM999").is_err());
        assert!(matching("E501").is_err());
        let r = resolve(&["OOM2".into()], &[], &["OOM202".into()]).unwrap();
        assert_eq!(
            r.iter().map(|r| r.code).collect::<Vec<_>>(),
            ["OOM201", "OOM203", "OOM204"]
        );
        // Unused noqa runs only when asked for, by code, prefix or ALL.
        let default = resolve(&[], &[], &[]).unwrap();
        assert!(!default.iter().any(|r| r.code == "OOM001"));
        assert!(!default.is_empty());
        let all = resolve(&["ALL".into()], &[], &[]).unwrap();
        assert!(all.iter().any(|r| r.code == "OOM001"));
        let extended = resolve(&[], &["OOM001".into()], &[]).unwrap();
        assert_eq!(extended.len(), default.len() + 1);
    }
}
