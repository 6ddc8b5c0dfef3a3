//! The default format: a miette graphical report per finding, with the source snippet.

use std::fmt;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};

use crate::confirm::{Confirmations, Verdict};
use crate::fix::Applicability;
use crate::report::{FileReport, Finding};
use crate::rule::Severity;
use crate::source::LineIndex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// A finding borrowed as a miette diagnostic, so the source is not copied per finding.
struct Shown<'f> {
    finding: &'f Finding,
    /// The run would apply the finding's fix: `[*]` after the code.
    fixable: bool,
    message: String,
    source: &'f dyn SourceCode,
    /// The finding's span in `source`.
    span: (usize, usize),
}

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Shown<'_> {}

impl Diagnostic for Shown<'_> {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let mark = if self.fixable { " [*]" } else { "" };
        Some(Box::new(format!(
            "{}{mark} {}",
            self.finding.code, self.finding.name
        )))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.finding.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(super::sanitize(&self.finding.help)))
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (s, e) = self.span;
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(
                Some(self.finding.name.to_owned()),
                (s, e.saturating_sub(s)),
            ),
        )))
    }
}

/// Each finding as a miette report with its snippet; with `oomlint confirm`, the verdict
/// under each diagnostic: `  confirmed on CPU: +8.0 KiB retained per iteration (...)` and
/// what was measured.
pub(super) fn render_text(
    out: &mut dyn Write,
    reports: &[FileReport],
    color: bool,
    width: usize,
    confirmations: Option<&Confirmations>,
    fixable: Applicability,
) -> io::Result<()> {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_links(false)
        .with_width(width)
        .with_context_lines(1);
    for (ri, r) in reports.iter().enumerate() {
        let Some(src) = &r.source else { continue };
        let text: Arc<str> = Arc::from(safe_source(src).as_ref());
        let lines = Arc::new(LineIndex::new(&text));
        let shown_src = Snippet {
            name: super::sanitize(&r.path).into_owned(),
            range: 0..text.len(),
            text: text.clone(),
            lines: lines.clone(),
        };
        for (fi, f) in r.findings.iter().enumerate() {
            // A notebook finding is shown in its cell: `notebook.ipynb:cell 3:4:5`.
            let cell_src;
            let (source, shift) = match &f.cell {
                Some(cell) => {
                    let range = cell.code.clone();
                    cell_src = Snippet {
                        name: format!("{}:cell {}", super::sanitize(&r.path), cell.cell),
                        range: range.clone(),
                        text: text.clone(),
                        lines: lines.clone(),
                    };
                    (&cell_src, range.start)
                }
                None => (&shown_src, 0),
            };
            // A line too long to show whole is cut around the span.
            let cut = Excerpt::around(source, f.range);
            let (source, span): (&dyn SourceCode, _) = match &cut {
                Some(x) => (x, x.span),
                None => (
                    source,
                    (
                        f.range.0.saturating_sub(shift),
                        f.range.1.saturating_sub(shift),
                    ),
                ),
            };
            let d = Shown {
                finding: f,
                fixable: f.fix.as_ref().is_some_and(|x| x.applies(fixable)),
                message: super::sanitize(&f.message).into_owned(),
                source,
                span,
            };
            let mut s = String::new();
            handler
                .render_report(&mut s, &d)
                .map_err(|_| io::Error::other("formatting failed"))?;
            // A message or help wrapped by miette may bring `::` to a line's start.
            out.write_all(super::defuse_commands(&s).as_bytes())?;
            // Where the finding comes from, when another line caused it.
            for rel in &f.related {
                writeln!(
                    out,
                    "  note: {} ({}:{}:{})",
                    super::sanitize(&rel.message),
                    super::sanitize(&r.path),
                    rel.line,
                    rel.column
                )?;
            }
            if let Some(c) = confirmations.and_then(|c| c.get(ri, fi)) {
                let verdict = c.verdict.as_str();
                let rest = &c.line()[verdict.len()..];
                let verdict = match (color, c.verdict) {
                    (false, _) => verdict.to_owned(),
                    (true, Verdict::Confirmed) => format!("\x1b[1;31m{verdict}\x1b[0m"),
                    (true, Verdict::NotConfirmed) => format!("\x1b[1;32m{verdict}\x1b[0m"),
                    (true, Verdict::Skipped) => format!("\x1b[2m{verdict}\x1b[0m"),
                };
                writeln!(out, "  {verdict}{}", super::sanitize(rest))?;
                if let Some(m) = c.measured() {
                    writeln!(out, "  {}", super::sanitize(&m))?;
                }
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The text of a file (or of one notebook cell of it) as miette reads it, with its line
/// index: reading the lines around a finding costs the size of those lines. (miette's own
/// `str` source scans from the start of the text for every finding, which made the text
/// format quadratic in a file with many findings.)
struct Snippet {
    name: String,
    text: Arc<str>,
    lines: Arc<LineIndex>,
    /// The part of `text` shown; spans are relative to its start.
    range: Range<usize>,
}

impl SourceCode for Snippet {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let base = self.range.start;
        let start = (base + span.offset()).min(self.range.end);
        let end = (start + span.len()).min(self.range.end);
        // Whole lines from one more than the context above the span to one more than the
        // context below it: miette's own reading of that window gives what it would have
        // read from the whole text, shifted by the window's first line.
        let top = self.lines.line_of(base);
        let first = self
            .lines
            .line_of(start)
            .saturating_sub(before + 1)
            .max(top);
        let last = self.lines.line_of(end.saturating_sub(1).max(start)) + after + 2;
        let from = self.lines.line_start(first).unwrap_or(base).max(base);
        let to = self
            .lines
            .line_start(last)
            .unwrap_or(self.text.len())
            .min(self.range.end);
        let window = &self.text.as_bytes()[from..to];
        let local = SourceSpan::new((base + span.offset() - from).into(), span.len());
        let c = window.read_span(&local, before, after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            c.data(),
            SourceSpan::new((c.span().offset() + from - base).into(), c.span().len()),
            c.line() + (first - top),
            c.column(),
            c.line_count() + (first - top),
        )))
    }
}

/// A source line longer than this (in bytes) is not shown whole: a minified or generated
/// line of megabytes would be printed for one finding.
const LONG_LINE: usize = 400;
/// Bytes kept on each side of the span's start and of its end in a cut line.
const KEEP: usize = 80;

/// The lines that miette shows around a finding, with each line longer than
/// [`LONG_LINE`] cut to the parts around the span's start and end (`…` marks what is
/// left out), and the span moved into the cut text. Line numbers, and the column in the
/// header, stay those of the file.
struct Excerpt {
    name: String,
    text: String,
    /// The line number (0-based, from the top of the snippet) of `text`'s first line.
    first_line: usize,
    /// The finding's span in `text`.
    span: (usize, usize),
    /// The span start's byte column in the file (what miette shows for the uncut line).
    column: usize,
}

impl Excerpt {
    /// `None` when every line around the span is short enough to show whole.
    fn around(src: &Snippet, (s, e): (usize, usize)) -> Option<Excerpt> {
        let (text, lines, range) = (&src.text, &src.lines, &src.range);
        let s = s.clamp(range.start, range.end);
        let e = e.clamp(s, range.end);
        let top = lines.line_of(range.start);
        let ls = lines.line_of(s);
        let le = lines.line_of(e.saturating_sub(1).max(s));
        let first = ls.saturating_sub(1).max(top);
        // (start, end without the line break, end with it) of each line shown.
        let mut shown = Vec::new();
        for l in first..=le + 1 {
            let Some(a) = lines.line_start(l).filter(|&a| a < range.end || l <= le) else {
                break;
            };
            let c = lines.line_start(l + 1).unwrap_or(text.len()).min(range.end);
            let mut b = c.max(a);
            while b > a && matches!(text.as_bytes()[b - 1], b'\n' | b'\r') {
                b -= 1;
            }
            shown.push((a, b, c.max(a)));
        }
        if shown.iter().all(|&(a, b, _)| b - a <= LONG_LINE) {
            return None;
        }
        let floor = |mut i: usize| {
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let ceil = |mut i: usize| {
            while !text.is_char_boundary(i) {
                i += 1;
            }
            i
        };
        let mut out = String::new();
        let (mut new_s, mut new_e) = (None, None);
        for (a, b, c) in shown {
            let mut place = |p: usize, from: usize, at: usize| {
                if p == s && new_s.is_none() {
                    new_s = Some(at + p - from);
                }
                if p == e && new_e.is_none() && (p > s || new_s.is_some()) {
                    new_e = Some(at + p - from);
                }
            };
            let points: Vec<usize> = [s, e].into_iter().filter(|p| (a..=b).contains(p)).collect();
            if b - a <= LONG_LINE {
                for &p in &points {
                    place(p, a, out.len());
                }
                out.push_str(&text[a..c]);
                continue;
            }
            let mut windows: Vec<(usize, usize)> = if points.is_empty() {
                vec![(a, ceil(a + 2 * KEEP))]
            } else {
                points
                    .iter()
                    .map(|&p| {
                        (
                            floor(p.saturating_sub(KEEP).max(a)),
                            ceil((p + KEEP).min(b)),
                        )
                    })
                    .collect()
            };
            windows.dedup_by(|next, prev| {
                let overlap = next.0 <= prev.1;
                if overlap {
                    prev.1 = prev.1.max(next.1);
                }
                overlap
            });
            for (i, &(wa, wb)) in windows.iter().enumerate() {
                if i > 0 || wa > a {
                    out.push_str(if i > 0 { " … " } else { "…" });
                }
                for &p in points.iter().filter(|&&p| (wa..=wb).contains(&p)) {
                    place(p, wa, out.len());
                }
                out.push_str(&text[wa..wb]);
            }
            if windows.last().is_some_and(|w| w.1 < b) {
                out.push('…');
            }
            out.push_str(&text[b..c]);
        }
        let (new_s, new_e) = (new_s?, new_e?);
        Some(Excerpt {
            name: src.name.clone(),
            text: out,
            first_line: first - top,
            span: (new_s, new_e.max(new_s)),
            column: s - lines.line_start(ls).unwrap_or(0),
        })
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let c = self.text.as_bytes().read_span(span, before, after)?;
        // The header's column: the file's, not the cut line's.
        let column = if before == 0 && span.offset() == self.span.0 {
            self.column
        } else {
            c.column()
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            c.data(),
            *c.span(),
            c.line() + self.first_line,
            column,
            c.line_count() + self.first_line,
        )))
    }
}

/// The source with every control character but tab and line breaks (and every
/// bidirectional control and line separator) replaced by `?`,
/// byte for byte (ASCII controls are one byte; others are replaced by as many `?` as
/// they have bytes), so spans stay valid and the terminal sees no escape sequences.
fn safe_source(src: &Arc<str>) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| super::is_unsafe_control(c) && !matches!(c, '\n' | '\r');
    if !src.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(src);
    }
    let mut s = String::with_capacity(src.len());
    for c in src.chars() {
        if unsafe_char(c) {
            for _ in 0..c.len_utf8() {
                s.push('?');
            }
        } else {
            s.push(c);
        }
    }
    std::borrow::Cow::Owned(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Snippet` reads exactly what miette reads from the whole text (or cell) itself.
    #[test]
    fn snippet_reads_what_miette_reads() {
        let text = "import torch\r\n\nfor x in loader:\n\tloss = f(x)  # \u{e9}\n    losses.append(loss)\n\nend\n";
        let arc: Arc<str> = Arc::from(text);
        let lines = Arc::new(LineIndex::new(text));
        // The whole text, and a "cell" from the third line on.
        let cell = text.find("for").unwrap()..text.len();
        for range in [0..text.len(), cell] {
            let part = &text[range.clone()];
            let snippet = Snippet {
                name: "t.py".into(),
                text: arc.clone(),
                lines: lines.clone(),
                range: range.clone(),
            };
            for start in 0..part.len() {
                for len in 0..=(part.len() - start).min(40) {
                    for ctx in 0..3 {
                        let span = SourceSpan::new(start.into(), len);
                        let ours = snippet.read_span(&span, ctx, ctx);
                        let theirs = part.read_span(&span, ctx, ctx);
                        let at = format!("{range:?} {start}+{len} ctx {ctx}");
                        assert_eq!(ours.is_ok(), theirs.is_ok(), "{at}");
                        let (Ok(a), Ok(b)) = (ours, theirs) else {
                            continue;
                        };
                        assert_eq!(a.data(), b.data(), "{at}");
                        assert_eq!(a.span(), b.span(), "{at}");
                        assert_eq!(a.line(), b.line(), "{at}");
                        assert_eq!(a.column(), b.column(), "{at}");
                        assert_eq!(a.line_count(), b.line_count(), "{at}");
                        assert_eq!(a.name(), Some("t.py"));
                    }
                }
            }
        }
    }
}
