//! Model state: the dtype and device a model (or tensor) holds at a conversion, from
//! `from_pretrained(torch_dtype=..., device_map=...)`, `torch.load(map_location=...)`
//! and earlier `.to(...)`/`.half()`/`.cuda()` conversions on every path before it.
//! Anything not certain (a conversion in one branch only, a dtype from a variable) is
//! unknown, so rules built on it stay silent when unsure.

use std::cell::Cell;

use rustc_hash::FxHashMap;
use tree_sitter::Node;

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The dtype a torch dtype name or its alias names (`float16`, `half`, `fp16`).
    pub(super) fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "float16" | "half" | "fp16" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "float32" | "float" | "fp32" => DType::F32,
            "float64" | "double" => DType::F64,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device<'a> {
    /// A CUDA device, with its index as written (`""` for the current one).
    Cuda(&'a str),
    Cpu,
    /// A device held in a variable (`device`, `self.device`), with the binding that
    /// reaches the read when it is known: two reads of `self.device` with different
    /// reaching assignments are different devices.
    Var(&'a str, Option<BindingId>),
    /// The device an object carries (`accelerator.device`, `args.device`): where
    /// `accelerator.prepare(model)` placed the model.
    Of(&'a str),
}

impl Device<'_> {
    pub fn describe(&self) -> String {
        match self {
            Device::Cuda("") => "cuda".to_owned(),
            Device::Cuda(i) => format!("cuda:{i}"),
            Device::Cpu => "cpu".to_owned(),
            Device::Var(v, _) => format!("`{v}`"),
            Device::Of(o) => format!("`{o}.device`"),
        }
    }
}

/// What a conversion call changes. `Some(None)`: it converts that dimension, to
/// something not known statically.
#[derive(Clone, Copy, Debug)]
pub struct Conversion<'a> {
    pub call: CallId,
    pub receiver: Node<'a>,
    pub dtype: Option<Option<DType>>,
    pub device: Option<Option<Device<'a>>>,
}

/// One known fact of a model's state, and the node that established it.
#[derive(Clone, Copy, Debug)]
pub struct Fact<'a, T> {
    pub value: T,
    pub at: Node<'a>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct ModelState<'a> {
    pub dtype: Option<Fact<'a, DType>>,
    pub device: Option<Fact<'a, Device<'a>>>,
    /// The `device_map=` argument that dispatched the model, when it certainly did.
    pub device_map: Option<Node<'a>>,
    /// The name holds `None` on this path (`clip_model = None` before a conditional
    /// load): a path that a `if clip_model is not None:` guard excludes.
    pub is_none: bool,
}

enum Arg<'a> {
    DType(Option<DType>),
    Device(Option<Device<'a>>),
    Unknown,
}

/// How many earlier bindings and conversions of a name `state_before` replays.
const MAX_EVENTS: usize = 64;

/// How many names, loads, wrappers and helper returns one `state_before` follows.
const MAX_STATE_STEPS: u32 = 32;

/// How many chained calls `peel_chain` looks through.
const MAX_CHAIN: usize = 16;

/// The conversions of one name: the calls, and the functions they stand in.
#[derive(Default)]
pub(super) struct ConversionsOf {
    calls: Vec<CallId>,
    functions: Vec<Option<ScopeId>>,
    /// Stores of a newly built part into the value (`model.fc = nn.Linear(...)`,
    /// `net.classifier[6] = ...`), by assignment: the new part has its own device and
    /// dtype, so what earlier conversions established no longer holds for the whole.
    replaced: Vec<AssignId>,
    /// Calls that install a newly built part into the value (`set_module(model, name,
    /// QuantConv2d(...))`, `setattr(net, "fc", head)` with `head = nn.Linear(...)`).
    installing: Vec<CallId>,
}

/// What a name that is never converted has.
static NO_CONVERSIONS: ConversionsOf = ConversionsOf {
    calls: Vec::new(),
    functions: Vec::new(),
    replaced: Vec::new(),
    installing: Vec::new(),
};

impl<'a> SemanticModel<'a> {
    /// The call as a dtype/device conversion (`.to(...)`, `.half()`, `.cuda()`...).
    pub fn conversion(&self, call: CallId) -> Option<Conversion<'a>> {
        let c = &self.calls[call];
        let (recv, method) = self.method_call(c)?;
        let mut conv = Conversion {
            call,
            receiver: recv,
            dtype: None,
            device: None,
        };
        match method {
            "half" => conv.dtype = Some(Some(DType::F16)),
            "bfloat16" => conv.dtype = Some(Some(DType::BF16)),
            "float" => conv.dtype = Some(Some(DType::F32)),
            "double" => conv.dtype = Some(Some(DType::F64)),
            "cpu" => conv.device = Some(Some(Device::Cpu)),
            "cuda" => {
                let idx = self.positional_args(c.node).next();
                conv.device = Some(match idx {
                    None => Some(Device::Cuda("")),
                    Some(i) if i.kind_str() == "integer" => Some(Device::Cuda(self.text(i))),
                    Some(_) => None,
                });
            }
            "to" => {
                let mut args: Vec<Arg<'a>> = self
                    .positional_args(c.node)
                    .map(|a| self.classify_to_arg(a, c.site))
                    .collect();
                if let Some(d) = self.keyword_arg(c.node, "dtype") {
                    args.push(match self.classify_to_arg(d, c.site) {
                        Arg::DType(t) => Arg::DType(t),
                        _ => Arg::DType(None),
                    });
                }
                if let Some(d) = self.keyword_arg(c.node, "device") {
                    args.push(match self.classify_to_arg(d, c.site) {
                        Arg::Device(t) => Arg::Device(t),
                        _ => Arg::Device(None),
                    });
                }
                if args.is_empty() {
                    return None;
                }
                for a in args {
                    match a {
                        Arg::DType(t) => conv.dtype = Some(t),
                        Arg::Device(d) => conv.device = Some(d),
                        // `.to(other_tensor)` or a value we cannot read: anything may change.
                        Arg::Unknown => {
                            conv.dtype = Some(None);
                            conv.device = Some(None);
                        }
                    }
                }
            }
            _ => return None,
        }
        Some(conv)
    }

    fn classify_to_arg(&self, a: Node<'a>, site: Site) -> Arg<'a> {
        let a = unwrap_parens(a);
        match a.kind_str() {
            "string" => {
                let s = self.text(a).trim_matches(|c| c == '"' || c == '\'');
                device_from_str(s).map_or(Arg::Unknown, |d| Arg::Device(Some(d)))
            }
            "integer" => Arg::Device(Some(Device::Cuda(self.text(a)))),
            "attribute" | "identifier" => {
                if let Some(q) = self.qualified(a) {
                    if q.is_torch() && q.segments().len() == 2 {
                        let name = q.last().unwrap_or("");
                        return match DType::from_name(name) {
                            Some(t) => Arg::DType(Some(t)),
                            None if is_torch_dtype_name(name) => Arg::DType(None),
                            None => Arg::Unknown,
                        };
                    }
                }
                let text = self.text(a);
                let last = text.rsplit('.').next().unwrap_or(text).to_ascii_lowercase();
                if last.contains("dtype") {
                    return Arg::DType(self.resolve_dtype_var(a, site));
                }
                if last.contains("device") || last == "dev" || last.contains("rank") {
                    return Arg::Device(Some(self.resolve_device_var(a, site)));
                }
                Arg::Unknown
            }
            "call" => {
                let f = a.field("function");
                let is_device = f
                    .and_then(|f| self.qualified(f))
                    .is_some_and(|q| q.is_torch() && q.last() == Some("device"));
                if !is_device {
                    return Arg::Unknown;
                }
                let first = self.positional_args(a).next();
                match first.map(|n| (n.kind_str(), n)) {
                    Some(("string", s)) => {
                        let s = self.text(s).trim_matches(|c| c == '"' || c == '\'');
                        Arg::Device(device_from_str(s))
                    }
                    _ => Arg::Device(Some(Device::Var(self.text(a), None))),
                }
            }
            _ => Arg::Unknown,
        }
    }

    /// The device a variable holds where it is read: by value when its reaching
    /// assignment is a literal (`device = "cuda"`, `torch.device("cuda:0")`) or an
    /// object's device (`device = accelerator.device`), else the variable with its
    /// reaching binding, so that a reassigned `self.device` is a different device.
    fn resolve_device_var(&self, a: Node<'a>, site: Site) -> Device<'a> {
        let text = self.text(a);
        let device_of = |n: Node<'a>, scope: ScopeId| -> Option<Device<'a>> {
            if n.kind_str() != "attribute" || self.name_key(n, scope).is_some() {
                return None;
            }
            let o = n.field("object")?;
            (self.text(n.field("attribute")?) == "device"
                && matches!(o.kind_str(), "identifier" | "attribute"))
            .then(|| Device::Of(self.text(o)))
        };
        if a.kind_str() == "attribute" && self.name_key(a, site.scope).is_none() {
            return device_of(a, site.scope).unwrap_or(Device::Var(text, None));
        }
        let Some(b) = self.resolve(a, site, a.start_byte()) else {
            return Device::Var(text, None);
        };
        let bd = &self.bindings[b];
        if bd.kind == BindingKind::Assign && bd.index.is_none() {
            if let Some(v) = bd.value.map(unwrap_parens) {
                if self.dominates(v, a.start_byte()) {
                    if let Some(d) = self.device_literal(v) {
                        return d;
                    }
                }
                if let Some(d) = device_of(v, bd.site.scope) {
                    return d;
                }
            }
        }
        Device::Var(text, Some(b))
    }

    /// `"cuda:0"`, `torch.device("cuda")`: a device written out.
    fn device_literal(&self, v: Node<'a>) -> Option<Device<'a>> {
        let lit = |s: Node<'a>| {
            (s.kind_str() == "string")
                .then(|| device_from_str(self.text(s).trim_matches(|c| c == '"' || c == '\'')))
                .flatten()
        };
        match v.kind_str() {
            "string" => lit(v),
            "call" => {
                let f = v.field("function")?;
                let q = self.qualified(f)?;
                if !(q.is_torch() && q.last() == Some("device")) {
                    return None;
                }
                let mut args = self.positional_args(v);
                match (args.next(), args.next()) {
                    (Some(s), None) => lit(unwrap_parens(s)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `dtype = torch.bfloat16` earlier in the function: the variable's dtype.
    fn resolve_dtype_var(&self, a: Node<'a>, site: Site) -> Option<DType> {
        let b = self.binding_of(a, site)?;
        if b.kind != BindingKind::Assign || b.index.is_some() {
            return None;
        }
        let q = self.qualified(b.value?)?;
        if q.is_torch() && q.segments().len() == 2 {
            DType::from_name(q.last()?)
        } else {
            None
        }
    }

    /// The dtype/device state of a conversion's receiver just before the conversion.
    pub fn state_before(&self, conv: &Conversion<'a>) -> ModelState<'a> {
        let c = &self.calls[conv.call];
        let budget = Cell::new(MAX_STATE_STEPS);
        self.expr_state(
            unwrap_parens(conv.receiver),
            c.site,
            c.node.start_byte(),
            &budget,
        )
    }

    /// The state of the value of `e` read at byte `at`: a name's state from the events
    /// before `at`, or a loader, wrapper or same-file helper call's result, then the
    /// conversions chained onto it (`from_pretrained(...).half()`, `m.eval().cpu()`).
    fn expr_state(&self, e: Node<'a>, site: Site, at: usize, budget: &Cell<u32>) -> ModelState<'a> {
        // Each name, load or helper followed costs one step: aliases of aliases, or
        // helpers returning helpers' results, stay linear in the budget.
        if budget.get() == 0 {
            return ModelState::default();
        }
        budget.set(budget.get() - 1);
        let (base, chain) = self.peel_chain(e);
        let mut st = match self.name_key(base, site.scope) {
            Some(key) => self.key_state(key, site, at, budget),
            None => self.call_state(base, site, budget),
        };
        self.apply_chain(&mut st, &chain);
        st
    }

    /// The object a conversion converts, seen through chained module methods: `model`
    /// in `model.eval().cpu()`.
    pub fn conversion_root(&self, conv: &Conversion<'a>) -> Node<'a> {
        self.peel_chain(conv.receiver).0
    }

    /// `base.eval().to(...).half()`: the base, and the chained calls outermost first.
    /// Module methods that return the module itself (`eval`, `train`) are seen through,
    /// up to `MAX_CHAIN` links (a generated chain of thousands stays linear).
    fn peel_chain(&self, e: Node<'a>) -> (Node<'a>, Vec<Node<'a>>) {
        let mut chain = Vec::new();
        let mut base = unwrap_parens(e);
        while base.kind_str() == "call" && chain.len() < MAX_CHAIN {
            let Some(f) = base
                .field("function")
                .filter(|f| f.kind_str() == "attribute")
            else {
                break;
            };
            let m = f.field("attribute").map_or("", |a| self.text(a));
            if !(names::is_conversion_method(m) || names::RETURNS_SELF_METHODS.contains(&m)) {
                break;
            }
            chain.push(base);
            let Some(o) = f.field("object") else { break };
            base = unwrap_parens(o);
        }
        (base, chain)
    }

    fn apply_chain(&self, st: &mut ModelState<'a>, chain: &[Node<'a>]) {
        for &call in chain.iter().rev() {
            if let Some(conv) = self.call_index(call).and_then(|i| self.conversion(i)) {
                apply(st, &conv, call, true);
            }
        }
    }

    /// The state a call's result has: a load (`from_pretrained`, `torch.load`), a
    /// wrapper of a placed model (`DataParallel(m)`, `PeftModel.from_pretrained(m, ...)`),
    /// `accelerator.prepare(m)`, or what every `return` of a same-file helper returns.
    fn call_state(&self, base: Node<'a>, site: Site, budget: &Cell<u32>) -> ModelState<'a> {
        if base.kind_str() != "call" {
            return ModelState::default();
        }
        let Some(f) = base.field("function") else {
            return ModelState::default();
        };
        let (obj, method) = if f.kind_str() == "attribute" {
            (
                f.field("object"),
                f.field("attribute").map_or("", |a| self.text(a)),
            )
        } else {
            (None, self.text(f))
        };
        let first = self
            .positional_args(base)
            .next()
            .map(unwrap_parens)
            .filter(|a| matches!(a.kind_str(), "identifier" | "attribute" | "call"));
        let mut st = self.loaded_state(base);
        let wrapped = |a: Node<'a>, keep_dtype: bool| {
            let mut inner = self.expr_state(a, site, a.start_byte(), budget);
            if !keep_dtype {
                inner.dtype = None;
            }
            inner
        };
        if method == names::PRETRAINED_LOADER {
            // `PeftModel.from_pretrained(base, path)`: the adapters are new (float32) but
            // the base keeps its placement.
            if let Some(a) = first {
                let inner = wrapped(a, false);
                st.device = st.device.or(inner.device);
                st.device_map = st.device_map.or(inner.device_map);
            }
            return st;
        }
        let last = method.rsplit('.').next().unwrap_or(method);
        if let Some(keep_dtype) = names::placement_wrapper(last) {
            return first.map_or(st, |a| wrapped(a, keep_dtype));
        }
        if names::PLACING_PREPARE_METHODS.contains(&method)
            && self.positional_args(base).count() == 1
        {
            if let Some(o) = obj {
                st.device = Some(Fact {
                    value: Device::Of(self.text(o)),
                    at: base,
                });
            }
            return st;
        }
        // A helper handing back its argument (`pipe = load_weights(pipe, ...)`), defined
        // here or in another project file.
        let returned = match self.call_index(base).and_then(|i| self.resolve_call(i)) {
            Some(callee) => self.returned_parameter(callee),
            None => self.project().and_then(|p| {
                (f.kind_str() == "identifier")
                    .then(|| p.returned_param(self.text(f)))
                    .flatten()
            }),
        };
        // A helper of another project file that hands back a model on a known device.
        if let Some(d) = self.project().and_then(|p| {
            (f.kind_str() == "identifier")
                .then(|| p.placing_import(self.text(f)))
                .flatten()
        }) {
            let value = match d.strip_prefix("param:") {
                // The device the caller passes for the helper's parameter.
                Some(p) => {
                    let (pos, name) = p.split_once(':').unwrap_or((p, ""));
                    let arg = self.keyword_arg(base, name).or_else(|| {
                        pos.parse::<usize>()
                            .ok()
                            .and_then(|i| self.positional_args(base).nth(i))
                    });
                    match arg.map(|a| self.classify_to_arg(a, site)) {
                        Some(Arg::Device(Some(d))) => Some(d),
                        _ => None,
                    }
                }
                None if d == "cpu" => Some(Device::Cpu),
                None => Some(Device::Cuda("")),
            };
            if let Some(value) = value {
                st.device = Some(Fact { value, at: base });
                return st;
            }
        }
        if let Some(i) = returned {
            return self
                .positional_args(base)
                .nth(i as usize)
                .map(unwrap_parens)
                .filter(|a| matches!(a.kind_str(), "identifier" | "attribute" | "call"))
                .map_or(st, |a| self.expr_state(a, site, a.start_byte(), budget));
        }
        if let Some(callee) = self.call_index(base).and_then(|i| self.resolve_call(i)) {
            let mut merged: Option<ModelState<'a>> = None;
            for &(ret, ret_site) in &self.scope(callee).returns {
                let s = self.expr_state(unwrap_parens(ret), ret_site, ret.start_byte(), budget);
                merged = Some(merged.map_or(s, |m| meet(m, s)));
            }
            return merged.unwrap_or_default();
        }
        st
    }

    /// The parameter (its position among the call's arguments, `self` not counted) that
    /// every `return` of the function `f` gives back unchanged: never rebound and never
    /// converted in `f` (`def load_weights(pipeline, path): ...; return pipeline`). A
    /// call of such a helper holds whatever its argument held.
    pub fn returned_parameter(&self, f: ScopeId) -> Option<u32> {
        let sc = self.scope(f);
        let mut name: Option<&'a str> = None;
        for &(r, _) in &sc.returns {
            let r = unwrap_parens(r);
            if r.kind_str() != "identifier" || name.is_some_and(|n| n != self.text(r)) {
                return None;
            }
            name = Some(self.text(r));
        }
        let name = name?;
        let skip = usize::from(sc.self_param().is_some());
        let pos = sc
            .params
            .iter()
            .position(|&p| p == name)?
            .checked_sub(skip)?;
        let key = NameKey::Local(f, name);
        let rebound = self.names.get(&key).is_some_and(|bs| {
            bs.iter()
                .any(|&b| self.bindings[b].kind != BindingKind::Parameter)
        });
        if rebound || !self.conversions_of(key).calls.is_empty() {
            return None;
        }
        u32::try_from(pos).ok()
    }

    /// The device every `return` of the function `f` certainly hands back a model on,
    /// for callers in other files: `"cuda"` or `"cpu"` (`def load_model(h): model =
    /// Net(h).cuda(); ...; return model`), or `"param:N:NAME"` for the device its
    /// parameter `NAME` (position `N`) holds (`def get_model(args, device): model =
    /// Net().to(device); ...; return model`), which each caller passes. Returns of a
    /// tuple (`return model, optimizer` on a training path) hand back no model to move.
    pub fn returned_device(&self, f: ScopeId) -> Option<String> {
        let budget = Cell::new(MAX_STATE_STEPS);
        let mut merged: Option<ModelState<'a>> = None;
        for &(ret, ret_site) in &self.scope(f).returns {
            let r = unwrap_parens(ret);
            if matches!(r.kind_str(), "tuple" | "expression_list" | "none") {
                continue;
            }
            let s = self.expr_state(r, ret_site, r.start_byte(), &budget);
            merged = Some(merged.map_or(s, |m| meet(m, s)));
        }
        match merged?.device?.value {
            Device::Cuda("" | "0") => Some("cuda".to_owned()),
            Device::Cpu => Some("cpu".to_owned()),
            Device::Var(name, Some(b)) => {
                let bd = &self.bindings[b];
                if bd.kind != BindingKind::Parameter || bd.owner != f {
                    return None;
                }
                let pos = self.scope(f).params.iter().position(|&p| p == name)?;
                Some(format!("param:{pos}:{name}"))
            }
            _ => None,
        }
    }

    /// The state of a name's value just before byte `at`.
    fn key_state(
        &self,
        key: NameKey<'a>,
        site: Site,
        at: usize,
        budget: &Cell<u32>,
    ) -> ModelState<'a> {
        let here = self.function_of(site.scope);
        let init = match key {
            NameKey::Attr(class, _) => self
                .functions
                .get(&(class, "__init__"))
                .copied()
                .filter(|&i| Some(i) != here),
            NameKey::Local(..) => None,
        };
        // Events: (function order, position, what).
        enum Ev {
            Bind(BindingId),
            Conv(CallId),
            Replace(AssignId),
            Install(CallId),
        }
        let mut events: Vec<(u8, usize, Ev)> = Vec::new();
        // Only the last `MAX_EVENTS` bindings and conversions before the conversion (and
        // in `__init__`) are replayed: older ones can only add facts that later ones
        // overwrite, and replaying all of them made a file of 100,000 conversions of one
        // name quadratic. Lists are sorted by position, so each window is a binary search.
        let bindings = self.names.get(&key).map(Vec::as_slice).unwrap_or(&[]);
        let ConversionsOf {
            calls: convs,
            functions,
            replaced,
            installing,
        } = self.conversions_of(key);
        let pos_of_call = |i: CallId| self.calls[i].node.start_byte();
        let windows = |lo: usize, hi: usize| {
            let hb = bindings.partition_point(|&b| self.bindings[b].pos <= hi);
            let lb = bindings.partition_point(|&b| self.bindings[b].pos < lo);
            let hc = convs.partition_point(|&i| pos_of_call(i) < hi);
            let lc = convs.partition_point(|&i| pos_of_call(i) < lo);
            (
                &bindings[lb.max(hb.saturating_sub(MAX_EVENTS))..hb],
                &convs[lc.max(hc.saturating_sub(MAX_EVENTS))..hc],
            )
        };
        let here_range = here.map_or(0..usize::MAX, |h| self.scope(h).node.byte_range());
        let mut spans = vec![(1u8, here_range.start, at)];
        if let Some(i) = init {
            let r = self.scope(i).node.byte_range();
            spans.push((0, r.start, r.end));
        }
        for (order, lo, hi) in spans {
            let (bs, cs) = windows(lo, hi);
            for &b in bs {
                let bd = &self.bindings[b];
                if !matches!(bd.kind, BindingKind::Assign | BindingKind::Parameter) {
                    continue;
                }
                let f = self.function_of(bd.site.scope);
                if (order == 1 && f == here && bd.pos <= at) || (order == 0 && f == init) {
                    events.push((order, bd.pos, Ev::Bind(b)));
                }
            }
            for &i in cs {
                let other = &self.calls[i];
                let f = self.function_of(other.site.scope);
                if (order == 1 && f == here && other.node.end_byte() <= at)
                    || (order == 0 && f == init)
                {
                    events.push((order, other.node.end_byte(), Ev::Conv(i)));
                }
            }
            let lr = replaced.partition_point(|&i| self.assignments[i].node.start_byte() < lo);
            let hr = replaced.partition_point(|&i| self.assignments[i].node.end_byte() <= hi);
            for &i in &replaced[lr.max(hr.saturating_sub(MAX_EVENTS))..hr.max(lr)] {
                let a = &self.assignments[i];
                let f = self.function_of(a.site.scope);
                if (order == 1 && f == here && a.node.end_byte() <= at) || (order == 0 && f == init)
                {
                    events.push((order, a.node.end_byte(), Ev::Replace(i)));
                }
            }
            let li = installing.partition_point(|&i| pos_of_call(i) < lo);
            let hi_i = installing.partition_point(|&i| pos_of_call(i) < hi);
            for &i in &installing[li.max(hi_i.saturating_sub(MAX_EVENTS))..hi_i.max(li)] {
                let c = &self.calls[i];
                let f = self.function_of(c.site.scope);
                if (order == 1 && f == here && c.node.end_byte() <= at) || (order == 0 && f == init)
                {
                    events.push((order, c.node.end_byte(), Ev::Install(i)));
                }
            }
        }
        events.sort_by_key(|e| (e.0, e.1));
        // Conversions of a `self.` attribute in other methods may run in between (an
        // `upcast()` called before this `downcast()`): nothing is certain then.
        if let (NameKey::Attr(..), Some(h)) = (key, here) {
            if functions.iter().any(|&f| f != Some(h) && f != init) {
                return ModelState::default();
            }
        }
        let node_of = |ev: &Ev| match ev {
            Ev::Bind(b) => {
                let bd = &self.bindings[*b];
                bd.value.unwrap_or(self.scope(bd.site.scope).node)
            }
            Ev::Conv(i) => self.calls[*i].node,
            Ev::Replace(i) => self.assignments[*i].node,
            Ev::Install(i) => self.calls[*i].node,
        };
        let apply_event = |st: &mut ModelState<'a>, ev: &Ev, certain: bool| match ev {
            Ev::Bind(b) => {
                let bd = &self.bindings[*b];
                *st = match (certain, bd.index, bd.value) {
                    (true, None, Some(v)) => self.state_of_value(v, bd.site, key, *st, budget),
                    (true, Some(i), Some(v)) => self.unpacked_state(v, i, budget),
                    // A rebinding on some paths only (`if distributed: model =
                    // wrap(model)`): what the paths with and without it agree on.
                    (false, None, Some(v)) if !st.is_none => {
                        meet(*st, self.state_of_value(v, bd.site, key, *st, budget))
                    }
                    _ => ModelState::default(),
                };
            }
            Ev::Conv(i) => {
                let conv = self.conversion(*i).expect("checked");
                apply(st, &conv, self.calls[*i].node, certain);
            }
            // On every path or some, the whole is no longer known to be in one place.
            Ev::Replace(_) | Ev::Install(_) => {
                st.device = None;
                st.dtype = None;
            }
        };
        // Computed only when a path holds `None`: it walks the statements down to `at`.
        let none_cell: std::cell::OnceCell<bool> = std::cell::OnceCell::new();
        let none_excluded =
            || *none_cell.get_or_init(|| self.guarded_not_none(key, site.scope, at));
        let mut st = ModelState::default();
        let mut idx = 0;
        while idx < events.len() {
            let (order, _, ev) = &events[idx];
            // Where the event's effect is certain at the conversion: it stands in a block
            // that encloses the conversion (or, in `__init__`, at the top of its body).
            let target_end = match (order, init) {
                (0, Some(i)) => self.scope(i).node.end_byte().saturating_sub(1),
                _ => at,
            };
            let n = node_of(ev);
            let param =
                matches!(ev, Ev::Bind(b) if self.bindings[*b].kind == BindingKind::Parameter);
            if param
                || self.dominates(n, target_end)
                || (*order == 1 && self.dominates_under_guards(n, target_end, site.scope))
            {
                apply_event(&mut st, ev, true);
                idx += 1;
                continue;
            }
            // An `if`/`elif`/`else` that covers every path: each branch from the same
            // start, then keep what all branches agree on.
            if let Some((if_node, arms)) = self.complete_if(n, target_end) {
                let mut j = idx;
                while j < events.len()
                    && events[j].0 == *order
                    && if_node
                        .byte_range()
                        .contains(&node_of(&events[j].2).start_byte())
                {
                    j += 1;
                }
                let mut merged: Option<ModelState<'a>> = None;
                let mut excluded: Option<ModelState<'a>> = None;
                for arm in &arms {
                    let mut s = st;
                    for (_, _, e) in &events[idx..j] {
                        let en = node_of(e);
                        if arm.byte_range().contains(&en.start_byte()) {
                            let certain = self.dominates(en, arm.end_byte().saturating_sub(1));
                            apply_event(&mut s, e, certain);
                        }
                    }
                    // A branch that leaves `None` where the target needs a value.
                    if s.is_none && none_excluded() {
                        excluded = Some(s);
                        continue;
                    }
                    merged = Some(match merged {
                        None => s,
                        Some(m) => meet(m, s),
                    });
                }
                st = merged.or(excluded).unwrap_or_default();
                idx = j;
                continue;
            }
            // Skipping the event leaves `None`, which the target's guard rules out.
            let certain = st.is_none && *order == 1 && none_excluded();
            apply_event(&mut st, ev, certain);
            idx += 1;
        }
        st
    }

    /// The conversion calls whose receiver is `key` (in source order), and the distinct
    /// functions they stand in, indexed once per file.
    /// Whether `arg` is a module part built here: a module class constructed in place
    /// (`nn.Linear(4096, 2)`, `quant_nn.QuantConv2d(...)`) or a name bound to one. A
    /// config, an optimizer or a loader handed beside the model installs nothing.
    fn built_part(&self, arg: Node<'a>, site: Site) -> bool {
        let constructed = |v: Node<'a>| {
            let v = unwrap_parens(v);
            v.kind_str() == "call"
                && v.field("function").is_some_and(|f| {
                    let last = f.field("attribute").unwrap_or(f);
                    self.text(last)
                        .starts_with(|c: char| c.is_ascii_uppercase())
                        && (self.value(v, site) == Value::Module
                            || self.qualified(f).is_some_and(|q| q.has_module("nn")))
                })
        };
        constructed(arg)
            || arg.kind_str() == "identifier"
                && self
                    .binding_of(arg, site)
                    .and_then(|b| b.value)
                    .is_some_and(constructed)
    }

    fn conversions_of(&self, key: NameKey<'a>) -> &ConversionsOf {
        let index = self.memo.conversions.get_or_init(|| {
            let mut map: FxHashMap<NameKey<'a>, ConversionsOf> = FxHashMap::default();
            for (i, c) in self.calls.iter_enumerated() {
                let Some((recv, _)) = self.method_call(c) else {
                    continue;
                };
                let root = self.peel_chain(recv).0;
                if let Some(k) = self.name_key(root, c.site.scope) {
                    if self.conversion(i).is_some() {
                        let e = map.entry(k).or_default();
                        e.calls.push(i);
                        let f = self.function_of(c.site.scope);
                        if !e.functions.contains(&f) {
                            e.functions.push(f);
                        }
                    }
                }
            }
            for (i, a) in self.assignments.iter_enumerated() {
                if a.op != AssignOp::Plain || unwrap_parens(a.value).kind_str() != "call" {
                    continue;
                }
                // The root of `model.classifier._modules['6']` under the stored part.
                let mut t = unwrap_parens(a.target);
                while let Some(inner) = match t.kind_str() {
                    "attribute" => t.field("object"),
                    "subscript" => t.field("value"),
                    _ => None,
                } {
                    t = unwrap_parens(inner);
                    if let Some(k) = self.name_key(t, a.site.scope) {
                        map.entry(k).or_default().replaced.push(i);
                        break;
                    }
                }
            }
            for (i, c) in self.calls.iter_enumerated() {
                let mut args = self.positional_args(c.node).map(unwrap_parens);
                let Some(first) = args.next() else { continue };
                if !args.any(|a| self.built_part(a, c.site)) {
                    continue;
                }
                if let Some(k) = self.name_key(first, c.site.scope) {
                    map.entry(k).or_default().installing.push(i);
                }
            }
            for e in map.values_mut() {
                e.replaced
                    .sort_by_key(|&i| self.assignments[i].node.start_byte());
                e.installing
                    .sort_by_key(|&i| self.calls[i].node.start_byte());
            }
            map
        });
        index.get(&key).unwrap_or(&NO_CONVERSIONS)
    }

    /// The state a bound value establishes: a load, a wrapper, a helper's result, or a
    /// chain of conversions on the previous value of the same name or on another name.
    fn state_of_value(
        &self,
        v: Node<'a>,
        site: Site,
        key: NameKey<'a>,
        prev: ModelState<'a>,
        budget: &Cell<u32>,
    ) -> ModelState<'a> {
        if unwrap_parens(v).kind_str() == "none" {
            return ModelState {
                is_none: true,
                ..ModelState::default()
            };
        }
        let (base, chain) = self.peel_chain(v);
        let mut st = match self.name_key(base, site.scope) {
            Some(k) if k == key => prev,
            Some(_) => self.expr_state(base, site, base.start_byte(), budget),
            None => self.call_state(base, site, budget),
        };
        self.apply_chain(&mut st, &chain);
        st
    }

    /// `model, opt = accelerator.prepare(model, opt)`: each prepared value is placed on
    /// the accelerator's device.
    ///
    /// `model, preprocess = load(name, device="cuda")`: element `index` of what every
    /// `return` of a same-file helper gives back, with a device that the helper took
    /// as a parameter (`.to(device)`) read from the call's argument.
    fn unpacked_state(&self, v: Node<'a>, index: u32, budget: &Cell<u32>) -> ModelState<'a> {
        let mut st = ModelState::default();
        let v = unwrap_parens(v);
        if v.kind_str() != "call" {
            return st;
        }
        if let Some(callee) = self.call_index(v).and_then(|i| self.resolve_call(i)) {
            return self.returned_element_state(v, callee, index, budget);
        }
        let Some(f) = v.field("function").filter(|f| f.kind_str() == "attribute") else {
            return st;
        };
        let method = f.field("attribute").map_or("", |a| self.text(a));
        if names::PLACING_PREPARE_METHODS.contains(&method) {
            if let Some(o) = f.field("object") {
                st.device = Some(Fact {
                    value: Device::Of(self.text(o)),
                    at: v,
                });
            }
        }
        st
    }

    /// The state of element `index` of every tuple that the helper `callee` returns to
    /// the call `call`; a device held in one of the helper's parameters is the device
    /// the call passes (or the parameter's default).
    fn returned_element_state(
        &self,
        call: Node<'a>,
        callee: ScopeId,
        index: u32,
        budget: &Cell<u32>,
    ) -> ModelState<'a> {
        let sc = self.scope(callee);
        let mut merged: Option<ModelState<'a>> = None;
        for &(ret, ret_site) in &sc.returns {
            let r = unwrap_parens(ret);
            if !matches!(r.kind_str(), "tuple" | "expression_list") {
                return ModelState::default();
            }
            let mut c = r.walk();
            let Some(item) = r
                .named_children(&mut c)
                .filter(|n| n.kind_str() != "comment")
                .nth(index as usize)
            else {
                return ModelState::default();
            };
            let mut st = self.expr_state(unwrap_parens(item), ret_site, item.start_byte(), budget);
            if let Some(Fact {
                value: Device::Var(name, _),
                ..
            }) = st.device
            {
                st.device = self
                    .parameter_device(call, callee, name)
                    .map(|d| Fact { value: d, at: call });
            }
            merged = Some(merged.map_or(st, |m| meet(m, st)));
        }
        merged.unwrap_or_default()
    }

    /// The device that the call `call` of `callee` binds to its parameter `name`: the
    /// argument passed, else the parameter's default. `None` when `name` is not a
    /// parameter or the value is not a known device.
    fn parameter_device(&self, call: Node<'a>, callee: ScopeId, name: &str) -> Option<Device<'a>> {
        let sc = self.scope(callee);
        let pos = sc.params.iter().position(|&p| p == name)?;
        let skip = usize::from(sc.self_param().is_some());
        let arg = self.keyword_arg(call, name).or_else(|| {
            pos.checked_sub(skip)
                .and_then(|p| self.positional_args(call).nth(p))
        });
        let site = self.calls[self.call_index(call)?].site;
        let value = match arg {
            Some(a) => a,
            None => {
                // The default: `def load(name, device="cuda")`.
                let params = sc.node.child_by_field_name("parameters")?;
                let mut c = params.walk();
                let found = params.named_children(&mut c).find(|p| {
                    matches!(
                        p.kind_str(),
                        "default_parameter" | "typed_default_parameter"
                    ) && p.child_by_field_name("name").map(|n| self.text(n)) == Some(name)
                });
                found?.child_by_field_name("value")?
            }
        };
        match self.classify_to_arg(value, site) {
            Arg::Device(Some(d @ (Device::Cuda(_) | Device::Cpu))) => Some(d),
            _ => None,
        }
    }

    /// `X.from_pretrained(..., torch_dtype=D, device_map=M)` or `torch.load(..., map_location=L)`.
    fn loaded_state(&self, base: Node<'a>) -> ModelState<'a> {
        let mut st = ModelState::default();
        if base.kind_str() != "call" {
            return st;
        }
        let Some(f) = base.field("function") else {
            return st;
        };
        let method = if f.kind_str() == "attribute" {
            f.field("attribute").map(|a| self.text(a))
        } else {
            None
        };
        if method == Some(names::PRETRAINED_LOADER) {
            let dt = self
                .keyword_arg(base, "torch_dtype")
                .or_else(|| self.keyword_arg(base, "dtype"));
            if let Some(d) = dt {
                let t = match unwrap_parens(d).kind_str() {
                    "string" => {
                        DType::from_name(self.text(d).trim_matches(|c| c == '"' || c == '\''))
                    }
                    _ => self
                        .qualified(d)
                        .filter(|q| q.is_torch() && q.segments().len() == 2)
                        .and_then(|q| DType::from_name(q.last()?)),
                };
                if let Some(t) = t {
                    st.dtype = Some(Fact { value: t, at: d });
                }
            }
            if let Some(m) = self.keyword_arg(base, "device_map") {
                if unwrap_parens(m).kind_str() != "none" {
                    st.device_map = Some(m);
                }
            }
        } else if self
            .qualified(f)
            .is_some_and(|q| q.is_torch() && q.last() == Some("load"))
        {
            if let Some(l) = self.keyword_arg(base, "map_location") {
                if unwrap_parens(l).kind_str() == "string" {
                    let s = self.text(l).trim_matches(|c| c == '"' || c == '\'');
                    if let Some(d) = device_from_str(s) {
                        st.device = Some(Fact { value: d, at: l });
                    }
                }
            }
        }
        st
    }
}

/// What two paths agree on.
fn meet<'a>(a: ModelState<'a>, b: ModelState<'a>) -> ModelState<'a> {
    ModelState {
        dtype: a
            .dtype
            .filter(|x| b.dtype.is_some_and(|y| y.value == x.value)),
        device: a
            .device
            .filter(|x| b.device.is_some_and(|y| same_device(y.value, x.value))),
        device_map: a.device_map.filter(|_| b.device_map.is_some()),
        is_none: a.is_none && b.is_none,
    }
}

fn apply<'a>(st: &mut ModelState<'a>, conv: &Conversion<'a>, node: Node<'a>, certain: bool) {
    if let Some(t) = conv.dtype {
        st.dtype = match (t, certain) {
            (Some(t), true) => Some(Fact { value: t, at: node }),
            _ => None,
        };
    }
    if let Some(d) = conv.device {
        st.device = match (d, certain) {
            (Some(d), true) => Some(Fact { value: d, at: node }),
            _ => None,
        };
        // A move after dispatch: from here on the model's placement is whatever it did.
        if !certain {
            st.device_map = None;
        }
    }
}

fn device_from_str(s: &str) -> Option<Device<'_>> {
    if s == "cpu" {
        Some(Device::Cpu)
    } else if s == "cuda" {
        Some(Device::Cuda(""))
    } else {
        s.strip_prefix("cuda:").map(Device::Cuda)
    }
}

fn is_torch_dtype_name(s: &str) -> bool {
    matches!(
        s,
        "int8"
            | "uint8"
            | "int16"
            | "int32"
            | "int64"
            | "long"
            | "int"
            | "bool"
            | "short"
            | "float8_e4m3fn"
            | "float8_e5m2"
            | "complex64"
            | "complex128"
            | "cfloat"
    )
}

impl<'a> SemanticModel<'a> {}

/// Whether two devices are the same place (`cuda` is `cuda:0` for this purpose).
pub fn same_device(a: Device<'_>, b: Device<'_>) -> bool {
    match (a, b) {
        (Device::Cuda(x), Device::Cuda(y)) => x == y || matches!((x, y), ("", "0") | ("0", "")),
        (Device::Cpu, Device::Cpu) => true,
        (Device::Var(x, b), Device::Var(y, c)) => x == y && b == c,
        (Device::Of(x), Device::Of(y)) => x == y,
        _ => false,
    }
}
