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
    /// Whether function `f` is defined inside another function that returns it by name.
    pub fn is_returned_closure(&self, f: ScopeId) -> bool {
        let sc = self.scope(f);
        let Some(parent) = sc.parent.filter(|&p| self.scope(p).is_function()) else {
            return false;
        };
        self.scope(parent)
            .returns
            .iter()
            .any(|&(r, _)| r.kind() == "identifier" && self.text(r) == sc.name)
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
        let mut child = node;
        let mut cur = node.parent();
        while let Some(n) = cur {
            if matches!(n.kind(), "function_definition" | "class_definition") {
                return false;
            }
            if n.kind() == "if_statement" || n.kind() == "elif_clause" {
                let in_body = n
                    .child_by_field_name("consequence")
                    .is_some_and(|b| b.id() == child.id());
                if in_body {
                    if let Some(c) = n.child_by_field_name("condition") {
                        if names_foreign_framework(self.text(c)) {
                            return true;
                        }
                    }
                }
            }
            child = n;
            cur = n.parent();
        }
        false
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
            "tf" | "tensorflow" | "jax" | "flax" | "keras"
        )
    })
}
