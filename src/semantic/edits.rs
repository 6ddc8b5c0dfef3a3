//! The syntax of fixes: the statement around a node, where its line starts and how it
//! is indented, the file's indentation unit, inserting a line before a statement,
//! wrapping a statement in a `with` block (re-indented exactly), and how this file
//! spells a name of `torch` (`torch.no_grad`, `t.no_grad`, or `no_grad` imported by
//! name). Rules build their fixes from these; edits are in bytes of the source and
//! write `\n` (the engine keeps a file's CRLF).

use super::*;
use crate::fix::Edit;

/// How many levels `statement_of` climbs.
const MAX_CLIMB: usize = 8;

impl<'a> SemanticModel<'a> {
    /// The statement that holds `node` (itself, if it is one): the node whose parent
    /// is a block or the module; `None` when it is more than a few levels up (a fix
    /// deep inside an expression is not worth it, and tree-sitter finds a parent by
    /// walking down from the root, so climbing far in a deep tree is quadratic).
    pub fn statement_of<'t>(&self, node: Node<'t>) -> Option<Node<'t>> {
        let mut n = node;
        for _ in 0..MAX_CLIMB {
            let p = n.parent()?;
            if matches!(p.kind_str(), "block" | "module") {
                return Some(n);
            }
            n = p;
        }
        None
    }

    /// The byte offset where the line holding `offset` starts.
    pub fn line_start_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.source.len());
        self.source.as_bytes()[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
    }

    /// Whether only blanks precede `node` on its line.
    pub fn starts_line(&self, node: Node<'_>) -> bool {
        let s = self.line_start_of(node.start_byte());
        self.source
            .get(s..node.start_byte())
            .is_some_and(|pre| pre.bytes().all(|b| b == b' ' || b == b'\t'))
    }

    /// The indentation of the line holding `offset`.
    pub fn indent_at(&self, offset: usize) -> &'a str {
        let s = self.line_start_of(offset);
        let rest = &self.source[s..];
        &rest[..rest.len() - rest.trim_start_matches([' ', '\t']).len()]
    }

    /// The file's indentation unit as the code around `stmt` uses it: what its own
    /// block (or the first indented block of the file) adds to the indentation of the
    /// line that opens it; four spaces when nothing in the file says.
    pub fn indent_unit(&self, stmt: Node<'_>) -> String {
        if let Some(u) = self.block_indent_unit(stmt) {
            return u;
        }
        self.memo
            .indent_unit
            .get_or_init(|| self.file_indent_unit(stmt))
            .clone()
    }

    /// What the block of `compound` adds to the indentation of the line that opens it,
    /// when its body starts on a line of its own.
    fn block_indent_unit(&self, compound: Node<'_>) -> Option<String> {
        let body = compound
            .field("body")
            .or_else(|| compound.field("consequence"))?;
        let first = body.named_child(0)?;
        if first.start_position().row == compound.start_position().row {
            return None;
        }
        let outer = self.indent_at(compound.start_byte());
        let inner = self.indent_at(first.start_byte());
        inner
            .strip_prefix(outer)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
    }

    /// The indentation unit of the first block of the file that shows one.
    fn file_indent_unit(&self, stmt: Node<'_>) -> String {
        // The first block of the file that says.
        let mut stack = vec![self.root];
        let mut seen = 0;
        while let Some(n) = stack.pop() {
            seen += 1;
            if seen > 100_000 {
                break;
            }
            if n.field("body").is_some() {
                if let Some(u) = self.block_indent_unit(n) {
                    return u;
                }
            }
            let mut c = n.walk();
            let children: Vec<Node<'_>> = n.named_children(&mut c).collect();
            stack.extend(children.into_iter().rev());
        }
        if self.indent_at(stmt.start_byte()).contains('\t') {
            "\t".to_owned()
        } else {
            "    ".to_owned()
        }
    }

    /// An edit that puts `line` on a line of its own just before the statement `stmt`,
    /// at its indentation; `None` when the statement does not start its line
    /// (`for x in xs: step(x)`).
    pub fn insert_line_before(&self, stmt: Node<'_>, line: &str) -> Option<Edit> {
        if !self.starts_line(stmt) {
            return None;
        }
        let at = self.line_start_of(stmt.start_byte());
        Some(Edit::insert(
            at,
            format!("{}{line}\n", self.indent_at(stmt.start_byte())),
        ))
    }

    /// The edits that wrap the statement `stmt` in `header` (`with torch.no_grad():`):
    /// the header at the statement's indentation, and one more indentation unit at the
    /// start of each of its lines, except blank lines and lines that continue a string
    /// (their text is the string's). `None` when the statement does not start its line
    /// or shares its last line with code after it.
    pub fn wrap_in(&self, stmt: Node<'_>, header: &str) -> Option<Vec<Edit>> {
        if !self.starts_line(stmt) {
            return None;
        }
        let end = stmt.end_byte();
        let after = &self.source[end..];
        let rest_of_line = &after[..after.find('\n').unwrap_or(after.len())];
        let trailing = rest_of_line.trim_start_matches([' ', '\t', '\r']);
        if !(trailing.is_empty() || trailing.starts_with('#')) {
            return None;
        }
        let unit = self.indent_unit(stmt);
        let start = self.line_start_of(stmt.start_byte());
        let indent = self.indent_at(stmt.start_byte());
        let mut edits = vec![Edit::insert(start, format!("{indent}{header}\n"))];
        let mut line = start;
        while line < end {
            let next = self.source[line..]
                .find('\n')
                .map_or(self.source.len(), |i| line + i + 1);
            let text = &self.source[line..next];
            let blank = text.trim_matches([' ', '\t', '\r', '\n']).is_empty();
            if !blank && !self.inside_string(line) {
                edits.push(Edit::insert(line, unit.clone()));
            }
            line = next;
        }
        Some(edits)
    }

    /// Whether `offset` lies inside a string literal that started before it (a line of
    /// a triple-quoted string).
    fn inside_string(&self, offset: usize) -> bool {
        let Some(mut n) = self.root.descendant_for_byte_range(offset, offset) else {
            return false;
        };
        // The innermost node at a line start inside a string is its content, a level or
        // two below the string.
        for _ in 0..3 {
            if n.kind_str() == "string" && n.start_byte() < offset && offset < n.end_byte() {
                return true;
            }
            match n.parent() {
                Some(p) => n = p,
                None => return false,
            }
        }
        false
    }

    /// How this file spells `torch.<attr>`: `no_grad` when imported by name
    /// (`from torch import no_grad`), else through the name `torch` is imported as
    /// (`torch.no_grad`, `t.no_grad`); `None` when the file imports neither.
    pub fn torch_spelling(&self, attr: &str) -> Option<String> {
        if let Some(s) = self.memo.torch_spelling.borrow().get(attr) {
            return s.clone();
        }
        let s = self.compute_torch_spelling(attr);
        self.memo
            .torch_spelling
            .borrow_mut()
            .insert(attr.to_owned(), s.clone());
        s
    }

    fn compute_torch_spelling(&self, attr: &str) -> Option<String> {
        let mut by_name: Option<&str> = None;
        let mut module: Option<&str> = None;
        for (&local, q) in &self.imports {
            let segs = q.segments();
            if segs == ["torch", attr] && by_name.is_none_or(|b| local < b) {
                by_name = Some(local);
            }
            if segs == ["torch"]
                && module.is_none_or(|m| local == "torch" || (m != "torch" && local < m))
            {
                module = Some(local);
            }
        }
        // Shadowed names (a parameter called `torch`) are not worth the risk.
        by_name
            .map(str::to_owned)
            .or_else(|| module.map(|m| format!("{m}.{attr}")))
    }

    /// An edit that adds `import torch` to a file that does not import it: on a line of
    /// its own before the first import statement of the module (after its docstring and
    /// `from __future__` imports); `None` without one.
    pub fn import_torch(&self) -> Option<Edit> {
        let mut c = self.root.walk();
        let first = self.root.named_children(&mut c).find(|n| {
            matches!(n.kind_str(), "import_statement" | "import_from_statement")
                && !self.text(*n).starts_with("from __future__")
        })?;
        self.insert_line_before(first, "import torch")
    }

    /// The edits that call `method` on the value of `expr`: `loss` -> `loss.item()`,
    /// `loss * n` -> `(loss * n).item()`.
    pub fn call_on(&self, expr: Node<'_>, method: &str) -> Vec<Edit> {
        let primary = matches!(
            expr.kind_str(),
            "identifier" | "attribute" | "call" | "subscript" | "parenthesized_expression"
        );
        if primary {
            vec![Edit::insert(expr.end_byte(), method.to_owned())]
        } else {
            vec![
                Edit::insert(expr.start_byte(), "("),
                Edit::insert(expr.end_byte(), format!("){method}")),
            ]
        }
    }

    /// The edit that removes the conversion call `call` (`recv.to(...)`, `recv.half()`)
    /// from the code, leaving the value of its receiver: the link is cut from a chain
    /// (`model.half().eval()` -> `model.eval()`); a statement that is then only the
    /// receiver (`model.half()`, `model = model.half()`) is deleted with its line.
    /// `None` when the statement is alone in its block (deleting it would leave the
    /// block empty) or shares its line with other code.
    pub fn remove_call(&self, call: Node<'_>) -> Option<Edit> {
        let f = call
            .field("function")
            .filter(|f| f.kind_str() == "attribute")?;
        let recv = f.field("object")?;
        let whole = |n: Node<'_>| unwrap_parens(n).id() == call.id();
        let recv_plain = matches!(unwrap_parens(recv).kind_str(), "identifier" | "attribute");
        let cut = Edit::delete(recv.end_byte()..call.end_byte());
        // A link of a chain (`f(x).half()`): never a whole statement to delete.
        if !recv_plain {
            return Some(cut);
        }
        let stmt = self.statement_of(call)?;
        let first = stmt
            .named_child(0)
            .filter(|_| stmt.kind_str() == "expression_statement");
        let bare = first.is_some_and(whole) && recv_plain;
        // `model = model.half()`
        let rebind = first
            .filter(|a| a.kind_str() == "assignment")
            .is_some_and(|a| {
                a.field("right").is_some_and(whole)
                    && a.field("left")
                        .is_some_and(|l| self.text(l) == self.text(unwrap_parens(recv)))
            });
        let useless = bare || rebind;
        if !useless {
            return Some(cut);
        }
        self.delete_statement(stmt)
    }

    /// The edit that deletes the statement `stmt` with its line (a trailing comment
    /// included); `None` when it is alone in its block or shares its line.
    pub fn delete_statement(&self, stmt: Node<'_>) -> Option<Edit> {
        let block = stmt.parent()?;
        // Comments are children of the block too (a trailing `# ...` on the statement's
        // own line): only statements keep the block non-empty.
        // Two are enough to know: counting all of a module's statements for each of
        // its findings made a file of thousands of them quadratic.
        let mut c = block.walk();
        let statements = block
            .named_children(&mut c)
            .filter(|n| n.kind_str() != "comment")
            .take(2)
            .count();
        if block.kind_str() == "block" && statements <= 1 {
            return None;
        }
        if !self.starts_line(stmt) {
            return None;
        }
        let end = stmt.end_byte();
        let after = &self.source[end..];
        let eol = after.find('\n').map_or(self.source.len(), |i| end + i + 1);
        let rest = self.source[end..eol].trim_start_matches([' ', '\t', '\r', '\n']);
        if !(rest.is_empty() || rest.starts_with('#')) {
            return None;
        }
        Some(Edit::delete(self.line_start_of(stmt.start_byte())..eol))
    }

    /// Whether the name `name` is not read or written anywhere between the byte offsets
    /// `from` and `to` of its function (or module): nothing in between can have changed
    /// what it refers to, or added to it.
    pub fn untouched_between(&self, name: &str, scope: ScopeId, from: usize, to: usize) -> bool {
        let within = self
            .function_of(scope)
            .map_or(self.root, |f| self.scope(f).node);
        let mentions = self.mentions_in(within);
        if !mentions.complete {
            return false;
        }
        let Some(at) = mentions.names.get(name) else {
            return true;
        };
        // In source order: the first mention at or after `from`.
        let i = at.partition_point(|n| n.start_byte() < from);
        at.get(i).is_none_or(|n| n.end_byte() > to)
    }
}
