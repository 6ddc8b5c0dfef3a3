//! End-to-end tests of the `oomlint` binary: exit codes, output formats, the walk,
//! rule selection, the rule documentation commands, and bad input.
//!
//! Every test writes its own small Python sources into a temporary directory and runs
//! the binary there with relative paths, so paths in the output (and the snapshots
//! under `tests/snapshots/`) do not depend on the machine or on the bundled fixtures.

mod common;

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------

/// A training loop that keeps the loss with its graph twice: OOM201 at 13:9
/// (`losses.append(loss)`) and OOM202 at 14:9 (`total += loss`); shared with the
/// robustness and stress tests.
use common::TRAIN;
const TRAIN_APPEND: (usize, usize) = (13, 9);
const TRAIN_ACCUMULATE: (usize, usize) = (14, 9);

/// The same loop done right: `.item()` everywhere.
const CLEAN: &str = r#"import torch
import torch.nn.functional as F


def train_epoch(model, loader, optimizer):
    losses = []
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        total += loss.item()
    return losses, total / len(loader)
"#;

/// A Hugging Face style fine-tuning loop: OOM202 at 12:9, and a clean `.item()` log.
const FINETUNE: &str = r#"import torch


def finetune(model, loader, optimizer):
    running_loss = 0.0
    step_losses = []
    for batch in loader:
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()
        optimizer.step()
        running_loss = running_loss + loss
        step_losses.append(loss.item())
        optimizer.zero_grad()
    return running_loss / len(loader), step_losses
"#;

/// Only an OOM201: 9:9.
const APPEND_ONLY: &str = r#"import torch


def collect(model, loader, criterion):
    history = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        history.append(loss)
    return history
"#;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A temporary directory holding `files` (relative path, contents).
fn tree(files: &[(&str, &[u8])]) -> TempDir {
    let dir = TempDir::new().expect("temp dir");
    for (rel, contents) in files {
        write(dir.path(), rel, contents);
    }
    dir
}

fn write(root: &Path, rel: &str, contents: &[u8]) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, contents).expect("write");
}

/// The binary, run in `dir`, with nothing from the environment that changes its output.
fn oomlint(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("oomlint").expect("the oomlint binary");
    cmd.current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LOG")
        .timeout(Duration::from_secs(60));
    cmd
}

#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs oomlint in `dir` with `args` and checks that it did not crash: it exited on its
/// own (no signal, no timeout) with 0, 1 or 2 (never 101, a panic), and said nothing
/// about a panic.
fn run(dir: &Path, args: &[&str]) -> Run {
    let out = oomlint(dir).args(args).output().expect("run oomlint");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    };
    assert!(
        matches!(r.code, 0..=2),
        "oomlint {args:?} crashed, was killed or timed out (status {:?}):\n{r:#?}",
        out.status
    );
    assert!(
        !r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"),
        "oomlint {args:?} panicked:\n{}",
        r.stderr
    );
    r
}

/// The findings of a `--format json` run.
fn json_findings(dir: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let r = run(dir, &all);
    match serde_json::from_str::<Value>(&r.stdout) {
        Ok(Value::Array(v)) => v,
        other => panic!("--format json is not an array: {other:?}\n{}", r.stdout),
    }
}

/// `(path, line, column, code)` of each finding of a JSON run.
fn positions(findings: &[Value]) -> Vec<(String, usize, usize, String)> {
    findings
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_owned(),
                f["line"].as_u64().expect("line") as usize,
                f["column"].as_u64().expect("column") as usize,
                f["code"].as_str().expect("code").to_owned(),
            )
        })
        .collect()
}

/// `(path, line, code)` of each line of a concise run.
fn concise(stdout: &str) -> Vec<(String, usize, String)> {
    stdout
        .lines()
        .map(|l| {
            let mut parts = l.splitn(4, ':');
            let path = parts.next().expect("path").to_owned();
            let line = parts.next().expect("line").parse().expect("line number");
            let _col = parts.next().expect("column");
            let rest = parts.next().expect("rest").trim_start();
            let code = rest.split(' ').next().expect("code").to_owned();
            (path, line, code)
        })
        .collect()
}

fn codes(findings: &[Value]) -> Vec<String> {
    findings
        .iter()
        .map(|f| f["code"].as_str().expect("code").to_owned())
        .collect()
}

/// The 1-based (line, column) where `needle` first occurs in `src`, in characters.
fn locate(src: &str, needle: &str) -> (usize, usize) {
    for (i, line) in src.lines().enumerate() {
        if let Some(byte) = line.find(needle) {
            return (i + 1, line[..byte].chars().count() + 1);
        }
    }
    panic!("`{needle}` not in source");
}

/// The standard tree of the snapshot tests: two files with findings, one clean file.
fn standard_tree() -> TempDir {
    tree(&[
        ("train.py", TRAIN.as_bytes()),
        ("clean.py", CLEAN.as_bytes()),
        ("models/finetune.py", FINETUNE.as_bytes()),
    ])
}

// ---------------------------------------------------------------------------
// Exit codes
// ---------------------------------------------------------------------------

#[test]
fn exit_code_0_when_clean() {
    let dir = tree(&[("clean.py", CLEAN.as_bytes())]);
    let r = run(dir.path(), &["clean.py"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.stdout, "");
}

#[test]
fn exit_code_1_with_findings() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let r = run(dir.path(), &["train.py"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stdout.contains("OOM201"), "{}", r.stdout);
}

#[test]
fn exit_code_2_for_unknown_rule_code() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    for args in [
        &["--select", "OOM999", "train.py"][..],
        &["--ignore", "OOM999", "train.py"],
        &["--extend-select", "E501", "train.py"],
    ] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        assert!(
            r.stderr.contains(args[1]),
            "the error names the bad code: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "", "{args:?}: nothing linted on a usage error");
    }
}

#[test]
fn exit_code_2_for_unknown_format() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let r = run(dir.path(), &["--format", "xml", "train.py"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("xml"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

#[test]
fn exit_code_2_for_zero_threads() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let r = run(dir.path(), &["-j", "0", "train.py"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

#[test]
fn exit_zero_gives_0_with_findings() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let r = run(
        dir.path(),
        &["--exit-zero", "--format", "concise", "train.py"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(concise(&r.stdout).len(), 2, "findings still printed");
}

#[test]
fn nonexistent_path_is_exit_2_and_other_paths_are_still_linted() {
    let dir = tree(&[
        ("train.py", TRAIN.as_bytes()),
        ("pkg/loop.py", APPEND_ONLY.as_bytes()),
    ]);
    let r = run(
        dir.path(),
        &[
            "--format",
            "concise",
            "missing.py",
            "train.py",
            "no_such_dir/",
            "pkg",
        ],
    );
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("missing.py"), "{}", r.stderr);
    assert!(r.stderr.contains("no_such_dir"), "{}", r.stderr);
    assert_eq!(
        concise(&r.stdout),
        [
            ("pkg/loop.py".to_owned(), 9, "OOM201".to_owned()),
            ("train.py".to_owned(), TRAIN_APPEND.0, "OOM201".to_owned()),
            (
                "train.py".to_owned(),
                TRAIN_ACCUMULATE.0,
                "OOM202".to_owned()
            ),
        ]
    );
}

// ---------------------------------------------------------------------------
// Command line shape
// ---------------------------------------------------------------------------

#[test]
fn check_subcommand_is_optional() {
    let dir = standard_tree();
    let pairs: [(&[&str], &[&str]); 3] = [
        (&["models/"], &["check", "models/"]),
        (
            &["--format", "json", "."],
            &["check", "--format", "json", "."],
        ),
        (
            &["train.py", "--format", "concise"],
            &["check", "train.py", "--format", "concise"],
        ),
    ];
    for (short, long) in pairs {
        let a = run(dir.path(), short);
        let b = run(dir.path(), long);
        assert_eq!(a.code, b.code, "{short:?} vs {long:?}");
        assert_eq!(a.stdout, b.stdout, "{short:?} vs {long:?}");
        assert_eq!(a.stderr, b.stderr, "{short:?} vs {long:?}");
        assert!(!a.stdout.is_empty());
    }
}

#[test]
fn no_path_means_current_directory() {
    let dir = standard_tree();
    let a = run(dir.path(), &["--format", "concise"]);
    let b = run(dir.path(), &["--format", "concise", "."]);
    assert_eq!(a.code, 1);
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.stderr, b.stderr);
    let files: Vec<String> = concise(&a.stdout).into_iter().map(|f| f.0).collect();
    assert!(files.contains(&"train.py".to_owned()), "{}", a.stdout);
    assert!(
        files.contains(&"models/finetune.py".to_owned()),
        "{}",
        a.stdout
    );
    assert!(
        !a.stdout.contains("./"),
        "paths are shown without `./`: {}",
        a.stdout
    );
}

#[test]
fn version() {
    let dir = TempDir::new().expect("temp dir");
    for flag in ["--version", "-V"] {
        let r = run(dir.path(), &[flag]);
        assert_eq!(r.code, 0, "{r:#?}");
        assert_eq!(
            r.stdout.trim(),
            format!("oomlint {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

// ---------------------------------------------------------------------------
// Output formats
// ---------------------------------------------------------------------------

/// The summary line: the first line on stderr (ruff's fix hints may follow it).
fn summary_line(stderr: &str) -> &str {
    stderr.lines().next().unwrap_or("")
}

const JSON_KEYS: [&str; 11] = [
    "code",
    "name",
    "severity",
    "message",
    "help",
    "path",
    "line",
    "column",
    "end_line",
    "end_column",
    // ruff's fix object, or null.
    "fix",
];

#[test]
fn json_format_shape_and_positions() {
    let dir = standard_tree();
    let findings = json_findings(dir.path(), &[]);
    assert_eq!(findings.len(), 3, "{findings:#?}");
    for f in &findings {
        let obj = f.as_object().expect("each finding is an object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = JSON_KEYS.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "exactly these keys: {f:#}");
        for k in ["code", "name", "severity", "message", "help", "path"] {
            assert!(
                obj[k].as_str().is_some_and(|s| !s.is_empty()),
                "{k} is a non-empty string: {f:#}"
            );
        }
        for k in ["line", "column", "end_line", "end_column"] {
            assert!(
                obj[k].as_u64().is_some_and(|n| n >= 1),
                "{k} is 1-based: {f:#}"
            );
        }
        assert!(
            (obj["line"].as_u64(), obj["column"].as_u64())
                < (obj["end_line"].as_u64(), obj["end_column"].as_u64()),
            "the span is not empty: {f:#}"
        );
        assert_eq!(obj["severity"], "error");
    }

    // Check the append finding against the source, span and all.
    let append = findings
        .iter()
        .find(|f| f["path"] == "train.py" && f["code"] == "OOM201")
        .expect("OOM201 in train.py");
    let (line, col) = locate(TRAIN, "losses.append(loss)");
    assert_eq!((line, col), TRAIN_APPEND);
    assert_eq!(append["name"], "undetached-loss-append");
    assert_eq!(append["line"], line);
    assert_eq!(append["column"], col);
    assert_eq!(append["end_line"], line);
    assert_eq!(
        append["end_column"],
        col + "losses.append(loss)".len(),
        "end_column is exclusive"
    );

    let accumulate = findings
        .iter()
        .find(|f| f["path"] == "models/finetune.py")
        .expect("finding in models/finetune.py");
    assert_eq!(accumulate["code"], "OOM202");
    assert_eq!(
        (accumulate["line"].clone(), accumulate["column"].clone()),
        (
            Value::from(locate(FINETUNE, "running_loss = running_loss + loss").0),
            Value::from(9)
        )
    );
}

#[test]
fn json_format_is_an_empty_array_when_clean() {
    let dir = tree(&[("clean.py", CLEAN.as_bytes())]);
    let r = run(dir.path(), &["--format", "json"]);
    assert_eq!(r.code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&r.stdout).expect("json"),
        Value::Array(vec![])
    );
    assert_eq!(r.stderr, "", "no summary line in json");
}

#[test]
fn jsonl_format_one_object_per_line() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--format", "jsonl"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "", "no summary line in jsonl");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.iter().all(Value::is_object));
    assert_eq!(
        lines,
        json_findings(dir.path(), &[]),
        "the same objects as json"
    );
}

#[test]
fn concise_format_is_path_line_col_code_message() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--format", "concise"]);
    assert_eq!(r.code, 1);
    let expected: String = json_findings(dir.path(), &[])
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{}: {} {}\n",
                f["path"].as_str().unwrap(),
                f["line"],
                f["column"],
                f["code"].as_str().unwrap(),
                f["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(r.stdout, expected);
    assert!(r.stdout.starts_with("models/finetune.py:12:9: OOM202 "));
}

#[test]
fn text_summary_line_on_stderr() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--color", "never"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        summary_line(&r.stderr),
        "Found 3 problems in 2 files (3 files checked)"
    );

    let r = run(dir.path(), &["--color", "never", "train.py"]);
    assert_eq!(
        summary_line(&r.stderr),
        "Found 2 problems in 1 file (1 file checked)"
    );

    let r = run(dir.path(), &["--color", "never", "models"]);
    assert_eq!(
        summary_line(&r.stderr),
        "Found 1 problem in 1 file (1 file checked)"
    );

    let r = run(dir.path(), &["clean.py"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout, "");
    assert_eq!(r.stderr, "All checks passed (1 file checked)\n");

    let r = run(dir.path(), &["--quiet", "--color", "never"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "", "--quiet drops the summary");
    assert!(!r.stdout.is_empty(), "--quiet keeps the findings");
}

#[test]
fn color_never_and_always() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let never = run(dir.path(), &["--color", "never"]);
    assert!(!never.stdout.contains('\x1b'), "{}", never.stdout);
    let always = run(dir.path(), &["--color", "always"]);
    assert!(always.stdout.contains('\x1b'), "{}", always.stdout);
    // `auto` with stdout not a terminal: no colour.
    let auto = run(dir.path(), &[]);
    assert_eq!(auto.stdout, never.stdout);
}

#[test]
#[cfg(unix)] // an ESC in a file name
fn control_characters_in_file_names_are_escaped() {
    let dir = tree(&[("evil\x1b[31m.py", TRAIN.as_bytes())]);
    for format in ["text", "concise"] {
        let r = run(dir.path(), &["--format", format, "--color", "never"]);
        assert_eq!(r.code, 1);
        assert!(!r.stdout.contains('\x1b'), "{format}: {:?}", r.stdout);
        assert!(r.stdout.contains("evil"), "{format}: {}", r.stdout);
    }
}

// ---------------------------------------------------------------------------
// Snapshots: one per output format
// ---------------------------------------------------------------------------

fn stdout_and_stderr(r: &Run) -> String {
    format!(
        "exit code: {}\n----- stdout -----\n{}----- stderr -----\n{}",
        r.code, r.stdout, r.stderr
    )
}

#[test]
fn snapshot_text() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--color", "never"]);
    insta::assert_snapshot!("text", stdout_and_stderr(&r));
}

#[test]
fn snapshot_concise() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--format", "concise"]);
    insta::assert_snapshot!("concise", stdout_and_stderr(&r));
}

#[test]
fn snapshot_json() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--format", "json"]);
    insta::assert_snapshot!("json", stdout_and_stderr(&r));
}

#[test]
fn snapshot_jsonl() {
    let dir = standard_tree();
    let r = run(dir.path(), &["--format", "jsonl"]);
    insta::assert_snapshot!("jsonl", stdout_and_stderr(&r));
}

#[test]
fn snapshot_statistics() {
    let dir = tree(&[
        ("train.py", TRAIN.as_bytes()),
        ("clean.py", CLEAN.as_bytes()),
        ("models/finetune.py", FINETUNE.as_bytes()),
        ("collect.py", APPEND_ONLY.as_bytes()),
        ("more/collect.py", APPEND_ONLY.as_bytes()),
    ]);
    let r = run(dir.path(), &["--statistics"]);
    insta::assert_snapshot!("statistics", stdout_and_stderr(&r));
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

#[test]
fn statistics_counts_per_rule() {
    let dir = tree(&[
        ("train.py", TRAIN.as_bytes()),
        ("a.py", APPEND_ONLY.as_bytes()),
        ("b/a.py", APPEND_ONLY.as_bytes()),
        ("c/d/a.py", APPEND_ONLY.as_bytes()),
        ("ft.py", FINETUNE.as_bytes()),
        ("clean.py", CLEAN.as_bytes()),
    ]);
    let r = run(dir.path(), &["--statistics"]);
    assert_eq!(r.code, 1, "{r:#?}");
    let rows: Vec<(usize, String, String)> = r
        .stdout
        .lines()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "count, code, name: {l:?}");
            (
                cols[0].trim().parse().expect("count"),
                cols[1].to_owned(),
                cols[2].to_owned(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (4, "OOM201".into(), "undetached-loss-append".into()),
            (2, "OOM202".into(), "undetached-loss-accumulate".into()),
        ]
    );

    // The counts agree with the findings, and follow the selection.
    let r = run(dir.path(), &["--statistics", "--select", "OOM202"]);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("2\tOOM202"), "{}", r.stdout);

    let r = run(dir.path(), &["--statistics", "clean.py"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout, "");
}

// ---------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------

#[test]
fn output_is_deterministic_and_sorted() {
    // 60 files in nested directories; every third has findings, some two.
    let mut files: Vec<(String, &[u8])> = Vec::new();
    for i in 0..60 {
        let dir = match i % 5 {
            0 => String::new(),
            1 => "a/".to_owned(),
            2 => "a/b/".to_owned(),
            3 => format!("pkg{}/", i % 3),
            _ => "z/deep/er/".to_owned(),
        };
        let src: &[u8] = match i % 6 {
            0 => TRAIN.as_bytes(),
            3 => APPEND_ONLY.as_bytes(),
            1 => FINETUNE.as_bytes(),
            _ => CLEAN.as_bytes(),
        };
        files.push((format!("{dir}m{i:02}.py"), src));
    }
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    let dir = tree(&borrowed);

    let first = run(dir.path(), &["--format", "concise", "-j", "1"]);
    assert_eq!(first.code, 1);
    assert_eq!(
        first.stderr, "",
        "concise prints no summary: {}",
        first.stderr
    );
    let found = concise(&first.stdout);
    // 10 x TRAIN (2 each) + 10 x APPEND_ONLY + 10 x FINETUNE.
    assert_eq!(found.len(), 40, "{}", first.stdout);

    for args in [
        &["--format", "concise", "-j", "2"][..],
        &["--format", "concise", "-j", "8"],
        &["--format", "concise"],
        &["--format", "concise"],
        &["--format", "concise"],
    ] {
        let again = run(dir.path(), args);
        assert_eq!(again.stdout, first.stdout, "{args:?} differs from -j 1");
    }

    let a = json_findings(dir.path(), &["-j", "1"]);
    let b = json_findings(dir.path(), &["-j", "2"]);
    assert_eq!(a, b);
    let pos = positions(&a);
    let mut sorted = pos.clone();
    sorted
        .sort_by(|x, y| (Path::new(&x.0), x.1, x.2, &x.3).cmp(&(Path::new(&y.0), y.1, y.2, &y.3)));
    assert_eq!(pos, sorted, "sorted by path, line, column");
}

#[test]
fn overlapping_paths_lint_each_file_once_in_path_order() {
    let dir = tree(&[
        ("a.py", APPEND_ONLY.as_bytes()),
        ("pkg/m.py", APPEND_ONLY.as_bytes()),
        ("zz/m.py", APPEND_ONLY.as_bytes()),
    ]);
    let expected = ["a.py", "pkg/m.py", "zz/m.py"];
    for args in [
        &["--format", "concise", "pkg/", "."][..],
        &["--format", "concise", ".", "pkg"],
        &["--format", "concise", "./zz", "pkg/m.py", "a.py"],
    ] {
        let r = run(dir.path(), args);
        let files: Vec<String> = concise(&r.stdout).into_iter().map(|f| f.0).collect();
        assert_eq!(files, expected, "{args:?}");
    }
    let r = run(dir.path(), &["--color", "never", "pkg/", "."]);
    assert_eq!(
        summary_line(&r.stderr),
        "Found 3 problems in 3 files (3 files checked)"
    );
}

// ---------------------------------------------------------------------------
// Walking
// ---------------------------------------------------------------------------

/// Linted paths of a concise run, deduplicated in order.
fn linted_files(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--format", "concise"];
    all.extend_from_slice(args);
    let r = run(dir, &all);
    let mut files: Vec<String> = concise(&r.stdout).into_iter().map(|f| f.0).collect();
    files.dedup();
    files
}

#[test]
fn gitignored_files_are_skipped_without_a_git_repo() {
    let dir = tree(&[
        (".gitignore", b"ignored.py\nscratch/\n"),
        ("train.py", APPEND_ONLY.as_bytes()),
        ("ignored.py", APPEND_ONLY.as_bytes()),
        ("scratch/try.py", APPEND_ONLY.as_bytes()),
        ("sub/.gitignore", b"local.py\n"),
        ("sub/local.py", APPEND_ONLY.as_bytes()),
        ("sub/kept.py", APPEND_ONLY.as_bytes()),
        (".ignore", b"also_ignored.py\n"),
        ("also_ignored.py", APPEND_ONLY.as_bytes()),
    ]);
    assert_eq!(linted_files(dir.path(), &[]), ["sub/kept.py", "train.py"]);
    assert_eq!(
        linted_files(dir.path(), &["--no-respect-gitignore"]),
        [
            "also_ignored.py",
            "ignored.py",
            "scratch/try.py",
            "sub/kept.py",
            "sub/local.py",
            "train.py"
        ]
    );
    // Named on the command line: linted even though ignored.
    assert_eq!(
        linted_files(dir.path(), &["ignored.py", "sub/local.py"]),
        ["ignored.py", "sub/local.py"]
    );
}

#[test]
fn hidden_and_environment_directories_are_skipped() {
    let skipped = [
        ".hidden",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        "site-packages",
        "build",
        "dist",
        "pkg/build",
        "pkg/.cache",
    ];
    let mut files: Vec<(String, &[u8])> = skipped
        .iter()
        .map(|d| (format!("{d}/m.py"), APPEND_ONLY.as_bytes()))
        .collect();
    files.push(("pkg/m.py".into(), APPEND_ONLY.as_bytes()));
    files.push(("builder/m.py".into(), APPEND_ONLY.as_bytes()));
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    let dir = tree(&borrowed);

    assert_eq!(linted_files(dir.path(), &[]), ["builder/m.py", "pkg/m.py"]);
    // A skipped directory or a file in one, named on the command line, is linted.
    assert_eq!(linted_files(dir.path(), &["venv/m.py"]), ["venv/m.py"]);
    assert_eq!(
        linted_files(dir.path(), &["node_modules/m.py", "pkg/build/m.py"]),
        ["node_modules/m.py", "pkg/build/m.py"]
    );
    assert_eq!(linted_files(dir.path(), &[".hidden"]), [".hidden/m.py"]);
}

#[test]
fn skipped_directory_named_on_the_command_line_is_walked() {
    let dir = tree(&[
        ("build/m.py", APPEND_ONLY.as_bytes()),
        ("venv/lib/m.py", APPEND_ONLY.as_bytes()),
    ]);
    assert_eq!(linted_files(dir.path(), &["build"]), ["build/m.py"]);
    assert_eq!(linted_files(dir.path(), &["venv/lib"]), ["venv/lib/m.py"]);
}

#[test]
fn project_below_a_folder_named_build_is_linted() {
    let dir = tree(&[
        ("build/proj/train.py", APPEND_ONLY.as_bytes()),
        ("other/README.md", b"elsewhere\n"),
    ]);
    let other = dir.path().join("other");
    let abs = dir.path().join("build/proj");
    let abs = abs.to_str().expect("UTF-8 temp path");
    let r = run(&other, &["--format", "concise", abs]);
    assert_eq!(concise(&r.stdout).len(), 1, "absolute path: {r:#?}");
    let r = run(&other, &["--format", "concise", "../build/proj"]);
    assert_eq!(concise(&r.stdout).len(), 1, "relative path: {r:#?}");
}

#[test]
fn exclude_globs_skip_files_but_not_named_ones() {
    let dir = tree(&[
        ("train.py", APPEND_ONLY.as_bytes()),
        ("gen_model.py", APPEND_ONLY.as_bytes()),
        ("pkg/gen_layers.py", APPEND_ONLY.as_bytes()),
        ("pkg/core.py", APPEND_ONLY.as_bytes()),
        ("legacy/old.py", APPEND_ONLY.as_bytes()),
    ]);
    assert_eq!(
        linted_files(dir.path(), &["--exclude", "gen_*.py"]),
        ["legacy/old.py", "pkg/core.py", "train.py"]
    );
    assert_eq!(
        linted_files(
            dir.path(),
            &["--exclude", "gen_*.py", "--exclude", "legacy"]
        ),
        ["pkg/core.py", "train.py"]
    );
    assert_eq!(
        linted_files(dir.path(), &["--exclude", "gen_*.py", "pkg"]),
        ["pkg/core.py"]
    );
    // A file named on the command line is linted even when excluded.
    assert_eq!(
        linted_files(dir.path(), &["--exclude", "gen_*.py", "gen_model.py"]),
        ["gen_model.py"]
    );
}

#[test]
fn only_python_files_are_walked() {
    let dir = tree(&[
        ("train.py", APPEND_ONLY.as_bytes()),
        ("notes.txt", APPEND_ONLY.as_bytes()),
        ("train.py.bak", APPEND_ONLY.as_bytes()),
        ("compiled.pyc", b"\x55\x0d\x0d\x0a\x00\x00"),
        ("Makefile", APPEND_ONLY.as_bytes()),
        ("data.py.json", b"{}"),
    ]);
    let r = run(dir.path(), &["--color", "never"]);
    assert_eq!(
        summary_line(&r.stderr),
        "Found 1 problem in 1 file (1 file checked)"
    );
    assert_eq!(linted_files(dir.path(), &[]), ["train.py"]);
    // Named explicitly, any file is linted.
    assert_eq!(linted_files(dir.path(), &["notes.txt"]), ["notes.txt"]);
}

// ---------------------------------------------------------------------------
// Rule selection
// ---------------------------------------------------------------------------

#[test]
fn select_ignore_prefix_and_extend_select() {
    let dir = tree(&[("train.py", TRAIN.as_bytes())]);
    let d = dir.path();
    assert_eq!(codes(&json_findings(d, &[])), ["OOM201", "OOM202"]);
    assert_eq!(
        codes(&json_findings(d, &["--select", "OOM201"])),
        ["OOM201"]
    );
    assert_eq!(
        codes(&json_findings(d, &["--select", "OOM202"])),
        ["OOM202"]
    );
    assert_eq!(
        codes(&json_findings(d, &["--select", "OOM2"])),
        ["OOM201", "OOM202"]
    );
    assert_eq!(
        codes(&json_findings(d, &["--select", "OOM201,OOM202"])),
        ["OOM201", "OOM202"]
    );
    assert_eq!(
        codes(&json_findings(d, &["--select", "ALL"])),
        ["OOM201", "OOM202"]
    );
    assert_eq!(
        codes(&json_findings(d, &["--ignore", "OOM202"])),
        ["OOM201"]
    );
    assert!(json_findings(d, &["--ignore", "OOM2"]).is_empty());
    assert_eq!(
        codes(&json_findings(
            d,
            &["--select", "OOM201", "--extend-select", "OOM202"]
        )),
        ["OOM201", "OOM202"]
    );
    assert_eq!(
        codes(&json_findings(
            d,
            &["--select", "OOM2", "--ignore", "OOM201"]
        )),
        ["OOM202"]
    );
    // A family with no rule yet is a valid prefix that selects nothing.
    assert!(json_findings(d, &["--select", "OOM6"]).is_empty());

    let r = run(d, &["--ignore", "OOM2"]);
    assert_eq!(r.code, 0, "everything ignored: clean");
    let r = run(d, &["--select", "OOM202"]);
    assert_eq!(r.code, 1);
}

// ---------------------------------------------------------------------------
// Rule documentation
// ---------------------------------------------------------------------------

#[test]
fn rules_lists_every_code() {
    let dir = TempDir::new().expect("temp dir");
    let r = run(dir.path(), &["rules"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.stdout.lines().count(), oomlint::rules::ALL.len());
    for (line, rule) in r.stdout.lines().zip(oomlint::rules::ALL) {
        assert!(line.starts_with(rule.code), "{line}");
        assert!(line.contains(rule.name), "{line}");
    }
    assert!(r.stdout.contains("OOM201") && r.stdout.contains("OOM202"));
}

#[test]
fn rules_json_lists_code_name_summary() {
    let dir = TempDir::new().expect("temp dir");
    let r = run(dir.path(), &["rules", "--format", "json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let list: Vec<Value> = serde_json::from_str(&r.stdout).expect("json array");
    let listed: Vec<&str> = list
        .iter()
        .map(|r| r["code"].as_str().expect("code"))
        .collect();
    let all: Vec<&str> = oomlint::rules::ALL.iter().map(|r| r.code).collect();
    assert_eq!(listed, all);
    for rule in &list {
        for k in ["code", "name", "summary"] {
            assert!(
                rule[k].as_str().is_some_and(|s| !s.is_empty()),
                "{k}: {rule:#}"
            );
        }
    }
}

#[test]
fn rule_prints_documentation_sections() {
    let dir = TempDir::new().expect("temp dir");
    for rule in oomlint::rules::ALL {
        let r = run(dir.path(), &["rule", rule.code]);
        assert_eq!(r.code, 0, "{r:#?}");
        assert!(
            r.stdout.starts_with(&format!("# {}", rule.code)),
            "{}",
            r.stdout
        );
        let mut at = 0;
        for section in [
            "## What it does",
            "## Why is this bad?",
            "## Example",
            "## How to fix",
        ] {
            let found = r.stdout[at..]
                .find(section)
                .unwrap_or_else(|| panic!("{}: no `{section}` after byte {at}", rule.code));
            at += found + section.len();
        }
        assert!(r.stdout.contains("```python"), "{}", r.stdout);
    }
}

#[test]
fn rule_with_unknown_code_exits_2() {
    let dir = TempDir::new().expect("temp dir");
    let r = run(dir.path(), &["rule", "OOM999"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("OOM999"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

#[test]
fn syntax_error_keeps_findings_from_the_parts_that_parse() {
    // Broken at the top and at the bottom; the loop in between parses.
    let src = format!("x = = 1\n{APPEND_ONLY}\nprint(total +)\n");
    let dir = tree(&[("broken.py", src.as_bytes())]);
    let (line, col) = locate(&src, "history.append(loss)");
    let (err_line, err_col) = (1, 5); // the second `=` of `x = = 1`

    let r = run(dir.path(), &["--format", "concise", "broken.py"]);
    assert_eq!(
        r.code, 1,
        "a syntax error is a warning, not an error: {r:#?}"
    );
    assert_eq!(
        r.stdout.lines().next().unwrap_or_default(),
        format!(
            "broken.py:{line}:{col}: OOM201 {}",
            json_findings(dir.path(), &["broken.py"])[0]["message"]
                .as_str()
                .unwrap()
        )
    );
    assert!(
        r.stderr
            .contains(&format!("broken.py:{err_line}:{err_col}: syntax error")),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("syntax error").count(),
        1,
        "one warning per file"
    );
}

#[test]
fn invalid_utf8_keeps_the_finding_at_the_right_line() {
    let mut bytes: Vec<u8> = Vec::new();
    bytes.extend_from_slice(b"import torch\n# caf\xe9 d\xff\xfe latin-1 comment\n");
    bytes.extend_from_slice(b"BANNER = \"\xc3(\xa0\xa1\"\n");
    // And one after the flagged span, on its own line: the column must not move.
    let flagged = APPEND_ONLY.replace(
        "history.append(loss)\n",
        "history.append(loss)  # \u{1}TODO\n",
    );
    let mut flagged = flagged.into_bytes();
    let at = flagged.iter().position(|&b| b == 1).expect("marker");
    flagged.splice(at..=at, *b"\xff\xfe");
    bytes.extend_from_slice(&flagged);
    let dir = tree(&[("latin.py", &bytes), ("train.py", TRAIN.as_bytes())]);
    let findings = json_findings(dir.path(), &[]);
    let latin: Vec<_> = positions(&findings)
        .into_iter()
        .filter(|p| p.0 == "latin.py")
        .collect();
    // APPEND_ONLY's finding at 9:9, three lines down.
    assert_eq!(latin, [("latin.py".to_owned(), 12, 9, "OOM201".to_owned())]);

    let r = run(dir.path(), &["--format", "concise"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("latin.py"), "{}", r.stderr);
    assert!(r.stderr.contains("UTF-8"), "{}", r.stderr);
    assert_eq!(concise(&r.stdout).len(), 3, "train.py linted too");
}

/// A file with NUL bytes is not linted, and is an error, not a pass (issue 17): exit 2,
/// the others still linted; `--allow-unlintable` keeps the report but not the exit 2.
#[test]
fn nul_bytes_make_the_file_an_error() {
    let mut bytes = APPEND_ONLY.as_bytes().to_vec();
    bytes.extend_from_slice(b"\x00\x01\x02\x00garbage\n");
    let dir = tree(&[("x.py", &bytes), ("train.py", TRAIN.as_bytes())]);
    let r = run(dir.path(), &["--format", "concise"]);
    assert_eq!(r.code, 2, "{r:#?}");
    let files: Vec<String> = concise(&r.stdout).into_iter().map(|f| f.0).collect();
    assert_eq!(files, ["train.py", "train.py"]);
    assert!(
        r.stderr
            .lines()
            .any(|l| l == "oomlint: error: x.py: looks binary (contains NUL bytes); not linted"),
        "{}",
        r.stderr
    );
    let r = run(dir.path(), &["--format", "concise", "--allow-unlintable"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("x.py: looks binary"), "{}", r.stderr);

    let r = run(dir.path(), &["x.py"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("x.py"), "{}", r.stderr);
    assert!(!r.stderr.contains("All checks passed"), "{}", r.stderr);
    let r = run(dir.path(), &["--allow-unlintable", "x.py"]);
    assert_eq!(r.code, 0, "{r:#?}");
}

#[test]
fn empty_file_is_clean() {
    let dir = tree(&[("empty.py", b""), ("blank.py", b"\n\n   \n")]);
    let r = run(dir.path(), &[]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.stdout, "");
    assert_eq!(r.stderr, "All checks passed (2 files checked)\n");
    let r = run(dir.path(), &["--format", "json", "empty.py"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout.trim(), "[]");
}

#[test]
fn utf8_bom_does_not_shift_columns() {
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(TRAIN.as_bytes());
    let dir = tree(&[("bom.py", &bom), ("plain.py", TRAIN.as_bytes())]);
    let findings = json_findings(dir.path(), &[]);
    let strip = |path: &str| -> Vec<Value> {
        findings
            .iter()
            .filter(|f| f["path"] == path)
            .map(|f| {
                let mut f = f.clone();
                f.as_object_mut().unwrap().remove("path");
                f
            })
            .collect()
    };
    assert_eq!(strip("bom.py").len(), 2);
    assert_eq!(strip("bom.py"), strip("plain.py"));
    let first = &strip("bom.py")[0];
    assert_eq!(
        (first["line"].as_u64(), first["column"].as_u64()),
        (Some(TRAIN_APPEND.0 as u64), Some(TRAIN_APPEND.1 as u64))
    );
    let r = run(dir.path(), &["bom.py"]);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[test]
fn crlf_line_endings_give_the_same_positions() {
    let crlf = TRAIN.replace('\n', "\r\n");
    let dir = tree(&[("crlf.py", crlf.as_bytes()), ("lf.py", TRAIN.as_bytes())]);
    let findings = json_findings(dir.path(), &[]);
    let of = |path: &str| -> Vec<Value> {
        findings
            .iter()
            .filter(|f| f["path"] == path)
            .map(|f| {
                let mut f = f.clone();
                f.as_object_mut().unwrap().remove("path");
                f
            })
            .collect()
    };
    assert_eq!(of("lf.py").len(), 2);
    assert_eq!(of("crlf.py"), of("lf.py"));
    // The text renderer copes with CRLF too.
    let r = run(dir.path(), &["--color", "never", "crlf.py"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("crlf.py:13:9"), "{}", r.stdout);
}

#[test]
fn lone_cr_line_endings_give_the_same_positions() {
    let cr = TRAIN.replace('\n', "\r");
    let dir = tree(&[("cr.py", cr.as_bytes()), ("lf.py", TRAIN.as_bytes())]);
    let findings = json_findings(dir.path(), &[]);
    let of = |path: &str| -> Vec<(usize, usize, String)> {
        positions(&findings)
            .into_iter()
            .filter(|p| p.0 == path)
            .map(|p| (p.1, p.2, p.3))
            .collect()
    };
    assert_eq!(of("lf.py").len(), 2);
    assert_eq!(of("cr.py"), of("lf.py"));
    let r = run(dir.path(), &["cr.py"]);
    assert!(!r.stderr.contains("syntax error"), "{}", r.stderr);
}

/// A file whose first part holds a finding and whose rest is pathologically deep.
fn deep_file(deep: &str) -> Vec<u8> {
    format!("{TRAIN}\n{deep}\n").into_bytes()
}

fn assert_deep_file_survives(name: &str, bytes: Vec<u8>) {
    let dir = tree(&[(name, &bytes)]);
    let r = run(dir.path(), &["--format", "concise", name]);
    assert!(r.code == 1 || r.code == 2, "{r:#?}");
    assert!(
        r.stdout.starts_with(&format!(
            "{name}:{}:{}: OOM201 ",
            TRAIN_APPEND.0, TRAIN_APPEND.1
        )),
        "the finding before the deep part is kept: {}",
        r.stdout
    );
    for l in r.stderr.lines() {
        assert!(l.contains(name), "every message names the file: {l}");
    }
}

#[test]
fn deeply_nested_parentheses_do_not_crash() {
    let n = 10_000;
    let deep = format!("y = {}x{}", "(".repeat(n), ")".repeat(n));
    assert_deep_file_survives("parens.py", deep_file(&deep));
}

#[test]
fn deeply_nested_lists_do_not_crash() {
    let n = 10_000;
    let deep = format!("y = {}x{}", "[".repeat(n), "]".repeat(n));
    assert_deep_file_survives("lists.py", deep_file(&deep));
    let deep = format!("y = {}loss{}", "f(".repeat(n), ")".repeat(n));
    assert_deep_file_survives("calls.py", deep_file(&deep));
}

#[test]
fn deeply_nested_blocks_do_not_crash() {
    let n = 10_000;
    // Each level must be indented deeper than the last: one space more per level
    // (about 50 MB in all, the least Python allows).
    let mut deep = String::with_capacity(n * (n + 1) / 2 + n * 10);
    for i in 0..n {
        deep.push_str(&" ".repeat(i));
        deep.push_str("if True:\n");
    }
    deep.push_str(&" ".repeat(n));
    deep.push_str("pass\n");
    assert_deep_file_survives("blocks.py", deep_file(&deep));
}

#[test]
fn deep_nesting_is_either_analysed_or_reported() {
    let n = 100;
    let src = APPEND_ONLY.replace(
        "history.append(loss)",
        &format!("history.append({}loss{})", "(".repeat(n), ")".repeat(n)),
    );
    let dir = tree(&[("deep.py", src.as_bytes())]);
    let r = run(dir.path(), &["--format", "concise", "deep.py"]);
    let found = r.stdout.contains("deep.py:9:9: OOM201");
    let warned = r
        .stderr
        .lines()
        .any(|l| l.contains("deep.py") && l.contains("too deep"));
    assert!(
        found || warned,
        "neither the finding nor a warning that it may be missed: {r:#?}"
    );
}

#[test]
fn summary_does_not_say_all_passed_when_a_path_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ok.py"), "x = 1\n").expect("write");
    let out = Command::cargo_bin("oomlint")
        .expect("binary")
        .current_dir(dir.path())
        .args(["ok.py", "missing.py", "--no-cache"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("All checks passed"), "{err}");
    assert!(
        err.ends_with("No problems found in 1 file checked; 1 path could not be read\n"),
        "{err}"
    );
}
