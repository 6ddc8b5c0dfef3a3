//! Iteration: loops and per-step hooks (units), which code runs once per step (through
//! same-file calls), step loops, and whether a value lives across iterations.

use super::*;

impl<'a> SemanticModel<'a> {
    /// Whether `inner` is `outer` or nested in it (same scope).
    pub fn loop_within(&self, inner: Option<LoopId>, outer: LoopId) -> bool {
        let mut l = inner;
        while let Some(id) = l {
            if id == outer {
                return true;
            }
            l = self.loop_(id).parent;
        }
        false
    }

    /// The same-file functions that run once per iteration of `loop_`.
    pub fn loop_callees(&self, loop_: LoopId) -> &[ScopeId] {
        &self.loop_callees[loop_]
    }

    /// The calls made directly in `loop_`'s body (nested blocks and loops included).
    pub fn calls_in_loop(&self, loop_: LoopId) -> impl Iterator<Item = (CallId, &Call<'a>)> {
        // Calls are recorded in pre-order, so those inside the body are one contiguous run.
        let body = self.loop_(loop_).body.byte_range();
        let lo = self
            .calls
            .partition_point(|c| c.node.start_byte() < body.start);
        let hi = self
            .calls
            .partition_point(|c| c.node.start_byte() < body.end);
        IndexVec::<CallId, Call<'a>>::range(lo, hi)
            .map(move |i| (i, &self.calls[i]))
            .filter(move |(_, c)| self.loop_within(c.site.loop_, loop_))
    }

    /// Every loop and every per-step hook.
    pub fn units(&self) -> impl Iterator<Item = Unit> + '_ {
        self.loops
            .ids()
            .map(Unit::Loop)
            .chain(self.hook_callees.iter().map(|(h, _)| Unit::Hook(*h)))
    }

    /// The same-file functions that run once per iteration of `unit`.
    pub fn unit_callees(&self, unit: Unit) -> &[ScopeId] {
        match unit {
            Unit::Loop(l) => self.loop_callees(l),
            Unit::Hook(h) => self
                .hook_callees
                .iter()
                .find(|(x, _)| *x == h)
                .map_or(&[], |(_, v)| v.as_slice()),
        }
    }

    /// Whether a fact at `site` runs once per iteration of `unit` (directly, in nested
    /// blocks and loops, or in a same-file function the unit calls).
    pub fn runs_in(&self, site: Site, unit: Unit) -> bool {
        let direct = match unit {
            Unit::Loop(l) => self.loop_within(site.loop_, l),
            Unit::Hook(h) => self.function_of(site.scope) == Some(h),
        };
        direct
            || self
                .function_of(site.scope)
                .is_some_and(|f| self.unit_callees(unit).contains(&f))
    }

    /// The calls that run once per iteration of `unit`, in source order of their function.
    pub fn calls_in_unit(&self, unit: Unit) -> Vec<CallId> {
        let mut out: Vec<CallId> = match unit {
            Unit::Loop(l) => self.calls_in_loop(l).map(|(i, _)| i).collect(),
            Unit::Hook(h) => self.calls_by_function[h].clone(),
        };
        for &f in self.unit_callees(unit) {
            out.extend_from_slice(&self.calls_by_function[f]);
        }
        out
    }

    /// Why code at `site` runs once per step, if it does.
    pub fn iteration(&self, site: Site) -> Option<Iteration> {
        if let Some(l) = self.step_loop(site) {
            return Some(Iteration::Loop(l));
        }
        let f = self.function_of(site.scope)?;
        if self.iterated()[f] {
            return Some(Iteration::Called);
        }
        if self.is_per_step_hook(f) {
            return Some(Iteration::Hook);
        }
        None
    }

    /// Whether `node` runs on every iteration of `loop_`: it stands in the loop's body
    /// outside any branch of it (blocks of `with` statements are seen through), so no
    /// interval test (`if step % save_every == 0:`) decides whether it runs.
    pub fn runs_every_iteration(&self, node: Node<'_>, loop_: LoopId) -> bool {
        let body = self.loop_(loop_).body;
        if !body.byte_range().contains(&node.start_byte()) {
            return false;
        }
        let mut n = node;
        while let Some(p) = n.parent() {
            if p.id() == body.id() {
                return true;
            }
            if p.kind_str() == "block"
                && p.parent().is_none_or(|o| o.kind_str() != "with_statement")
            {
                return false;
            }
            if matches!(
                p.kind_str(),
                "lambda" | "function_definition" | "conditional_expression" | "boolean_operator"
            ) {
                return false;
            }
            n = p;
        }
        false
    }

    /// The innermost loop around `site` whose iterations are separate steps (see
    /// [`Self::is_step_loop`]): the iteration a kept graph outlives.
    pub fn step_loop(&self, site: Site) -> Option<LoopId> {
        let mut l = site.loop_;
        while let Some(id) = l {
            if self.is_step_loop(id) {
                return Some(id);
            }
            l = self.loop_(id).parent;
        }
        None
    }

    /// Whether each iteration of a loop is a separate training or evaluation step, as
    /// opposed to part of one computation (a loop over layers inside `forward`, tiles
    /// of one decode), where keeping every iteration's graph is what backward needs.
    /// A step loop backpropagates or steps an optimizer, or iterates over data
    /// (`loader`, `batches`, `range(epochs)`, `while step < max_steps`, or a name
    /// bound to a wrapper of data: `pbar = tqdm(loader)`) outside model code.
    pub fn is_step_loop(&self, l: LoopId) -> bool {
        if let Some(v) = self.memo.step_loops.borrow()[l] {
            return v;
        }
        // Provisional answer while deciding (a helper called from the loop may ask).
        self.memo.step_loops.borrow_mut()[l] = Some(false);
        let v = self.decide_step_loop(l);
        self.memo.step_loops.borrow_mut()[l] = Some(v);
        v
    }

    fn decide_step_loop(&self, l: LoopId) -> bool {
        let calls = self.calls_in_unit(Unit::Loop(l));
        if calls
            .iter()
            .any(|&c| self.backward_at(c).is_some() || self.optimizer_step(c).is_some())
        {
            return true;
        }
        let lp = self.loop_(l);
        if self.in_model_code(l) {
            return false;
        }
        let header = match lp.kind {
            LoopKind::For => lp.iter,
            LoopKind::While => lp.node.field("condition"),
        };
        if header.is_some_and(|h| self.mentions_data(h) || self.bound_to_data(h, lp.scope)) {
            return true;
        }
        if lp.kind == LoopKind::For && header.is_some_and(|h| self.strides_batches(h, lp.scope)) {
            return true;
        }
        // `while True:` that fetches a batch each time: `X, Y = get_batch("train")`,
        // `batch = next(train_iter)`.
        lp.kind == LoopKind::While
            && self.calls_in_loop(l).any(|(_, c)| {
                self.mentions_data(c.function)
                    || self.text(c.function) == "next"
                        && c.arguments.is_some_and(|a| self.mentions_data(a))
            })
    }

    /// Whether loop `l` is part of a model's own computation: in a `forward`, or in a
    /// method of a module class that frameworks do not call once per step (a loop over
    /// layers, over time steps of one decode).
    pub fn in_model_code(&self, l: LoopId) -> bool {
        self.function_of(self.loop_(l).scope).is_some_and(|f| {
            self.scope(f).name == "forward"
                || self.class_of(f).is_some_and(|c| self.is_module_class(c))
                    && !self.is_per_step_hook(f)
        })
    }

    /// The value the name `h` read in `scope` was bound to by a plain assignment (not
    /// an unpacking): what a loop header that names it iterates over.
    fn plain_value_in(&self, h: Node<'_>, scope: ScopeId) -> Option<Node<'a>> {
        let site = Site {
            scope,
            loop_: None,
            grad: GradMode::Default,
        };
        let bd = &self.bindings[self.resolve(h, site, h.start_byte())?];
        match (bd.kind, bd.index, bd.value) {
            (BindingKind::Assign, None, Some(v)) => Some(unwrap_parens(v)),
            _ => None,
        }
    }

    /// Whether a loop header walks a dataset by batches: `range(0, n, batch_size)`
    /// (or `trange`), directly or through a name bound to it in the same scope
    /// (`iterator = trange(0, len(images), batch_size)`; `for start in iterator:`).
    fn strides_batches(&self, header: Node<'_>, scope: ScopeId) -> bool {
        let mut h = unwrap_parens(header);
        if h.kind_str() == "identifier" {
            match self.plain_value_in(h, scope) {
                Some(v) => h = v,
                None => return false,
            }
        }
        if h.kind_str() != "call" {
            return false;
        }
        let ranged = h.field("function").is_some_and(|f| {
            let t = self.text(f);
            t == "range" || t == "trange" || t.ends_with(".trange")
        });
        ranged
            && self.positional_args(h).nth(2).is_some_and(|step| {
                let t = self.text(unwrap_parens(step)).to_ascii_lowercase();
                t.contains("batch") || t == "bs" || t.ends_with(".bs") || t.ends_with("_bs")
            })
    }

    /// Whether a `for` loop walks something in strides or chunks: `range(0, n, step)`
    /// with a step other than 1, `x.split(size)`, `torch.chunk(x, n)`, directly, through
    /// a progress bar or `enumerate`, or through a name bound to one in the same scope.
    /// Each iteration is one slice of a larger input: an evaluation in chunks.
    pub fn walks_in_chunks(&self, l: LoopId) -> bool {
        let lp = self.loop_(l);
        if lp.kind != LoopKind::For {
            return false;
        }
        let Some(mut h) = lp.iter.map(unwrap_parens) else {
            return false;
        };
        for _ in 0..4 {
            if h.kind_str() == "identifier" {
                match self.plain_value_in(h, lp.scope) {
                    Some(v) => h = v,
                    None => return false,
                }
                continue;
            }
            if h.kind_str() != "call" {
                return false;
            }
            let Some(func) = h.field("function") else {
                return false;
            };
            let name = match func.kind_str() {
                "attribute" => func.field("attribute").map_or("", |a| self.text(a)),
                _ => self.text(func),
            };
            match name {
                "range" | "trange" => {
                    return self
                        .positional_args(h)
                        .nth(2)
                        .is_some_and(|step| !matches!(self.text(unwrap_parens(step)), "1" | "-1"));
                }
                "split" | "chunk" | "array_split" | "tensor_split" => return true,
                "tqdm" | "enumerate" => match self.positional_args(h).next() {
                    Some(a) => h = unwrap_parens(a),
                    None => return false,
                },
                _ => return false,
            }
        }
        false
    }

    /// Whether the value of `expr` stored or accumulated at `site` lives only through
    /// one iteration of an outer loop: the innermost loop repeats an update a fixed
    /// number of times (`for _ in range(n_critic):`, `for i in range(len(netsD)):`,
    /// fetching no data of its own) or walks pieces of the outer loop's item (chunks
    /// of the step's batch)
    /// inside a loop over data, and the container is bound afresh in each iteration of
    /// that outer loop (`d_total = 0.0` before the repeats). What it keeps is bounded
    /// by the repeat count and freed every step; it does not grow over training.
    pub fn fresh_per_outer_step(&self, expr: Node<'_>, site: Site) -> bool {
        let Some(l) = site.loop_ else { return false };
        let lp = self.loop_(l);
        let Some(parent) = lp.parent else {
            return false;
        };
        // `range(count)` with a count that names no data (`hp.train.rep_discriminator`,
        // `self.n_critic`; not `len(loader)`, `steps_per_epoch`), a target nobody reads.
        let count_only = |i: Node<'_>| {
            let i = unwrap_parens(i);
            if i.kind_str() != "call" || i.field("function").is_none_or(|f| self.text(f) != "range")
            {
                return false;
            }
            let mut args = self.positional_args(i);
            let (Some(n), None) = (args.next(), args.next()) else {
                return false;
            };
            let mut n = unwrap_parens(n);
            // `range(len(netsD))`: one update per discriminator.
            if n.kind_str() == "call" && n.field("function").is_some_and(|f| self.text(f) == "len")
            {
                let mut inner = self.positional_args(n);
                match (inner.next(), inner.next()) {
                    (Some(x), None) => n = unwrap_parens(x),
                    _ => return false,
                }
            }
            let last = match n.kind_str() {
                "identifier" => self.text(n),
                "attribute" => n.field("attribute").map_or("", |a| self.text(a)),
                // `range(models["cascade_level"])`: the key names the count.
                "subscript" => match n.field("subscript").map(unwrap_parens) {
                    Some(k) if k.kind_str() == "string" => {
                        let t = self.text(k);
                        t.trim_matches(|c| c == '"' || c == '\'')
                    }
                    _ => return false,
                },
                "integer" => return true,
                _ => return false,
            };
            !names::is_data_name(last)
        };
        let repeats = lp.kind == LoopKind::For
            && lp
                .iter
                .is_some_and(|i| count_only(i) || self.pieces_of_item(i, parent))
            && !self
                .calls_in_loop(l)
                .any(|(_, c)| self.text(c.function) == "next");
        if !repeats || !self.is_step_loop(parent) {
            return false;
        }
        let outer = Site {
            loop_: Some(parent),
            ..site
        };
        self.step_loop(outer) == Some(parent) && !self.lives_across_iterations(expr, outer)
    }

    /// Whether a loop header names a local bound, in the same scope, to something that
    /// names data: `pbar = tqdm(dataloader)` ... `for i, batch in enumerate(pbar):`.
    fn bound_to_data(&self, header: Node<'_>, scope: ScopeId) -> bool {
        let site = Site {
            scope,
            loop_: None,
            grad: GradMode::Default,
        };
        let mut cursor = header.walk();
        let mut stack = vec![header];
        while let Some(n) = stack.pop() {
            match n.kind_str() {
                "identifier" => {
                    let bound = self.resolve(n, site, n.start_byte()).is_some_and(|b| {
                        let bd = &self.bindings[b];
                        bd.kind == BindingKind::Assign
                            && bd.index.is_none()
                            && bd.site.scope == scope
                            && bd
                                .value
                                .map(unwrap_parens)
                                .is_some_and(|v| self.wraps_data(v))
                    });
                    if bound {
                        return true;
                    }
                }
                "lambda" | "string" => {}
                _ => stack.extend(n.named_children(&mut cursor)),
            }
        }
        false
    }

    /// Whether `v` wraps data for iteration: `tqdm(dataloader)`, `enumerate(loader)`,
    /// `DataLoader(dataset)`.
    fn wraps_data(&self, v: Node<'_>) -> bool {
        if v.kind_str() != "call" {
            return false;
        }
        // An iteration helper (`tqdm`, `enumerate`, `iter`, a `DataLoader`): a forward
        // on a batch (`outputs = model(samples)`) or a sample of indices is no loader.
        let iterates = v.field("function").is_some_and(|f| {
            let last = match f.kind_str() {
                "attribute" => f.field("attribute").map_or("", |a| self.text(a)),
                _ => self.text(f),
            };
            last.eq_ignore_ascii_case("tqdm")
                || matches!(
                    last,
                    "enumerate" | "iter" | "DataLoader" | "zip" | "islice" | "cycle"
                )
        });
        iterates && v.field("arguments").is_some_and(|a| self.mentions_data(a))
    }

    /// Whether the header of a loop inside loop `outer` walks pieces of `outer`'s
    /// current item: a name in it is bound, in `outer`'s body, from `outer`'s own loop
    /// target (`for chunk_x, chunk_y in zip(x_chunks, y_chunks):` after `x_chunks =
    /// split(x)` where `x` is the batch). Its length is bounded by one item.
    fn pieces_of_item(&self, header: Node<'_>, outer: LoopId) -> bool {
        let derives = |n: Node<'_>, site: Site| -> bool {
            let mut stack = vec![(n, site, 0u32)];
            let mut budget = 128;
            while let Some((x, site, depth)) = stack.pop() {
                budget -= 1;
                if budget == 0 {
                    return false;
                }
                match x.kind_str() {
                    "identifier" => {
                        let Some(b) = self.resolve(x, site, x.start_byte()) else {
                            continue;
                        };
                        let bd = &self.bindings[b];
                        if bd.site.loop_ != Some(outer) {
                            continue;
                        }
                        if bd.kind == BindingKind::ForTarget {
                            return true;
                        }
                        if bd.kind == BindingKind::Assign && depth < 4 {
                            if let Some(v) = bd.value {
                                stack.push((v, bd.site, depth + 1));
                            }
                        }
                    }
                    "lambda" | "string" => {}
                    _ => {
                        let mut c = x.walk();
                        stack.extend(x.named_children(&mut c).map(|y| (y, site, depth)));
                    }
                }
            }
            false
        };
        let site = Site {
            scope: self.loop_(outer).scope,
            loop_: Some(outer),
            grad: GradMode::Default,
        };
        !self.mentions_loader(header) && derives(header, site)
    }

    /// Whether an expression names a loader or dataset (not a batch drawn from one).
    fn mentions_loader(&self, expr: Node<'_>) -> bool {
        let mut cursor = expr.walk();
        let mut stack = vec![expr];
        while let Some(n) = stack.pop() {
            if n.kind_str() == "identifier" {
                let l = self.text(n).to_ascii_lowercase();
                if l.contains("loader") || l.contains("dataset") {
                    return true;
                }
            }
            stack.extend(n.named_children(&mut cursor));
        }
        false
    }

    /// Whether an expression names data or steps (`train_loader`, `range(args.epochs)`).
    fn mentions_data(&self, expr: Node<'_>) -> bool {
        let mut cursor = expr.walk();
        let mut stack = vec![expr];
        while let Some(n) = stack.pop() {
            if n.kind_str() == "identifier" && names::is_data_name(self.text(n)) {
                return true;
            }
            if matches!(n.kind_str(), "lambda" | "string") {
                continue;
            }
            stack.extend(n.named_children(&mut cursor));
        }
        false
    }

    /// Functions that run once per step: reachable from a step loop or a per-step hook.
    fn iterated(&self) -> &IndexVec<ScopeId, bool> {
        &self.iteration_reach().0
    }

    /// Functions reachable from a step loop of this file (their parameters may be the
    /// loop's long-lived containers).
    fn called_from_step_loop(&self) -> &IndexVec<ScopeId, bool> {
        &self.iteration_reach().1
    }

    fn iteration_reach(&self) -> &(IndexVec<ScopeId, bool>, IndexVec<ScopeId, bool>) {
        self.memo.iterated.get_or_init(|| {
            let mut any = IndexVec::from_elem(false, self.scopes.len());
            let mut from_loop = IndexVec::from_elem(false, self.scopes.len());
            for l in self.loops.ids() {
                if !self.loop_callees(l).is_empty() && self.is_step_loop(l) {
                    for &f in self.loop_callees(l) {
                        any[f] = true;
                        from_loop[f] = true;
                    }
                }
            }
            for (_, callees) in &self.hook_callees {
                for &f in callees {
                    any[f] = true;
                }
            }
            (any, from_loop)
        })
    }

    /// A method that frameworks call once per step.
    pub fn is_per_step_hook(&self, scope: ScopeId) -> bool {
        let s = self.scope(scope);
        s.class.is_some() && names::is_per_step_hook(s.name) && {
            // `forward` is per step only on module classes.
            s.name != "forward" || s.class.is_some_and(|c| self.is_module_class(c))
        }
    }

    pub fn lives_across_iterations(&self, expr: Node<'_>, site: Site) -> bool {
        self.lives_across(expr, site, self.step_loop(site))
    }

    /// Whether the container `expr` read at `site` keeps its value from one iteration
    /// of loop `step` to the next (with `None`, from one call of the enclosing
    /// function to the next).
    pub fn lives_across(&self, expr: Node<'_>, site: Site, step: Option<LoopId>) -> bool {
        let Some(key) = self.name_key(expr, site.scope) else {
            return false;
        };
        let f = self.function_of(site.scope);
        // Plain assignments only: a file of 100,000 `self.t += loss` has none to scan.
        let candidates = self.assigns.get(&key).map(Vec::as_slice).unwrap_or(&[]);
        let upto = candidates.partition_point(|&b| self.bindings[b].pos <= expr.start_byte());
        // Fresh: rebound earlier in the same iteration on every path to the read. In a
        // loop, a binding in a sibling branch (`if acc is None: acc = out` / `else: acc =
        // torch.cat((acc, out))`) leaves the other branch reading last step's value; a
        // local of a per-step function (`forward`) starts over at every call anyway.
        let before = &candidates[..upto];
        let at = expr.start_byte();
        // Bound in every branch of an `if`/`else` that runs before the read.
        let every_arm = |v: Node<'a>| {
            self.complete_if(v, at).is_some_and(|(_, arms)| {
                arms.iter().all(|arm| {
                    before.iter().any(|&o| {
                        self.bindings[o]
                            .value
                            .is_some_and(|ov| arm.byte_range().contains(&ov.start_byte()))
                    })
                })
            })
        };
        let local_fresh = before.iter().any(|&b| {
            let b = &self.bindings[b];
            self.function_of(b.site.scope) == f
                && match step {
                    Some(l) => {
                        self.loop_within(b.site.loop_, l)
                            && b.value
                                .is_none_or(|v| self.dominates(v, at) || every_arm(v))
                    }
                    None => true,
                }
        });
        if local_fresh {
            return false;
        }
        match key {
            NameKey::Attr(..) => true,
            NameKey::Local(..) => {
                let Some(b) = self.resolve(expr, site, expr.start_byte()) else {
                    return false;
                };
                // The target of a loop inside the step (`for m in modules:` within the
                // loop over batches) is rebound at the top of each of its iterations.
                let bd = &self.bindings[b];
                if bd.kind == BindingKind::ForTarget
                    && step.is_some_and(|l| self.loop_within(bd.site.loop_, l))
                {
                    return false;
                }
                // A framework calls a hook (`forward`, `training_step`) with fresh
                // arguments each step; a helper called from our own loop may be handed
                // the loop's long-lived containers.
                let hook_param = self.bindings[b].kind == BindingKind::Parameter
                    && step.is_none()
                    && f.is_some_and(|f| !self.called_from_step_loop()[f]);
                !hook_param
            }
        }
    }

    /// Whether the keys of the subscript store `target` (`self.outputs[f"conv{i}"] = h`
    /// in a loop over layers) vary only with the targets of loops that are not steps
    /// (see [`Self::is_step_loop`]): every call writes the same keys again, so the
    /// container keeps one call's values, as a constant key does. A key from a step
    /// loop (`history[epoch] = loss`) or from anything else varies per step.
    pub fn key_rewritten_each_call(&self, target: Node<'a>, site: Site) -> bool {
        let mut c = target.walk();
        let keys: Vec<Node<'a>> = target.children_by_field_name("subscript", &mut c).collect();
        let mut loop_key = false;
        let mut stack = keys;
        while let Some(n) = stack.pop() {
            if n.kind_str() == "attribute" {
                // `self.names[i]`: the object decides, not the attribute's name.
                stack.extend(n.field("object"));
                continue;
            }
            if n.kind_str() != "identifier" {
                let mut cur = n.walk();
                stack.extend(n.named_children(&mut cur));
                continue;
            }
            let Some(b) = self.resolve(n, site, n.start_byte()) else {
                return false;
            };
            let bd = &self.bindings[b];
            match bd.kind {
                BindingKind::Import => {}
                BindingKind::ForTarget => {
                    // The innermost loop around the store that binds the name.
                    let at = target.start_byte();
                    let binds = |t: Node<'a>| {
                        let mut stack = vec![t];
                        while let Some(x) = stack.pop() {
                            if x.kind_str() == "identifier" && self.text(x) == bd.name {
                                return true;
                            }
                            let mut cur = x.walk();
                            stack.extend(x.named_children(&mut cur));
                        }
                        false
                    };
                    let Some(l) = self
                        .loops
                        .iter_enumerated()
                        .filter(|(_, lp)| {
                            lp.body.byte_range().contains(&at)
                                && lp.node.field("left").is_some_and(binds)
                        })
                        .max_by_key(|(_, lp)| lp.body.start_byte())
                        .map(|(id, _)| id)
                    else {
                        return false;
                    };
                    if self.is_step_loop(l)
                        || self.function_of(self.loop_(l).scope) != self.function_of(site.scope)
                    {
                        return false;
                    }
                    loop_key = true;
                }
                _ => return false,
            }
        }
        loop_key
    }
}
