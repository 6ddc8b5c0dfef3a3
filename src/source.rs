//! Source text as the engine sees it, and byte offset to line/column conversion.

use std::borrow::Cow;

/// The text of one file, decoded once. Invalid UTF-8 is replaced (each bad sequence
/// becomes U+FFFD) so the rest of the file can still be linted; a UTF-8 byte order
/// mark is dropped because Python ignores it and it must not shift columns.
pub struct SourceText {
    pub text: String,
    pub invalid_utf8: bool,
}

impl SourceText {
    pub fn decode(bytes: &[u8]) -> Self {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let (mut text, invalid_utf8) = match String::from_utf8_lossy(bytes) {
            Cow::Borrowed(s) => (s.to_owned(), false),
            Cow::Owned(s) => (s, true),
        };
        // Python ends a line at a lone `\r` too, tree-sitter-python does not: make it
        // `\n`, byte for byte, so offsets (and so every position) stay the same.
        if memchr::memchr(b'\r', text.as_bytes()).is_some() {
            let mut b = std::mem::take(&mut text).into_bytes();
            for i in 0..b.len() {
                if b[i] == b'\r' && b.get(i + 1) != Some(&b'\n') {
                    b[i] = b'\n';
                }
            }
            text = String::from_utf8(b).expect("ASCII-for-ASCII replacement keeps UTF-8");
        }
        SourceText { text, invalid_utf8 }
    }
}

/// 1-based line and column (columns count Unicode scalar values, as ruff does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

/// Start offsets of every line. `\n`, `\r\n` and a lone `\r` all end a line, as in Python.
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut i = 0;
        while let Some(off) = memchr::memchr2(b'\n', b'\r', &bytes[i..]) {
            let at = i + off;
            let next = if bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
                at + 2
            } else {
                at + 1
            };
            starts.push(next);
            i = next;
        }
        LineIndex { starts }
    }

    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = offset.min(text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let column = text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(offset - start);
        LineCol {
            line: line + 1,
            column: column + 1,
        }
    }

    /// The 0-based line that holds `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    /// Where 0-based line `line` starts, if the text has that many lines.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line).copied()
    }

    /// Byte range of line `line` (1-based), without its terminator.
    pub fn line_range(&self, text: &str, line: usize) -> Option<std::ops::Range<usize>> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let mut end = self.starts.get(line).copied().unwrap_or(text.len());
        let b = text.as_bytes();
        while end > start && (b[end - 1] == b'\n' || b[end - 1] == b'\r') {
            end -= 1;
        }
        Some(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings() {
        let t = "a\r\nbc\rd\n\u{e9}x";
        let idx = LineIndex::new(t);
        assert_eq!(idx.line_col(t, 0), LineCol { line: 1, column: 1 });
        assert_eq!(idx.line_col(t, 4), LineCol { line: 2, column: 2 });
        assert_eq!(idx.line_col(t, 6), LineCol { line: 3, column: 1 });
        assert_eq!(idx.line_col(t, 10), LineCol { line: 4, column: 2 });
        assert_eq!(&t[idx.line_range(t, 2).unwrap()], "bc");
    }

    #[test]
    fn bom_and_invalid_utf8() {
        let s = SourceText::decode(b"\xEF\xBB\xBFx = 1\n");
        assert_eq!(s.text, "x = 1\n");
        assert!(!s.invalid_utf8);
        let s = SourceText::decode(b"x = '\xFF'\n");
        assert!(s.invalid_utf8);
        assert_eq!(s.text.lines().count(), 1);
    }
}
