//! The README's rule table is generated from the registry; this keeps them in sync.

#[test]
fn readme_rule_table_matches_registry() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme.find("<!-- rules:start").expect("rules:start marker");
    let start = start + readme[start..].find('\n').expect("newline") + 1;
    let end = readme.find("<!-- rules:end -->").expect("rules:end marker");
    assert_eq!(
        &readme[start..end],
        oomlint::rules::markdown_table(),
        "README rule table is stale: replace it with `oomlint rules --format markdown`"
    );
}

#[test]
fn readme_opens_with_run_and_test_commands() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let block = readme.split("```").nth(1).expect("a code block first");
    let lines: Vec<&str> = block
        .lines()
        .skip(1) // the block's language
        .map(|l| l.split(" #").next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    // A short sample first, then the fixtures counted, then the tests; `.ci/run` runs
    // these lines in a bare clone of the repository.
    assert_eq!(
        lines,
        [
            "cargo run --release -- examples/train.py",
            "cargo run --release -- --statistics fixtures/",
            "cargo test"
        ]
    );
    assert!(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/train.py")).is_file()
    );
}

/// The README shows what its first command prints; it must stay what oomlint prints.
#[test]
fn readme_example_output_is_what_oomlint_prints() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let marker = readme
        .find("<!-- ci: example-output")
        .expect("example-output marker");
    let block = &readme[marker..];
    let start = block.find("```text\n").expect("a text block") + "```text\n".len();
    let end = start + block[start..].find("```").expect("end of the block");
    let out = assert_cmd::Command::cargo_bin("oomlint")
        .unwrap()
        .current_dir(root)
        .env("NO_COLOR", "1")
        .args(["--no-cache", "examples/train.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // stdout (the findings), then stderr (the summary line), as a terminal shows them.
    let shown = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        &block[start..end],
        shown,
        "README's sample output is stale: replace it with `NO_COLOR=1 oomlint examples/train.py`"
    );
    assert!(
        shown.contains("\nFound 2 problems in 1 file (1 file checked)\n"),
        "{shown}"
    );
}

/// A clone of the repository alone has everything the README and the tests need.
#[test]
fn readme_points_at_nothing_outside_the_repository() {
    let root = env!("CARGO_MANIFEST_DIR");
    for file in ["README.md", "CONTRIBUTING.md"] {
        let text = std::fs::read_to_string(format!("{root}/{file}")).expect(file);
        assert!(!text.contains("../shared"), "{file} points at ../shared");
    }
}

#[test]
fn readme_confirm_table_matches_scenarios() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("<!-- confirm:start")
        .expect("confirm:start marker");
    let start = start + readme[start..].find('\n').expect("newline") + 1;
    let end = readme
        .find("<!-- confirm:end -->")
        .expect("confirm:end marker");
    let want = oomlint::confirm::markdown_table();
    assert_eq!(
        &readme[start..end],
        want,
        "README confirm table is stale; it should read:\n{want}"
    );
}

/// A rule reads the semantic model and nothing else: files in `rules/` import only the
/// rule prelude and `crate::semantic` (no parser, no I/O, no engine module).
#[test]
fn rules_import_only_the_prelude_and_the_model() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/rules");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).expect("rules/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("mod.rs") {
            continue;
        }
        let src = std::fs::read_to_string(&path).expect("rule source");
        for (n, line) in src.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                let after = &rest[i + "crate::".len()..];
                assert!(
                    after.starts_with("prelude") || after.starts_with("semantic"),
                    "{}:{}: a rule may use only crate::prelude and crate::semantic: {line}",
                    path.display(),
                    n + 1
                );
                rest = after;
            }
            for banned in [
                "tree_sitter::",
                "std::fs",
                "std::io",
                "std::process",
                "super::",
            ] {
                assert!(
                    !code.contains(banned),
                    "{}:{}: a rule may not use {banned}: {line}",
                    path.display(),
                    n + 1
                );
            }
            if code.trim_start().starts_with("use ") {
                let t = code.trim_start();
                assert!(
                    t.starts_with("use crate::prelude::") || t.starts_with("use crate::semantic"),
                    "{}:{}: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} rule files found");
}

/// The README's options table is generated from the clap definitions of `check` (every
/// visible flag, its values and default, then every output format); this keeps them in
/// sync, as the rule table is kept.
#[test]
fn readme_options_table_matches_the_command_line() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let start = readme
        .find("<!-- options:start")
        .expect("options:start marker");
    let start = start + readme[start..].find('\n').expect("newline") + 1;
    let end = readme
        .find("<!-- options:end -->")
        .expect("options:end marker");
    let out = assert_cmd::Command::cargo_bin("oomlint")
        .unwrap()
        .arg("__options")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    // Not empty by accident: the flags and formats the issues named are there.
    for needle in [
        "`--format` `<FORMAT>`, `--output-format`",
        "`--fail-on`",
        "`--exit-non-zero-on-empty`",
        "`--stdin-filename`",
        "| `sarif` |",
        "| `junit` |",
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }
    assert!(!table.contains("--parse-only"), "hidden flags stay out");
    assert_eq!(
        &readme[start..end],
        table,
        "README options table is stale: replace it with `cargo run -- __options`"
    );
}
