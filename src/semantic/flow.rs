//! Control flow within a function: whether a statement runs on every path to a point,
//! and `if`/`elif`/`else` chains that cover every path.

use super::*;

impl<'a> SemanticModel<'a> {
    /// Whether `node` runs on every path that reaches byte `target`: the statement holding
    /// it stands in a block (seen through `with` blocks) that also holds `target`, before it.
    pub fn dominates(&self, node: Node<'_>, target: usize) -> bool {
        self.dominates_within(node, target, None)
    }

    /// The one walk behind [`Self::dominates`] and [`Self::dominates_under_guards`]: up
    /// from `node` to a block that holds `target`, through `with` blocks, and with
    /// `guards` (the scope to read them in) through the `if` bodies whose test also holds
    /// at `target`.
    fn dominates_within(&self, node: Node<'_>, target: usize, guards: Option<ScopeId>) -> bool {
        if node.start_byte() > target {
            return false;
        }
        let mut n = node;
        loop {
            let Some(p) = n.parent() else { return true };
            match p.kind_str() {
                "module" => return true,
                "block" => {
                    if p.byte_range().contains(&target) || p.end_byte() == target {
                        return true;
                    }
                    let Some(owner) = p.parent() else {
                        return false;
                    };
                    match (owner.kind_str(), guards) {
                        ("with_statement", _) => n = owner,
                        ("if_statement", Some(scope))
                            if owner.field("consequence").is_some_and(|c| c.id() == p.id()) =>
                        {
                            let Some(cond) = owner.field("condition") else {
                                return false;
                            };
                            if !self.guard_holds_at(cond, target, scope) {
                                return false;
                            }
                            n = owner;
                        }
                        _ => return false,
                    }
                }
                _ => n = p,
            }
        }
    }

    /// The `if` statement whose branch directly holds `node`, with the blocks of all its
    /// branches, when it has an `else` and runs on every path to `target`.
    pub(super) fn complete_if(
        &self,
        node: Node<'a>,
        target: usize,
    ) -> Option<(Node<'a>, Vec<Node<'a>>)> {
        let mut n = node;
        let block = loop {
            let p = n.parent()?;
            if p.kind_str() == "block" {
                break p;
            }
            n = p;
        };
        let mut owner = block.parent()?;
        if matches!(owner.kind_str(), "elif_clause" | "else_clause") {
            owner = owner.parent()?;
        }
        if owner.kind_str() != "if_statement" || !self.dominates(owner, target) {
            return None;
        }
        let mut arms = vec![owner.field("consequence")?];
        let mut has_else = false;
        let mut c = owner.walk();
        for ch in owner.named_children(&mut c) {
            match ch.kind_str() {
                "elif_clause" => arms.push(ch.field("consequence")?),
                "else_clause" => {
                    has_else = true;
                    arms.push(ch.field("body")?);
                }
                _ => {}
            }
        }
        has_else.then_some((owner, arms))
    }
}

impl<'a> SemanticModel<'a> {
    /// Whether `node` runs on every path to byte `target` once the `if`s that hold it
    /// are read as correlated with the target's: each `if` between `node` and a block
    /// that holds `target` tests a condition that also guards `target` (the same test,
    /// `if torch.cuda.is_available():` twice), or a flag bound only to `True`.
    pub fn dominates_under_guards(&self, node: Node<'_>, target: usize, scope: ScopeId) -> bool {
        self.dominates_within(node, target, Some(scope))
    }

    /// Whether the test `cond` holds at `target`: a flag bound only to `True`, or the
    /// same test guards an `if` whose body holds `target`.
    fn guard_holds_at(&self, cond: Node<'_>, target: usize, scope: ScopeId) -> bool {
        if cond.kind_str() == "identifier" {
            let name = self.text(cond);
            let fs = self.function_of(scope).unwrap_or(ScopeId::MODULE);
            let mut any = false;
            let all_true = [fs, ScopeId::MODULE].iter().all(|&s| {
                self.local_bindings(s, name).all(|b| {
                    any = true;
                    b.kind == BindingKind::Assign && b.value.is_some_and(|v| v.kind_str() == "true")
                })
            });
            if any && all_true {
                return true;
            }
        }
        let text = self.text(cond);
        self.enclosing_guards(target)
            .any(|c| c.id() != cond.id() && self.text(c) == text)
    }

    /// The conditions of the `if`s whose body (not an `else`) holds byte `target`,
    /// found by descending through statements from the module (walking up from a node
    /// deep in a long expression costs the depth at every step).
    fn enclosing_guards(&self, target: usize) -> impl Iterator<Item = Node<'a>> + '_ {
        let mut out = Vec::new();
        let mut n = self.root;
        while let Some(ch) = n.first_named_child_for_byte(target) {
            if ch.start_byte() > target {
                break;
            }
            let k = ch.kind_str();
            let compound = k == "block"
                || k.ends_with("_clause")
                || k == "function_definition"
                || k == "class_definition"
                || k == "decorated_definition"
                || (k.ends_with("_statement")
                    && matches!(
                        k,
                        "if_statement"
                            | "for_statement"
                            | "while_statement"
                            | "with_statement"
                            | "try_statement"
                            | "match_statement"
                    ));
            if !compound {
                break;
            }
            if k == "block"
                && n.kind_str() == "if_statement"
                && n.field("consequence").is_some_and(|c| c.id() == ch.id())
            {
                out.extend(n.field("condition"));
            }
            n = ch;
        }
        out.into_iter()
    }

    /// Whether byte `target` runs only where `key` is not `None`: inside
    /// `if key is not None:` or `if key:`.
    pub(super) fn guarded_not_none(&self, key: NameKey<'a>, scope: ScopeId, target: usize) -> bool {
        self.enclosing_guards(target).any(|c| {
            let c = unwrap_parens(c);
            let subject = match c.kind_str() {
                "identifier" | "attribute" => Some(c),
                "comparison_operator" => {
                    let mut cur = c.walk();
                    let kids: Vec<Node<'a>> = c.children(&mut cur).collect();
                    match kids.as_slice() {
                        [l, op1, op2, r]
                            if self.text(*op1) == "is"
                                && self.text(*op2) == "not"
                                && r.kind_str() == "none" =>
                        {
                            Some(*l)
                        }
                        [l, op, r] if self.text(*op) == "is not" && r.kind_str() == "none" => {
                            Some(*l)
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            subject.is_some_and(|s| self.name_key(unwrap_parens(s), scope) == Some(key))
        })
    }
}
