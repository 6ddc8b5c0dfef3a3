//! One file, start to finish: read, decode, parse, build the semantic model, run the
//! enabled rules, and turn their diagnostics into findings.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use tree_sitter::Parser;

use crate::error::{FileError, FileWarning};
use crate::finding::Finding;
use crate::noqa::Suppressions;
use crate::notebook::{CellIndex, Notebook};
use crate::rule::{Diagnostic, Rule};
use crate::semantic::SemanticModel;
use crate::source::{LineIndex, SourceText};

/// What linting one file produced.
#[derive(Debug, Default)]
pub struct FileReport {
    pub path: String,
    pub findings: Vec<Finding>,
    pub warnings: Vec<FileWarning>,
    pub errors: Vec<FileError>,
    /// The decoded text, kept only when there are findings (the text renderer shows snippets).
    /// For a notebook, the concatenated code cells.
    pub source: Option<Arc<str>>,
    /// For a notebook with findings: where each code cell starts in `source`.
    pub notebook: Option<Arc<CellIndex>>,
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(new_parser());
}

fn new_parser() -> Parser {
    let mut p = Parser::new();
    p.set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("tree-sitter-python matches the tree-sitter ABI");
    p
}

/// Reads and lints one file.
pub fn lint_path(path: &Path, display: &str, rules: &[&'static Rule]) -> FileReport {
    match std::fs::read(path) {
        Ok(bytes) => lint_bytes(display, &bytes, rules),
        Err(e) => FileReport {
            path: display.to_owned(),
            errors: vec![FileError::Io {
                path: display.to_owned(),
                reason: io_reason(&e),
            }],
            ..Default::default()
        },
    }
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_owned(),
        _ => {
            let s = e.to_string();
            // Drop " (os error N)": the reason reads better without it.
            match s.find(" (os error") {
                Some(i) => s[..i].to_owned(),
                None => s,
            }
        }
    }
}

/// Lints the bytes of one file reported under `path`.
pub fn lint_bytes(path: &str, bytes: &[u8], rules: &[&'static Rule]) -> FileReport {
    let mut report = FileReport {
        path: path.to_owned(),
        ..Default::default()
    };
    if memchr::memchr(0, bytes).is_some() {
        report.warnings.push(FileWarning::Binary {
            path: path.to_owned(),
        });
        return report;
    }
    let src = SourceText::decode(bytes);
    if src.invalid_utf8 {
        report.warnings.push(FileWarning::InvalidUtf8 {
            path: path.to_owned(),
        });
    }
    if path.ends_with(".ipynb") {
        return lint_notebook(report, &src.text, rules);
    }
    lint_text(report, src.text, rules)
}

/// Lints the code cells of a notebook; positions in findings are positions in the
/// `.ipynb` file, and the report keeps the cell index for the text formats.
fn lint_notebook(mut report: FileReport, raw: &str, rules: &[&'static Rule]) -> FileReport {
    let nb = match Notebook::parse(raw) {
        Ok(nb) => nb,
        Err(e) => {
            report.errors.push(FileError::Notebook {
                path: report.path.clone(),
                reason: e.to_string(),
            });
            return report;
        }
    };
    let mut report = lint_text(report, nb.source.clone(), rules);
    if report.findings.is_empty() {
        return report;
    }
    let raw_index = LineIndex::new(raw);
    for f in &mut report.findings {
        let s = raw_index.line_col(raw, nb.raw_offset(f.range.0));
        // The end is exclusive: map the last character, then step past it.
        let last = nb.raw_offset(f.range.1.saturating_sub(1).max(f.range.0));
        let e = raw_index.line_col(raw, last);
        f.line = s.line;
        f.column = s.column;
        f.end_line = e.line;
        f.end_column = e.column + usize::from(f.range.1 > f.range.0);
    }
    report.notebook = Some(Arc::new(nb.index()));
    report
}

/// Lints decoded Python source.
fn lint_text(mut report: FileReport, text: String, rules: &[&'static Rule]) -> FileReport {
    let path = report.path.clone();
    let path = path.as_str();
    let Some(tree) = PARSER.with(|p| p.borrow_mut().parse(&text, None)) else {
        report.errors.push(FileError::Internal {
            path: path.to_owned(),
            rule: "the parser".to_owned(),
            message: "tree-sitter returned no tree".to_owned(),
        });
        return report;
    };
    let index = LineIndex::new(&text);
    let mut model = SemanticModel::build(&tree, &text);
    let file_name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    model.is_test_module = crate::semantic::names::is_test_file_name(file_name);
    if let Some(at) = model.first_syntax_error {
        let lc = index.line_col(&text, at);
        report.warnings.push(FileWarning::Syntax {
            path: path.to_owned(),
            line: lc.line,
            column: lc.column,
        });
    }
    let mut diags: Vec<Diagnostic> = Vec::new();
    for rule in rules {
        let start = diags.len();
        // A bug in one rule must not cost the other rules or the other files.
        let result = catch_unwind(AssertUnwindSafe(|| (rule.check)(&model, &mut diags)));
        if let Err(panic) = result {
            diags.truncate(start);
            report.errors.push(FileError::Internal {
                path: path.to_owned(),
                rule: format!("rule {}", rule.code),
                message: panic_message(&panic),
            });
            continue;
        }
        for d in diags.drain(start..) {
            let s = index.line_col(&text, d.range.start);
            let e = index.line_col(&text, d.range.end);
            report.findings.push(Finding {
                code: rule.code,
                name: rule.name,
                severity: rule.severity,
                message: d.message,
                help: d.help,
                path: path.to_owned(),
                line: s.line,
                column: s.column,
                end_line: e.line,
                end_column: e.column,
                range: (d.range.start, d.range.end),
            });
        }
    }
    if model.depth_limited() {
        report.warnings.push(FileWarning::TooDeep {
            path: path.to_owned(),
        });
    }
    if !report.findings.is_empty() {
        // Suppression comments are tree-sitter comment nodes: never text inside a string.
        let noqa = Suppressions::from_comments(
            model
                .comments
                .iter()
                .map(|c| (c.start_position().row + 1, &text[c.byte_range()])),
        );
        if !noqa.is_empty() {
            report.findings.retain(|f| !noqa.suppresses(f.code, f.line));
        }
    }
    report
        .findings
        .sort_by(|a, b| (a.line, a.column, a.code).cmp(&(b.line, b.column, b.code)));
    report.findings.dedup();
    if !report.findings.is_empty() {
        report.source = Some(Arc::from(text.as_str()));
    }
    report
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}
