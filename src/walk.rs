//! Finding the files to lint: `ignore`'s walker (gitignore, .ignore, global excludes,
//! hidden files) plus the directories no Python project wants linted.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::overrides::OverrideBuilder;
use ignore::{WalkBuilder, WalkState};

use crate::error::FileError;
use crate::paths::display;

/// Directories never descended into (a path named on the command line still is).
pub const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    "__pycache__",
    "node_modules",
    "site-packages",
    "build",
    "dist",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".oomlint_cache",
];

#[derive(Clone, Debug, Default)]
pub struct WalkOptions {
    pub respect_gitignore: bool,
    pub exclude: Vec<String>,
    pub threads: usize,
    /// Decides which files and folders below a named path are skipped (the
    /// configuration's `exclude`); when `None`, the folders in [`SKIPPED_DIRS`] are.
    pub excluded: Option<Excluder>,
}

/// A shared predicate over paths met by the walk: `true` skips the path.
#[derive(Clone)]
pub struct Excluder(pub std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>);

impl std::fmt::Debug for Excluder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Excluder")
    }
}

/// A file to lint, and the path to show for it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileEntry {
    pub path: PathBuf,
    pub display: String,
}

/// The files under `paths`, sorted and deduplicated, and the paths that could not be walked.
pub fn collect(paths: &[PathBuf], opts: &WalkOptions) -> (Vec<FileEntry>, Vec<FileError>) {
    let files = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    let mut dirs = Vec::new();
    for p in paths {
        let shown = display(p);
        match std::fs::metadata(p) {
            // A file named on the command line is always linted, whatever its name.
            Ok(m) if !m.is_dir() => files.lock().expect("lock").push(FileEntry {
                path: p.clone(),
                display: shown,
            }),
            Ok(_) => dirs.push(p.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink is "not found" too; say so either way.
                errors
                    .lock()
                    .expect("lock")
                    .push(FileError::NotFound { path: shown })
            }
            Err(e) => errors.lock().expect("lock").push(FileError::Io {
                path: shown,
                reason: crate::error::io_reason(&e),
            }),
        }
    }
    if let Some((first, rest)) = dirs.split_first() {
        let mut builder = WalkBuilder::new(first);
        for d in rest {
            builder.add(d);
        }
        builder
            .hidden(true)
            .parents(opts.respect_gitignore)
            .ignore(opts.respect_gitignore)
            .git_ignore(opts.respect_gitignore)
            .git_global(opts.respect_gitignore)
            .git_exclude(opts.respect_gitignore)
            .require_git(false)
            .follow_links(false)
            .threads(opts.threads.max(1))
            .filter_entry({
                let excluded = opts.excluded.clone();
                move |e| {
                    if e.depth() == 0 {
                        return true;
                    }
                    if let Some(x) = &excluded {
                        return !(x.0)(e.path());
                    }
                    !(e.file_type().is_some_and(|t| t.is_dir())
                        && e.file_name()
                            .to_str()
                            .is_some_and(|n| SKIPPED_DIRS.contains(&n)))
                }
            });
        if !opts.exclude.is_empty() {
            let mut ov = OverrideBuilder::new(".");
            for g in &opts.exclude {
                if let Err(e) = ov.add(&format!("!{g}")) {
                    errors.lock().expect("lock").push(FileError::Walk {
                        path: g.clone(),
                        reason: format!("invalid --exclude glob: {e}"),
                    });
                }
            }
            if let Ok(ov) = ov.build() {
                builder.overrides(ov);
            }
        }
        builder.build_parallel().run(|| {
            Box::new(|entry| {
                match entry {
                    Ok(e) => {
                        let is_file = e.file_type().is_some_and(|t| t.is_file());
                        if is_file && is_python(e.path()) {
                            files.lock().expect("lock").push(FileEntry {
                                display: display(e.path()),
                                path: e.into_path(),
                            });
                        }
                    }
                    Err(err) => errors.lock().expect("lock").push(walk_error(&err)),
                }
                WalkState::Continue
            })
        });
    }
    let files = files.into_inner().expect("lock");
    // `pkg/` and `.` both reach `./pkg/m.py`, and a file may be named many times, or
    // both as `m.py` and as `/abs/m.py`: lint it once, under its shortest relative name. The identity is the path itself, not the shown one: two names that differ
    // only in bytes that are not UTF-8 are shown alike but are two files.
    let cwd = std::env::current_dir().unwrap_or_default();
    let identity = |p: &Path| -> PathBuf {
        cwd.join(p)
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect()
    };
    let mut keyed: Vec<(PathBuf, FileEntry)> =
        files.into_iter().map(|f| (identity(&f.path), f)).collect();
    let rank = |f: &FileEntry| (f.path.is_absolute(), f.display.len());
    keyed.sort_by(|a, b| (&a.0, rank(&a.1), &a.1.display).cmp(&(&b.0, rank(&b.1), &b.1.display)));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let mut files: Vec<FileEntry> = keyed.into_iter().map(|(_, f)| f).collect();
    files.sort_by(|a, b| a.display.cmp(&b.display).then_with(|| a.path.cmp(&b.path)));
    let mut errors = errors.into_inner().expect("lock");
    errors.sort_by_key(|e| e.to_string());
    (files, errors)
}

/// The most threads `-j` gives: four per CPU, at least 8 and at most 256. Each thread of
/// the walk and of the linting pool costs a stack and start-up time, and holds the
/// syntax tree and model of the file it lints (about 50 MB per MB of source): more
/// threads than CPUs only help to wait on the disk, and `-j 1000` on two cores would
/// only multiply the memory of a run (`-j 5000` took minutes to start).
pub fn max_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_mul(4)
        .clamp(8, 256)
}

/// The number of threads for `-j` (`None`: one per CPU), clamped to [`max_threads`],
/// and the warning to print when it was clamped.
pub fn threads(requested: Option<usize>) -> (usize, Option<String>) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = requested.unwrap_or(cpus).max(1);
    let max = max_threads();
    if n > max {
        (
            max,
            Some(format!(
                "--threads {n} is more than oomlint uses; using {max} ({cpus} CPUs here)"
            )),
        )
    } else {
        (n, None)
    }
}

/// Python files and Jupyter notebooks.
pub fn is_python(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "py" || e == "ipynb")
}

fn walk_error(err: &ignore::Error) -> FileError {
    // `ignore` wraps the failing path in its error; unwrap it so the message names it.
    let mut path = String::new();
    let mut e = err;
    loop {
        match e {
            ignore::Error::WithPath { path: p, err } => {
                path = display(p);
                e = err;
            }
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                e = err
            }
            ignore::Error::Loop { child, .. } => {
                return FileError::Walk {
                    path: display(child),
                    reason: "symbolic link loop".to_owned(),
                }
            }
            ignore::Error::Io(io) => {
                return FileError::Walk {
                    path,
                    reason: crate::error::io_reason(io),
                }
            }
            other => {
                return FileError::Walk {
                    path,
                    reason: other.to_string(),
                }
            }
        }
    }
}

/// The files directly in `dir`, not in its subfolders, that a walk of it would not skip
/// as hidden or excluded: the project of a file with no project marker above it.
pub fn files_beside(dir: &Path, opts: &WalkOptions) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| opts.excluded.as_ref().is_none_or(|x| !(x.0)(p)))
        .collect()
}
