//! Runs every fixture under `fixtures/` as its own test: the findings of all rules
//! must be exactly the `# error: CODE` markers, and applying every fix must give the
//! fixture's `.fixed` file (see `oomlint::testing::check_fixture_fixes`).

use std::fmt;
use std::path::Path;

use oomlint::lint::LintOptions;

/// The harness prints errors with `Debug`; this keeps the rendered findings readable.
struct Mismatch(String);

impl fmt::Debug for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

fn fixture(path: &Path, source: Vec<u8>) -> datatest_stable::Result<()> {
    let shown = path.to_string_lossy().replace('\\', "/");
    oomlint::testing::check_fixture(&shown, &source, oomlint::rules::ALL)
        .map_err(|m| Box::new(Mismatch(m)) as Box<dyn std::error::Error>)?;
    // Every fix applied: the text still parses, the fixed findings are gone, and the
    // result is the fixture's `.fixed` file.
    oomlint::testing::check_fixture_fixes(&shown, &source)
        .map_err(|m| Box::new(Mismatch(m)) as Box<dyn std::error::Error>)?;
    // The prefilter may only skip files where no rule fires, and chunking may only leave
    // out parts where no rule fires ([`oomlint::chunk`]): with each rule alone (so one
    // rule's needles can't hide another's gap) and with all of them, findings are the
    // same without either.
    let chunked = |rules: &[&'static oomlint::rule::Rule], chunk: bool| {
        oomlint::testing::fixture_linter(&shown, rules)
            .with_options(LintOptions {
                chunk,
                ..Default::default()
            })
            .lint_source(&shown, &source)
    };
    for rules in oomlint::rules::ALL
        .iter()
        .map(std::slice::from_ref)
        .chain([oomlint::rules::ALL])
    {
        let (on, off) = (chunked(rules, true), chunked(rules, false));
        if on.findings != off.findings || on.warnings.len() != off.warnings.len() {
            return Err(Box::new(Mismatch(format!(
                "{shown}: chunking with {} drops findings: {} without it, {} with it",
                rules.iter().map(|r| r.code).collect::<Vec<_>>().join(","),
                off.findings.len(),
                on.findings.len()
            ))));
        }
    }
    for rule in oomlint::rules::ALL {
        let rules = std::slice::from_ref(rule);
        let on = oomlint::testing::fixture_linter(&shown, rules)
            .with_options(LintOptions {
                prefilter: true,
                chunk: false,
                ..Default::default()
            })
            .lint_source(&shown, &source);
        let off = oomlint::testing::fixture_linter(&shown, rules)
            .with_options(LintOptions {
                prefilter: false,
                chunk: false,
                ..Default::default()
            })
            .lint_source(&shown, &source);
        if on.findings != off.findings {
            return Err(Box::new(Mismatch(format!(
                "{shown}: the prefilter of {} drops findings: {} without it, {} with it",
                rule.code,
                off.findings.len(),
                on.findings.len()
            ))));
        }
    }
    Ok(())
}

datatest_stable::harness! {
    { test = fixture, root = "fixtures", pattern = r"\.py$" },
}
