//! The one pass over the syntax tree that collects the model's facts. Iterative (a
//! tree cursor and explicit context stacks), so nesting depth cannot overflow the stack.

use rustc_hash::{FxHashMap, FxHashSet};
use tree_sitter::{Node, Tree};

use super::names::{self, QualName};
use super::*;

static IDENTIFIER: std::sync::LazyLock<u16> = std::sync::LazyLock::new(|| {
    tree_sitter::Language::from(tree_sitter_python::LANGUAGE).id_for_node_kind("identifier", true)
});

/// A context entered at a node and left when the walk leaves that node.
struct Frame {
    node_id: usize,
    kind: FrameKind,
}

enum FrameKind {
    Scope(ScopeId),
    /// The loop to restore (or enter): `None` outside any loop.
    Loop(Option<LoopId>),
    Grad(GradMode),
}

/// A context that starts at a child (a loop's body, a `with` block), not at the node
/// where it is discovered.
struct Pending {
    node_id: usize,
    kind: FrameKind,
}

struct Builder<'a> {
    m: SemanticModel<'a>,
    frames: Vec<Frame>,
    pending: Vec<Pending>,
    scope: ScopeId,
    /// Innermost loop per entry of the scope stack (loops don't cross function bodies).
    loop_: Option<LoopId>,
    grad: GradMode,
    /// Names declared `global`/`nonlocal` per function scope.
    globals: Vec<(ScopeId, &'a str)>,
}

pub(super) fn build<'a>(tree: &'a Tree, source: &'a str) -> SemanticModel<'a> {
    let root = tree.root_node();
    let mut scopes = IndexVec::new();
    scopes.push(Scope {
        kind: ScopeKind::Module,
        name: "<module>",
        node: root,
        parent: None,
        bases: Vec::new(),
        class: None,
        params: Vec::new(),
        returns: Vec::new(),
    });
    let m = SemanticModel {
        source,
        root,
        scopes,
        loops: IndexVec::new(),
        calls: IndexVec::new(),
        assignments: IndexVec::new(),
        bindings: IndexVec::new(),
        backwards: Vec::new(),
        call_ids: FxHashMap::default(),
        backward_receivers: FxHashSet::default(),
        module_receivers: FxHashSet::default(),
        comments: Vec::new(),
        import_nodes: Vec::new(),
        cuda_string: false,
        first_syntax_error: None,
        names: FxHashMap::default(),
        assigns: FxHashMap::default(),
        imports: FxHashMap::default(),
        functions: FxHashMap::default(),
        classes: FxHashMap::default(),
        callees: IndexVec::new(),
        callers: IndexVec::new(),
        loop_callees: IndexVec::new(),
        hook_callees: Vec::new(),
        calls_by_function: IndexVec::new(),
        memo: Memos::default(),
        project: None,
        fact_log: Default::default(),
    };
    let mut b = Builder {
        m,
        frames: Vec::new(),
        pending: Vec::new(),
        scope: ScopeId::MODULE,
        loop_: None,
        grad: GradMode::Default,
        globals: Vec::new(),
    };
    b.walk(root);
    b.finish()
}

impl<'a> Builder<'a> {
    fn site(&self) -> Site {
        Site {
            scope: self.scope,
            loop_: self.loop_,
            grad: self.grad,
        }
    }

    fn text(&self, n: Node<'_>) -> &'a str {
        self.m.text(n)
    }

    fn walk(&mut self, root: Node<'a>) {
        let mut cursor = root.walk();
        'outer: loop {
            let node = cursor.node();
            self.enter(node);
            if !self.opaque(node) && cursor.goto_first_child() {
                continue;
            }
            loop {
                self.leave(cursor.node());
                if cursor.goto_next_sibling() {
                    continue 'outer;
                }
                if !cursor.goto_parent() {
                    break 'outer;
                }
            }
        }
    }

    /// Subtrees that hold no fact: imports (read whole where they are entered) and plain
    /// strings. An f-string's interpolations are code, and a subtree with a syntax error
    /// is entered so the error's position is found.
    fn opaque(&self, node: Node<'a>) -> bool {
        match node.kind_str() {
            "import_statement" | "import_from_statement" => !node.has_error(),
            "string" => {
                !node.has_error()
                    && !node
                        .child(0)
                        .is_some_and(|start| self.text(start).bytes().any(|c| c | 0x20 == b'f'))
            }
            _ => false,
        }
    }

    fn push(&mut self, node_id: usize, kind: FrameKind) {
        match kind {
            FrameKind::Scope(s) => {
                // Save the outer loop and grad mode in a frame below the scope's.
                self.frames.push(Frame {
                    node_id,
                    kind: FrameKind::Loop(self.loop_),
                });
                self.frames.push(Frame {
                    node_id,
                    kind: FrameKind::Grad(self.grad),
                });
                self.frames.push(Frame {
                    node_id,
                    kind: FrameKind::Scope(self.scope),
                });
                self.scope = s;
                self.loop_ = None;
                // The grad mode around a `def` carries into its body (a nested function
                // of an `@torch.no_grad()` function runs without grad); where nothing is
                // written, it stays `Default` and comes from the callers.
            }
            FrameKind::Loop(l) => {
                self.frames.push(Frame {
                    node_id,
                    kind: FrameKind::Loop(self.loop_),
                });
                self.loop_ = l;
            }
            FrameKind::Grad(g) => {
                self.frames.push(Frame {
                    node_id,
                    kind: FrameKind::Grad(self.grad),
                });
                self.grad = g;
            }
        }
    }

    fn leave(&mut self, node: Node<'a>) {
        let id = node.id();
        while let Some(f) = self.frames.last() {
            if f.node_id != id {
                break;
            }
            let f = self.frames.pop().expect("frame");
            match f.kind {
                FrameKind::Scope(s) => self.scope = s,
                FrameKind::Loop(l) => self.loop_ = l,
                FrameKind::Grad(g) => self.grad = g,
            }
        }
    }

    fn enter(&mut self, node: Node<'a>) {
        if let Some(i) = self.pending.iter().rposition(|p| p.node_id == node.id()) {
            let p = self.pending.remove(i);
            self.push(p.node_id, p.kind);
        }
        if self.m.first_syntax_error.is_none() && (node.is_error() || node.is_missing()) {
            self.m.first_syntax_error = Some(node.start_byte());
        }
        // Punctuation, keywords and plain names are most of the nodes and never start a
        // fact: skip the kind dispatch for them.
        if !node.is_named() || node.kind_id() == *IDENTIFIER {
            return;
        }
        match node.kind_str() {
            "function_definition" => self.enter_function(node),
            "lambda" => self.enter_lambda(node),
            "class_definition" => self.enter_class(node),
            "for_statement" => self.enter_loop(node, LoopKind::For),
            "while_statement" => self.enter_loop(node, LoopKind::While),
            "for_in_clause" => {
                if let Some(left) = node.field("left") {
                    let value = node.field("right");
                    self.bind_target(left, value, BindingKind::ForTarget, left.end_byte());
                }
            }
            "with_statement" => self.enter_with(node),
            "call" => self.enter_call(node),
            "assignment" => self.enter_assignment(node, AssignOp::Plain),
            "augmented_assignment" => {
                let op = node.field("operator").map(|o| self.text(o)).unwrap_or("");
                self.enter_assignment(node, AssignOp::Augmented(op));
            }
            "expression_statement" => self.enter_statement(node),
            "return_statement" => {
                if let Some(v) = node.named_child(0) {
                    if v.kind_str() != "comment" {
                        if let Some(f) = self.m.function_of(self.scope) {
                            let site = self.site();
                            self.m.scopes[f].returns.push((v, site));
                        }
                    }
                }
            }
            "import_statement" | "import_from_statement" => {
                self.m.import_nodes.push(node);
                self.enter_import(node)
            }
            "comment" => self.m.comments.push(node),
            "string" if !self.m.cuda_string => self.m.cuda_string = self.m.is_cuda_string(node),
            "global_statement" | "nonlocal_statement" => {
                let mut c = node.walk();
                for n in node.named_children(&mut c) {
                    if n.kind_str() == "identifier" {
                        let name = self.text(n);
                        self.globals.push((self.scope, name));
                    }
                }
            }
            _ => {}
        }
    }

    fn new_scope(&mut self, scope: Scope<'a>) -> ScopeId {
        self.m.scopes.push(scope)
    }

    fn enter_function(&mut self, node: Node<'a>) {
        let name = node.field("name").map(|n| self.text(n)).unwrap_or("");
        let mut decorators = Vec::new();
        if let Some(p) = node
            .parent()
            .filter(|p| p.kind_str() == "decorated_definition")
        {
            let mut c = p.walk();
            for d in p.named_children(&mut c) {
                if d.kind_str() == "decorator" {
                    if let Some(e) = d.named_child(0) {
                        decorators.push(e);
                    }
                }
            }
        }
        let params = self.params_of(node);
        let parent = self.scope;
        let class = (self.m.scope(parent).kind == ScopeKind::Class).then_some(parent);
        // The name is bound in the enclosing scope.
        self.m
            .functions
            .entry((parent, name))
            .or_insert(self.m.scopes.next_id());
        self.add_binding(
            NameKey::Local(parent, name),
            BindingKind::Definition,
            name,
            None,
            None,
            node.start_byte(),
        );
        let grad = decorators
            .iter()
            .filter_map(|d| {
                self.grad_effect(*d)
                    .or_else(|| self.wrapping_grad_effect(*d))
            })
            .last()
            .or_else(|| {
                (class.is_some() && names::is_no_grad_hook(name)).then_some(GradMode::Disabled)
            });
        let id = self.new_scope(Scope {
            kind: ScopeKind::Function,
            name,
            node,
            parent: Some(parent),
            bases: Vec::new(),
            class,
            params,
            returns: Vec::new(),
        });
        self.push(node.id(), FrameKind::Scope(id));
        if let Some(g) = grad {
            self.push(node.id(), FrameKind::Grad(g));
        }
        self.bind_params(id, node);
    }

    fn params_of(&self, def: Node<'a>) -> Vec<&'a str> {
        let mut params = Vec::new();
        if let Some(ps) = def.field("parameters") {
            let mut c = ps.walk();
            for p in ps.named_children(&mut c) {
                if let Some(id) = param_name(p) {
                    params.push(self.text(id));
                }
            }
        }
        params
    }

    /// Binds a function's (or lambda's) parameters in its scope.
    fn bind_params(&mut self, scope: ScopeId, def: Node<'a>) {
        for i in 0..self.m.scope(scope).params.len() {
            let p = self.m.scope(scope).params[i];
            self.add_binding(
                NameKey::Local(scope, p),
                BindingKind::Parameter,
                p,
                None,
                None,
                def.start_byte(),
            );
        }
    }

    fn enter_lambda(&mut self, node: Node<'a>) {
        let params = self.params_of(node);
        let id = self.new_scope(Scope {
            kind: ScopeKind::Lambda,
            name: "<lambda>",
            node,
            parent: Some(self.scope),
            bases: Vec::new(),
            class: None,
            params,
            returns: Vec::new(),
        });
        self.push(node.id(), FrameKind::Scope(id));
        self.bind_params(id, node);
        if let Some(body) = node.field("body") {
            let site = self.site();
            self.m.scopes[id].returns.push((body, site));
        }
    }

    fn enter_class(&mut self, node: Node<'a>) {
        let name = node.field("name").map(|n| self.text(n)).unwrap_or("");
        let mut bases = Vec::new();
        if let Some(sup) = node.field("superclasses") {
            let mut c = sup.walk();
            for b in sup.named_children(&mut c) {
                if matches!(
                    b.kind_str(),
                    "identifier" | "attribute" | "subscript" | "call"
                ) {
                    bases.push(if b.kind_str() == "subscript" {
                        b.field("value").unwrap_or(b)
                    } else {
                        b
                    });
                }
            }
        }
        let parent = self.scope;
        self.add_binding(
            NameKey::Local(parent, name),
            BindingKind::Definition,
            name,
            None,
            None,
            node.start_byte(),
        );
        let id = self.new_scope(Scope {
            kind: ScopeKind::Class,
            name,
            node,
            parent: Some(parent),
            bases,
            class: None,
            params: Vec::new(),
            returns: Vec::new(),
        });
        self.m.classes.entry(name).or_insert(id);
        self.push(node.id(), FrameKind::Scope(id));
    }

    fn enter_loop(&mut self, node: Node<'a>, kind: LoopKind) {
        let Some(body) = node.field("body") else {
            return;
        };
        let id = self.m.loops.next_id();
        let iter = node.field("right");
        self.m.loops.push(Loop {
            kind,
            node,
            body,
            iter,
            scope: self.scope,
            parent: self.loop_,
        });
        self.pending.push(Pending {
            node_id: body.id(),
            kind: FrameKind::Loop(Some(id)),
        });
        if kind == LoopKind::For {
            if let Some(left) = node.field("left") {
                // The target is rebound at the top of every iteration.
                let saved = self.loop_;
                self.loop_ = Some(id);
                self.bind_target(left, iter, BindingKind::ForTarget, left.end_byte());
                self.loop_ = saved;
            }
        }
    }

    fn enter_with(&mut self, node: Node<'a>) {
        let Some(body) = node.field("body") else {
            return;
        };
        let mut c = node.walk();
        let mut grad = None;
        for clause in node.named_children(&mut c) {
            if clause.kind_str() != "with_clause" {
                continue;
            }
            let mut c2 = clause.walk();
            for item in clause.named_children(&mut c2) {
                let Some(mut value) = item.field("value") else {
                    continue;
                };
                if value.kind_str() == "as_pattern" {
                    let expr = value.named_child(0);
                    if let (Some(expr), Some(alias)) = (expr, value.field("alias")) {
                        let target = alias.named_child(0).unwrap_or(alias);
                        self.bind_target(target, Some(expr), BindingKind::WithAs, alias.end_byte());
                        value = expr;
                    }
                }
                if let Some(g) = self
                    .grad_effect(value)
                    .or_else(|| self.context_manager_grad_effect(value))
                {
                    grad = Some(g);
                }
            }
        }
        if let Some(g) = grad {
            self.pending.push(Pending {
                node_id: body.id(),
                kind: FrameKind::Grad(g),
            });
        }
    }

    /// The grad mode a decorator of this file establishes by wrapping: a function
    /// defined above (`def nograd(f): def wrapper(*a, **k): with torch.no_grad(): return
    /// f(*a, **k); return wrapper`) whose body calls its first parameter only inside a
    /// block of one of torch's grad modes.
    fn wrapping_grad_effect(&self, expr: Node<'a>) -> Option<GradMode> {
        if expr.kind_str() != "identifier" {
            return None;
        }
        let def = self.m.scopes.get(self.function_above(self.text(expr))?)?;
        let wrapped = *def.params.first()?;
        self.grad_mode_around(def.node, |n| {
            n.kind_str() == "call" && n.field("function").is_some_and(|f| self.text(f) == wrapped)
        })
    }

    /// The grad mode a context manager of this file establishes: a generator function
    /// defined above and decorated with `contextmanager`, whose `yield` stands inside
    /// one of torch's grad-mode blocks (`@contextmanager def _inference_mode(): with
    /// torch.inference_mode(): yield`).
    fn context_manager_grad_effect(&self, expr: Node<'a>) -> Option<GradMode> {
        let callee = (expr.kind_str() == "call")
            .then(|| expr.field("function"))
            .flatten()?;
        if callee.kind_str() != "identifier" {
            return None;
        }
        let node = self
            .m
            .scopes
            .get(self.function_above(self.text(callee))?)?
            .node;
        let decorated = node
            .parent()
            .filter(|d| d.kind_str() == "decorated_definition")?;
        let mut c = decorated.walk();
        if !decorated
            .named_children(&mut c)
            .any(|d| d.kind_str() == "decorator" && self.text(d).ends_with("contextmanager"))
        {
            return None;
        }
        self.grad_mode_around(node, |n| n.kind_str() == "yield")
    }

    /// The one grad mode that every node of `def`'s body matching `marker` (the call of
    /// the wrapped function, a `yield`) runs in: each stands inside a block of one of
    /// torch's grad modes, all of the same mode. `None` when one stands outside them,
    /// when the modes differ, or when none matches.
    fn grad_mode_around(
        &self,
        def: Node<'a>,
        marker: impl Fn(Node<'a>) -> bool,
    ) -> Option<GradMode> {
        let mut mode = None;
        let mut stack = vec![def.field("body")?];
        let mut budget = 4096;
        while let Some(n) = stack.pop() {
            budget -= 1;
            if budget == 0 {
                return None;
            }
            if marker(n) {
                return None;
            }
            if n.kind_str() == "with_statement" {
                let mut g = None;
                if let Some(clause) = n.named_child(0) {
                    let mut c = clause.walk();
                    for item in clause.named_children(&mut c) {
                        if let Some(e) = item.named_child(0).and_then(|v| self.grad_effect(v)) {
                            g = Some(e);
                        }
                    }
                }
                if let (Some(g), Some(body)) = (g, n.field("body")) {
                    if any_under(body, &marker) {
                        if mode.is_some_and(|m| m != g) {
                            return None;
                        }
                        mode = Some(g);
                    }
                    continue;
                }
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
        mode
    }

    /// The function `name` visible here, if it was already walked (defined above).
    fn function_above(&self, name: &str) -> Option<ScopeId> {
        let mut scope = Some(self.scope);
        let def = loop {
            let s = scope?;
            if let Some(&f) = self.m.functions.get(&(s, name)) {
                break f;
            }
            scope = self.m.scope(s).parent;
        };
        self.m.scopes.get(def).is_some().then_some(def)
    }

    /// The grad mode a context manager or decorator establishes, if it is one of torch's.
    fn grad_effect(&self, expr: Node<'a>) -> Option<GradMode> {
        // `torch.no_grad() if not needs_grad else nullcontext()`: a mode chosen at run
        // time, like `set_grad_enabled(flag)`.
        if expr.kind_str() == "conditional_expression" {
            let mut c = expr.walk();
            let parts: Vec<Node<'a>> = expr.named_children(&mut c).collect();
            let (a, b) = (
                self.grad_effect(unwrap_parens(*parts.first()?)),
                self.grad_effect(unwrap_parens(*parts.get(2)?)),
            );
            return match (a, b) {
                (None, None) => None,
                (a, b) if a == b => a,
                _ => Some(GradMode::Unknown),
            };
        }
        let (callee, call) = if expr.kind_str() == "call" {
            (expr.field("function")?, Some(expr))
        } else {
            (expr, None)
        };
        let q = self.m.qualified(callee)?;
        let segs = q.segments();
        if names::LIBRARY_NO_GRAD_CONTEXTS.contains(&segs) {
            return Some(GradMode::Disabled);
        }
        // `torch.no_grad`, `torch.autograd.grad_mode.no_grad`; `with torch:` names no mode.
        if !q.is_torch()
            || segs.len() < 2
            || segs[1..segs.len() - 1]
                .iter()
                .any(|s| !matches!(*s, "autograd" | "grad_mode"))
        {
            return None;
        }
        let first_arg = call.and_then(|c| {
            self.m
                .positional_args(c)
                .next()
                .or_else(|| self.m.keyword_arg(c, "mode"))
        });
        let arg = first_arg.map(|a| self.text(a));
        match q.last()? {
            "no_grad" => Some(GradMode::Disabled),
            "inference_mode" => match arg {
                Some("False") => None,
                Some("True") | None => Some(GradMode::Disabled),
                Some(_) => Some(GradMode::Unknown),
            },
            "enable_grad" => Some(GradMode::Enabled),
            "set_grad_enabled" => match arg {
                Some("False") => Some(GradMode::Disabled),
                Some("True") => Some(GradMode::Enabled),
                _ => Some(GradMode::Unknown),
            },
            _ => None,
        }
    }

    fn enter_statement(&mut self, node: Node<'a>) {
        // `torch.set_grad_enabled(False)` as a statement holds until the end of its block.
        let Some(expr) = node.named_child(0) else {
            return;
        };
        if expr.kind_str() != "call" {
            return;
        }
        let Some(callee) = expr.field("function") else {
            return;
        };
        let is_set = self
            .m
            .qualified(callee)
            .is_some_and(|q| q.is_torch() && q.last() == Some("set_grad_enabled"));
        if !is_set {
            return;
        }
        if let (Some(g), Some(parent)) = (self.grad_effect(expr), node.parent()) {
            self.push(parent.id(), FrameKind::Grad(g));
        }
    }

    fn enter_call(&mut self, node: Node<'a>) {
        let Some(function) = node.field("function") else {
            return;
        };
        let idx = self.m.calls.next_id();
        self.m.calls.push(Call {
            node,
            function,
            arguments: node.field("arguments"),
            site: self.site(),
        });
        if let Some((loss, distributed)) = self.backward_loss(node, function) {
            self.m.backwards.push(Backward {
                call: idx,
                loss,
                distributed,
            });
        }
    }

    /// The expression a call backpropagates: `loss` in `loss.backward()`,
    /// `scaler.scale(loss).backward()`, `accelerator.backward(loss)`,
    /// `self.manual_backward(loss)`, `torch.autograd.backward(loss)`.
    /// With whether it is a distributed-autograd backward
    /// (`torch.distributed.autograd.backward(context_id, roots)`).
    fn backward_loss(&self, call: Node<'a>, function: Node<'a>) -> Option<(Node<'a>, bool)> {
        if function.kind_str() != "attribute" {
            return None;
        }
        let recv = function.field("object")?;
        if self.text(function.field("attribute")?) == "backward" {
            if let Some(q) = self.m.qualified(recv) {
                if q.is_torch() && q.has_module("distributed") && q.last() == Some("autograd") {
                    let roots = self
                        .m
                        .positional_args(call)
                        .nth(1)
                        .or_else(|| self.m.keyword_arg(call, "roots"))?;
                    return Some((roots, true));
                }
            }
        }
        self.local_backward_loss(call, function, recv)
            .map(|l| (l, false))
    }

    fn local_backward_loss(
        &self,
        call: Node<'a>,
        function: Node<'a>,
        recv: Node<'a>,
    ) -> Option<Node<'a>> {
        let method = self.text(function.field("attribute")?);
        let first_arg = || self.m.positional_args(call).next();
        match method {
            "manual_backward" => first_arg(),
            "backward" => {
                if let Some(q) = self.m.qualified(recv) {
                    if q.is_torch() && q.last() == Some("autograd") {
                        return first_arg().or_else(|| self.m.keyword_arg(call, "tensors"));
                    }
                    let last = q.last().unwrap_or("");
                    if names::is_backward_engine(last) {
                        return first_arg();
                    }
                }
                let recv = unwrap_parens(recv);
                // `scaler.scale(loss).backward()`
                if recv.kind_str() == "call" {
                    if let Some(f) = recv.field("function") {
                        if f.kind_str() == "attribute"
                            && f.field("attribute").map(|a| self.text(a)) == Some("scale")
                        {
                            return self.m.positional_args(recv).next();
                        }
                    }
                }
                Some(recv)
            }
            _ => None,
        }
    }

    fn enter_assignment(&mut self, node: Node<'a>, op: AssignOp<'a>) {
        let (Some(target), Some(mut value)) = (node.field("left"), node.field("right")) else {
            return;
        };
        // `a = b = v`: every target gets the innermost value.
        while value.kind_str() == "assignment" {
            match value.field("right") {
                Some(v) => value = v,
                None => break,
            }
        }
        self.m.assignments.push(Assignment {
            node,
            target,
            value,
            op,
            site: self.site(),
        });
        let kind = match op {
            AssignOp::Plain => BindingKind::Assign,
            AssignOp::Augmented(_) => BindingKind::Augmented,
        };
        self.bind_target(target, Some(value), kind, node.end_byte());
    }

    /// Binds every name in an assignment target (unpacking included).
    fn bind_target(
        &mut self,
        target: Node<'a>,
        value: Option<Node<'a>>,
        kind: BindingKind,
        pos: usize,
    ) {
        match target.kind_str() {
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple"
            | "list" => {
                let mut c = target.walk();
                let elems: Vec<Node<'a>> = target
                    .named_children(&mut c)
                    .filter(|n| n.kind_str() != "comment")
                    .collect();
                for (i, e) in elems.into_iter().enumerate() {
                    self.bind_element(e, value, kind, i as u32, pos);
                }
            }
            _ => {
                let t = unwrap_parens(target);
                if let Some(key) = self.target_key(t) {
                    let name = self.text(t);
                    self.add_binding(key, kind, name, value, None, pos);
                }
            }
        }
    }

    /// Binds element `index` of an unpacking target. A nested pattern (`for step, (x,
    /// y) in enumerate(loader)`) binds its names too, as parts of that element.
    fn bind_element(
        &mut self,
        e: Node<'a>,
        value: Option<Node<'a>>,
        kind: BindingKind,
        index: u32,
        pos: usize,
    ) {
        let e = unwrap_parens(e);
        if let Some(key) = self.target_key(e) {
            let name = self.text(e);
            self.add_binding(key, kind, name, value, Some(index), pos);
        } else if matches!(
            e.kind_str(),
            "tuple_pattern" | "list_pattern" | "pattern_list"
        ) {
            let mut c = e.walk();
            let inner: Vec<Node<'a>> = e.named_children(&mut c).collect();
            for x in inner {
                self.bind_element(x, value, kind, index, pos);
            }
        }
    }

    fn target_key(&self, t: Node<'a>) -> Option<NameKey<'a>> {
        match t.kind_str() {
            "identifier" => {
                let name = self.text(t);
                let scope = if self.globals.contains(&(self.scope, name)) {
                    ScopeId::MODULE
                } else {
                    self.scope
                };
                Some(NameKey::Local(scope, name))
            }
            "attribute" => self.m.name_key(t, self.scope),
            _ => None,
        }
    }

    fn add_binding(
        &mut self,
        key: NameKey<'a>,
        kind: BindingKind,
        name: &'a str,
        value: Option<Node<'a>>,
        index: Option<u32>,
        pos: usize,
    ) {
        let owner = match key {
            NameKey::Local(s, _) | NameKey::Attr(s, _) => s,
        };
        let id = self.m.bindings.next_id();
        self.m.bindings.push(Binding {
            kind,
            name,
            value,
            index,
            pos,
            site: self.site(),
            owner,
        });
        self.m.names.entry(key).or_default().push(id);
    }

    fn enter_import(&mut self, node: Node<'a>) {
        let module = node
            .field("module_name")
            .filter(|m| m.kind_str() == "dotted_name");
        let mut c = node.walk();
        let names: Vec<Node<'a>> = node.children_by_field_name("name", &mut c).collect();
        for n in names {
            let (dotted, alias) = match n.kind_str() {
                "aliased_import" => (n.field("name"), n.field("alias").map(|a| self.text(a))),
                _ => (Some(n), None),
            };
            let Some(dotted) = dotted else { continue };
            let mut q = QualName::default();
            if let Some(m) = module {
                push_dotted(&mut q, m, self.m.source);
            }
            if module.is_none() && node.kind_str() == "import_from_statement" {
                // Relative import (`from . import x`): not a torch name.
                q.push(".");
            }
            push_dotted(&mut q, dotted, self.m.source);
            let bound = match (alias, node.kind_str()) {
                (Some(a), _) => a,
                (None, "import_statement") => {
                    // `import torch.nn` binds `torch`.
                    let first = dotted.named_child(0).map(|f| self.text(f)).unwrap_or("");
                    let mut head = QualName::default();
                    head.push(first);
                    q = head;
                    first
                }
                _ => q.last().unwrap_or(""),
            };
            if !bound.is_empty() {
                self.m.imports.insert(bound, q);
                self.add_binding(
                    NameKey::Local(self.scope, bound),
                    BindingKind::Import,
                    bound,
                    None,
                    None,
                    node.end_byte(),
                );
            }
        }
    }

    fn finish(mut self) -> SemanticModel<'a> {
        let m = &mut self.m;
        // Functions declared `global x` bind at module level (handled in target_key);
        // make their `global` visible to lookups too.
        for (scope, name) in std::mem::take(&mut self.globals) {
            let id = m.bindings.next_id();
            m.bindings.push(Binding {
                kind: BindingKind::Global,
                name,
                value: None,
                index: None,
                pos: m.scope(scope).node.start_byte(),
                site: Site {
                    scope,
                    loop_: None,
                    grad: GradMode::Default,
                },
                owner: scope,
            });
            m.names
                .entry(NameKey::Local(scope, name))
                .or_default()
                .push(id);
        }
        for v in m.names.values_mut() {
            v.sort_by_key(|&b| m.bindings[b].pos);
        }
        m.assigns = m
            .names
            .iter()
            .filter_map(|(k, v)| {
                let a: Vec<BindingId> = v
                    .iter()
                    .copied()
                    .filter(|&b| m.bindings[b].kind == BindingKind::Assign)
                    .collect();
                (!a.is_empty()).then_some((*k, a))
            })
            .collect();
        let n_scopes = m.scopes.len();
        m.call_ids = m
            .calls
            .iter_enumerated()
            .map(|(i, c)| (c.node.id(), i))
            .collect();
        let receivers: FxHashSet<_> = m
            .backwards
            .iter()
            .filter_map(|b| {
                let loss = unwrap_parens(b.loss);
                (loss.kind_str() == "identifier").then(|| {
                    let f = m.function_of(m.calls[b.call].site.scope);
                    (f, m.text(loss))
                })
            })
            .collect();
        m.backward_receivers = receivers;
        let module_receivers: FxHashSet<_> = m
            .calls
            .iter()
            .filter_map(|c| {
                let (recv, method) = m.method_call(c)?;
                (recv.kind_str() == "identifier" && names::is_module_only_method(method))
                    .then(|| (m.function_of(c.site.scope), m.text(recv)))
            })
            .collect();
        m.module_receivers = module_receivers;
        m.callers = IndexVec::from_elem(Vec::new(), n_scopes);
        m.callees = m.calls.ids().map(|i| m.resolve_call(i)).collect();
        for (i, c) in m.callees.iter_enumerated() {
            if let Some(f) = *c {
                m.callers[f].push(i);
            }
        }
        // Which functions run per iteration: those reachable from a loop body or a
        // per-step hook, through same-file calls.
        let mut calls_by_function: IndexVec<ScopeId, Vec<CallId>> =
            IndexVec::from_elem(Vec::new(), n_scopes);
        for (i, c) in m.calls.iter_enumerated() {
            if let Some(f) = m.function_of(c.site.scope) {
                calls_by_function[f].push(i);
            }
        }
        // Same-file functions reachable from `seeds`; `seen` holds a stamp per scope so
        // one allocation serves every loop.
        let reach = |m: &SemanticModel<'a>,
                     seeds: &[ScopeId],
                     seen: &mut IndexVec<ScopeId, u32>,
                     stamp: u32| {
            let mut out = Vec::new();
            let mut work = seeds.to_vec();
            while let Some(f) = work.pop() {
                if std::mem::replace(&mut seen[f], stamp) == stamp {
                    continue;
                }
                out.push(f);
                for &c in &calls_by_function[f] {
                    if let Some(g) = m.callees[c] {
                        work.push(g);
                    }
                }
            }
            out
        };
        // Direct callees of each loop body, nested loops included, in one pass over calls.
        let mut loop_seeds: IndexVec<LoopId, Vec<ScopeId>> =
            IndexVec::from_elem(Vec::new(), m.loops.len());
        for (i, c) in m.calls.iter_enumerated() {
            if let Some(g) = m.callees[i] {
                let mut l = c.site.loop_;
                while let Some(id) = l {
                    loop_seeds[id].push(g);
                    l = m.loops[id].parent;
                }
            }
        }
        let mut seen: IndexVec<ScopeId, u32> = IndexVec::from_elem(0, n_scopes);
        let mut stamp = 0;
        let mut loop_callees = IndexVec::new();
        for seeds in &loop_seeds {
            if seeds.is_empty() {
                loop_callees.push(Vec::new());
                continue;
            }
            stamp += 1;
            let reached = reach(m, seeds, &mut seen, stamp);
            loop_callees.push(reached);
        }
        let mut hook_callees = Vec::new();
        for h in m.scopes.ids() {
            if !m.is_per_step_hook(h) {
                continue;
            }
            let seeds: Vec<ScopeId> = calls_by_function[h]
                .iter()
                .filter_map(|&c| m.callees[c])
                .collect();
            stamp += 1;
            let reached = reach(m, &seeds, &mut seen, stamp);
            hook_callees.push((h, reached));
        }
        m.loop_callees = loop_callees;
        m.hook_callees = hook_callees;
        m.calls_by_function = calls_by_function;
        m.memo = Memos::sized(m);
        self.m
    }
}

fn param_name(p: Node<'_>) -> Option<Node<'_>> {
    match p.kind_str() {
        "identifier" => Some(p),
        "typed_parameter" => p.named_child(0).filter(|n| n.kind_str() == "identifier"),
        "default_parameter" | "typed_default_parameter" => p.field("name"),
        "list_splat_pattern" | "dictionary_splat_pattern" => p.named_child(0),
        _ => None,
    }
}

fn push_dotted<'a>(q: &mut QualName<'a>, dotted: Node<'_>, src: &'a str) {
    if dotted.kind_str() == "identifier" {
        q.push(&src[dotted.byte_range()]);
        return;
    }
    let mut c = dotted.walk();
    for part in dotted.named_children(&mut c) {
        if part.kind_str() == "identifier" {
            q.push(&src[part.byte_range()]);
        }
    }
}

/// Whether some node under `node` (itself included) satisfies `pred`.
fn any_under<'a>(node: Node<'a>, pred: impl Fn(Node<'a>) -> bool) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if pred(n) {
            return true;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    false
}
