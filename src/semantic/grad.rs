//! Grad mode: what is written around a fact, decorators, and functions whose every
//! same-file caller runs without grad.

use super::*;

impl<'a> SemanticModel<'a> {
    /// The grad mode that holds at `site`: what is written around it, else what every
    /// same-file caller of its function establishes, else enabled.
    pub fn grad_mode(&self, site: Site) -> GradMode {
        self.grad_mode_at(site, 0)
    }

    fn grad_mode_at(&self, site: Site, depth: u32) -> GradMode {
        match site.grad {
            GradMode::Default => match self.function_of(site.scope) {
                Some(f) => self.function_grad(f, depth),
                None => GradMode::Enabled,
            },
            g => g,
        }
    }

    pub fn grad_enabled(&self, site: Site) -> bool {
        self.grad_mode(site) == GradMode::Enabled
    }

    fn function_grad(&self, f: ScopeId, depth: u32) -> GradMode {
        if let Some(g) = self.memo.scope_grad.borrow()[f] {
            return g;
        }
        // A chain of callers deeper than this is not followed (and not memoized, so a
        // shallower query can still decide it).
        if depth > 200 {
            self.memo.depth_exceeded.set(true);
            return GradMode::Unknown;
        }
        // A decorator of the project that disables gradients (`@smart_inference_mode()`
        // from a utils file, wrapping `torch.inference_mode`).
        if self.decorated_by_project_no_grad(f) {
            self.memo.scope_grad.borrow_mut()[f] = Some(GradMode::Disabled);
            return GradMode::Disabled;
        }
        // Cycle guard: a recursive function is assumed enabled while it is being decided.
        self.memo.scope_grad.borrow_mut()[f] = Some(GradMode::Enabled);
        // Calls in another framework's code (a TensorFlow branch) say nothing of
        // PyTorch's grad mode.
        let callers: Vec<CallId> = self.callers[f]
            .iter()
            .copied()
            .filter(|&c| !self.foreign_framework_site(self.calls[c].node))
            .collect();
        // Callers in other files of the project: whether every one runs under no_grad.
        // A closure a factory returns is called in other files wherever the factory's
        // result went (`validate = rvae.validater(loader); validate(...)`).
        let external = self.project().and_then(|p| {
            let name = crate::project::qualname(self, f)
                .or_else(|| crate::project::closure_name(self, f))?;
            p.external_caller(&name)
        });
        // A closure its factory returns (`def make_val_step(model): def step(x): ...;
        // return step`) runs wherever the returned value is called, and a private hook
        // wherever its base class calls it, which this model does not follow: its grad
        // mode is not known.
        if callers.is_empty()
            && external.is_none()
            && (self.is_returned_closure(f) || self.is_private_hook(f))
        {
            self.memo.scope_grad.borrow_mut()[f] = Some(GradMode::Unknown);
            return GradMode::Unknown;
        }
        let g = if (!callers.is_empty() || external.is_some())
            && external != Some(false)
            && callers
                .iter()
                .all(|&c| self.grad_mode_at(self.calls[c].site, depth + 1) == GradMode::Disabled)
        {
            GradMode::Disabled
        } else {
            GradMode::Enabled
        };
        self.memo.scope_grad.borrow_mut()[f] = Some(g);
        g
    }
}

impl<'a> SemanticModel<'a> {
    /// Whether a decorator of `f` is a project function that disables gradients
    /// (`@smart_inference_mode()`, `@nograd`).
    fn decorated_by_project_no_grad(&self, f: ScopeId) -> bool {
        let Some(d) = self
            .scope(f)
            .node
            .parent()
            .filter(|d| d.kind_str() == "decorated_definition")
        else {
            return false;
        };
        let Some(p) = self.project() else {
            return false;
        };
        let mut c = d.walk();
        let found = d.named_children(&mut c).any(|x| {
            let Some(e) = x.named_child(0).filter(|_| x.kind_str() == "decorator") else {
                return false;
            };
            let callee = if e.kind_str() == "call" {
                e.field("function")
            } else {
                Some(e)
            };
            callee
                .is_some_and(|n| n.kind_str() == "identifier" && p.no_grad_decorator(self.text(n)))
        });
        found
    }

    /// Whether function `f` is defined inside another function that returns it by name.
    pub fn is_returned_closure(&self, f: ScopeId) -> bool {
        let sc = self.scope(f);
        let Some(parent) = sc.parent.filter(|&p| self.scope(p).is_function()) else {
            return false;
        };
        self.scope(parent)
            .returns
            .iter()
            .any(|&(r, _)| r.kind_str() == "identifier" && self.text(r) == sc.name)
    }

    /// Whether `f` is a private method (`_sample`) that nothing in its file calls: a
    /// hook that a base class of another file runs (a generation mixin's decoding
    /// loop), in whatever grad mode that caller sets.
    pub fn is_private_hook(&self, f: ScopeId) -> bool {
        let sc = self.scope(f);
        sc.class.is_some()
            && sc.name.starts_with('_')
            && !sc.name.starts_with("__")
            && self.callers[f].is_empty()
    }

    /// Whether `node` is code of another array framework: the file imports JAX, Flax,
    /// TensorFlow or Keras and not PyTorch, or `node` sits in the branch of an `if`
    /// whose condition names that framework (`if backend == "tf":`, `if is_tf_available():`).
    pub fn foreign_framework_site(&self, node: Node<'_>) -> bool {
        if !self.is_torch_code() {
            return true;
        }
        // Each `parent()` descends from the root again: the ancestors are found in one
        // descent instead, innermost last.
        let mut ancestors = Vec::new();
        let mut cur = self.root;
        while cur.id() != node.id() {
            ancestors.push(cur);
            match cur.child_with_descendant(node) {
                Some(next) => cur = next,
                None => return self.foreign_framework_site_by_parents(node),
            }
        }
        let mut child = node;
        for &n in ancestors.iter().rev() {
            if matches!(n.kind_str(), "function_definition" | "class_definition") {
                return self.named_for_foreign_framework(n);
            }
            if self.foreign_branch(n, child) {
                return true;
            }
            child = n;
        }
        false
    }

    /// [`Self::foreign_framework_site`] for a node not under the model's root.
    fn foreign_framework_site_by_parents(&self, node: Node<'_>) -> bool {
        let mut child = node;
        let mut cur = node.parent();
        while let Some(n) = cur {
            if matches!(n.kind_str(), "function_definition" | "class_definition") {
                return self.named_for_foreign_framework(n);
            }
            if self.foreign_branch(n, child) {
                return true;
            }
            child = n;
            cur = n.parent();
        }
        false
    }

    /// Whether the function or class `def` is named for another framework
    /// (`_tensorflow_evaluator`, `KerasWrapper`): a PyTorch project's branch for that
    /// backend, written as its own function. The short `tf` is left out here: as a
    /// word of a name it is as often term frequency.
    fn named_for_foreign_framework(&self, def: Node<'_>) -> bool {
        def.field("name").is_some_and(|n| {
            let name = self.text(n);
            name_words(name).any(|w| {
                matches!(
                    w.to_ascii_lowercase().as_str(),
                    "tensorflow" | "jax" | "flax" | "keras" | "mxnet" | "paddle" | "megengine"
                )
            })
        })
    }

    /// Whether `child` is the body of `n`, an `if`/`elif` whose condition names another
    /// framework.
    fn foreign_branch(&self, n: Node<'_>, child: Node<'_>) -> bool {
        if n.kind_str() == "if_statement" || n.kind_str() == "elif_clause" {
            let in_body = n.field("consequence").is_some_and(|b| b.id() == child.id());
            if in_body {
                if let Some(c) = n.field("condition") {
                    return names_foreign_framework(self.text(c));
                }
            }
        }
        false
    }

    /// Whether the file imports another array framework (JAX, TensorFlow, ...), beside
    /// PyTorch or not.
    pub fn imports_foreign_framework(&self) -> bool {
        self.imports.values().any(|q| {
            q.first()
                .is_some_and(|t| crate::project::FOREIGN.contains(&t))
        })
    }

    /// Whether the file is PyTorch code: the project says so through its imports;
    /// alone, a file that imports another array framework and no PyTorch package is
    /// not, and neither is one whose imports are all of the standard library or of
    /// NumPy-like libraries. A file with no import at all is given the benefit.
    pub fn is_torch_code(&self) -> bool {
        if let Some(p) = self.project() {
            return p.torch();
        }
        crate::project::maybe_torch(self.imports.values().map(|q| q.first().unwrap_or(".")))
    }
}

/// A condition that names another framework: the tokens `tf`, `tensorflow`, `jax`,
/// `flax`, `keras` (as words of an identifier or string).
fn names_foreign_framework(cond: &str) -> bool {
    cond.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        matches!(
            w.to_ascii_lowercase().as_str(),
            "tf" | "tensorflow" | "jax" | "flax" | "keras" | "mxnet" | "paddle" | "megengine"
        )
    })
}

impl<'a> SemanticModel<'a> {
    /// Whether module class `class` freezes its own parameters when it is built: its
    /// `__init__` calls `self.requires_grad_(False)` or sets `p.requires_grad = False`
    /// for every `p` of `self.parameters()`, and no method of the class turns them back
    /// on. Its instances record no graph on inputs that ask for none (a frozen
    /// autoencoder that encodes a dataset to features).
    pub fn freezes_itself(&self, class: ScopeId) -> bool {
        if !self.is_module_class(class) {
            return false;
        }
        let Some(&init) = self.functions.get(&(class, "__init__")) else {
            return false;
        };
        let in_class = |s: ScopeId| {
            self.function_of(s)
                .is_some_and(|f| self.scope(f).class == Some(class))
        };
        // `self.freeze()` in `__init__`: a method of the class it calls switches off
        // as surely as `__init__` itself.
        let init_calls: Vec<&str> = self
            .calls_of_function(Some(init))
            .iter()
            .filter_map(|&i| match self.method_call(&self.calls[i]) {
                Some((recv, m)) if recv.kind_str() == "identifier" && self.text(recv) == "self" => {
                    Some(m)
                }
                _ => None,
            })
            .collect();
        let from_init = |s: ScopeId| {
            self.function_of(s).is_some_and(|g| {
                g == init
                    || self.scope(g).class == Some(class)
                        && init_calls.contains(&self.scope(g).name)
            })
        };
        let mut freezes = false;
        // Collected once per file: asked for every module class, a scan of every call
        // each time made files with many classes quadratic.
        let toggles = self.memo.self_grad_toggles.get_or_init(|| {
            self.calls
                .ids()
                .filter(|&i| {
                    matches!(self.method_call(&self.calls[i]),
                        Some((recv, "requires_grad_")) if recv.kind_str() == "identifier" && self.text(recv) == "self")
                })
                .collect()
        });
        for &i in toggles {
            let c = &self.calls[i];
            if !in_class(c.site.scope) {
                continue;
            }
            let off = self
                .positional_args(c.node)
                .next()
                .or_else(|| self.keyword_arg(c.node, "requires_grad"))
                .is_some_and(|a| self.false_by_default(a, c.site));
            if !off {
                return false;
            }
            freezes |= from_init(c.site.scope);
        }
        for &i in self.grad_attribute_assignments() {
            let a = &self.assignments[i];
            let t = unwrap_parens(a.target);
            if t.field("attribute")
                .is_none_or(|x| self.text(x) != "requires_grad")
                || !in_class(a.site.scope)
            {
                continue;
            }
            let Some(l) = a.site.loop_ else { continue };
            let lp = self.loop_(l);
            let over_own = lp.iter.map(unwrap_parens).is_some_and(|it| {
                self.text(it) == "self.parameters()"
                    && lp.node.field("left").map(|v| self.text(v))
                        == t.field("object").map(|o| self.text(o))
            });
            if !over_own {
                continue;
            }
            if !self.false_by_default(a.value, a.site) {
                return false;
            }
            freezes |= from_init(a.site.scope);
        }
        freezes
    }

    /// Whether every call of the module-level function `f` hands it, at parameter
    /// `name`, a module that froze itself (`get_activations(files, model)` whose callers
    /// all pass `InceptionV3(...)`, through their own parameters up to a few callers).
    /// Calls from other files, or none at all, leave it unknown.
    fn frozen_parameter(&self, f: ScopeId, name: &str, depth: u32) -> bool {
        let sc = self.scope(f);
        if depth >= 4 || sc.class.is_some() || self.callers[f].is_empty() {
            return false;
        }
        let Some(pos) = sc.params.iter().position(|p| *p == name) else {
            return false;
        };
        if self.project().is_some_and(|p| {
            crate::project::qualname(self, f).is_none_or(|q| p.external_caller(&q).is_some())
        }) {
            return false;
        }
        self.callers[f].iter().all(|&c| {
            let call = &self.calls[c];
            self.positional_args(call.node)
                .nth(pos)
                .or_else(|| self.keyword_arg(call.node, name))
                .is_some_and(|a| self.frozen_module_within(a, call.site, depth + 1))
        })
    }

    /// Whether `v` is `False`, or a parameter of its function whose default is `False`
    /// (`def __init__(self, blocks, requires_grad=False)` ... `p.requires_grad =
    /// requires_grad`): the value the code runs with unless a caller says otherwise, as
    /// for integer defaults.
    fn false_by_default(&self, v: Node<'a>, site: Site) -> bool {
        let v = unwrap_parens(v);
        match v.kind_str() {
            "false" => true,
            "identifier" => self.binding_of(v, site).is_some_and(|b| {
                let sc = self.scope(b.owner);
                // A construction of the class in this file that turns the flag on
                // (`InceptionV3(blocks, requires_grad=True)`) says otherwise.
                let turned_on = sc
                    .class
                    .filter(|_| sc.name == "__init__")
                    .is_some_and(|class| {
                        let cname = self.scope(class).name;
                        self.calls.iter().any(|c| {
                            let f = unwrap_parens(c.function);
                            let named = match f.kind_str() {
                                "identifier" => self.text(f) == cname,
                                "attribute" => {
                                    f.field("attribute").is_some_and(|a| self.text(a) == cname)
                                }
                                _ => false,
                            };
                            named
                                && self
                                    .keyword_arg(c.node, b.name)
                                    .is_some_and(|a| unwrap_parens(a).kind_str() != "false")
                        })
                    });
                b.kind == BindingKind::Parameter
                    && !turned_on
                    && self
                        .parameter_default(b.owner, b.name)
                        .is_some_and(|d| unwrap_parens(d).kind_str() == "false")
            }),
            _ => false,
        }
    }

    /// Whether the module that call `i` runs (`net(x)`, `self.critic(x)`) has every
    /// parameter switched off there by the code before it in the same function: the
    /// last switch of that module before the call, in a block that holds the call, is
    /// `for p in net.parameters(): p.requires_grad = False` or
    /// `net.requires_grad_(False)`. Its forward then records no graph on inputs that ask
    /// for none (a validation pass that freezes the network first, a critic scored on
    /// held-out data between generator steps). A switch in a branch, or a later one
    /// turning them back on, leaves the call as it was.
    pub fn frozen_at(&self, i: CallId) -> bool {
        let c = &self.calls[i];
        let func = unwrap_parens(c.function);
        if !matches!(func.kind_str(), "identifier" | "attribute") {
            return false;
        }
        self.frozen_before(self.text(func), c.node, c.site)
    }

    /// Whether the module spelled `module` has every parameter switched off before
    /// `node` (at `site`), on every path to it: see [`Self::frozen_at`].
    pub fn frozen_before(&self, module: &str, node: Node<'a>, site: Site) -> bool {
        let f = self.function_of(site.scope);
        if let Some((class, attr)) = f.and_then(|f| {
            let s = self.scope(f);
            let attr = module.strip_prefix(s.self_param()?)?.strip_prefix('.')?;
            Some((s.class?, attr))
        }) {
            if self.frozen_attribute(class, attr) {
                return true;
            }
        }
        let at = node.start_byte();
        // The latest switch before the call: (where, turns off, its statement).
        let mut last: Option<(usize, bool, Node<'a>)> = None;
        let mut note = |byte: usize, off: bool, stmt: Node<'a>| {
            if byte < at && last.is_none_or(|(b, _, _)| b < byte) {
                last = Some((byte, off, stmt));
            }
        };
        let parameters_of_module = |it: Node<'a>| {
            let it = unwrap_parens(it);
            it.kind_str() == "call"
                && it.field("function").is_some_and(|g| {
                    g.field("attribute")
                        .is_some_and(|m| self.text(m) == "parameters")
                        && g.field("object").is_some_and(|o| self.text(o) == module)
                })
        };
        for &a in self.grad_attribute_assignments() {
            let asg = &self.assignments[a];
            let t = unwrap_parens(asg.target);
            if t.field("attribute")
                .is_none_or(|x| self.text(x) != "requires_grad")
                || self.function_of(asg.site.scope) != f
            {
                continue;
            }
            let Some(l) = asg.site.loop_ else { continue };
            let lp = self.loop_(l);
            let each = lp.node.field("left").map(|v| self.text(v));
            if lp.iter.is_some_and(parameters_of_module)
                && each.is_some()
                && each == t.field("object").map(|o| self.text(o))
            {
                note(
                    lp.node.start_byte(),
                    self.text(asg.value) == "False",
                    lp.node,
                );
            }
        }
        for &t in self.grad_toggle_calls() {
            let k = &self.calls[t];
            if self.function_of(k.site.scope) != f {
                continue;
            }
            if let Some((recv, "requires_grad_")) = self.method_call(k) {
                // `sampler.eval().requires_grad_(False).to(device)`: the switch is on
                // `sampler`, and the statement is the whole chain.
                let mut recv = unwrap_parens(recv);
                while let Some((inner, _)) = recv
                    .field("function")
                    .filter(|f| recv.kind_str() == "call" && f.kind_str() == "attribute")
                    .and_then(|f| Some((f.field("object")?, f.field("attribute")?)))
                    .filter(|&(_, m)| names::RETURNS_SELF_METHODS.contains(&self.text(m)))
                {
                    recv = unwrap_parens(inner);
                }
                if self.text(recv) == module {
                    let off = self.switches_grad_off(k.node);
                    let mut stmt = k.node;
                    while let Some(p) = stmt.parent().filter(|_| {
                        !matches!(stmt.kind_str(), "expression_statement" | "assignment")
                    }) {
                        stmt = p;
                    }
                    note(k.node.start_byte(), off, stmt);
                }
            }
        }
        let Some((_, true, mut stmt)) = last else {
            return false;
        };
        // The switch runs before the call on every path: its block holds the call, or
        // it ends a loop's body that the call follows (the last iteration's switch is
        // the one in force after the loop).
        for _ in 0..32 {
            let Some(block) = stmt.parent() else { break };
            if block.start_byte() <= at && node.end_byte() <= block.end_byte() {
                return true;
            }
            let Some(lp) = block
                .parent()
                .filter(|p| matches!(p.kind_str(), "for_statement" | "while_statement"))
                .filter(|p| p.field("body").is_some_and(|b| b.id() == block.id()))
            else {
                break;
            };
            stmt = lp;
        }
        false
    }

    /// The `x.requires_grad_(...)` calls of the file, collected once: asked for every
    /// forward of an evaluation region.
    fn grad_toggle_calls(&self) -> &[CallId] {
        self.memo.grad_toggles.get_or_init(|| {
            self.calls
                .ids()
                .filter(|&i| {
                    matches!(
                        self.method_call(&self.calls[i]),
                        Some((_, "requires_grad_"))
                    )
                })
                .collect()
        })
    }

    /// Whether a `requires_grad_(...)` call switches gradients off (`False`).
    fn switches_grad_off(&self, call: Node<'_>) -> bool {
        self.positional_args(call)
            .next()
            .or_else(|| self.keyword_arg(call, "requires_grad"))
            .is_some_and(|a| self.text(a) == "False")
    }

    /// Whether some method of `class` switches off every parameter of `self.attr`
    /// (`for p in self.net_id.parameters(): p.requires_grad = False`,
    /// `self.net_id.requires_grad_(False)`) and none switches one back on: a frozen
    /// helper network set up once, in `__init__` or a setup method.
    pub fn frozen_attribute(&self, class: ScopeId, attr: &str) -> bool {
        self.memo
            .frozen_attrs
            .get_or_init(|| {
                let mut off: FxHashSet<(ScopeId, &'a str)> = FxHashSet::default();
                let mut on: FxHashSet<(ScopeId, &'a str)> = FxHashSet::default();
                let mut note = |recv: Node<'a>, site: Site, value: bool| {
                    if let Some(NameKey::Attr(c, a)) =
                        self.name_key(unwrap_parens(recv), site.scope)
                    {
                        if value {
                            on.insert((c, a));
                        } else {
                            off.insert((c, a));
                        }
                    }
                };
                for &a in self.grad_attribute_assignments() {
                    let asg = &self.assignments[a];
                    let t = unwrap_parens(asg.target);
                    if t.field("attribute")
                        .is_none_or(|x| self.text(x) != "requires_grad")
                    {
                        continue;
                    }
                    let Some(lp) = asg.site.loop_.map(|l| self.loop_(l)) else {
                        continue;
                    };
                    let each = lp.node.field("left").map(|v| self.text(v));
                    let Some(recv) = lp
                        .iter
                        .map(unwrap_parens)
                        .filter(|it| it.kind_str() == "call")
                        .and_then(|it| {
                            let g = it.field("function")?;
                            (g.field("attribute")
                                .is_some_and(|m| self.text(m) == "parameters"))
                            .then_some(g.field("object")?)
                        })
                    else {
                        continue;
                    };
                    if each.is_some() && each == t.field("object").map(|o| self.text(o)) {
                        note(recv, asg.site, self.text(asg.value) != "False");
                    }
                }
                for &i in self.grad_toggle_calls() {
                    let k = &self.calls[i];
                    if let Some((recv, _)) = self.method_call(k) {
                        note(recv, k.site, !self.switches_grad_off(k.node));
                    }
                }
                off.retain(|k| !on.contains(k));
                off
            })
            .contains(&(class, attr))
    }

    /// Whether `expr` is a module that froze itself when built: an instance of a class
    /// of this file or of the project that [`Self::freezes_itself`], also through a
    /// same-file factory returning one, a wrapper (`nn.DataParallel(m)`), a move or
    /// mode switch (`m.to(device)`, `m.eval()`) and the names bound to those.
    pub fn frozen_module(&self, expr: Node<'_>, site: Site) -> bool {
        self.frozen_module_within(expr, site, 0)
    }

    /// [`Self::frozen_module`], `depth` callers up through parameters.
    fn frozen_module_within(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        let mut cur = Some((unwrap_parens(expr), site));
        for _ in 0..32 {
            let Some((e, site)) = cur.take() else { break };
            match e.kind_str() {
                "identifier" => {
                    let Some(b) = self.resolve(e, site, e.start_byte()) else {
                        return false;
                    };
                    let bd = &self.bindings[b];
                    if bd.kind == BindingKind::Parameter {
                        return self.frozen_parameter(bd.owner, bd.name, depth);
                    }
                    // Every assignment reaching here must be the frozen module: the
                    // nearest one decides, rebinding to itself looks further back.
                    if bd.kind != BindingKind::Assign || bd.index.is_some() {
                        return false;
                    }
                    cur = bd.value.map(|v| (unwrap_parens(v), bd.site));
                }
                "call" => {
                    let Some(func) = e.field("function").map(unwrap_parens) else {
                        return false;
                    };
                    if func.kind_str() == "attribute" {
                        let m = func.field("attribute").map_or("", |a| self.text(a));
                        // `copy.deepcopy(G).eval().requires_grad_(False).to(device)`: a
                        // copy frozen as it is bound.
                        if m == "requires_grad_" {
                            return self
                                .positional_args(e)
                                .next()
                                .or_else(|| self.keyword_arg(e, "requires_grad"))
                                .is_some_and(|a| self.text(a) == "False");
                        }
                        if matches!(m, "to" | "cuda" | "cpu" | "eval" | "half" | "float") {
                            cur = func.field("object").map(|o| (unwrap_parens(o), site));
                            continue;
                        }
                    }
                    let last = self
                        .qualified(func)
                        .and_then(|q| q.last())
                        .unwrap_or_else(|| {
                            func.field("attribute")
                                .map_or(self.text(func), |a| self.text(a))
                        });
                    if names::is_module_wrapper(last) {
                        cur = self
                            .positional_args(e)
                            .next()
                            .map(|a| (unwrap_parens(a), site));
                        continue;
                    }
                    if func.kind_str() != "identifier" {
                        // `libs.clip.FrozenCLIPEmbedder()`: a class of a project module
                        // imported whole.
                        return func.kind_str() == "attribute"
                            && self
                                .project()
                                .is_some_and(|p| p.frozen_import(self.text(func)));
                    }
                    let name = self.text(func);
                    if let Some(&class) = self.classes.get(name) {
                        return self.freezes_itself(class);
                    }
                    if let Some(g) = self.call_index(e).and_then(|i| self.callee(i)) {
                        let rets: Vec<_> = self
                            .scope(g)
                            .returns
                            .iter()
                            .filter(|(r, _)| r.kind_str() != "none")
                            .copied()
                            .collect();
                        return !rets.is_empty()
                            && rets.iter().all(|&(r, _)| {
                                r.kind_str() == "call"
                                    && r.field("function").is_some_and(|f| {
                                        f.kind_str() == "identifier"
                                            && self
                                                .classes
                                                .get(self.text(f))
                                                .is_some_and(|&c| self.freezes_itself(c))
                                    })
                            });
                    }
                    return self.project().is_some_and(|p| p.frozen_import(name));
                }
                _ => return false,
            }
        }
        false
    }
}

/// The words of an identifier: its `_`-separated parts, each split again before an
/// upper-case letter that follows a lower-case one (`KerasWrapper` gives `Keras`,
/// `Wrapper`).
fn name_words(name: &str) -> impl Iterator<Item = &str> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(|part| {
            let b = part.as_bytes();
            let mut cuts = vec![0];
            cuts.extend(
                (1..b.len())
                    .filter(|&i| b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase()),
            );
            cuts.push(b.len());
            (0..cuts.len() - 1)
                .map(move |k| &part[cuts[k]..cuts[k + 1]])
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        })
}

/// Names of the PyTorch API through which a tensor that requires grad comes to exist:
/// set by hand (`requires_grad`, `nn.Parameter`, the old `Variable`), held by a model
/// (`optim`, `models`, `hub`, `jit`, `from_pretrained`, `parameters()`, `state_dict`),
/// or derived by `autograd`. `nn.<anything but functional>` is read apart.
const GRAD_LEAF_NAMES: &[&str] = &[
    "requires_grad",
    "requires_grad_",
    "Parameter",
    "ParameterList",
    "ParameterDict",
    "Variable",
    "optim",
    "models",
    "hub",
    "jit",
    "autograd",
    "from_pretrained",
    "create_model",
    "parameters",
    "named_parameters",
    "state_dict",
    "load_state_dict",
];

impl<'a> SemanticModel<'a> {
    /// Whether nothing the code at `site` runs can require grad, so no value there
    /// carries an autograd graph: the file creates no tensor that requires grad and no
    /// model (no name of [`GRAD_LEAF_NAMES`], no `nn.` layer, no `torch.load`), imports
    /// nothing beyond PyTorch's core packages, plain libraries and the standard
    /// library (a project module could hand it a model), and neither does the function
    /// `site` is in (or one around it) take a model from outside: no other project
    /// file calls it, and it calls none of its parameters that are not known to be
    /// instances of a plain class of the file. A from-scratch
    /// network on plain tensors with hand-written gradients, as lecture notebooks
    /// build one, or a NumPy exercise beside PyTorch notebooks.
    pub fn graph_free_at(&self, site: Site) -> bool {
        if !self.creates_no_grad_leaf() || self.calls_outside_model() {
            return false;
        }
        let mut scope = Some(site.scope);
        while let Some(f) = scope.and_then(|s| self.function_of(s)) {
            if self.calls_through_parameter(f) {
                return false;
            }
            // While the project's file summaries are made, a function's callers in
            // other files are not known, and what it returns is what those files are
            // told. A file linted alone has no other files.
            let Some(p) = self.project() else {
                if self.memo.summarizing.get() {
                    return false;
                }
                scope = self.scope(f).parent;
                continue;
            };
            let name =
                crate::project::qualname(self, f).or_else(|| crate::project::closure_name(self, f));
            if name.is_some_and(|n| p.external_caller(&n).is_some()) {
                return false;
            }
            scope = self.scope(f).parent;
        }
        true
    }

    /// Whether function `f` runs a model that comes from outside the file: it calls a
    /// value known as a module (`self.model(x)` on what the constructor was handed), or
    /// one of its parameters, directly or through a method (`model(x)`,
    /// `net.forward(x)`), unless its same-file callers all bind that parameter to an
    /// instance of a plain class of the file (a star import hides callers in other
    /// files).
    fn calls_through_parameter(&self, f: ScopeId) -> bool {
        self.calls.iter().any(|c| {
            if self.function_of(c.site.scope) != Some(f) {
                return false;
            }
            let direct = c.function.kind_str() != "attribute";
            let receiver = c.function.field("object");
            // `self.net(x)`: what the attribute holds is the callee, unless the class
            // has a method of that name.
            if let (Some(o), Some(a)) = (receiver, c.function.field("attribute")) {
                if o.kind_str() == "identifier"
                    && self.text(o) == "self"
                    && self.methods_named(self.text(a)).is_empty()
                    && !matches!(self.eval(c.function, c.site, 0), Value::Instance(_))
                {
                    return true;
                }
            }
            let callee = if direct { Some(c.function) } else { receiver };
            let Some(callee) = callee else {
                return false;
            };
            let value = self.eval(callee, c.site, 0);
            if value == Value::Module {
                return true;
            }
            if callee.kind_str() != "identifier" {
                return false;
            }
            let Some(b) = self.resolve(callee, c.site, callee.start_byte()) else {
                return false;
            };
            let bd = &self.bindings[b];
            // `targets.size(0)`: a method of what is not known as a model.
            bd.kind == BindingKind::Parameter
                && bd.owner == f
                && self.scope(f).self_param() != Some(bd.name)
                && direct
                && !matches!(value, Value::Instance(_))
        })
    }

    /// Whether some call of the file, at any level, runs a value known as a module, or
    /// backpropagates what is not a plain object of the file (`loss.backward()` in a
    /// notebook whose model comes from a cell not in the file).
    fn calls_outside_model(&self) -> bool {
        match self.memo.calls_module.get() {
            Some(Some(v)) => return v,
            // Asked again while deciding (a value evaluated below asks for the grad
            // mode it is produced in): not free, as before this fact.
            Some(None) => return true,
            None => {}
        }
        self.memo.calls_module.set(Some(None));
        let v = self.calls.iter().any(|c| {
            let callee = match c.function.kind_str() {
                "attribute" => c.function.field("object"),
                _ => Some(c.function),
            };
            callee.is_some_and(|n| match self.eval(n, c.site, 0) {
                Value::Module => true,
                // `loss.backward()` on what is not a plain object of the file: the file
                // expects graphs, made by models it does not show.
                Value::Instance(_) => false,
                _ => {
                    c.function.kind_str() == "attribute"
                        && c.function
                            .field("attribute")
                            .is_some_and(|a| self.text(a) == "backward")
                }
            })
        });
        self.memo.calls_module.set(Some(Some(v)));
        v
    }

    /// The file-level half of [`SemanticModel::graph_free_at`], memoised.
    fn creates_no_grad_leaf(&self) -> bool {
        *self.memo.no_grad_leaf.get_or_init(|| {
            let allowed_import = |q: &QualName<'_>| {
                let segs = q.segments();
                let Some(&top) = segs.first() else {
                    return false;
                };
                let core = matches!(top, "torch" | "torchvision" | "torchaudio" | "torchtext");
                (core || crate::project::PLAIN.contains(&top) || crate::stdlib::is_stdlib(top))
                    && !segs.iter().any(|s| GRAD_LEAF_NAMES.contains(s))
                    && !segs
                        .windows(2)
                        .any(|w| w[0] == "nn" && w[1] != "functional")
            };
            // A snippet without imports is given the benefit of being PyTorch code
            // whose models come from elsewhere.
            if !self.imports.values().any(|q| q.first() == Some("torch"))
                || !self.imports.values().all(allowed_import)
            {
                return false;
            }
            let torch_alias = |n: Node<'_>| {
                n.kind_str() == "identifier"
                    && self
                        .imports
                        .get(self.text(n))
                        .is_some_and(|q| q.segments() == ["torch"])
            };
            if GRAD_LEAF_NAMES
                .iter()
                .any(|n| !self.identifiers_in(n, 0..self.source.len()).is_empty())
            {
                return false;
            }
            let mut cursor = self.root.walk();
            let mut stack = vec![self.root];
            while let Some(n) = stack.pop() {
                match n.kind_str() {
                    "attribute" => {
                        if let (Some(o), Some(a)) = (n.field("object"), n.field("attribute")) {
                            let attr = self.text(a);
                            let obj = self.text(o);
                            let nn = obj == "nn" || obj.ends_with(".nn");
                            if (nn && attr != "functional") || (attr == "load" && torch_alias(o)) {
                                return false;
                            }
                        }
                    }
                    // Text says nothing about code.
                    "string" | "comment" => continue,
                    _ => {}
                }
                stack.extend(n.children(&mut cursor));
            }
            true
        })
    }
}

impl<'a> SemanticModel<'a> {
    /// Whether call `i` runs a model built just before it that nothing has trained or
    /// loaded yet: `net = Net()` (a module class of the file, or an `nn` layer, with no
    /// pretrained-weights argument, also through `net = net.to(device)`), then `net(x)`
    /// in the same function or cell sequence, outside any loop, on anything but a batch
    /// drawn from a loader, with nothing in between that hands `net` to a call, calls a
    /// method of it other than moves, casts and initialisation (`.eval()` called later
    /// says its author evaluates it), loads or fits anything, runs a function of the file (which may
    /// train `net` as a global), or backpropagates. What a notebook does to show a
    /// layer's feature maps or a model's output shape before training: no trained model
    /// is evaluated, and the one graph is dropped with its output.
    pub fn untrained_at(&self, i: CallId) -> bool {
        let c = &self.calls[i];
        if c.site.loop_.is_some() {
            return false;
        }
        let func = unwrap_parens(c.function);
        let recv = match func.kind_str() {
            "identifier" => func,
            "attribute" => match func.field("object") {
                Some(o) => unwrap_parens(o),
                None => return false,
            },
            _ => return false,
        };
        if recv.kind_str() != "identifier" {
            return false;
        }
        let Some(mut b) = self.resolve(recv, c.site, recv.start_byte()) else {
            return false;
        };
        let f = self.function_of(c.site.scope);
        // Through moves of the same name (`model = model.to(device)`) to where it was built.
        let value = loop {
            let bd = &self.bindings[b];
            if bd.kind != BindingKind::Assign
                || bd.index.is_some()
                || self.function_of(bd.site.scope) != f
            {
                return false;
            }
            let Some(value) = bd.value.map(unwrap_parens) else {
                return false;
            };
            let moved = value
                .field("function")
                .filter(|g| value.kind_str() == "call" && g.kind_str() == "attribute")
                .and_then(|g| {
                    let o = g.field("object").filter(|o| o.kind_str() == "identifier")?;
                    let m = self.text(g.field("attribute")?);
                    (self.text(o) == bd.name && names::is_conversion_method(m)).then_some(o)
                });
            match moved {
                Some(o) => match self.resolve(o, bd.site, o.start_byte()) {
                    Some(prev) if prev != b => b = prev,
                    _ => return false,
                },
                None => break value,
            }
        };
        if !self.builds_fresh_module(value) {
            return false;
        }
        // A batch of the test set through an untrained model is the evaluation a
        // tutorial shows before training.
        let mut args = self.positional_args(c.node).peekable();
        if args.peek().is_none() || args.any(|a| self.evaluation_input(a, c.site, 0)) {
            return false;
        }
        let name = self.bindings[b].name;
        let (from, to) = (value.end_byte(), c.node.start_byte());
        let touched = self.calls.iter_enumerated().any(|(j, o)| {
            let at = o.node.start_byte();
            if at < from || at >= to {
                return false;
            }
            if self.callee(j).is_some() {
                return true;
            }
            let func = unwrap_parens(o.function);
            let method = match func.kind_str() {
                "attribute" => func.field("attribute").map_or("", |a| self.text(a)),
                _ => self.text(func),
            };
            if matches!(method, "backward" | "step" | "fit" | "train_model")
                || method.contains("load")
            {
                return true;
            }
            // `net.eval()`, `net.load_state_dict(...)`: anything but placement, casts,
            // initialisation and reading its parameters.
            let on_it = func.kind_str() == "attribute"
                && func
                    .field("object")
                    .is_some_and(|r| self.text(unwrap_parens(r)) == name);
            if on_it
                && !(names::is_conversion_method(method)
                    || matches!(
                        method,
                        "train"
                            | "parameters"
                            | "named_parameters"
                            | "modules"
                            | "children"
                            | "apply"
                            | "requires_grad_"
                            | "state_dict"
                    ))
            {
                return true;
            }
            // `train(net, loader)`; but `print(net)` shows it, and `opt =
            // SGD(net.parameters())` is fine until a step.
            if matches!(
                method,
                "print" | "len" | "type" | "repr" | "str" | "display"
            ) {
                return false;
            }
            self.positional_args(o.node)
                .chain(o.arguments.into_iter().flat_map(|a| {
                    let mut cur = a.walk();
                    a.named_children(&mut cur)
                        .filter(|k| k.kind_str() == "keyword_argument")
                        .filter_map(|k| k.field("value"))
                        .collect::<Vec<_>>()
                }))
                .any(|a| self.text(unwrap_parens(a)) == name)
        });
        !touched
    }

    /// Whether `e` is, or is computed from, evaluation data: a batch drawn from an
    /// iterator by hand (`images, labels = next(iter(test_loader))`, `dataiter.next()`)
    /// or a name that says so (`X_test`, `test_images`), through reshaping, placement,
    /// indexing and the names bound to those.
    fn evaluation_input(&self, e: Node<'a>, site: Site, depth: u32) -> bool {
        if depth > 8 {
            return false;
        }
        let e = unwrap_parens(e);
        match e.kind_str() {
            "subscript" => e
                .field("value")
                .is_some_and(|v| self.evaluation_input(v, site, depth + 1)),
            // Named as evaluation data (`X_test`, `test_images`), or drawn by hand.
            "identifier" => {
                let t = self.text(e);
                names::is_eval_split_name(t)
                    || t.rsplit('_').next().is_some_and(names::is_eval_split_name)
                    || self
                        .binding_of(e, site)
                        .and_then(|b| b.value.map(|v| (v, b.site)))
                        .is_some_and(|(v, s)| self.evaluation_input(v, s, depth + 1))
            }
            "call" => {
                let Some(g) = e.field("function") else {
                    return false;
                };
                match g.kind_str() {
                    "identifier" => self.text(g) == "next",
                    "attribute" => {
                        let m = g.field("attribute").map_or("", |a| self.text(a));
                        matches!(m, "next" | "__next__")
                            || g.field("object")
                                .is_some_and(|o| self.evaluation_input(o, site, depth + 1))
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Whether `value` builds a new module with fresh weights: `Net(...)` of a module
    /// class of the file whose constructor loads nothing, or an `nn` layer, optionally
    /// followed by placement, casts and mode switches (`.to(device)`, `.eval()`); none
    /// given a pretrained-weights or checkpoint argument.
    fn builds_fresh_module(&self, value: Node<'a>) -> bool {
        let mut v = unwrap_parens(value);
        // `Net().to(device).eval()`
        while v.kind_str() == "call" {
            let Some(g) = v.field("function") else {
                return false;
            };
            if g.kind_str() == "attribute"
                && g.field("attribute").is_some_and(|a| {
                    matches!(
                        self.text(a),
                        "to" | "cuda" | "cpu" | "eval" | "train" | "float" | "double" | "half"
                    )
                })
            {
                match g.field("object") {
                    Some(o) => v = unwrap_parens(o),
                    None => return false,
                }
                continue;
            }
            break;
        }
        if v.kind_str() != "call" {
            return false;
        }
        let has_weights_arg = v.field("arguments").is_some_and(|a| {
            let mut cur = a.walk();
            let found = a.named_children(&mut cur).any(|k| {
                k.kind_str() == "keyword_argument"
                    && k.field("name").is_some_and(|n| {
                        let n = self.text(n).to_ascii_lowercase();
                        n.contains("pretrain")
                            || n.contains("weight")
                            || n.contains("ckpt")
                            || n.contains("checkpoint")
                            || n.contains("path")
                    })
            });
            found
        });
        if has_weights_arg {
            return false;
        }
        let Some(g) = v.field("function") else {
            return false;
        };
        match g.kind_str() {
            "identifier" => {
                let name = self.text(g);
                if let Some(&class) = self.classes.get(name) {
                    let loads = self.calls.iter_enumerated().any(|(j, o)| {
                        self.class_of_call(j) == Some(class)
                            && self.text(o.function).contains("load")
                    });
                    return self.is_module_class(class) && !loads;
                }
                if self.imports.get(name).is_some_and(|q| {
                    q.segments().len() == 3 && q.segments()[..2] == ["torch", "nn"]
                }) {
                    return true;
                }
                // A class of another file may load weights in its constructor.
                false
            }
            // A container of modules built elsewhere (`nn.Sequential(normalize,
            // pretrained_resnet)`) holds their weights.
            "attribute" => {
                let container = g.field("attribute").is_some_and(|a| {
                    matches!(
                        self.text(a),
                        "Sequential"
                            | "ModuleList"
                            | "ModuleDict"
                            | "DataParallel"
                            | "DistributedDataParallel"
                    )
                });
                g.field("object").is_some_and(|o| {
                    let o = self.text(o);
                    o == "nn" || o.ends_with(".nn")
                }) && !(container
                    && self
                        .positional_args(v)
                        .any(|a| matches!(unwrap_parens(a).kind_str(), "identifier" | "attribute")))
            }
            _ => false,
        }
    }

    /// The class whose method (or nested function) makes call `j`.
    fn class_of_call(&self, j: CallId) -> Option<ScopeId> {
        let f = self.function_of(self.calls[j].site.scope)?;
        self.class_of(f)
    }

    /// Whether an argument of call `i` is, or is computed from, a `Variable(x,
    /// volatile=True)`, through the names it is bound to a few assignments deep
    /// (`inputs = Variable(inputs, volatile=True)`, `inputs = inputs.cuda()`,
    /// `model(inputs)`). PyTorch ignores the flag since 0.4: the code means to run
    /// that call without autograd and does not.
    pub fn volatile_input(&self, i: CallId) -> bool {
        let c = &self.calls[i];
        let Some(args) = c.arguments else {
            return false;
        };
        let mut stack = vec![(args, c.site, 0u32)];
        let mut budget = 256;
        while let Some((n, site, depth)) = stack.pop() {
            budget -= 1;
            if budget == 0 {
                return false;
            }
            match n.kind_str() {
                "lambda" | "string" => continue,
                "call" if self.volatile_variable(n) => return true,
                "identifier" => {
                    if depth == 4 {
                        continue;
                    }
                    let Some(b) = self.resolve(n, site, n.start_byte()) else {
                        continue;
                    };
                    let bd = &self.bindings[b];
                    if !matches!(bd.kind, BindingKind::Assign | BindingKind::Augmented) {
                        continue;
                    }
                    let Some(mut v) = bd.value.map(unwrap_parens) else {
                        continue;
                    };
                    // `noise, fixed = noise.cuda(), fixed.cuda()`: the element bound.
                    if let Some(k) = bd.index {
                        if matches!(v.kind_str(), "tuple" | "expression_list" | "list") {
                            match v.named_child(k) {
                                Some(e) => v = e,
                                None => continue,
                            }
                        }
                    }
                    stack.push((v, bd.site, depth + 1));
                    continue;
                }
                _ => {}
            }
            let mut cur = n.walk();
            stack.extend(n.named_children(&mut cur).map(|x| (x, site, depth)));
        }
        false
    }

    /// `Variable(x, volatile=True)` (also `autograd.Variable`, `torch.autograd.Variable`).
    fn volatile_variable(&self, call: Node<'_>) -> bool {
        let named_variable = call.field("function").is_some_and(|f| {
            let t = self.text(f);
            t == "Variable" || t.ends_with(".Variable")
        });
        named_variable
            && self
                .keyword_arg(call, "volatile")
                .is_some_and(|v| unwrap_parens(v).kind_str() == "true")
    }
}
