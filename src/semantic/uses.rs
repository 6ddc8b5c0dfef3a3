//! How a stored value is used later: the facts that decide whether a fix keeps
//! behaviour. `total += loss.item()` is the same program as `total += loss` only when
//! `total` is never used as a tensor afterwards; `losses.append(loss.item())` only when
//! the list is only summed, averaged, counted or printed; `.item()` only works on a
//! one-element tensor; and `@torch.no_grad()` on a function is harmless only when
//! nothing it hands back can reach a backward pass.
//!
//! Every query is conservative: a use it does not recognise is a use as a tensor, and
//! the fix is then offered as unsafe.

use super::*;

/// How deep a use is followed through arithmetic, names assigned from it and calls
/// that return a number.
const USE_DEPTH: u32 = 6;
/// At most this many nodes are walked to find the reads of one name.
const WALK_LIMIT: usize = 200_000;

impl<'a> SemanticModel<'a> {
    /// Whether the running total `target` (a local name or a `self.` attribute,
    /// accumulated at `site`) is only ever read as a number: in arithmetic,
    /// comparisons, f-strings, `print`/`float`/`round`..., or a logger's scalar
    /// argument (`self.log`, `writer.add_scalar`, `wandb.log({...})`). Its own updates
    /// (`total += x`, `total = total + x`) and resets (`total = 0.0`) are not reads.
    /// A read it cannot follow (returned, passed to another function, a method called
    /// on it) makes the answer no, and so does a `self.` attribute that its class never
    /// reads (the readers are elsewhere).
    pub fn read_only_as_number(&self, target: Node<'_>, site: Site) -> bool {
        self.memo_use(target, site, 0, |reads, attr| {
            self.only_numbers(reads, attr)
        })
    }

    fn only_numbers(&self, reads: &[Node<'a>], attr: bool) -> bool {
        // A `self.` attribute nobody in its class reads is kept for readers elsewhere.
        if reads.is_empty() && attr {
            return false;
        }
        reads.iter().all(|&r| self.numeric_use(r, self.text(r), 0))
    }

    /// A use query about `target`, memoized by its scope and name: a file with
    /// thousands of findings on one name asks once.
    fn memo_use(
        &self,
        target: Node<'_>,
        site: Site,
        query: u8,
        answer: impl FnOnce(&[Node<'a>], bool) -> bool,
    ) -> bool {
        let Some((within, recv, name)) = self.use_key(target, site) else {
            return false;
        };
        let key = (within.id(), recv, name, query);
        if let Some(&a) = self.memo.use_answers.borrow().get(&key) {
            return a;
        }
        let mentions = self.mentions_in(within);
        // `global total`: the name lives beyond the function.
        let global = recv.is_empty()
            && self.function_of(site.scope).is_some_and(|f| {
                self.names.get(&NameKey::Local(f, name)).is_some_and(|bs| {
                    bs.iter()
                        .any(|b| self.bindings[*b].kind == BindingKind::Global)
                })
            });
        let a = mentions.complete && !global && {
            let all = match recv {
                "" => mentions.names.get(name),
                r => mentions.attrs.get(&(r, name)),
            };
            let reads: Vec<Node<'a>> = all
                .map(|v| v.iter().copied().filter(|&n| !self.is_write(n)).collect())
                .unwrap_or_default();
            answer(&reads, !recv.is_empty())
        };
        self.memo.use_answers.borrow_mut().insert(key, a);
        a
    }

    /// Whether the container `container` (a local name or a `self.` attribute that
    /// values are appended to at `site`) is only ever summed, averaged, counted, or
    /// printed: `sum(c)`, `len(c)`, `np.mean(c)`, `statistics.mean(c)`, `print(c)`,
    /// `sum(x for x in c)`, with those results themselves only read as numbers.
    /// Appends, `clear()` and rebinding are not reads.
    pub fn container_only_reduced(&self, container: Node<'_>, site: Site) -> bool {
        self.memo_use(container, site, 1, |reads, attr| {
            if attr && reads.iter().all(|&r| self.is_upkeep(r)) {
                return false;
            }
            reads.iter().all(|&r| self.reduced_use(r))
        })
    }

    /// Whether `expr` is a one-element tensor (or a number), so `.item()` works on it:
    /// a reduction without a dimension (`x.mean()`, `x.sum()`), a loss function's result
    /// without `reduction="none"`, `outputs.loss`, something backpropagated without a
    /// gradient argument (`backward()` demands a scalar), arithmetic of such values and
    /// numbers, or a name bound to one of those.
    pub fn is_scalar(&self, expr: Node<'_>, site: Site) -> bool {
        self.scalar(expr, site, 0)
    }

    fn scalar(&self, expr: Node<'_>, site: Site, depth: u32) -> bool {
        if depth > USE_DEPTH {
            return false;
        }
        let e = unwrap_parens(expr);
        match e.kind_str() {
            "integer" | "float" => true,
            "call" => {
                let Some(f) = e.field("function") else {
                    return false;
                };
                let args = e.field("arguments");
                let no_args = args.is_none_or(|a| a.named_child_count() == 0);
                if f.kind_str() == "attribute" {
                    let m = f.field("attribute").map_or("", |a| self.text(a));
                    if names::TENSOR_REDUCTIONS.contains(&m) && no_args {
                        return true;
                    }
                    if matches!(m, "size" | "numel" | "item" | "dim") {
                        return true;
                    }
                }
                if self.reduction_none(e) {
                    return false;
                }
                // A loss function (`F.cross_entropy(...)`) or a loss module's call.
                if self
                    .qualified(f)
                    .and_then(|q| q.last())
                    .is_some_and(names::is_functional_loss)
                {
                    return true;
                }
                matches!(self.value(f, site), Value::LossFn) && !self.loss_fn_unreduced(f, site)
            }
            "attribute" => {
                let attr = e.field("attribute").map_or("", |a| self.text(a));
                attr == "loss" || self.backpropagated_bare(e, site)
            }
            "identifier" => {
                if self.backpropagated_bare(e, site) {
                    return true;
                }
                let Some(b) = self.binding_of(e, site) else {
                    return false;
                };
                match (b.kind, b.value, b.index) {
                    (BindingKind::Assign, Some(v), None) => self.scalar(v, b.site, depth + 1),
                    _ => false,
                }
            }
            "binary_operator" => {
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return false;
                };
                self.scalar(l, site, depth + 1) && self.scalar(r, site, depth + 1)
            }
            "unary_operator" => e
                .field("argument")
                .is_some_and(|a| self.scalar(a, site, depth + 1)),
            _ => false,
        }
    }

    /// `reduction="none"` (or a reduction not known statically) among a call's keywords.
    fn reduction_none(&self, call: Node<'_>) -> bool {
        self.keyword_arg(call, "reduction")
            .is_some_and(|r| !matches!(self.text(r), "\"mean\"" | "'mean'" | "\"sum\"" | "'sum'"))
    }

    /// A loss module bound here to a constructor with `reduction="none"`.
    fn loss_fn_unreduced(&self, f: Node<'_>, site: Site) -> bool {
        let Some(b) = self.binding_of(f, site) else {
            return false;
        };
        b.value
            .map(unwrap_parens)
            .is_some_and(|v| v.kind_str() == "call" && self.reduction_none(v))
    }

    /// `x.backward()` with no argument in the same function: `x` is a scalar.
    fn backpropagated_bare(&self, e: Node<'_>, site: Site) -> bool {
        let set = self.memo.bare_backwards.get_or_init(|| {
            self.backwards
                .iter()
                .filter_map(|b| {
                    let c = &self.calls[b.call];
                    let bare = c.function.kind_str() == "attribute"
                        && c.arguments.is_some_and(|a| a.named_child_count() == 0);
                    bare.then(|| (self.function_of(c.site.scope), self.text(b.loss)))
                })
                .collect()
        });
        set.contains(&(self.function_of(site.scope), self.text(e)))
    }

    /// Where the uses of `target` (assigned at `site`) are looked for, and its name: a
    /// local's function, or a `self.` attribute's class (receiver `self`); `None` for
    /// what lives beyond them (a `global`, a name of the module, another object).
    fn use_key(&self, target: Node<'_>, site: Site) -> Option<(Node<'a>, &'a str, &'a str)> {
        let target = unwrap_parens(target);
        let f = self.function_of(site.scope)?;
        match target.kind_str() {
            "identifier" => Some((self.scope(f).node, "", self.text(target))),
            "attribute" => {
                let obj = target.field("object")?;
                let sc = self.scope(f);
                let me: &'a str = sc.class.and(sc.params.first().copied())?;
                if obj.kind_str() != "identifier" || self.text(obj) != me {
                    return None;
                }
                let class = self.class_of(f)?;
                let name = self.text(target.field("attribute")?);
                Some((self.scope(class).node, me, name))
            }
            _ => None,
        }
    }

    /// Every name and `obj.attr` mentioned in `within`, reads and writes alike, in
    /// source order: one walk per scope.
    pub(super) fn mentions_in(&self, within: Node<'a>) -> std::rc::Rc<Mentions<'a>> {
        if let Some(m) = self.memo.mentions.borrow().get(&within.id()) {
            return m.clone();
        }
        let mut m = Mentions {
            complete: true,
            ..Default::default()
        };
        // With each node its parent: tree-sitter finds a parent by walking down from the
        // root, which would make this walk quadratic in a deep tree.
        let mut stack: Vec<(Node<'a>, Option<Node<'a>>)> = vec![(within, None)];
        let mut seen = 0usize;
        while let Some((n, parent)) = stack.pop() {
            seen += 1;
            if seen > WALK_LIMIT {
                m.complete = false;
                break;
            }
            match n.kind_str() {
                "identifier" if is_name_read(n, parent) => {
                    m.names.entry(self.text(n)).or_default().push(n);
                }
                "attribute" => {
                    if let (Some(o), Some(a)) = (n.field("object"), n.field("attribute")) {
                        if o.kind_str() == "identifier" {
                            m.attrs
                                .entry((self.text(o), self.text(a)))
                                .or_default()
                                .push(n);
                        }
                    }
                }
                _ => {}
            }
            let mut c = n.walk();
            let children: Vec<Node<'a>> = n.named_children(&mut c).collect();
            stack.extend(children.into_iter().rev().map(|ch| (ch, Some(n))));
        }
        let m = std::rc::Rc::new(m);
        self.memo
            .mentions
            .borrow_mut()
            .insert(within.id(), m.clone());
        m
    }

    /// Whether the name node `n` is written here rather than read: a plain assignment's
    /// target, or the target of `n += ...` (an update, read only by itself).
    fn is_write(&self, n: Node<'_>) -> bool {
        let Some(p) = n.parent() else { return false };
        match p.kind_str() {
            "assignment" | "augmented_assignment" => {
                p.field("left").is_some_and(|l| l.id() == n.id())
            }
            // `a, total = ...`
            "pattern_list" | "tuple_pattern" => true,
            _ => false,
        }
    }

    /// Whether the read `r` (or the value computed from it) is only used as a number.
    fn numeric_use(&self, r: Node<'_>, name: &str, depth: u32) -> bool {
        if depth > USE_DEPTH {
            return false;
        }
        let mut child = r;
        let Some(mut p) = r.parent() else {
            return false;
        };
        while p.kind_str() == "parenthesized_expression" {
            child = p;
            match p.parent() {
                Some(q) => p = q,
                None => return false,
            }
        }
        match p.kind_str() {
            // Comparisons give a bool; an f-string or `%` formats the number.
            "comparison_operator" | "interpolation" | "format_specifier" => true,
            "not_operator" | "boolean_operator" => true,
            "binary_operator" | "unary_operator" => self.numeric_use(p, name, depth + 1),
            // `total = total + x` (the update), or `avg = total / n` (follow `avg`).
            "assignment" | "augmented_assignment" => {
                let Some(left) = p.field("left") else {
                    return false;
                };
                if left.id() == child.id() {
                    return true;
                }
                // `total = total + x` rebinds the total itself; `avg = total / n` or
                // `epoch_total += total` hands the value on: not followed.
                p.kind_str() == "assignment" && self.text(left) == name
            }
            "argument_list" => {
                let Some(call) = p.parent() else { return false };
                self.numeric_call_use(call, name, depth)
            }
            "keyword_argument" => {
                let Some(call) = p.parent().and_then(|a| a.parent()) else {
                    return false;
                };
                self.numeric_call_use(call, name, depth)
            }
            // `{"loss": total}` handed to a logger.
            "pair" => {
                let Some(dict) = p.parent() else { return false };
                p.field("value").is_some_and(|v| v.id() == child.id())
                    && dict.kind_str() == "dictionary"
                    && self.numeric_use(dict, name, depth + 1)
            }
            // `if total:` / `while total > 0`
            "if_statement" | "while_statement" | "elif_clause" => {
                p.field("condition").is_some_and(|c| c.id() == child.id())
            }
            _ => false,
        }
    }

    /// Whether a call that receives a number only reads it as one: builtins that
    /// convert or print it, `math.*`, and the scalar loggers; `max`/`min`/`abs`/`round`
    /// give a number whose own use is followed.
    fn numeric_call_use(&self, call: Node<'_>, name: &str, depth: u32) -> bool {
        if call.kind_str() != "call" {
            return false;
        }
        let Some(f) = call.field("function") else {
            return false;
        };
        if f.kind_str() == "identifier" {
            return match self.text(f) {
                "print" | "float" | "int" | "str" | "bool" | "format" | "repr" => true,
                "max" | "min" | "abs" | "round" => self.numeric_use(call, name, depth + 1),
                _ => false,
            };
        }
        if let Some(q) = self.qualified(f) {
            if q.first() == Some("math") {
                return true;
            }
        }
        f.kind_str() == "attribute"
            && f.field("attribute")
                .is_some_and(|a| names::is_scalar_logger_method(self.text(a)))
    }

    /// `c.append(x)`, `c.clear()`: the container's own upkeep, not a read of its values.
    fn is_upkeep(&self, r: Node<'_>) -> bool {
        r.parent().is_some_and(|p| {
            p.kind_str() == "attribute"
                && p.parent().is_some_and(|c| c.kind_str() == "call")
                && p.field("attribute").is_some_and(|a| {
                    let m = self.text(a);
                    names::GROWTH_METHODS.contains(&m) || m == "clear"
                })
        })
    }

    /// Whether a read of a container only reduces it to numbers.
    fn reduced_use(&self, r: Node<'_>) -> bool {
        let Some(p) = r.parent() else { return false };
        match p.kind_str() {
            // `losses.append(x)`, `losses.clear()`: the container's own upkeep.
            "attribute" => {
                let m = p.field("attribute").map_or("", |a| self.text(a));
                let called = p.parent().is_some_and(|c| c.kind_str() == "call");
                called && (names::GROWTH_METHODS.contains(&m) || m == "clear")
            }
            "argument_list" => {
                let Some(call) = p.parent() else { return false };
                let Some(f) = call.field("function") else {
                    return false;
                };
                let reducing = match f.kind_str() {
                    "identifier" => matches!(self.text(f), "sum" | "len" | "max" | "min" | "print"),
                    _ => self.qualified(f).is_some_and(|q| {
                        matches!(q.first(), Some("numpy" | "statistics" | "np"))
                            && matches!(
                                q.last(),
                                Some("mean" | "average" | "fmean" | "median" | "sum" | "std")
                            )
                    }),
                };
                // `len(c)` reads no element; the others give a number, followed.
                reducing
                    && (self.text(f) == "len"
                        || self.text(f) == "print"
                        || self.numeric_use(call, "", 1))
            }
            // `sum(x for x in losses)`: the iterable of a generator that is reduced.
            "for_in_clause" => {
                let Some(generator) = p.parent() else {
                    return false;
                };
                let elem_plain = generator
                    .named_child(0)
                    .zip(p.field("left"))
                    .is_some_and(|(body, var)| self.text(body) == self.text(var));
                let Some(args) = generator.parent() else {
                    return false;
                };
                let call = if args.kind_str() == "call" {
                    Some(args)
                } else {
                    args.parent()
                };
                elem_plain
                    && call.is_some_and(|c| {
                        c.field("function")
                            .is_some_and(|f| matches!(self.text(f), "sum" | "max" | "min"))
                            && self.numeric_use(c, "", 1)
                    })
            }
            _ => false,
        }
    }

    /// Whether anything the function `f` hands back can reach a backward pass: a
    /// returned value, a graph stored through a parameter or `self`, or a backward in
    /// the function itself. No: every `return` gives a detached value (or nothing), the
    /// function stores no graph outside itself and runs no backward, so running it under
    /// `torch.no_grad()` changes nothing any caller can see, in this file or another.
    pub fn outputs_may_reach_backward(&self, f: ScopeId) -> bool {
        let sc = self.scope(f);
        if sc
            .returns
            .iter()
            .any(|&(e, site)| !matches!(self.value(e, site), Value::Detached))
        {
            return true;
        }
        let with_backward = self.memo.backward_functions.get_or_init(|| {
            let mut set = FxHashSet::default();
            for b in &self.backwards {
                let mut cur = Some(self.calls[b.call].site.scope);
                while let Some(s) = cur {
                    set.insert(s);
                    cur = self.scope(s).parent;
                }
            }
            set
        });
        if with_backward.contains(&f) {
            return true;
        }
        // `yield` hands values out too.
        if contains_kind(sc.node, "yield", WALK_LIMIT) {
            return true;
        }
        for i in self.calls_of_function(Some(f)) {
            let c = &self.calls[i];
            let Some((recv, m)) = self.method_call(c) else {
                continue;
            };
            if !names::GROWTH_METHODS.contains(&m) && m != "update" && m != "setdefault" {
                continue;
            }
            let local = self.binding_of(recv, c.site).is_some_and(|b| {
                b.kind != BindingKind::Parameter && self.function_of(b.site.scope) == Some(f)
            });
            if local {
                continue;
            }
            let stores_graph = self
                .positional_args(c.node)
                .any(|a| matches!(self.value(a, c.site), Value::Graph(_)));
            if stores_graph {
                return true;
            }
        }
        let by_function = self.memo.assigns_by_function.get_or_init(|| {
            let mut map: FxHashMap<Option<ScopeId>, Vec<AssignId>> = FxHashMap::default();
            for (i, a) in self.assignments.iter_enumerated() {
                map.entry(self.function_of(a.site.scope))
                    .or_default()
                    .push(i);
            }
            map
        });
        by_function.get(&Some(f)).is_some_and(|ids| {
            ids.iter().any(|&i| {
                let a = &self.assignments[i];
                matches!(
                    unwrap_parens(a.target).kind_str(),
                    "attribute" | "subscript"
                ) && matches!(self.value(a.value, a.site), Value::Graph(_))
            })
        })
    }
}

/// The names and `obj.attr` expressions a scope mentions ([`SemanticModel::mentions_in`]).
#[derive(Default)]
pub(super) struct Mentions<'a> {
    /// Identifier nodes that name something (reads and writes), by name.
    pub names: FxHashMap<&'a str, Vec<Node<'a>>>,
    /// `obj.attr` nodes with a plain name as object, by (object, attribute).
    pub attrs: FxHashMap<(&'a str, &'a str), Vec<Node<'a>>>,
    /// False when the scope was too large to walk whole.
    pub complete: bool,
}

/// Whether an identifier node is a read of a name (not a keyword argument's name, an
/// attribute's name, a parameter, or the name a `def`/`class`/import introduces).
fn is_name_read(n: Node<'_>, parent: Option<Node<'_>>) -> bool {
    let Some(p) = parent else { return true };
    let is = |field: &'static str| p.field(field).is_some_and(|f| f.id() == n.id());
    match p.kind_str() {
        "attribute" => !is("attribute"),
        "keyword_argument" => !is("name"),
        "function_definition" | "class_definition" => false,
        "parameters"
        | "default_parameter"
        | "typed_parameter"
        | "typed_default_parameter"
        | "lambda_parameters" => false,
        "dotted_name" | "aliased_import" | "import_from_statement" | "import_statement" => false,
        "global_statement" | "nonlocal_statement" => false,
        _ => true,
    }
}

/// Whether `node` has a descendant of `kind` (a bounded walk).
fn contains_kind(node: Node<'_>, kind: &str, limit: usize) -> bool {
    let mut stack = vec![node];
    let mut seen = 0;
    while let Some(n) = stack.pop() {
        seen += 1;
        if seen > limit {
            return true;
        }
        if n.kind_str() == kind {
            return true;
        }
        // A nested function's yields are its own.
        if n.id() != node.id() && matches!(n.kind_str(), "function_definition" | "lambda") {
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    false
}
