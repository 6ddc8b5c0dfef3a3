//! `--add-noqa` and the unused-noqa rule (OOM001), end to end through the binary.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

fn oomlint(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("oomlint").unwrap();
    c.current_dir(dir).arg("--no-cache");
    c
}

const TRAIN: &str = r#"import torch


def train(model, loader, criterion, optimizer):
    history = []
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss)  # noqa: E501
        total += loss
        print(f"""step loss
{loss}""", history.append(loss))
    return history, total
"#;

#[test]
fn add_noqa_then_clean_then_nothing_unused() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("train.py");
    std::fs::write(&file, TRAIN.replace('\n', "\r\n")).unwrap();
    oomlint(t.path()).assert().code(1);
    oomlint(t.path())
        .arg("--add-noqa")
        .assert()
        .code(0)
        .stderr(predicate::str::contains("Added 3 noqa comments."));
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("history.append(loss)  # noqa: E501, OOM201\r\n"),
        "{after}"
    );
    assert!(
        after.contains("total += loss  # noqa: OOM202\r\n"),
        "{after}"
    );
    // The f-string spans two lines: the comment goes where the statement's line ends.
    assert!(
        after.contains("{loss}\"\"\", history.append(loss))  # noqa: OOM201\r\n"),
        "{after}"
    );
    assert_eq!(after.matches("\r\n").count(), after.matches('\n').count());
    // Every finding is now suppressed, the file parses, and every comment is used.
    oomlint(t.path())
        .assert()
        .code(0)
        .stderr(predicate::str::contains("All checks passed"));
    oomlint(t.path())
        .args(["--extend-select", "OOM001"])
        .assert()
        .code(0);
    // Running it again adds nothing.
    oomlint(t.path())
        .arg("--add-noqa")
        .assert()
        .code(0)
        .stderr(predicate::str::contains("Added 0 noqa comments."));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
}

#[test]
fn add_noqa_in_notebook_cells() {
    let t = tempfile::tempdir().unwrap();
    let nb = serde_json::json!({
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
            {"cell_type": "code", "metadata": {"tags": ["train"]}, "execution_count": 3,
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
             "source": ["%matplotlib inline\n", "losses = []\n",
                        "for batch in loader:\n",
                        "    loss = criterion(model(batch), batch.y)\n",
                        "    loss.backward()\n",
                        "    losses.append(loss)"]}
        ],
        "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5
    });
    let file = t.path().join("train.ipynb");
    std::fs::write(&file, serde_json::to_string_pretty(&nb).unwrap()).unwrap();
    oomlint(t.path()).assert().code(1);
    oomlint(t.path())
        .arg("--add-noqa")
        .assert()
        .code(0)
        .stderr(predicate::str::contains("Added 1 noqa comment."));
    let after: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).expect("valid JSON");
    let cell = &after["cells"][1];
    assert_eq!(cell["source"][5], "    losses.append(loss)  # noqa: OOM201");
    assert_eq!(cell["source"][0], "%matplotlib inline\n");
    assert_eq!(cell["outputs"], nb["cells"][1]["outputs"]);
    assert_eq!(after["metadata"], nb["metadata"]);
    oomlint(t.path()).assert().code(0);
}

#[test]
fn unused_noqa_is_opt_in_and_its_fix_removes_only_oomlint_codes() {
    let t = tempfile::tempdir().unwrap();
    let src = "import os  # noqa: F401, OOM201\nx = 1  # noqa\ny = 2  # noqa: OOM777\n";
    std::fs::write(t.path().join("a.py"), src).unwrap();
    oomlint(t.path()).assert().code(0);
    oomlint(t.path())
        .args(["--extend-select", "OOM001", "--format", "concise"])
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("a.py:1:12: OOM001 ")
                .and(predicate::str::contains("unused `OOM201`"))
                .and(predicate::str::contains("a.py:2:8: OOM001 "))
                .and(predicate::str::contains("a.py:3:8: OOM001 "))
                .and(predicate::str::contains("unknown `OOM777`")),
        );
    // Alone, it leaves the codes of rules that did not run alone: nothing says whether
    // they would fire.
    oomlint(t.path())
        .args(["--select", "OOM001", "--format", "concise"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("OOM201").not());
    // The fix, applied by the fix engine: comments only, other tools' codes kept.
    let linter = oomlint::lint::Linter::new(oomlint::rules::ALL);
    let out = linter.fix_source(
        Path::new("a.py"),
        src.as_bytes(),
        oomlint::fix::Applicability::Safe,
    );
    let fixed = String::from_utf8(out.fixed.expect("fixed")).unwrap();
    assert_eq!(fixed, "import os  # noqa: F401\nx = 1\ny = 2\n");
}
