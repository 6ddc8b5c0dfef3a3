//! Name resolution, call resolution and value provenance: lazy queries over the facts
//! the builder collected, memoized per binding and per function so that each is
//! evaluated at most once, with an explicit depth limit instead of unbounded recursion.

use rustc_hash::{FxHashMap, FxHashSet};
use tree_sitter::Node;

use super::names;
use super::*;

/// How deep provenance follows expressions and bindings before giving up (unknown).
const MAX_DEPTH: u32 = 200;

impl<'a> SemanticModel<'a> {
    /// The binding `expr` (a name or `self.attr`) refers to when read at byte `at`.
    pub(super) fn resolve(&self, expr: Node<'_>, site: Site, at: usize) -> Option<BindingId> {
        let key = self.name_key(expr, site.scope)?;
        match key {
            NameKey::Attr(class, attr) => {
                let list = self.names.get(&NameKey::Attr(class, attr))?;
                let f = self.function_of(site.scope);
                // Sorted by position: search back from the last binding at or before `at`.
                let upto = list.partition_point(|&b| self.bindings[b].pos <= at);
                let same_fn = list[..upto]
                    .iter()
                    .rev()
                    .find(|&&b| self.function_of(self.bindings[b].site.scope) == f);
                same_fn
                    .or_else(|| {
                        list.iter().find(|&&b| {
                            let s = self.bindings[b].site.scope;
                            self.scope(s).name == "__init__"
                        })
                    })
                    .or_else(|| list.first())
                    .copied()
            }
            NameKey::Local(_, name) => {
                let mut scope = Some(site.scope);
                let mut first = true;
                while let Some(s) = scope {
                    let sc = self.scope(s);
                    if first || sc.kind != ScopeKind::Class {
                        if let Some(list) = self.names.get(&NameKey::Local(s, name)) {
                            let found = if first {
                                // Sorted by position: the last binding at or before `at`.
                                let i = list.partition_point(|&b| self.bindings[b].pos <= at);
                                i.checked_sub(1).map(|i| list[i])
                            } else {
                                list.last().copied()
                            };
                            match found {
                                Some(b) if self.bindings[b].kind == BindingKind::Global => {
                                    // `global x` at module level is a no-op: nothing more
                                    // to find (following it would revisit this scope).
                                    if s == ScopeId::MODULE {
                                        return None;
                                    }
                                    scope = Some(ScopeId::MODULE);
                                    first = false;
                                    continue;
                                }
                                Some(b) => return Some(b),
                                // Bound in this function, but only later: a loop-carried
                                // or conditional value we cannot place.
                                None if sc.is_function() => return None,
                                None => {}
                            }
                        }
                    }
                    first = false;
                    scope = sc.parent;
                }
                None
            }
        }
    }

    /// The parameter that the method `f` appends to a list held on `self`, as its
    /// position among a call's arguments (`self` not counted), and the attribute
    /// (`def put_data(self, transition): self.data.append(transition)` gives `(0,
    /// "data")`). A call of such a method stores its argument in the receiver, which
    /// keeps it as long as the receiver lives: an append to the receiver's list.
    pub fn appended_parameter(&self, f: ScopeId) -> Option<AppendedParameter<'a>> {
        self.memo
            .appended_params
            .get_or_init(|| self.compute_appended_params())
            .get(&f)
            .copied()
    }

    fn compute_appended_params(&self) -> FxHashMap<ScopeId, AppendedParameter<'a>> {
        let mut out = FxHashMap::default();
        for call in &self.calls {
            let Some((container, method)) = self.method_call(call) else {
                continue;
            };
            if !names::GROWTH_METHODS.contains(&method) {
                continue;
            }
            let f = call.site.scope;
            let sc = self.scope(f);
            let Some(me) = sc.self_param() else {
                continue;
            };
            let container = unwrap_parens(container);
            if container.kind_str() != "attribute"
                || container.field("object").map(|o| self.text(o)) != Some(me)
            {
                continue;
            }
            let Some(attr) = container.field("attribute").map(|a| self.text(a)) else {
                continue;
            };
            let value = match method {
                "insert" => self.positional_args(call.node).nth(1),
                _ => self.positional_args(call.node).next(),
            };
            let Some(value) = value
                .map(unwrap_parens)
                .filter(|v| v.kind_str() == "identifier")
            else {
                continue;
            };
            let name = self.text(value);
            let Some(pos) = sc.params.iter().position(|&p| p == name).filter(|&i| i > 0) else {
                continue;
            };
            // A parameter rebound in the method may no longer be what the caller passed.
            let rebound = self.names.get(&NameKey::Local(f, name)).is_some_and(|bs| {
                bs.iter()
                    .any(|&b| self.bindings[b].kind != BindingKind::Parameter)
            });
            if !rebound {
                out.entry(f).or_insert(AppendedParameter {
                    position: (pos - 1) as u32,
                    attr,
                    list: container,
                    site: call.site,
                });
            }
        }
        out
    }

    /// Resolves a call to a same-file function or method.
    pub fn resolve_call(&self, call: CallId) -> Option<ScopeId> {
        let c = &self.calls[call];
        let f = c.function;
        match f.kind_str() {
            "identifier" => {
                let name = self.text(f);
                let mut scope = Some(c.site.scope);
                let mut first = true;
                while let Some(s) = scope {
                    let sc = self.scope(s);
                    if first || sc.kind != ScopeKind::Class {
                        if let Some(&id) = self.functions.get(&(s, name)) {
                            return Some(id);
                        }
                    }
                    first = false;
                    scope = sc.parent;
                }
                None
            }
            "attribute" => {
                let recv = unwrap_parens(f.field("object")?);
                let method = self.text(f.field("attribute")?);
                let class = if recv.kind_str() == "identifier"
                    && self
                        .function_of(c.site.scope)
                        .and_then(|fs| self.scope(fs).self_param())
                        == Some(self.text(recv))
                {
                    let class = self.class_of(c.site.scope)?;
                    return self
                        .method_of(class, method, 0)
                        .or_else(|| self.stored_closure(class, method));
                } else if recv.kind_str() == "call"
                    && recv.field("function").map(|n| self.text(n)) == Some("super")
                {
                    let class = self.class_of(c.site.scope)?;
                    return self.scope(class).bases.iter().find_map(|b| {
                        let base = self.classes.get(self.text(*b))?;
                        self.method_of(*base, method, 0)
                    });
                } else {
                    self.instance_class(recv, c.site)?
                };
                self.method_of(class, method, 0)
            }
            _ => None,
        }
    }

    /// The function stored on `self.<attr>` of `class`: a nested function returned by a
    /// factory method (`self.val_step = self._make_val_step()`), or a function bound
    /// directly (`self.val_step = step`). Only when every store agrees.
    fn stored_closure(&self, class: ScopeId, attr: &str) -> Option<ScopeId> {
        let stores = self.assigns.get(&NameKey::Attr(class, attr))?;
        let mut found = None;
        for &b in stores {
            let binding = &self.bindings[b];
            let value = unwrap_parens(binding.value?);
            let f = match value.kind_str() {
                "identifier" => self.function_named(binding.site.scope, self.text(value))?,
                "call" => {
                    let factory = self
                        .call_index(value)
                        .and_then(|c| self.resolve_direct(c))?;
                    self.scope(factory).returns.iter().find_map(|&(r, _)| {
                        let r = unwrap_parens(r);
                        (r.kind_str() == "identifier")
                            .then(|| self.functions.get(&(factory, self.text(r))).copied())
                            .flatten()
                    })?
                }
                _ => return None,
            };
            if found.is_some_and(|g| g != f) {
                return None;
            }
            found = Some(f);
        }
        found
    }

    /// A function visible by `name` from `scope` (its own nested functions first).
    fn function_named(&self, scope: ScopeId, name: &str) -> Option<ScopeId> {
        let mut s = Some(scope);
        while let Some(id) = s {
            if let Some(&f) = self.functions.get(&(id, name)) {
                return Some(f);
            }
            s = self.scope(id).parent;
        }
        None
    }

    /// A call of a method of `self` or of a function, resolved without stored closures.
    fn resolve_direct(&self, call: CallId) -> Option<ScopeId> {
        let c = &self.calls[call];
        let f = c.function;
        if f.kind_str() == "identifier" {
            return self.function_named(c.site.scope, self.text(f));
        }
        let recv = unwrap_parens(f.field("object")?);
        let this = self
            .function_of(c.site.scope)
            .and_then(|fs| self.scope(fs).self_param());
        if recv.kind_str() != "identifier" || this != Some(self.text(recv)) {
            return None;
        }
        let method = self.text(f.field("attribute")?);
        let class = self.class_of(c.site.scope)?;
        self.method_of(class, method, 0)
    }

    /// A method of a same-file class, looked up through same-file base classes.
    pub fn method_of(&self, class: ScopeId, method: &str, depth: u32) -> Option<ScopeId> {
        if depth > 16 {
            return None;
        }
        if let Some(&m) = self.functions.get(&(class, method)) {
            return Some(m);
        }
        self.scope(class).bases.iter().find_map(|b| {
            let base = *self.classes.get(self.text(*b))?;
            (base != class)
                .then(|| self.method_of(base, method, depth + 1))
                .flatten()
        })
    }

    /// The same-file class a name was constructed from (`trainer = Trainer(...)`).
    fn instance_class(&self, recv: Node<'_>, site: Site) -> Option<ScopeId> {
        let mut recv = recv;
        let mut site = site;
        // `net = QNet(...).to(device)`, `net = net.cuda()`: a module's conversions and
        // mode switches hand back the module itself, so its class is still known.
        let mut through_module_api = false;
        for _ in 0..8 {
            let b = match self.resolve(recv, site, recv.start_byte()) {
                Some(b) => b,
                None => self.attribute_of_instance(recv, site)?,
            };
            let mut v = unwrap_parens(self.bindings[b].value?);
            if v.kind_str() != "call" || self.bindings[b].index.is_some() {
                return None;
            }
            loop {
                let f = unwrap_parens(v.field("function")?);
                match f.kind_str() {
                    "identifier" => {
                        let class = self.classes.get(self.text(f)).copied()?;
                        return (!through_module_api || self.is_module_class(class))
                            .then_some(class);
                    }
                    "attribute" => {
                        let m = self.text(f.field("attribute")?);
                        if !(names::is_conversion_method(m)
                            || names::RETURNS_SELF_METHODS.contains(&m))
                        {
                            return None;
                        }
                        through_module_api = true;
                        let object = unwrap_parens(f.field("object")?);
                        match object.kind_str() {
                            "call" => v = object,
                            "identifier" => {
                                site = self.bindings[b].site;
                                recv = object;
                                break;
                            }
                            _ => return None,
                        }
                    }
                    _ => return None,
                }
            }
        }
        None
    }

    /// The binding of `obj.attr` where `obj` is an instance of a class of this file
    /// (`trainer.policy_net` with `self.policy_net = PolicyNet(...)` in the trainer's
    /// `__init__`): the store in `__init__`, else the first.
    fn attribute_of_instance(&self, recv: Node<'_>, site: Site) -> Option<BindingId> {
        if recv.kind_str() != "attribute" {
            return None;
        }
        let object = unwrap_parens(recv.field("object")?);
        let attr = self.text(recv.field("attribute")?);
        let class = self.instance_class(object, site)?;
        let list = self.names.get(&NameKey::Attr(class, attr))?;
        list.iter()
            .find(|&&b| self.scope(self.bindings[b].site.scope).name == "__init__")
            .or_else(|| list.first())
            .copied()
    }

    pub(super) fn eval(&self, node: Node<'_>, site: Site, depth: u32) -> Value {
        if depth > MAX_DEPTH {
            self.memo.depth_exceeded.set(true);
            return Value::Unknown;
        }
        let d = depth + 1;
        // Parentheses change nothing; unwrap them without spending depth.
        let node = unwrap_parens(node);
        match node.kind_str() {
            "parenthesized_expression" => Value::Unknown,
            "identifier" => self.eval_name(node, site, d),
            "attribute" => self.eval_attribute(node, site, d),
            "call" => self.eval_call_memo(node, site, d),
            "subscript" => {
                let Some(v) = node.field("value") else {
                    return Value::Unknown;
                };
                match self.eval(v, site, d) {
                    Value::Graph(o) => {
                        let key = node.field("subscript").map(|s| self.text(s));
                        if matches!(key, Some("\"loss\"") | Some("'loss'")) {
                            Value::Graph(Origin::Loss)
                        } else {
                            Value::Graph(o)
                        }
                    }
                    // `self.heads[i]` of a module container is a module.
                    Value::Module => Value::Module,
                    // Indexing adds no graph: `out.detach().cpu().numpy()[0]`.
                    Value::Detached => Value::Detached,
                    _ => Value::Unknown,
                }
            }
            "binary_operator" => {
                let l = node.field("left");
                let r = node.field("right");
                let lv = l.map_or(Value::Unknown, |n| self.eval(n, site, d));
                let rv = r.map_or(Value::Unknown, |n| self.eval(n, site, d));
                join_arith(lv, rv)
            }
            "unary_operator" => node
                .field("argument")
                .map_or(Value::Unknown, |n| self.eval(n, site, d)),
            "comparison_operator" | "not_operator" => Value::Detached,
            "integer" | "float" | "string" | "concatenated_string" | "true" | "false" | "none" => {
                Value::Detached
            }
            "list" | "tuple" | "set" | "expression_list" => {
                let mut c = node.walk();
                let items: Vec<Node<'_>> = node.named_children(&mut c).collect();
                join_all(items.into_iter().map(|n| self.eval(n, site, d)))
            }
            "dictionary" => {
                let mut c = node.walk();
                let items: Vec<Node<'_>> = node
                    .named_children(&mut c)
                    .filter_map(|p| p.field("value"))
                    .collect();
                join_all(items.into_iter().map(|n| self.eval(n, site, d)))
            }
            "conditional_expression" => {
                let mut c = node.walk();
                let parts: Vec<Node<'_>> = node.named_children(&mut c).collect();
                if parts.len() < 3 {
                    return Value::Unknown;
                }
                let a = self.eval(parts[0], site, d);
                let b = self.eval(parts[2], site, d);
                if a == b {
                    a
                } else {
                    Value::Unknown
                }
            }
            "await" => node
                .named_child(0)
                .map_or(Value::Unknown, |n| self.eval(n, site, d)),
            _ => Value::Unknown,
        }
    }

    /// A graph-producing operation at `site`: a graph where grad is on, nothing where it is off.
    fn produce(&self, origin: Origin, site: Site) -> Value {
        // JAX, TensorFlow or plain NumPy code builds no autograd graph, nor does code
        // where nothing requires grad.
        if !self.is_torch_code() || self.graph_free_at(site) {
            return Value::Detached;
        }
        match self.grad_mode(site) {
            GradMode::Disabled => Value::Detached,
            GradMode::Unknown => Value::Unknown,
            _ => Value::Graph(origin),
        }
    }

    fn eval_name(&self, node: Node<'_>, site: Site, d: u32) -> Value {
        let name = self.text(node);
        if let Some(f) = self.function_of(site.scope) {
            if self.scope(f).self_param() == Some(name) {
                let class = self.class_of(site.scope).expect("method has a class");
                return if self.is_module_class(class) {
                    Value::Module
                } else {
                    Value::Instance(class)
                };
            }
        }
        let b = self.resolve(node, site, node.start_byte());
        // The enclosing method's `self` seen from a closure it defines (a validation
        // step built by `def validater(self): def validate(): self(x)`).
        if let Some(bd) = b.map(|b| &self.bindings[b]) {
            if bd.kind == BindingKind::Parameter && self.scope(bd.owner).self_param() == Some(name)
            {
                if let Some(class) = self.class_of(bd.owner) {
                    return if self.is_module_class(class) {
                        Value::Module
                    } else {
                        Value::Instance(class)
                    };
                }
            }
        }
        let v = match b {
            Some(b) => self.eval_binding(b, d),
            None => Value::Unknown,
        };
        if v != Value::Unknown {
            return v;
        }
        // An imported capitalised name is a class (`from vllm import LLM`): calling it
        // constructs, it runs no forward.
        if name.starts_with(|c: char| c.is_ascii_uppercase())
            && b.is_some_and(|b| self.bindings[b].kind == BindingKind::Import)
        {
            return Value::Unknown;
        }
        // `eval_model.eval()` in this function, or handed where a parameter is used
        // so: whatever the name says, a module.
        let key = (self.function_of(site.scope), name);
        if self.module_receivers.contains(&key) || self.module_args().locals.contains(&key) {
            return Value::Module;
        }
        let by_name = name_value(name);
        // A name bound nowhere in the file (a documentation snippet's `classifier`
        // left from another page) is no model whose calls to take for forwards; a
        // star import may bind it to anything.
        if by_name == Value::Module && b.is_none() && !self.has_star_import() {
            return Value::Unknown;
        }
        if by_name != Value::Unknown {
            // A name guess yields to what the callers hand over: `ema_optimizer` given a
            // `WeightEMA(...)` of this file, `model` given a from-scratch `Perceptron`.
            if let Some(class) = b.and_then(|b| self.instance_from_callers(b, d)) {
                return Value::Instance(class);
            }
            return by_name;
        }
        if self.is_backward_receiver(node, site) {
            return Value::Graph(Origin::Loss);
        }
        Value::Unknown
    }

    /// The plain class (not a module) whose instance every same-file call of the
    /// function hands to parameter binding `b`, when there are such calls and all of
    /// them do (the first 16 calls asked: a helper called from thousands of places
    /// stays cheap).
    fn instance_from_callers(&self, b: BindingId, d: u32) -> Option<ScopeId> {
        self.class_from_callers(b, 16, |arg, site| match self.eval(arg, site, d + 1) {
            Value::Instance(c) => Some(c),
            _ => None,
        })
    }

    /// The argument that call `call` binds to parameter binding `b`: by position (after
    /// `self` for `obj.method(x)`), else by keyword.
    fn argument_for(&self, b: BindingId, call: CallId) -> Option<Node<'a>> {
        let bd = &self.bindings[b];
        let sc = self.scope(bd.owner);
        let pos = sc.params.iter().position(|p| *p == bd.name)?;
        let cl = &self.calls[call];
        let skip = usize::from(sc.self_param().is_some() && cl.function.kind_str() == "attribute");
        pos.checked_sub(skip)
            .and_then(|p| self.positional_args(cl.node).nth(p))
            .or_else(|| self.keyword_arg(cl.node, bd.name))
    }

    /// The one class that every same-file call (the first `limit`) of parameter binding
    /// `b`'s function hands it, as `class_of` reads each argument: `None` when there is
    /// no such call, one passes nothing, or two disagree.
    fn class_from_callers(
        &self,
        b: BindingId,
        limit: usize,
        class_of: impl Fn(Node<'a>, Site) -> Option<ScopeId>,
    ) -> Option<ScopeId> {
        if self.bindings[b].kind != BindingKind::Parameter {
            return None;
        }
        let mut class = None;
        for &call in self.callers(self.bindings[b].owner).iter().take(limit) {
            let c = class_of(self.argument_for(b, call)?, self.calls[call].site)?;
            if class.is_some_and(|k| k != c) {
                return None;
            }
            class = Some(c);
        }
        class
    }

    /// Whether a name is backpropagated directly somewhere in its function.
    fn is_backward_receiver(&self, node: Node<'_>, site: Site) -> bool {
        let f = self.function_of(site.scope);
        self.backward_receivers.contains(&(f, self.text(node)))
    }

    pub(super) fn eval_binding(&self, b: BindingId, d: u32) -> Value {
        match self.memo.binding_values.borrow()[b] {
            Memo::Done(v) => return v,
            Memo::InProgress => return Value::Unknown,
            Memo::Todo => {}
        }
        if d > MAX_DEPTH {
            self.memo.depth_exceeded.set(true);
            return Value::Unknown;
        }
        let bd = &self.bindings[b];
        if bd.kind == BindingKind::Augmented && bd.value.is_some() {
            return self.eval_augmented_chain(b, d);
        }
        self.memo.binding_values.borrow_mut()[b] = Memo::InProgress;
        let v = match (bd.kind, bd.value) {
            (BindingKind::Assign, Some(val)) => match bd.index {
                None => self.eval(val, bd.site, d),
                Some(i) => self.eval_element(val, i, bd.site, d),
            },
            (BindingKind::ForTarget, Some(iter)) if self.counts(iter, bd.index, bd.site) => {
                Value::Detached
            }
            _ => Value::Unknown,
        };
        // A container that starts empty holds what is grown into it.
        let v = match (v, bd.value) {
            (Value::Unknown, Some(val)) if bd.kind == BindingKind::Assign => {
                match self.element_node(val, bd.index) {
                    Some(e) if self.is_empty_list(e) => self.grown_elements(b, d),
                    _ => v,
                }
            }
            _ => v,
        };
        self.memo.binding_values.borrow_mut()[b] = Memo::Done(v);
        v
    }

    /// Whether element `index` of what `iter` yields is a Python int: the value of
    /// `for i in range(n)`, the counter of `for step, batch in enumerate(loader)`.
    fn counts(&self, iter: Node<'_>, index: Option<u32>, site: Site) -> bool {
        let iter = unwrap_parens(iter);
        let Some(func) = iter.field("function") else {
            return false;
        };
        if func.kind_str() != "identifier" || self.resolve(func, site, func.start_byte()).is_some()
        {
            return false;
        }
        matches!(
            (self.text(func), index),
            ("range" | "trange", None) | ("enumerate", Some(0))
        )
    }

    /// The binding of the same name just before augmented binding `b`.
    pub(super) fn previous_binding(&self, b: BindingId) -> Option<BindingId> {
        let bd = &self.bindings[b];
        let key = match bd.owner {
            o if self.scope(o).kind == ScopeKind::Class => NameKey::Attr(o, bd.name),
            o => NameKey::Local(o, bd.name),
        };
        let list = self.names.get(&key)?;
        // Bindings are listed in source order: the one before `b` by position.
        let i = list.partition_point(|&x| self.bindings[x].pos < bd.pos);
        i.checked_sub(1).map(|i| list[i])
    }

    /// `t += a; t += b; ...`: a chain of augmented bindings is walked back iteratively to
    /// its first unevaluated link, then evaluated forwards, so a file of 100,000 `+=`
    /// lines costs no stack (each link was one recursion before).
    fn eval_augmented_chain(&self, b: BindingId, d: u32) -> Value {
        let mut chain = vec![b];
        let mut base = None;
        let mut cur = b;
        while let Some(p) = self.previous_binding(cur) {
            let pd = &self.bindings[p];
            let todo = matches!(self.memo.binding_values.borrow()[p], Memo::Todo);
            if todo && pd.kind == BindingKind::Augmented && pd.value.is_some() {
                chain.push(p);
                cur = p;
            } else {
                base = Some(p);
                break;
            }
        }
        for &x in &chain {
            self.memo.binding_values.borrow_mut()[x] = Memo::InProgress;
        }
        let mut acc = base.map_or(Value::Unknown, |p| self.eval_binding(p, d + 1));
        for &x in chain.iter().rev() {
            let xd = &self.bindings[x];
            let val = xd.value.expect("augmented links have a value");
            acc = join_arith(acc, self.eval(val, xd.site, d));
            self.memo.binding_values.borrow_mut()[x] = Memo::Done(acc);
        }
        acc
    }

    /// Element `i` of an unpacked value: `a, b = x, y`, `loss, out = f()`, `v, idx = t.max(1)`.
    fn eval_element(&self, val: Node<'_>, i: u32, site: Site, d: u32) -> Value {
        if d > MAX_DEPTH {
            self.memo.depth_exceeded.set(true);
            return Value::Unknown;
        }
        let d = d + 1;
        let val = unwrap_parens(val);
        match val.kind_str() {
            "tuple" | "list" | "expression_list" => {
                let mut c = val.walk();
                let item = val
                    .named_children(&mut c)
                    .filter(|n| n.kind_str() != "comment")
                    .nth(i as usize);
                item.map_or(Value::Unknown, |n| self.eval(n, site, d))
            }
            "call" => {
                let Some(func) = val.field("function") else {
                    return Value::Unknown;
                };
                if func.kind_str() == "attribute" {
                    let m = func.field("attribute").map(|a| self.text(a)).unwrap_or("");
                    // `model, opt = accelerator.prepare(model, opt)`, `fabric.setup(...)`
                    if matches!(m, "prepare" | "setup") && self.positional_args(val).count() > 1 {
                        return self
                            .positional_args(val)
                            .nth(i as usize)
                            .map_or(Value::Unknown, |a| self.eval(a, site, d));
                    }
                    if names::is_values_indices_method(m) {
                        let recv = func.field("object");
                        let rv = recv.map_or(Value::Unknown, |r| self.eval(r, site, d));
                        return match (rv, i) {
                            (Value::Graph(o), 0) => Value::Graph(o),
                            (_, 1) => Value::Detached,
                            _ => Value::Unknown,
                        };
                    }
                }
                if let Some(f) = self.callee_of_node(val) {
                    let v = self.function_returns(f, Some(i), d);
                    return self.at_call_site(v, site);
                }
                if let Some(f) = self.passed_instance_callee(val, site) {
                    let v = self.function_returns(f, Some(i), d);
                    return self.at_call_site(v, site);
                }
                // `action, dist = self.actor(state)` where `Actor.forward` returns a
                // `dist.sample()` there: that element carries no graph.
                if let Some(fw) = self.instance_forward(val, site) {
                    if self.function_returns(fw, Some(i), d) == Value::Detached {
                        return Value::Detached;
                    }
                } else if self.imported_forward_detached(val, site, i) {
                    return Value::Detached;
                }
                // `g_loss, g_logs = compute_g_loss(...)` with a helper of another file
                // returning `loss, {"adv": loss_adv.item()}`: the second is detached.
                if let (Some(p), Some(name)) = (self.project(), self.imported_function(func, site))
                {
                    if p.detached_elements(name).is_some_and(|d| d.contains(&i)) {
                        return Value::Detached;
                    }
                }
                match self.eval_call(val, site, d) {
                    g @ Value::Graph(_) => g,
                    Value::Detached => Value::Detached,
                    _ => Value::Unknown,
                }
            }
            _ => Value::Unknown,
        }
    }

    pub(super) fn callee_of_node(&self, call: Node<'_>) -> Option<ScopeId> {
        let i = self.call_index(call)?;
        self.callees.get(i).copied().flatten()
    }

    /// What a same-file function returns: a graph if some return carries one and none
    /// is known to be detached.
    fn function_returns(&self, f: ScopeId, index: Option<u32>, d: u32) -> Value {
        // `return helper(...)[i]` chains and recursive functions: bounded like any eval.
        if d > MAX_DEPTH {
            self.memo.depth_exceeded.set(true);
            return Value::Unknown;
        }
        let d = d + 1;
        let key = (f, index.unwrap_or(u32::MAX));
        match self.memo.return_values.borrow().get(&key) {
            Some(Memo::Done(v)) => return *v,
            Some(Memo::InProgress) => return Value::Unknown,
            _ => {}
        }
        self.memo
            .return_values
            .borrow_mut()
            .insert(key, Memo::InProgress);
        let values: Vec<Value> = self
            .scope(f)
            .returns
            .iter()
            .filter(|(r, _)| r.kind_str() != "none")
            .map(|&(r, site)| {
                let v = match index {
                    None => self.eval(r, site, d),
                    Some(i) => self.eval_element(r, i, site, d),
                };
                // What a call makes with gradients off carries no graph, whatever the
                // callee (`return Sample(x, values)` in a `@torch.no_grad()` sampler).
                if v == Value::Unknown
                    && site.grad == GradMode::Disabled
                    && unwrap_parens(r).kind_str() == "call"
                {
                    Value::Detached
                } else {
                    v
                }
            })
            .collect();
        let v = if values.iter().any(|v| matches!(v, Value::Graph(_)))
            && !values.contains(&Value::Detached)
        {
            *values
                .iter()
                .find(|v| matches!(v, Value::Graph(_)))
                .expect("found above")
        } else if !values.is_empty() && values.iter().all(|v| *v == values[0]) {
            values[0]
        } else {
            Value::Unknown
        };
        self.memo
            .return_values
            .borrow_mut()
            .insert(key, Memo::Done(v));
        v
    }

    /// A value returned from a call made at `site`: no graph if grad is off there.
    fn at_call_site(&self, v: Value, site: Site) -> Value {
        match v {
            Value::Graph(o) => self.produce(o, site),
            v => v,
        }
    }

    fn eval_attribute(&self, node: Node<'_>, site: Site, d: u32) -> Value {
        self.attribute_value(node, site, d, None)
    }

    /// `obj.attr`, with the value of `obj` when the caller already has it (a method
    /// call evaluates its receiver once, or chains `x.f().f()...` would cost 2^n).
    fn attribute_value(
        &self,
        node: Node<'_>,
        site: Site,
        d: u32,
        obj_value: Option<Value>,
    ) -> Value {
        let (Some(obj), Some(attr)) = (node.field("object"), node.field("attribute")) else {
            return Value::Unknown;
        };
        let attr = self.text(attr);
        if let Some(NameKey::Attr(class, _)) = self.name_key(node, site.scope) {
            let v = match self.resolve(node, site, node.start_byte()) {
                Some(b) => self.eval_binding(b, d),
                None => Value::Unknown,
            };
            return if v != Value::Unknown {
                v
            } else if self.module_args().attrs.contains(&(class, attr)) {
                // `self.target_qf.parameters()`, or handed to `soft_update`: a module,
                // whatever it is called.
                Value::Module
            } else {
                name_value(attr)
            };
        }
        if names::is_non_graph_attribute(attr) {
            return Value::Detached;
        }
        match obj_value.unwrap_or_else(|| self.eval(obj, site, d)) {
            Value::Graph(o) => {
                if attr == "loss" {
                    Value::Graph(Origin::Loss)
                } else {
                    Value::Graph(o)
                }
            }
            Value::Module if names::is_model_name(attr) => Value::Module,
            Value::Detached => Value::Unknown,
            // The attribute of a call's unknown result is no name to guess from
            // (`get_session().head(url)` is an HTTP request).
            _ if unwrap_parens(obj).kind_str() == "call" => Value::Unknown,
            _ => match name_value(attr) {
                // Only callables are guessed from an attribute name: `trainer.model`,
                // `self.criterion`; never a tensor.
                v @ (Value::Module | Value::LossFn | Value::Optimizer) => v,
                _ => Value::Unknown,
            },
        }
    }

    fn eval_call_memo(&self, node: Node<'_>, site: Site, d: u32) -> Value {
        let Some(i) = self
            .call_index(node)
            .filter(|&i| self.calls[i].site == site)
        else {
            return self.eval_call(node, site, d);
        };
        match self.memo.call_values.borrow()[i] {
            Memo::Done(v) => return v,
            Memo::InProgress => return Value::Unknown,
            Memo::Todo => {}
        }
        self.memo.call_values.borrow_mut()[i] = Memo::InProgress;
        let v = self.eval_call(node, site, d);
        self.memo.call_values.borrow_mut()[i] = Memo::Done(v);
        v
    }

    fn eval_call(&self, node: Node<'_>, site: Site, d: u32) -> Value {
        let Some(func) = node.field("function") else {
            return Value::Unknown;
        };
        // Wrappers keep module provenance: `DDP(model)`, `FSDP(model)`,
        // `get_peft_model(model, cfg)`.
        let last = self
            .qualified(func)
            .and_then(|q| q.last())
            .unwrap_or_else(|| {
                let f = unwrap_parens(func);
                f.field("attribute").map_or(self.text(f), |a| self.text(a))
            });
        if names::is_module_wrapper(last) {
            return Value::Module;
        }
        // torch API first: losses, modules, optimizers, functions of tensors.
        if let Some(q) = self.qualified(func) {
            if q.is_torch() && q.segments().len() > 1 {
                return self.eval_torch_call(q, node, site, d);
            }
            // NumPy computes on arrays, and a tensor that requires grad refuses to become
            // one (`__array__` raises): what a NumPy function returns carries no graph
            // (`np.mean(step_losses)` in working code averages numbers).
            if q.first() == Some("numpy") && q.segments().len() > 1 {
                return Value::Detached;
            }
            if names::LIBRARY_NO_GRAD_CALLABLES.contains(&q.segments()) {
                return Value::Detached;
            }
            if q.segments().len() == 1 {
                let name = q.last().unwrap_or("");
                let bound = self.resolve(func, site, func.start_byte()).is_some();
                if !bound && names::is_detaching_builtin(name) {
                    return Value::Detached;
                }
                if !bound && names::is_passthrough_builtin(name) {
                    return self.join_args(node, site, d);
                }
            }
        }
        if func.kind_str() == "attribute" {
            let method = func.field("attribute").map(|a| self.text(a)).unwrap_or("");
            if names::is_detaching_method(method) {
                return Value::Detached;
            }
            // `img.to(torch.uint8)`, `x.type(torch.long)`: an integer tensor has no graph.
            if matches!(method, "to" | "type") && self.converts_to_integer(node) {
                return Value::Detached;
            }
        }
        // A same-file function or method: what it returns.
        let same_file = self
            .callee_of_node(node)
            .or_else(|| self.passed_instance_callee(node, site));
        if let Some(f) = same_file {
            let v = self.function_returns(f, None, d);
            if v != Value::Unknown {
                return self.at_call_site(v, site);
            }
        }
        // A function or method of another project file that returns a detached value
        // (a helper returning `loss.item()`, a loss object's `get_loss()`).
        if let (None, Some(p)) = (same_file, self.project()) {
            let detached = match self.imported_function(func, site) {
                Some(name) if p.detached_import(name) => true,
                _ if func.kind_str() == "identifier" => false,
                // An attribute this file binds (`self.value = nn.Linear(...)`) is that
                // object, not a project method that happens to share its name.
                // A tensor reduction is the tensor's own unless the receiver is an
                // instance of a class of this file (`loss.mean()` beside a project's
                // `MeanBuffer.mean`).
                _ if func.kind_str() == "attribute" => {
                    self.resolve(func, site, func.start_byte()).is_none()
                        && func.field("attribute").is_some_and(|a| {
                            let m = self.text(a);
                            p.detached_method(m)
                                && (!names::TENSOR_REDUCTIONS.contains(&m)
                                    || func.field("object").is_some_and(|o| {
                                        matches!(self.eval(o, site, d), Value::Instance(_))
                                    }))
                        })
                }
                _ => false,
            };
            if detached {
                return Value::Detached;
            }
        }
        match func.kind_str() {
            "attribute" => self.eval_method_call(node, func, site, d),
            "identifier" => {
                let name = self.text(func);
                if let Some(&class) = self.classes.get(name) {
                    if self
                        .resolve(func, site, func.start_byte())
                        .is_some_and(|b| self.bindings[b].kind == BindingKind::Definition)
                    {
                        return if self.is_module_class(class) {
                            if name.ends_with("Loss") {
                                Value::LossFn
                            } else {
                                Value::Module
                            }
                        } else {
                            Value::Instance(class)
                        };
                    }
                }
                // `GPT(config)`, `ResNet50()`: an imported (or unknown) capitalised name
                // is a class, and calling it constructs; `G(z)` with `G = Generator()`
                // bound here is a forward.
                let class_like = name.starts_with(|c: char| c.is_ascii_uppercase())
                    && self.resolve(func, site, func.start_byte()).is_none_or(|b| {
                        matches!(
                            self.bindings[b].kind,
                            BindingKind::Import | BindingKind::Definition
                        )
                    });
                if class_like {
                    return self.call_by_name(name, node, site, d);
                }
                // `def ppo(env_fn, actor_critic=core.MLPActorCritic): ac = actor_critic(...)`:
                // a parameter whose default is a class constructs what that class does.
                if let Some(default) = self.class_default(func, site) {
                    return self.call_by_name(default, node, site, d);
                }
                if self.frozen_call(node, site, d) {
                    return Value::Detached;
                }
                match self.eval(func, site, d) {
                    // `u = nn.Upsample(size).to(device)` bound above: as on the spot.
                    Value::Module
                        if self.bound_to_parameterless_module(func, site)
                            && self.all_args_fresh(node, site, d) =>
                    {
                        Value::Detached
                    }
                    Value::Module => self.module_output(node, site, d),
                    Value::LossFn => self.apply_loss(node, site, d),
                    _ => self.call_by_name(name, node, site, d),
                }
            }
            _ => match self.eval(func, site, d) {
                // `nn.Upsample(scale_factor=2)(torch.randn(...))`: a module without
                // parameters, built on the spot, on inputs without a graph, makes none.
                Value::Module
                    if self.is_parameterless_module_ctor(func)
                        && self.all_args_fresh(node, site, d) =>
                {
                    Value::Detached
                }
                Value::Module => self.module_output(node, site, d),
                Value::LossFn => self.apply_loss(node, site, d),
                _ => Value::Unknown,
            },
        }
    }

    /// What calling a module gives: its output, unless the call is no forward at all. A
    /// forward takes an input, so a call without arguments is a method of something
    /// (`self.model.merge_adapter()`, `program.module()`); one that is handed a module
    /// is a function about models (`quantizer.postprocess_model(model)`), not a model.
    fn module_output(&self, call: Node<'_>, site: Site, d: u32) -> Value {
        if self.no_forward_call(call, site, d) {
            return Value::Unknown;
        }
        // A module of this file whose `forward` only returns detached values.
        if let Some(fw) = self.instance_forward(call, site) {
            if self.function_returns(fw, None, d) == Value::Detached {
                return Value::Detached;
            }
        } else if self.imported_forward_detached(call, site, u32::MAX) {
            return Value::Detached;
        }
        if self.frozen_call(call, site, d) {
            return Value::Detached;
        }
        self.produce(Origin::Output, site)
    }

    /// Whether `call` runs a module whose every parameter is switched off (`G =
    /// copy.deepcopy(G).requires_grad_(False)`, `for p in net.parameters():
    /// p.requires_grad = False` before the call) on inputs without a graph: its output
    /// has none.
    fn frozen_call(&self, call: Node<'_>, site: Site, d: u32) -> bool {
        let frozen = call
            .field("function")
            .is_some_and(|f| self.frozen_module(f, site))
            || self.call_index(call).is_some_and(|i| self.frozen_at(i));
        frozen
            && !self.any_argument_value(call, |a| {
                matches!(self.eval(a, site, d + 1), Value::Graph(_))
            })
    }

    fn no_forward_call(&self, call: Node<'_>, site: Site, d: u32) -> bool {
        if call
            .field("arguments")
            .is_some_and(|a| a.kind_str() == "argument_list" && a.named_child_count() == 0)
        {
            return true;
        }
        // `text_encoder(ids, params=params["text_encoder"])` in a file that imports JAX:
        // a Flax model applied to its parameters, no PyTorch forward.
        if self.keyword_arg(call, "params").is_some() && self.imports_foreign_framework() {
            return true;
        }
        // A NumPy array is no module input (`decoder(x.numpy())` decodes text;
        // `self.unet(sample=x_np, ...)` runs an ONNX session).
        if self.any_argument_value(call, |a| self.numpy_array(a, site, 2)) {
            return true;
        }
        self.positional_args(call).any(|a| {
            let a = unwrap_parens(a);
            matches!(a.kind_str(), "identifier" | "attribute")
                && self.eval(a, site, d) == Value::Module
        })
    }

    /// Whether `expr` is a NumPy array: `x.numpy()`, `np.array(...)`, or a name bound
    /// to one (through `depth` bindings).
    fn numpy_array(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        let e = unwrap_parens(expr);
        match e.kind_str() {
            "call" => {
                let Some(f) = e.field("function") else {
                    return false;
                };
                f.field("attribute")
                    .is_some_and(|m| self.text(m) == "numpy")
                    || self
                        .qualified(f)
                        .is_some_and(|q| q.first() == Some("numpy"))
            }
            "identifier" if depth > 0 => self.binding_of(e, site).is_some_and(|b| {
                b.kind == BindingKind::Assign
                    && b.value
                        .is_some_and(|v| self.numpy_array(v, b.site, depth - 1))
            }),
            _ => false,
        }
    }

    /// Whether a call of something taken for a module is no forward: it passes no input
    /// (`self.model.merge_adapter()`), it is handed a module
    /// (`quantizer.postprocess_model(model)`), or a NumPy array.
    pub fn is_no_forward_call(&self, call: Node<'_>, site: Site) -> bool {
        self.no_forward_call(call, site, 0)
    }

    /// A call known only by its name (defined in another file).
    /// The class a parameter defaults to (`actor_critic=core.MLPActorCritic`,
    /// `model_cls=Net`), as written, when its last segment is capitalised.
    fn class_default(&self, func: Node<'_>, site: Site) -> Option<&'a str> {
        let b = self.resolve(func, site, func.start_byte())?;
        let bd = &self.bindings[b];
        if bd.kind != BindingKind::Parameter {
            return None;
        }
        let params = self.scope(bd.site.scope).node.field("parameters")?;
        let mut c = params.walk();
        let default = params.named_children(&mut c).find_map(|p| {
            if !matches!(
                p.kind_str(),
                "default_parameter" | "typed_default_parameter"
            ) {
                return None;
            }
            let named = p.field("name").is_some_and(|n| self.text(n) == bd.name);
            named.then(|| p.field("value")).flatten()
        })?;
        let last = match default.kind_str() {
            "identifier" => default,
            "attribute" => default.field("attribute")?,
            _ => return None,
        };
        if !self
            .text(last)
            .starts_with(|c: char| c.is_ascii_uppercase())
        {
            return None;
        }
        // `core.MLPActorCritic` is known to the project by its dotted text.
        Some(self.text(default))
    }

    fn call_by_name(&self, name: &str, call: Node<'_>, site: Site, d: u32) -> Value {
        // An `nn.Module` subclass of another project file, whatever its name.
        // ... or a project function handing back a model it placed on a device
        // (`get_model(args, device)` in `utils/model.py`).
        let project_module = self.project().is_some_and(|p| {
            !name.ends_with("Loss") && (p.module_import(name) || p.placing_import(name).is_some())
        });
        if project_module || names::is_model_class_name(name) {
            Value::Module
        } else if name.ends_with("Loss") && name.starts_with(|c: char| c.is_ascii_uppercase()) {
            Value::LossFn
        } else if names::is_optimizer_class_name(name) {
            Value::Optimizer
        } else if names::is_loss_fn_name(name) {
            if self.all_args_detached(call, site, d) {
                Value::Detached
            } else {
                self.produce(Origin::Loss, site)
            }
        } else if (name == "dict" || name.starts_with(|c: char| c.is_ascii_uppercase()))
            && self.record_of_detached(call, site, d)
        {
            // `Munch(adv=loss_adv.item(), cyc=loss_cyc.item())`: a record built from
            // values without a graph has none.
            Value::Detached
        } else {
            Value::Unknown
        }
    }

    /// Every argument of `call`, positional or keyword, carries no graph, and one is
    /// computed rather than a literal: the constructor of a record holding computed
    /// values (a class built from literal settings alone may be a model).
    fn record_of_detached(&self, call: Node<'_>, site: Site, d: u32) -> bool {
        let Some(args) = call.field("arguments") else {
            return false;
        };
        let mut computed = false;
        let mut c = args.walk();
        for a in args.named_children(&mut c) {
            let v = match a.kind_str() {
                "keyword_argument" => match a.field("value") {
                    Some(v) => v,
                    None => return false,
                },
                "comment" => continue,
                "list_splat" | "dictionary_splat" | "generator_expression" => return false,
                _ => a,
            };
            if self.eval(v, site, d) != Value::Detached {
                return false;
            }
            computed |= !matches!(
                unwrap_parens(v).kind_str(),
                "integer" | "float" | "string" | "true" | "false" | "none"
            );
        }
        computed
    }

    fn eval_method_call(&self, node: Node<'_>, func: Node<'_>, site: Site, d: u32) -> Value {
        let (Some(recv), Some(m)) = (func.field("object"), func.field("attribute")) else {
            return Value::Unknown;
        };
        let method = self.text(m);
        // `X.from_pretrained(...)`: a model unless X is a tokenizer, config, ...
        if method == names::PRETRAINED_LOADER {
            let class = self
                .qualified(recv)
                .and_then(|q| q.last())
                .unwrap_or(self.text(recv));
            return if names::is_foreign_or_no_grad_pretrained(class) {
                // A pipeline runs its models under no_grad; a TensorFlow or Flax model
                // builds no autograd graph: neither is a module whose calls record one.
                Value::Detached
            } else if names::is_non_model_pretrained(class) {
                Value::Unknown
            } else {
                Value::Module
            };
        }
        // `self.model(x)`: the attribute itself is the callee. The receiver is evaluated
        // once for both uses.
        let self_attr = matches!(self.name_key(func, site.scope), Some(NameKey::Attr(..)));
        let rv = (!self_attr).then(|| self.eval(recv, site, d));
        match self.attribute_value(func, site, d, rv) {
            Value::Module => return self.module_output(node, site, d),
            Value::LossFn => return self.apply_loss(node, site, d),
            _ => {}
        }
        // `Normal(mu, std).sample()`: a draw from a distribution built here is made under
        // no_grad whatever its parameters carry (`rsample()` keeps the graph).
        if names::is_no_grad_sampling_method(method) && self.is_distribution(recv, site, 0) {
            return Value::Detached;
        }
        let rv = rv.unwrap_or_else(|| self.eval(recv, site, d));
        match rv {
            // A tensor has no `sample()`: the receiver is a distribution returned with
            // the graph of its parameters (`dist, value = model(obs)`), and
            // `Distribution.sample()` draws under no_grad (`rsample()` keeps the graph).
            Value::Graph(_) if names::is_no_grad_sampling_method(method) => Value::Detached,
            Value::Graph(o) => Value::Graph(o),
            Value::Module => match method {
                m if names::FORWARD_METHODS.contains(&m) => self.module_output(node, site, d),
                "generate" => Value::Detached,
                m if names::is_conversion_method(m) => Value::Module,
                "eval" | "train" | "requires_grad_" | "type" | "module" => Value::Module,
                m if names::is_loss_fn_name(m) => self.produce(Origin::Loss, site),
                _ => Value::Unknown,
            },
            Value::LossFn if method == "forward" => self.produce(Origin::Loss, site),
            // A method of a detached tensor (`pred.detach().cpu()`, `.view(-1)`) on
            // detached arguments gives a detached value.
            Value::Detached
                if self.positional_args(node).next().is_none()
                    || self.all_args_detached(node, site, d) =>
            {
                Value::Detached
            }
            _ => {
                if names::is_optimizer_class_name(method) {
                    Value::Optimizer
                } else if names::is_loss_fn_name(method) {
                    if self.all_args_detached(node, site, d) {
                        Value::Detached
                    } else {
                        self.produce(Origin::Loss, site)
                    }
                } else if matches!(method, "prepare" | "setup" | "compile") {
                    // `accelerator.prepare(model)`, `fabric.setup(model)`: the wrapped value.
                    let mut args = self.positional_args(node);
                    match (args.next(), args.next()) {
                        (Some(a), None) => self.eval(a, site, d),
                        _ => Value::Unknown,
                    }
                } else {
                    Value::Unknown
                }
            }
        }
    }

    fn eval_torch_call(&self, q: QualName<'_>, call: Node<'_>, site: Site, d: u32) -> Value {
        let last = q.last().unwrap_or("");
        let is_class = last.starts_with(|c: char| c.is_ascii_uppercase());
        if q.has_module("optim") && is_class {
            return if q.has_module("lr_scheduler") {
                Value::Unknown
            } else {
                Value::Optimizer
            };
        }
        if q.has_module("nn") && is_class {
            return if last.ends_with("Loss") {
                Value::LossFn
            } else if matches!(last, "Parameter" | "ParameterList" | "ParameterDict") {
                Value::Unknown
            } else {
                Value::Module
            };
        }
        if last == "compile" {
            return self
                .positional_args(call)
                .next()
                .map_or(Value::Unknown, |a| self.eval(a, site, d));
        }
        // `nn.parallel.data_parallel(net, inputs, gpus)`: the module's forward, run
        // on the listed devices.
        if names::is_functional_forward(&q) {
            let module = self.positional_args(call).next();
            if module.is_some_and(|m| self.eval(m, site, d) == Value::Module) {
                return self.produce(Origin::Output, site);
            }
        }
        if names::is_functional_loss(last) {
            return if self.all_args_detached(call, site, d) {
                Value::Detached
            } else {
                self.produce(Origin::Loss, site)
            };
        }
        // A distribution object is no tensor: built from graph-carrying parameters
        // (`Categorical(probs)`) its `log_prob` and `rsample` keep their graph while
        // `sample()` does not, so its value is left unknown (never "detached").
        if q.has_module("distributions") {
            return Value::Unknown;
        }
        if names::is_non_differentiable_torch_fn(last) || is_class {
            return Value::Detached;
        }
        self.join_args(call, site, d)
    }

    /// A graph if any argument carries one; detached if all are detached.
    fn join_args(&self, call: Node<'_>, site: Site, d: u32) -> Value {
        let Some(args) = call.field("arguments") else {
            return Value::Unknown;
        };
        let mut c = args.walk();
        let items: Vec<Node<'_>> = args
            .named_children(&mut c)
            .filter(|n| n.kind_str() != "comment")
            .map(|n| {
                if n.kind_str() == "keyword_argument" {
                    n.field("value").unwrap_or(n)
                } else {
                    n
                }
            })
            .collect();
        if items.is_empty() {
            return Value::Unknown;
        }
        join_all(items.into_iter().map(|n| match n.kind_str() {
            // `torch.stack([a, b])`, `sum(x for x in xs)`
            "list_splat" | "generator_expression" | "list_comprehension" => {
                match n.named_child(0) {
                    Some(inner) => self.eval(inner, site, d),
                    None => Value::Unknown,
                }
            }
            _ => self.eval(n, site, d),
        }))
    }

    /// A loss module applied to `call`'s arguments: on inputs that are all detached
    /// (`criterion(pred.detach().cpu(), true)`), the loss has no graph either.
    fn apply_loss(&self, call: Node<'_>, site: Site, d: u32) -> Value {
        if self.all_args_detached(call, site, d) {
            Value::Detached
        } else {
            self.produce(Origin::Loss, site)
        }
    }

    /// `nn.Upsample(...)`, `nn.ReLU()`, `nn.MaxPool2d(2)`: the construction of a torch
    /// module that holds no parameters.
    fn is_parameterless_module_ctor(&self, func: Node<'_>) -> bool {
        let func = unwrap_parens(func);
        if func.kind_str() != "call" {
            return false;
        }
        let Some(q) = func.field("function").and_then(|f| self.qualified(f)) else {
            return false;
        };
        q.is_torch() && q.has_module("nn") && names::is_parameterless_module(q.last().unwrap_or(""))
    }

    /// Whether the name `func` is bound to a parameterless torch module built on the
    /// spot, moved or not (`u = torch.nn.Upsample(size=s).to(device)`).
    fn bound_to_parameterless_module(&self, func: Node<'_>, site: Site) -> bool {
        let Some(b) = self.binding_of(func, site) else {
            return false;
        };
        // Through `.to(device)`, `.cuda()`, `.eval()` on the new module.
        b.kind == BindingKind::Assign
            && b.value.is_some_and(|v| {
                let built =
                    self.receiver_through(v, |m| m == "eval" || names::is_conversion_method(m));
                self.is_parameterless_module_ctor(built)
            })
    }

    /// Whether every argument of `call` is detached, through moves and casts
    /// (`torch.randn(b, c, h, w).to(device)`): the input of a parameterless module.
    fn all_args_fresh(&self, call: Node<'_>, site: Site, d: u32) -> bool {
        let mut any = false;
        for a in self.positional_args(call) {
            any = true;
            let a = self.receiver_through(a, names::is_conversion_method);
            if self.eval(a, site, d) != Value::Detached {
                return false;
            }
        }
        any
    }

    fn all_args_detached(&self, call: Node<'_>, site: Site, d: u32) -> bool {
        let mut any = false;
        for a in self.positional_args(call) {
            any = true;
            if self.eval(a, site, d) != Value::Detached {
                return false;
            }
        }
        any
    }

    /// What flows into a backward pass: the backpropagated expressions (and what a
    /// module's `forward` or a Lightning `training_step` returns), their names, then,
    /// transitively, the values bound to them (assignments, `+=` chains, loop targets,
    /// unpacking by position, values appended to a container), across same-file calls
    /// in both directions (the returns of a function whose result flows on; the
    /// arguments callers pass for a parameter that flows on). A local is followed by
    /// the binding a read reaches, so a list rebound to its `.detach()`ed copy before
    /// it reaches a loss stays apart; a `self.` attribute is keyed by class, so a list
    /// filled in one method and backpropagated in another is one name. Detaching reads
    /// (`.detach()`, `.item()`, `.data`, `float(...)`) stop the flow.
    fn compute_backward_flow(&self) -> BackwardFlow<'a> {
        let mut flow = BackwardFlow::default();
        // (expression, where it stands, the position wanted from an unpacked value)
        let mut work: Vec<FlowItem<'a>> = self
            .backwards
            .iter()
            .map(|b| (b.loss, self.calls[b.call].site, None))
            .collect();
        // What a module's `forward` returns is the output whose graph its caller
        // backpropagates (or drops): state folded into it (attention sums, log-dets,
        // hidden states) is part of that graph, not kept beside it. What a Lightning
        // `training_step` returns is backpropagated by the trainer.
        for sc in &self.scopes {
            let Some(class) = sc.class else { continue };
            if matches!(sc.name, "forward" | "training_step") && self.is_module_class(class) {
                work.extend(sc.returns.iter().map(|&(r, rs)| (r, rs, None)));
            }
        }
        // Values grown into a container (`xs.append(v)`) flow wherever it does: by the
        // binding a local container resolves to, by class for a `self.` attribute.
        let grown = self.grown();
        // Arguments of project functions of other files that backpropagate them.
        if let Some(facts) = self.project() {
            for (i, call) in self.calls.iter_enumerated() {
                if call.function.kind_str() != "identifier" || self.callees[i].is_some() {
                    continue;
                }
                let Some(positions) = facts.backward_params(self.text(call.function)) else {
                    continue;
                };
                for &p in positions {
                    if let Some(a) = self.positional_args(call.node).nth(p as usize) {
                        work.push((a, call.site, None));
                    }
                }
            }
        }
        // Functions whose returns were already queued, per position.
        let mut returned: FxHashSet<(ScopeId, u32)> = FxHashSet::default();
        let mut c = self.root.walk();
        loop {
            if let Some(b) = flow.pending.pop() {
                self.expand_binding(b, &mut flow, &mut work);
                if let Some(vs) = grown.locals.get(&b) {
                    work.extend(vs.iter().map(|g| (g.arg, g.site, None)));
                }
                continue;
            }
            let Some((expr, site, index)) = work.pop() else {
                break;
            };
            let expr = unwrap_parens(expr);
            // An unpacked element: follow only its position where the value shows it.
            if let Some(i) = index {
                match expr.kind_str() {
                    "tuple" | "list" | "expression_list" => {
                        let item = expr
                            .named_children(&mut c)
                            .filter(|n| n.kind_str() != "comment")
                            .nth(i as usize);
                        if let Some(item) = item {
                            work.push((item, site, None));
                        }
                        continue;
                    }
                    "call" => {
                        flow.calls.insert(expr.id());
                        if let Some(f) = self.callee_of_node(expr) {
                            flow.returning.insert(f);
                            if returned.insert((f, i)) {
                                for &(r, rs) in &self.scope(f).returns {
                                    work.push((r, rs, Some(i)));
                                }
                            }
                            continue;
                        }
                        // `for a, b in zip(xs, ys)`: position i is the i-th iterable.
                        if expr.field("function").map(|f| self.text(f)) == Some("zip") {
                            if let Some(a) = self.positional_args(expr).nth(i as usize) {
                                work.push((a, site, None));
                                continue;
                            }
                        }
                    }
                    _ => {}
                }
            }
            let mut stack = vec![expr];
            while let Some(n) = stack.pop() {
                match n.kind_str() {
                    "identifier" => {
                        self.flow_into_name(n, site, &mut flow);
                        continue;
                    }
                    "attribute" => {
                        let attr = n.field("attribute").map_or("", |a| self.text(a));
                        let key = self.name_key(n, site.scope);
                        // `self.data` that the class assigns (`self.data = []`) is its
                        // own attribute, not a tensor's detached `.data`.
                        let own = matches!(key, Some(k @ NameKey::Attr(..)) if self.names.contains_key(&k));
                        if names::is_non_graph_attribute(attr) && !own {
                            continue;
                        }
                        if let Some(k @ NameKey::Attr(..)) = key {
                            if flow.attrs.insert(k) {
                                for &b in self.names.get(&k).map(Vec::as_slice).unwrap_or(&[]) {
                                    flow.mark(b);
                                }
                                if let Some(vs) = grown.attrs.get(&k) {
                                    work.extend(vs.iter().map(|g| (g.arg, g.site, None)));
                                }
                            }
                            continue;
                        }
                        // `x.attr`: only the object can carry the flow, not the name.
                        if let Some(o) = n.field("object") {
                            stack.push(o);
                        }
                        continue;
                    }
                    "call" => {
                        let func = n.field("function");
                        let detaching = func.is_some_and(|f| match f.kind_str() {
                            "attribute" => f
                                .field("attribute")
                                .is_some_and(|a| names::is_detaching_method(self.text(a))),
                            "identifier" => names::is_detaching_builtin(self.text(f)),
                            _ => false,
                        });
                        if detaching {
                            continue;
                        }
                        flow.calls.insert(n.id());
                        // The result of a same-file call: what the callee returns flows on.
                        if let Some(f) = self.callee_of_node(n) {
                            flow.returning.insert(f);
                            if returned.insert((f, u32::MAX)) {
                                for &(r, rs) in &self.scope(f).returns {
                                    work.push((r, rs, None));
                                }
                            }
                        }
                    }
                    _ => {}
                }
                for ch in n.named_children(&mut c) {
                    stack.push(ch);
                }
            }
        }
        flow
    }

    pub(super) fn grown(&self) -> &Grown<'a> {
        self.memo.grown.get_or_init(|| {
            let mut grown = Grown::default();
            for call in &self.calls {
                let Some((container, method)) = self.method_call(call) else {
                    continue;
                };
                if !names::GROWTH_METHODS.contains(&method) {
                    continue;
                }
                let container = unwrap_parens(container);
                let args = self
                    .positional_args(call.node)
                    .enumerate()
                    .map(|(i, arg)| GrownArg {
                        arg,
                        site: call.site,
                        index_only: method == "insert" && i == 0,
                    });
                match self.name_key(container, call.site.scope) {
                    Some(k @ NameKey::Attr(..)) => grown.attrs.entry(k).or_default().extend(args),
                    Some(NameKey::Local(..)) => {
                        if let Some(b) = self.resolve(container, call.site, container.start_byte())
                        {
                            grown.locals.entry(b).or_default().extend(args);
                        }
                    }
                    None => {}
                }
            }
            grown
        })
    }

    /// What the elements of the container bound by `b` carry, when it starts empty
    /// (`xs = []`, `xs = list()`) and is only grown: a graph if some grown value carries
    /// one, detached if every one is detached (`losses.append(loss.item())` makes
    /// `sum(losses)` a number), unknown otherwise.
    fn grown_elements(&self, b: BindingId, d: u32) -> Value {
        let grown = self.grown();
        let list = match self.name_key_of_binding(b) {
            Some(k @ NameKey::Attr(..)) => grown.attrs.get(&k),
            _ => grown.locals.get(&b),
        };
        let Some(list) = list else {
            return Value::Unknown;
        };
        join_all(
            list.iter()
                .filter(|g| !g.index_only)
                .map(|g| self.eval(g.arg, g.site, d)),
        )
    }

    /// The expression bound: the value itself, or element `index` of a literal tuple.
    fn element_node<'n>(&self, val: Node<'n>, index: Option<u32>) -> Option<Node<'n>> {
        let val = unwrap_parens(val);
        let Some(i) = index else { return Some(val) };
        if !matches!(val.kind_str(), "tuple" | "list" | "expression_list") {
            return None;
        }
        let mut c = val.walk();
        let item = val
            .named_children(&mut c)
            .filter(|n| n.kind_str() != "comment")
            .nth(i as usize);
        item
    }

    /// Whether the name `expr` read at `site` was bound to a list that starts empty
    /// (`preds = []`, `a, b = [], []`), so `+=` on it grows a list.
    pub fn is_list_binding(&self, expr: Node<'_>, site: Site) -> bool {
        let Some(b) = self.resolve(expr, site, expr.start_byte()) else {
            return false;
        };
        // Back through earlier `+=` links to the binding the list starts from.
        let mut b = b;
        for _ in 0..64 {
            let bd = &self.bindings[b];
            match bd.kind {
                BindingKind::Augmented => match self.previous_binding(b) {
                    Some(p) => b = p,
                    None => return false,
                },
                BindingKind::Assign => {
                    return bd
                        .value
                        .and_then(|v| self.element_node(v, bd.index))
                        .is_some_and(|e| self.is_empty_list(e));
                }
                _ => return false,
            }
        }
        false
    }

    /// `[]` or `list()`.
    fn is_empty_list(&self, n: Node<'_>) -> bool {
        let n = unwrap_parens(n);
        match n.kind_str() {
            "list" => n.named_child_count() == 0,
            "call" => {
                n.field("function").is_some_and(|f| self.text(f) == "list")
                    && n.field("arguments")
                        .is_some_and(|a| a.named_child_count() == 0)
            }
            _ => false,
        }
    }

    /// Whether `expr` is a `torch.distributions` object built in this file: the
    /// constructor call itself, or a name (or `self.` attribute) bound to one.
    fn is_distribution(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        if depth > 8 {
            return false;
        }
        let e = unwrap_parens(expr);
        match e.kind_str() {
            "call" => e
                .field("function")
                .and_then(|f| self.qualified(f))
                .is_some_and(|q| q.is_torch() && q.has_module("distributions")),
            "identifier" | "attribute" => self
                .single_assigned_value(e, site)
                .is_some_and(|(v, s)| self.is_distribution(v, s, depth + 1)),
            _ => false,
        }
    }

    /// The value that name (or `self.` attribute) `e` reads at `site` was bound to by a
    /// plain assignment (not an unpacking), with the site of that binding.
    pub(super) fn single_assigned_value(
        &self,
        e: Node<'_>,
        site: Site,
    ) -> Option<(Node<'a>, Site)> {
        let bd = &self.bindings[self.resolve(e, site, e.start_byte())?];
        if bd.kind != BindingKind::Assign || bd.index.is_some() {
            return None;
        }
        Some((bd.value?, bd.site))
    }

    /// The positions of what the `forward` of `f` returns that carry no graph on any
    /// return (`return dist.sample(), dist` gives `[0]`), `u32::MAX` for the whole
    /// output: for the project index, so a module class of another file says it.
    pub fn detached_outputs(&self, f: ScopeId) -> Vec<u32> {
        if self.function_returns(f, None, 0) == Value::Detached {
            return vec![u32::MAX];
        }
        let width = self
            .scope(f)
            .returns
            .iter()
            .map(|&(r, _)| {
                let r = unwrap_parens(r);
                if matches!(r.kind_str(), "tuple" | "expression_list") {
                    r.named_child_count() as u32
                } else {
                    0
                }
            })
            .max()
            .unwrap_or(0)
            .min(8);
        (0..width)
            .filter(|&i| self.function_returns(f, Some(i), 0) == Value::Detached)
            .collect()
    }

    /// The `forward` run by `call` when it calls an instance of a module class of this
    /// file (`self.actor(state)` with `self.actor = Actor(...).to(device)`, or
    /// `net.forward(x)`).
    fn instance_forward(&self, call: Node<'_>, site: Site) -> Option<ScopeId> {
        let func = unwrap_parens(call.field("function")?);
        let callee = if func.kind_str() == "attribute"
            && func
                .field("attribute")
                .is_some_and(|a| names::FORWARD_METHODS.contains(&self.text(a)))
        {
            func.field("object")?
        } else {
            func
        };
        let class = self.constructed_class(callee, site, 0)?;
        if !self.is_module_class(class) {
            return None;
        }
        let forward = self.method_of(class, "forward", 0)?;
        // A forward that backpropagates (a meta-learning step) is a training step: a
        // caller reading its detached result is no inference (OOM301 would take it
        // for one), so its returns are not offered.
        let trains = self
            .calls_of_function(Some(forward))
            .iter()
            .any(|&c| self.backward_at(c).is_some() || self.optimizer_step(c).is_some());
        (!trains).then_some(forward)
    }

    /// The method run by calling a parameter that every same-file caller binds to an
    /// instance of one class of this file (`run_epoch(data, model, LossCompute(gen,
    /// crit))` then `loss_compute(out, y)` in `run_epoch`): its `__call__` (or a
    /// module's `forward`).
    fn passed_instance_callee(&self, call: Node<'_>, site: Site) -> Option<ScopeId> {
        let func = unwrap_parens(call.field("function")?);
        if func.kind_str() != "identifier" {
            return None;
        }
        let b = self.resolve(func, site, func.start_byte())?;
        let class = self.class_from_callers(b, usize::MAX, |arg, site| {
            self.constructed_class(arg, site, 0)
        })?;
        self.method_of(class, "__call__", 0).or_else(|| {
            self.is_module_class(class)
                .then(|| self.method_of(class, "forward", 0))
                .flatten()
        })
    }

    /// The class of this file that `expr` was constructed from.
    fn constructed_class(&self, expr: Node<'_>, site: Site, depth: u32) -> Option<ScopeId> {
        match self.constructor(expr, site, depth)? {
            Ctor::Class(c) => Some(c),
            Ctor::Import(_) => None,
        }
    }

    /// The class that `expr` was constructed from (a class of this file, or an imported
    /// name), through names, `self.` attributes whose every store agrees, and calls that
    /// return their receiver (`.to(device)`, `.cuda()`, `.eval()`).
    fn constructor(&self, expr: Node<'_>, site: Site, depth: u32) -> Option<Ctor<'a>> {
        if depth > 8 {
            return None;
        }
        let e = unwrap_parens(expr);
        match e.kind_str() {
            "call" => {
                let f = unwrap_parens(e.field("function")?);
                match f.kind_str() {
                    "identifier" => {
                        let b = self.resolve(f, site, f.start_byte())?;
                        match self.bindings[b].kind {
                            BindingKind::Definition => {
                                self.classes.get(self.text(f)).map(|&c| Ctor::Class(c))
                            }
                            BindingKind::Import => Some(Ctor::Import(self.text(f))),
                            _ => None,
                        }
                    }
                    "attribute" => {
                        let m = self.text(f.field("attribute")?);
                        let keeps = names::is_conversion_method(m)
                            || names::RETURNS_SELF_METHODS.contains(&m);
                        if !keeps {
                            return None;
                        }
                        self.constructor(f.field("object")?, site, depth + 1)
                    }
                    _ => None,
                }
            }
            "identifier" => {
                let b = self.resolve(e, site, e.start_byte())?;
                let bd = &self.bindings[b];
                if bd.kind != BindingKind::Assign || bd.index.is_some() {
                    return None;
                }
                self.constructor(bd.value?, bd.site, depth + 1)
            }
            "attribute" => {
                let key @ NameKey::Attr(..) = self.name_key(e, site.scope)? else {
                    return None;
                };
                let mut found = None;
                for &b in self.assigns.get(&key)? {
                    let bd = &self.bindings[b];
                    if bd.kind != BindingKind::Assign || bd.index.is_some() {
                        return None;
                    }
                    let c = self.constructor(bd.value?, bd.site, depth + 1)?;
                    if found.is_some_and(|f| f != c) {
                        return None;
                    }
                    found = Some(c);
                }
                found
            }
            _ => None,
        }
    }

    /// Whether `call` runs the forward of a module class of another project file that
    /// returns no graph at `index` (`u32::MAX`: the whole output).
    /// The name by which `func` calls a function of another file: an imported name
    /// (`get_numpy`), or a function of an imported module (`ptu.get_numpy`).
    fn imported_function(&self, func: Node<'_>, site: Site) -> Option<&'a str> {
        let imported = |n: Node<'_>| {
            n.kind_str() == "identifier"
                && self
                    .resolve(n, site, n.start_byte())
                    .is_some_and(|b| self.bindings[b].kind == BindingKind::Import)
        };
        let ok = match func.kind_str() {
            "identifier" => imported(func),
            "attribute" => func.field("object").is_some_and(imported),
            _ => false,
        };
        ok.then(|| self.text(func))
    }

    fn imported_forward_detached(&self, call: Node<'_>, site: Site, index: u32) -> bool {
        let Some(p) = self.project() else {
            return false;
        };
        let Some(func) = call.field("function").map(unwrap_parens) else {
            return false;
        };
        let callee = if func.kind_str() == "attribute"
            && func
                .field("attribute")
                .is_some_and(|a| names::FORWARD_METHODS.contains(&self.text(a)))
        {
            match func.field("object") {
                Some(o) => o,
                None => return false,
            }
        } else {
            func
        };
        match self.constructor(callee, site, 0) {
            Some(Ctor::Import(name)) => p
                .detached_forward(name)
                .is_some_and(|d| d.contains(&index) || d.contains(&u32::MAX)),
            _ => false,
        }
    }

    /// The key of the name a binding binds.
    fn name_key_of_binding(&self, b: BindingId) -> Option<NameKey<'a>> {
        let bd = &self.bindings[b];
        Some(match bd.owner {
            o if self.scope(o).kind == ScopeKind::Class => NameKey::Attr(o, bd.name),
            o => NameKey::Local(o, bd.name),
        })
    }

    /// A local read at `n` flows into a backward: the binding it reaches, or every
    /// binding of the name where the read cannot be placed (a loop-carried value).
    fn flow_into_name(&self, n: Node<'a>, site: Site, flow: &mut BackwardFlow<'a>) {
        match self.resolve(n, site, n.start_byte()) {
            Some(b) => flow.mark(b),
            None => {
                let key = NameKey::Local(site.scope, self.text(n));
                for &b in self.names.get(&key).map(Vec::as_slice).unwrap_or(&[]) {
                    flow.mark(b);
                }
            }
        }
    }

    /// Queues what flows into the binding `b` (marked as flowing into a backward): its
    /// value, the previous value of a `+=`, and for a parameter the arguments its
    /// same-file callers pass.
    fn expand_binding(
        &self,
        b: BindingId,
        flow: &mut BackwardFlow<'a>,
        work: &mut Vec<FlowItem<'a>>,
    ) {
        let bd = &self.bindings[b];
        match bd.kind {
            BindingKind::Assign | BindingKind::ForTarget => {
                if let Some(v) = bd.value {
                    work.push((v, bd.site, bd.index));
                }
            }
            BindingKind::Augmented => {
                if let Some(v) = bd.value {
                    work.push((v, bd.site, None));
                }
                if let Some(p) = self.previous_binding(b) {
                    flow.mark(p);
                }
            }
            BindingKind::Parameter => {
                for &call in &self.callers[bd.owner] {
                    if let Some(a) = self.argument_for(b, call) {
                        work.push((a, self.calls[call].site, None));
                    }
                }
            }
            _ => {}
        }
    }
}

/// An argument of a growth call (`xs.append(v)`, `xs.insert(0, v)`) and where it stands.
#[derive(Clone, Copy)]
pub(super) struct GrownArg<'a> {
    pub arg: Node<'a>,
    pub site: Site,
    /// The index of `insert(index, value)`, not a stored value.
    pub index_only: bool,
}

/// What is grown into containers, by the binding a local container resolves to and by
/// key for a `self.` attribute.
#[derive(Default)]
pub(super) struct Grown<'a> {
    pub locals: FxHashMap<BindingId, Vec<GrownArg<'a>>>,
    pub attrs: FxHashMap<NameKey<'a>, Vec<GrownArg<'a>>>,
}

/// An expression that flows into a backward, where it stands, and the position wanted
/// when it is the value of an unpacking.
type FlowItem<'a> = (Node<'a>, Site, Option<u32>);

/// What flows into a backward pass in a file (see `compute_backward_flow`).
#[derive(Default)]
pub(super) struct BackwardFlow<'a> {
    /// `self.` attributes, by class.
    attrs: FxHashSet<NameKey<'a>>,
    /// Bindings of names (locals, parameters, and the stores of those attributes).
    bindings: FxHashSet<BindingId>,
    /// Bindings marked but not yet followed.
    pending: Vec<BindingId>,
    /// Functions of the file whose results flow into a backward: pieces of a training
    /// step (`loss = compute_loss(batch, net, target_net)`).
    returning: FxHashSet<ScopeId>,
    /// Calls whose results flow into a backward, by node id.
    calls: FxHashSet<usize>,
}

impl BackwardFlow<'_> {
    fn mark(&mut self, b: BindingId) {
        if self.bindings.insert(b) {
            self.pending.push(b);
        }
    }
}

/// A value guessed from a name alone (parameters, attributes set in other files).
fn name_value(name: &str) -> Value {
    if names::is_model_name(name) {
        Value::Module
    } else if names::is_optimizer_name(name) {
        Value::Optimizer
    } else if matches!(
        name,
        "criterion" | "criteria" | "crit" | "loss_fn" | "loss_func" | "lossfn" | "loss_function"
    ) {
        Value::LossFn
    } else {
        Value::Unknown
    }
}

/// Arithmetic: a graph operand makes a graph; detached with detached stays detached.
fn join_arith(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Graph(o), _) | (_, Value::Graph(o)) => Value::Graph(o),
        (Value::Detached, Value::Detached) => Value::Detached,
        _ => Value::Unknown,
    }
}

fn join_all(values: impl Iterator<Item = Value>) -> Value {
    let mut acc: Option<Value> = None;
    for v in values {
        acc = Some(match acc {
            None => v,
            Some(a) => match (a, v) {
                (Value::Graph(o), _) | (_, Value::Graph(o)) => Value::Graph(o),
                (Value::Detached, Value::Detached) => Value::Detached,
                _ => Value::Unknown,
            },
        });
    }
    match acc {
        Some(Value::Graph(o)) => Value::Graph(o),
        Some(Value::Detached) => Value::Detached,
        _ => Value::Unknown,
    }
}

impl<'a> SemanticModel<'a> {
    /// Whether the container or accumulator `expr`, used at `site`, survives from one
    /// iteration to the next: a `self.` attribute, a parameter, a global, or a name
    /// bound before the innermost loop. A name bound earlier in the same iteration (or
    /// the same call of a per-step function) is fresh each time.
    /// Whether a graph stored into `container` at `site` stays alive across steps: the
    /// store runs once per step with grad enabled, the container outlives the
    /// iteration, and it is not itself backpropagated later (summing losses before one
    /// `backward()` is intended).
    pub fn keeps_graph_alive(&self, container: Node<'_>, site: Site) -> bool {
        self.iteration(site).is_some()
            && self.grad_enabled(site)
            && self.lives_across_iterations(container, site)
            && !self.fresh_per_outer_step(container, site)
            && !self.flows_into_backward(container, site)
            && !self.read_by_numpy(container, site)
    }

    /// Positions of the parameters of the function `f` that flow into a backward pass
    /// (for the project index: what a call from another file hands to a backward).
    pub fn backward_params(&self, f: ScopeId) -> Vec<u32> {
        let flow = self.backward_flow();
        self.params_where(f, |p| {
            self.names
                .get(&NameKey::Local(f, p))
                .and_then(|bs| bs.first())
                .is_some_and(|b| {
                    self.bindings[*b].kind == BindingKind::Parameter && flow.bindings.contains(b)
                })
        })
    }

    /// Whether the value of `expr` (a name or `self.` attribute at `site`) is later
    /// read by `.numpy()` without a detach (`total.cpu().numpy()`), through `+=`
    /// updates: `.numpy()` raises on a tensor that requires grad, so code that does
    /// this proves the value carries no graph (a frozen or scripted model).
    pub fn read_by_numpy(&self, expr: Node<'_>, site: Site) -> bool {
        let Some(b) = self.resolve(expr, site, expr.start_byte()) else {
            return false;
        };
        self.memo
            .numpy_reads
            .get_or_init(|| self.compute_numpy_reads())
            .contains(&b)
    }

    fn compute_numpy_reads(&self) -> FxHashSet<BindingId> {
        let mut set = FxHashSet::default();
        for c in &self.calls {
            if c.function.kind_str() != "attribute"
                || c.function.field("attribute").map(|a| self.text(a)) != Some("numpy")
            {
                continue;
            }
            // `x.cpu().numpy()`, `x.to("cpu").numpy()`: conversions keep requires_grad.
            let Some(mut recv) = c.function.field("object").map(unwrap_parens) else {
                continue;
            };
            while recv.kind_str() == "call" {
                let Some(f) = recv
                    .field("function")
                    .filter(|f| f.kind_str() == "attribute")
                else {
                    break;
                };
                if !f
                    .field("attribute")
                    .is_some_and(|a| names::is_conversion_method(self.text(a)))
                {
                    break;
                }
                match f.field("object") {
                    Some(o) => recv = unwrap_parens(o),
                    None => break,
                }
            }
            if !matches!(recv.kind_str(), "identifier" | "attribute") {
                continue;
            }
            let mut b = self.resolve(recv, c.site, recv.start_byte());
            // Back through the `+=` chain to the binding it starts from.
            while let Some(id) = b {
                if !set.insert(id) || self.bindings[id].kind != BindingKind::Augmented {
                    break;
                }
                b = self.previous_binding(id);
            }
        }
        set
    }

    /// Whether the `self.` attribute `attr` of `class` flows into a backward pass.
    /// The file's backward flow, computed once.
    fn backward_flow(&self) -> &BackwardFlow<'a> {
        self.memo
            .backward_flow
            .get_or_init(|| self.compute_backward_flow())
    }

    pub(super) fn attr_flows_into_backward(&self, class: ScopeId, attr: &'a str) -> bool {
        let flow = self.backward_flow();
        flow.attrs.contains(&NameKey::Attr(class, attr))
    }

    /// Whether what function `f` returns is backpropagated by a caller, in this file or
    /// (by the project index) in another: `f` computes part of a training step's loss,
    /// so it runs between training steps the way the loop's own body does.
    pub fn returns_into_backward(&self, f: ScopeId) -> bool {
        // Model code: what a module's methods return reaches "a backward" through the
        // module's own `forward` (see `compute_backward_flow`), whoever calls it.
        if self.scope(f).class.is_some_and(|c| self.is_module_class(c)) {
            return false;
        }
        let flow = self.backward_flow();
        // A helper returning only numbers (`get_action` ending in `.item()`) may feed the
        // loss's data, not its graph.
        let graph = || {
            self.scope(f)
                .returns
                .iter()
                .any(|&(r, site)| self.value(r, site) != Value::Detached)
        };
        (flow.returning.contains(&f)
            || self.project().is_some_and(|p| {
                crate::project::qualname(self, f).is_some_and(|name| p.training_caller(&name))
            }))
            && graph()
    }

    /// Whether the value of the call at `call` (a call node) flows into a backward in
    /// this file.
    pub fn call_flows_into_backward(&self, call: Node<'_>) -> bool {
        let flow = self.backward_flow();
        flow.calls.contains(&call.id())
    }

    /// Whether the name `expr` (at `site`) is, or flows into, something backpropagated
    /// in its function: `losses` in `torch.stack(losses).sum().backward()`.
    pub fn flows_into_backward(&self, expr: Node<'_>, site: Site) -> bool {
        self.flows_into_backward_at(expr, site, expr.start_byte())
    }

    /// [`Self::flows_into_backward`] for a name that assignment `stmt` binds: the value
    /// bound there, not the one the name held before. In a loop the earlier value is
    /// the previous iteration's (`q = net(s).max(1)[0]; q = q.detach()`: the detached
    /// rebinding feeds the loss, the forward's own value does not).
    pub fn bound_flows_into_backward(&self, target: Node<'_>, stmt: Node<'_>, site: Site) -> bool {
        self.flows_into_backward_at(target, site, stmt.end_byte())
    }

    fn flows_into_backward_at(&self, expr: Node<'_>, site: Site, at: usize) -> bool {
        let Some(key) = self.name_key(expr, site.scope) else {
            return false;
        };
        let flow = self.backward_flow();
        match key {
            NameKey::Attr(..) => flow.attrs.contains(&key),
            NameKey::Local(..) => match self.resolve(expr, site, at) {
                Some(b) => flow.bindings.contains(&b),
                None => self
                    .names
                    .get(&key)
                    .is_some_and(|bs| bs.iter().any(|b| flow.bindings.contains(b))),
            },
        }
    }

    /// Whether an expression's value carries an autograd graph at `site`.
    pub fn value(&self, expr: Node<'_>, site: Site) -> Value {
        self.eval(expr, site, 0)
    }

    /// The accumulation (`total_loss += loss`, `total = total + loss`) that built up the
    /// graph `expr` carries at `site`, when its value comes from one: found by following
    /// the names `expr` reads back through their bindings. A finding on a value derived
    /// from an accumulator (`history.append((avg, acc))` after `avg = total_loss / n`)
    /// names with it the line that made the value carry every step's graph. The walk is
    /// iterative and bounded; `None` when it finds no accumulation of a graph.
    pub fn graph_accumulation(&self, expr: Node<'_>, site: Site) -> Option<Node<'a>> {
        /// Bindings and expressions looked at before giving up.
        const BUDGET: usize = 512;
        enum Item<'n> {
            Expr(Node<'n>, Site),
            Binding(BindingId),
        }
        let mut work = vec![Item::Expr(expr, site)];
        let mut seen: FxHashSet<BindingId> = FxHashSet::default();
        let mut spent = 0;
        while let Some(item) = work.pop() {
            spent += 1;
            if spent > BUDGET {
                return None;
            }
            let b = match item {
                Item::Binding(b) => b,
                Item::Expr(n, s) => {
                    for name in self.names_read(n, BUDGET) {
                        if let Some(b) = self.resolve(name, s, name.start_byte()) {
                            work.push(Item::Binding(b));
                        }
                    }
                    continue;
                }
            };
            if !seen.insert(b) {
                continue;
            }
            let bd = &self.bindings[b];
            let Some(value) = bd.value else { continue };
            match self.accumulation(b) {
                Some((stmt, added)) => {
                    if matches!(self.eval(added, bd.site, 0), Value::Graph(_)) {
                        return Some(stmt);
                    }
                    // What was accumulated before this step may carry the graph.
                    if let Some(p) = self.previous_binding(b) {
                        work.push(Item::Binding(p));
                    }
                    if bd.kind == BindingKind::Assign {
                        work.push(Item::Expr(added, bd.site));
                    }
                }
                None if bd.kind == BindingKind::Assign => work.push(Item::Expr(value, bd.site)),
                None => {}
            }
        }
        None
    }

    /// The binding `b` as an accumulation: its statement and the value it adds, for
    /// `t += v` / `t -= v` and `t = t + v` / `t = v + t` / `t = t - v`.
    fn accumulation(&self, b: BindingId) -> Option<(Node<'a>, Node<'a>)> {
        let bd = &self.bindings[b];
        let value = bd.value?;
        let stmt = value.parent()?;
        match bd.kind {
            BindingKind::Augmented => {
                let op = stmt.field("operator").map(|o| self.text(o));
                matches!(op, Some("+=" | "-=")).then_some((stmt, value))
            }
            BindingKind::Assign if bd.index.is_none() && stmt.kind_str() == "assignment" => {
                let target = self.text(unwrap_parens(stmt.field("left")?));
                let v = unwrap_parens(value);
                if v.kind_str() != "binary_operator" {
                    return None;
                }
                let op = v.field("operator").map(|o| self.text(o));
                let (l, r) = (v.field("left")?, v.field("right")?);
                if !matches!(op, Some("+" | "-")) {
                    return None;
                }
                if self.text(unwrap_parens(l)) == target {
                    Some((stmt, r))
                } else if self.text(unwrap_parens(r)) == target && op == Some("+") {
                    Some((stmt, l))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The names (`x`, `self.x`) an expression reads, at most `limit` nodes looked at:
    /// not attribute names after a dot, nor keyword names of a call.
    pub(super) fn names_read<'n>(&self, expr: Node<'n>, limit: usize) -> Vec<Node<'n>> {
        let mut out = Vec::new();
        let mut stack = vec![expr];
        let mut looked = 0;
        while let Some(n) = stack.pop() {
            looked += 1;
            if looked > limit {
                break;
            }
            match n.kind_str() {
                "identifier" => out.push(n),
                "attribute" => {
                    let obj = n.field("object").map(unwrap_parens);
                    if obj.is_some_and(|o| o.kind_str() == "identifier") {
                        out.push(n);
                    }
                    stack.extend(obj);
                }
                "keyword_argument" => stack.extend(n.field("value")),
                // A nested function or lambda reads its own names.
                "lambda" | "function_definition" => {}
                _ => {
                    let mut c = n.walk();
                    let children: Vec<Node<'n>> = n.named_children(&mut c).collect();
                    stack.extend(children.into_iter().rev());
                }
            }
        }
        out
    }

    /// True when some evaluation hit the depth limit (deeply nested code): the result
    /// was treated as unknown.
    pub fn depth_limited(&self) -> bool {
        self.memo.depth_exceeded.get()
    }
}

/// What a value was constructed from: a class of this file, or an imported name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctor<'a> {
    Class(ScopeId),
    Import(&'a str),
}

/// A method that appends one of its parameters to a list held on `self`.
#[derive(Clone, Copy, Debug)]
pub struct AppendedParameter<'a> {
    /// The parameter's position among a call's arguments (`self` not counted).
    pub position: u32,
    /// The attribute holding the list (`data` in `self.data.append(x)`).
    pub attr: &'a str,
    /// `self.data` at the append, and where the append is: what the class does with
    /// the list (a backward over it, a NumPy read) is asked of it.
    pub list: Node<'a>,
    pub site: Site,
}

impl<'a> SemanticModel<'a> {
    /// Whether the call `.to(...)` / `.type(...)` names an integer or boolean torch
    /// dtype among its arguments (positional or `dtype=`).
    fn converts_to_integer(&self, call: Node<'_>) -> bool {
        let is_int = |a: Node<'_>| {
            let a = unwrap_parens(a);
            a.kind_str() == "attribute"
                && self.qualified(a).is_some_and(|q| {
                    q.is_torch()
                        && q.segments().len() == 2
                        && q.last().is_some_and(names::is_integer_dtype)
                })
        };
        self.positional_args(call).any(is_int)
            || self.keyword_arg(call, "dtype").is_some_and(is_int)
    }

    /// Whether `v` computes an integer or boolean tensor: a comparison (a mask), a
    /// count of one (`torch.sum(ids != 0, dim=-1)`, `mask.sum(1)`), indices
    /// (`argmax`, `nonzero`), or a conversion to such a dtype. Converting one to float
    /// for arithmetic makes a new value, not a second copy of weights.
    pub fn integer_tensor(&self, v: Node<'_>) -> bool {
        let v = unwrap_parens(v);
        match v.kind_str() {
            "comparison_operator" => true,
            "call" => {
                let Some(f) = v.field("function").map(unwrap_parens) else {
                    return false;
                };
                let last = match f.kind_str() {
                    "attribute" => f.field("attribute").map_or("", |a| self.text(a)),
                    _ => self.text(f),
                };
                let torch_fn = self.qualified(f).is_some_and(|q| q.is_torch());
                match last {
                    "long" | "int" | "bool" | "byte" | "short" | "argmax" | "argmin"
                    | "nonzero" | "count_nonzero" => true,
                    "to" | "type" => self.converts_to_integer(v),
                    // A count: the sum of a mask, as a torch function or a method.
                    "sum" => {
                        let of = if torch_fn {
                            self.positional_args(v).next()
                        } else {
                            f.field("object")
                        };
                        of.is_some_and(|o| self.integer_tensor(o))
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Modules known by what is done with them: names per enclosing function, `self.`
/// attributes per class.
#[derive(Default)]
pub struct ModuleArgs<'a> {
    pub locals: FxHashSet<(Option<ScopeId>, &'a str)>,
    pub attrs: FxHashSet<(ScopeId, &'a str)>,
}

impl<'a> SemanticModel<'a> {
    /// The parameters of function `f` (its receiver left out) on which a method only
    /// modules have is called (`target.parameters()` in a `soft_update(target, source,
    /// tau)`): what a caller hands there is a module.
    pub fn module_params(&self, f: ScopeId) -> Vec<u32> {
        self.params_where(f, |p| self.module_receivers.contains(&(Some(f), p)))
    }

    /// Positions (the receiver left out) of the parameters of `f` that `keep` accepts.
    pub(super) fn params_where(&self, f: ScopeId, keep: impl Fn(&'a str) -> bool) -> Vec<u32> {
        let sc = self.scope(f);
        let skip = usize::from(sc.self_param().is_some());
        sc.params
            .iter()
            .enumerate()
            .skip(skip)
            .filter(|&(_, p)| keep(p))
            .map(|(i, _)| (i - skip) as u32)
            .collect()
    }

    /// Modules known by what is done with them beyond `name.parameters()` in the same
    /// function: a `self.` attribute that a module-only method is called on
    /// (`self.qf.parameters()` in `__init__`), and what is handed to a same-file or
    /// project function at a parameter it uses so (`soft_update(self.target_qf,
    /// self.qf, tau)`, `ptu.copy_model_params_from_to(self.qf, self.target_qf)`).
    pub fn module_args(&self) -> &ModuleArgs<'a> {
        self.memo.module_args.get_or_init(|| {
            let mut out = ModuleArgs::default();
            let mark = |out: &mut ModuleArgs<'a>, a: Node<'a>, site: Site| {
                let a = unwrap_parens(a);
                match a.kind_str() {
                    "identifier" => {
                        out.locals
                            .insert((self.function_of(site.scope), self.text(a)));
                    }
                    "attribute" => {
                        if let Some(NameKey::Attr(class, attr)) = self.name_key(a, site.scope) {
                            out.attrs.insert((class, attr));
                        }
                    }
                    _ => {}
                }
            };
            let facts = self.project();
            for (i, c) in self.calls.iter_enumerated() {
                if let Some((recv, method)) = self.method_call(c) {
                    if recv.kind_str() == "attribute" && names::is_module_only_method(method) {
                        mark(&mut out, recv, c.site);
                    }
                }
                let positions: Vec<u32> = match self.callees[i] {
                    Some(g) => self.module_params(g),
                    None => match (unwrap_parens(c.function).kind_str(), facts) {
                        ("identifier" | "attribute", Some(facts)) => facts
                            .module_params(self.text(c.function))
                            .map(<[u32]>::to_vec)
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    },
                };
                for p in positions {
                    if let Some(a) = self.positional_args(c.node).nth(p as usize) {
                        mark(&mut out, a, c.site);
                    }
                }
            }
            out
        })
    }
}
