//! Scopes and names: the enclosing function and class of a scope, module classes, and
//! the bindings a name refers to.

use super::*;

impl<'a> SemanticModel<'a> {
    pub fn scope(&self, id: ScopeId) -> &Scope<'a> {
        &self.scopes[id]
    }

    pub fn loop_(&self, id: LoopId) -> &Loop<'a> {
        &self.loops[id]
    }

    /// The nearest enclosing function scope of `scope` (itself if it is one).
    pub fn function_of(&self, scope: ScopeId) -> Option<ScopeId> {
        let mut s = Some(scope);
        while let Some(id) = s {
            if self.scope(id).is_function() {
                return Some(id);
            }
            s = self.scope(id).parent;
        }
        None
    }

    /// The class of the method that `scope` is (or is nested in).
    pub fn class_of(&self, scope: ScopeId) -> Option<ScopeId> {
        let mut s = Some(scope);
        while let Some(id) = s {
            if let Some(c) = self.scope(id).class {
                return Some(c);
            }
            s = self.scope(id).parent;
        }
        None
    }

    /// The same-file function or method that a call resolves to.
    pub fn callee(&self, call: CallId) -> Option<ScopeId> {
        self.callees.get(call).copied().flatten()
    }

    /// The same-file calls that resolve to function `f`.
    pub fn callers(&self, f: ScopeId) -> &[CallId] {
        &self.callers[f]
    }

    /// Whether the file holds test cases a test runner collects: a `test_*` function
    /// at module level or in a `Test*` class, a `unittest.TestCase` subclass, or an
    /// import of `pytest`/`unittest`. A file named like a test (`feature_extraction_test.py`,
    /// `model_test.py`) that holds none is a script (an evaluation run, a demo), and
    /// its `test()` is the evaluation it is named for.
    pub fn defines_test_cases(&self) -> bool {
        let runner = self
            .imports
            .values()
            .any(|q| matches!(q.first(), Some("pytest" | "unittest")));
        runner
            || self.scopes.iter().any(|s| {
                let Some(parent) = s.parent else { return false };
                let top = self.scope(parent).kind == ScopeKind::Module;
                match s.kind {
                    ScopeKind::Function => {
                        // In a module-level class of any name: unittest mixins
                        // (`ModelTesterMixin.test_save_load`) hold test cases too.
                        s.name.starts_with("test_")
                            && (top
                                || (self.scope(parent).kind == ScopeKind::Class
                                    && self
                                        .scope(parent)
                                        .parent
                                        .is_some_and(|g| self.scope(g).kind == ScopeKind::Module)))
                    }
                    ScopeKind::Class => {
                        top && (s.name.starts_with("Test")
                            || s.bases.iter().any(|b| self.text(*b).ends_with("TestCase")))
                    }
                    _ => false,
                }
            })
    }

    /// A class that is an `nn.Module` by one of its bases (same-file bases followed).
    pub fn is_module_class(&self, class: ScopeId) -> bool {
        // A class that defines `forward` is a module whatever its (other-file) bases;
        // one with no base but `object` is plain Python (a from-scratch perceptron).
        let plain = self
            .scope(class)
            .bases
            .iter()
            .all(|b| self.text(*b) == "object");
        self.functions.contains_key(&(class, "forward")) && !plain
            || self.class_is(class, 0, &|name| names::is_module_base(name))
    }

    fn class_is(&self, class: ScopeId, depth: u32, pred: &dyn Fn(&str) -> bool) -> bool {
        if depth > 16 {
            return false;
        }
        self.scope(class).bases.iter().any(|b| {
            let q = self.qualified(*b);
            let last = q.and_then(|q| q.last()).unwrap_or("");
            pred(last)
                || self
                    .classes
                    .get(last)
                    .is_some_and(|&c| c != class && self.class_is(c, depth + 1, pred))
        })
    }

    /// The default value written for parameter `name` of the function `scope`
    /// (`max_seq_length: int = 128`), if it has one.
    pub fn parameter_default(&self, scope: ScopeId, name: &str) -> Option<Node<'a>> {
        let params = self.scope(scope).node.field("parameters")?;
        let mut cursor = params.walk();
        let found = params.named_children(&mut cursor).find(|p| {
            matches!(
                p.kind_str(),
                "default_parameter" | "typed_default_parameter"
            ) && p.field("name").is_some_and(|n| self.text(n) == name)
        });
        found.and_then(|p| p.field("value"))
    }

    /// Whether the call runs a module's forward through a torch function that takes
    /// the module as an argument: `nn.parallel.data_parallel(net, inputs, gpus)`.
    pub fn is_functional_forward(&self, call: &Call<'a>) -> bool {
        self.qualified(call.function)
            .is_some_and(|q| q.is_torch() && names::is_functional_forward(&q))
            && self
                .positional_args(call.node)
                .next()
                .is_some_and(|m| self.value(m, call.site) == Value::Module)
    }

    /// Every binding of the local `name` in `scope`, in source order.
    pub fn local_bindings(
        &self,
        scope: ScopeId,
        name: &'a str,
    ) -> impl Iterator<Item = &Binding<'a>> + '_ {
        self.names
            .get(&NameKey::Local(scope, name))
            .into_iter()
            .flatten()
            .map(|&b| &self.bindings[b])
    }

    /// The methods named `name` of every class of the file, in definition order: what
    /// a call on a receiver of unknown class may run. Indexed once, so that a query per
    /// call does not scan every scope of the file.
    pub fn methods_named(&self, name: &str) -> &[ScopeId] {
        self.memo
            .methods_by_name
            .get_or_init(|| {
                let mut by_name: FxHashMap<&'a str, Vec<ScopeId>> = FxHashMap::default();
                for (id, s) in self.scopes.iter_enumerated() {
                    if s.is_function() && s.class.is_some() {
                        by_name.entry(s.name).or_default().push(id);
                    }
                }
                by_name
            })
            .get(name)
            .map_or(&[], Vec::as_slice)
    }

    /// The identifier nodes spelled `name` that start in `range` (bytes), in source
    /// order. Indexed once per file, so that a question about the later reads of a name
    /// costs the reads of that name, not a walk of the rest of the file.
    pub fn identifiers_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'a>] {
        let all = self
            .memo
            .identifiers
            .get_or_init(|| {
                let mut by_name: FxHashMap<&'a str, Vec<Node<'a>>> = FxHashMap::default();
                let mut cursor = self.root.walk();
                'walk: loop {
                    let n = cursor.node();
                    if n.is_named() && n.kind_str() == "identifier" {
                        by_name.entry(self.text(n)).or_default().push(n);
                    }
                    if cursor.goto_first_child() {
                        continue;
                    }
                    while !cursor.goto_next_sibling() {
                        if !cursor.goto_parent() {
                            break 'walk;
                        }
                    }
                }
                by_name
            })
            .get(name)
            .map_or(&[][..], Vec::as_slice);
        let lo = all.partition_point(|n| n.start_byte() < range.start);
        let hi = all.partition_point(|n| n.start_byte() < range.end);
        &all[lo..hi.max(lo)]
    }

    /// Whether `expr` at `site` holds one of the parameters of function `f`, as given:
    /// the parameter itself, or a local bound to it (`out = tokens`).
    pub fn holds_parameter(&self, expr: Node<'_>, site: Site, f: ScopeId) -> bool {
        let e = unwrap_parens(expr);
        if e.kind_str() != "identifier" {
            return false;
        }
        let params = &self.scope(f).params;
        params.contains(&self.text(e))
            || self.binding_of(e, site).is_some_and(|b| {
                b.kind == BindingKind::Assign
                    && b.index.is_none()
                    && b.value.map(unwrap_parens).is_some_and(|v| {
                        v.kind_str() == "identifier" && params.contains(&self.text(v))
                    })
            })
    }

    /// Whether the file has a `from module import *`: any name may come from it.
    pub fn has_star_import(&self) -> bool {
        self.import_nodes.iter().any(|n| {
            let mut c = n.walk();
            let star = n
                .named_children(&mut c)
                .any(|x| x.kind_str() == "wildcard_import");
            star
        })
    }

    /// The binding a name (identifier or `self.attr`) refers to at `site`, if known.
    pub fn binding_of(&self, expr: Node<'_>, site: Site) -> Option<&Binding<'a>> {
        self.resolve(expr, site, expr.start_byte())
            .map(|b| &self.bindings[b])
    }

    /// Whether `expr` (a name) is bound to what a library factory builds to run its
    /// model under `no_grad` itself (`generator = pipeline("text-generation", ...)`).
    pub fn built_by_no_grad_callable(&self, expr: Node<'_>, site: Site) -> bool {
        let Some(value) = self.binding_of(expr, site).and_then(|b| b.value) else {
            return false;
        };
        let value = unwrap_parens(value);
        value.kind_str() == "call"
            && value
                .field("function")
                .and_then(|f| self.qualified(f))
                .is_some_and(|q| names::LIBRARY_NO_GRAD_CALLABLES.contains(&q.segments()))
    }

    /// Whether `expr` (a name or `self.attr`) is bound to an object built from a class
    /// imported from another package (`run_loss = CumulativeAverage()` from
    /// `monai.metrics`): what its methods do with their arguments is that library's,
    /// not a Python list's.
    pub fn built_by_imported_class(&self, expr: Node<'_>, site: Site) -> bool {
        let Some(value) = self.binding_of(expr, site).and_then(|b| b.value) else {
            return false;
        };
        let value = unwrap_parens(value);
        if value.kind_str() != "call" {
            return false;
        }
        let Some(f) = value.field("function") else {
            return false;
        };
        let head = match f.kind_str() {
            "identifier" => f,
            "attribute" => match f.field("object") {
                Some(o) if o.kind_str() == "identifier" => o,
                _ => return false,
            },
            _ => return false,
        };
        let last = match f.kind_str() {
            "attribute" => f.field("attribute").map_or("", |a| self.text(a)),
            _ => self.text(f),
        };
        last.starts_with(|c: char| c.is_ascii_uppercase())
            && self
                .binding_of(head, site)
                .is_some_and(|b| b.kind == BindingKind::Import)
            && self
                .qualified(f)
                .is_none_or(|q| q.first() != Some("collections"))
    }

    /// The key of a plain name or `self.attr` expression.
    pub fn name_key(&self, expr: Node<'_>, scope: ScopeId) -> Option<NameKey<'a>> {
        match expr.kind_str() {
            "identifier" => Some(NameKey::Local(scope, self.text(expr))),
            "attribute" => {
                let obj = expr.field("object")?;
                let attr = expr.field("attribute")?;
                let f = self.function_of(scope)?;
                let fs = self.scope(f);
                if obj.kind_str() == "identifier" && fs.self_param() == Some(self.text(obj)) {
                    Some(NameKey::Attr(fs.class?, self.text(attr)))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}
