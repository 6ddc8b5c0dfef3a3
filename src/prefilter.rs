//! A cheap scan of the raw text before parsing. Parsing is the whole cost of a run, so a
//! file that no enabled rule can fire on is never parsed. Each rule declares, as a
//! predicate over this scan, what a file must contain for the rule to fire at all; the
//! predicates use the same vocabulary functions (`semantic::names`) as the semantic
//! model, so the scan can only over-approximate, never drop a finding.
//!
//! The scan is one pass over the bytes collecting identifiers (outside comments and
//! non-f strings), identifiers that follow a `.` (attributes and methods), the names of
//! `def`s, and a few line facts: loop headers that mention data, `while` loops, and
//! stores into `self.` attributes or module-level names.

use rustc_hash::FxHashSet;

use crate::semantic::names;

#[derive(Default)]
pub struct Scan<'a> {
    idents: FxHashSet<&'a str>,
    attrs: FxHashSet<&'a str>,
    defs: FxHashSet<&'a str>,
    /// A `for` header that names data or steps (`for x in train_loader:`).
    pub data_loop: bool,
    /// Any `for` header (`for start in range(0, n, batch_size):` batches data too).
    pub for_loop: bool,
    pub while_loop: bool,
    /// A store (`.append(`, `+=`, `[k] =`, `x = x + ...`) into a `self.` attribute.
    pub self_store: bool,
    /// A store into a name bound at module level or declared `global`.
    pub global_store: bool,
    /// The raw text, for the rare predicate that reads comments.
    text: &'a str,
    /// Names bound at module level or declared `global`, and the first names of the
    /// lines that store into something: kept so that a scan of one part of a file
    /// ([`Scan::part`]) can tell a store into a module-level name made in a method.
    module_names: FxHashSet<&'a str>,
    store_roots: Vec<&'a str>,
}

impl<'a> Scan<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut s = Scan {
            text,
            ..Scan::default()
        };
        s.tokens(text);
        s.lines(text);
        s
    }

    /// The scan of `part`, a piece of the file that `file` scanned (a function, a
    /// method: [`crate::chunk`]): a store into a name that the file binds at module
    /// level counts as a global store although the binding is outside the part.
    pub fn part(part: &'a str, file: &Scan<'a>) -> Self {
        let mut s = Scan::new(part);
        s.global_store |= s.store_roots.iter().any(|r| file.module_names.contains(r));
        s
    }

    /// Adds what `other` saw to this scan (the scan of a function and of the same-file
    /// functions it calls, for the chunk selection). The text stays this scan's own.
    pub fn merge(&mut self, other: &Scan<'a>) {
        self.merge_words(other);
        self.data_loop |= other.data_loop;
        self.for_loop |= other.for_loop;
        self.while_loop |= other.while_loop;
        self.self_store |= other.self_store;
        self.global_store |= other.global_store;
    }

    /// Adds the names that `other` saw, not its line facts (loops, stores): the
    /// module-level names a function may read, without the module-level loops.
    pub fn merge_words(&mut self, other: &Scan<'a>) {
        self.idents.extend(other.idents.iter().copied());
        self.attrs.extend(other.attrs.iter().copied());
        self.defs.extend(other.defs.iter().copied());
    }

    /// Whether the text mentions `noqa` in any case (a suppression comment may be there).
    /// Scans the text only when asked: only the unused-noqa rule asks.
    pub fn mentions_noqa(&self) -> bool {
        self.text
            .as_bytes()
            .windows(4)
            .any(|w| w.eq_ignore_ascii_case(b"noqa"))
    }

    /// A name, as a plain identifier or after a `.` (`model` or `self.model`).
    pub fn word(&self, name: &str) -> bool {
        self.idents.contains(name) || self.attrs.contains(name)
    }

    /// Some name (plain or after a `.`) satisfies `pred`.
    pub fn any_word(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.idents.iter().chain(self.attrs.iter()).any(|i| pred(i))
    }

    /// A backward pass may run: `backward` or `manual_backward` appears.
    pub fn backward_pass(&self) -> bool {
        names::BACKWARD_METHODS.iter().any(|w| self.word(w))
    }

    /// Some method in `methods` is called or read (`x.half`).
    pub fn any_attr(&self, methods: &[&str]) -> bool {
        methods.iter().any(|m| self.attr(m))
    }

    /// An identifier right after a `.`: a method or attribute name.
    pub fn attr(&self, name: &str) -> bool {
        self.attrs.contains(name)
    }

    pub fn any_def(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.defs.iter().any(|d| pred(d))
    }

    /// Something whose value can carry an autograd graph or be a module: a loss, a
    /// model-like name, a module class, `nn`, `from_pretrained`, a backward pass.
    pub fn graph_source(&self) -> bool {
        names::BACKWARD_METHODS
            .iter()
            .chain(names::FORWARD_METHODS)
            .chain(&[names::PRETRAINED_LOADER, "nn"])
            .any(|w| self.word(w))
            // `extractor.eval()`: a module whatever its name.
            || names::MODULE_ONLY_METHODS.iter().any(|m| self.attr(m))
            || self.any_word(|i| {
                names::is_model_name(i)
                    || names::is_model_class_name(i)
                    || names::is_loss_fn_name(i)
                    || names::is_functional_loss(i)
                    || names::is_module_base(i)
            })
    }

    /// Code that may run once per step: a loop over data or steps, a `while` loop, a
    /// backward pass or optimizer step, a per-step hook, or a `forward` that stores
    /// into something that outlives the call.
    pub fn per_step_context(&self) -> bool {
        self.data_loop
            || self.while_loop
            || self.backward_pass()
            || self.attr(names::STEP_METHOD)
            || self.any_def(|d| d != "forward" && names::is_per_step_hook(d))
            || self.defs.contains("forward") && (self.self_store || self.global_store)
    }

    fn tokens(&mut self, text: &'a str) {
        let b = text.as_bytes();
        let mut i = 0;
        let mut after_dot = false;
        let mut after_def = false;
        while i < b.len() {
            let c = b[i];
            if is_ident_start(c) {
                let start = i;
                while i < b.len() && is_ident_char(b[i]) {
                    i += 1;
                }
                let id = &text[start..i];
                // A string prefix (`f"`, `rb'`) belongs to the string that follows.
                if i < b.len() && (b[i] == b'"' || b[i] == b'\'') && is_string_prefix(id) {
                    let fstring = id.bytes().any(|c| matches!(c | 0x20, b'f' | b't'));
                    // The replacement fields of an f-string are code: their names count.
                    let (idents, attrs) = (&mut self.idents, &mut self.attrs);
                    let mut seen = |id: &'a str, dot: bool| {
                        if dot {
                            attrs.insert(id);
                        } else {
                            idents.insert(id);
                        }
                    };
                    i = skip_literal(text, i, fstring, &mut seen)
                        .unwrap_or_else(|| skip_string(b, i, fstring));
                    after_dot = false;
                    continue;
                }
                if after_dot {
                    self.attrs.insert(id);
                } else {
                    self.idents.insert(id);
                }
                if after_def {
                    self.defs.insert(id);
                }
                after_def = id == "def";
                after_dot = false;
                continue;
            }
            match c {
                b'#' => {
                    while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                        i += 1;
                    }
                    continue;
                }
                b'"' | b'\'' => {
                    i = skip_string(b, i, false);
                    after_dot = false;
                    continue;
                }
                b'.' => after_dot = true,
                b' ' | b'\t' | b'\\' | b'\n' | b'\r' => {}
                _ => {
                    after_dot = false;
                    after_def = false;
                }
            }
            i += 1;
        }
    }

    fn lines(&mut self, text: &'a str) {
        let mut module_names: FxHashSet<&str> = FxHashSet::default();
        let mut store_roots: Vec<&str> = Vec::new();
        for line in text.split(['\n', '\r']) {
            let stripped = line.trim_start();
            let indented = stripped.len() != line.len();
            if let Some(rest) = stripped
                .strip_prefix("for ")
                .or_else(|| stripped.strip_prefix("async for "))
            {
                self.for_loop = true;
                if idents_of(rest).any(names::is_data_name) {
                    self.data_loop = true;
                }
            } else if stripped.starts_with("while ") || stripped.starts_with("while(") {
                self.while_loop = true;
            } else if let Some(rest) = stripped.strip_prefix("global ") {
                module_names.extend(idents_of(rest));
            }
            let root_end = stripped
                .bytes()
                .position(|c| !is_ident_char(c))
                .unwrap_or(stripped.len());
            let root = &stripped[..root_end];
            if root.is_empty() || !is_ident_start(root.as_bytes()[0]) {
                continue;
            }
            if !indented {
                let after = stripped[root_end..].trim_start();
                let binds =
                    after.starts_with(':') || after.starts_with('=') && !after.starts_with("==");
                if binds {
                    module_names.insert(root);
                }
            }
            if is_store(stripped) {
                store_roots.push(root);
            }
        }
        self.self_store = store_roots.contains(&"self");
        self.global_store = store_roots.iter().any(|r| module_names.contains(r));
        self.module_names = module_names;
        self.store_roots = store_roots;
    }
}

/// `x.append(`, `x.extend(`, `x[k] = v`, `x += v`, `x = x + v`: the line stores into
/// what its first name refers to.
fn is_store(line: &str) -> bool {
    let grows = names::GROWTH_METHODS.iter().any(|m| {
        line.match_indices(m)
            .any(|(i, _)| i > 0 && line.as_bytes()[i - 1] == b'.')
    });
    if grows || line.contains("+=") || line.contains("-=") {
        return true;
    }
    // `x[k] = v` (not `==`)
    let b = line.as_bytes();
    if b.iter()
        .enumerate()
        .any(|(i, &c)| c == b']' && next_is_assign(&b[i + 1..]))
    {
        return true;
    }
    // `x = x + v` / `x = x - v`
    let Some(eq) = line.find('=') else {
        return false;
    };
    let (target, value) = (line[..eq].trim(), line[eq + 1..].trim_start());
    !target.is_empty()
        && !value.starts_with('=')
        && value
            .strip_prefix(target)
            .is_some_and(|r| matches!(r.trim_start().as_bytes().first(), Some(b'+' | b'-')))
}

fn next_is_assign(rest: &[u8]) -> bool {
    let rest = rest
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .map_or(&[][..], |p| &rest[p..]);
    rest.first() == Some(&b'=') && rest.get(1) != Some(&b'=')
}

fn idents_of(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()))
        .filter(|t| t.as_bytes().first().is_some_and(|&c| is_ident_start(c)))
}

pub(crate) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

pub(crate) fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// A string prefix (`r`, `b`, `f`, `rb`, `t`...), any case.
pub(crate) fn is_string_prefix(id: &str) -> bool {
    id.len() <= 2
        && id
            .bytes()
            .all(|c| matches!(c | 0x20, b'r' | b'b' | b'u' | b'f' | b't'))
}

/// Skips the string literal whose quote is at `text[i]`; returns the index after it, or
/// `None` if it does not end. The replacement fields of an f-string (or t-string) are
/// code: each name in them goes to `seen` (with whether it follows a `.`), and their
/// strings, which may reuse the quote (Python 3.12), are skipped in turn.
pub(crate) fn skip_literal<'a>(
    text: &'a str,
    i: usize,
    f: bool,
    seen: &mut dyn FnMut(&'a str, bool),
) -> Option<usize> {
    skip_literal_in(text, i, f, seen, 0)
}

/// How deep f-strings may nest in one another before the scan gives up (`None`): the
/// scan recurses once per level, and a file of 100,000 nested f-strings must not
/// overflow the stack.
const MAX_FSTRING_NESTING: u32 = 32;

fn skip_literal_in<'a>(
    text: &'a str,
    i: usize,
    f: bool,
    seen: &mut dyn FnMut(&'a str, bool),
    nest: u32,
) -> Option<usize> {
    if nest > MAX_FSTRING_NESTING {
        return None;
    }
    let b = text.as_bytes();
    let q = b[i];
    let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
    let mut j = i + if triple { 3 } else { 1 };
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'\n' if !triple => return None,
            c if c == q => {
                if !triple {
                    return Some(j + 1);
                }
                if b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q) {
                    return Some(j + 3);
                }
                j += 1;
            }
            b'{' if f => {
                if b.get(j + 1) == Some(&b'{') {
                    j += 2;
                    continue;
                }
                j = skip_field(text, j + 1, seen, nest + 1)?;
            }
            _ => j += 1,
        }
    }
    None
}

/// Skips an f-string replacement field from just after its `{` to just after its `}`.
fn skip_field<'a>(
    text: &'a str,
    mut j: usize,
    seen: &mut dyn FnMut(&'a str, bool),
    nest: u32,
) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0u32;
    let mut dot = false;
    while j < b.len() {
        let c = b[j];
        if is_ident_start(c) {
            let start = j;
            while j < b.len() && is_ident_char(b[j]) {
                j += 1;
            }
            let id = &text[start..j];
            if j < b.len() && (b[j] == b'"' || b[j] == b'\'') && is_string_prefix(id) {
                let f = id.bytes().any(|c| matches!(c | 0x20, b'f' | b't'));
                j = skip_literal_in(text, j, f, seen, nest)?;
            } else {
                seen(id, dot);
            }
            dot = false;
            continue;
        }
        dot = c == b'.';
        match c {
            b'"' | b'\'' => {
                j = skip_literal_in(text, j, false, seen, nest)?;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.checked_sub(1)?,
            b'}' => {
                if depth == 0 {
                    return Some(j + 1);
                }
                depth -= 1;
            }
            _ => {}
        }
        j += 1;
    }
    None
}

/// Skips the string literal starting at `b[i]` (a quote); returns the index after it
/// (at the end of the line for an unterminated one).
fn skip_string(b: &[u8], i: usize, fstring: bool) -> usize {
    let q = b[i];
    let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
    if fstring {
        return i + if triple { 3 } else { 1 };
    }
    let mut j = i + if triple { 3 } else { 1 };
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            c if c == q => {
                if !triple {
                    return j + 1;
                }
                if b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q) {
                    return j + 3;
                }
                j += 1;
            }
            b'\n' | b'\r' if !triple => return j,
            _ => j += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_attributes_and_defs() {
        let s = Scan::new(
            "import torch\n# model.eval() in a comment\ns = 'criterion(x)'\n\
             def evaluate(net, val_loader):\n    net.eval()\n    return f\"{net.step()}\"\n",
        );
        assert!(s.word("torch") && s.word("net") && s.word("val_loader"));
        assert!(s.attr("eval") && s.attr("step"));
        assert!(!s.word("criterion") && !s.word("model"));
        assert!(s.any_def(|d| d == "evaluate"));
    }

    #[test]
    fn f_string_fields_are_code_and_the_line_goes_on() {
        // The closing quote once opened a string that hid the rest of the line.
        let s = Scan::new("vae = load(f\"{ckpt_dir}/vae\", r=None).half()\n");
        assert!(s.word("ckpt_dir") && s.attr("half"));
        assert!(!s.word("vae") || s.word("load"));
        // Nested deeper than the scan follows: the old reading, no overflow.
        let deep = format!("y = {}x{}\n", "f\"{".repeat(10_000), "}\"".repeat(10_000));
        let _ = Scan::new(&deep);
    }

    #[test]
    fn line_facts() {
        let s =
            Scan::new("HIST = []\nclass M:\n    def forward(self, x):\n        HIST.append(x)\n");
        assert!(s.global_store && !s.self_store && !s.data_loop);
        let s = Scan::new("for step, batch in enumerate(train_loader):\n    pass\n");
        assert!(s.data_loop);
        let s = Scan::new("for layer in self.layers:\n    x = layer(x)\n");
        assert!(!s.data_loop);
        let s = Scan::new("    self.feats.append(x)\n");
        assert!(s.self_store);
    }
}
