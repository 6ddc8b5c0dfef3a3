//! Jupyter notebooks: the code cells of an `.ipynb` file become one Python source (cells
//! in order, each ending with a newline), so names defined in one cell are known in the
//! next, as when the notebook runs top to bottom.
//!
//! IPython syntax that is not Python is blanked (the line becomes `pass` at its
//! indentation, so a block stays a block): line magics (`%time`, `%load_ext`), shell
//! escapes (`!pip install`, and the lines a trailing backslash continues), the
//! `pip install`/`conda install` automagics, `x = !ls` and `x = %env`, help (`obj?`,
//! `?obj`), and cell magics (`%%bash`: the whole cell; `%%time`, `%%timeit`,
//! `%%capture`, `%%prun`, `%%debug`: only the magic line, the rest is Python). Only a
//! line that starts a logical line can be a magic: inside brackets, a triple-quoted
//! string or after a backslash continuation, `%` is Python's modulo.
//!
//! Positions map back twice: to the cell (1-based among all cells of the notebook,
//! markdown included, as they appear top to bottom) and the line within it, which the
//! text and concise formats show; and to the line and column in the `.ipynb` file itself,
//! which json, github, sarif and junit report, so a position always points into the file
//! named by `path`. The structure of the notebook's JSON is scanned by hand so that
//! every character of a cell's source knows where it sits in the file; its strings are
//! decoded by serde_json.

use crate::fix::{Edit, FixError};
use crate::source::LineIndex;

/// A notebook's code, and where each byte of it came from.
#[derive(Debug)]
pub struct Notebook {
    /// The code cells, concatenated.
    pub source: String,
    /// For each byte of `source` (and one past the end), its byte offset in the file.
    raw_offset: Vec<usize>,
    /// The code cells: (cell number, 1-based; byte offset in `source` where it starts).
    cells: Vec<(usize, usize)>,
    /// Where each code cell's `source` sits in the file, for writing fixes back.
    code: Vec<CodeCell>,
    /// The `%%writefile name.py` cells: files of their own, blanked in `source`.
    pub written: Vec<WrittenFile>,
}

/// A code cell as the file holds it.
#[derive(Debug)]
struct CodeCell {
    /// The byte span of the `source` value in the file (a string, or a list of them);
    /// `None` for a cell without one (nothing to fix there).
    value: Option<(usize, usize)>,
    /// The cell's own text, IPython syntax and all (the linted source has it blanked,
    /// byte for byte the same length).
    text: String,
    /// Where the cell starts in the concatenated source.
    start: usize,
    /// The source is a list of lines (nbformat's usual form) rather than one string.
    list: bool,
}

/// A `%%writefile name.py` cell: the notebook writes a Python module that a later cell
/// or a shell command runs, so it is linted as a module of its own, not as part of the
/// notebook's namespace.
#[derive(Debug)]
pub struct WrittenFile {
    /// The file name as the magic gives it.
    pub name: String,
    /// Where the cell starts in [`Notebook::source`].
    pub start: usize,
    /// The cell's code with the magic line blanked: as long as the cell's bytes in
    /// `source`, so offsets in it shifted by `start` are offsets there.
    pub text: String,
}

/// Where a position in the concatenated source lies in the notebook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellPosition {
    /// 1-based among all cells.
    pub cell: usize,
    /// 1-based, within the cell.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The cell's code: its byte range in the concatenated source.
    pub code: std::ops::Range<usize>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a valid notebook: {0}")]
pub struct NotebookError(pub String);

/// Where each code cell starts in the concatenated source: maps findings back to cells.
#[derive(Debug)]
pub struct CellIndex {
    /// (cell number, byte offset in the concatenated source, first line there (1-based)).
    cells: Vec<(usize, usize, usize)>,
}

impl CellIndex {
    /// The cell, line and column of `offset` in the concatenated source, and the cell's
    /// byte range there.
    pub fn locate(&self, source: &str, lines: &LineIndex, offset: usize) -> CellPosition {
        let lc = lines.line_col(source, offset);
        let i = self
            .cells
            .partition_point(|c| c.1 <= offset)
            .saturating_sub(1);
        let (cell, start, first_line) = self.cells.get(i).copied().unwrap_or((1, 0, 1));
        let end = self.cells.get(i + 1).map_or(source.len(), |c| c.1);
        CellPosition {
            cell,
            line: lc.line + 1 - first_line.min(lc.line),
            column: lc.column,
            code: start..end,
        }
    }
}

impl Notebook {
    pub fn parse(raw: &str) -> Result<Notebook, NotebookError> {
        let mut p = Scanner {
            s: raw.as_bytes(),
            i: 0,
        };
        let root = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(p.err("trailing characters after the JSON document"));
        }
        let Json::Obj(fields) = root else {
            return Err(NotebookError("the top level is not a JSON object".into()));
        };
        let Some(Json::Arr(cells)) = get(&fields, raw, "cells") else {
            return Err(NotebookError("no `cells` list".into()));
        };
        let mut nb = Notebook {
            source: String::new(),
            raw_offset: Vec::new(),
            cells: Vec::new(),
            code: Vec::new(),
            written: Vec::new(),
        };
        for (n, cell) in cells.iter().enumerate() {
            let Json::Obj(cell) = cell else { continue };
            let is_code = matches!(get(cell, raw, "cell_type"), Some(Json::Str(s)) if key_is(raw, *s, "code"));
            if !is_code {
                continue;
            }
            // The cell's text, and the file offset of each of its bytes.
            let mut text = String::new();
            let mut map = Vec::new();
            let source = get_with_span(cell, raw, "source");
            let (value, list) = match source {
                Some((span, Json::Arr(_))) => (Some(span), true),
                Some((span, _)) => (Some(span), false),
                None => (None, true),
            };
            match source.map(|(_, v)| v) {
                Some(Json::Str(s)) => push_decoded(raw, *s, &mut text, &mut map)?,
                Some(Json::Arr(parts)) => {
                    for part in parts {
                        if let Json::Str(s) = part {
                            push_decoded(raw, *s, &mut text, &mut map)?;
                        }
                    }
                }
                _ => {}
            }
            let end_raw = map.last().map_or(0, |&o| o + 1);
            nb.cells.push((n + 1, nb.source.len()));
            nb.code.push(CodeCell {
                value,
                text: text.clone(),
                start: nb.source.len(),
                list,
            });
            if let Some((name, module)) = written_module(&text) {
                nb.written.push(WrittenFile {
                    name,
                    start: nb.source.len(),
                    text: module,
                });
            }
            blank_ipython(&mut text);
            nb.source.push_str(&text);
            nb.raw_offset.extend_from_slice(&map);
            if !text.ends_with('\n') {
                nb.source.push('\n');
                nb.raw_offset.push(end_raw);
            }
        }
        nb.raw_offset
            .push(nb.raw_offset.last().map_or(0, |&o| o + 1).min(raw.len()));
        Ok(nb)
    }

    /// The file offset of a byte offset in [`Notebook::source`].
    pub fn raw_offset(&self, offset: usize) -> usize {
        self.raw_offset
            .get(offset)
            .or(self.raw_offset.last())
            .copied()
            .unwrap_or(0)
    }

    /// The source with each `%%writefile` cell's code in place of its blanked text: what
    /// the snippets of findings in those cells are read from.
    pub fn display_source(&self) -> String {
        let mut s = self.source.clone();
        for w in &self.written {
            if s.is_char_boundary(w.start) && s.is_char_boundary(w.start + w.text.len()) {
                s.replace_range(w.start..w.start + w.text.len(), &w.text);
            }
        }
        s
    }

    pub fn index(&self) -> CellIndex {
        let lines = LineIndex::new(&self.source);
        CellIndex {
            cells: self
                .cells
                .iter()
                .map(|&(n, off)| (n, off, lines.line_col(&self.source, off).line))
                .collect(),
        }
    }
}

impl Notebook {
    /// The `.ipynb` file `raw` (the text this notebook was parsed from) with `edits` to
    /// [`Notebook::source`] applied in their cells. Only the `source` of a cell that an
    /// edit changes is rewritten, in the form it had (a list of lines, as nbformat
    /// writes it, with the list's own layout, or one string); every other byte of the
    /// file (outputs, metadata, other cells, the key order) stays as it was. An edit
    /// must lie within one code cell and leave its IPython lines (`%time`, `!pip`)
    /// alone; overlapping edits are an error, as in [`crate::fix::apply_edits`].
    pub fn apply_edits(&self, raw: &str, edits: &[Edit]) -> Result<String, FixError> {
        let mut per_cell: Vec<Vec<Edit>> = vec![Vec::new(); self.code.len()];
        for e in edits {
            let i = self
                .code
                .partition_point(|c| c.start <= e.range.start)
                .checked_sub(1)
                .ok_or_else(|| FixError::NotInCell(e.range.clone()))?;
            let cell = &self.code[i];
            let end_in_source = self.code.get(i + 1).map_or(self.source.len(), |c| c.start);
            if e.range.end > end_in_source || e.range.start > e.range.end {
                return Err(FixError::NotInCell(e.range.clone()));
            }
            let len = cell.text.len();
            let (start, mut end) = (e.range.start - cell.start, e.range.end - cell.start);
            let mut content = e.content.clone();
            // The newline the linter added after a cell that lacks one is not in the
            // cell: an edit that replaces it does not write it.
            if end > len {
                end = len;
                if content.ends_with('\n') {
                    content.pop();
                }
            }
            let start = start.min(len);
            let blanked = self
                .source
                .get(cell.start + start..cell.start + end)
                .ok_or_else(|| FixError::OutOfBounds(e.range.clone()))?;
            if cell.text.get(start..end) != Some(blanked) {
                return Err(FixError::NotInCell(e.range.clone()));
            }
            per_cell[i].push(Edit::replace(start..end, content));
        }
        let mut file_edits = Vec::new();
        for (cell, edits) in self.code.iter().zip(&per_cell) {
            if edits.is_empty() {
                continue;
            }
            let Some(value) = cell.value else {
                return Err(FixError::NotInCell(edits[0].range.clone()));
            };
            let text = crate::fix::apply_edits(&cell.text, edits)?;
            let old = &raw[value.0..value.1];
            file_edits.push(Edit::replace(
                value.0..value.1,
                encode_source(&text, old, cell.list),
            ));
        }
        crate::fix::apply_edits(raw, &file_edits)
    }
}

/// A cell's source as JSON: a list of lines each keeping its `\n` (nbformat's form),
/// laid out as the list it replaces (`old`) was, or one string.
fn encode_source(text: &str, old: &str, list: bool) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    if !list {
        return quote(text);
    }
    let inner = old
        .strip_prefix('[')
        .and_then(|o| o.strip_suffix(']'))
        .unwrap_or("");
    let lead = &inner[..inner.len() - inner.trim_start().len()];
    let trail = &inner[inner.trim_end().len()..];
    let items: Vec<String> = text.split_inclusive('\n').map(quote).collect();
    if inner.trim().is_empty() || items.is_empty() {
        return format!("[{}]", items.join(", "));
    }
    // Without a line break after `[` the list was written on one line (`["a\n", "b"]`).
    let sep = if lead.is_empty() {
        ", ".to_owned()
    } else {
        format!(",{lead}")
    };
    format!("[{lead}{}{trail}]", items.join(&sep))
}

/// A `%%writefile [-a] name.py` cell: the file name, and the cell's text with the magic
/// line turned into spaces (same length). Files that are not Python (`requirements.txt`,
/// a YAML config) are not modules.
fn written_module(text: &str) -> Option<(String, String)> {
    let lead = text.len() - text.trim_start().len();
    let rest = &text[lead..];
    let magic = rest.split(['\n', '\r']).next().unwrap_or("");
    let mut words = magic.split_whitespace();
    if words.next() != Some("%%writefile") {
        return None;
    }
    let name = words
        .rfind(|w| !w.starts_with('-'))?
        .trim_matches(['"', '\'']);
    if !name.ends_with(".py") {
        return None;
    }
    let end = lead + magic.len();
    let mut module = String::with_capacity(text.len());
    module.push_str(&text[..lead]);
    module.extend(std::iter::repeat_n(' ', magic.len()));
    module.push_str(&text[end..]);
    Some((name.to_owned(), module))
}

/// Replaces IPython-only lines by `pass` (same byte length or shorter, padded by
/// spaces so every byte keeps its file offset).
fn blank_ipython(text: &mut String) {
    let mut out = String::with_capacity(text.len());
    let mut whole_cell = false;
    let mut first = true;
    let mut code = Continuation::default();
    let mut magic_continues = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let ending = &line[body.len()..];
        let trimmed = body.trim_start();
        let indent = &body[..body.len() - trimmed.len()];
        let is_first = first && !trimmed.is_empty();
        if !trimmed.is_empty() {
            first = false;
        }
        let blank = if whole_cell || magic_continues {
            true
        } else if is_first && trimmed.starts_with("%%") {
            let name = trimmed[2..].split_whitespace().next().unwrap_or("");
            whole_cell = !matches!(name, "time" | "timeit" | "capture" | "prun" | "debug");
            true
        } else {
            // `%` opening a line inside brackets is Python's modulo (`print('%d'` then
            // `% (step, n))` on the next line), not a magic: IPython only reads magics
            // at the start of a logical line.
            code.at_line_start() && is_ipython_line(trimmed)
        };
        if !blank {
            code.scan(body);
        }
        // `!python train.py \` goes on to the next line: the shell command's.
        magic_continues = blank && !whole_cell && body.ends_with('\\');
        if blank {
            // `pass` keeps an indented block a block; pad to keep byte offsets.
            let mut repl = String::from(indent);
            if !trimmed.is_empty() && !whole_cell && body.len() >= indent.len() + 4 {
                repl.push_str("pass");
            }
            while repl.len() < body.len() {
                repl.push(' ');
            }
            out.push_str(&repl);
        } else {
            out.push_str(body);
        }
        out.push_str(ending);
    }
    *text = out;
}

/// Where a cell's Python stands at the end of a line: inside brackets, inside a
/// triple-quoted string, or continued by a backslash. A line scanned in such a state
/// continues the previous logical line.
#[derive(Default)]
struct Continuation {
    depth: u32,
    /// The quote of the triple-quoted string left open.
    triple: Option<u8>,
    backslash: bool,
}

impl Continuation {
    fn at_line_start(&self) -> bool {
        self.depth == 0 && self.triple.is_none() && !self.backslash
    }

    fn scan(&mut self, line: &str) {
        let b = line.as_bytes();
        let mut i = 0;
        self.backslash = false;
        while i < b.len() {
            if let Some(q) = self.triple {
                match b[i] {
                    b'\\' => i += 2,
                    c if c == q && b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) => {
                        self.triple = None;
                        i += 3;
                    }
                    _ => i += 1,
                }
                continue;
            }
            match b[i] {
                b'#' => return,
                b'(' | b'[' | b'{' => self.depth += 1,
                b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                b'\\' if b[i + 1..].iter().all(u8::is_ascii_whitespace) => {
                    self.backslash = true;
                    return;
                }
                q @ (b'"' | b'\'') => {
                    if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                        self.triple = Some(q);
                        i += 3;
                        continue;
                    }
                    // A one-line string; one left open ends at the line's end.
                    i += 1;
                    while i < b.len() && b[i] != q {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn is_ipython_line(t: &str) -> bool {
    if t.starts_with('%') || t.starts_with('!') || t.starts_with('?') {
        return true;
    }
    // Automagics: `pip install x` runs `%pip`; as Python it is no statement at all.
    let mut words = t.split_whitespace();
    if matches!(
        (words.next(), words.next()),
        (Some("pip" | "conda"), Some("install" | "uninstall"))
    ) {
        return true;
    }
    if t.ends_with('?') && !t.contains('#') {
        return true;
    }
    // `files = !ls`, `path = %env HOME`
    if let Some(eq) = t.find('=') {
        let (lhs, rhs) = (&t[..eq], t[eq + 1..].trim_start());
        let plain = !lhs.is_empty()
            && lhs
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == ',' || c == '.' || c == ' ');
        if plain && (rhs.starts_with('!') || rhs.starts_with('%')) && !rhs.starts_with("!=") {
            return true;
        }
    }
    false
}

/// An object's member: the key's span, the value, the value's span.
type Field = ((usize, usize), Json, (usize, usize));

/// A parsed JSON value; strings are kept as the byte span of the literal (quotes
/// included) and decoded only when needed, so large outputs cost nothing.
enum Json {
    Obj(Vec<Field>),
    Arr(Vec<Json>),
    Str((usize, usize)),
    Other,
}

fn get<'j>(fields: &'j [Field], raw: &str, key: &str) -> Option<&'j Json> {
    get_with_span(fields, raw, key).map(|(_, v)| v)
}

fn get_with_span<'j>(
    fields: &'j [Field],
    raw: &str,
    key: &str,
) -> Option<((usize, usize), &'j Json)> {
    fields
        .iter()
        .find(|(k, _, _)| key_is(raw, *k, key))
        .map(|(_, v, span)| (*span, v))
}

/// Whether the string literal at `span` decodes to `key` (a literal that does not
/// decode is no key).
fn key_is(raw: &str, span: (usize, usize), key: &str) -> bool {
    let body = &raw[span.0 + 1..span.1 - 1];
    if !body.contains('\\') {
        return body == key;
    }
    serde_json::from_str::<String>(&raw[span.0..span.1]).is_ok_and(|s| s == key)
}

/// Appends the decoded string literal at `span` to `out`, and the file offset of each
/// decoded byte to `map` (every byte of an escape maps to its backslash). The literal is
/// decoded by serde_json, so escapes, surrogate pairs and what is not a valid JSON string
/// (a lone surrogate, a control character, a bad escape) are as JSON says; the offsets
/// come from walking the literal beside the decoded characters, one per character or
/// escape.
fn push_decoded(
    raw: &str,
    span: (usize, usize),
    out: &mut String,
    map: &mut Vec<usize>,
) -> Result<(), NotebookError> {
    let decoded: String = serde_json::from_str(&raw[span.0..span.1]).map_err(|e| {
        let line = raw.as_bytes()[..span.0]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        let message = e.to_string();
        // serde_json's position is within the literal: give the file's line instead.
        let message = message
            .find(" at line ")
            .map_or(message.as_str(), |i| &message[..i]);
        NotebookError(format!("invalid JSON string at line {line}: {message}"))
    })?;
    let b = raw.as_bytes();
    let mut i = span.0 + 1;
    out.reserve(decoded.len());
    map.reserve(decoded.len());
    for c in decoded.chars() {
        let at = i;
        if b.get(i) == Some(&b'\\') {
            i += match b.get(i + 1) {
                // A character beyond the BMP is a surrogate pair: two `\uXXXX`.
                Some(b'u') if u32::from(c) > 0xFFFF => 12,
                Some(b'u') => 6,
                _ => 2,
            };
            map.extend(std::iter::repeat_n(at, c.len_utf8()));
        } else {
            i += c.len_utf8();
            map.extend(at..at + c.len_utf8());
        }
        out.push(c);
    }
    Ok(())
}

struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn err(&self, what: &str) -> NotebookError {
        let line = self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        NotebookError(format!("invalid JSON at line {line}: {what}"))
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, NotebookError> {
        if depth > 256 {
            return Err(self.err("nested too deep"));
        }
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return Err(self.err("expected `:`"));
                    }
                    self.i += 1;
                    self.ws();
                    let start = self.i;
                    let v = self.value(depth + 1)?;
                    fields.push((key, v, (start, self.i)));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return Err(self.err("expected `,` or `}`")),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err(self.err("expected `,` or `]`")),
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(c) if c.is_ascii_digit() || *c == b'-' || c.is_ascii_alphabetic() => {
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric()
                        || matches!(self.s[self.i], b'-' | b'+' | b'.'))
                {
                    self.i += 1;
                }
                Ok(Json::Other)
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn string(&mut self) -> Result<(usize, usize), NotebookError> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(self.err("expected a string"));
        }
        let start = self.i;
        self.i += 1;
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Ok((start, self.i));
                }
                _ => self.i += 1,
            }
        }
        Err(self.err("unterminated string"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = r##"{
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n"]},
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [{"data": {"text/plain": ["\"x\""]}}],
   "source": [
    "%load_ext autoreload\n",
    "import torch\n",
    "!pip install x"
   ]
  },
  {"cell_type": "code", "source": "s = \"\u00e9\\t\"\nfor b in data:\n    loss = f(b)\n"}
 ],
 "nbformat": 4
}"##;

    #[test]
    fn code_cells_concatenated_and_magics_blanked() {
        let nb = Notebook::parse(NB).unwrap();
        let lines: Vec<&str> = nb.source.lines().collect();
        assert_eq!(lines[0].trim(), "pass");
        assert_eq!(lines[1], "import torch");
        assert_eq!(lines[2].trim(), "pass");
        assert_eq!(lines[3], "s = \"\u{e9}\\t\"");
        assert_eq!(lines[5], "    loss = f(b)");
    }

    #[test]
    fn positions_map_to_cells_and_file() {
        let nb = Notebook::parse(NB).unwrap();
        let idx = nb.index();
        let li = LineIndex::new(&nb.source);
        let at = nb.source.find("loss").unwrap();
        assert_eq!(
            idx.locate(&nb.source, &li, at),
            CellPosition {
                cell: 3,
                line: 3,
                column: 5,
                code: nb.source.find("s = ").unwrap()..nb.source.len(),
            }
        );
        // In the file, `loss` sits inside the one-string source, after `\n    `.
        let raw = nb.raw_offset(at);
        assert_eq!(&NB[raw..raw + 4], "loss");
        let imp = nb.source.find("import").unwrap();
        assert_eq!(&NB[nb.raw_offset(imp)..nb.raw_offset(imp) + 6], "import");
    }

    #[test]
    fn writefile_cells_are_modules_of_the_same_length() {
        let (name, m) = written_module("\n%%writefile -a 'app.py'\nx = 1\n").unwrap();
        assert_eq!(name, "app.py");
        assert_eq!(m.len(), "\n%%writefile -a 'app.py'\nx = 1\n".len());
        assert_eq!(m.trim(), "x = 1");
        assert!(written_module("%%writefile requirements.txt\ntorch\n").is_none());
        assert!(written_module("%%writefile\n").is_none());
        assert!(written_module("%%bash\necho a.py\n").is_none());
        assert!(written_module("x = 1  # %%writefile a.py\n").is_none());
    }

    #[test]
    fn percent_inside_brackets_is_modulo() {
        // The continuation lines of a call, a triple-quoted string and a backslash
        // continuation are not magics; a magic after them is.
        let cell = "print('%d of %d'\n      % (i, n))\ns = \"\"\"\n%notmagic\n\"\"\"\nx = 1 + \\\n%2\n%time f()\n";
        let mut text = cell.to_owned();
        blank_ipython(&mut text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "      % (i, n))");
        assert_eq!(lines[3], "%notmagic");
        assert_eq!(lines[6], "%2");
        assert_eq!(lines[7].trim_end(), "pass");
        assert_eq!(text.len(), cell.len());
        // A shell command continued by backslashes is one magic; so is an automagic.
        let cell =
            "!python train.py \\\n    --lr 1e-4 \\\n    --bf16\npip install -q peft\nx = 1\n";
        let mut text = cell.to_owned();
        blank_ipython(&mut text);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(lines, ["pass", "pass", "pass", "pass", "x = 1"]);
    }

    #[test]
    fn cell_magics() {
        let mut t = String::from("%%bash\necho hi\n");
        blank_ipython(&mut t);
        assert_eq!(t.trim(), "");
        let mut t = String::from("%%time\nx = 1\nfiles = !ls\nmodel?\n");
        blank_ipython(&mut t);
        let l: Vec<&str> = t.lines().map(str::trim).collect();
        assert_eq!(l, ["pass", "x = 1", "pass", "pass"]);
    }

    /// Escapes of every kind map each decoded character to where it sits in the file;
    /// `\u` followed by non-ASCII text (which panicked the hand-written decoder) and
    /// other invalid strings are an error naming the line, not a panic.
    #[test]
    fn strings_are_decoded_as_json_says() {
        let nb = |src: &str| {
            format!("{{\"cells\": [{{\"cell_type\": \"code\",\n \"source\": \"{src}\"}}]}}")
        };
        let raw = nb(r#"a\u00e9\ud83d\ude00\n\t\\\"\/z\u20ac\u00E9"#);
        let p = Notebook::parse(&raw).unwrap();
        assert_eq!(p.source, "a\u{e9}\u{1f600}\n\t\\\"/z\u{20ac}\u{e9}\n");
        let z = p.source.find('z').unwrap();
        assert_eq!(&raw[p.raw_offset(z)..p.raw_offset(z) + 1], "z");
        let euro = p.source.find('\u{20ac}').unwrap();
        assert_eq!(&raw[p.raw_offset(euro)..p.raw_offset(euro) + 6], r"\u20ac");
        for bad in [
            "\\u\u{e9}\u{e9}x",
            "\\ua\u{e9}\u{e9}",
            "\\ud800",
            "\\q",
            "\u{1}",
            "\\u12",
        ] {
            let e = Notebook::parse(&nb(bad)).unwrap_err();
            assert!(e.0.starts_with("invalid JSON"), "{bad}: {e}");
            assert!(e.0.contains("line 2"), "{bad}: {e}");
        }
    }

    /// Fixes land in their cells; the rest of the file is byte for byte the same, and
    /// the result is a notebook again, with the cell's list layout kept.
    #[test]
    fn edits_are_written_back_into_their_cells() {
        let nb = Notebook::parse(NB).unwrap();
        let at = nb.source.find("loss = f(b)").unwrap() + "loss = f(b)".len();
        let imp = nb.source.find("import torch").unwrap();
        let edits = [
            Edit::insert(at, ".item()"),
            Edit::replace(imp..imp + 12, "import torch as t"),
        ];
        let out = nb.apply_edits(NB, &edits).unwrap();
        let again = Notebook::parse(&out).unwrap();
        assert!(
            again.source.contains("loss = f(b).item()\n"),
            "{}",
            again.source
        );
        assert!(again.source.contains("import torch as t\n"));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let old: serde_json::Value = serde_json::from_str(NB).unwrap();
        assert_eq!(v["cells"][0], old["cells"][0]);
        assert_eq!(v["cells"][1]["outputs"], old["cells"][1]["outputs"]);
        assert_eq!(v["nbformat"], old["nbformat"]);
        assert_eq!(
            v["cells"][1]["source"],
            serde_json::json!([
                "%load_ext autoreload\n",
                "import torch as t\n",
                "!pip install x"
            ])
        );
        assert!(
            out.contains("[\n    \"%load_ext autoreload\\n\",\n    \"import torch as t\\n\",\n")
        );
        // The one-string cell stays one string.
        assert!(v["cells"][2]["source"].is_string());
        // IPython syntax is not Python: an edit there is refused.
        let magic = nb.source.find("pass").unwrap();
        assert!(matches!(
            nb.apply_edits(NB, &[Edit::delete(magic..magic + 4)]),
            Err(FixError::NotInCell(_))
        ));
        // No edit, no change.
        assert_eq!(nb.apply_edits(NB, &[]).unwrap(), NB);
    }

    /// The newline the linter adds after a cell without one is not written back.
    #[test]
    fn synthetic_newline_is_not_written() {
        let raw = r#"{"cells": [{"cell_type": "code", "source": ["x = 1"]}, {"cell_type": "code", "source": ["y = 2\n"]}]}"#;
        let nb = Notebook::parse(raw).unwrap();
        assert_eq!(nb.source, "x = 1\ny = 2\n");
        let out = nb
            .apply_edits(raw, &[Edit::replace(0..6, "x = 3\n")])
            .unwrap();
        assert_eq!(
            out,
            r#"{"cells": [{"cell_type": "code", "source": ["x = 3"]}, {"cell_type": "code", "source": ["y = 2\n"]}]}"#
        );
        let out = nb.apply_edits(raw, &[Edit::insert(6, "z = 0\n")]).unwrap();
        assert!(out.contains(r#""source": ["z = 0\n", "y = 2\n"]"#), "{out}");
    }

    #[test]
    fn invalid_json_is_an_error() {
        assert!(Notebook::parse("{\"cells\": [").is_err());
        assert!(Notebook::parse("[]").is_err());
    }
}
