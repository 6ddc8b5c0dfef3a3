//! Models written as bare tensors: `W = torch.randn(n, m, requires_grad=True)`, or a
//! list of tensors switched on by hand (`for p in parameters: p.requires_grad = True`),
//! as from-scratch tutorials and lecture notebooks build a network. A computation on
//! such a tensor records a graph just as a module's forward does, so evaluation and
//! sampling code that runs one with autograd on has the cost of a forward.

use rustc_hash::FxHashSet;
use tree_sitter::Node;

use super::*;

/// How deep [`SemanticModel::raw_graph`] follows expressions and bindings.
const MAX_DEPTH: u32 = 24;

/// Links of a read chain that give no graph back: `W.data`, `W.grad`, `W.shape`,
/// `h.detach()`, `loss.item()`.
const DETACHING: &[&str] = &[
    "data",
    "grad",
    "shape",
    "dtype",
    "device",
    "requires_grad",
    "is_leaf",
    "detach",
    "item",
    "tolist",
    "numpy",
    "size",
    "dim",
    "numel",
    "ndim",
    "grad_fn",
];

/// Methods of a tensor that compute nothing new from it or that train, beyond the
/// [`DETACHING`] links.
const NOT_COMPUTE: &[&str] = &[
    "backward",
    "detach_",
    "requires_grad_",
    "retain_grad",
    "register_hook",
    "zero_",
    "fill_",
    "copy_",
    "data_ptr",
];

impl<'a> SemanticModel<'a> {
    /// The bindings of names that hold a tensor made trainable by hand: bound to a
    /// constructor with `requires_grad=True` (or a `.requires_grad_()` chain, or
    /// `nn.Parameter(...)`), or switched on afterwards (`W.requires_grad = True`,
    /// `W.requires_grad_()`, directly or through a loop over a list of such names).
    pub fn raw_trainable(&self) -> &FxHashSet<BindingId> {
        self.memo.raw_trainable.get_or_init(|| {
            let mut out = FxHashSet::default();
            for b in self.bindings.ids() {
                let bd = &self.bindings[b];
                if bd.kind == BindingKind::Assign
                    && bd.index.is_none()
                    && bd.value.is_some_and(|v| self.builds_trainable(v))
                {
                    out.insert(b);
                }
            }
            // Switched on after the fact: `X.requires_grad = True`.
            for &a in self.grad_attribute_assignments() {
                let asg = &self.assignments[a];
                let t = unwrap_parens(asg.target);
                if t.field("attribute")
                    .is_some_and(|x| self.text(x) == "requires_grad")
                    && self.text(asg.value) == "True"
                {
                    if let Some(o) = t.field("object") {
                        self.switched_on(o, asg.site, &mut out);
                    }
                }
            }
            // `X.requires_grad_()` / `X.requires_grad_(True)` as a statement.
            for i in self.calls.ids() {
                let c = &self.calls[i];
                if let Some((recv, "requires_grad_")) = self.method_call(c) {
                    let on = self
                        .positional_args(c.node)
                        .next()
                        .is_none_or(|a| self.text(a) == "True");
                    if on
                        && c.node
                            .parent()
                            .is_some_and(|p| p.kind_str() == "expression_statement")
                    {
                        self.switched_on(recv, c.site, &mut out);
                    }
                }
            }
            out
        })
    }

    /// A value expression that builds a trainable tensor.
    fn builds_trainable(&self, v: Node<'_>) -> bool {
        let v = unwrap_parens(v);
        if v.kind_str() != "call" {
            return false;
        }
        if self
            .keyword_arg(v, "requires_grad")
            .is_some_and(|k| self.text(k) == "True")
        {
            return true;
        }
        let Some(f) = v.field("function") else {
            return false;
        };
        if f.kind_str() == "attribute"
            && f.field("attribute")
                .is_some_and(|a| self.text(a) == "requires_grad_")
        {
            return self
                .positional_args(v)
                .next()
                .is_none_or(|a| self.text(a) == "True");
        }
        self.qualified(f)
            .is_some_and(|q| q.is_torch() && q.last() == Some("Parameter"))
    }

    /// Records the bindings that `x` (a name, or the target of a loop over a list of
    /// names) refers to at `site` as trainable.
    fn switched_on(&self, x: Node<'_>, site: Site, out: &mut FxHashSet<BindingId>) {
        let x = unwrap_parens(x);
        if x.kind_str() != "identifier" {
            return;
        }
        let Some(b) = self.resolve(x, site, x.start_byte()) else {
            return;
        };
        let bd = &self.bindings[b];
        if bd.kind != BindingKind::ForTarget {
            out.insert(b);
            return;
        }
        // `for p in [W1, b1]:` or `for p in parameters:` with `parameters = [W1, b1]`.
        let Some(mut list) = bd.value.map(unwrap_parens) else {
            return;
        };
        let mut list_site = bd.site;
        if list.kind_str() == "identifier" {
            let Some(lb) = self.resolve(list, bd.site, list.start_byte()) else {
                return;
            };
            let lb = &self.bindings[lb];
            match lb.value.map(unwrap_parens) {
                Some(v) if lb.kind == BindingKind::Assign && lb.index.is_none() => {
                    list = v;
                    list_site = lb.site;
                }
                _ => return,
            }
        }
        if !matches!(list.kind_str(), "list" | "tuple") {
            return;
        }
        let mut cur = list.walk();
        for e in list.named_children(&mut cur) {
            if e.kind_str() == "identifier" {
                if let Some(eb) = self.resolve(e, list_site, e.start_byte()) {
                    out.insert(eb);
                }
            }
        }
    }

    /// Whether `e`, read at `site`, computes on a tensor made trainable by hand (and so
    /// carries its graph): `emb.view(-1, 30) @ W1 + b1`, `C[X]`, a name bound to one.
    pub fn raw_graph(&self, e: Node<'_>, site: Site) -> bool {
        !self.raw_trainable().is_empty() && self.raw_graph_at(e, site, 0)
    }

    fn raw_graph_at(&self, e: Node<'_>, site: Site, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let e = unwrap_parens(e);
        match e.kind_str() {
            "identifier" => {
                let Some(b) = self.resolve(e, site, e.start_byte()) else {
                    return false;
                };
                if self.raw_trainable().contains(&b) {
                    return true;
                }
                if let Some(&known) = self.memo.raw_bindings.borrow().get(&b) {
                    return known;
                }
                let bd = &self.bindings[b];
                let raw = match (bd.kind, bd.value) {
                    (BindingKind::Assign | BindingKind::Augmented, Some(v))
                        if bd.index.is_none() =>
                    {
                        self.raw_graph_at(v, bd.site, depth + 1)
                    }
                    _ => false,
                };
                // Kept even where the depth limit cut it short: asked again, the same
                // chain would be walked once per read.
                self.memo.raw_bindings.borrow_mut().insert(b, raw);
                raw
            }
            "attribute" => {
                let detaching = e
                    .field("attribute")
                    .is_some_and(|a| DETACHING.contains(&self.text(a)));
                !detaching
                    && e.field("object")
                        .is_some_and(|o| self.raw_graph_at(o, site, depth + 1))
            }
            "subscript" => e
                .field("value")
                .is_some_and(|v| self.raw_graph_at(v, site, depth + 1)),
            "call" => {
                let Some(f) = e.field("function") else {
                    return false;
                };
                if f.kind_str() == "attribute" {
                    if f.field("attribute")
                        .is_some_and(|a| DETACHING.contains(&self.text(a)))
                    {
                        return false;
                    }
                    if f.field("object")
                        .is_some_and(|o| self.raw_graph_at(o, site, depth + 1))
                    {
                        return true;
                    }
                }
                // Torch functions of a trainable tensor (`torch.tanh(h @ W)`).
                self.qualified(f).is_some_and(|q| q.is_torch())
                    && self
                        .positional_args(e)
                        .any(|a| self.raw_graph_at(a, site, depth + 1))
            }
            "binary_operator" | "unary_operator" => {
                let mut cur = e.walk();
                let kids: Vec<Node<'_>> = e.named_children(&mut cur).collect();
                kids.into_iter()
                    .any(|k| self.raw_graph_at(k, site, depth + 1))
            }
            _ => false,
        }
    }

    /// Whether a call computes on a tensor made trainable by hand: a torch function or
    /// a tensor method with one as an argument or receiver (`torch.tanh(x @ W1 + b1)`,
    /// `logits.exp()` on such a result). Where a model is bare tensors, such a call is
    /// its forward.
    pub fn computes_on_raw_trainable(&self, call: CallId) -> bool {
        if self.raw_trainable().is_empty() {
            return false;
        }
        if self.backward_at(call).is_some() {
            return false;
        }
        let c = &self.calls[call];
        // `torch.autograd.grad(loss, [W])`, `torch.autograd.backward(...)`: training.
        if self
            .qualified(c.function)
            .is_some_and(|q| q.is_torch() && q.has_module("autograd"))
        {
            return false;
        }
        if let Some((recv, m)) = self.method_call(c) {
            if NOT_COMPUTE.contains(&m) || DETACHING.contains(&m) {
                return false;
            }
            // `z.to(device)` as a statement: a moved copy thrown away, nothing computed.
            if matches!(
                m,
                "to" | "cuda" | "cpu" | "float" | "half" | "double" | "type"
            ) && c
                .node
                .parent()
                .is_some_and(|p| p.kind_str() == "expression_statement")
            {
                return false;
            }
            if self.raw_graph_at(recv, c.site, 0) {
                return true;
            }
        }
        self.qualified(c.function).is_some_and(|q| q.is_torch())
            && self
                .positional_args(c.node)
                .any(|a| self.raw_graph_at(a, c.site, 0))
    }
}
