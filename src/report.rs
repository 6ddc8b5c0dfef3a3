//! What linting produces: per file a [`FileReport`], holding its [`Finding`]s and the
//! problems met with the file. Findings are plain data: they serialize with serde and
//! become miette reports only when rendered as text.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{FileError, FileWarning};
use crate::fix::Fix;
use crate::notebook::CellPosition;
use crate::pattern::Pattern;
use crate::rule::Severity;

/// What linting one file produced.
#[derive(Debug, Default)]
pub struct FileReport {
    pub path: String,
    /// The file's path as the system names it, when it was read from one: for a name
    /// that is not UTF-8, `path` shows U+FFFD where SARIF needs the bytes.
    pub file: Option<std::path::PathBuf>,
    pub findings: Vec<Finding>,
    pub warnings: Vec<FileWarning>,
    pub errors: Vec<FileError>,
    /// The decoded text, kept only when there are findings (the text renderer shows snippets).
    /// For a notebook, the concatenated code cells.
    pub source: Option<Arc<str>>,
    /// The prefilter showed that no enabled rule can fire here: the file was not parsed.
    pub skipped_by_prefilter: bool,
    /// Where the lint parsed the file itself: the bytes it parsed (fewer than the file's
    /// when parsed in parts, [`crate::chunk`]) and the file's bytes.
    pub parsed_bytes: Option<(usize, usize)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    pub help: String,
    pub path: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in Unicode scalar values.
    pub column: usize,
    pub end_line: usize,
    /// 1-based and exclusive: the column just after the last character of the span.
    pub end_column: usize,
    /// Byte range in the decoded source; used by the text renderer, not serialized.
    #[serde(skip)]
    pub range: (usize, usize),
    /// The memory pattern, set by the rule; serialized only inside `confirm` output.
    #[serde(skip)]
    pub pattern: Pattern,
    /// In a notebook: the cell the finding starts in, and the line and column within it
    /// (`line` and `column` are positions in the `.ipynb` file). Not serialized.
    #[serde(skip)]
    pub cell: Option<CellPosition>,
    /// The edits that remove the finding, if its rule knows them.
    #[serde(skip)]
    pub fix: Option<Fix>,
    /// Other places that explain the finding.
    #[serde(skip)]
    pub related: Vec<RelatedLocation>,
}

/// A secondary location of a finding, positioned like the finding itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedLocation {
    pub message: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in Unicode scalar values.
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    /// Byte range in the decoded source.
    pub range: (usize, usize),
}
