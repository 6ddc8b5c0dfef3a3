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

/// What a `torch.save` writes, for the project's checkpoint fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SavedWeights {
    /// A model's weights, moved to the CPU first ([`SemanticModel::saved_weights`]).
    Cpu,
    /// What may be a model's weights as they lie on its device.
    Device,
    /// No model weights (optimizer state, data), or a file that never uses CUDA.
    NoWeights,
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
        if call.kind_str() != "call" {
            return None;
        }
        let f = call.field("function")?;
        if f.kind_str() != "attribute" {
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
            let site = self.calls[id].site;
            let path = first.kind_str() == "identifier" && self.string_parameter(first, site);
            if !path
                && (self.value(first, site) == Value::Module
                    || first.kind_str() == "identifier" && names::is_model_name(self.text(first)))
            {
                return None;
            }
        }
        let args = call.field("arguments")?;
        let mut c = args.walk();
        let splat = args
            .named_children(&mut c)
            .any(|n| n.kind_str() == "dictionary_splat");
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
                let t = match d0.kind_str() {
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
        let c = &self.calls[conv.call];
        let recv = self.before_dtype_keeping_calls(unwrap_parens(conv.receiver));
        if let Some(l) = self.pretrained_load(recv) {
            return Some(l);
        }
        // Through the names it was bound to, each an assignment of the one before (or
        // of a dtype-keeping call on it: `model = model.eval()`) that dominates the use.
        let mut name = recv;
        let mut at = c.node.start_byte();
        let mut hops = 0;
        let (value, load) = loop {
            hops += 1;
            if hops > 8 {
                return None;
            }
            let b = self.binding_of(name, c.site)?;
            if b.kind != BindingKind::Assign || b.index.is_some() {
                return None;
            }
            if self.function_of(b.site.scope) != self.function_of(c.site.scope) {
                return None;
            }
            let value = b.value?;
            if !self.dominates(value, at) {
                return None;
            }
            let inner = self.before_dtype_keeping_calls(unwrap_parens(value));
            if let Some(load) = self
                .pretrained_load(inner)
                .or_else(|| self.constructor_load(inner))
            {
                break (value, load);
            }
            name = inner;
            at = value.start_byte();
        };
        let recv = unwrap_parens(conv.receiver);
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

    /// The model load in the `__init__` of the class that `call` builds, when the class
    /// is of this file and its constructor loads a model by `from_pretrained` and
    /// converts nothing (`RewardModel(path)` wrapping `AutoModelForCausalLM.from_pretrained(path)`
    /// and a value head): converting the instance converts what that load gave.
    fn constructor_load(&self, call: Node<'a>) -> Option<PretrainedLoad<'a>> {
        if call.kind_str() != "call" {
            return None;
        }
        let f = unwrap_parens(call.field("function")?);
        if f.kind_str() != "identifier" {
            return None;
        }
        let class = *self.classes.get(self.text(f))?;
        let init = *self.functions.get(&(class, "__init__"))?;
        let mut found = None;
        for &i in &self.calls_by_function[init] {
            if self.conversion(i).is_some_and(|x| x.dtype.is_some()) {
                return None;
            }
            if let Some(l) = self.pretrained_load(self.calls[i].node) {
                if found.is_some() {
                    return None;
                }
                found = Some(l);
            }
        }
        found
    }

    /// `expr` without the calls on it that hand back the same module in the same dtype
    /// (`.eval()`, `.train()`, `.cuda()`, `.cpu()`, `.requires_grad_()`, a `.to(...)`
    /// that names a device and no dtype): what they are called on.
    fn before_dtype_keeping_calls(&self, mut expr: Node<'a>) -> Node<'a> {
        for _ in 0..8 {
            if expr.kind_str() != "call" {
                break;
            }
            let Some(f) = expr
                .field("function")
                .filter(|f| f.kind_str() == "attribute")
            else {
                break;
            };
            let m = f.field("attribute").map_or("", |a| self.text(a));
            let keeps = match m {
                "cuda" | "cpu" => true,
                m if names::RETURNS_SELF_METHODS.contains(&m) => true,
                "to" => self
                    .call_index(expr)
                    .and_then(|i| self.conversion(i))
                    .is_some_and(|x| x.dtype.is_none()),
                _ => false,
            };
            let Some(obj) = f.field("object").filter(|_| keeps) else {
                break;
            };
            expr = unwrap_parens(obj);
        }
        expr
    }

    /// Whether `name` is a parameter of its function declared a string (`base_model:
    /// str = ""`, `base_model="huggyllama/llama-7b"`): a path or a hub id, not a model.
    fn string_parameter(&self, name: Node<'a>, site: Site) -> bool {
        let Some(b) = self.binding_of(name, site) else {
            return false;
        };
        let text = self.text(name);
        // `base_model = args.base_model`: a field of the run's options copied to a local
        // of the same name (a module would come from `self`, a load or a constructor).
        if b.kind == BindingKind::Assign && b.index.is_none() {
            return b.value.map(unwrap_parens).is_some_and(|v| {
                v.kind_str() == "attribute"
                    && v.field("attribute").is_some_and(|a| self.text(a) == text)
                    && v.field("object")
                        .is_some_and(|o| o.kind_str() == "identifier" && self.text(o) != "self")
            });
        }
        if b.kind != BindingKind::Parameter {
            return false;
        }
        let Some(params) = self.scopes[b.owner].node.field("parameters") else {
            return false;
        };
        let mut c = params.walk();
        let found = params.named_children(&mut c).any(|p| {
            let id = match p.kind_str() {
                "typed_parameter" => p.named_child(0),
                _ => p.field("name"),
            };
            if id.is_none_or(|i| self.text(i) != text) {
                return false;
            }
            p.field("type").is_some_and(|t| self.text(t) == "str")
                || p.field("value").is_some_and(|v| v.kind_str() == "string")
        });
        found
    }

    /// The model loads a conversion of a name may convert, one per path, when the name
    /// was bound in branches (`if device == "cuda": model = X.from_pretrained(...,
    /// torch_dtype=torch.float16)` ... `else: model = X.from_pretrained(...)`, then
    /// `model.half()` after them). Every binding of the name in the function before the
    /// conversion must be a model load or a wrapper of the name itself
    /// (`model = PeftModel.from_pretrained(model, ...)`, which keeps the base model's
    /// weights and dtype); otherwise nothing is known and the list is empty. No other
    /// dtype conversion of the name may come between.
    pub fn loads_converted_on_paths(&self, conv: &Conversion<'a>) -> Vec<PretrainedLoad<'a>> {
        let recv = unwrap_parens(conv.receiver);
        if recv.kind_str() != "identifier" {
            return Vec::new();
        }
        let c = &self.calls[conv.call];
        let Some(b) = self.binding_of(recv, c.site) else {
            return Vec::new();
        };
        if self.function_of(b.owner) != self.function_of(c.site.scope) {
            return Vec::new();
        }
        let name = self.text(recv);
        let at = c.node.start_byte();
        let mut loads = Vec::new();
        let mut others = Vec::new();
        let mut first = usize::MAX;
        let mut seen = 0usize;
        for b in self.local_bindings(b.owner, b.name) {
            if b.pos > at {
                continue;
            }
            seen += 1;
            let Some(v) = b
                .value
                .filter(|_| b.kind == BindingKind::Assign && b.index.is_none())
                .map(unwrap_parens)
            else {
                return Vec::new();
            };
            if let Some(l) = self.pretrained_load(v) {
                first = first.min(v.start_byte());
                loads.push(l);
                continue;
            }
            let wraps_itself = v.kind_str() == "call"
                && self
                    .positional_args(v)
                    .next()
                    .is_some_and(|a| self.text(unwrap_parens(a)) == name);
            if !wraps_itself {
                others.push(v);
            }
        }
        // Another model built on another path (`if native: model = Net(...)` / `else:
        // model = X.from_pretrained(...)`): the load's path is still converted whole. One
        // on the load's own path would replace it, so nothing is known then.
        if !others.iter().all(|&o| {
            loads
                .iter()
                .all(|l| super::passes::exclusive_arms(o, l.call))
        }) {
            return Vec::new();
        }
        // One binding is [`Self::load_converted`]'s case.
        if loads.is_empty() || seen < 2 {
            return Vec::new();
        }
        let converted_between = self.calls.iter_enumerated().any(|(i, o)| {
            i != conv.call
                && o.node.start_byte() > first
                && o.node.start_byte() < at
                && self.conversion(i).is_some_and(|x| {
                    x.dtype.is_some() && self.text(unwrap_parens(x.receiver)) == name
                })
        });
        if converted_between {
            return Vec::new();
        }
        loads
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
            || self.has_splat(c.node) && !self.splat_may_lack(c.node, c.site, "map_location")
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

    /// Whether the call's only splat is `**name` and some binding of `name` in the same
    /// function is a dict literal without the key `key` (`kwargs = {}` on the GPU path,
    /// `kwargs = {"map_location": ...}` on the CPU one): on that path it is not given.
    fn splat_may_lack(&self, call: Node<'a>, site: Site, key: &str) -> bool {
        let Some(args) = call.field("arguments") else {
            return false;
        };
        let mut c = args.walk();
        let splats: Vec<Node<'a>> = args
            .named_children(&mut c)
            .filter(|n| matches!(n.kind_str(), "list_splat" | "dictionary_splat"))
            .collect();
        let [splat] = splats.as_slice() else {
            return false;
        };
        if splat.kind_str() != "dictionary_splat" {
            return false;
        }
        let Some(name) = splat
            .named_child(0)
            .filter(|n| n.kind_str() == "identifier")
        else {
            return false;
        };
        let Some(b) = self.binding_of(name, site) else {
            return false;
        };
        let quoted = |n: Node<'a>| unquote(self.text(n)) == key;
        self.local_bindings(b.owner, b.name).any(|o| {
            o.kind == BindingKind::Assign
                && o.index.is_none()
                && o.value.map(unwrap_parens).is_some_and(|v| {
                    v.kind_str() == "dictionary" && {
                        let mut w = v.walk();
                        let has = v.named_children(&mut w).any(|pair| {
                            pair.kind_str() != "pair" || pair.field("key").is_none_or(quoted)
                        });
                        !has
                    }
                })
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
            .any(|n| matches!(n.kind_str(), "list_splat" | "dictionary_splat"));
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
                let v = if a.kind_str() == "keyword_argument" {
                    if a.field("name")
                        .is_some_and(|n| self.text(n) == "device_map")
                    {
                        return true;
                    }
                    a.field("value")
                } else {
                    Some(a)
                };
                v.is_some_and(|v| {
                    v.kind_str() == "string" && unquote(self.text(v)).starts_with("cuda")
                })
            });
            found
        })
    }

    /// Whether the file names a CUDA device in a string of its code (docstrings left
    /// out): `device = "cuda"`, a parameter default, `device.startswith("cuda")`. The
    /// calls that [`Self::uses_cuda`] reads are not the only way a script picks the GPU.
    /// The builder looks at every string on its one walk ([`Self::is_cuda_string`]).
    pub fn names_cuda(&self) -> bool {
        self.cuda_string
    }

    /// Whether the string node `n` names a CUDA device: its body starts with `cuda`,
    /// it is no docstring, and it is not nested in another string (an f-string's
    /// interpolation).
    pub(super) fn is_cuda_string(&self, n: Node<'a>) -> bool {
        let body = self
            .text(n)
            .trim_start_matches(['r', 'b', 'u', 'f', 'R', 'B', 'U', 'F'])
            .trim_start_matches(['"', '\'']);
        if !body.starts_with("cuda") {
            return false;
        }
        let mut p = n.parent();
        if p.is_some_and(|p| p.kind_str() == "expression_statement") {
            return false;
        }
        while let Some(a) = p {
            if a.kind_str() == "string" {
                return false;
            }
            p = a.parent();
        }
        true
    }

    /// Whether the file runs on CUDA devices, by its calls ([`Self::uses_cuda`]) or
    /// its strings ([`Self::names_cuda`]).
    pub fn runs_on_cuda(&self) -> bool {
        self.uses_cuda() || self.names_cuda()
    }

    /// Whether the tensors a `torch.load` reads may have been saved from a GPU, given
    /// that `file_cuda` says whether this file runs on CUDA. A file that does, may.
    /// Otherwise the project says: a project that runs on CUDA and saves checkpoints
    /// writes GPU tensors, which a separate inference script or helper module loads
    /// back ([`crate::project::Facts::project_cuda`]); except weights loaded while a
    /// class is built (`__init__`: a model zoo's backbone weights, released inception
    /// weights, files the project did not write), and a file this code saved itself
    /// (`torch.save(net.state_dict(), p)` ... `torch.load(p)` in a CPU script).
    pub fn load_may_be_gpu(&self, load: &TorchLoad<'a>, file_cuda: bool) -> bool {
        // The same code wrote that file from the CPU (`torch.save(net.cpu().state_dict(),
        // path)`, moving the net back to the GPU after): CPU tensors, wherever it runs.
        if load.file.is_some_and(|file| {
            self.saved_from_cpu(
                self.text(file),
                self.class_of(self.calls[load.call].site.scope),
            )
        }) {
            return false;
        }
        // Every checkpoint of weights that the project writes, it writes from the CPU
        // (a save helper that moves each tensor there first): weights loaded back are
        // CPU tensors, unless the same code resumes training state as well.
        if self.project().is_some_and(|p| p.project_cpu_checkpoints())
            && !self.loads_training_state(load)
        {
            return false;
        }
        if file_cuda {
            return true;
        }
        // The same file loaded elsewhere with a `map_location` (`if use_cuda:
        // torch.load(p)` / `else: torch.load(p, map_location="cpu")`): its author knows
        // it may hold GPU tensors.
        if load.file.is_some_and(|file| {
            let path = self.text(file);
            self.calls.ids().any(|i| {
                i != load.call
                    && self.torch_load(i).is_some_and(|o| {
                        o.map_location == MapLocation::Given
                            && o.file.is_some_and(|f| self.text(f) == path)
                    })
            })
        }) {
            return true;
        }
        // TPU code: what it saved was on XLA devices, never CUDA.
        if self.uses_xla() || self.source.contains("torch_xla.") {
            return false;
        }
        let c = &self.calls[load.call];
        let in_init = self
            .function_of(c.site.scope)
            .is_some_and(|f| self.scopes[f].class.is_some() && self.scopes[f].name == "__init__");
        if in_init {
            return false;
        }
        if let Some(file) = load.file {
            let path = self.text(file);
            let saved_here = self.calls.iter().any(|o| {
                self.is_torch_save(o)
                    && self
                        .positional_args(o.node)
                        .nth(1)
                        .is_some_and(|a| self.text(a) == path)
                    && self
                        .positional_args(o.node)
                        .next()
                        .is_some_and(|saved| !self.saves_module_from_caller(saved, o.site))
            });
            // Saved by this very code from modules it never places on a device: CPU
            // tensors. A file that moves its modules to a device variable (`.to(device)`,
            // chosen elsewhere) may have saved them from the GPU.
            if saved_here && !self.places_on_device_variable() {
                return false;
            }
        }
        self.project().is_some_and(|p| p.project_cuda())
    }

    /// Whether a `torch.save` of this file, in the same class as the load (`class`),
    /// writes to `path` (the same expression text) what a `.cpu()` in its value's chain
    /// put on the CPU (`net.cpu().state_dict()`).
    fn saved_from_cpu(&self, path: &str, class: Option<ScopeId>) -> bool {
        self.calls.iter().any(|o| {
            self.class_of(o.site.scope) == class
                && self.is_torch_save(o)
                && self
                    .positional_args(o.node)
                    .nth(1)
                    .is_some_and(|a| self.text(a) == path)
                && self
                    .positional_args(o.node)
                    .next()
                    .is_some_and(|saved| self.cpu_state(saved, o.site))
        })
    }

    /// Whether `value` holds tensors put on the CPU: a chain through `.cpu()`
    /// (`net.cpu().state_dict()`), a dict comprehension of such values
    /// (`{k: v.cpu() for k, v in sd.items()}`), or a name whose entries the code moves
    /// one by one (`for k in sd: sd[k] = sd[k].cpu()`) or bound to one of those.
    fn cpu_state(&self, value: Node<'a>, site: Site) -> bool {
        // Down the method chain to the first `.cpu()` call, if any.
        let chain_cpu = |v: Node<'a>| {
            let r = self.receiver_through(v, |m| m != "cpu");
            r.kind_str() == "call"
                && r.field("function")
                    .and_then(|f| f.field("attribute"))
                    .is_some_and(|a| self.text(a) == "cpu")
        };
        let v = unwrap_parens(value);
        if chain_cpu(v) {
            return true;
        }
        if v.kind_str() == "dictionary_comprehension" {
            // `{k: v.cpu() if torch.is_tensor(v) else v ...}`: the tensors go to the CPU.
            return v
                .field("body")
                .and_then(|p| p.field("value"))
                .map(unwrap_parens)
                .is_some_and(|b| {
                    chain_cpu(b)
                        || b.kind_str() == "conditional_expression"
                            && b.named_child(0).is_some_and(chain_cpu)
                });
        }
        if v.kind_str() != "identifier" {
            return false;
        }
        let name = self.text(v);
        let f = self.function_of(site.scope);
        let moved_in_place = self.assignments.iter().any(|a| {
            self.function_of(a.site.scope) == f
                && a.site.loop_.is_some()
                && a.node.start_byte() < v.start_byte()
                && a.target.kind_str() == "subscript"
                && a.target
                    .field("value")
                    .is_some_and(|t| t.kind_str() == "identifier" && self.text(t) == name)
                && (chain_cpu(a.value)
                    // `save_dict[key] = state_dict`, a state dict moved entry by entry
                    // before: a dict of CPU state dicts.
                    || unwrap_parens(a.value).kind_str() == "identifier"
                        && self.text(unwrap_parens(a.value)) != name
                        // Strictly earlier text: the walk back ends.
                        && a.value.end_byte() <= v.start_byte()
                        && self.cpu_state(a.value, a.site))
        });
        moved_in_place
            || self.binding_of(v, site).is_some_and(|b| {
                b.kind == BindingKind::Assign
                    && b.index.is_none()
                    && b.value.is_some_and(|bv| {
                        unwrap_parens(bv).kind_str() != "identifier" && self.cpu_state(bv, b.site)
                    })
            })
    }

    /// What the `torch.save` call `call` writes, as far as the project's checkpoints go
    /// ([`crate::project::Facts::project_cpu_checkpoints`]); `None` when it is no
    /// `torch.save`.
    pub fn saved_weights(&self, call: CallId) -> Option<SavedWeights> {
        let c = &self.calls[call];
        if !self.is_torch_save(c) {
            return None;
        }
        let Some(value) = self
            .positional_args(c.node)
            .next()
            .or_else(|| self.keyword_arg(c.node, "obj"))
        else {
            return Some(SavedWeights::Device);
        };
        if self.cpu_state(value, c.site) {
            // Weights, when the function takes a model's state dict; otherwise data
            // (features written by a preprocessing script).
            return Some(if self.takes_model_state(self.function_of(c.site.scope)) {
                SavedWeights::Cpu
            } else {
                SavedWeights::NoWeights
            });
        }
        // Only an optimizer's (a scheduler's) state: `torch.save(optimizer.state_dict(), p)`.
        let state_dicts = self.state_dict_calls(value);
        if !state_dicts.is_empty()
            && state_dicts
                .iter()
                .all(|&n| !self.is_model_state_dict_call(n, c.site))
        {
            return Some(SavedWeights::NoWeights);
        }
        // A value handed in by the caller (`save_checkpoint(state, path)`) is whatever
        // the training script built, on its device.
        if self.saves_module_from_caller(value, c.site) {
            return Some(SavedWeights::Device);
        }
        // A file that never uses CUDA saves what it holds on the CPU; that shows nothing
        // about the project's other checkpoints either way.
        if !self.runs_on_cuda() {
            return Some(SavedWeights::NoWeights);
        }
        Some(if self.holds_weights(value, c.site, 0) {
            SavedWeights::Device
        } else {
            SavedWeights::NoWeights
        })
    }

    /// Whether a saved value may hold a model's weights as they lie on its device: a
    /// module, a `state_dict()` of one (not of an optimizer, a scheduler or a scaler),
    /// a value handed in by the caller, or a local made from one of those (or filled in
    /// a function that takes such a state dict).
    fn holds_weights(&self, value: Node<'a>, site: Site, depth: u32) -> bool {
        let v = unwrap_parens(value);
        if self.value(v, site) == Value::Module {
            return true;
        }
        if self
            .state_dict_calls(v)
            .into_iter()
            .any(|n| self.is_model_state_dict_call(n, site))
        {
            return true;
        }
        match v.kind_str() {
            "identifier" => {
                let Some(b) = self.binding_of(v, site) else {
                    return true;
                };
                match (b.kind, b.value) {
                    (BindingKind::Assign, Some(bv)) if depth < 4 => {
                        self.holds_weights(bv, b.site, depth + 1)
                            || self.takes_model_state(self.function_of(site.scope))
                    }
                    (BindingKind::Assign, Some(_)) => true,
                    _ => b.kind != BindingKind::ForTarget,
                }
            }
            // `self.net`, `ckpt["model"]`: unknown, may be weights.
            "attribute" | "subscript" => true,
            _ => false,
        }
    }

    /// Whether `c` is `torch.save(...)`.
    fn is_torch_save(&self, c: &Call<'a>) -> bool {
        self.qualified(c.function)
            .is_some_and(|q| q.is_torch() && q.segments() == ["torch", "save"])
    }

    /// The `X.state_dict()` calls within `value`.
    fn state_dict_calls(&self, value: Node<'a>) -> Vec<Node<'a>> {
        let mut out = Vec::new();
        let mut stack = vec![unwrap_parens(value)];
        while let Some(n) = stack.pop() {
            if n.kind_str() == "call"
                && n.field("function")
                    .and_then(|f| f.field("attribute"))
                    .is_some_and(|a| self.text(a) == "state_dict")
            {
                out.push(n);
            }
            let mut cur = n.walk();
            stack.extend(n.named_children(&mut cur));
        }
        out
    }

    /// Whether the function `f` (the module when `None`) takes a model's state dict
    /// somewhere ([`Self::is_model_state_dict_call`]).
    fn takes_model_state(&self, f: Option<ScopeId>) -> bool {
        self.calls.iter().any(|o| {
            self.function_of(o.site.scope) == f && self.is_model_state_dict_call(o.node, o.site)
        })
    }

    /// Whether `call` is `X.state_dict()` of something other than training state
    /// ([`Self::training_state`]).
    fn is_model_state_dict_call(&self, call: Node<'a>, site: Site) -> bool {
        let Some(f) = call
            .field("function")
            .filter(|f| f.kind_str() == "attribute")
        else {
            return false;
        };
        f.field("attribute")
            .is_some_and(|a| self.text(a) == "state_dict")
            && f.field("object")
                .is_some_and(|o| !self.training_state(o, site))
    }

    /// Whether `expr` is an optimizer, a learning-rate scheduler or a gradient scaler:
    /// by provenance, by its name, or, for a loop's target, by what the loop walks
    /// (`for o in self.optimizers`).
    fn training_state(&self, expr: Node<'a>, site: Site) -> bool {
        let named = |n: Node<'a>| {
            let t = self.text(n).rsplit('.').next().unwrap_or("");
            let l = t.to_ascii_lowercase();
            names::is_optimizer_name(t) || l.contains("sched") || l.contains("scaler")
        };
        let e = unwrap_parens(expr);
        if self.is_optimizer(e, site) || named(e) {
            return true;
        }
        e.kind_str() == "identifier"
            && self.binding_of(e, site).is_some_and(|b| {
                b.kind == BindingKind::ForTarget
                    && b.value.is_some_and(|it| named(unwrap_parens(it)))
            })
    }

    /// Whether the function that holds the load (the module, at module level) also
    /// loads training state (`optimizer.load_state_dict(...)`): a resume, whose
    /// checkpoint holds the optimizer's state as it lay on the device.
    fn loads_training_state(&self, load: &TorchLoad<'a>) -> bool {
        let site = self.calls[load.call].site;
        let f = self.function_of(site.scope);
        self.calls.iter().any(|o| {
            self.function_of(o.site.scope) == f
                && self.is_load_state_dict(o.node)
                && o.node
                    .field("function")
                    .and_then(|x| x.field("object"))
                    .is_some_and(|r| self.training_state(r, o.site))
        })
    }

    /// Whether what `torch.save` writes (`model.state_dict()`, `self.net`) comes from a
    /// module this code did not build: a parameter of the function (a training routine
    /// handed the model that the script placed on its device) or an attribute of
    /// `self`. Saving it proves nothing about where its tensors live.
    fn saves_module_from_caller(&self, saved: Node<'a>, site: Site) -> bool {
        let mut root = unwrap_parens(saved);
        for _ in 0..16 {
            root = match root.kind_str() {
                "call" => match root.field("function") {
                    Some(f) => f,
                    None => break,
                },
                "attribute" => match root.field("object") {
                    Some(o) => unwrap_parens(o),
                    None => break,
                },
                "subscript" => match root.field("value") {
                    Some(v) => unwrap_parens(v),
                    None => break,
                },
                _ => break,
            };
        }
        if root.kind_str() != "identifier" {
            return false;
        }
        if self
            .function_of(site.scope)
            .and_then(|f| self.scope(f).self_param())
            == Some(self.text(root))
        {
            return true;
        }
        self.binding_of(root, site)
            .is_some_and(|b| b.kind == BindingKind::Parameter)
    }

    /// Whether the file moves something to a device held in a variable (`.to(device)`,
    /// `.to(self.device)`, `torch.zeros(n, device=args.device)`): where it runs is
    /// decided elsewhere, possibly on a GPU.
    fn places_on_device_variable(&self) -> bool {
        let variable = |a: Node<'a>| {
            let a = unwrap_parens(a);
            matches!(a.kind_str(), "identifier" | "attribute") && self.text(a).contains("device")
        };
        self.calls.iter().any(|c| {
            self.keyword_arg(c.node, "device").is_some_and(variable)
                || self
                    .method_call(c)
                    .is_some_and(|(_, m)| m == names::TO_METHOD)
                    && self.positional_args(c.node).next().is_some_and(variable)
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
                    .find(|a| a.kind_str() == "identifier" && self.text(*a).contains("dtype"))
            });
        let Some(var) = var.filter(|v| v.kind_str() == "identifier") else {
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
            let arms: Vec<Node<'a>> = if v.kind_str() == "conditional_expression" {
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
    /// an optimizer's) or another loader of state dicts ([`Self::state_dict_args`]):
    /// directly (`m.load_state_dict(torch.load(p)["model"])`), through the name it is
    /// bound to in the same function (`ckpt = torch.load(p)` ...
    /// `m.load_state_dict(ckpt["state_dict"])`), or through a same-file helper that
    /// returns it (`def load_ckpt(p): return torch.load(p)["model"]` ...
    /// `m.load_state_dict(load_ckpt(p))`).
    pub fn load_feeds_state_dict(&self, load: &TorchLoad<'a>) -> bool {
        let c = &self.calls[load.call];
        self.value_feeds_state_dict(c.node, 0)
    }

    /// [`Self::load_feeds_state_dict`] for any expression; `depth` bounds the helpers
    /// followed.
    fn value_feeds_state_dict(&self, value: Node<'a>, depth: u32) -> bool {
        // Directly, through subscripts, parentheses and argument lists.
        let mut n = value;
        while let Some(p) = n.parent() {
            match p.kind_str() {
                "subscript" | "parenthesized_expression" => n = p,
                "argument_list" => {
                    return p.parent().is_some_and(|call| {
                        self.state_dict_args(call)
                            .any(|a| a.id() == unwrap_parens(n).id() || a.id() == n.id())
                    })
                }
                "keyword_argument" => {
                    return p
                        .field("name")
                        .is_some_and(|k| self.text(k) == "state_dict")
                        || p.parent().and_then(|a| a.parent()).is_some_and(|call| {
                            self.state_dict_args(call).any(|a| a.id() == n.id())
                        });
                }
                "return_statement" => {
                    let func = self
                        .call_index(value)
                        .and_then(|id| self.function_of(self.calls[id].site.scope));
                    return func.is_some_and(|f| self.returned_feeds_state_dict(f, depth));
                }
                _ => break,
            }
        }
        // Through a name: `ckpt = torch.load(p)` (or `torch.load(p)["model"]`).
        let Some(assign) = n.parent().filter(|p| p.kind_str() == "assignment") else {
            return false;
        };
        let Some(target) = assign
            .field("left")
            .filter(|t| t.kind_str() == "identifier")
        else {
            return false;
        };
        let name = self.text(target);
        let Some(site) = self.call_index(value).map(|id| self.calls[id].site) else {
            return false;
        };
        let f = self.function_of(site.scope);
        let root_is = |a: Node<'a>, name: &str| self.rooted_at(a, name);
        let names = self.names_derived_from(name, f, assign.end_byte());
        let fed = self.calls.iter().any(|o| {
            o.node.start_byte() > assign.end_byte()
                && self.function_of(o.site.scope) == f
                && self
                    .state_dict_args(o.node)
                    .any(|a| names.iter().any(|n| root_is(a, n)))
        });
        if fed || depth >= 2 {
            return fed;
        }
        // Returned by the enclosing function: the name itself, an entry of it, or a
        // dict made from it.
        let Some(func) = f else { return false };
        self.scopes[func].returns.iter().any(|&(e, _)| {
            names.iter().any(|n| root_is(e, n))
                && e.parent()
                    .filter(|r| r.kind_str() == "return_statement")
                    .is_some()
        }) && self.returned_feeds_state_dict(func, depth)
    }

    /// The names that hold what `name` held, or a dict made from it, after byte `after`
    /// in the function `func` (the module when `None`): `name` itself, a name assigned
    /// from an expression that reads one of them (`sd = ckpt["model"]`,
    /// `matched = {k: v for k, v in sd.items() if k in own}`), a dict merged from one
    /// (`own.update(matched)`), and a dict filled by a loop over one
    /// (`for k, v in sd.items(): renamed[k[7:]] = v`, the usual renaming of the
    /// `module.` prefix). Fine-tuning code merges a checkpoint into the model's own
    /// state dict before loading it.
    fn names_derived_from(
        &self,
        name: &'a str,
        func: Option<ScopeId>,
        after: usize,
    ) -> Vec<&'a str> {
        let end = func.map_or(self.root.end_byte(), |f| self.scopes[f].node.end_byte());
        let mut names = vec![name];
        let mut i = 0;
        // Bounded: a name read everywhere (a config dict) must not spread without end.
        while i < names.len() && names.len() < 16 {
            let cur = names[i];
            i += 1;
            for &read in self.identifiers_in(cur, after..end) {
                for d in self.receivers_of_read(read) {
                    if !names.contains(&d) {
                        names.push(d);
                    }
                }
            }
        }
        names
    }

    /// The names a read of a value passes it on to, in the statement that holds the
    /// read ([`Self::names_derived_from`]).
    fn receivers_of_read(&self, read: Node<'a>) -> Vec<&'a str> {
        let root_name = |t: Node<'a>| {
            let mut r = unwrap_parens(t);
            while r.kind_str() == "subscript" {
                r = r.field("value").unwrap_or(r);
            }
            (r.kind_str() == "identifier").then(|| self.text(r))
        };
        let mut out = Vec::new();
        let mut n = read;
        while let Some(p) = n.parent() {
            match p.kind_str() {
                "assignment" | "augmented_assignment" => {
                    if p.field("right").is_some_and(|r| r.id() == n.id()) {
                        out.extend(p.field("left").and_then(root_name));
                    }
                    break;
                }
                "for_statement" => {
                    if p.field("right").is_some_and(|r| r.id() == n.id()) {
                        // Every dict the body stores into.
                        if let Some(body) = p.field("body") {
                            let mut c = body.walk();
                            let mut stack = vec![body];
                            while let Some(x) = stack.pop() {
                                if x.kind_str() == "assignment" {
                                    if let Some(l) =
                                        x.field("left").filter(|l| l.kind_str() == "subscript")
                                    {
                                        out.extend(root_name(l));
                                    }
                                }
                                stack.extend(x.named_children(&mut c));
                            }
                        }
                    }
                    break;
                }
                "argument_list" => {
                    // `own.update(sd)`: the receiver holds the entries now.
                    let call = p.parent();
                    if let Some(obj) = call
                        .and_then(|c| c.field("function"))
                        .filter(|f| {
                            f.kind_str() == "attribute"
                                && f.field("attribute")
                                    .is_some_and(|a| self.text(a) == "update")
                        })
                        .and_then(|f| f.field("object"))
                    {
                        out.extend(root_name(obj));
                    }
                    n = p;
                }
                k if k == "block"
                    || k == "module"
                    || k.ends_with("_statement")
                    || k.ends_with("_definition")
                    || k.ends_with("_clause") && k != "for_in_clause" && k != "if_clause" =>
                {
                    break
                }
                _ => n = p,
            }
        }
        out
    }

    /// Whether what the function `func` hands back goes into a loader of state dicts
    /// at some same-file call of it.
    fn returned_feeds_state_dict(&self, func: ScopeId, depth: u32) -> bool {
        depth < 2
            && self
                .callers(func)
                .iter()
                // Each caller may scan the file: a bounded sample keeps a helper called
                // from thousands of places linear.
                .take(64)
                .any(|&c| self.value_feeds_state_dict(self.calls[c].node, depth + 1))
    }

    /// Whether `a` is the name `name`, an entry of it or a method's result on it
    /// (`ckpt`, `ckpt["model"]`, `ckpt.get("model")`, `ckpt["a"].items()`).
    fn rooted_at(&self, a: Node<'a>, name: &str) -> bool {
        let mut r = unwrap_parens(a);
        loop {
            match r.kind_str() {
                "subscript" => r = r.field("value").unwrap_or(r),
                "call" => match r.field("function").and_then(|f| f.field("object")) {
                    Some(obj) => r = obj,
                    None => break,
                },
                _ => break,
            }
        }
        r.kind_str() == "identifier" && self.text(r) == name
    }

    /// Positions of the parameters of `f` whose value reaches a loader of state dicts
    /// in `f` itself (`def load_checkpoint(checkpoint, model, optimizer):
    /// model.load_state_dict(checkpoint["state_dict"])`): a caller hands it weights.
    pub fn state_dict_params(&self, f: ScopeId) -> Vec<u32> {
        // Most functions load nothing: their parameters are not traced at all.
        let loaded: Vec<Node<'a>> = self
            .calls_of_function(Some(f))
            .iter()
            .flat_map(|&c| self.direct_state_dict_args(self.calls[c].node))
            .collect();
        if loaded.is_empty() {
            return Vec::new();
        }
        self.params_where(f, |p| {
            let names = self.names_derived_from(p, Some(f), 0);
            loaded
                .iter()
                .any(|&a| names.iter().any(|n| self.rooted_at(a, n)))
        })
    }

    /// The arguments of `call` that go into a loader of state dicts: those of
    /// [`Self::direct_state_dict_args`], and those a function of this file or of the
    /// project passes into one (`load_checkpoint(torch.load(path), model, optimizer)`).
    fn state_dict_args(&self, call: Node<'a>) -> Box<dyn Iterator<Item = Node<'a>> + '_> {
        let direct = self.direct_state_dict_args(call);
        let f = call.field("function").map(unwrap_parens);
        let positions: Vec<u32> = match f {
            Some(f) if call.kind_str() == "call" && f.kind_str() == "identifier" => {
                match self.callee_of_node(call) {
                    Some(g) if self.scope(g).class.is_none() => self.state_dict_params(g),
                    Some(_) => Vec::new(),
                    None => self
                        .project()
                        .and_then(|p| p.state_dict_params(self.text(f)))
                        .map(<[u32]>::to_vec)
                        .unwrap_or_default(),
                }
            }
            // `utils.load_checkpoint(...)` through `import utils`.
            Some(f) if call.kind_str() == "call" && f.kind_str() == "attribute" => {
                let imported = f.field("object").is_some_and(|o| {
                    o.kind_str() == "identifier"
                        && self.call_index(call).is_some_and(|id| {
                            let site = self.calls[id].site;
                            self.resolve(o, site, o.start_byte())
                                .is_some_and(|b| self.bindings[b].kind == BindingKind::Import)
                        })
                });
                match self.project().filter(|_| imported) {
                    Some(p) => p
                        .state_dict_params(self.text(f))
                        .map(<[u32]>::to_vec)
                        .unwrap_or_default(),
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        };
        if positions.is_empty() {
            return direct;
        }
        let helper = self
            .positional_args(call)
            .enumerate()
            .filter(move |(i, _)| positions.contains(&(*i as u32)))
            .map(|(_, a)| unwrap_parens(a));
        Box::new(direct.chain(helper))
    }

    /// The arguments of a call that loads a state dict into something:
    /// `m.load_state_dict(sd)` (the first), and functions named for loading or setting
    /// a state dict (`set_peft_model_state_dict(model, sd)`,
    /// `load_model_state_dict(model, sd)`: every positional argument).
    fn direct_state_dict_args(&self, call: Node<'a>) -> Box<dyn Iterator<Item = Node<'a>> + '_> {
        if call.kind_str() != "call" {
            return Box::new(std::iter::empty());
        }
        let Some(f) = call.field("function") else {
            return Box::new(std::iter::empty());
        };
        let name = match f.kind_str() {
            "attribute" => f.field("attribute").map(|a| self.text(a)),
            "identifier" => Some(self.text(f)),
            _ => None,
        }
        .unwrap_or("");
        if name == "load_state_dict" && f.kind_str() == "attribute" {
            // An LR scheduler's or a gradient scaler's state is numbers, not tensors.
            let recv = f
                .field("object")
                .map(|o| self.text(o).to_ascii_lowercase())
                .unwrap_or_default();
            if recv.contains("scheduler") || recv.contains("scaler") {
                return Box::new(std::iter::empty());
            }
            return Box::new(self.positional_args(call).take(1).map(unwrap_parens));
        }
        // `torch.distributed.checkpoint`'s `set_*_state_dict` take the per-rank shards a
        // distributed checkpoint holds (each rank's own device), not a checkpoint
        // gathered on one device.
        let loader = name.ends_with("state_dict")
            && (name.starts_with("load_") || name.starts_with("set_"))
            && name != "load_state_dict"
            && !self.qualified(f).is_some_and(|q| q.is_torch());
        if loader {
            return Box::new(self.positional_args(call).map(unwrap_parens));
        }
        Box::new(std::iter::empty())
    }

    fn is_load_state_dict(&self, call: Node<'_>) -> bool {
        call.field("function")
            .filter(|f| f.kind_str() == "attribute")
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
            if p.kind_str() == "call" && self.is_load_state_dict(p) {
                let recv = p
                    .field("function")
                    .and_then(|f| f.field("object"))
                    .map(|o| self.text(o).to_ascii_lowercase())
                    .unwrap_or_default();
                return !(recv.contains("scheduler") || recv.contains("scaler"));
            }
            n = p;
            if n.kind_str() == "block" {
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
            if p0.kind_str() == "string" && unquote(self.text(p0)) == "max_length" {
                return Some(p);
            }
            // `PaddingStrategy.MAX_LENGTH`
            if self.text(p0).ends_with("MAX_LENGTH") {
                return Some(p);
            }
        }
        self.keyword_arg(call.node, "pad_to_max_length")
            .filter(|v| unwrap_parens(*v).kind_str() == "true")
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
        match v.kind_str() {
            "integer" => self.text(v).replace('_', "").parse().ok(),
            "identifier" => {
                let b = self.binding_of(v, site)?;
                if b.kind == BindingKind::Parameter {
                    return self.parameter_int_value(b.owner, b.name, b.site, depth + 1);
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

    /// The value parameter `name` of function `f` runs with: the largest of what its
    /// same-file callers pass (the calls of the class, for `__init__`: a dataset built
    /// by a loader helper from a `MAX_LEN` constant of the notebook), its default where
    /// a caller passes nothing, the default alone where nothing calls it.
    fn parameter_int_value(&self, f: ScopeId, name: &str, at: Site, depth: u32) -> Option<i64> {
        let sc = self.scope(f);
        let default = self.parameter_default(f, name);
        let pos = sc.params.iter().position(|p| *p == name)?;
        let constructor = sc.class.filter(|_| sc.name == "__init__");
        let calls: Vec<CallId> = match constructor {
            Some(class) => {
                let cname = self.scope(class).name;
                self.calls
                    .iter_enumerated()
                    .filter(|(_, c)| {
                        c.function.kind_str() == "identifier"
                            && self.text(c.function) == cname
                            && self.classes.get(cname) == Some(&class)
                    })
                    .map(|(i, _)| i)
                    .collect()
            }
            None => self.callers[f].clone(),
        };
        if calls.is_empty() {
            return self.int_value(default?, at, depth);
        }
        let mut best: Option<i64> = None;
        for i in calls {
            let c = &self.calls[i];
            // The receiver fills the first parameter of a method called on an object or
            // of a constructor.
            let skip = usize::from(
                sc.self_param().is_some()
                    && (constructor.is_some() || c.function.kind_str() == "attribute"),
            );
            let arg = pos
                .checked_sub(skip)
                .and_then(|p| self.positional_args(c.node).nth(p))
                .filter(|a| a.kind_str() != "list_splat" && a.kind_str() != "dictionary_splat")
                .or_else(|| self.keyword_arg(c.node, name));
            let v = match arg {
                Some(a) => self.int_value(a, c.site, depth)?,
                None if self.has_splat(c.node) => return None,
                None => self.int_value(default?, at, depth)?,
            };
            best = Some(best.map_or(v, |b| b.max(v)));
        }
        best
    }

    /// Whether the function holding a call prepares training data: it is mapped over a
    /// dataset (`ds.map(tokenize)`, a lambda in `.map(...)`), is a dataset's
    /// `__getitem__`, or a collate function, in a file that trains (a backward pass, or a
    /// `...Trainer(...)` that will run one).
    pub fn in_training_data_path(&self, call: &Call<'a>) -> bool {
        let Some(f) = self.function_of(call.site.scope) else {
            return false;
        };
        // A dataset's `__getitem__` (and the methods it calls on `self`) is the data
        // path of whatever trains on it, in this file or another of the project.
        if self.in_getitem(f) {
            return self.trains() || self.project().is_some_and(|p| p.project_trains());
        }
        // A data module that a training script imports (mapping or collating for it)
        // is on that training's data path.
        if !self.trains() && !self.project().is_some_and(|p| p.feeds_training()) {
            return false;
        }
        // A lambda passed to `.map(...)`.
        let mut n = call.node;
        while let Some(p) = n.parent() {
            if p.kind_str() == "lambda" {
                let in_map = p
                    .parent()
                    .and_then(|a| a.parent())
                    .filter(|c| c.kind_str() == "call")
                    .and_then(|c| c.field("function"))
                    .and_then(|f| f.field("attribute"))
                    .is_some_and(|a| self.text(a) == "map");
                if in_map {
                    return true;
                }
            }
            if p.kind_str() == "function_definition" {
                break;
            }
            n = p;
        }
        let name = self.scope(f).name;
        if name.contains("collate") {
            return true;
        }
        // Mapped over a dataset (here, or by another file of the project), or called
        // from a function that is. A function mapped only over evaluation splits
        // (`datasets["validation"].map(prepare_validation_features)`) feeds
        // prediction, not training.
        let mapped = self.mapped_functions();
        let is_mapped = |g: ScopeId| {
            mapped.contains(&self.scope(g).name)
                || self.project().is_some_and(|p| {
                    crate::project::qualname(self, g)
                        .or_else(|| crate::project::closure_name(self, g))
                        .is_some_and(|n| p.mapped_function(&n))
                })
        };
        is_mapped(f)
            || self.calls.iter().any(|c| {
                c.function.kind_str() == "identifier"
                    && self.text(c.function) == name
                    && self.function_of(c.site.scope).is_some_and(is_mapped)
            })
    }

    /// Whether the function is a class's `__getitem__`, or a method of that class that
    /// its `__getitem__` calls on `self` (directly).
    fn in_getitem(&self, f: ScopeId) -> bool {
        let sc = self.scope(f);
        if sc.name == "__getitem__" {
            return true;
        }
        let Some(class) = sc.class else {
            return false;
        };
        self.callers(f).iter().any(|&c| {
            self.function_of(self.calls[c].site.scope).is_some_and(|g| {
                self.scope(g).name == "__getitem__" && self.scope(g).class == Some(class)
            })
        })
    }

    /// What each `.map(...)` over data that is not for evaluation (not
    /// `val_data.map(f)`, `datasets["test"].map(f)`) runs, as the expression naming it
    /// and the site of the map: the function (`f`, `utils.f`), also through
    /// `partial(f, ...)` and through a name bound to either, or the call of a factory
    /// whose result is the mapped function (`tokenize_fn(tokenizer)`).
    pub fn mapped_callables(&self) -> Vec<(Node<'a>, Site)> {
        let mut out = Vec::new();
        for c in &self.calls {
            let Some((recv, "map")) = self.method_call(c) else {
                continue;
            };
            if self.is_eval_split(recv) {
                continue;
            }
            let arg = self
                .positional_args(c.node)
                .next()
                .or_else(|| self.keyword_arg(c.node, "function"));
            let Some(mut a) = arg.map(unwrap_parens) else {
                continue;
            };
            if a.kind_str() == "identifier" {
                if let Some(v) = self
                    .binding_of(a, c.site)
                    .filter(|b| b.kind == BindingKind::Assign && b.index.is_none())
                    .and_then(|b| b.value)
                {
                    a = unwrap_parens(v);
                }
            }
            if a.kind_str() == "call" {
                let partial = a
                    .field("function")
                    .is_some_and(|f| self.text(f).rsplit('.').next() == Some("partial"));
                if partial {
                    match self.positional_args(a).next() {
                        Some(x) => a = unwrap_parens(x),
                        None => continue,
                    }
                }
            }
            out.push((a, c.site));
        }
        out
    }

    /// Names of the functions of this file that [`Self::mapped_callables`] maps: a
    /// name's last segment, or the closures a factory of this file returns.
    fn mapped_functions(&self) -> Vec<&'a str> {
        let mut out = Vec::new();
        for (a, _) in self.mapped_callables() {
            match a.kind_str() {
                "identifier" | "attribute" => {
                    let t = self.text(a);
                    out.push(t.rsplit('.').next().unwrap_or(t));
                }
                "call" => {
                    let Some(factory) =
                        a.field("function").filter(|f| f.kind_str() == "identifier")
                    else {
                        continue;
                    };
                    let factory = self.text(factory);
                    out.extend(
                        self.scopes
                            .iter_enumerated()
                            .filter(|(_, sc)| {
                                sc.parent.is_some_and(|p| {
                                    self.scopes[p].is_function() && self.scopes[p].name == factory
                                })
                            })
                            .filter(|&(i, _)| self.is_returned_closure(i))
                            .map(|(_, sc)| sc.name),
                    );
                }
                _ => {}
            }
        }
        out
    }

    /// Whether `data` names evaluation data: a name whose first word says so
    /// (`val_data`, `eval_examples`, `test_ds`), or a split picked by such a key
    /// (`raw_datasets["validation"]`).
    fn is_eval_split(&self, data: Node<'a>) -> bool {
        let data = unwrap_parens(data);
        let word = match data.kind_str() {
            "identifier" => self.text(data),
            "attribute" => data.field("attribute").map_or("", |a| self.text(a)),
            "subscript" => data
                .field("subscript")
                .filter(|k| k.kind_str() == "string")
                .map_or("", |k| self.text(k).trim_matches(|c| c == '"' || c == '\'')),
            _ => "",
        };
        names::is_eval_split_name(word)
    }

    /// Whether the file trains: a backward pass, or a `...Trainer(...)`.
    pub fn trains(&self) -> bool {
        !self.backwards.is_empty()
            || self.calls.iter().any(|c| {
                let t = self.text(c.function);
                let last = t.rsplit('.').next().unwrap_or(t);
                last.ends_with("Trainer") || last == "train" && c.function.kind_str() == "attribute"
            })
    }
}
