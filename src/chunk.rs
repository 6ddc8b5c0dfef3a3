//! Parse the parts, not the files (off by default: `--chunk`). Parsing is most of a
//! run's cost, and in a file that the prefilter lets through some functions are still
//! ones no rule reads (helpers, model definitions, library code). A byte-level pass
//! splits the file into top-level statements, functions, classes and the methods of
//! class bodies ([`split`]) and records what each part defines and uses; [`select`]
//! keeps the parts the rules need; tree-sitter then parses only those byte ranges
//! (`Parser::set_included_ranges`), so every node keeps its position in the whole file.
//!
//! What is kept:
//! - every module-level statement that is not a `def` or `class` (imports, assignments,
//!   `if __name__ == ...` blocks, loops): cheap, and read by the whole file;
//! - a trigger: a function, a method, a class with its class-level statements, or the
//!   module-level code as a whole, that passes the [`Rule::parts`] predicate of a rule
//!   that the file's prefilter lets through, checked on the [`Scan`] of the part merged
//!   with the same-file functions it calls (transitively) and the names of the
//!   module-level code; or that mentions `noqa`;
//! - the closure of the triggers: what a kept part calls (a name or `.name` that another
//!   part defines or stores into) and what calls it (its name), until nothing changes;
//!   a kept method keeps its class header, the class-level statements, `__init__` and
//!   the forward methods of its class, and a kept class its first body item;
//! - where anything is kept, the parts that name a fact the model computes over every
//!   call of the file ([`WHOLE_FILE_WORDS`]), without their closure.
//!
//! Whatever the scanner cannot follow (an unterminated string or bracket, a `\r` line
//! ending, a form feed, an indentation that is neither the class body's nor deeper)
//! gives `None`: the file is parsed whole. A chunked parse that shows a syntax error is
//! redone whole too, so chunking never makes a syntax error ([`crate::lint`]).
//!
//! Where it applies: the lint parses a file itself when the project index did not
//! (files without PyTorch words, files linted again after the join, stdin, the
//! language server, `--parse-only`). The index's own parse stays whole: its summary
//! lists every function and every method call of the file.
//!
//! Why it is off: on the benchmark corpora the selection keeps 85% (generated) to
//! 99.8% (timm, lightning) of the bytes the lint parses, because OOM301's part
//! predicate (a function that reads some value detached: `.item()`, `.shape`,
//! `float(...)`) holds for nearly every function, and the scan of every part costs
//! about what the left-out bytes save (the commit that added this module has the
//! figures). `tests/fixtures.rs` checks every fixture with it on and off.

use std::ops::Range;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::prefilter::{is_ident_char, is_ident_start, is_string_prefix, skip_literal, Scan};
use crate::rule::Rule;
use crate::semantic::names;

/// What a part of a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A module-level statement other than `def` and `class`: always kept.
    Module,
    /// A module-level `def` (with its decorators).
    Function,
    /// A module-level `class` line (with its decorators), up to its first body item.
    Class,
    /// A statement of a class body other than a `def` (a docstring, a class attribute):
    /// kept with its class.
    ClassStmt,
    /// A `def` of a class body.
    Method,
}

/// One part of a file.
#[derive(Debug)]
pub struct Chunk<'a> {
    /// From the start of its first line to the start of the next part's first line.
    pub range: Range<usize>,
    pub kind: Kind,
    /// The `def` or `class` name (empty for the others).
    pub name: &'a str,
    /// For a class-body item, the index of its class.
    pub class: Option<usize>,
    /// Names and attribute names read or called (sorted, no duplicates).
    pub uses: Vec<&'a str>,
    /// Names this part gives a value to that another part may read: attributes stored
    /// into (`self.net = ...`), names declared `global`, the names a class body binds.
    pub stores: Vec<&'a str>,
}

/// Words of facts that the semantic model computes over every call of a file (whether
/// it runs on CUDA, trains, saves checkpoints, places models on a device held in a
/// variable, is TPU code, maps functions over a dataset, freezes parameters, loads
/// state dicts): a part that names one is kept, as the fact may decide a finding
/// elsewhere in the file.
pub const WHOLE_FILE_WORDS: &[&str] = &[
    "cuda",
    "to",
    "device",
    "device_map",
    "save",
    "train",
    "xla",
    "tpu",
    "map",
    "requires_grad",
    "requires_grad_",
    "load_state_dict",
];

/// Splits `text` into parts, or `None` where the scanner cannot follow the text.
pub fn split<'a>(text: &'a str) -> Option<Vec<Chunk<'a>>> {
    let b = text.as_bytes();
    // A lone `\r` ends a line for Python but not for tree-sitter's row count, and a form
    // feed resets indentation: both are rare enough to parse whole.
    if memchr::memchr(b'\x0c', b).is_some()
        || memchr::memchr_iter(b'\r', b).any(|i| b.get(i + 1) != Some(&b'\n'))
    {
        return None;
    }
    let mut chunks: Vec<Chunk> = Vec::new();
    // The current class, and the indentation of its body once seen.
    let mut class: Option<(usize, Option<&[u8]>)> = None;
    // A part opened by a decorator whose `def` or `class` is not yet seen.
    let mut pending: Option<usize> = None;
    let mut depth: u32 = 0;
    let mut i = 0;
    let mut line_start = true;
    let mut after_dot = false;
    // Names after `global`/`nonlocal` on the current logical line are stores.
    let mut global_line = false;
    let new = |range_start: usize, kind: Kind, name: &'a str, class: Option<usize>| Chunk {
        range: range_start..range_start,
        kind,
        name,
        class,
        uses: Vec::new(),
        stores: Vec::new(),
    };
    fn new_chunk<'a>(
        chunks: &mut Vec<Chunk<'a>>,
        c: impl Fn(usize, Kind, &'a str, Option<usize>) -> Chunk<'a>,
        start: usize,
        kind: Kind,
        name: &'a str,
        class: Option<usize>,
    ) {
        if chunks.is_empty() && start > 0 {
            chunks.push(c(0, Kind::Module, "", None));
        }
        chunks.push(c(start, kind, name, class));
    }
    while i < b.len() {
        if line_start {
            let ls = i;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            if i >= b.len() {
                break;
            }
            match b[i] {
                b'\n' => {
                    i += 1;
                    continue;
                }
                b'\r' => {
                    i += 2;
                    continue;
                }
                b'#' => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                _ => {}
            }
            line_start = false;
            global_line = false;
            let indent = &b[ls..i];
            let (word, after) = ident_at(text, i);
            let def_name = |w: &str, after: usize| -> Option<&'a str> {
                let at = if w == "async" {
                    let j = skip_blanks(b, after);
                    let (w2, a2) = ident_at(text, j);
                    if w2 != "def" {
                        return None;
                    }
                    a2
                } else if w == "def" || w == "class" {
                    after
                } else {
                    return None;
                };
                let j = skip_blanks(b, at);
                let (name, _) = ident_at(text, j);
                (!name.is_empty()).then_some(name)
            };
            let is_class = word == "class";
            let name = def_name(word, after);
            if indent.is_empty() {
                class = None;
                if b[i] == b'@' {
                    if pending.is_none() {
                        new_chunk(&mut chunks, new, ls, Kind::Function, "", None);
                        pending = Some(chunks.len() - 1);
                    }
                } else if let Some(name) = name {
                    let kind = if is_class {
                        Kind::Class
                    } else {
                        Kind::Function
                    };
                    match pending.take() {
                        Some(p) => {
                            chunks[p].kind = kind;
                            chunks[p].name = name;
                        }
                        None => new_chunk(&mut chunks, new, ls, kind, name, None),
                    }
                    if is_class {
                        class = Some((chunks.len() - 1, None));
                    }
                } else {
                    if pending.is_some() {
                        return None;
                    }
                    new_chunk(&mut chunks, new, ls, Kind::Module, "", None);
                }
            } else if let Some((c, body)) = &mut class {
                let body = *body.get_or_insert(indent);
                if indent == body {
                    if b[i] == b'@' {
                        if pending.is_none() {
                            new_chunk(&mut chunks, new, ls, Kind::Method, "", Some(*c));
                            pending = Some(chunks.len() - 1);
                        }
                    } else if let Some(name) = name.filter(|_| !is_class) {
                        match pending.take() {
                            Some(p) => chunks[p].name = name,
                            None => new_chunk(&mut chunks, new, ls, Kind::Method, name, Some(*c)),
                        }
                    } else {
                        if pending.is_some() {
                            return None;
                        }
                        new_chunk(&mut chunks, new, ls, Kind::ClassStmt, "", Some(*c));
                    }
                } else if !indent.starts_with(body) {
                    return None;
                }
            } else if chunks.is_empty() {
                // An indented first statement: a syntax error.
                return None;
            }
        }
        let c = b[i];
        if is_ident_start(c) {
            let start = i;
            while i < b.len() && is_ident_char(b[i]) {
                i += 1;
            }
            let id = &text[start..i];
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') && is_string_prefix(id) {
                let f = id.bytes().any(|c| matches!(c | 0x20, b'f' | b't'));
                let cur = chunks.last_mut()?;
                i = skip_literal(text, i, f, &mut |id, _| cur.uses.push(id))?;
                after_dot = false;
                continue;
            }
            let cur = chunks.last_mut()?;
            cur.uses.push(id);
            if global_line
                || (after_dot || cur.kind == Kind::ClassStmt) && depth == 0 && stores_next(b, i)
            {
                cur.stores.push(id);
            }
            if !after_dot && matches!(id, "global" | "nonlocal") {
                global_line = true;
            }
            after_dot = false;
            continue;
        }
        match c {
            b'"' | b'\'' => {
                let cur = chunks.last_mut()?;
                i = skip_literal(text, i, false, &mut |id, _| cur.uses.push(id))?;
                after_dot = false;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\\' => {
                // A line continuation; anything else outside a string is a syntax error.
                match (b.get(i + 1), b.get(i + 2)) {
                    (Some(b'\n'), _) => i += 2,
                    (Some(b'\r'), Some(b'\n')) => i += 3,
                    _ => return None,
                }
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
            b'\n' if depth == 0 => line_start = true,
            b'.' => {
                after_dot = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        after_dot = false;
        i += 1;
    }
    if depth != 0 || pending.is_some() {
        return None;
    }
    let n = chunks.len();
    for k in 0..n {
        chunks[k].range.end = if k + 1 < n {
            chunks[k + 1].range.start
        } else {
            b.len()
        };
        chunks[k].uses.sort_unstable();
        chunks[k].uses.dedup();
        chunks[k].stores.sort_unstable();
        chunks[k].stores.dedup();
    }
    Some(chunks)
}

/// The identifier starting at `i` (empty if none) and the index after it.
fn ident_at(text: &str, i: usize) -> (&str, usize) {
    let b = text.as_bytes();
    if i >= b.len() || !is_ident_start(b[i]) {
        return ("", i);
    }
    let mut j = i;
    while j < b.len() && is_ident_char(b[j]) {
        j += 1;
    }
    (&text[i..j], j)
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

/// Whether what follows a name at `i` stores into it: `=` (not `==`), an augmented
/// assignment, an annotation `:`, or a `,` of a tuple of targets (over-approximated: a
/// `,` in a call's arguments at depth 0 is rare).
fn stores_next(b: &[u8], i: usize) -> bool {
    let j = skip_blanks(b, i);
    match (b.get(j), b.get(j + 1), b.get(j + 2)) {
        (Some(b'='), Some(c), _) => *c != b'=',
        (Some(b':' | b','), _, _) => true,
        (Some(b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'@'), Some(b'='), _) => true,
        (Some(b'/' | b'*' | b'<' | b'>'), Some(b'/' | b'*' | b'<' | b'>'), Some(b'=')) => true,
        _ => false,
    }
}

/// The byte ranges to parse: the parts that the `rules` need (see the module
/// documentation), merged where they touch. `None` when the scanner cannot follow the
/// text, or when nothing would be left out (the whole file is parsed as usual).
pub fn select(text: &str, file: &Scan<'_>, rules: &[&'static Rule]) -> Option<Vec<Range<usize>>> {
    let chunks = split(text)?;
    let keep = keep(text, file, &chunks, rules);
    if keep.iter().all(|&k| k) {
        return None;
    }
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (c, _) in chunks.iter().zip(&keep).filter(|(_, &k)| k) {
        match ranges.last_mut() {
            Some(r) if r.end == c.range.start => r.end = c.range.end,
            _ => ranges.push(c.range.clone()),
        }
    }
    Some(ranges)
}

/// Which parts to keep.
pub fn keep(
    text: &str,
    file: &Scan<'_>,
    chunks: &[Chunk<'_>],
    rules: &[&'static Rule],
) -> Vec<bool> {
    let n = chunks.len();
    // Who defines (or stores into) each name.
    let mut definers: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (k, c) in chunks.iter().enumerate() {
        if c.kind != Kind::Module && !c.name.is_empty() {
            definers.entry(c.name).or_default().push(k);
        }
        for &s in &c.stores {
            definers.entry(s).or_default().push(k);
        }
    }
    // Who uses each name a part is named by (its callers; a reader of an attribute
    // that a part stores into depends on the store, not the other way round).
    let named: FxHashSet<&str> = chunks
        .iter()
        .filter(|c| c.kind != Kind::Module && !c.name.is_empty())
        .map(|c| c.name)
        .collect();
    let mut users: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (k, c) in chunks.iter().enumerate() {
        for &u in &c.uses {
            if named.contains(u) {
                users.entry(u).or_default().push(k);
            }
        }
    }
    // Class members: what a kept class keeps with it.
    let mut members: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    for (k, c) in chunks.iter().enumerate() {
        if let Some(cl) = c.class {
            members.entry(cl).or_default().push(k);
        }
    }
    // The unit a part's trigger is decided for: module-level statements are one unit,
    // a class header with its class-level statements another, each function and method
    // one of its own.
    let unit = |k: usize| -> usize {
        match chunks[k].kind {
            Kind::Module => usize::MAX,
            Kind::ClassStmt => chunks[k].class.unwrap_or(k),
            _ => k,
        }
    };
    let whole_file = |s: &Scan| WHOLE_FILE_WORDS.iter().any(|w| s.word(w)) || s.backward_pass();
    let scans: Vec<Scan> = chunks
        .iter()
        .map(|c| Scan::part(&text[c.range.clone()], file))
        .collect();
    // The rules the file's prefilter lets through, and where each may find something.
    let active: Vec<fn(&Scan<'_>) -> bool> = rules
        .iter()
        .filter(|r| (r.prefilter)(file))
        .map(|r| r.parts.unwrap_or(r.prefilter))
        .collect();
    let fires = |s: &Scan| active.iter().any(|p| p(s));
    let mut module = Scan::default();
    for (k, c) in chunks.iter().enumerate() {
        if c.kind == Kind::Module {
            module.merge(&scans[k]);
        }
    }
    // The members of each unit.
    let mut units: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    for k in 0..n {
        units.entry(unit(k)).or_default().push(k);
    }
    let module_unit = units.keys().position(|&u| u == usize::MAX);
    let mut trigger = vec![false; n];
    let mut fact = vec![false; n];
    let mut seen = vec![usize::MAX; n];
    let mut stack = Vec::new();
    for (u, parts) in units.values().enumerate() {
        let mut merged = Scan::default();
        if Some(u) != module_unit {
            merged.merge_words(&module);
        }
        let mut noqa = false;
        for &k in parts {
            merged.merge(&scans[k]);
            noqa |= scans[k].mentions_noqa();
            fact[k] = whole_file(&scans[k]);
        }
        let mut hit = noqa || fires(&merged);
        if !hit {
            // With what the unit calls in this file, transitively.
            stack.clear();
            for &k in parts {
                seen[k] = u;
                stack.push(k);
            }
            while let Some(k) = stack.pop() {
                for &name in &chunks[k].uses {
                    for &d in definers.get(name).map_or(&[][..], Vec::as_slice) {
                        if seen[d] != u {
                            seen[d] = u;
                            merged.merge(&scans[d]);
                            stack.push(d);
                        }
                    }
                }
            }
            hit = fires(&merged);
        }
        if hit {
            for &k in parts {
                trigger[k] = true;
            }
        }
    }
    // The closure: what a kept part calls, what calls it, and a kept class's members.
    // Module-level statements are parsed in any case; they pull in what they call only
    // once reached (a trigger, or the caller of a kept part).
    let mut keep = vec![false; n];
    let mut work: Vec<usize> = Vec::new();
    let add = |k: usize, keep: &mut Vec<bool>, work: &mut Vec<usize>| {
        if !keep[k] {
            keep[k] = true;
            work.push(k);
        }
    };
    for (k, &t) in trigger.iter().enumerate() {
        if t {
            add(k, &mut keep, &mut work);
        }
    }
    let empty: &[usize] = &[];
    while let Some(k) = work.pop() {
        let c = &chunks[k];
        for &name in &c.uses {
            for &d in definers.get(name).map_or(empty, Vec::as_slice) {
                add(d, &mut keep, &mut work);
            }
        }
        if c.kind != Kind::Module && !c.name.is_empty() {
            for &u in users.get(c.name).map_or(empty, Vec::as_slice) {
                add(u, &mut keep, &mut work);
            }
        }
        let class = match c.kind {
            Kind::Class => Some(k),
            Kind::Method | Kind::ClassStmt => c.class,
            _ => None,
        };
        if let Some(cl) = class {
            add(cl, &mut keep, &mut work);
            let ms = members.get(&cl).map_or(empty, Vec::as_slice);
            for (idx, &m) in ms.iter().enumerate() {
                let mc = &chunks[m];
                // The first body item keeps the body non-empty.
                if idx == 0
                    || mc.kind == Kind::ClassStmt
                    || mc.name == "__init__"
                    || names::FORWARD_METHODS.contains(&mc.name)
                {
                    add(m, &mut keep, &mut work);
                }
            }
        }
    }
    // A part that names a whole-file fact is parsed for the fact (it pulls in nothing):
    // only where some part is parsed for a rule.
    let any = trigger.iter().any(|&t| t);
    for (k, c) in chunks.iter().enumerate() {
        keep[k] |= c.kind == Kind::Module;
        if !(any && fact[k]) || keep[k] {
            continue;
        }
        keep[k] = true;
        // A method needs its class around it, and the class a body.
        if let Some(cl) = c.class {
            keep[cl] = true;
            for (idx, &m) in members
                .get(&cl)
                .map_or(empty, Vec::as_slice)
                .iter()
                .enumerate()
            {
                keep[m] |= idx == 0 || chunks[m].kind == Kind::ClassStmt;
            }
        }
    }
    keep
}

/// The tree-sitter ranges of `ranges` in `text`: rows and columns counted once.
pub fn ts_ranges(text: &str, ranges: &[Range<usize>]) -> Vec<tree_sitter::Range> {
    let b = text.as_bytes();
    let mut row = 0;
    let mut line_start = 0;
    let mut at = 0;
    let mut point = |to: usize| {
        for nl in memchr::memchr_iter(b'\n', &b[at..to]) {
            row += 1;
            line_start = at + nl + 1;
        }
        at = to;
        tree_sitter::Point::new(row, to - line_start)
    };
    ranges
        .iter()
        .map(|r| {
            let start_point = point(r.start);
            let end_point = point(r.end);
            tree_sitter::Range {
                start_byte: r.start,
                end_byte: r.end,
                start_point,
                end_point,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str, &str)> {
        split(text)
            .unwrap()
            .into_iter()
            .map(|c| (c.kind, c.name, &text[c.range]))
            .collect()
    }

    #[test]
    fn splits_top_level_statements_and_methods() {
        let text = "import torch\n\n@dec(\n  1)\ndef f(x):\n    s = '''\ndef g(): pass\n'''\n    return (x +\n1)\n\
                    class M(nn.Module):\n    \"\"\"doc\"\"\"\n    n = 1\n    # c\n  # odd\n    @property\n    def a(self):\n        return self.n\n\n    async def b(self): pass\nx = f\"{f'{y}'}\" \\\n  + 1\n";
        let k = kinds(text);
        let got: Vec<(Kind, &str)> = k.iter().map(|(k, n, _)| (*k, *n)).collect();
        assert_eq!(
            got,
            vec![
                (Kind::Module, ""),
                (Kind::Function, "f"),
                (Kind::Class, "M"),
                (Kind::ClassStmt, ""),
                (Kind::ClassStmt, ""),
                (Kind::Method, "a"),
                (Kind::Method, "b"),
                (Kind::Module, ""),
            ]
        );
        assert!(k[1].2.starts_with("@dec(") && k[1].2.ends_with("1)\n"));
        assert_eq!(k.iter().map(|x| x.2).collect::<String>(), text);
        let c = split(text).unwrap();
        assert!(c[7].uses.contains(&"y") && c[7].uses.contains(&"x"));
        assert_eq!(c[4].stores, vec!["n"]);
    }

    #[test]
    fn attribute_stores_and_globals() {
        let text = "def f(self):\n    global H\n    self.net = 1\n    self.a, self.b = 2, 3\n    self.c += 1\n    x == self.d\n    H = 2\n";
        let c = split(text).unwrap();
        assert_eq!(c[0].stores, vec!["H", "a", "b", "c", "net"]);
    }

    #[test]
    fn what_it_cannot_follow_is_none() {
        for t in [
            "x = (1,\n",
            "s = 'abc\n",
            "x = '''\n",
            "a = 1\rb = 2\n",
            "class C:\n        a = 1\n    b = 2\n",
            "@dec\nx = 1\n",
            "  x = 1\n",
        ] {
            assert!(split(t).is_none(), "{t:?}");
        }
    }

    #[test]
    fn points_count_rows_and_columns() {
        let t = "ab\ncd\nef";
        let r = ts_ranges(t, &[0..3, 6..8]);
        assert_eq!(r[0].end_point, tree_sitter::Point::new(1, 0));
        assert_eq!(r[1].start_point, tree_sitter::Point::new(2, 0));
        assert_eq!(r[1].end_point, tree_sitter::Point::new(2, 2));
    }
}
