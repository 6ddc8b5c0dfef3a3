//! Output formats. Findings are data until here; only the text format turns them
//! into miette reports.

mod text;

use std::io::{self, Write};

use crate::finding::Finding;
use crate::lint::FileReport;

pub use text::{render_text, Color};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Rich diagnostics with source snippets.
    Text,
    /// One line per finding: `path:line:col: CODE message`.
    Concise,
    /// A JSON array of findings.
    Json,
    /// One JSON object per line.
    Jsonl,
}

/// Writes the findings of all reports (already in path order) in `format`.
pub fn render(
    out: &mut dyn Write,
    format: Format,
    reports: &[FileReport],
    color: bool,
) -> io::Result<()> {
    let findings = || reports.iter().flat_map(|r| r.findings.iter());
    match format {
        Format::Text => render_text(out, reports, color),
        Format::Concise => {
            for f in findings() {
                writeln!(
                    out,
                    "{}:{}:{}: {} {}",
                    sanitize(&f.path),
                    f.line,
                    f.column,
                    f.code,
                    sanitize(&f.message)
                )?;
            }
            Ok(())
        }
        Format::Json => {
            let all: Vec<&Finding> = findings().collect();
            serde_json::to_writer_pretty(&mut *out, &all)?;
            writeln!(out)
        }
        Format::Jsonl => {
            for f in findings() {
                serde_json::to_writer(&mut *out, f)?;
                writeln!(out)?;
            }
            Ok(())
        }
    }
}

/// `--statistics`: one line per rule that fired, most frequent first.
pub fn render_statistics(out: &mut dyn Write, reports: &[FileReport]) -> io::Result<()> {
    let mut counts: Vec<(&'static str, &'static str, usize)> = Vec::new();
    for f in reports.iter().flat_map(|r| r.findings.iter()) {
        match counts.iter_mut().find(|c| c.0 == f.code) {
            Some(c) => c.2 += 1,
            None => counts.push((f.code, f.name, 1)),
        }
    }
    counts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    for (code, name, n) in counts {
        writeln!(out, "{n:>5}\t{code}\t{name}")?;
    }
    Ok(())
}

/// Makes text safe to print on a terminal: control characters (ANSI escapes included)
/// become visible `\u{..}` escapes, so a file name or source line cannot drive the terminal.
pub fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_unsafe_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn is_unsafe_control(c: char) -> bool {
    (c.is_control() && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}')
}
