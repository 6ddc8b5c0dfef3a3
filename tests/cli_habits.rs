//! ruff's command-line habits, end to end through the binary (issue 15, item 4): the
//! `--output-format` alias and the flags a typo is pointed at, a run that finds no
//! Python file, `--statistics` as JSON, `oomlint rule` by name, `--all` and near misses,
//! a mistyped subcommand, the summary line, a finding's related location in every
//! format, `--show-settings` and per-file-ignores, `--fail-on`, width and colour, `-`
//! as stdin.

mod common;
#[path = "common/sarif.rs"]
mod sarif;

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

use common::TRAIN;

/// A loop whose logged pair `(avg, acc)` carries a graph because `avg` is computed from
/// `total_loss`, which accumulates the loss: OOM202 at 15:9, OOM201 at 19:9 caused by it.
const DERIVED: &str = r#"import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    history = []
    total_loss = 0.0
    correct = 0
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        total_loss += loss
        correct += (logits.argmax(1) == y).sum().item()
        avg = total_loss / (step + 1)
        acc = correct / ((step + 1) * len(y))
        history.append((avg, acc))
    return history
"#;

/// A model loaded in bfloat16 and converted to bfloat16 again: OOM401, a warning.
const RECONVERT: &str = r#"import torch
from transformers import AutoModelForCausalLM


def load(name):
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16)
    return model
"#;

fn tree(files: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new().expect("temp dir");
    for (rel, contents) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).expect("mkdir");
        std::fs::write(p, contents).expect("write");
    }
    dir
}

fn oomlint(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("oomlint").expect("the oomlint binary");
    cmd.current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("FORCE_COLOR")
        .env_remove("COLUMNS")
        .timeout(Duration::from_secs(60));
    cmd
}

#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_with(mut cmd: Command, args: &[&str]) -> Run {
    let out = cmd.args(args).output().expect("run oomlint");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8"),
    };
    assert!(matches!(r.code, 0..=2), "{args:?}: {r:#?}");
    assert!(!r.stderr.contains("panicked"), "{args:?}: {r:#?}");
    r
}

fn run(dir: &Path, args: &[&str]) -> Run {
    run_with(oomlint(dir), args)
}

// ---------------------------------------------------------------------------
// --output-format, and what a typo is pointed at
// ---------------------------------------------------------------------------

#[test]
fn output_format_is_an_alias_of_format() {
    let dir = tree(&[("train.py", TRAIN)]);
    let a = run(
        dir.path(),
        &["--no-cache", "--output-format", "concise", "."],
    );
    let b = run(dir.path(), &["--no-cache", "--format", "concise", "."]);
    assert_eq!(a.code, 1, "{a:#?}");
    assert_eq!(a.stdout, b.stdout);
    assert!(
        a.stdout.starts_with("train.py:13:9: OOM201 "),
        "{}",
        a.stdout
    );
    for args in [
        &["--output-format=json", "."][..],
        &["check", "--output-format", "json", "."],
    ] {
        let j = run(dir.path(), args);
        let v: Value = serde_json::from_str(&j.stdout).expect("JSON");
        assert_eq!(v.as_array().map(Vec::len), Some(2), "{args:?}");
    }
    // `oomlint rules` takes it too.
    let r = run(dir.path(), &["rules", "--output-format", "json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(serde_json::from_str::<Value>(&r.stdout).is_ok());
}

#[test]
fn did_you_mean_points_at_visible_flags_only() {
    let dir = tree(&[]);
    let tip = |flag: &str| {
        let r = run(dir.path(), &[flag, "x.py"]);
        assert_eq!(r.code, 2, "{flag}: {r:#?}");
        assert!(
            r.stderr.contains(&format!("unexpected argument '{flag}'")),
            "{r:#?}"
        );
        r.stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("tip: a similar argument exists: "))
            .map(|s| s.trim_matches('\'').to_owned())
    };
    assert_eq!(tip("--output-formt").as_deref(), Some("--output-format"));
    assert_eq!(tip("--outputformat").as_deref(), Some("--output-format"));
    assert_eq!(tip("--output-fil").as_deref(), Some("--output-file"));
    assert_eq!(tip("--statistic").as_deref(), Some("--statistics"));
    // Hidden flags are never suggested: clap's own tip named `--parse-only` here.
    assert_eq!(tip("--parse-onl"), None);
    assert_eq!(tip("--no-prefiltr"), None);
    assert_eq!(tip("--prefilter-stat"), None);
}

// ---------------------------------------------------------------------------
// No Python file under the paths
// ---------------------------------------------------------------------------

#[test]
fn no_python_file_warns_and_can_fail() {
    let dir = tree(&[
        ("docs/readme.md", "# nothing to lint\n"),
        ("src/train.py", TRAIN),
    ]);
    let r = run(dir.path(), &["--no-cache", "docs"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(
        r.stderr,
        "oomlint: warning: no Python files found under the given paths\n\
         No Python files found (0 files checked)\n"
    );
    // Every format warns, on stderr; stdout keeps its shape.
    let r = run(dir.path(), &["--no-cache", "--format", "json", "docs"]);
    assert_eq!(r.stdout.trim(), "[]");
    assert!(r.stderr.contains("no Python files found"), "{r:#?}");
    // `--exit-non-zero-on-empty`: exit 2, as for a path that does not exist.
    let r = run(
        dir.path(),
        &["--no-cache", "--exit-non-zero-on-empty", "docs"],
    );
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("no Python files found"), "{r:#?}");
    // With a Python file, no warning and no failure.
    let r = run(
        dir.path(),
        &["--no-cache", "--exit-non-zero-on-empty", "--exit-zero", "."],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(!r.stderr.contains("no Python files"), "{r:#?}");
}

// ---------------------------------------------------------------------------
// --statistics
// ---------------------------------------------------------------------------

#[test]
fn statistics_honours_json_and_jsonl() {
    let dir = tree(&[("a.py", TRAIN), ("b.py", TRAIN)]);
    let r = run(
        dir.path(),
        &["--no-cache", "--statistics", "--format", "json", "."],
    );
    assert_eq!(r.code, 1, "{r:#?}");
    let v: Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(
        v,
        serde_json::json!([
            {"code": "OOM201", "name": "undetached-loss-append", "count": 2},
            {"code": "OOM202", "name": "undetached-loss-accumulate", "count": 2},
        ])
    );
    let r = run(
        dir.path(),
        &[
            "--no-cache",
            "--statistics",
            "--output-format",
            "jsonl",
            ".",
        ],
    );
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["count"], 2);
    // A format that has no statistics is refused, not ignored.
    let r = run(
        dir.path(),
        &["--no-cache", "--statistics", "--format", "sarif", "."],
    );
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("--statistics"), "{r:#?}");
    // Clean: an empty array.
    let clean = tree(&[("ok.py", "x = 1\n")]);
    let r = run(
        clean.path(),
        &["--no-cache", "--statistics", "--format", "json", "."],
    );
    assert_eq!((r.code, r.stdout.trim()), (0, "[]"));
}

// ---------------------------------------------------------------------------
// oomlint rule, and a mistyped subcommand
// ---------------------------------------------------------------------------

#[test]
fn rule_by_code_or_name_all_and_near_misses() {
    let dir = tree(&[]);
    let by_code = run(dir.path(), &["rule", "OOM201"]);
    let by_name = run(dir.path(), &["rule", "undetached-loss-append"]);
    let lower = run(dir.path(), &["rule", "oom201"]);
    assert_eq!(by_code.code, 0);
    assert!(by_code
        .stdout
        .starts_with("# OOM201 (undetached-loss-append)\n"));
    assert_eq!(by_code.stdout, by_name.stdout);
    assert_eq!(by_code.stdout, lower.stdout);

    let all = run(dir.path(), &["rule", "--all"]);
    assert_eq!(all.code, 0);
    let list = run(dir.path(), &["rules", "--format", "json"]);
    let codes: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    let headers: Vec<&str> = all
        .stdout
        .lines()
        .filter(|l| l.starts_with("# OOM"))
        .collect();
    assert_eq!(headers.len(), codes.len(), "{headers:?}");
    assert!(all.stdout.contains(&by_code.stdout));

    let near = |arg: &str| {
        let r = run(dir.path(), &["rule", arg]);
        assert_eq!(r.code, 2, "{r:#?}");
        assert!(r.stdout.is_empty());
        r.stderr
    };
    assert_eq!(
        near("undetached-loss-apend"),
        "oomlint: error: unknown rule `undetached-loss-apend`; did you mean `undetached-loss-append`?\n"
    );
    assert!(
        near("OOM21").contains("did you mean `OOM2"),
        "{}",
        near("OOM21")
    );
    assert_eq!(
        near("flake8"),
        "oomlint: error: unknown rule `flake8` (see `oomlint rules`)\n"
    );
    // A code, or --all: not neither, not both.
    assert_eq!(run(dir.path(), &["rule"]).code, 2);
    assert_eq!(run(dir.path(), &["rule", "--all", "OOM201"]).code, 2);
}

#[test]
fn mistyped_subcommand_suggests_it_unless_the_path_exists() {
    let dir = tree(&[("train.py", TRAIN)]);
    let r = run(dir.path(), &["chek", "."]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        r.stderr.starts_with(
            "error: unrecognized subcommand 'chek'\n\n  tip: a similar subcommand exists: 'check'\n"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("no such file"), "{}", r.stderr);
    assert!(run(dir.path(), &["rulse"]).stderr.contains("'rules'"));
    // A folder of that name is linted, as `oomlint src/` is.
    std::fs::create_dir(dir.path().join("chek")).unwrap();
    std::fs::write(dir.path().join("chek/t.py"), TRAIN).unwrap();
    let r = run(dir.path(), &["--no-cache", "chek"]);
    assert_eq!(r.code, 1, "{r:#?}");
    // Something that looks like a path is a path.
    let r = run(dir.path(), &["chek.py"]);
    assert!(r.stderr.contains("chek.py: no such file"), "{r:#?}");
}

// ---------------------------------------------------------------------------
// The summary line
// ---------------------------------------------------------------------------

/// The summary line: the last line on stderr but ruff's fix hint, which may follow it.
fn summary_line(stderr: &str) -> &str {
    stderr
        .lines()
        .rev()
        .find(|l| !l.starts_with("[*]") && !l.starts_with("No fixes available"))
        .unwrap_or("")
}

#[test]
fn summary_counts_findings_and_unreadable_files_apart() {
    let dir = tree(&[("a.py", TRAIN), ("b.py", DERIVED), ("c.py", "x = 1\n")]);
    std::fs::write(dir.path().join("bin.py"), b"import torch\0\x01\x02").unwrap();
    let r = run(dir.path(), &["--no-cache", "."]);
    assert_eq!(r.code, 2, "{r:#?}");
    let last = summary_line(&r.stderr);
    assert_eq!(
        last,
        "Found 4 problems in 2 files (3 files checked); 1 file could not be read"
    );
    let r = run(dir.path(), &["--no-cache", "c.py", "bin.py", "missing.py"]);
    assert_eq!(
        summary_line(&r.stderr),
        "No problems found in 1 file checked; 2 paths could not be read"
    );
    for r in [
        r,
        run(dir.path(), &["--no-cache", "--allow-unlintable", "."]),
    ] {
        let last = summary_line(&r.stderr).to_owned();
        assert!(!last.contains(") ("), "doubled brackets: {last}");
        assert!(!last.contains("(see above)"), "{last}");
    }
}

// ---------------------------------------------------------------------------
// A finding caused by another finding
// ---------------------------------------------------------------------------

#[test]
fn derived_finding_names_the_accumulation_in_every_format() {
    let dir = tree(&[("train.py", DERIVED)]);
    let note = "its graph is built up by `total_loss += loss`";

    let text = run(dir.path(), &["--no-cache", "--color", "never", "train.py"]);
    assert_eq!(text.code, 1, "{text:#?}");
    assert!(
        text.stdout
            .contains(&format!("  note: {note} (train.py:15:9)\n")),
        "{}",
        text.stdout
    );
    // Only the derived finding has the note: the accumulation itself has none.
    assert_eq!(text.stdout.matches("note:").count(), 1, "{}", text.stdout);

    let json = run(dir.path(), &["--no-cache", "--format", "json", "train.py"]);
    let findings: Vec<Value> = serde_json::from_str(&json.stdout).unwrap();
    let append = findings.iter().find(|f| f["code"] == "OOM201").unwrap();
    assert_eq!(
        (&append["line"], &append["column"]),
        (&19.into(), &9.into())
    );
    assert_eq!(
        append["related"],
        serde_json::json!([{
            "message": note, "line": 15, "column": 9, "end_line": 15, "end_column": 27
        }])
    );
    // The finding without related locations keeps exactly its ten keys, and `fix`.
    let acc = findings.iter().find(|f| f["code"] == "OOM202").unwrap();
    assert_eq!(acc.as_object().unwrap().len(), 11, "{acc}");

    let sarif = run(dir.path(), &["--no-cache", "--format", "sarif", "train.py"]);
    let log: Value = serde_json::from_str(&sarif.stdout).unwrap();
    sarif::validate("derived_finding_sarif", &log);
    let results = log["runs"][0]["results"].as_array().unwrap();
    let r201 = results.iter().find(|r| r["ruleId"] == "OOM201").unwrap();
    let rel = &r201["relatedLocations"][0];
    assert_eq!(rel["message"]["text"], note);
    assert_eq!(rel["physicalLocation"]["region"]["startLine"], 15);
    assert_eq!(rel["physicalLocation"]["region"]["startColumn"], 9);
    assert_eq!(
        rel["physicalLocation"]["artifactLocation"]["uri"],
        "train.py"
    );
    let r202 = results.iter().find(|r| r["ruleId"] == "OOM202").unwrap();
    assert!(r202.get("relatedLocations").is_none());

    let gh = run(
        dir.path(),
        &["--no-cache", "--format", "github", "train.py"],
    );
    let line = gh.stdout.lines().find(|l| l.contains("(OOM201)")).unwrap();
    assert!(
        line.ends_with(&format!("%0Anote: {note} (line 15)")),
        "{line}"
    );

    let junit = run(dir.path(), &["--no-cache", "--format", "junit", "train.py"]);
    assert!(
        junit
            .stdout
            .contains(&format!("&#10;note: {note} (train.py:15:9)</failure>")),
        "{}",
        junit.stdout
    );
}

/// `self.running = self.running + loss` and a total of a total: the related location is
/// the accumulation, through `self.` attributes and from one accumulator into another.
const ACCUMULATORS: &str = r#"import torch
import torch.nn.functional as F


class Trainer:
    def fit(self, model, loader, optimizer):
        self.running = 0.0
        self.curve = []
        for i, (x, y) in enumerate(loader):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            self.running = self.running + loss
            self.curve.append(self.running / (i + 1))


def epoch(model, loader, optimizer):
    seen = 0
    epoch_total = 0.0
    window = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        window += loss
        seen += 1
        epoch_total += window
    return epoch_total / seen
"#;

#[test]
fn related_location_follows_attributes_and_accumulators() {
    let dir = tree(&[("fit.py", ACCUMULATORS)]);
    let r = run(dir.path(), &["--no-cache", "--format", "json", "fit.py"]);
    let findings: Vec<Value> = serde_json::from_str(&r.stdout).unwrap();
    let related: Vec<(String, u64, Option<u64>)> = findings
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap(),
                f.get("related").map(|rel| rel[0]["line"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        related,
        [
            ("OOM202".to_owned(), 14, None),
            ("OOM201".to_owned(), 15, Some(14)),
            ("OOM202".to_owned(), 27, None),
            ("OOM202".to_owned(), 29, Some(27)),
        ]
    );
}

// ---------------------------------------------------------------------------
// --show-settings FILE
// ---------------------------------------------------------------------------

#[test]
fn show_settings_lists_rules_turned_off_for_the_file() {
    let dir = tree(&[
        (
            "pyproject.toml",
            "[tool.oomlint]\n\n[tool.oomlint.per-file-ignores]\n\"tests/*\" = [\"OOM2\"]\n\"legacy.py\" = [\"OOM401\"]\n",
        ),
        ("tests/test_train.py", TRAIN),
        ("legacy.py", RECONVERT),
        ("train.py", TRAIN),
    ]);
    let off = |path: &str| {
        let r = run(dir.path(), &["--show-settings", path]);
        assert_eq!(r.code, 0, "{r:#?}");
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix("rules off for this file (per-file-ignores) = "))
            .map(str::to_owned)
    };
    assert_eq!(
        off("tests/test_train.py").as_deref(),
        Some(r#"["OOM201", "OOM202", "OOM203", "OOM204"]"#)
    );
    assert_eq!(off("legacy.py").as_deref(), Some(r#"["OOM401"]"#));
    assert_eq!(off("train.py").as_deref(), Some("[]"));
    // A folder has no such line: the entries match files.
    assert_eq!(off("tests"), None);
}

// ---------------------------------------------------------------------------
// --fail-on
// ---------------------------------------------------------------------------

#[test]
fn fail_on_error_lets_warnings_pass() {
    let dir = tree(&[("load.py", RECONVERT), ("train.py", TRAIN)]);
    let r = run(
        dir.path(),
        &["--no-cache", "--format", "concise", "load.py"],
    );
    assert_eq!(r.code, 1, "a warning fails by default: {r:#?}");
    assert!(r.stdout.contains("OOM401"), "{r:#?}");
    let r = run(
        dir.path(),
        &[
            "--no-cache",
            "--fail-on",
            "error",
            "--format",
            "concise",
            "load.py",
        ],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stdout.contains("OOM401"),
        "the warning is still shown: {r:#?}"
    );
    let r = run(dir.path(), &["--no-cache", "--fail-on", "error", "."]);
    assert_eq!(r.code, 1, "an error still fails: {r:#?}");
    let r = run(
        dir.path(),
        &["--no-cache", "--fail-on", "warning", "load.py"],
    );
    assert_eq!(r.code, 1, "{r:#?}");
    let r = run(dir.path(), &["--fail-on", "info", "load.py"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

// ---------------------------------------------------------------------------
// Width and colour
// ---------------------------------------------------------------------------

fn longest_line(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn text_is_a_fixed_width_when_not_a_terminal() {
    let dir = tree(&[("train.py", DERIVED)]);
    let plain = run(dir.path(), &["--no-cache", "train.py"]);
    let mut cmd = oomlint(dir.path());
    cmd.env("COLUMNS", "50");
    let narrow = run_with(cmd, &["--no-cache", "train.py"]);
    assert_eq!(
        plain.stdout, narrow.stdout,
        "COLUMNS is a terminal's, not a pipe's"
    );
    // miette wraps messages and help to 100 columns (the note line is ours, and short).
    let wrapped: Vec<&str> = plain
        .stdout
        .lines()
        .filter(|l| !l.contains("note:"))
        .collect();
    assert!(longest_line(&wrapped.join("\n")) <= 100, "{}", plain.stdout);
    assert!(plain.stdout.lines().any(|l| l.chars().count() > 60));
}

/// Runs `oomlint` on a pseudo-terminal of `cols` columns through util-linux `script`.
fn on_terminal(dir: &Path, cols: u16, env: &str, args: &str) -> Option<String> {
    let bin = assert_cmd::cargo::cargo_bin("oomlint");
    let inner = format!("stty cols {cols} rows 50; {env} '{}' {args}", bin.display());
    let out = std::process::Command::new("script")
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("FORCE_COLOR")
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .ok()?;
    // `script` that cannot open a pseudo-terminal says so itself (a sandbox without ptys).
    if String::from_utf8_lossy(&out.stderr).starts_with("script:") {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).replace('\r', ""))
}

#[test]
#[cfg(target_os = "linux")]
fn text_fits_the_terminal_and_colour_follows_the_environment() {
    let dir = tree(&[("train.py", DERIVED)]);
    let Some(narrow) = on_terminal(dir.path(), 60, "", "--no-cache --color never train.py") else {
        eprintln!(
            "*** SKIPPED text_fits_the_terminal: no util-linux `script` (or no pseudo-terminal) to run oomlint on a terminal"
        );
        return;
    };
    let wide = on_terminal(dir.path(), 160, "", "--no-cache --color never train.py").unwrap();
    // Messages and help wrap to the width (source lines are shown as they are).
    let prose = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with("  ×") || l.starts_with("  │") || l.contains("help:"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(narrow.contains("OOM201"), "{narrow}");
    assert!(longest_line(&prose(&narrow)) <= 60, "{narrow}");
    let message = |s: &str| {
        s.lines()
            .find(|l| l.contains("is stored in `history`"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    assert!(!message(&narrow).contains("stays alive"), "{narrow}");
    assert!(message(&wide).contains("stays alive"), "{wide}");
    assert!(longest_line(&prose(&wide)) > 100, "{wide}");
    // On a terminal, colour unless NO_COLOR; off a terminal, colour with FORCE_COLOR.
    let auto = on_terminal(dir.path(), 100, "", "--no-cache train.py").unwrap();
    assert!(auto.contains("\x1b["), "{auto}");
    let no = on_terminal(dir.path(), 100, "NO_COLOR=1", "--no-cache train.py").unwrap();
    assert!(!no.contains("\x1b["), "{no}");
    let forced = on_terminal(
        dir.path(),
        100,
        "FORCE_COLOR=1 NO_COLOR=1",
        "--no-cache train.py",
    )
    .unwrap();
    assert!(!forced.contains("\x1b["), "NO_COLOR wins: {forced}");
}

#[test]
fn force_color_and_no_color_off_a_terminal() {
    let dir = tree(&[("train.py", TRAIN)]);
    let with = |vars: &[(&str, &str)], args: &[&str]| {
        let mut cmd = oomlint(dir.path());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut all = vec!["--no-cache", "train.py"];
        all.extend_from_slice(args);
        run_with(cmd, &all).stdout
    };
    assert!(!with(&[], &[]).contains('\x1b'), "a pipe gets no colour");
    assert!(with(&[("FORCE_COLOR", "1")], &[]).contains("\x1b["));
    assert!(
        !with(&[("FORCE_COLOR", "")], &[]).contains('\x1b'),
        "empty is unset"
    );
    assert!(!with(&[("FORCE_COLOR", "1"), ("NO_COLOR", "1")], &[]).contains('\x1b'));
    assert!(!with(&[("FORCE_COLOR", "1")], &["--color", "never"]).contains('\x1b'));
    assert!(with(&[("NO_COLOR", "1")], &["--color", "always"]).contains("\x1b["));
}

// ---------------------------------------------------------------------------
// `-` reads stdin
// ---------------------------------------------------------------------------

#[test]
fn dash_reads_stdin_with_an_optional_name() {
    let dir = tree(&[(
        "pyproject.toml",
        "[tool.oomlint.per-file-ignores]\n\"scripts/*\" = [\"OOM202\"]\n",
    )]);
    let stdin = |args: &[&str]| {
        let mut cmd = oomlint(dir.path());
        cmd.write_stdin(TRAIN);
        run_with(cmd, args)
    };
    let r = stdin(&["--no-cache", "--format", "concise", "-"]);
    assert_eq!(r.code, 1, "{r:#?}");
    let at: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(at, ["-:13:9:", "-:14:9:"], "{r:#?}");
    assert!(r.stdout.starts_with("-:13:9: OOM201 "), "{}", r.stdout);
    // Named: reported under the name, and per-file-ignores apply by it.
    let r = stdin(&[
        "--no-cache",
        "--format",
        "concise",
        "--stdin-filename",
        "scripts/t.py",
        "-",
    ]);
    assert_eq!(r.code, 1, "{r:#?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{r:#?}");
    assert!(lines[0].starts_with("scripts/t.py:13:9: OOM201 "), "{r:#?}");
    // `-` beside another path is refused.
    let r = stdin(&["--no-cache", "-", "other.py"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("`-` reads stdin"), "{r:#?}");
}
