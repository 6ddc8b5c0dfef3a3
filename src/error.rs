//! Errors of the tool itself (not findings): typed, naming the file and the cause.

use miette::Diagnostic;
use thiserror::Error;

/// Something that went wrong with one file or path. The run goes on with the others.
#[derive(Debug, Error, Diagnostic, Clone, PartialEq, Eq)]
pub enum FileError {
    #[error("{path}: cannot read: {reason}")]
    #[diagnostic(code(oomlint::io))]
    Io { path: String, reason: String },

    #[error("{path}: no such file or directory")]
    #[diagnostic(code(oomlint::not_found))]
    NotFound { path: String },

    #[error("{path}: cannot walk: {reason}")]
    #[diagnostic(code(oomlint::walk))]
    Walk { path: String, reason: String },

    #[error("{path}: {reason}")]
    #[diagnostic(code(oomlint::notebook))]
    Notebook { path: String, reason: String },

    #[error("{path}: not a regular file ({kind}); not read")]
    #[diagnostic(code(oomlint::not_regular))]
    NotRegular { path: String, kind: String },

    #[error("{path}: looks binary (contains NUL bytes); not linted")]
    #[diagnostic(code(oomlint::binary))]
    Binary { path: String },

    #[error("{path}: cannot write the fixes: {reason}; file left unchanged")]
    #[diagnostic(code(oomlint::write))]
    Write { path: String, reason: String },

    #[error("{path}: internal error in {rule} (a bug in oomlint, please report it): {message}")]
    #[diagnostic(code(oomlint::internal))]
    Internal {
        path: String,
        rule: String,
        message: String,
    },
}

impl FileError {
    /// The path the error is about.
    pub fn path(&self) -> &str {
        match self {
            FileError::Io { path, .. }
            | FileError::NotFound { path }
            | FileError::Walk { path, .. }
            | FileError::Notebook { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::Binary { path }
            | FileError::Write { path, .. }
            | FileError::Internal { path, .. } => path,
        }
    }

    /// The error's code, as its diagnostic names it (`oomlint::binary`).
    pub fn code_name(&self) -> String {
        miette::Diagnostic::code(self)
            .map(|c| c.to_string())
            .unwrap_or_else(|| "oomlint::error".to_owned())
    }

    /// The file could not be linted because of what it is (unreadable, not a regular
    /// file, binary, a broken notebook), not because of a bug in oomlint or a path
    /// that does not exist: what `--allow-unlintable` turns from an error exit into a
    /// report only (ruff's E902).
    pub fn is_unlintable(&self) -> bool {
        matches!(
            self,
            FileError::Io { .. }
                | FileError::Notebook { .. }
                | FileError::NotRegular { .. }
                | FileError::Binary { .. }
        )
    }
}

/// A problem that leaves the file linted (partially): reported, but not an error exit.
#[derive(Debug, Error, Diagnostic, Clone, PartialEq, Eq)]
pub enum FileWarning {
    /// Fixes were offered but not applied: the fixed text would not parse, or the file
    /// could not be written back as it was read.
    #[error("{path}: {reason}")]
    #[diagnostic(code(oomlint::fix))]
    NotFixed { path: String, reason: String },

    #[error("{path}:{line}:{column}: syntax error; findings come only from the parts that parse")]
    #[diagnostic(code(oomlint::syntax))]
    Syntax {
        path: String,
        line: usize,
        column: usize,
    },

    #[error("{path}: not valid UTF-8; invalid bytes were replaced and the rest was linted")]
    #[diagnostic(code(oomlint::encoding))]
    InvalidUtf8 { path: String },

    #[error("{path}: {size}larger than --max-file-size ({limit}); skipped")]
    #[diagnostic(code(oomlint::too_large))]
    TooLarge {
        path: String,
        /// `70 MiB, ` when the size is known, else empty.
        size: String,
        limit: String,
    },

    #[error(
        "{path}: nesting too deep to analyse fully; findings in the deepest parts may be missed"
    )]
    #[diagnostic(code(oomlint::depth))]
    TooDeep { path: String },

    #[error(
        "{path}:{line}: `# oomlint: noqa` after code suppresses on this line only; to suppress in the whole file, put it on a line of its own"
    )]
    #[diagnostic(code(oomlint::noqa))]
    FileNoqaAfterCode { path: String, line: usize },
}

/// Errors in how oomlint was invoked: exit code 2.
#[derive(Debug, Error, Diagnostic)]
pub enum UsageError {
    #[error("unknown rule code or prefix `{0}` (see `oomlint rules`)")]
    #[diagnostic(code(oomlint::usage))]
    UnknownRule(String),

    #[error("{0}")]
    #[diagnostic(code(oomlint::usage))]
    Other(String),
}

/// An I/O error as a short reason in lower case, without the OS error number:
/// `no such file or directory`, `permission denied`.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_owned(),
        _ => {
            let s = e.to_string();
            // Drop " (os error N)", and start in lower case like the reasons above.
            let s = match s.find(" (os error") {
                Some(i) => &s[..i],
                None => &s,
            };
            let mut c = s.chars();
            c.next()
                .map(|f| f.to_lowercase().chain(c).collect())
                .unwrap_or_default()
        }
    }
}
