//! Output cannot be used for injection (issue 7): a file name or source text holding
//! `::`, `%`, commas, newlines, `\r`, ANSI escape sequences, line separators or C1
//! controls cannot start a GitHub workflow command, break a JSON, JSONL, SARIF or JUnit
//! document, or put a control sequence on a terminal in the text formats.
#![cfg(unix)] // control characters in file names

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

/// A payload that tries every trick: a new workflow command on a new line (`\n` and
/// `\r`), escapes that the runner decodes, property separators, an ANSI colour, a line
/// separator, NEL and CSI (C1), XML and JSON specials.
const PAYLOAD: &str =
    "a\n::error file=pwned.py::pwned %0A %25 , \r::warning::x \x1b[31mred\x1b[0m \u{2028} \u{85} \u{9b}2J \u{202e} ]]> <x/> & \"q\" '\n";

/// Can be a file name and round-trips through every format's escaping.
const TRICKY_NAME: &str = "a::b %0A, c\nd.py";
/// Holds control characters: shown escaped, never raw.
const EVIL_NAME: &str = "evil\n::error file=x::pwn\r\x1b[31m\u{2028}\u{9b}.py";

/// A training loop whose findings quote the payload (OOM201's message names the
/// container, here a subscript with the payload as its key) or not.
fn source() -> String {
    format!(
        r#"import torch
import torch.nn.functional as F


def train_epoch(model, loader, optimizer):
    losses = {{}}
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses["""{PAYLOAD}"""].append(loss)
"#
    )
}

fn setup() -> TempDir {
    let dir = TempDir::new().unwrap();
    for name in [TRICKY_NAME, EVIL_NAME, "src.py"] {
        std::fs::write(dir.path().join(name), source()).unwrap();
    }
    // A syntax error, so a warning names the evil file on stderr.
    std::fs::write(
        dir.path().join(format!("{EVIL_NAME}.broken.py")),
        format!("{}\ndef (:\n", source()),
    )
    .unwrap();
    dir
}

struct Out {
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Out {
    let out = Command::cargo_bin("oomlint")
        .unwrap()
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .arg("--no-cache")
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(matches!(code, Some(0..=2)), "{args:?}: {:?}", out.status);
    Out {
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// Four files with one finding each.
const FINDINGS: usize = 4;

/// No raw character that a terminal or a line-based reader acts on: C0 controls but
/// `\n` (and `\t`), DEL, C1, line separators, bidi overrides.
fn assert_inert(what: &str, s: &str) {
    for c in s.chars() {
        let bad = (c.is_control() && !matches!(c, '\n' | '\t'))
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(!bad, "{what}: raw {c:?} in output:\n{s:?}");
    }
}

/// Decodes a workflow-command value as the runner does.
fn unescape(s: &str) -> String {
    s.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
}

#[test]
fn github_output_is_one_command_per_finding() {
    let dir = setup();
    let r = run(dir.path(), &["--format", "github", "."]);
    assert_inert("github", &r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), FINDINGS, "{}", r.stdout);
    for l in &lines {
        assert!(l.starts_with("::error file="), "{l}");
        // The properties end at the first `::` after them; nothing in them is raw.
        let props = &l["::error ".len()..l[2..].find("::").unwrap() + 2];
        assert_eq!(
            props.split(',').count(),
            6,
            "a comma in a value split a property: {props}"
        );
        assert!(!props.contains(':'), "{props}");
        assert!(l.contains("title=oomlint (OOM201)::OOM201 "), "{l}");
    }
    // The runner decodes the tricky name back to the file's real name.
    let files: Vec<String> = lines
        .iter()
        .map(|l| unescape(l["::error file=".len()..].split(",line=").next().unwrap()))
        .collect();
    assert!(files.contains(&TRICKY_NAME.to_owned()), "{files:?}");
    // And the message back to the source text, control characters made visible.
    let msg = unescape(lines[0].split_once("::OOM201 ").unwrap().1);
    assert!(
        msg.contains("a\n::error file=pwned.py::pwned %0A %25 , "),
        "{msg}"
    );
    assert!(msg.contains("\\u{1b}[31mred"), "{msg}");
}

#[test]
fn json_jsonl_and_sarif_stay_one_document() {
    let dir = setup();
    let r = run(dir.path(), &["--format", "json", "."]);
    assert_inert("json", &r.stdout);
    for raw in ["\u{2028}", "\u{85}", "\u{9b}"] {
        assert!(!r.stdout.contains(raw), "json holds a raw {raw:?}");
    }
    let v: Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    let findings = v.as_array().unwrap();
    assert_eq!(findings.len(), FINDINGS);
    let paths: Vec<&str> = findings
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&TRICKY_NAME) && paths.contains(&EVIL_NAME),
        "{paths:?}"
    );
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains(PAYLOAD.trim_end().replace('\r', "\n").as_str()),
        "{message:?}"
    );

    let r = run(dir.path(), &["--format", "jsonl", "."]);
    assert_inert("jsonl", &r.stdout);
    // Python's splitlines() also splits on U+2028 and NEL: still one object per piece.
    let lines: Vec<&str> = r
        .stdout
        .split([
            '\n', '\r', '\u{2028}', '\u{2029}', '\u{85}', '\u{1c}', '\u{1d}', '\u{1e}',
        ])
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), FINDINGS, "{}", r.stdout);
    for l in lines {
        serde_json::from_str::<Value>(l).expect("each line is one JSON object");
    }

    let r = run(dir.path(), &["--format", "sarif", "."]);
    assert_inert("sarif", &r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).expect("one SARIF document");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), FINDINGS);
    for res in results {
        let uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap();
        assert!(
            uri.bytes().all(|b| b.is_ascii_graphic()),
            "the uri is percent-encoded: {uri:?}"
        );
    }
}

#[test]
fn junit_is_well_formed_xml() {
    let dir = setup();
    let r = run(dir.path(), &["--format", "junit", "."]);
    assert_inert("junit", &r.stdout);
    let doc = roxmltree::Document::parse(&r.stdout).expect("well-formed XML");
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let failures: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(failures.len(), FINDINGS);
    assert_eq!(cases.len(), FINDINGS);
    let suites: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .filter_map(|n| n.attribute("name"))
        .collect();
    assert!(suites.contains(&TRICKY_NAME), "{suites:?}");
    let message = failures[0].attribute("message").unwrap();
    assert!(message.contains("]]> <x/> & \"q\" '"), "{message}");
}

#[test]
fn text_and_concise_write_no_control_sequence() {
    let dir = setup();
    for format in ["text", "concise"] {
        let r = run(dir.path(), &["--format", format, "--color", "never", "."]);
        assert_inert(format, &r.stdout);
        assert_inert(&format!("{format} stderr"), &r.stderr);
        assert!(r.stdout.contains("\\u{1b}[31m"), "{format}: {}", r.stdout);
    }
    let r = run(dir.path(), &["--format", "concise", "."]);
    assert_eq!(
        r.stdout.lines().count(),
        FINDINGS,
        "one line per finding:\n{}",
        r.stdout
    );
    // The warning about the broken file is one line that names it, escaped.
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("syntax error"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(
        warnings[0].contains("evil\\u{a}::error file=x::pwn\\u{d}\\u{1b}[31m"),
        "{}",
        warnings[0]
    );
}

#[test]
fn stdin_filename_is_escaped_too() {
    let dir = TempDir::new().unwrap();
    for format in ["github", "json", "concise", "junit", "sarif", "text"] {
        let out = Command::cargo_bin("oomlint")
            .unwrap()
            .current_dir(dir.path())
            .args([
                "--no-cache",
                "--format",
                format,
                "--stdin-filename",
                EVIL_NAME,
            ])
            .write_stdin(source())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_inert(&format!("stdin {format}"), &stdout);
        assert_inert(
            &format!("stdin {format} stderr"),
            &String::from_utf8(out.stderr).unwrap(),
        );
    }
}
