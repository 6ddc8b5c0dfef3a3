//! End-to-end checks of the ecosystem features: configuration, suppression comments,
//! the github/sarif/junit formats, `-o`, `--stdin-filename` and notebooks.

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

#[path = "common/sarif.rs"]
mod sarif;

/// A training loop with two OOM201 findings (lines 5 and 6) and one OOM202 (line 7).
const TRAIN: &str = "\
losses = []
total = 0
for batch in loader:
    loss = criterion(model(batch), batch.y)
    losses.append(loss)
    losses.append(loss)
    total += loss
";

fn oomlint(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("oomlint").expect("binary");
    c.current_dir(dir).env("NO_COLOR", "1");
    c
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, text).expect("write");
}

/// `path:line:col: CODE` of each concise output line.
fn concise(dir: &Path, args: &[&str]) -> Vec<String> {
    let out = oomlint(dir)
        .args(["--format", "concise"])
        .args(args)
        .output()
        .expect("run");
    String::from_utf8(out.stdout)
        .expect("utf8")
        .lines()
        .map(|l| l.split(' ').take(2).collect::<String>())
        .collect()
}

// ---------------------------------------------------------------- suppression

#[test]
fn noqa_line_codes_bare_and_strings() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "a.py",
        "\
losses = []
for batch in loader:
    loss = criterion(model(batch), batch.y)
    losses.append(loss)  # noqa: OOM201
    losses.append(loss)  # noqa: OOM202, OOM301
    losses.append(loss)  # noqa
    s = '# noqa'; losses.append(loss)
    losses.append(loss)  # NOQA:OOM201 kept on purpose
    losses.append(loss)
",
    );
    assert_eq!(
        concise(t.path(), &["a.py"]),
        ["a.py:5:5:OOM201", "a.py:7:19:OOM201", "a.py:9:5:OOM201"]
    );
}

#[test]
fn file_level_noqa() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "all.py", &format!("# oomlint: noqa\n{TRAIN}"));
    write(
        t.path(),
        "some.py",
        &format!("{TRAIN}# oomlint: noqa: OOM201\n"),
    );
    write(
        t.path(),
        "str.py",
        &format!("x = '# oomlint: noqa'\n{TRAIN}"),
    );
    assert_eq!(
        concise(t.path(), &["."]),
        [
            "some.py:7:5:OOM202",
            "str.py:6:5:OOM201",
            "str.py:7:5:OOM201",
            "str.py:8:5:OOM202"
        ]
    );
}

#[test]
fn file_level_noqa_after_code_covers_only_its_line_and_warns() {
    // The report of issue 15: a trailing `# oomlint: noqa: OOM201` hid an unrelated
    // OOM201 lines below it. After code it is a line-level suppression, with a warning.
    let t = tempfile::tempdir().unwrap();
    // `model` comes from the project: a name bound nowhere is not taken for a model.
    let src = "\
from nets import model
losses = []
preds = []
for batch in loader:
    loss = criterion(model(batch), batch.y)
    losses.append(loss)  # oomlint: noqa: OOM201
    output = model(batch)
    preds.append(output)
";
    write(t.path(), "trailing.py", src);
    let out = oomlint(t.path())
        .args(["--format", "concise", "trailing.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let at: Vec<String> = stdout
        .lines()
        .map(|l| l.split(' ').take(2).collect())
        .collect();
    assert_eq!(at, ["trailing.py:8:5:OOM201"], "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(
            "oomlint: warning: trailing.py:6: `# oomlint: noqa` after code suppresses on this \
             line only; to suppress in the whole file, put it on a line of its own"
        ),
        "{stderr}"
    );
    // The same comment on a line of its own covers the file, with no warning.
    let own = src.replace(
        "    losses.append(loss)  # oomlint: noqa: OOM201\n",
        "    # oomlint: noqa: OOM201\n    losses.append(loss)\n",
    );
    write(t.path(), "own.py", &own);
    let out = oomlint(t.path())
        .args(["--format", "concise", "own.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

// ---------------------------------------------------------------- configuration

#[test]
fn pyproject_select_and_ignore() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    write(
        t.path(),
        "pyproject.toml",
        "[project]\nname = 'x'\n\n[tool.oomlint]\nignore = ['OOM201']\n",
    );
    assert_eq!(concise(t.path(), &[]), ["train.py:7:5:OOM202"]);
    // --select on the command line replaces the configured selection.
    assert_eq!(
        concise(t.path(), &["--select", "OOM201"]),
        ["train.py:5:5:OOM201", "train.py:6:5:OOM201"]
    );
    // --isolated ignores the configuration.
    assert_eq!(concise(t.path(), &["--isolated"]).len(), 3);
}

#[test]
fn oomlint_toml_wins_and_closest_config_wins() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    write(t.path(), "sub/train.py", TRAIN);
    write(
        t.path(),
        "pyproject.toml",
        "[tool.oomlint]\nselect = ['OOM201']\n",
    );
    write(t.path(), "oomlint.toml", "select = ['OOM202']\n");
    write(t.path(), "sub/.oomlint.toml", "ignore = ['OOM202']\n");
    assert_eq!(
        concise(t.path(), &["."]),
        [
            "sub/train.py:5:5:OOM201",
            "sub/train.py:6:5:OOM201",
            "train.py:7:5:OOM202"
        ]
    );
    // Linting from inside the sub folder finds the same configuration.
    assert_eq!(concise(&t.path().join("sub"), &["train.py"]).len(), 2);
    // --config overrides discovery for every file.
    write(t.path(), "elsewhere/strict.toml", "select = ['OOM2']\n");
    assert_eq!(
        concise(t.path(), &["--config", "elsewhere/strict.toml", "."]).len(),
        6
    );
}

#[test]
fn per_file_ignores_and_excludes() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "src/train.py", TRAIN);
    write(t.path(), "tests/test_train.py", TRAIN);
    write(t.path(), "legacy/old.py", TRAIN);
    write(t.path(), "scratch_1.py", TRAIN);
    write(
        t.path(),
        "pyproject.toml",
        "[tool.oomlint]\n\
         extend-exclude = ['legacy/', 'scratch_*.py']\n\
         per-file-ignores = { 'tests/*' = ['OOM201'] }\n",
    );
    assert_eq!(
        concise(t.path(), &[]),
        [
            "src/train.py:5:5:OOM201",
            "src/train.py:6:5:OOM201",
            "src/train.py:7:5:OOM202",
            "tests/test_train.py:7:5:OOM202"
        ]
    );
    // A file or folder named on the command line is linted unless --force-exclude.
    assert_eq!(concise(t.path(), &["legacy/old.py"]).len(), 3);
    assert_eq!(concise(t.path(), &["legacy/"]).len(), 3);
    write(t.path(), "build/gen.py", TRAIN);
    assert_eq!(concise(t.path(), &["build"]).len(), 3);
    oomlint(t.path())
        .args(["--force-exclude", "legacy/old.py"])
        .assert()
        .success();
}

#[test]
fn respect_gitignore_key() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "gen/train.py", TRAIN);
    write(t.path(), ".gitignore", "gen/\n");
    oomlint(t.path()).assert().success();
    write(t.path(), "oomlint.toml", "respect-gitignore = false\n");
    oomlint(t.path()).assert().code(1);
}

#[test]
fn unknown_key_is_a_report_naming_file_key_and_line() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    write(
        t.path(),
        "pyproject.toml",
        "[tool.oomlint]\nselect = ['OOM2']\nextend-ignore = ['OOM201']\n",
    );
    oomlint(t.path())
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "pyproject.toml:3: unknown key `extend-ignore` in [tool.oomlint]",
        ))
        .stderr(predicate::str::contains("3 │ extend-ignore = ['OOM201']"));
}

#[test]
fn unknown_rule_code_in_config_points_at_the_value() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    write(
        t.path(),
        ".oomlint.toml",
        "# strict\nselect = ['OOM2']\nper-file-ignores = { 'tests/*' = ['OOM2O1'] }\n",
    );
    oomlint(t.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            ".oomlint.toml:3: unknown rule code or prefix `OOM2O1` in `per-file-ignores`",
        ));
    write(t.path(), ".oomlint.toml", "select = 'OOM2'\n");
    oomlint(t.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            ".oomlint.toml:1: invalid configuration",
        ));
}

#[test]
fn show_settings_names_the_file() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "src/train.py", TRAIN);
    write(
        t.path(),
        "pyproject.toml",
        "[tool.oomlint]\nignore = ['OOM202']\n",
    );
    oomlint(t.path())
        .args(["--show-settings", "src/train.py"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Settings for src/train.py"))
        .stdout(predicate::str::contains("pyproject.toml"))
        .stdout(predicate::str::contains("\"OOM201\""))
        .stdout(predicate::str::contains("ignore = [\"OOM202\"]"))
        .stdout(predicate::function(|s: &str| {
            s.lines()
                .any(|l| l.starts_with("enabled rules = [") && !l.contains("OOM202"))
        }));
}

// ---------------------------------------------------------------- output formats

#[test]
fn github_format_escapes_properties_and_message() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "we%ird,na:me.py", TRAIN);
    let out = oomlint(t.path())
        .args(["--format", "github", "--select", "OOM202"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout.lines().next().unwrap();
    assert!(
        line.starts_with(
            "::error file=we%25ird%2Cna%3Ame.py,line=7,col=5,endLine=7,endColumn=18,title=oomlint (OOM202)::OOM202 "
        ),
        "{line}"
    );
    // The help goes on a second line of the annotation: an escaped newline.
    assert!(line.contains("%0Ahelp: "), "{line}");
    assert_eq!(stdout.lines().count(), 1);
}

#[test]
fn sarif_validates_against_the_schema() {
    let out = oomlint(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(["--format", "sarif", "fixtures/"])
        .output()
        .unwrap();
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    sarif::validate("sarif_validates_against_the_schema", &sarif);
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "oomlint");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let r = rules.iter().find(|r| r["id"] == "OOM201").unwrap();
    assert_eq!(r["name"], "undetached-loss-append");
    assert_eq!(r["defaultConfiguration"]["level"], "error");
    assert!(r["fullDescription"]["text"]
        .as_str()
        .unwrap()
        .contains("## Why is this bad?"));
    let results = run["results"].as_array().unwrap();
    assert!(!results.is_empty());
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert!(loc["artifactLocation"]["uri"]
        .as_str()
        .unwrap()
        .starts_with("fixtures/"));
    assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
    // Every result's rule is listed, at the index it names.
    for res in results {
        let i = res["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], res["ruleId"]);
    }
}

#[test]
fn sarif_with_no_findings_and_with_a_notebook_validates() {
    let test = "sarif_with_no_findings_and_with_a_notebook_validates";
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "clean.py", "x = 1\n");
    let out = oomlint(t.path())
        .args(["--format", "sarif"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    sarif::validate(test, &v);
    write(t.path(), "nb.ipynb", &notebook());
    let out = oomlint(t.path())
        .args(["--format", "sarif"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    sarif::validate(test, &v);
    assert_eq!(v["runs"][0]["results"][0]["properties"]["cell"], 3);
}

#[test]
fn junit_has_a_suite_per_file_and_a_failure_per_finding() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    write(t.path(), "clean.py", "x = 1 < 2\n");
    let out = oomlint(t.path())
        .args(["--format", "junit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let xml = String::from_utf8(out.stdout).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"oomlint\" tests=\"4\" failures=\"3\""), "{xml}");
    assert!(xml.contains("<testsuite name=\"clean.py\" tests=\"1\" failures=\"0\""));
    assert!(xml.contains("<testsuite name=\"train.py\" tests=\"3\" failures=\"3\""));
    assert_eq!(xml.matches("<failure ").count(), 3);
    assert!(xml.contains("type=\"OOM202\""));
}

#[test]
fn output_file() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    oomlint(t.path())
        .args(["--format", "json", "-o", "report.json"])
        .assert()
        .code(1)
        .stdout("");
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(t.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    // The ten keys of a finding, exactly.
    let mut keys: Vec<&str> = v[0]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort_unstable();
    let mut want = [
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
        "fix",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    oomlint(t.path())
        .args(["-o", "no/such/dir/out.txt"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot write output file"));
}

#[test]
fn stdin_filename() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "pyproject.toml",
        "[tool.oomlint]\nper-file-ignores = { 'tests/*' = ['OOM201'] }\n",
    );
    oomlint(t.path())
        .args(["--format", "concise", "--stdin-filename", "src/train.py"])
        .write_stdin(TRAIN)
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("src/train.py:5:5: OOM201"));
    // The configuration that applies to the name applies to stdin.
    oomlint(t.path())
        .args(["--format", "concise", "--stdin-filename", "tests/test_x.py"])
        .write_stdin(TRAIN)
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("tests/test_x.py:7:5: OOM202"));
    oomlint(t.path())
        .args(["--stdin-filename", "clean.py"])
        .write_stdin("x = 1\n")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "All checks passed (1 file checked)",
        ));
}

// ---------------------------------------------------------------- notebooks

/// A notebook: a markdown cell, a code cell with magics and a shell escape, and a code
/// cell whose line 4 has an OOM201.
fn notebook() -> String {
    let nb = serde_json::json!({
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["%matplotlib inline\n", "!pip install torch\n", "import torch\n", "losses = []"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["for batch in loader:\n",
                        "    loss = criterion(model(batch), batch.y)\n",
                        "    loss.backward()\n",
                        "    losses.append(loss)  # the \"bad\" line\n"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    serde_json::to_string_pretty(&nb).unwrap()
}

#[test]
fn notebook_cells_in_text_and_concise() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.ipynb", &notebook());
    oomlint(t.path())
        .args(["--format", "concise"])
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with(
            "train.ipynb:cell 3:4:5: OOM201 ",
        ))
        .stderr("");
    oomlint(t.path())
        .args(["train.ipynb"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("[train.ipynb:cell 3:4:5]"))
        .stdout(predicate::str::contains("4 │     losses.append(loss)"));
}

#[test]
fn notebook_json_positions_point_into_the_file() {
    let t = tempfile::tempdir().unwrap();
    let text = notebook();
    write(t.path(), "train.ipynb", &text);
    let out = oomlint(t.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &v[0];
    assert_eq!(f["path"], "train.ipynb");
    let line = text
        .lines()
        .nth(f["line"].as_u64().unwrap() as usize - 1)
        .unwrap();
    let col = f["column"].as_u64().unwrap() as usize - 1;
    let end = f["end_column"].as_u64().unwrap() as usize - 1;
    assert_eq!(&line[col..end], "losses.append(loss)");
    let gh = oomlint(t.path())
        .args(["--format", "github"])
        .output()
        .unwrap();
    let gh = String::from_utf8(gh.stdout).unwrap();
    assert!(gh.contains(&format!(
        "file=train.ipynb,line={},col={},",
        f["line"], f["column"]
    )));
    assert!(gh.contains("::cell 3, line 4: OOM201 "));
}

#[test]
fn notebook_noqa_and_bad_json() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "ok.ipynb",
        &notebook().replace("# the \\\"bad\\\" line", "# noqa: OOM201"),
    );
    write(t.path(), "broken.ipynb", "{\"cells\": [");
    oomlint(t.path()).arg("ok.ipynb").assert().success();
    oomlint(t.path())
        .arg("broken.ipynb")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "broken.ipynb: not a valid notebook: invalid JSON at line 1",
        ));
}

/// A notebook that writes a serving module with `%%writefile` (a finding in it), a
/// YAML file (not Python), and runs its own cells: the module is linted on its own, so
/// its fresh `model` is not the notebook's dispatched one.
fn writefile_notebook() -> String {
    let nb = serde_json::json!({
        "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["from transformers import AutoModelForCausalLM\n",
                        "model = AutoModelForCausalLM.from_pretrained(\"gpt2\", device_map=\"auto\")\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["%%writefile serve.py\n",
                        "import torch\n",
                        "from transformers import AutoModelForCausalLM\n",
                        "\n",
                        "class Predictor:\n",
                        "    def setup(self):\n",
                        "        self.model = AutoModelForCausalLM.from_pretrained(\"gpt2\", device_map=\"auto\")\n",
                        "        self.model.to(\"cuda\")\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["%%writefile -a small.py\n",
                        "def place(model):\n",
                        "    model.to(\"cuda\")\n",
                        "model.to(\"cuda\")\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["%%writefile config.yaml\n", "model: gpt2\n", "lr: [1e-4\n"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    serde_json::to_string_pretty(&nb).unwrap()
}

#[test]
fn notebook_writefile_cells_are_modules() {
    let t = tempfile::tempdir().unwrap();
    let text = writefile_notebook();
    write(t.path(), "deploy.ipynb", &text);
    oomlint(t.path())
        .args(["--format", "concise"])
        .assert()
        .code(1)
        .stdout("deploy.ipynb:cell 2:8:9: OOM402 `self.model` was already placed by `device_map=\"auto\"` on line 7: moving it again duplicates weights or undoes offloading\n")
        .stderr("");
    oomlint(t.path())
        .assert()
        .code(1)
        .stdout(predicate::str::contains("[deploy.ipynb:cell 2:8:9]"))
        .stdout(predicate::str::contains(
            "8 │         self.model.to(\"cuda\")",
        ));
    let out = oomlint(t.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &v[0];
    let line = text
        .lines()
        .nth(f["line"].as_u64().unwrap() as usize - 1)
        .unwrap();
    let col = f["column"].as_u64().unwrap() as usize - 1;
    let end = f["end_column"].as_u64().unwrap() as usize - 1;
    assert_eq!(&line[col..end], "self.model.to(\\\"cuda\\\")");
}

/// A project in which a notebook writes `loader.py` with `%%writefile` and imports a
/// helper of a file on disk: the project index sees the written file under its name
/// (a script importing it learns where its model is placed), and the notebook's cells
/// see the files beside them.
#[test]
fn notebooks_belong_to_the_project_index() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir_all(t.path().join(".git")).unwrap();
    let nb = serde_json::json!({
        "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["%%writefile loader.py\n",
                        "import torch\n",
                        "from torch import nn\n",
                        "\n",
                        "def build_classifier():\n",
                        "    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))\n",
                        "    return net.cuda()\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
             "source": ["from setup_model import make_encoder\n",
                        "encoder = make_encoder()\n",
                        "encoder.cuda()\n"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    write(
        t.path(),
        "explore.ipynb",
        &serde_json::to_string_pretty(&nb).unwrap(),
    );
    write(
        t.path(),
        "setup_model.py",
        "import torch\nfrom torch import nn\n\n\ndef make_encoder():\n    enc = nn.Linear(16, 4).cuda()\n    return enc\n",
    );
    write(
        t.path(),
        "train.py",
        "import torch\nfrom loader import build_classifier\n\nmodel = build_classifier()\nmodel.cuda()\n",
    );
    // A script that imports a module no notebook writes learns nothing.
    write(
        t.path(),
        "other.py",
        "import torch\nfrom missing import build_classifier\n\nmodel = build_classifier()\nmodel.cuda()\n",
    );
    let out = oomlint(t.path())
        .args(["--format", "concise", "--select", "OOM402"])
        .output()
        .unwrap();
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(" `").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        lines,
        // `[*]`: the repeated moves are fixable (safe: nothing touches the model between).
        [
            "explore.ipynb:cell 2:3:1: OOM402 [*]",
            "train.py:5:1: OOM402 [*]"
        ]
    );
}

// ---------------------------------------------------------------- README snippets

/// The fenced block that follows the `<!-- ci: NAME` marker in the README.
fn readme_block(name: &str) -> String {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let at = readme
        .find(&format!("<!-- ci: {name} "))
        .unwrap_or_else(|| panic!("README marker `ci: {name}`"));
    let rest = &readme[at..];
    let start = rest.find("```").unwrap();
    let start = start + rest[start..].find('\n').unwrap() + 1;
    let end = start + rest[start..].find("```").unwrap();
    rest[start..end].to_owned()
}

#[test]
fn readme_pyproject_config_is_valid_and_applies() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "pyproject.toml",
        &readme_block("pyproject-config"),
    );
    write(t.path(), "src/train.py", TRAIN);
    write(t.path(), "tests/test_train.py", TRAIN);
    write(t.path(), "legacy/old.py", TRAIN);
    // OOM202 is ignored, OOM201 is ignored under tests/, legacy/ is excluded.
    assert_eq!(
        concise(t.path(), &[]),
        ["src/train.py:5:5:OOM201", "src/train.py:6:5:OOM201"]
    );
}

#[test]
fn readme_workflow_is_the_checked_example() {
    let file = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/github-workflow-example.yml"
    ))
    .unwrap();
    assert_eq!(readme_block("workflow"), file);
}

#[test]
fn readme_sarif_workflow_is_the_checked_example() {
    let file = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/github-workflow-sarif.yml"
    ))
    .unwrap();
    assert_eq!(readme_block("workflow-sarif"), file);
}

/// No tag is released yet: the snippets name `main` (pre-commit's `autoupdate` then pins
/// the head commit) or a full commit SHA, never a made-up tag such as `v0.1.0`.
#[test]
fn readme_snippets_name_revisions_that_exist() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut texts = vec![fs::read_to_string(format!("{root}/README.md")).unwrap()];
    for e in fs::read_dir(format!("{root}/docs")).unwrap() {
        texts.push(fs::read_to_string(e.unwrap().path()).unwrap());
    }
    let ok = |r: &str| r == "main" || (r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit()));
    let mut seen = 0;
    for text in &texts {
        for line in text.lines() {
            let line = line.trim();
            let rev = if let Some(r) = line.strip_prefix("rev: ") {
                r
            } else if let Some(at) = line.find("/oomlint@") {
                &line[at + "/oomlint@".len()..]
            } else {
                continue;
            };
            let rev = rev
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('`');
            if rev.starts_with('<') {
                continue; // a placeholder the text explains: `@<40-hex SHA>`
            }
            assert!(ok(rev), "a revision that does not exist: {line}");
            seen += 1;
        }
    }
    assert!(
        seen >= 3,
        "the pre-commit and workflow snippets name revisions"
    );
}

#[test]
fn sarif_checks_reject_a_log_that_is_not_sarif() {
    // The two SARIF checks above must be able to fail: a key SARIF does not have, and a
    // level that is not one of SARIF's, in an otherwise valid log.
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "train.py", TRAIN);
    let out = oomlint(t.path())
        .args(["--format", "sarif"])
        .output()
        .unwrap();
    let good: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    sarif::validate("sarif_checks_reject_a_log_that_is_not_sarif", &good);

    let mut unknown_key = good.clone();
    unknown_key["runs"][0]["results"][0]["lineNumber"] = 7.into();
    let caught = std::panic::catch_unwind(|| sarif::round_trip(&unknown_key));
    assert!(caught.is_err(), "the round trip let an unknown key through");

    let mut bad_level = good.clone();
    bad_level["runs"][0]["results"][0]["level"] = "fatal".into();
    let caught = std::panic::catch_unwind(|| sarif::round_trip(&bad_level));
    assert!(caught.is_err(), "the round trip let level `fatal` through");
    if let Some(validator) = sarif::schema_validator("sarif_checks_reject_a_log_that_is_not_sarif")
    {
        assert!(validator.is_valid(&good));
        assert!(!validator.is_valid(&unknown_key));
        assert!(!validator.is_valid(&bad_level));
    }
}
