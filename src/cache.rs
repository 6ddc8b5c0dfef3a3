//! The result cache, like ruff's `.ruff_cache`: per file, the findings of the last run,
//! keyed by the file's content hash, the oomlint build, and the rules enabled for the
//! file. A re-run on an unchanged tree reads and hashes every file (the I/O floor) and
//! parses none.
//!
//! Never stale: the key holds everything a result depends on. The content hash and
//! length of the bytes (an edit changes them), the enabled rules of that file (a config
//! change changes them), and the build: the version plus the size and modification time
//! of the running binary, so a rebuilt binary of the same version starts afresh. Files
//! with warnings or errors, and notebooks with findings, are not cached (they are rare
//! and re-linted).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::fix::Fix;
use crate::pattern::Pattern;
use crate::project::{FileSummary, SummaryStore};
use crate::report::{FileReport, Finding, RelatedLocation};
use crate::rule::Rule;
use crate::rules;

pub const DIR: &str = ".oomlint_cache";

#[derive(Serialize, Deserialize, Clone)]
struct Entry {
    hash: u64,
    len: u64,
    rules: String,
    findings: Vec<CachedFinding>,
}

#[derive(Serialize, Deserialize, Clone)]
struct CachedFinding {
    code: String,
    message: String,
    help: String,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    start: usize,
    end: usize,
    pattern: Pattern,
    #[serde(default)]
    fix: Option<Fix>,
    #[serde(default)]
    related: Vec<RelatedLocation>,
}

#[derive(Serialize, Deserialize, Default)]
struct Store {
    build: String,
    files: HashMap<String, Entry>,
    /// Project-index summaries by content (`hash:len`), see [`crate::project`].
    #[serde(default)]
    summaries: HashMap<String, FileSummary>,
}

/// The cache of one run: read once at start, written once at the end.
pub struct Cache {
    file: PathBuf,
    build: String,
    old: HashMap<String, Entry>,
    new: Mutex<Vec<(String, Entry)>>,
    old_summaries: HashMap<String, FileSummary>,
    new_summaries: Mutex<HashMap<String, FileSummary>>,
}

/// The key of a file's content.
pub struct Key {
    hash: u64,
    len: u64,
    rules: String,
}

impl Key {
    pub fn new(bytes: &[u8], rules: &[&'static Rule]) -> Self {
        let mut h = std::hash::DefaultHasher::new();
        bytes.hash(&mut h);
        Key {
            hash: h.finish(),
            len: bytes.len() as u64,
            rules: rules.iter().map(|r| r.code).collect::<Vec<_>>().join(","),
        }
    }

    /// The key of a file linted with project facts of this fingerprint.
    pub fn with_facts(self, facts: Option<u64>) -> Self {
        match facts {
            Some(f) => Key {
                rules: format!("{}@{f:016x}", self.rules),
                ..self
            },
            None => self,
        }
    }
}

/// The most bytes read from the cache file: 256 MiB (about two million files' entries).
pub const MAX_CACHE_SIZE: u64 = 256 << 20;

/// Why the cache is not used this run: said once, as a warning, and the run goes on
/// without it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}; the cache is not used (remove it, or run `oomlint clean`)")]
pub struct CacheError {
    pub path: String,
    pub reason: String,
}

impl CacheError {
    fn new(path: &Path, reason: impl Into<String>) -> Self {
        CacheError {
            path: crate::paths::display(path),
            reason: reason.into(),
        }
    }
}

/// What is at `path`, not following a symbolic link: `Ok(false)` when nothing is,
/// `Ok(true)` for a folder, an error for anything else (a link to `.` must not make
/// oomlint write into the repository).
fn real_dir(path: &Path) -> Result<bool, CacheError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(m) => Err(CacheError::new(
            path,
            format!(
                "is {}, not a folder",
                crate::source::file_kind(&m.file_type())
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CacheError::new(path, crate::error::io_reason(&e))),
    }
}

/// The cache file's bytes: `Ok(None)` when there is none. Only a regular file is read,
/// never through a symbolic link, never blocking on a FIFO, and at most
/// [`MAX_CACHE_SIZE`] bytes.
fn read_store(file: &Path) -> Result<Option<Vec<u8>>, CacheError> {
    let m = match std::fs::symlink_metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CacheError::new(file, crate::error::io_reason(&e))),
    };
    let not_regular = |t: &std::fs::FileType| {
        CacheError::new(
            file,
            format!("is {}, not a regular file", crate::source::file_kind(t)),
        )
    };
    if !m.is_file() {
        return Err(not_regular(&m.file_type()));
    }
    let too_large = || {
        CacheError::new(
            file,
            format!(
                "is larger than {}",
                crate::source::format_size(MAX_CACHE_SIZE)
            ),
        )
    };
    if m.len() > MAX_CACHE_SIZE {
        return Err(too_large());
    }
    let f = crate::source::open_nonblocking(file, true)
        .map_err(|e| CacheError::new(file, crate::error::io_reason(&e)))?;
    let m = f
        .metadata()
        .map_err(|e| CacheError::new(file, crate::error::io_reason(&e)))?;
    if !m.is_file() {
        return Err(not_regular(&m.file_type()));
    }
    crate::source::read_bounded(f, MAX_CACHE_SIZE)
        .map_err(|e| CacheError::new(file, crate::error::io_reason(&e)))?
        .map(Some)
        .ok_or_else(too_large)
}

/// Creates `path` with `contents` unless something (a file, a link, anything) is there
/// already: never overwrites, never follows a link (`O_EXCL`).
fn write_new(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut f) => f.write_all(contents),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes sure `path` is a real folder (creating it if missing), never through a link.
fn make_dir(path: &Path) -> std::io::Result<()> {
    let exists = real_dir(path).map_err(|e| std::io::Error::other(e.reason))?;
    if !exists {
        match std::fs::create_dir(path) {
            Ok(()) => {}
            // Made by a concurrent run: check what it is.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                real_dir(path).map_err(|e| std::io::Error::other(e.reason))?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Cache {
    /// Opens the cache under `root` (the working directory). A missing cache, an
    /// unreadable or corrupt one, or one written by another build, is simply empty. A
    /// cache folder or file that is a symbolic link, or not a folder or regular file, or
    /// too large, is an error: the caller warns once and runs without a cache.
    pub fn open(root: &Path) -> Result<Self, CacheError> {
        let build = build_id();
        let dir = root.join(DIR);
        let version = dir.join(env!("CARGO_PKG_VERSION"));
        let file = version.join("results.json");
        let bytes = if real_dir(&dir)? && real_dir(&version)? {
            read_store(&file)?
        } else {
            None
        };
        let (old, old_summaries) = bytes
            .and_then(|b| serde_json::from_slice::<Store>(&b).ok())
            .filter(|s| s.build == build)
            .map(|s| (s.files, s.summaries))
            .unwrap_or_default();
        Ok(Cache {
            file,
            build,
            old,
            new: Mutex::new(Vec::new()),
            old_summaries,
            new_summaries: Mutex::default(),
        })
    }

    /// A cache read from `bytes` whatever build wrote it, not tied to a folder: for the
    /// fuzz target of the cache reader.
    #[doc(hidden)]
    pub fn from_bytes_any_build(bytes: &[u8]) -> Self {
        let old = serde_json::from_slice::<Store>(bytes)
            .map(|s| s.files)
            .unwrap_or_default();
        Cache {
            file: PathBuf::from(DIR).join("results.json"),
            build: String::new(),
            old,
            new: Mutex::new(Vec::new()),
            old_summaries: HashMap::new(),
            new_summaries: Mutex::default(),
        }
    }

    /// Every entry's report as [`Cache::get`] would serve it for a file of `bytes`,
    /// whatever the key: for the fuzz target of the cache reader.
    #[doc(hidden)]
    pub fn all_reports(&self, bytes: &[u8]) -> Vec<FileReport> {
        let mut paths: Vec<&String> = self.old.keys().collect();
        paths.sort();
        paths
            .into_iter()
            .filter_map(|p| self.report(p, &self.old[p], bytes))
            .collect()
    }

    /// The cached report for a file whose content and rules match, if any.
    pub fn get(&self, display: &str, key: &Key, bytes: &[u8]) -> Option<FileReport> {
        let e = self.old.get(display)?;
        if e.hash != key.hash || e.len != key.len || e.rules != key.rules {
            return None;
        }
        let report = self.report(display, e, bytes)?;
        self.keep(display, e.clone());
        Some(report)
    }

    /// An entry as a report. The cache is a file anyone could have written: a finding
    /// whose code is unknown or whose span does not lie in the file is a miss, so the
    /// file is linted afresh.
    fn report(&self, display: &str, e: &Entry, bytes: &[u8]) -> Option<FileReport> {
        let mut findings = Vec::with_capacity(e.findings.len());
        for f in &e.findings {
            let rule = rules::by_code(&f.code)?;
            findings.push(Finding {
                code: rule.code,
                name: rule.name,
                severity: rule.severity,
                message: f.message.clone(),
                help: f.help.clone(),
                path: display.to_owned(),
                line: f.line,
                column: f.column,
                end_line: f.end_line,
                end_column: f.end_column,
                range: (f.start, f.end),
                pattern: f.pattern,
                cell: None,
                fix: f.fix.clone(),
                related: f.related.clone(),
            });
        }
        let source: Option<std::sync::Arc<str>> =
            (!findings.is_empty()).then(|| crate::source::SourceText::decode(bytes).text.into());
        if let Some(text) = &source {
            let fits = |f: &Finding| {
                f.range.0 <= f.range.1
                    && text.is_char_boundary(f.range.0)
                    && text.is_char_boundary(f.range.1)
                    && f.line >= 1
                    && f.column >= 1
                    && (f.end_line, f.end_column) >= (f.line, f.column)
            };
            if !findings.iter().all(fits) {
                return None;
            }
        }
        Some(FileReport {
            path: display.to_owned(),
            findings,
            source,
            ..Default::default()
        })
    }

    /// Records a fresh result, if it is one the cache can hold.
    pub fn put(&self, key: Key, report: &FileReport) {
        // A notebook's findings know their cells, which the cache does not keep.
        let in_cells = report.findings.iter().any(|f| f.cell.is_some());
        if !report.warnings.is_empty() || !report.errors.is_empty() || in_cells {
            return;
        }
        let findings = report
            .findings
            .iter()
            .map(|f| CachedFinding {
                code: f.code.to_owned(),
                message: f.message.clone(),
                help: f.help.clone(),
                line: f.line,
                column: f.column,
                end_line: f.end_line,
                end_column: f.end_column,
                start: f.range.0,
                end: f.range.1,
                pattern: f.pattern,
                fix: f.fix.clone(),
                related: f.related.clone(),
            })
            .collect();
        self.keep(
            &report.path,
            Entry {
                hash: key.hash,
                len: key.len,
                rules: key.rules,
                findings,
            },
        );
    }

    fn keep(&self, display: &str, e: Entry) {
        self.new
            .lock()
            .expect("cache lock")
            .push((display.to_owned(), e));
    }

    /// Writes the entries of this run (files not seen this run are dropped). Written to
    /// a temporary file and renamed, so a concurrent run never reads half a cache. No
    /// symbolic link is followed: the folders must be real folders (or are created), the
    /// markers (`CACHEDIR.TAG`, `.gitignore`) are only created where nothing is, and the
    /// temporary file is created new.
    pub fn save(self) -> std::io::Result<()> {
        let files: HashMap<String, Entry> = self
            .new
            .into_inner()
            .expect("cache lock")
            .into_iter()
            .collect();
        let store = Store {
            build: self.build,
            files,
            summaries: self.new_summaries.into_inner().expect("cache lock"),
        };
        let dir = self.file.parent().expect("cache file has a folder");
        let root = dir.parent().expect("cache root");
        make_dir(root)?;
        write_new(
            &root.join("CACHEDIR.TAG"),
            b"Signature: 8a477f597d28d172789f06886806bc55\n\
              # This file is a cache directory tag created by oomlint.\n",
        )?;
        write_new(
            &root.join(".gitignore"),
            b"# Automatically created by oomlint.\n*\n",
        )?;
        make_dir(dir)?;
        let tmp = dir.join(format!("results.json.{}.tmp", std::process::id()));
        let json = serde_json::to_vec(&store).map_err(std::io::Error::other)?;
        // A leftover of a run that had this process id: removed (a link itself, not
        // what it points to), then created new.
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
            .and_then(|()| std::fs::rename(&tmp, &self.file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// Summaries of the project index, kept by content: a file whose bytes are unchanged
/// is not parsed again to be summarized. Only the summaries of this run's files are
/// written back.
impl SummaryStore for Cache {
    fn get(&self, key: (u64, u64)) -> Option<FileSummary> {
        let k = format!("{:016x}:{}", key.0, key.1);
        let s = self.old_summaries.get(&k)?.clone();
        self.new_summaries
            .lock()
            .expect("cache lock")
            .insert(k, s.clone());
        Some(s)
    }

    fn put(&self, key: (u64, u64), summary: &FileSummary) {
        let k = format!("{:016x}:{}", key.0, key.1);
        self.new_summaries
            .lock()
            .expect("cache lock")
            .insert(k, summary.clone());
    }
}

/// The build: version, and size and modification time of the running binary.
fn build_id() -> String {
    if let Ok(v) = std::env::var("OOMLINT_CACHE_BUILD") {
        // Lets tests stand in for "another build".
        return v;
    }
    let exe = std::env::current_exe().ok();
    let meta = exe.and_then(|e| std::fs::metadata(e).ok());
    let stamp = meta
        .map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}-{t}", m.len())
        })
        .unwrap_or_default();
    format!("{}-{stamp}", env!("CARGO_PKG_VERSION"))
}

/// `oomlint clean`: removes the cache under `root`. Returns whether there was one.
pub fn clean(root: &Path) -> std::io::Result<bool> {
    let dir = root.join(DIR);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
