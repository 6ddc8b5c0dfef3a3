//! Suppression comments, read from tree-sitter `comment` nodes (so `# noqa` inside a
//! string is never a suppression):
//!
//! - `# noqa` on a finding's first line suppresses every finding that starts there;
//! - `# noqa: OOM201` or `# noqa: OOM201, OOM202` suppresses only those codes;
//! - `# oomlint: noqa` anywhere in the file, on a line of its own (nothing but
//!   whitespace before the `#`), suppresses everything in the file, and
//!   `# oomlint: noqa: OOM201` those codes in the file;
//! - the same comment at the end of a line of code suppresses only on that line, like
//!   `# noqa: OOM201`, and the file gets a warning that the file-level form belongs on
//!   a line of its own: a suppression never hides more than the line it was written on
//!   unless it stands alone.
//!
//! Matching is case-insensitive, and a `# noqa` may follow other comment text
//! (`# type: ignore  # noqa: OOM201`), as in ruff and flake8.

use tree_sitter::Node;

use crate::fix::Edit;
use crate::semantic::NodeExt;

/// Which codes a suppression covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Codes {
    All,
    Only(Vec<String>),
}

impl Codes {
    fn covers(&self, code: &str) -> bool {
        match self {
            Codes::All => true,
            Codes::Only(codes) => codes.iter().any(|c| c.eq_ignore_ascii_case(code)),
        }
    }
}

/// The suppressions of one file.
#[derive(Clone, Debug, Default)]
pub struct Suppressions {
    /// `(line, codes)` from line-level `# noqa` comments (1-based lines), and from
    /// `# oomlint: noqa` comments at the end of a line of code.
    lines: Vec<(usize, Codes)>,
    /// From `# oomlint: noqa` comments on lines of their own.
    file: Vec<Codes>,
    /// Lines where a `# oomlint: noqa` follows code (so it covers only that line).
    misplaced: Vec<usize>,
}

/// Whether the comment starting at byte `start` of `source` is the first thing on its
/// line (only spaces, tabs or a form feed before it).
pub fn starts_line(source: &str, start: usize) -> bool {
    let before = &source.as_bytes()[..start];
    let line_start = memchr::memrchr2(b'\n', b'\r', before).map_or(0, |i| i + 1);
    before[line_start..]
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\x0c'))
}

/// What one comment says, if it is a suppression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Directive {
    Line(Codes),
    File(Codes),
}

/// Parses the text of one comment (with its leading `#`).
pub fn parse_comment(text: &str) -> Option<Directive> {
    let d = parse_spans(text)?;
    let codes = if d.codes.is_empty() {
        Codes::All
    } else {
        Codes::Only(d.codes.into_iter().map(|c| c.code).collect())
    };
    Some(if d.file {
        Directive::File(codes)
    } else {
        Directive::Line(codes)
    })
}

/// One code of a directive and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSpan {
    /// Upper-cased.
    pub code: String,
    /// Bytes of the comment's text.
    pub range: std::ops::Range<usize>,
}

/// A suppression directive inside the text of one comment, with byte offsets into that
/// text: what `--add-noqa` merges into and what the unused-noqa rule removes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectiveSpans {
    /// `# oomlint: noqa` (file level) rather than `# noqa`.
    pub file: bool,
    /// Where the directive's `#` is: 0, or a later `#` section (`# type: ignore  # noqa`).
    pub start: usize,
    /// Where the directive ends: the next `#` section, or the end of the comment (a
    /// reason written after the codes belongs to the directive).
    pub end: usize,
    /// The codes, in the order written; empty for a bare `# noqa`.
    pub codes: Vec<CodeSpan>,
}

/// Parses the text of one comment into its directive and the positions of its parts.
pub fn parse_spans(text: &str) -> Option<DirectiveSpans> {
    if !text.starts_with('#') {
        return None;
    }
    let mut at = 0;
    // `#` sections of the comment: the directive is the first section that is one.
    while at < text.len() {
        let rest = &text[at..];
        let body_off = at + 1 + (rest[1..].len() - rest[1..].trim_start().len());
        let body = &text[body_off..];
        let next_section = |from: usize| text[from..].find('#').map_or(text.len(), |i| from + i);
        // File level: the whole comment is `# oomlint: noqa[: codes]`.
        if at == 0 {
            if let Some(r) = strip_prefix_ci(body, "oomlint:") {
                let r = strip_prefix_ci(r.trim_start(), "noqa")?;
                let (codes, list_end) = codes_after(r, text.len() - r.len())?;
                return Some(DirectiveSpans {
                    file: true,
                    start: 0,
                    end: next_section(list_end),
                    codes,
                });
            }
        }
        if let Some(r) = strip_prefix_ci(body, "noqa") {
            if let Some((codes, list_end)) = codes_after(r, text.len() - r.len()) {
                return Some(DirectiveSpans {
                    file: false,
                    start: at,
                    end: next_section(list_end),
                    codes,
                });
            }
        }
        at = match text[at + 1..].find('#') {
            Some(i) => at + 1 + i,
            None => break,
        };
    }
    None
}

/// What follows `noqa` (starting at byte `off` of the comment): nothing (all codes),
/// `: CODE[, CODE]`, or something else (not a directive: `# noqa_helper` is not
/// `# noqa`). Returns the codes and where the list ends.
fn codes_after(rest: &str, off: usize) -> Option<(Vec<CodeSpan>, usize)> {
    let Some(list) = rest.strip_prefix(':') else {
        // `# noqa`, `# noqa  # other`, `# noqa - reason`: a bare noqa.
        return match rest.chars().next() {
            None => Some((Vec::new(), off)),
            Some(c) if c.is_whitespace() || c == '#' => Some((Vec::new(), off)),
            _ => None,
        };
    };
    let list_off = off + 1;
    let mut codes = Vec::new();
    let mut end = list_off;
    let mut pos = 0;
    for word in list.split(|c: char| c == ',' || c.is_whitespace()) {
        let start = pos;
        pos += word.len() + 1;
        if word.is_empty() {
            continue;
        }
        // A code is letters then digits: `OOM201`, `E501`.
        let digits = word.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        let is_code = digits.len() < word.len()
            && !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit());
        if !is_code {
            break; // a reason after the codes: `# noqa: OOM201 kept on purpose`
        }
        let range = list_off + start..list_off + start + word.len();
        end = range.end;
        codes.push(CodeSpan {
            code: word.to_ascii_uppercase(),
            range,
        });
    }
    // `# noqa:` with no code reads as a bare noqa, as in flake8.
    Some((codes, end))
}

fn strip_prefix_ci<'s>(s: &'s str, prefix: &str) -> Option<&'s str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

impl Suppressions {
    /// Collects the suppressions from `(line, comment text, on a line of its own)`
    /// triples ([`starts_line`] tells the third).
    pub fn from_comments<'s>(comments: impl IntoIterator<Item = (usize, &'s str, bool)>) -> Self {
        let mut s = Suppressions::default();
        for (line, text, own_line) in comments {
            match parse_comment(text) {
                Some(Directive::Line(codes)) => s.lines.push((line, codes)),
                Some(Directive::File(codes)) if own_line => s.file.push(codes),
                Some(Directive::File(codes)) => {
                    s.lines.push((line, codes));
                    s.misplaced.push(line);
                }
                None => {}
            }
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.file.is_empty()
    }

    /// The lines where a file-level `# oomlint: noqa` follows code, so it applies to
    /// that line only; each deserves a warning.
    pub fn misplaced_file_level(&self) -> &[usize] {
        &self.misplaced
    }

    /// Whether a finding of `code` starting on `line` is suppressed.
    pub fn suppresses(&self, code: &str, line: usize) -> bool {
        self.suppresses_on(code, line, line)
    }

    /// Whether a finding of `code` starting on `line`, whose comment line
    /// ([`comment_line_end`]) is `comment_line`, is suppressed.
    pub fn suppresses_on(&self, code: &str, line: usize, comment_line: usize) -> bool {
        self.file.iter().any(|c| c.covers(code))
            || self
                .lines
                .iter()
                .any(|(l, c)| (*l == line || *l == comment_line) && c.covers(code))
    }

    /// Whether only a `# noqa` naming `code` (or a file-level one) suppresses it on
    /// `line`: a bare `# noqa` never hides the report that it is unused.
    pub fn names_code(&self, code: &str, line: usize) -> bool {
        self.file.iter().any(|c| c.covers(code))
            || self
                .lines
                .iter()
                .any(|(l, c)| *l == line && matches!(c, Codes::Only(_)) && c.covers(code))
    }
}

/// Where the `# noqa` of a finding starting at byte `offset` goes: the end of the
/// finding's first line (before a `\r`), unless that line ends inside a string that goes
/// on to the next line or with a backslash continuation, where a comment cannot be;
/// then the end of the line where the string or continuation ends. Suppression reads a
/// comment there as well as on the finding's first line, so what `--add-noqa` writes
/// always suppresses.
pub fn comment_line_end(root: Node<'_>, text: &str, offset: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = offset.min(text.len());
    loop {
        let eol = memchr::memchr(b'\n', &bytes[at..]).map_or(text.len(), |i| at + i);
        let end = if eol > at && bytes[eol - 1] == b'\r' {
            eol - 1
        } else {
            eol
        };
        if eol == text.len() {
            return end;
        }
        if let Some(string_end) = string_spanning(root, end) {
            // Each step moves forward, so the walk ends.
            at = string_end.max(eol + 1).min(text.len());
            continue;
        }
        if end > 0 && bytes[end - 1] == b'\\' && !in_comment(root, end - 1) {
            at = eol + 1;
            continue;
        }
        return end;
    }
}

/// The end of the string that goes on past byte `at` (the end of a line), if any.
fn string_spanning(root: Node<'_>, at: usize) -> Option<usize> {
    let mut node = root.descendant_for_byte_range(at, at);
    // A string is a few levels above the leaf (its content, an interpolation); a bound
    // keeps deeply nested code from costing a walk to the root per finding.
    for _ in 0..8 {
        let n = node?;
        if n.kind_str() == "string" && n.start_byte() < at && n.end_byte() > at {
            return Some(n.end_byte());
        }
        node = n.parent();
    }
    None
}

fn in_comment(root: Node<'_>, at: usize) -> bool {
    root.descendant_for_byte_range(at, at + 1)
        .is_some_and(|n| n.kind_str() == "comment")
}

/// The bytes of a comment node, without the `\r` of a CRLF line ending that
/// tree-sitter counts as part of it.
pub fn comment_range(node: Node<'_>, text: &str) -> std::ops::Range<usize> {
    let r = node.byte_range();
    let end = r.start + text[r.clone()].trim_end_matches('\r').len();
    r.start..end
}

/// The comment that ends the line ending at byte `end` (trailing spaces aside), if any.
fn trailing_comment(root: Node<'_>, text: &str, end: usize) -> Option<std::ops::Range<usize>> {
    let trimmed = text[..end].trim_end_matches([' ', '\t', '\x0c']).len();
    if trimmed == 0 {
        return None;
    }
    let n = root.descendant_for_byte_range(trimmed - 1, trimmed)?;
    let r = comment_range(n, text);
    (n.kind_str() == "comment" && r.end == trimmed).then_some(r)
}

/// The edits that make each `(offset, code)` finding suppressed by a `# noqa: CODE` on
/// its comment line ([`comment_line_end`]), one edit per line: merged into a `# noqa`
/// list already there (codes sorted, no duplicates, other tools' codes kept), appended
/// after another comment, or added after the code. A bare `# noqa` already covers
/// everything and gets no edit. Edits are in position order.
pub fn add_noqa_edits(root: Node<'_>, text: &str, findings: &[(usize, &str)]) -> Vec<Edit> {
    let mut by_line: Vec<(usize, String)> = findings
        .iter()
        .map(|&(offset, code)| {
            (
                comment_line_end(root, text, offset),
                code.to_ascii_uppercase(),
            )
        })
        .collect();
    by_line.sort();
    by_line.dedup();
    let mut edits = Vec::new();
    let mut i = 0;
    while i < by_line.len() {
        let end = by_line[i].0;
        let mut codes: Vec<String> = Vec::new();
        while i < by_line.len() && by_line[i].0 == end {
            codes.push(by_line[i].1.clone());
            i += 1;
        }
        if let Some(edit) = noqa_edit(root, text, end, codes) {
            edits.push(edit);
        }
    }
    edits
}

fn noqa_edit(root: Node<'_>, text: &str, end: usize, mut codes: Vec<String>) -> Option<Edit> {
    let comment = trailing_comment(root, text, end);
    if let Some(c) = comment.clone() {
        let ctext = &text[c.clone()];
        match parse_spans(ctext) {
            Some(d) if !d.file && d.codes.is_empty() => return None,
            Some(d) if !d.file => {
                let (first, last) = (d.codes.first()?, d.codes.last()?);
                codes.extend(d.codes.iter().map(|c| c.code.clone()));
                codes.sort();
                codes.dedup();
                let list = codes.join(", ");
                let range = c.start + first.range.start..c.start + last.range.end;
                if text[range.clone()] == list {
                    return None;
                }
                return Some(Edit {
                    range,
                    content: list,
                });
            }
            _ => {}
        }
    }
    codes.sort();
    codes.dedup();
    let at = comment.map_or_else(
        || text[..end].trim_end_matches([' ', '\t', '\x0c']).len(),
        |c| c.end,
    );
    Some(Edit {
        range: at..at,
        content: format!("  # noqa: {}", codes.join(", ")),
    })
}

/// One `# noqa` that suppresses (some) nothing, found by [`unused`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unused {
    /// The directive's bytes in the file.
    pub range: std::ops::Range<usize>,
    /// Codes of enabled rules with no finding on the line; empty for a bare `# noqa`.
    pub unused: Vec<String>,
    /// `OOM` codes that no rule has.
    pub unknown: Vec<String>,
    pub blanket: bool,
    /// The edit that removes the unused codes, or the whole directive.
    pub edit: Edit,
}

/// The line-level `# noqa` directives among `comments` (their byte ranges in `text`)
/// that suppress nothing. `hits(line, code)` tells whether a finding of `code` (any code
/// for `None`) has its comment on that 1-based line; `known(code)` whether an `OOM` code
/// is a rule, and `enabled(code)` whether that rule ran on the file (codes of rules that
/// did not run are left alone: nothing says whether they would fire). `keep` is a code
/// never judged (the unused-noqa rule's own).
pub fn unused(
    text: &str,
    comments: impl IntoIterator<Item = std::ops::Range<usize>>,
    line_of: impl Fn(usize) -> usize,
    hits: impl Fn(usize, Option<&str>) -> bool,
    known: impl Fn(&str) -> bool,
    enabled: impl Fn(&str) -> bool,
    keep: &str,
) -> Vec<Unused> {
    let mut out = Vec::new();
    for c in comments {
        let ctext = &text[c.clone()];
        let Some(d) = parse_spans(ctext) else {
            continue;
        };
        if d.file {
            continue;
        }
        let line = line_of(c.start);
        let directive = c.start + d.start..c.start + d.end;
        if d.codes.is_empty() {
            if !hits(line, None) {
                out.push(Unused {
                    edit: remove_directive(text, c.clone(), &d),
                    range: trim_range(text, directive),
                    unused: Vec::new(),
                    unknown: Vec::new(),
                    blanket: true,
                });
            }
            continue;
        }
        let (mut unused, mut unknown, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        for code in &d.codes {
            let is_oom = code.code.starts_with("OOM");
            if code.code == keep || !is_oom {
                kept.push(code);
            } else if !known(&code.code) {
                unknown.push(code.code.clone());
            } else if enabled(&code.code) && !hits(line, Some(&code.code)) {
                unused.push(code.code.clone());
            } else {
                kept.push(code);
            }
        }
        if unused.is_empty() && unknown.is_empty() {
            continue;
        }
        let edit = if kept.is_empty() {
            remove_directive(text, c.clone(), &d)
        } else {
            let (first, last) = (&d.codes[0], &d.codes[d.codes.len() - 1]);
            let list: Vec<&str> = kept.iter().map(|k| &ctext[k.range.clone()]).collect();
            Edit {
                range: c.start + first.range.start..c.start + last.range.end,
                content: list.join(", "),
            }
        };
        out.push(Unused {
            range: trim_range(text, directive),
            unused,
            unknown,
            blanket: false,
            edit,
        });
    }
    out
}

/// The directive's range without the spaces before the next `#` section.
fn trim_range(text: &str, r: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let end = r.start + text[r.clone()].trim_end().len();
    r.start..end
}

/// The edit that removes the directive `d` from the comment at `c`: the whole comment
/// and the spaces before it when nothing else is in it (the whole line when it stands
/// alone), else only the directive's section.
fn remove_directive(text: &str, c: std::ops::Range<usize>, d: &DirectiveSpans) -> Edit {
    let ctext = &text[c.clone()];
    if d.end < ctext.len() {
        // Another `#` section follows: it takes the directive's place.
        return Edit {
            range: c.start + d.start..c.start + d.end,
            content: String::new(),
        };
    }
    let cut = if d.start == 0 {
        c.start
    } else {
        c.start + ctext[..d.start].trim_end().len()
    };
    let before = &text[..cut];
    let mut start = before.trim_end_matches([' ', '\t', '\x0c']).len();
    let mut end = c.end;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    if d.start == 0 && start == line_start {
        // The comment was the whole line: remove the line.
        start = line_start;
        let rest = &text.as_bytes()[end..];
        end += match rest {
            [b'\r', b'\n', ..] => 2,
            [b'\n', ..] => 1,
            _ => 0,
        };
    }
    Edit {
        range: start..end,
        content: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(codes: &[&str]) -> Codes {
        Codes::Only(codes.iter().map(|c| c.to_string()).collect())
    }

    #[test]
    fn line_directives() {
        use Directive::Line;
        assert_eq!(parse_comment("# noqa"), Some(Line(Codes::All)));
        assert_eq!(parse_comment("#noqa"), Some(Line(Codes::All)));
        assert_eq!(parse_comment("# NOQA"), Some(Line(Codes::All)));
        assert_eq!(parse_comment("# noqa:"), Some(Line(Codes::All)));
        assert_eq!(
            parse_comment("# noqa: OOM201"),
            Some(Line(only(&["OOM201"])))
        );
        assert_eq!(
            parse_comment("# noqa:OOM201,oom301"),
            Some(Line(only(&["OOM201", "OOM301"])))
        );
        assert_eq!(
            parse_comment("# noqa: OOM201, OOM301 kept on purpose"),
            Some(Line(only(&["OOM201", "OOM301"])))
        );
        assert_eq!(
            parse_comment("# type: ignore  # noqa: OOM202"),
            Some(Line(only(&["OOM202"])))
        );
        assert_eq!(parse_comment("# noqa_helper"), None);
        assert_eq!(parse_comment("# see noqa docs"), None);
        assert_eq!(parse_comment("# error: OOM201"), None);
    }

    #[test]
    fn file_directives() {
        use Directive::File;
        assert_eq!(parse_comment("# oomlint: noqa"), Some(File(Codes::All)));
        assert_eq!(
            parse_comment("# oomlint: noqa: OOM201"),
            Some(File(only(&["OOM201"])))
        );
        assert_eq!(parse_comment("# oomlint: enable"), None);
    }

    #[test]
    fn suppression_by_line_and_code() {
        let s = Suppressions::from_comments([
            (3, "# noqa: OOM201", false),
            (5, "# noqa", false),
            (9, "# oomlint: noqa: OOM202", true),
        ]);
        assert!(s.suppresses("OOM201", 3));
        assert!(!s.suppresses("OOM301", 3));
        assert!(s.suppresses("OOM301", 5));
        assert!(!s.suppresses("OOM201", 4));
        assert!(s.suppresses("OOM202", 100));
        assert!(s.misplaced_file_level().is_empty());
    }

    #[test]
    fn file_level_form_after_code_covers_only_its_line() {
        let s = Suppressions::from_comments([
            (4, "# oomlint: noqa: OOM201", false),
            (7, "# oomlint: noqa", false),
        ]);
        assert!(s.suppresses("OOM201", 4));
        assert!(!s.suppresses("OOM202", 4));
        assert!(
            !s.suppresses("OOM201", 14),
            "a trailing comment hid a later line"
        );
        assert!(s.suppresses("OOM301", 7));
        assert!(!s.suppresses("OOM301", 8));
        assert_eq!(s.misplaced_file_level(), &[4, 7]);
    }

    #[test]
    fn comment_starts_line() {
        let src = "x = 1  # a\n    # b\n\t# c\r\ny(  # d\n)\n# e";
        let at = |needle: &str| src.find(needle).unwrap();
        assert!(!starts_line(src, at("# a")));
        assert!(starts_line(src, at("# b")));
        assert!(starts_line(src, at("# c")));
        assert!(!starts_line(src, at("# d")));
        assert!(starts_line(src, at("# e")));
        assert!(starts_line("# first", 0));
    }

    fn tree(src: &str) -> tree_sitter::Tree {
        crate::lint::parse_python(src).expect("tree")
    }

    fn apply(src: &str, mut edits: Vec<Edit>) -> String {
        edits.sort_by_key(|e| std::cmp::Reverse(e.range.start));
        let mut out = src.to_owned();
        for e in edits {
            out.replace_range(e.range, &e.content);
        }
        out
    }

    fn add(src: &str, at: &[(&str, &str)]) -> String {
        let t = tree(src);
        let findings: Vec<(usize, &str)> = at
            .iter()
            .map(|(needle, code)| (src.find(needle).expect(needle), *code))
            .collect();
        let out = apply(src, add_noqa_edits(t.root_node(), src, &findings));
        assert!(!tree(&out).root_node().has_error(), "{out}");
        out
    }

    #[test]
    fn spans_of_directives() {
        let d = parse_spans("# type: ignore  # noqa: E501, oom201 why").unwrap();
        assert!(!d.file);
        assert_eq!(d.start, 16);
        assert_eq!(d.end, 40);
        let codes: Vec<&str> = d.codes.iter().map(|c| c.code.as_str()).collect();
        assert_eq!(codes, ["E501", "OOM201"]);
        assert_eq!(d.codes[1].range, 30..36);
        let d = parse_spans("# noqa  # error: OOM001").unwrap();
        assert!(d.codes.is_empty());
        assert_eq!((d.start, d.end), (0, 8));
        assert!(parse_spans("# oomlint: noqa: OOM201").unwrap().file);
        assert_eq!(parse_spans("not a comment # noqa"), None);
    }

    #[test]
    fn add_noqa_merges_and_sorts() {
        assert_eq!(
            add("x = f(loss)\n", &[("f(", "OOM201")]),
            "x = f(loss)  # noqa: OOM201\n"
        );
        assert_eq!(
            add(
                "x = f(loss)  # noqa: E501, OOM301\r\n",
                &[("f(", "OOM201"), ("x", "OOM201")]
            ),
            "x = f(loss)  # noqa: E501, OOM201, OOM301\r\n"
        );
        assert_eq!(
            add("x = f(loss)  # type: ignore\n", &[("f(", "oom202")]),
            "x = f(loss)  # type: ignore  # noqa: OOM202\n"
        );
        // A bare noqa already covers every code.
        assert_eq!(
            add("x = f()  # noqa\n", &[("f(", "OOM201")]),
            "x = f()  # noqa\n"
        );
    }

    #[test]
    fn add_noqa_skips_strings_and_continuations() {
        let src = "s = f(\"\"\"a\nb\"\"\", x)\ny = 1\n";
        assert_eq!(
            add(src, &[("f(", "OOM201")]),
            "s = f(\"\"\"a\nb\"\"\", x)  # noqa: OOM201\ny = 1\n"
        );
        let src = "total = total + \\\n    loss\n";
        assert_eq!(
            add(src, &[("total =", "OOM202")]),
            "total = total + \\\n    loss  # noqa: OOM202\n"
        );
        // Inside brackets a comment is fine on the first line.
        let src = "out.append(f(a,\n    b))\n";
        assert_eq!(
            add(src, &[("out", "OOM201")]),
            "out.append(f(a,  # noqa: OOM201\n    b))\n"
        );
        // A backslash in a comment is no continuation.
        let src = "x = f()  # see C:\\\ny = 2\n";
        assert_eq!(
            add(src, &[("f(", "OOM201")]),
            "x = f()  # see C:\\  # noqa: OOM201\ny = 2\n"
        );
    }

    #[test]
    fn unused_edits() {
        let run = |src: &str, hit: &[(usize, &str)]| {
            let t = tree(src);
            let mut comments = Vec::new();
            let mut cursor = t.walk();
            let mut stack = vec![t.root_node()];
            while let Some(n) = stack.pop() {
                if n.kind_str() == "comment" {
                    comments.push(comment_range(n, src));
                }
                stack.extend(n.children(&mut cursor));
            }
            let lines = crate::source::LineIndex::new(src);
            let found = unused(
                src,
                comments,
                |at| lines.line_col(src, at).line,
                |line, code| {
                    hit.iter()
                        .any(|(l, c)| *l == line && code.is_none_or(|code| code == *c))
                },
                |code| code != "OOM999",
                |_| true,
                "OOM001",
            );
            let out = apply(src, found.iter().map(|u| u.edit.clone()).collect());
            (found, out)
        };
        let (found, out) = run("x = 1  # noqa: OOM201\n", &[]);
        assert_eq!(found[0].unused, ["OOM201"]);
        assert_eq!(out, "x = 1\n");
        let (_, out) = run("x = 1  # noqa: E501, OOM201\n", &[]);
        assert_eq!(out, "x = 1  # noqa: E501\n");
        let (found, out) = run("x = 1  # noqa: OOM201, OOM999\n", &[(1, "OOM201")]);
        assert_eq!(found[0].unknown, ["OOM999"]);
        assert_eq!(out, "x = 1  # noqa: OOM201\n");
        let (_, out) = run("x = 1  # type: int  # noqa\n", &[]);
        assert_eq!(out, "x = 1  # type: int\n");
        let (_, out) = run("x = 1  # noqa: OOM201  # keep\n", &[]);
        assert_eq!(out, "x = 1  # keep\n");
        let (_, out) = run("x = 1  # noqa: OOM201\r\ny = 2\r\n", &[]);
        assert_eq!(out, "x = 1\r\ny = 2\r\n");
        let (_, out) = run("a = 1\n    # noqa\nb = 2\n", &[]);
        assert_eq!(out, "a = 1\nb = 2\n");
        let (found, _) = run("x = 1  # noqa: OOM201, OOM001\n", &[(1, "OOM201")]);
        assert!(found.is_empty());
        let (found, _) = run("x = f()  # noqa\n", &[(1, "OOM202")]);
        assert!(found.is_empty());
    }
}
