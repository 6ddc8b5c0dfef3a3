//! Output formats. Findings are data until here; only the text format turns them
//! into miette reports.

mod github;
mod junit;
mod sarif;
mod text;

use std::io::{self, Write};

use crate::confirm::Confirmations;
use crate::fix::{Applicability, Fix};
use crate::report::{FileReport, Finding};
use crate::source::LineIndex;

use github::render_github;
use junit::render_junit;
use sarif::sarif_value;
use text::render_text;
pub use text::Color;

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
    /// GitHub Actions workflow commands: annotations on the pull request.
    Github,
    /// SARIF 2.1.0 (GitHub code scanning and other SARIF viewers).
    Sarif,
    /// JUnit XML, for CI systems that read test reports.
    Junit,
}

/// Writes the findings of all reports (already in path order) in `format`, with the
/// measurements of `oomlint confirm` beside them when there are any: a line under each
/// text diagnostic, a `confirmation` object in json/jsonl/sarif, the verdict in concise
/// and github output.
pub fn render(
    out: &mut dyn Write,
    format: Format,
    reports: &[FileReport],
    color: bool,
    confirmations: Option<&Confirmations>,
) -> io::Result<()> {
    render_width(out, format, reports, color, TEXT_WIDTH, confirmations)
}

/// The width the text format wraps to when it does not write to a terminal: the same
/// output on every machine and in every log.
pub const TEXT_WIDTH: usize = 100;

/// [`render`], with the text format wrapped to `width` columns (a terminal's width).
pub fn render_width(
    out: &mut dyn Write,
    format: Format,
    reports: &[FileReport],
    color: bool,
    width: usize,
    confirmations: Option<&Confirmations>,
) -> io::Result<()> {
    render_with(
        out,
        format,
        reports,
        confirmations,
        RenderOptions {
            color,
            width,
            fixable: Applicability::Safe,
        },
    )
}

/// How to render, beyond the format.
#[derive(Clone, Copy, Debug)]
pub struct RenderOptions {
    pub color: bool,
    /// The width the text format wraps to.
    pub width: usize,
    /// The fixes this run would apply: a finding with one is marked `[*]` in the text
    /// and concise formats (`--unsafe-fixes` marks the unsafe ones too), as ruff does.
    pub fixable: Applicability,
}

/// [`render`] with every option.
pub fn render_with(
    out: &mut dyn Write,
    format: Format,
    reports: &[FileReport],
    confirmations: Option<&Confirmations>,
    opts: RenderOptions,
) -> io::Result<()> {
    let color = opts.color;
    let conf = |ri: usize, fi: usize| confirmations.and_then(|c| c.get(ri, fi));
    // Each finding as JSON: the ten keys, `fix`, and `confirmation` in confirm mode.
    let objects = || {
        reports.iter().enumerate().flat_map(move |(ri, r)| {
            let lines = r
                .findings
                .iter()
                .any(|f| f.fix.is_some())
                .then(|| r.source.as_ref().map(|s| (s, LineIndex::new(s))))
                .flatten();
            r.findings
                .iter()
                .enumerate()
                .map(move |(fi, f)| FindingJson {
                    finding: f,
                    fix: f.fix.as_ref().and_then(|x| {
                        let (src, index) = lines.as_ref()?;
                        Some(FixJson::new(x, f, src, index))
                    }),
                    confirmation: conf(ri, fi),
                    related: f.related.iter().map(RelatedJson::from).collect(),
                })
                .collect::<Vec<_>>()
        })
    };
    match format {
        Format::Text => render_text(out, reports, color, opts.width, confirmations, opts.fixable),
        Format::Concise => {
            for (ri, r) in reports.iter().enumerate() {
                for (fi, f) in r.findings.iter().enumerate() {
                    let at = match &f.cell {
                        Some(c) => format!("cell {}:{}:{}", c.cell, c.line, c.column),
                        None => format!("{}:{}", f.line, f.column),
                    };
                    let confirmed = conf(ri, fi)
                        .map(|c| format!(" [{}]", sanitize(&c.line())))
                        .unwrap_or_default();
                    let mark = if f.fix.as_ref().is_some_and(|x| x.applies(opts.fixable)) {
                        "[*] "
                    } else {
                        ""
                    };
                    writeln!(
                        out,
                        "{}:{at}: {} {mark}{}{confirmed}",
                        line_start_path(&sanitize(&f.path)),
                        f.code,
                        sanitize(&f.message)
                    )?;
                }
            }
            Ok(())
        }
        Format::Github => render_github(out, reports, confirmations),
        Format::Sarif => {
            let sarif = sarif_value(reports, confirmations);
            write_json(out, &serde_json::to_vec_pretty(&sarif)?)?;
            writeln!(out)
        }
        Format::Junit => render_junit(out, reports),
        Format::Json => {
            let all: Vec<FindingJson> = objects().collect();
            write_json(out, &serde_json::to_vec_pretty(&all)?)?;
            writeln!(out)
        }
        Format::Jsonl => {
            for f in objects() {
                write_json(out, &serde_json::to_vec(&f)?)?;
                writeln!(out)?;
            }
            Ok(())
        }
    }
}

/// A finding as json/jsonl write it: its ten keys, `fix` (ruff's object, or null),
/// `confirmation` only when there is one (`oomlint confirm`), and `related` only when the
/// finding has related locations.
#[derive(serde::Serialize)]
struct FindingJson<'a> {
    #[serde(flatten)]
    finding: &'a Finding,
    fix: Option<FixJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmation: Option<&'a crate::confirm::Confirmation>,
    /// The lines that caused the finding (`total_loss += loss` for a value derived from
    /// it); the key is left out when there are none, so the ten keys stay as they were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    related: Vec<RelatedJson<'a>>,
}

/// A fix as ruff's JSON output writes it. Locations are 1-based rows and columns (in
/// characters) of the Python source; in a notebook, of the finding's cell, counted from
/// its first line, as the text format shows a notebook position.
#[derive(serde::Serialize)]
struct FixJson<'a> {
    applicability: &'static str,
    message: &'a str,
    edits: Vec<EditJson<'a>>,
}

#[derive(serde::Serialize)]
struct EditJson<'a> {
    content: &'a str,
    location: RowCol,
    end_location: RowCol,
}

#[derive(serde::Serialize)]
struct RowCol {
    row: usize,
    column: usize,
}

impl<'a> FixJson<'a> {
    fn new(fix: &'a Fix, finding: &Finding, src: &str, index: &LineIndex) -> FixJson<'a> {
        // In a notebook, rows count from the first line of the finding's cell.
        let first_row = finding
            .cell
            .as_ref()
            .map_or(1, |c| index.line_col(src, c.code.start).line);
        let at = |offset: usize| {
            let lc = index.line_col(src, offset.min(src.len()));
            RowCol {
                row: lc.line + 1 - first_row.min(lc.line),
                column: lc.column,
            }
        };
        FixJson {
            applicability: fix.applicability.as_str(),
            message: &fix.title,
            edits: fix
                .edits
                .iter()
                .map(|e| EditJson {
                    content: &e.content,
                    location: at(e.range.start),
                    end_location: at(e.range.end),
                })
                .collect(),
        }
    }
}

/// A related location as json/jsonl write it: positioned like a finding, in its file.
#[derive(serde::Serialize)]
struct RelatedJson<'a> {
    message: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
}

impl<'a> From<&'a crate::report::RelatedLocation> for RelatedJson<'a> {
    fn from(r: &'a crate::report::RelatedLocation) -> Self {
        RelatedJson {
            message: &r.message,
            line: r.line,
            column: r.column,
            end_line: r.end_line,
            end_column: r.end_column,
        }
    }
}

/// `--statistics`: one entry per rule that fired, most frequent first: a line
/// `count<TAB>code<TAB>name` (text, concise), or an object `{"code", "name", "count"}`
/// (a JSON array for json, one per line for jsonl), as ruff writes its statistics.
pub fn render_statistics(
    out: &mut dyn Write,
    reports: &[FileReport],
    format: Format,
) -> io::Result<()> {
    let mut counts: Vec<(&'static str, &'static str, usize)> = Vec::new();
    for f in reports.iter().flat_map(|r| r.findings.iter()) {
        match counts.iter_mut().find(|c| c.0 == f.code) {
            Some(c) => c.2 += 1,
            None => counts.push((f.code, f.name, 1)),
        }
    }
    counts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let object = |&(code, name, count): &(&str, &str, usize)| serde_json::json!({ "code": code, "name": name, "count": count });
    match format {
        Format::Json => {
            let all: Vec<serde_json::Value> = counts.iter().map(object).collect();
            write_json(out, &serde_json::to_vec_pretty(&all)?)?;
            writeln!(out)
        }
        Format::Jsonl => {
            for c in &counts {
                write_json(out, &serde_json::to_vec(&object(c))?)?;
                writeln!(out)?;
            }
            Ok(())
        }
        _ => {
            for (code, name, n) in counts {
                writeln!(out, "{n:>5}\t{code}\t{name}")?;
            }
            Ok(())
        }
    }
}

/// Writes serialized JSON with the characters that JSON leaves raw but that split or
/// drive other readers escaped as `\uXXXX`: DEL and the C1 controls (U+0080 to U+009F:
/// NEL ends a line for Python's `splitlines`, CSI starts a terminal escape), U+2028 /
/// U+2029 (line separators for JavaScript and `splitlines`) and the bidirectional
/// controls. serde_json escapes the C0 controls itself; the others can only occur inside
/// strings, so the document means the same.
pub fn write_json(out: &mut dyn Write, json: &[u8]) -> io::Result<()> {
    let text = std::str::from_utf8(json).map_err(io::Error::other)?;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if ('\u{7f}'..='\u{9f}').contains(&c) || is_invisible_format(c) {
            out.write_all(&json[start..i])?;
            write!(out, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
    }
    out.write_all(&json[start..])
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

/// [`sanitize`] line by line, keeping the line breaks: for text of many lines (a
/// rendered configuration error, `--show-settings`).
pub fn sanitize_lines(s: &str) -> String {
    defuse_commands(s)
        .split_inclusive('\n')
        .map(|l| {
            let body = l.strip_suffix('\n').unwrap_or(l);
            let mut line = sanitize(body).into_owned();
            if body.len() < l.len() {
                line.push('\n');
            }
            line
        })
        .collect()
}

/// What [`sanitize`] escapes: control characters but tab (ANSI escapes, C1 controls,
/// line breaks) and the invisible format characters.
pub fn is_unsafe_control(c: char) -> bool {
    (c.is_control() && c != '\t') || is_invisible_format(c)
}

/// A path that starts a line of output: `./` before one that would start the line with
/// `::` (after blanks), which GitHub's runner reads as a workflow command
/// (`::stop-commands::x.py`); `./::stop-commands::x.py` is the same file.
pub fn line_start_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.trim_start().starts_with("::") {
        std::borrow::Cow::Owned(format!("./{path}"))
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// Text of many lines in which no line may start (after blanks) with `::`, which
/// GitHub's runner reads as a workflow command: such a line's first `:` is written
/// `\u{3a}`, as [`sanitize`] writes what it escapes. Every format but `github` keeps its
/// lines off `::` this way or by construction.
pub fn defuse_commands(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("::") {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split_inclusive('\n') {
        let body = line.trim_start();
        if body.starts_with("::") {
            let blanks = line.len() - body.len();
            out.push_str(&line[..blanks]);
            out.push_str("\\u{3a}");
            out.push_str(&body[1..]);
        } else {
            out.push_str(line);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Line and paragraph separators and the bidirectional controls, which reorder the text
/// around them on screen ("Trojan Source"): shown escaped, never raw.
pub fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}
