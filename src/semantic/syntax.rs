//! Syntax helpers over tree-sitter nodes: text, ranges, import-resolved dotted names,
//! call arguments, and the one call index by node.

use super::*;

impl<'a> SemanticModel<'a> {
    pub fn text(&self, node: Node<'_>) -> &'a str {
        self.source.get(node.byte_range()).unwrap_or("")
    }

    pub fn range(&self, node: Node<'_>) -> Range<usize> {
        node.byte_range()
    }

    /// Resolves import aliases in a dotted name (`F.cross_entropy`, `nn.Linear`, `no_grad`).
    pub fn qualified(&self, node: Node<'_>) -> Option<QualName<'a>> {
        let mut rev: [&'a str; 8] = [""; 8];
        let mut n = 0;
        let mut cur = node;
        loop {
            match cur.kind_str() {
                "attribute" => {
                    let attr = cur.field("attribute")?;
                    if n == rev.len() {
                        return None;
                    }
                    rev[n] = self.text(attr);
                    n += 1;
                    cur = cur.field("object")?;
                }
                "identifier" => {
                    if n == rev.len() {
                        return None;
                    }
                    rev[n] = self.text(cur);
                    n += 1;
                    break;
                }
                _ => return None,
            }
        }
        let mut q = QualName::default();
        let head = rev[n - 1];
        match self.imports.get(head) {
            Some(full) => {
                for s in full.segments() {
                    q.push(s);
                }
            }
            None => {
                q.push(head);
            }
        }
        for i in (0..n - 1).rev() {
            if !q.push(rev[i]) {
                return None;
            }
        }
        Some(q)
    }

    /// The method name of a call `recv.m(...)` and its receiver.
    pub fn method_call(&self, call: &Call<'a>) -> Option<(Node<'a>, &'a str)> {
        if call.function.kind_str() != "attribute" {
            return None;
        }
        let recv = call.function.field("object")?;
        let m = call.function.field("attribute")?;
        Some((recv, self.text(m)))
    }

    /// The positional arguments of a call.
    pub fn positional_args<'t>(&self, call: Node<'t>) -> impl Iterator<Item = Node<'t>> {
        let args = call.field("arguments");
        let mut cursor = args.map(|a| a.walk());
        let children: Vec<Node<'t>> = match (args, cursor.as_mut()) {
            (Some(a), Some(c)) => a
                .named_children(c)
                .filter(|n| {
                    !matches!(
                        n.kind_str(),
                        "keyword_argument" | "comment" | "list_splat" | "dictionary_splat"
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        children.into_iter()
    }

    /// Whether some argument value of a call (positional, or a keyword's value)
    /// satisfies `pred`.
    pub fn any_argument_value<'t>(
        &self,
        call: Node<'t>,
        mut pred: impl FnMut(Node<'t>) -> bool,
    ) -> bool {
        let Some(args) = call.field("arguments") else {
            return false;
        };
        let mut c = args.walk();
        let found = args.named_children(&mut c).any(|a| match a.kind_str() {
            "keyword_argument" => a.field("value").is_some_and(&mut pred),
            "comment" | "list_splat" | "dictionary_splat" => false,
            _ => pred(a),
        });
        found
    }

    /// `x` in `x.to(device).eval()`: the receiver under a chain of method calls whose
    /// names satisfy `through`.
    pub fn receiver_through<'t>(&self, expr: Node<'t>, through: impl Fn(&str) -> bool) -> Node<'t> {
        let mut v = unwrap_parens(expr);
        while let Some(recv) = (v.kind_str() == "call")
            .then(|| v.field("function"))
            .flatten()
            .filter(|f| {
                f.kind_str() == "attribute"
                    && f.field("attribute").is_some_and(|m| through(self.text(m)))
            })
            .and_then(|f| f.field("object"))
        {
            v = unwrap_parens(recv);
        }
        v
    }

    /// A keyword argument's value.
    pub fn keyword_arg<'t>(&self, call: Node<'t>, name: &str) -> Option<Node<'t>> {
        let args = call.field("arguments")?;
        let mut c = args.walk();
        let found = args.named_children(&mut c).find(|n| {
            n.kind_str() == "keyword_argument"
                && n.field("name").map(|k| self.text(k)) == Some(name)
        });
        found.and_then(|n| n.field("value"))
    }

    /// The index of a call node in `calls`.
    pub fn call_index(&self, node: Node<'_>) -> Option<CallId> {
        self.call_ids.get(&node.id()).copied()
    }

    /// 1-based line of a node.
    pub fn line_of(&self, node: Node<'_>) -> usize {
        node.start_position().row + 1
    }
}

/// Field access by name without tree-sitter's string search over every field name on
/// each call: the ids are looked up once per process.
pub trait NodeExt<'t> {
    fn field(&self, name: &'static str) -> Option<Node<'t>>;
    /// The node's kind, as `Node::kind` gives it, from a table indexed by kind id:
    /// `Node::kind` asks the grammar for the name and checks it as UTF-8 on every call,
    /// a few percent of the whole run since the model asks for kinds everywhere.
    fn kind_str(&self) -> &'t str;
}

static KIND_NAMES: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let lang: &'static tree_sitter::Language =
        Box::leak(Box::new(tree_sitter_python::LANGUAGE.into()));
    (0..lang.node_kind_count() as u16)
        .map(|id| lang.node_kind_for_id(id).unwrap_or(""))
        .collect()
});

static FIELD_IDS: std::sync::LazyLock<FxHashMap<&'static str, u16>> =
    std::sync::LazyLock::new(|| {
        // Leaked once so the field names (static in the grammar) can be keys.
        let lang: &'static tree_sitter::Language =
            Box::leak(Box::new(tree_sitter_python::LANGUAGE.into()));
        (1..=lang.field_count() as u16)
            .filter_map(|id| lang.field_name_for_id(id).map(|n| (n, id)))
            .collect()
    });

impl<'t> NodeExt<'t> for Node<'t> {
    #[inline]
    fn field(&self, name: &'static str) -> Option<Node<'t>> {
        let id = *FIELD_IDS.get(name)?;
        self.child_by_field_id(id)
    }

    #[inline]
    fn kind_str(&self) -> &'t str {
        match KIND_NAMES.get(self.kind_id() as usize) {
            Some(&name) if !name.is_empty() => name,
            // ERROR and other built-in symbols lie outside the table.
            _ => self.kind(),
        }
    }
}

/// Steps through wrappers that don't change a value: parentheses.
pub fn unwrap_parens(mut node: Node<'_>) -> Node<'_> {
    while node.kind_str() == "parenthesized_expression" {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

impl SemanticModel<'_> {
    /// An expression for a one-line message: calls shortened to `f(...)` through
    /// chains (`AutoModel.from_pretrained(...).to(...)`), other text as written; a
    /// chain longer than a few links starts with `...`.
    pub fn short_text(&self, node: Node<'_>) -> String {
        let mut links: Vec<String> = Vec::new();
        let mut n = unwrap_parens(node);
        let head = loop {
            if links.len() >= 4 {
                break "...".to_owned();
            }
            let f = match n.field("function") {
                Some(f) if n.kind_str() == "call" => f,
                _ => break self.text(n).to_owned(),
            };
            let args = match n.field("arguments") {
                Some(a) if a.named_child_count() > 0 => "(...)",
                _ => "()",
            };
            match (f.kind_str(), f.field("object"), f.field("attribute")) {
                ("attribute", Some(o), Some(a)) => {
                    links.push(format!(".{}{args}", self.text(a)));
                    n = unwrap_parens(o);
                }
                _ => break format!("{}{args}", self.text(f)),
            }
        };
        links.iter().rev().fold(head, |acc, l| acc + l)
    }
}

impl<'a> SemanticModel<'a> {
    /// For `acc = torch.cat((acc, x))` (also `torch.concat`, `torch.concatenate`,
    /// `torch.hstack`, `torch.vstack`, the list spelled with brackets, `dim=`): the other
    /// pieces joined onto the name's own previous value. Growth, like an append: the
    /// new value holds all the old pieces and their graphs.
    pub fn concatenated_onto_self(&self, a: &Assignment<'a>) -> Vec<Node<'a>> {
        let mut pieces = Vec::new();
        if a.op != AssignOp::Plain {
            return pieces;
        }
        let target = unwrap_parens(a.target);
        if !matches!(target.kind_str(), "identifier" | "attribute") {
            return pieces;
        }
        let v = unwrap_parens(a.value);
        if v.kind_str() != "call" {
            return pieces;
        }
        let joins = v
            .field("function")
            .and_then(|f| self.qualified(f))
            .is_some_and(|q| {
                q.is_torch()
                    && q.segments().len() == 2
                    && matches!(
                        q.last(),
                        Some("cat" | "concat" | "concatenate" | "hstack" | "vstack")
                    )
            });
        let Some(seq) = joins
            .then(|| self.positional_args(v).next())
            .flatten()
            .map(unwrap_parens)
            .filter(|s| matches!(s.kind_str(), "tuple" | "list"))
        else {
            return pieces;
        };
        let name = self.text(target);
        let mut cursor = seq.walk();
        let mut itself = false;
        for item in seq.named_children(&mut cursor) {
            if self.text(unwrap_parens(item)) == name {
                itself = true;
            } else {
                pieces.push(item);
            }
        }
        if !itself {
            pieces.clear();
        }
        pieces
    }
}
