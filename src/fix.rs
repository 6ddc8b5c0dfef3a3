//! Fixes: the edits that remove a finding, marked safe (behaviour kept) or unsafe (may
//! change behaviour), as ruff marks them. A rule attaches one to its diagnostic; the
//! engine applies them (`--fix`, `--unsafe-fixes`, `--diff`).
//!
//! This module holds the pieces every client of fixes shares (the CLI, `--add-noqa`,
//! the language server): applying edits to a text ([`apply_edits`]), choosing the fixes
//! of one pass that do not collide ([`apply_fixes`]), keeping a file's line endings
//! ([`with_line_ending`]), and writing a file atomically with its permissions kept
//! ([`write_atomic`]). Notebooks are edited in their cells by
//! [`crate::notebook::Notebook::apply_edits`].

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Replace `range` (bytes of the decoded source) with `content`; an empty range inserts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    pub range: Range<usize>,
    pub content: String,
}

impl Edit {
    pub fn replace(range: Range<usize>, content: impl Into<String>) -> Edit {
        Edit {
            range,
            content: content.into(),
        }
    }

    pub fn insert(at: usize, content: impl Into<String>) -> Edit {
        Edit::replace(at..at, content)
    }

    pub fn delete(range: Range<usize>) -> Edit {
        Edit::replace(range, "")
    }
}

/// Whether applying a fix keeps the program's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Applicability {
    /// May change behaviour: applied only with `--unsafe-fixes`.
    Unsafe,
    /// Keeps behaviour: applied by `--fix`.
    Safe,
}

impl Applicability {
    pub fn as_str(self) -> &'static str {
        match self {
            Applicability::Unsafe => "unsafe",
            Applicability::Safe => "safe",
        }
    }
}

/// The edits that remove one finding, applied together or not at all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// What the fix does, in a few words (`Replace with loss.item()`).
    pub title: String,
    pub edits: Vec<Edit>,
    pub applicability: Applicability,
}

impl Fix {
    pub fn safe(title: impl Into<String>, edits: Vec<Edit>) -> Fix {
        Fix {
            title: title.into(),
            edits,
            applicability: Applicability::Safe,
        }
    }

    pub fn unsafe_(title: impl Into<String>, edits: Vec<Edit>) -> Fix {
        Fix {
            title: title.into(),
            edits,
            applicability: Applicability::Unsafe,
        }
    }

    /// Whether a run that applies fixes of at least `min` applies this one.
    pub fn applies(&self, min: Applicability) -> bool {
        self.applicability >= min
    }
}

/// Why a set of edits could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FixError {
    #[error("edits overlap: {0:?} and {1:?}")]
    Overlap(Range<usize>, Range<usize>),
    #[error("edit {0:?} lies outside the text or splits a character")]
    OutOfBounds(Range<usize>),
    /// A notebook edit that no single code cell holds, or that touches IPython syntax
    /// the linter saw blanked.
    #[error("edit {0:?} does not lie within one code cell's Python code")]
    NotInCell(Range<usize>),
}

/// Applies `edits` to `text`. The edits may come in any order; they are applied in
/// order of position (insertions at the same offset in the order given, and before a
/// replacement starting there). Overlapping edits are an error: a caller that holds
/// edits of several fixes chooses the ones that fit together first ([`apply_fixes`]).
/// Every range must lie in `text` on character boundaries.
pub fn apply_edits(text: &str, edits: &[Edit]) -> Result<String, FixError> {
    let mut order: Vec<&Edit> = edits.iter().collect();
    // Stable: insertions at one offset keep their given order; an insertion sorts
    // before a replacement that starts at the same offset (its end is smaller).
    order.sort_by_key(|e| (e.range.start, e.range.end));
    let mut out =
        String::with_capacity(text.len() + edits.iter().map(|e| e.content.len()).sum::<usize>());
    let mut at = 0;
    let mut prev: Option<&Range<usize>> = None;
    for e in order {
        let r = &e.range;
        if r.start > r.end
            || r.end > text.len()
            || !text.is_char_boundary(r.start)
            || !text.is_char_boundary(r.end)
        {
            return Err(FixError::OutOfBounds(r.clone()));
        }
        if let Some(p) = prev {
            if r.start < p.end {
                return Err(FixError::Overlap(p.clone(), r.clone()));
            }
        }
        out.push_str(&text[at..r.start]);
        out.push_str(&e.content);
        at = r.end;
        prev = Some(r);
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// The result of one pass of fixes over a text.
#[derive(Debug)]
pub struct Applied {
    pub text: String,
    /// How many fixes were applied (each removes one finding).
    pub fixed: usize,
    /// The edits of the fixes applied, in position order.
    pub edits: Vec<Edit>,
}

/// Applies as many of `fixes` as fit together in one pass, ruff's way: fixes in order
/// of their first edit, each taken whole if none of its edits overlaps or touches an
/// edit already taken (two fixes that both insert at one offset would interleave),
/// else left for the next pass, when the re-linted file offers it again. A fix whose
/// own edits are invalid is skipped.
pub fn apply_fixes<'f>(text: &str, fixes: impl IntoIterator<Item = &'f Fix>) -> Applied {
    let mut fixes: Vec<&Fix> = fixes.into_iter().filter(|f| !f.edits.is_empty()).collect();
    fixes.sort_by_key(|f| {
        f.edits
            .iter()
            .map(|e| (e.range.start, e.range.end))
            .min()
            .unwrap_or((0, 0))
    });
    fixes.dedup_by(|a, b| a.edits == b.edits);
    let mut taken: Vec<Edit> = Vec::new();
    let mut fixed = 0;
    for fix in fixes {
        let collides = fix.edits.iter().any(|e| {
            taken.iter().any(|t| {
                e.range.start < t.range.end && t.range.start < e.range.end
                    || e.range.start == t.range.start
                    || (e.range.is_empty() || t.range.is_empty())
                        && (e.range.start == t.range.end || t.range.start == e.range.end)
            })
        });
        if collides {
            continue;
        }
        // The fix's own edits must fit the text and each other.
        let mut with: Vec<Edit> = taken.clone();
        with.extend(fix.edits.iter().cloned());
        if apply_edits(text, &fix.edits).is_err() || apply_edits(text, &with).is_err() {
            continue;
        }
        taken = with;
        fixed += 1;
    }
    taken.sort_by_key(|e| (e.range.start, e.range.end));
    let text = apply_edits(text, &taken).unwrap_or_else(|_| text.to_owned());
    Applied {
        text,
        fixed,
        edits: taken,
    }
}

/// The line ending a file uses: that of its first line break (`\r\n` or `\n`).
pub fn line_ending(text: &str) -> &'static str {
    match memchr::memchr(b'\n', text.as_bytes()) {
        Some(i) if i > 0 && text.as_bytes()[i - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

/// `content` with each bare `\n` written as `ending`: rules write `\n`, and a file
/// with CRLF line endings keeps them.
pub fn with_line_ending(content: &str, ending: &str) -> String {
    if ending == "\n" || !content.contains('\n') {
        return content.to_owned();
    }
    let mut out = String::with_capacity(content.len() + 8);
    let mut prev = '\0';
    for c in content.chars() {
        if c == '\n' && prev != '\r' {
            out.push('\r');
        }
        out.push(c);
        prev = c;
    }
    out
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, flushed to
/// disk, with the permissions of the file it replaces, then renamed over it, so a
/// reader never sees half a file and a crash leaves the old one whole. A path that is
/// a symbolic link is followed (the link stays a link). A file its owner may not write
/// is refused (`PermissionDenied`) even where the folder would allow the rename: fixing
/// must not override a read-only mark.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let meta = std::fs::metadata(&target)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    // A file with no write bit is read-only even for root, who `access` lets write.
    if meta.permissions().readonly() || !writable(&target) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "permission denied",
        ));
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp_path, mut tmp) = create_temp(dir, &name)?;
    let written = (|| {
        tmp.write_all(bytes)?;
        tmp.set_permissions(meta.permissions())?;
        tmp.sync_all()?;
        drop(tmp);
        std::fs::rename(&tmp_path, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    written
}

/// A new file beside the one to replace, named after it (`.train.py.oomlint-1234-0.tmp`),
/// created exclusively so nothing in its place is overwritten.
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = dir.join(format!(".{name}.oomlint-{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1_000_000 => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(not(unix))]
fn writable(_path: &Path) -> bool {
    true
}

/// A unified diff of `old` and `new` under the name `path` (`--- path`, `+++ path`),
/// with three lines of context; empty when they are equal.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = diff
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_position_order() {
        let t = "total += loss\n";
        let edits = [Edit::insert(13, ".item()"), Edit::replace(0..5, "running")];
        assert_eq!(apply_edits(t, &edits).unwrap(), "running += loss.item()\n");
        // Two insertions at one offset keep their order; a replacement there follows.
        let edits = [
            Edit::insert(0, "a"),
            Edit::replace(0..5, "X"),
            Edit::insert(0, "b"),
        ];
        assert_eq!(apply_edits(t, &edits).unwrap(), "abX += loss\n");
    }

    #[test]
    fn overlapping_or_bad_edits_are_errors() {
        let t = "héllo";
        assert!(matches!(
            apply_edits(t, &[Edit::delete(0..3), Edit::delete(1..4)]),
            Err(FixError::Overlap(..))
        ));
        assert!(matches!(
            apply_edits(t, &[Edit::delete(0..2)]),
            Err(FixError::OutOfBounds(_))
        ));
        assert!(matches!(
            apply_edits(t, &[Edit::delete(3..99)]),
            Err(FixError::OutOfBounds(_))
        ));
    }

    #[test]
    fn colliding_fixes_wait_for_the_next_pass() {
        let t = "a = x\nb = y\n";
        let f1 = Fix::safe("1", vec![Edit::insert(5, ".item()")]);
        let f2 = Fix::safe("2", vec![Edit::insert(5, ".detach()")]);
        let f3 = Fix::safe("3", vec![Edit::insert(11, ".item()")]);
        let a = apply_fixes(t, [&f2, &f1, &f3]);
        assert_eq!(a.fixed, 2);
        assert_eq!(a.text, "a = x.detach()\nb = y.item()\n");
    }

    #[test]
    fn crlf_is_kept() {
        assert_eq!(line_ending("a\r\nb\n"), "\r\n");
        assert_eq!(line_ending("a\nb\r\n"), "\n");
        assert_eq!(with_line_ending("x\ny\r\nz", "\r\n"), "x\r\ny\r\nz");
        assert_eq!(with_line_ending("x\ny", "\n"), "x\ny");
    }

    #[test]
    fn atomic_write_keeps_permissions_and_refuses_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("train.py");
        std::fs::write(&p, "old\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
            write_atomic(&p, b"new\n").unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o751);
            // Through a link: the target changes, the link stays.
            let link = dir.path().join("link.py");
            std::os::unix::fs::symlink(&p, &link).unwrap();
            write_atomic(&link, b"newer\n").unwrap();
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "newer\n");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
            let e = write_atomic(&p, b"x").unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "newer\n");
        }
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            names.iter().all(|n| !n.to_string_lossy().ends_with(".tmp")),
            "{names:?}"
        );
    }

    #[test]
    fn diff_is_unified() {
        let d = unified_diff("t.py", "a\nb\nc\n", "a\nB\nc\n");
        assert!(
            d.starts_with("--- t.py\n+++ t.py\n@@ -1,3 +1,3 @@\n"),
            "{d}"
        );
        assert!(d.contains("-b\n+B\n"), "{d}");
        assert_eq!(unified_diff("t.py", "a\n", "a\n"), "");
    }
}
