//! Fixes end to end: `--diff`, `--fix`, `--unsafe-fixes`, `--fix-only` through the
//! built binary (exit codes, output, what is written), and the engine's refusal of a
//! fix that would break parsing.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use tempfile::TempDir;

use oomlint::fix::{Applicability, Edit, Fix};
use oomlint::lint::Linter;
use oomlint::rule::{Context, Diagnostic, FixAvailability, Rule, Severity};
use oomlint::semantic::SemanticModel;

/// A training loop whose loss list is only summed and counted: `.item()` is safe.
const SUMMED: &str = "\
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    print(f\"mean loss {sum(losses) / len(losses):.3f}\")
";

/// A loop that never resets gradients: its fix (unsafe) inserts a line.
const NO_RESET: &str = "\
import torch.nn.functional as F


def train(model, loader, optimizer):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
";

fn oomlint(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("oomlint").expect("the oomlint binary");
    cmd.current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("RUST_BACKTRACE")
        .timeout(Duration::from_secs(60))
        .args(["--no-cache", "--color", "never"]);
    cmd
}

#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = oomlint(dir).args(args).output().expect("run oomlint");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(matches!(r.code, 0..=2), "{args:?} crashed: {r:#?}");
    assert!(!r.stderr.contains("panicked"), "{args:?} panicked: {r:#?}");
    r
}

fn project(files: &[(&str, &[u8])]) -> TempDir {
    let dir = TempDir::new().expect("temp dir");
    // A project of its own: the index does not walk the system's temporary folder.
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname = \"t\"\n",
    )
    .unwrap();
    for (name, body) in files {
        std::fs::write(dir.path().join(name), body).unwrap();
    }
    dir
}

fn read(dir: &TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.path().join(name)).unwrap()
}

#[test]
fn diff_prints_a_unified_diff_writes_nothing_and_fails() {
    let dir = project(&[("train.py", SUMMED.as_bytes())]);
    let r = run(dir.path(), &["--diff", "train.py"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert_eq!(
        r.stdout,
        "--- train.py\n+++ train.py\n@@ -9,5 +9,5 @@\n         loss = F.cross_entropy(model(x), y)\n         loss.backward()\n         optimizer.step()\n-        losses.append(loss)\n+        losses.append(loss.item())\n     print(f\"mean loss {sum(losses) / len(losses):.3f}\")\n"
    );
    assert_eq!(r.stderr, "Would fix 1 problem (0 remaining)\n");
    assert_eq!(read(&dir, "train.py"), SUMMED);
    // Nothing to fix: exit 0, no diff.
    let r = run(dir.path(), &["--diff", "--select", "OOM101", "train.py"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:#?}");
    // An unsafe fix shows only with --unsafe-fixes.
    std::fs::write(dir.path().join("reset.py"), NO_RESET).unwrap();
    let r = run(dir.path(), &["--diff", "reset.py"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:#?}");
    let r = run(dir.path(), &["--diff", "--unsafe-fixes", "reset.py"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(
        r.stdout
            .contains("+        optimizer.zero_grad(set_to_none=True)\n         loss.backward()\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn fix_writes_the_file_and_reports_what_was_fixed() {
    let dir = project(&[
        ("train.py", SUMMED.as_bytes()),
        ("reset.py", NO_RESET.as_bytes()),
    ]);
    let r = run(dir.path(), &["train.py", "reset.py"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("OOM201 [*] undetached-loss-append"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("OOM101 missing-zero-grad"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.ends_with(
            "[*] 1 fixable with the --fix option (1 hidden fix can be enabled with the --unsafe-fixes option)\n"
        ),
        "{}",
        r.stderr
    );
    let r = run(dir.path(), &["--fix", "train.py", "reset.py"]);
    // The unsafe fix is not applied: one finding remains.
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(
        r.stderr.starts_with(
            "Found 2 problems (1 fixed, 1 remaining) in 2 files (2 files checked)\nNo fixes available (1 hidden fix can be enabled with the --unsafe-fixes option)\n"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        read(&dir, "train.py"),
        SUMMED.replace("append(loss)", "append(loss.item())")
    );
    assert_eq!(read(&dir, "reset.py"), NO_RESET);
    let r = run(dir.path(), &["--fix", "--unsafe-fixes", "."]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(read(&dir, "reset.py")
        .contains("        optimizer.zero_grad(set_to_none=True)\n        loss.backward()"));
    let r = run(dir.path(), &["."]);
    assert_eq!(r.code, 0, "{r:#?}");
}

#[test]
fn fix_only_reports_nothing_and_succeeds() {
    let dir = project(&[("reset.py", NO_RESET.as_bytes())]);
    let r = run(dir.path(), &["--fix-only", "reset.py"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:#?}");
    assert_eq!(r.stderr, "Fixed 0 problems\n");
    let r = run(dir.path(), &["--fix-only", "--unsafe-fixes", "reset.py"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:#?}");
    assert_eq!(r.stderr, "Fixed 1 problem\n");
}

#[test]
fn crlf_stays_crlf() {
    let crlf = NO_RESET.replace('\n', "\r\n");
    let dir = project(&[
        ("reset.py", crlf.as_bytes()),
        ("train.py", SUMMED.replace('\n', "\r\n").as_bytes()),
    ]);
    let r = run(dir.path(), &["--fix", "--unsafe-fixes", "."]);
    assert_eq!(r.code, 0, "{r:#?}");
    for name in ["reset.py", "train.py"] {
        let text = read(&dir, name);
        let bare = text
            .match_indices('\n')
            .filter(|&(i, _)| i == 0 || text.as_bytes()[i - 1] != b'\r')
            .count();
        assert_eq!(bare, 0, "{name} has bare LF line endings:\n{text:?}");
    }
    assert!(read(&dir, "reset.py")
        .contains("optimizer.zero_grad(set_to_none=True)\r\n        loss.backward()\r\n"));
    assert!(read(&dir, "train.py").contains("losses.append(loss.item())\r\n"));
}

#[cfg(unix)]
#[test]
fn a_read_only_file_is_an_error_and_the_others_are_still_fixed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = project(&[
        ("locked.py", SUMMED.as_bytes()),
        ("open.py", SUMMED.as_bytes()),
    ]);
    let locked = dir.path().join("locked.py");
    let open = dir.path().join("open.py");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o640)).unwrap();
    let r = run(dir.path(), &["--fix", "."]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        r.stderr.contains("oomlint: error: locked.py: cannot write the fixes: permission denied; file left unchanged\n"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&dir, "locked.py"), SUMMED);
    assert!(read(&dir, "open.py").contains("losses.append(loss.item())"));
    let mode = std::fs::metadata(&open).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "permissions kept");
    // The unwritten file's finding is still reported.
    assert!(r.stdout.contains("locked.py"), "{}", r.stdout);
}

#[test]
fn notebooks_are_fixed_in_their_cells() {
    let lines: Vec<String> = SUMMED
        .split_inclusive('\n')
        .map(|l| serde_json::to_string(l).unwrap())
        .collect();
    let nb = format!(
        r##"{{
 "cells": [
  {{
   "cell_type": "markdown",
   "metadata": {{"tags": ["intro"]}},
   "source": ["# Training\n", "A *loop*."]
  }},
  {{
   "cell_type": "code",
   "execution_count": 7,
   "metadata": {{"collapsed": false}},
   "outputs": [{{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}}],
   "source": [
    "%matplotlib inline\n",
    {}
   ]
  }}
 ],
 "metadata": {{"kernelspec": {{"name": "python3", "display_name": "Python 3"}}}},
 "nbformat": 4,
 "nbformat_minor": 5
}}
"##,
        lines.join(",\n    ")
    );
    let dir = project(&[("train.ipynb", nb.as_bytes())]);
    let r = run(dir.path(), &["--fix", "train.ipynb"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let fixed = read(&dir, "train.ipynb");
    let new: serde_json::Value = serde_json::from_str(&fixed).expect("valid JSON");
    let old: serde_json::Value = serde_json::from_str(&nb).unwrap();
    assert_eq!(new["metadata"], old["metadata"]);
    assert_eq!(new["cells"][0], old["cells"][0]);
    for k in ["execution_count", "metadata", "outputs", "cell_type"] {
        assert_eq!(new["cells"][1][k], old["cells"][1][k], "{k}");
    }
    let source: String = new["cells"][1]["source"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        source,
        format!(
            "%matplotlib inline\n{}",
            SUMMED.replace("append(loss)", "append(loss.item())")
        )
    );
    // Only the edited line of the file changed.
    let changed: Vec<(&str, &str)> = nb
        .lines()
        .zip(fixed.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "{changed:#?}");
    assert_eq!(nb.lines().count(), fixed.lines().count());
}

#[test]
fn stdin_fix_prints_the_fixed_source() {
    let dir = project(&[]);
    let out = oomlint(dir.path())
        .args(["--fix", "--stdin-filename", "train.py"])
        .write_stdin(SUMMED)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        SUMMED.replace("append(loss)", "append(loss.item())")
    );
}

#[test]
fn json_carries_ruffs_fix_object() {
    let dir = project(&[("train.py", SUMMED.as_bytes())]);
    let r = run(dir.path(), &["--format", "json", "train.py"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v[0]["fix"],
        serde_json::json!({
            "applicability": "safe",
            "message": "Store `loss.item()`",
            "edits": [{
                "content": ".item()",
                "location": {"row": 12, "column": 27},
                "end_location": {"row": 12, "column": 27}
            }]
        })
    );
}

// ---------------------------------------------------------------------------
// The engine refuses a fix that breaks parsing
// ---------------------------------------------------------------------------

/// Deletes the colon of the first `def` line: a fix no real rule would make.
fn breaking_check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let Some(colon) = model.source.find("):") else {
        return;
    };
    out.push(Diagnostic {
        range: colon..colon + 2,
        message: "breaks".into(),
        help: String::new(),
        pattern: oomlint::pattern::Pattern::NoZeroGrad,
        fix: Some(Fix::safe(
            "break it",
            vec![Edit::delete(colon + 1..colon + 2)],
        )),
        related: Vec::new(),
    });
}

static BREAKS: Rule = Rule {
    code: "OOM998",
    name: "breaks-parsing",
    severity: Severity::Error,
    fix: FixAvailability::Always,
    doc: "",
    check: breaking_check,
    prefilter: |_| true,
    parts: None,
};

#[test]
fn a_fix_that_breaks_parsing_is_refused() {
    let out = Linter::new(&[&BREAKS]).fix_source(
        Path::new("train.py"),
        NO_RESET.as_bytes(),
        Applicability::Safe,
    );
    assert!(out.fixed.is_none());
    assert_eq!(out.applied, 0);
    assert!(
        out.refused
            .as_deref()
            .is_some_and(|r| r.contains("syntax error")),
        "{out:?}"
    );
    assert_eq!(out.report.findings.len(), 1, "the finding stays");
    assert!(
        out.report
            .warnings
            .iter()
            .any(|w| w.to_string().starts_with("train.py: not fixed")),
        "{:?}",
        out.report.warnings
    );
}

// ---------------------------------------------------------------------------
// Which rules fix, in `oomlint rules` and `oomlint rule CODE`
// ---------------------------------------------------------------------------

/// `oomlint ARGS` without the check flags that `run` adds.
fn info(args: &[&str]) -> String {
    let out = Command::cargo_bin("oomlint")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn rules_say_which_can_fix_and_how_safely() {
    let listed = info(&["rules"]);
    assert_eq!(listed.lines().count(), oomlint::rules::ALL.len());
    for (line, rule) in listed.lines().zip(oomlint::rules::ALL) {
        let marked = line.contains(" [*] ");
        assert_eq!(marked, rule.fix != FixAvailability::None, "{line}");
    }
    let fixing: Vec<&str> = oomlint::rules::ALL
        .iter()
        .filter(|r| r.fix != FixAvailability::None)
        .map(|r| r.code)
        .collect();
    // The issue names these; each must fix.
    for code in ["OOM101", "OOM201", "OOM202", "OOM301", "OOM401", "OOM402"] {
        assert!(fixing.contains(&code), "{code} has no fix");
    }
    for rule in oomlint::rules::ALL {
        let doc = &info(&["rule", rule.code]);
        let how = doc.find("## How to fix").expect("How to fix");
        match rule.fix {
            FixAvailability::None => {
                assert!(doc.contains("\nFix: none\n"), "{doc}");
                assert!(!doc.contains("## Fix safety"), "{doc}");
            }
            _ => {
                assert!(doc.contains("\nFix: "), "{doc}");
                let safety = doc
                    .find("## Fix safety")
                    .unwrap_or_else(|| panic!("{}: no Fix safety", rule.code));
                assert!(
                    safety > how,
                    "{}: Fix safety comes after How to fix",
                    rule.code
                );
            }
        }
    }
    let v: serde_json::Value = serde_json::from_str(&info(&["rules", "--format", "json"])).unwrap();
    let append = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "OOM201")
        .expect("OOM201 listed");
    assert_eq!(append["fix"], "always");
}
