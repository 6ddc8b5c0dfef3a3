//! Fixture expectations: a finding is expected where a line ends with a comment
//! `# error: OOM201` (or `# error: OOM201, OOM202`, or a `# error:` section after
//! another comment). Markers are read from tree-sitter
//! `comment` nodes, so `# error:` inside a string is not a marker.

use std::fmt::Write as _;

use crate::semantic::NodeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::lint::Linter;
use crate::project::{NoStore, ProjectIndex, Projects};
use crate::report::FileReport;
use crate::rule::Rule;

/// `(line, code)` pairs expected by the markers in `source`, sorted.
pub fn expectations(source: &str) -> Vec<(usize, String)> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("language");
    let Some(tree) = parser.parse(source, None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut cursor = tree.walk();
    'outer: loop {
        let node = cursor.node();
        if node.kind_str() == "comment" {
            let text = &source[node.byte_range()];
            // The marker may follow another comment on the line (`# noqa: OOM201  #
            // error: OOM001` in the unused-noqa fixture).
            let marker = text
                .split('#')
                .find_map(|section| section.trim_start().strip_prefix("error:"));
            if let Some(codes) = marker {
                for code in codes.split(',') {
                    let code = code.split_whitespace().next().unwrap_or("");
                    if !code.is_empty() {
                        out.push((node.start_position().row + 1, code.to_owned()));
                    }
                }
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                continue 'outer;
            }
            if !cursor.goto_parent() {
                break 'outer;
            }
        }
    }
    out.sort();
    out
}

/// Lints a fixture with `rules` and compares with its markers. On a mismatch, the
/// error lists the missing and unexpected findings and the rendered diagnostics.
pub fn check_fixture(path: &str, source: &[u8], rules: &[&'static Rule]) -> Result<(), String> {
    let text = String::from_utf8_lossy(source);
    let expected = expectations(&text);
    let report = fixture_linter(path, rules).lint_source(path, source);
    let mut actual: Vec<(usize, String)> = report
        .findings
        .iter()
        .map(|f| (f.line, f.code.to_owned()))
        .collect();
    actual.sort();
    if expected == actual && report.errors.is_empty() {
        return Ok(());
    }
    let mut msg = format!("fixture {path} does not match its markers\n");
    for e in &expected {
        if !actual.contains(e) {
            let _ = writeln!(msg, "  missing:    line {} {}", e.0, e.1);
        }
    }
    for a in &actual {
        if !expected.contains(a) {
            let _ = writeln!(msg, "  unexpected: line {} {}", a.0, a.1);
        }
    }
    for e in &report.errors {
        let _ = writeln!(msg, "  error: {e}");
    }
    msg.push_str("\nrendered findings:\n");
    msg.push_str(&render(&report));
    Err(msg)
}

/// The linter of a fixture: a file under `fixtures/project/<case>/` is linted as part
/// of the project made of every Python file of `<case>/`, so that facts that span
/// files have fixtures that span files.
pub fn fixture_linter(path: &str, rules: &[&'static Rule]) -> Linter {
    let linter = Linter::new(rules);
    match fixture_project(Path::new(path)) {
        Some(root) => {
            let mut files = Vec::new();
            python_files(&root, &mut files);
            files.sort();
            let index = ProjectIndex::build(&root, &files, &NoStore);
            linter.with_project(Arc::new(Projects(vec![index])))
        }
        None => linter,
    }
}

/// `fixtures/project/<case>` for a file below it.
fn fixture_project(path: &Path) -> Option<PathBuf> {
    let mut case = None;
    for a in path.ancestors() {
        if a.parent().and_then(Path::file_name) == Some("project".as_ref()) {
            case = Some(a.to_path_buf());
            break;
        }
    }
    case
}

fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            python_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "py") {
            out.push(p);
        }
    }
}

/// Where the expected result of applying every fix (safe and unsafe) to a fixture is
/// kept: `fixtures/OOM202.py` -> `fixtures/OOM202.py.fixed`.
pub fn fixed_path(path: &str) -> PathBuf {
    PathBuf::from(format!("{path}.fixed"))
}

/// Applies the fixes of a fixture and checks what the engine promises:
///
/// - with the safe fixes only, and with every fix, the fixed text has no syntax error
///   the fixture did not have, and the fixer refused nothing;
/// - no finding that has a safe fix is left after the safe fixes, and no finding that
///   has any fix is left after every fix;
/// - the result of every fix is the fixture's `.fixed` file, byte for byte (and a
///   fixture no fix changes has none). `OOMLINT_UPDATE_FIXED=1` writes the `.fixed`
///   files instead of comparing (review them like snapshots).
pub fn check_fixture_fixes(path: &str, source: &[u8]) -> Result<(), String> {
    use crate::fix::Applicability;
    let linter = fixture_linter(path, crate::rules::ALL);
    let original = String::from_utf8_lossy(source);
    let errors_before = crate::lint::syntax_errors(&original);
    let mut all_fixed = None;
    for min in [Applicability::Safe, Applicability::Unsafe] {
        let out = linter.fix_source(Path::new(path), source, min);
        if let Some(why) = &out.refused {
            return Err(format!("{path}: fixes ({min:?} and up) refused: {why}"));
        }
        if let Some(fixed) = &out.fixed {
            let text = String::from_utf8_lossy(fixed);
            let errors = crate::lint::syntax_errors(&text);
            if errors > errors_before {
                return Err(format!(
                    "{path}: the fixes ({min:?} and up) introduce syntax errors:\n{text}"
                ));
            }
        }
        let left: Vec<String> = out
            .report
            .findings
            .iter()
            .filter(|f| f.fix.as_ref().is_some_and(|x| x.applies(min)))
            .map(|f| format!("line {} {} {}", f.line, f.code, f.message))
            .collect();
        if !left.is_empty() {
            return Err(format!(
                "{path}: after applying the fixes ({min:?} and up), findings with such a fix remain:\n  {}",
                left.join("\n  ")
            ));
        }
        if min == Applicability::Unsafe {
            all_fixed = out.fixed;
        }
    }
    let expected_at = fixed_path(path);
    if std::env::var_os("OOMLINT_UPDATE_FIXED").is_some() {
        let written = match &all_fixed {
            Some(fixed) => std::fs::write(&expected_at, fixed),
            None if expected_at.exists() => std::fs::remove_file(&expected_at),
            None => Ok(()),
        };
        return written.map_err(|e| format!("{}: {e}", expected_at.display()));
    }
    let expected = std::fs::read(&expected_at).ok();
    match (all_fixed, expected) {
        (None, None) => Ok(()),
        (Some(_), None) => Err(format!(
            "{path}: its fixes change it but there is no {}: run `OOMLINT_UPDATE_FIXED=1 cargo test --test fixtures` and review it",
            expected_at.display()
        )),
        (None, Some(_)) => Err(format!(
            "{path}: no fix changes it, but {} exists: remove it",
            expected_at.display()
        )),
        (Some(got), Some(want)) if got == want => Ok(()),
        (Some(got), Some(want)) => Err(format!(
            "{path}: the fixed text differs from {} (OOMLINT_UPDATE_FIXED=1 rewrites it):\n{}",
            expected_at.display(),
            crate::fix::unified_diff(
                &expected_at.display().to_string(),
                &String::from_utf8_lossy(&want),
                &String::from_utf8_lossy(&got)
            )
        )),
    }
}

fn render(report: &FileReport) -> String {
    let mut buf = Vec::new();
    let _ = crate::render::render(
        &mut buf,
        crate::render::Format::Text,
        std::slice::from_ref(report),
        false,
        None,
    );
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_come_from_comments_only() {
        let src = "x = 1  # error: OOM201, OOM202\ns = '# error: OOM999'\n";
        assert_eq!(
            expectations(src),
            vec![(1, "OOM201".to_owned()), (1, "OOM202".to_owned())]
        );
    }

    #[test]
    fn mismatches_are_reported_both_ways() {
        let rules = crate::rules::ALL;
        let leak = "losses = []\nfor x in loader:\n    loss = criterion(model(x), y)\n    losses.append(loss)\n";
        let err = check_fixture("t.py", leak.as_bytes(), rules).unwrap_err();
        assert!(err.contains("unexpected: line 4 OOM201"), "{err}");
        let marked = leak.replace("append(loss)", "append(loss)  # error: OOM201");
        assert!(check_fixture("t.py", marked.as_bytes(), rules).is_ok());
        let wrong = "x = 1  # error: OOM202\n";
        let err = check_fixture("t.py", wrong.as_bytes(), rules).unwrap_err();
        assert!(err.contains("missing:    line 1 OOM202"), "{err}");
    }
}
