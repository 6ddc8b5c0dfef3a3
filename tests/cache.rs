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

/// Runs in `dir` (build `b1`) with a 60 s limit: (stdout, stderr).
fn run_out(dir: &Path, extra: &[&str]) -> (String, String) {
    let out = Command::cargo_bin("oomlint")
        .expect("binary")
        .current_dir(dir)
        .env("OOMLINT_CACHE_BUILD", "b1")
        .args(["--format", "concise", "--exit-zero", "."])
        .args(extra)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

/// A committed `.oomlint_cache` that is a symbolic link to `.`: oomlint neither reads nor
/// writes through it (the repository's `.gitignore` stays, no `CACHEDIR.TAG` appears at
/// the root), says so once, and lints without a cache.
#[cfg(unix)]
#[test]
fn a_cache_folder_that_is_a_link_is_not_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    std::fs::write(dir.path().join(".gitignore"), "mine\n").expect("write");
    std::os::unix::fs::symlink(".", dir.path().join(".oomlint_cache")).expect("link");
    for _ in 0..2 {
        let (stdout, stderr) = run_out(dir.path(), &[]);
        assert!(stdout.contains("train.py:7:5: OOM201"), "{stdout}");
        assert_eq!(
            stderr,
            "oomlint: warning: .oomlint_cache: is a symbolic link, not a folder; the cache is not used (remove it, or run `oomlint clean`)\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".gitignore")).unwrap(),
        "mine\n"
    );
    assert!(!dir.path().join("CACHEDIR.TAG").exists());
    assert!(!dir.path().join(env!("CARGO_PKG_VERSION")).exists());
    // The same for the version folder.
    std::fs::remove_file(dir.path().join(".oomlint_cache")).unwrap();
    std::fs::create_dir(dir.path().join(".oomlint_cache")).unwrap();
    std::os::unix::fs::symlink("..", dir.path().join(".oomlint_cache/0.1.0")).expect("link");
    let (_, stderr) = run_out(dir.path(), &[]);
    assert!(
        stderr.contains("is a symbolic link, not a folder"),
        "{stderr}"
    );
    assert!(!dir.path().join("results.json").exists());
}

/// `results.json` as a link to `/dev/zero`, as a FIFO, or as a folder: never read (no
/// hang, no memory eaten), one warning, the findings as without a cache.
#[cfg(unix)]
#[test]
fn a_cache_file_that_is_not_a_regular_file_is_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    let version = dir.path().join(".oomlint_cache/0.1.0");
    std::fs::create_dir_all(&version).unwrap();
    let store = version.join("results.json");
    let check = |what: &str| {
        let t = std::time::Instant::now();
        let (stdout, stderr) = run_out(dir.path(), &[]);
        assert!(t.elapsed().as_secs() < 30, "{what}: {:?}", t.elapsed());
        assert!(stdout.contains("train.py:7:5: OOM201"), "{what}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "oomlint: warning: .oomlint_cache/0.1.0/results.json: is {what}"
            )),
            "{stderr}"
        );
    };
    std::os::unix::fs::symlink("/dev/zero", &store).unwrap();
    check("a symbolic link");
    std::fs::remove_file(&store).unwrap();
    let c = std::ffi::CString::new(store.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    check("a FIFO");
    std::fs::remove_file(&store).unwrap();
    std::fs::create_dir(&store).unwrap();
    check("a directory");
}

/// Markers oomlint did not write are never overwritten; a cache that another tool (or
/// a hostile commit) wrote with spans outside the file is a miss, not a broken report.
#[test]
fn foreign_markers_stay_and_bad_entries_are_misses() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("train.py"), LEAK).expect("write");
    let cache = dir.path().join(".oomlint_cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::write(cache.join(".gitignore"), "!keep\n").unwrap();
    std::fs::write(cache.join("CACHEDIR.TAG"), "not ours\n").unwrap();
    let first = run(dir.path(), "b1", &[]);
    assert_eq!(
        std::fs::read_to_string(cache.join(".gitignore")).unwrap(),
        "!keep\n"
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("CACHEDIR.TAG")).unwrap(),
        "not ours\n"
    );
    let store = cache.join("0.1.0/results.json");
    let text = std::fs::read_to_string(&store).expect("cache written");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let start = v["files"]["train.py"]["findings"][0]["start"].clone();
    assert!(start.is_u64(), "{text}");
    let bad = text
        .replacen(&format!("\"start\":{start}"), "\"start\":999999999", 1)
        .replace("is stored in", "CACHED is stored in");
    std::fs::write(&store, bad).unwrap();
    for format in ["concise", "text"] {
        let out = Command::cargo_bin("oomlint")
            .unwrap()
            .current_dir(dir.path())
            .env("OOMLINT_CACHE_BUILD", "b1")
            .args(["--exit-zero", "--color", "never", "--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(!stdout.contains("CACHED"), "{format}: {stdout}");
        if format == "concise" {
            assert_eq!(stdout, first);
        }
    }
}

const HELPER: &str = "import torch\n\n\ndef collect(model, loader):\n    outs = []\n    for batch in loader:\n        outs.append(model(batch))\n    return outs\n";

#[test]
fn a_dependency_whose_summary_changes_relints_its_dependents() {
    // `helpers.py` is unchanged throughout; what changes is whether its only caller, in
    // `train.py`, runs it under no_grad.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("helpers.py"), HELPER).expect("write");
    let quiet = "import torch\nfrom helpers import collect\n\nwith torch.no_grad():\n    collect(net, loader)\n";
    std::fs::write(dir.path().join("train.py"), quiet).expect("write");
    assert_eq!(run(dir.path(), "b1", &[]), "");
    assert_eq!(run(dir.path(), "b1", &[]), "");
    let loud = "import torch\nfrom helpers import collect\n\ncollect(net, loader)\n";
    std::fs::write(dir.path().join("train.py"), loud).expect("write");
    let out = run(dir.path(), "b1", &[]);
    assert!(out.contains("helpers.py:7:9: OOM201"), "{out}");
    // And back: the summary of train.py, served from the cache, still counts.
    std::fs::write(dir.path().join("train.py"), quiet).expect("write");
    assert_eq!(run(dir.path(), "b1", &[]), "");
    assert_eq!(run(dir.path(), "b1", &[]), "");
}

#[test]
fn a_single_file_gets_the_context_of_the_files_beside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("pyproject.toml"), "").expect("write");
    std::fs::create_dir(dir.path().join("pkg")).expect("mkdir");
    std::fs::write(dir.path().join("pkg/helpers.py"), HELPER).expect("write");
    let quiet = "import torch\nfrom pkg.helpers import collect\n\nwith torch.no_grad():\n    collect(net, loader)\n";
    std::fs::write(dir.path().join("train.py"), quiet).expect("write");
    let out = Command::cargo_bin("oomlint")
        .expect("binary")
        .current_dir(dir.path().join("pkg"))
        .args([
            "--format",
            "concise",
            "--exit-zero",
            "--no-cache",
            "helpers.py",
        ])
        .output()
        .expect("runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

#[test]
fn a_single_file_outside_any_project_sees_its_folder_but_not_below() {
    // With no `pyproject.toml`, `setup.py` or `.git` above it, a named file's project
    // is its folder alone: such folders (`/tmp`, `~/Downloads`) hold unrelated trees.
    let dir = tempfile::tempdir().expect("tempdir");
    if oomlint::project::project_root(dir.path()).is_some() {
        return; // the temporary folder lies inside a project on this machine
    }
    std::fs::write(dir.path().join("helpers.py"), HELPER).expect("write");
    let quiet = "import torch\nfrom helpers import collect\n\nwith torch.no_grad():\n    collect(net, loader)\n";
    let lint_helpers = || {
        let out = Command::cargo_bin("oomlint")
            .expect("binary")
            .current_dir(dir.path())
            .args(["--format", "concise", "--exit-zero", "--no-cache"])
            .arg(dir.path().join("helpers.py"))
            .output()
            .expect("runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The only caller sits in a subfolder: not part of the file's project.
    std::fs::create_dir(dir.path().join("scripts")).expect("mkdir");
    std::fs::write(dir.path().join("scripts/train.py"), quiet).expect("write");
    assert!(lint_helpers().contains("helpers.py:7:9: OOM201"));
    // A caller beside it counts.
    std::fs::write(dir.path().join("train.py"), quiet).expect("write");
    assert_eq!(lint_helpers(), "");
}
