//! The result cache must never serve a stale result: an edited file, a changed
//! configuration and another build all lint afresh.

use std::path::Path;

use assert_cmd::Command;

const LEAK: &str = "losses = []\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n    losses.append(loss)\n";

fn run(dir: &Path, build: &str, extra: &[&str]) -> String {
    let out = Command::cargo_bin("oomlint")
        .expect("binary")
        .current_dir(dir)
        .env("OOMLINT_CACHE_BUILD", build)
        .args(["--format", "concise", "--exit-zero", "."])
        .args(extra)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn cache_is_written_with_its_markers_and_serves_unchanged_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    let first = run(dir.path(), "b1", &[]);
    assert!(first.contains("train.py:7:5: OOM201"), "{first}");
    let cache = dir.path().join(".oomlint_cache");
    assert!(cache.join("CACHEDIR.TAG").is_file());
    assert_eq!(
        std::fs::read_to_string(cache.join(".gitignore")).expect("gitignore"),
        "# Automatically created by oomlint.\n*\n"
    );
    assert_eq!(run(dir.path(), "b1", &[]), first);
}

#[test]
fn an_edited_file_is_linted_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("train.py");
    std::fs::write(&f, LEAK).expect("write");
    assert!(run(dir.path(), "b1", &[]).contains("OOM201"));
    std::fs::write(&f, LEAK.replace("append(loss)", "append(loss.item())")).expect("write");
    assert_eq!(run(dir.path(), "b1", &[]), "");
    // Same length, different bytes.
    std::fs::write(
        &f,
        LEAK.replace("losses.append", "history.append")
            .replace("losses = []", "history = []"),
    )
    .expect("write");
    assert!(run(dir.path(), "b1", &[]).contains("`history`"));
}

#[test]
fn a_config_change_is_seen() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    assert!(run(dir.path(), "b1", &[]).contains("OOM201"));
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.oomlint]\nignore = [\"OOM201\"]\n",
    )
    .expect("write");
    assert_eq!(run(dir.path(), "b1", &[]), "");
    std::fs::remove_file(dir.path().join("pyproject.toml")).expect("rm");
    assert!(run(dir.path(), "b1", &[]).contains("OOM201"));
    // Command-line selection counts as configuration too.
    assert_eq!(run(dir.path(), "b1", &["--select", "OOM202"]), "");
}

#[test]
fn another_build_does_not_read_this_builds_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    run(dir.path(), "b1", &[]);
    // Tamper with the stored message: the same build serves it (so the cache is
    // really used), another build must not.
    let store = dir.path().join(".oomlint_cache/0.1.0/results.json");
    let text = std::fs::read_to_string(&store).expect("cache file");
    assert!(text.contains("is stored in"), "{text}");
    std::fs::write(&store, text.replace("is stored in", "CACHED is stored in")).expect("write");
    assert!(run(dir.path(), "b1", &[]).contains("CACHED"));
    let other = run(dir.path(), "b2", &[]);
    assert!(
        other.contains("OOM201") && !other.contains("CACHED"),
        "{other}"
    );
}

#[test]
fn no_cache_and_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    run(dir.path(), "b1", &["--no-cache"]);
    assert!(!dir.path().join(".oomlint_cache").exists());
    run(dir.path(), "b1", &[]);
    assert!(dir.path().join(".oomlint_cache").exists());
    Command::cargo_bin("oomlint")
        .expect("binary")
        .current_dir(dir.path())
        .arg("clean")
        .assert()
        .success();
    assert!(!dir.path().join(".oomlint_cache").exists());
}
