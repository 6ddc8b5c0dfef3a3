//! Loading weights and data: what `X.from_pretrained(...)` loads in (dtype, quantized),
//! which load a conversion converts, `torch.load` calls and their `map_location`,
//! tokenizer padding, and whether the file runs on CUDA or on TPUs (XLA).

use super::state::{Conversion, DType};
use super::*;

/// The dtype a `from_pretrained` load gives its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadDType<'a> {
    /// No `torch_dtype`: the weights come in float32.
    Default,
    /// `torch_dtype=torch.X` (or `"X"`), with the argument.
    Given(DType, Node<'a>),
    /// Quantized (`load_in_8bit`, `load_in_4bit`, `quantization_config`), `"auto"`, a
    /// dtype in a variable, or `**kwargs` that may hold one.
    Unknown,
}

/// A `X.from_pretrained(...)` call that loads a model (not a tokenizer or a config).
#[derive(Clone, Copy, Debug)]
pub struct PretrainedLoad<'a> {
    pub call: Node<'a>,
    pub dtype: LoadDType<'a>,
}

/// How a `torch.load` call places the tensors it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapLocation {
    /// `map_location` given (keyword or second positional argument).
    Given,
    /// Not given: tensors come back on the device they were saved from.
    Missing,
}

/// A `torch.load(...)` call.
#[derive(Clone, Copy, Debug)]
pub struct TorchLoad<'a> {
    pub call: CallId,
    /// The file argument.
    pub file: Option<Node<'a>>,
    pub map_location: MapLocation,
}

fn unquote(s: &str) -> &str {
    s.trim_start_matches(['r', 'b', 'u', 'R', 'B', 'U'])
        .trim_matches(|c| c == '"' || c == '\'')
}

impl<'a> SemanticModel<'a> {
    /// The call as a model load `X.from_pretrained(...)`, if it is one.
    pub fn pretrained_load(&self, call: Node<'a>) -> Option<PretrainedLoad<'a>> {
        let call = unwrap_parens(call);
        if call.kind() != "call" {
            return None;
        }
        let f = call.field("function")?;
        if f.kind() != "attribute" {
            return None;
        }
        if self.text(f.field("attribute")?) != names::PRETRAINED_LOADER {
            return None;
        }
        let class = self.text(f.field("object")?);
        let class = class.rsplit('.').next().unwrap_or(class);
        if names::is_non_model_pretrained(class) {
            return None;
        }
        // `PeftModel.from_pretrained(model, adapter_path)`: an adapter loaded onto a
        // model that is already there, not a model load.
        if let (Some(first), Some(id)) = (self.positional_args(call).next(), self.call_index(call))
        {
            let first = unwrap_parens(first);
            if self.value(first, self.calls[id].site) == Value::Module
                || first.kind() == "identifier" && names::is_model_name(self.text(first))
            {
                return None;
            }
        }
        let args = call.field("arguments")?;
        let mut c = args.walk();
        let splat = args
            .named_children(&mut c)
            .any(|n| n.kind() == "dictionary_splat");
        let quantized = ["load_in_8bit", "load_in_4bit", "quantization_config"]
            .iter()
            .any(|k| self.keyword_arg(call, k).is_some());
        let dt = self
            .keyword_arg(call, "torch_dtype")
            .or_else(|| self.keyword_arg(call, "dtype"));
        let dtype = match dt {
            _ if quantized => LoadDType::Unknown,
            None if splat => LoadDType::Unknown,
            None => LoadDType::Default,
            Some(d) => {
                let d0 = unwrap_parens(d);
                let t = match d0.kind() {
                    "string" => DType::from_name(unquote(self.text(d0))),
                    _ => self
                        .qualified(d0)
                        .filter(|q| q.is_torch() && q.segments().len() == 2)
                        .and_then(|q| DType::from_name(q.last()?)),
                };
                t.map_or(LoadDType::Unknown, |t| LoadDType::Given(t, d))
            }
        };
        Some(PretrainedLoad { call, dtype })
    }

    /// The model load whose result a conversion converts, directly
    /// (`X.from_pretrained(...).half()`) or through the name it was bound to in the same
    /// function, on every path, with no other dtype conversion of that name between.
    pub fn load_converted(&self, conv: &Conversion<'a>) -> Option<PretrainedLoad<'a>> {
        let recv = unwrap_parens(conv.receiver);
        if let Some(l) = self.pretrained_load(recv) {
            return Some(l);
        }
        let c = &self.calls[conv.call];
        let b = self.binding_of(recv, c.site)?;
        if b.kind != BindingKind::Assign || b.index.is_some() {
            return None;
        }
        if self.function_of(b.site.scope) != self.function_of(c.site.scope) {
            return None;
        }
        let value = b.value?;
        let load = self.pretrained_load(value)?;
        if !self.dominates(value, c.node.start_byte()) {
            return None;
        }
        // Another dtype conversion of the same name in between: the state is not the load's.
        let name = self.text(recv);
        let between = value.end_byte()..c.node.start_byte();
        let converted_between = self.calls.iter_enumerated().any(|(i, o)| {
            i != conv.call
                && between.contains(&o.node.start_byte())
                && self.conversion(i).is_some_and(|x| {
                    x.dtype.is_some() && self.text(unwrap_parens(x.receiver)) == name
                })
        });
        (!converted_between).then_some(load)
    }

    /// The call as `torch.load(...)`, if it is one.
    pub fn torch_load(&self, call: CallId) -> Option<TorchLoad<'a>> {
        let c = &self.calls[call];
        let q = self.qualified(c.function)?;
        if !(q.is_torch() && q.segments() == ["torch", "load"]) {
            return None;
        }
        let mut pos = self.positional_args(c.node);
        let file = pos.next().or_else(|| self.keyword_arg(c.node, "f"));
        let map_location = if pos.next().is_some()
            || self.keyword_arg(c.node, "map_location").is_some()
            || self.has_splat(c.node)
        {
            MapLocation::Given
        } else {
            MapLocation::Missing
        };
        Some(TorchLoad {
            call,
            file,
            map_location,
        })
    }

    /// `f(*args)` / `f(**kwargs)`: arguments not known statically.
    fn has_splat(&self, call: Node<'_>) -> bool {
        let Some(args) = call.field("arguments") else {
            return false;
        };
        let mut c = args.walk();
        let found = args
            .named_children(&mut c)
            .any(|n| matches!(n.kind(), "list_splat" | "dictionary_splat"));
        found
    }

    /// Whether the file runs on CUDA devices: `.cuda()`, `torch.cuda.*`, a `"cuda..."`
    /// device string or `device_map=` in a call.
    pub fn uses_cuda(&self) -> bool {
        self.calls.iter().any(|c| {
            if self.method_call(c).is_some_and(|(_, m)| m == "cuda") {
                return true;
            }
            if self
                .qualified(c.function)
                .is_some_and(|q| q.is_torch() && q.has_module("cuda"))
            {
                return true;
            }
            let Some(args) = c.arguments else {
                return false;
            };
            let mut cur = args.walk();
            let found = args.named_children(&mut cur).any(|a| {
                let v = if a.kind() == "keyword_argument" {
                    if a.field("name")
                        .is_some_and(|n| self.text(n) == "device_map")
                    {
                        return true;
                    }
                    a.field("value")
                } else {
                    Some(a)
                };
                v.is_some_and(|v| v.kind() == "string" && unquote(self.text(v)).starts_with("cuda"))
            });
            found
        })
    }

    /// Whether the file is TPU code: it imports `torch_xla` (static shapes are required
    /// there) or names `xla`/`tpu` devices.
    pub fn uses_xla(&self) -> bool {
        self.imports
            .values()
            .any(|q| q.first().is_some_and(|f| f == "torch_xla"))
    }

    /// The dtype a conversion converts to when it is written out: `.half()`,
    /// `.bfloat16()`, `.float()`, `.double()`, or `.to(torch.X)` / `.to(dtype=torch.X)`.
    /// `None` for a dtype in a variable (`weight_dtype`, often chosen by a branch).
    pub fn literal_conversion_dtype(&self, conv: &Conversion<'a>) -> Option<DType> {
        let c = &self.calls[conv.call];
        let (_, method) = self.method_call(c)?;
        if method != names::TO_METHOD {
            return conv.dtype.flatten();
        }
        let arg = self
            .keyword_arg(c.node, "dtype")
            .into_iter()
            .chain(self.positional_args(c.node))
            .find_map(|a| {
                let q = self.qualified(unwrap_parens(a))?;
                (q.is_torch() && q.segments().len() == 2).then(|| DType::from_name(q.last()?))?
            })?;
        Some(arg)
    }

    /// The dtypes a variable passed to `.to(...)` may hold there, each with the value
    /// that gives it: `weight_dtype = torch.float32`, then `weight_dtype = torch.float16`
    /// under `if mixed_precision == "fp16":`. Every assignment of the name in its scope
    /// before the conversion must write a torch dtype out (or choose between two with a
    /// conditional expression); otherwise nothing is known and the list is empty.
    pub fn conversion_dtype_choices(&self, conv: &Conversion<'a>) -> Vec<(DType, Node<'a>)> {
        let c = &self.calls[conv.call];
        if !matches!(self.method_call(c), Some((_, m)) if m == names::TO_METHOD) {
            return Vec::new();
        }
        let var = self
            .keyword_arg(c.node, "dtype")
            .map(unwrap_parens)
            .or_else(|| {
                self.positional_args(c.node)
                    .map(unwrap_parens)
                    .find(|a| a.kind() == "identifier" && self.text(*a).contains("dtype"))
            });
        let Some(var) = var.filter(|v| v.kind() == "identifier") else {
            return Vec::new();
        };
        let Some(reaching) = self.binding_of(var, c.site) else {
            return Vec::new();
        };
        let at = c.node.start_byte();
        let literal = |n: Node<'a>| {
            self.qualified(unwrap_parens(n))
                .filter(|q| q.is_torch() && q.segments().len() == 2)
                .and_then(|q| DType::from_name(q.last()?))
        };
        let mut out = Vec::new();
        for b in self.local_bindings(reaching.owner, self.text(var)) {
            if b.pos > at {
                continue;
            }
            let Some(v) = b
                .value
                .filter(|_| b.kind == BindingKind::Assign && b.index.is_none())
            else {
                return Vec::new();
            };
            let v = unwrap_parens(v);
            let arms: Vec<Node<'a>> = if v.kind() == "conditional_expression" {
                let mut cur = v.walk();
                v.named_children(&mut cur).step_by(2).collect()
            } else {
                vec![v]
            };
            for arm in arms {
                match literal(arm) {
                    Some(t) => out.push((t, arm)),
                    None => return Vec::new(),
                }
            }
        }
        out
    }

    /// Whether what a `torch.load` reads goes into a `load_state_dict(...)` (a model's,
    /// an optimizer's): directly (`m.load_state_dict(torch.load(p)["model"])`) or through
    /// the name it is bound to in the same function (`ckpt = torch.load(p)` ...
    /// `m.load_state_dict(ckpt["state_dict"])`).
    pub fn load_feeds_state_dict(&self, load: &TorchLoad<'a>) -> bool {
        let c = &self.calls[load.call];
        // Directly, through subscripts, parentheses and argument lists.
        let mut n = c.node;
        while let Some(p) = n.parent() {
            match p.kind() {
                "subscript" | "parenthesized_expression" | "argument_list" | "keyword_argument" => {
                    n = p
                }
                "call" => return self.is_load_state_dict(p),
                _ => break,
            }
        }
        // Through a name: `ckpt = torch.load(p)` (or `torch.load(p)["model"]`).
        let mut v = c.node;
        while let Some(p) = v.parent() {
            if matches!(p.kind(), "subscript" | "parenthesized_expression") {
                v = p;
            } else {
                break;
            }
        }
        let Some(assign) = v.parent().filter(|p| p.kind() == "assignment") else {
            return false;
        };
        let Some(target) = assign.field("left").filter(|t| t.kind() == "identifier") else {
            return false;
        };
        let name = self.text(target);
        let f = self.function_of(c.site.scope);
        self.calls.iter().any(|o| {
            o.node.start_byte() > assign.end_byte()
                && self.function_of(o.site.scope) == f
                && self.is_load_state_dict(o.node)
                && self.positional_args(o.node).next().is_some_and(|a| {
                    let mut r = unwrap_parens(a);
                    loop {
                        match r.kind() {
                            "subscript" => r = r.field("value").unwrap_or(r),
                            "call" => {
                                // `ckpt.get("model")`, `ckpt["a"].items()`
                                match r.field("function").and_then(|f| f.field("object")) {
                                    Some(obj) => r = obj,
                                    None => break,
                                }
                            }
                            _ => break,
                        }
                    }
                    r.kind() == "identifier" && self.text(r) == name
                })
        })
    }

    fn is_load_state_dict(&self, call: Node<'_>) -> bool {
        call.field("function")
            .filter(|f| f.kind() == "attribute")
            .and_then(|f| f.field("attribute"))
            .is_some_and(|a| self.text(a) == "load_state_dict")
    }

    /// [`Self::load_feeds_state_dict`] into something that holds tensors: not an LR
    /// scheduler or a gradient scaler, whose states are numbers.
    pub fn load_feeds_weights(&self, load: &TorchLoad<'a>) -> bool {
        if !self.load_feeds_state_dict(load) {
            return false;
        }
        let c = &self.calls[load.call];
        let mut n = c.node;
        while let Some(p) = n.parent() {
            if p.kind() == "call" && self.is_load_state_dict(p) {
                let recv = p
                    .field("function")
                    .and_then(|f| f.field("object"))
                    .map(|o| self.text(o).to_ascii_lowercase())
                    .unwrap_or_default();
                return !(recv.contains("scheduler") || recv.contains("scaler"));
            }
            n = p;
            if n.kind() == "block" {
                break;
            }
        }
        true
    }

    /// A call that pads every sequence to the maximum length: `padding="max_length"` or
    /// `pad_to_max_length=True`. Returns the argument that asks for it.
    pub fn pads_to_max_length(&self, call: &Call<'a>) -> Option<Node<'a>> {
        if let Some(p) = self.keyword_arg(call.node, "padding") {
            let p0 = unwrap_parens(p);
            if p0.kind() == "string" && unquote(self.text(p0)) == "max_length" {
                return Some(p);
            }
            // `PaddingStrategy.MAX_LENGTH`
            if self.text(p0).ends_with("MAX_LENGTH") {
                return Some(p);
            }
        }
        self.keyword_arg(call.node, "pad_to_max_length")
            .filter(|v| unwrap_parens(*v).kind() == "true")
    }

    /// The `max_length=` of a call as a number, when it is a literal or a name bound
    /// once to a literal (`CUTOFF_LEN = 256`).
    pub fn literal_int_arg(&self, call: &Call<'a>, name: &str) -> Option<i64> {
        let v = self.keyword_arg(call.node, name)?;
        self.int_value(v, call.site, 0)
    }

    /// An integer expression: a literal, a name bound once to one, or `+`, `-`, `*` of
    /// those (`CUTOFF_LEN + 1`); a parameter counts with its default and a `self.`
    /// attribute with its one assignment (`self.max_len = max_len` in `__init__`), the
    /// value the code runs with unless a caller says otherwise.
    fn int_value(&self, v: Node<'a>, site: Site, depth: u32) -> Option<i64> {
        let v = unwrap_parens(v);
        if depth > 8 {
            return None;
        }
        match v.kind() {
            "integer" => self.text(v).replace('_', "").parse().ok(),
            "identifier" => {
                let b = self.binding_of(v, site)?;
                if b.kind == BindingKind::Parameter {
                    let default = self.parameter_default(b.owner, b.name)?;
                    return self.int_value(default, b.site, depth + 1);
                }
                if b.kind != BindingKind::Assign || b.index.is_some() {
                    return None;
                }
                self.int_value(b.value?, b.site, depth + 1)
            }
            "attribute" => {
                let key @ NameKey::Attr(..) = self.name_key(v, site.scope)? else {
                    return None;
                };
                let mut stores = self.names.get(&key)?.iter().map(|&b| &self.bindings[b]);
                let (Some(b), None) = (stores.next(), stores.next()) else {
                    return None;
                };
                if b.kind != BindingKind::Assign || b.index.is_some() {
                    return None;
                }
                self.int_value(b.value?, b.site, depth + 1)
            }
            "binary_operator" => {
                let l = self.int_value(v.field("left")?, site, depth + 1)?;
                let r = self.int_value(v.field("right")?, site, depth + 1)?;
                match self.text(v.field("operator")?) {
                    "+" => l.checked_add(r),
                    "-" => l.checked_sub(r),
                    "*" => l.checked_mul(r),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether the function holding a call prepares training data: it is mapped over a
    /// dataset (`ds.map(tokenize)`, a lambda in `.map(...)`), is a dataset's
    /// `__getitem__`, or a collate function, in a file that trains (a backward pass, or a
    /// `...Trainer(...)` that will run one).
    pub fn in_training_data_path(&self, call: &Call<'a>) -> bool {
        if !self.trains() {
            return false;
        }
        // A lambda passed to `.map(...)`.
        let mut n = call.node;
        while let Some(p) = n.parent() {
            if p.kind() == "lambda" {
                let in_map = p
                    .parent()
                    .and_then(|a| a.parent())
                    .filter(|c| c.kind() == "call")
                    .and_then(|c| c.field("function"))
                    .and_then(|f| f.field("attribute"))
                    .is_some_and(|a| self.text(a) == "map");
                if in_map {
                    return true;
                }
            }
            if p.kind() == "function_definition" {
                break;
            }
            n = p;
        }
        let Some(f) = self.function_of(call.site.scope) else {
            return false;
        };
        let name = self.scope(f).name;
        if name == "__getitem__" || name.contains("collate") {
            return true;
        }
        // Mapped over a dataset, or called from a function that is.
        let mapped = self.mapped_functions();
        mapped.contains(&name)
            || self.calls.iter().any(|c| {
                c.function.kind() == "identifier"
                    && self.text(c.function) == name
                    && self
                        .function_of(c.site.scope)
                        .is_some_and(|g| mapped.contains(&self.scope(g).name))
            })
    }

    /// Names of functions passed to `.map(...)` (positionally or as `function=`),
    /// directly or through `partial(f, ...)`.
    fn mapped_functions(&self) -> Vec<&'a str> {
        let mut out = Vec::new();
        for c in &self.calls {
            if self.method_call(c).is_none_or(|(_, m)| m != "map") {
                continue;
            }
            let arg = self
                .positional_args(c.node)
                .next()
                .or_else(|| self.keyword_arg(c.node, "function"));
            let Some(mut a) = arg.map(unwrap_parens) else {
                continue;
            };
            if a.kind() == "call" {
                match self.positional_args(a).next() {
                    Some(x) => a = unwrap_parens(x),
                    None => continue,
                }
            }
            let t = self.text(a);
            out.push(t.rsplit('.').next().unwrap_or(t));
        }
        out
    }

    /// Whether the file trains: a backward pass, or a `...Trainer(...)`.
    pub fn trains(&self) -> bool {
        !self.backwards.is_empty()
            || self.calls.iter().any(|c| {
                let t = self.text(c.function);
                let last = t.rsplit('.').next().unwrap_or(t);
                last.ends_with("Trainer") || last == "train" && c.function.kind() == "attribute"
            })
    }
}
