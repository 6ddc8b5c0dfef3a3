//! The project index: facts that cross files.
//!
//! Real projects split a training script over files (the loop in `train.py`, the eval
//! helper in `utils.py`, the loss in `loss.py`). Before the per-file rules run, every
//! Python file of the project is summarized once ([`FileSummary`]: whether it is
//! PyTorch code, its module classes, its functions with "runs a forward", "returns a
//! detached value", "resets gradients", its imports, and its calls of imported names
//! with the grad mode at each). The summaries are joined into per-file [`FileFacts`]:
//! what one file needs from the others (which of its functions are called from other
//! files, and whether every such call runs under `no_grad`; which imported names and
//! method names return detached values; whether it is PyTorch code through its
//! imports). The per-file model consults its facts ([`crate::semantic::SemanticModel::set_project`]);
//! the rules stay per file.
//!
//! Summaries are cached by content hash in the result cache; a file's cached findings
//! are keyed by the hash of its facts too, so a change in a dependency's summary that
//! changes what this file sees re-lints it.
//!
//! One parse per file: a file that is summarized afresh is linted in the same pass,
//! from the same tree and model, with facts guessed from the file alone; the model
//! records each question it asks of them ([`FactQuery`]). After the join, the lint is
//! kept when the file's real facts answer every recorded question as the guess did,
//! and the file is parsed and linted again otherwise (a file whose lint depends on what
//! other files say: a small share of a project). Trees and models are dropped as soon
//! as their file is summarized and linted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tree_sitter::Node;

use crate::lint::catch_quietly;
use crate::semantic::{
    BindingKind, GradMode, NodeExt, Origin, SavedWeights, ScopeId, ScopeKind, SemanticModel, Value,
};

/// A function or method of a file, as other files see it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FnSummary {
    /// `f` for a module-level function, `C.m` for a method of a module-level class.
    pub name: String,
    pub method: bool,
    pub runs_forward: bool,
    /// A `return` gives a value without a graph (`loss.item()`) and none may give one.
    pub returns_detached: bool,
    /// Some `return` may give a graph or a module.
    pub returns_graph: bool,
    pub resets_grads: bool,
    /// Positions of the call arguments that flow into a backward pass in the function
    /// (module-level functions only): `update(opt, log_probs)` backpropagating its
    /// second parameter.
    #[serde(default)]
    pub backward_params: Vec<u32>,
    /// Module-level functions only: positions of the parameters that a method only
    /// modules have is called on (`soft_update(target, source, tau)` calling
    /// `target.parameters()`): what a caller hands there is a module.
    #[serde(default)]
    pub module_params: Vec<u32>,
    /// Module-level functions only: positions of the parameters whose value goes into
    /// a loader of state dicts (`load_checkpoint(checkpoint, model, optimizer)` calling
    /// `model.load_state_dict(checkpoint["state_dict"])`): a caller hands it weights.
    #[serde(default)]
    pub state_dict_params: Vec<u32>,
    /// Backpropagates (`.backward()`, `torch.autograd.grad`): a training step.
    pub wants_grad: bool,
    /// Module-level functions only: the argument every `return` hands back unchanged
    /// (`load_weights(pipeline, ...)` returning `pipeline`), so the result is placed
    /// wherever the argument was.
    #[serde(default)]
    pub returns_param: Option<u32>,
    /// Module-level functions only: every `return` hands back a model placed on this
    /// device (`"cuda"` or `"cpu"`), or on the device its parameter holds
    /// (`"param:N:NAME"`, see [`SemanticModel::returned_device`]).
    #[serde(default)]
    pub returns_device: Option<String>,
    /// Module-level functions only: every `return` hands back a module that froze
    /// its own parameters when built.
    #[serde(default)]
    pub returns_frozen: bool,
    /// Calls a module under `no_grad` (a `with torch.no_grad():` block, a decorator):
    /// with `runs_forward` false, its forwards record no graph (`select_action`
    /// picking an action inside `no_grad`).
    #[serde(default)]
    pub no_grad_forward: bool,
    /// `forward` of a module class only: the positions of the returned tuple that carry
    /// no graph (`return dist.sample(), dist` gives `[0]`), and `u32::MAX` when the
    /// whole output carries none.
    #[serde(default)]
    pub detached_outputs: Vec<u32>,
    /// Module-level functions only: the positions of the returned tuple that carry no
    /// graph on every return (`return loss, {"adv": loss_adv.item()}` gives `[1]`).
    #[serde(default)]
    pub detached_elements: Vec<u32>,
    /// Calls nothing but torch, math and NumPy functions and plain builtins (a
    /// `process_out` that scales and shifts): it runs no forward, whatever the
    /// receiver it is called on.
    #[serde(default)]
    pub inert: bool,
    /// Module-level functions only: a decorator (factory) that names only torch's
    /// no-grad modes (`def smart_inference_mode(): def decorate(fn): return
    /// (torch.inference_mode if new else torch.no_grad)()(fn); return decorate`).
    #[serde(default)]
    pub no_grad_decorator: bool,
}

/// `local` bound by `from module import name` (`name: Some`) or `import module`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImportSummary {
    pub local: String,
    /// Dotted, with the leading dots of a relative import.
    pub module: String,
    pub name: Option<String>,
}

/// A call of an imported name: `local(...)` or `local.attr(...)`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallSummary {
    pub local: String,
    pub attr: Option<String>,
    pub no_grad: bool,
    /// A call of the value that the call of `local`/`local.attr` returned: `step =
    /// make_val_step(model); step(x)` runs the closure the factory hands back.
    #[serde(default)]
    pub result: bool,
    /// The call's result flows into a backward here: the callee computes part of a
    /// training step's loss.
    #[serde(default)]
    pub trains: bool,
}

/// What one file tells the others.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileSummary {
    /// Imports a PyTorch-family package.
    pub torch: bool,
    /// Imports JAX, Flax, TensorFlow or Keras.
    pub foreign: bool,
    pub module_classes: Vec<String>,
    pub functions: Vec<FnSummary>,
    pub imports: Vec<ImportSummary>,
    pub calls: Vec<CallSummary>,
    /// Method names called on `self` (`self.sample_latent(...)`).
    #[serde(default)]
    pub self_calls: Vec<String>,
    /// Module-level module classes that freeze their own parameters when built.
    #[serde(default)]
    pub frozen_classes: Vec<String>,
    /// Runs on CUDA devices (`.cuda()`, `torch.cuda.*`, a `"cuda"` device string).
    #[serde(default)]
    pub cuda: bool,
    /// Calls `torch.save`.
    #[serde(default)]
    pub saves: bool,
    /// Saves a model's weights moved to the CPU first, and saves weights that may lie
    /// on the device ([`SemanticModel::saved_weights`]).
    #[serde(default)]
    pub cpu_weight_saves: bool,
    #[serde(default)]
    pub device_weight_saves: bool,
    /// Trains a model ([`SemanticModel::trains`]).
    #[serde(default)]
    pub trains: bool,
    /// Method names called on a receiver other than `self` or an imported module
    /// (`waveglow.infer(mel)`), and whether every such call runs under `no_grad`.
    #[serde(default)]
    pub method_calls: BTreeMap<String, bool>,
    /// Method names called on such a receiver whose result flows into a backward here
    /// (`self.policy.evaluate_actions(obs, actions)` giving the log-probs of a PPO
    /// loss): those methods compute part of a training step's loss.
    #[serde(default)]
    pub trained_method_calls: BTreeSet<String>,
    /// Method names called on `self`, and whether every such call runs under
    /// `no_grad`: a base class's `evaluate_one_epoch` calling `self.eval_step(data)`
    /// inside `no_grad` reaches the overrides that subclasses in other files define.
    #[serde(default)]
    pub self_method_calls: BTreeMap<String, bool>,
    /// Method names called (on `self` or another receiver) with grad on inside a
    /// method, with the names of those host methods: the call runs under `no_grad`
    /// whenever every call of its host does (a base task's `evaluation` calling
    /// `self.valid_step(...)`, itself called only from the runner's no-grad
    /// `eval_epoch`). Those calls are left out of `method_calls` and
    /// `self_method_calls`.
    #[serde(default)]
    pub hosted_method_calls: BTreeMap<String, BTreeSet<String>>,
    /// Imported functions that this file maps over data that is not for evaluation
    /// (`dataset.map(partial(convert_example, ...))`), as calls: `result` marks the
    /// closure an imported factory returns (`dataset.map(tokenize_fn(tok))`).
    #[serde(default)]
    pub mapped: Vec<CallSummary>,
    /// Summarized from its imports alone (no PyTorch word in it): its functions are
    /// not listed, so a name it does not import is taken as its own definition.
    #[serde(default)]
    pub imports_only: bool,
}

/// What one file needs from the rest of the project.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileFacts {
    /// Functions of this file (by [`FnSummary::name`]) called from other files, with
    /// whether every such call runs under `no_grad`.
    pub external_callers: BTreeMap<String, bool>,
    /// Functions of this file (by [`FnSummary::name`]) whose results another file
    /// backpropagates.
    pub training_callers: BTreeSet<String>,
    /// Imported names that are project functions returning detached values.
    pub detached_imports: BTreeSet<String>,
    /// Imported names that are project functions returning a tuple some elements of
    /// which carry no graph, with those positions (see [`FnSummary::detached_elements`]).
    pub detached_element_imports: BTreeMap<String, Vec<u32>>,
    /// Method names whose every project definition returns a detached value.
    /// One set for the whole project, shared by every file's facts.
    pub detached_methods: Arc<BTreeSet<String>>,
    /// Imported names that are `nn.Module` subclasses of the project.
    pub module_imports: BTreeSet<String>,
    /// Imported names that are project functions backpropagating some of their
    /// arguments, with those arguments' positions.
    pub backward_param_imports: BTreeMap<String, Vec<u32>>,
    /// Imported names (`soft_update`, or `ptu.soft_update` through `import pkg.util as
    /// ptu`) that are project functions using some parameters as modules, with those
    /// parameters' positions (see [`FnSummary::module_params`]).
    pub module_param_imports: BTreeMap<String, Vec<u32>>,
    /// Imported names that are project functions loading some parameters as state
    /// dicts, with those parameters' positions (see [`FnSummary::state_dict_params`]).
    pub state_dict_param_imports: BTreeMap<String, Vec<u32>>,
    /// Imported names that are project functions handing back one of their arguments
    /// unchanged, with its position.
    pub param_returning_imports: BTreeMap<String, u32>,
    /// Imported names that are project functions returning a model on a known device.
    pub placing_imports: BTreeMap<String, String>,
    /// Imported names that build a module frozen from the start: a project class that
    /// freezes its own parameters, or a function returning one.
    pub frozen_imports: BTreeSet<String>,
    /// Imported names that are `nn.Module` subclasses of the project whose `forward`
    /// returns detached values, with the positions (see [`FnSummary::detached_outputs`]).
    pub detached_forward_imports: BTreeMap<String, Vec<u32>>,
    /// Imported names that are project functions running a forward with grad on and
    /// not training (no backward, no `zero_grad`): a call of one is a forward.
    pub forward_imports: BTreeSet<String>,
    /// Method names that some `nn.Module` subclass of the project defines as running a
    /// forward, and that no project definition trains with: `vae.inference(n)`,
    /// `decoder.sample(features)`.
    /// One set for the whole project, shared by every file's facts.
    pub forward_methods: Arc<BTreeSet<String>>,
    /// Method names that a project `nn.Module` subclass runs a forward in and that some
    /// project method calls on `self`: steps of a larger routine of the model
    /// (`self.sample_latent(...)` from a generation loop), not entry points. Shared.
    pub model_steps: Arc<BTreeSet<String>>,
    /// Method names that a project `nn.Module` subclass defines asking for gradients
    /// or resetting them. Shared.
    pub training_methods: Arc<BTreeSet<String>>,
    /// Method names whose every project definition resets gradients (`zero_grad`, or
    /// writing each parameter's `.grad`): a call of one once per step resets. Shared.
    pub resetting_methods: Arc<BTreeSet<String>>,
    /// Method names that the classes of this file and of the project files it imports
    /// define running their forwards only under `no_grad` (some definition calls a
    /// module there, none runs one with grad on), or that a module class defines
    /// running no forward at all (`process_out`, a scale and shift): calling one
    /// records no graph.
    pub quiet_methods: BTreeSet<String>,
    /// Names of this file (its own functions, or imported ones) that are decorators
    /// disabling gradients in the functions they decorate (see
    /// [`FnSummary::no_grad_decorator`]).
    pub no_grad_decorators: BTreeSet<String>,
    /// Functions of this file (by [`FnSummary::name`], `factory()` for the closure a
    /// factory returns) that another file maps over data that is not for evaluation.
    pub mapped_functions: BTreeSet<String>,
    /// A file that trains imports this one: its data helpers are that training's
    /// data path.
    pub feeds_training: bool,
    /// Whether the file is PyTorch code, through its own imports or the project files
    /// it imports.
    pub torch: bool,
    /// Whether some file of the project runs on CUDA devices and some file saves
    /// checkpoints: what it saves may hold GPU tensors wherever it is loaded.
    pub project_cuda: bool,
    /// Whether some file of the project runs on CUDA devices: a trainer whose
    /// `self.device` a base class in another file picks puts its tensors there.
    pub project_gpu: bool,
    /// Whether some file of the project trains a model: its datasets feed training.
    pub project_trains: bool,
    /// Whether the project saves model weights, and always from the CPU.
    pub project_cpu_checkpoints: bool,
}

impl FileFacts {
    /// The hash that keys the file's cached findings along with its content.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }

    /// The facts a file is linted with before the project is joined: those of a
    /// project made of the file alone (its own imports, its own classes' methods).
    pub fn alone(path: &Path, summary: &FileSummary) -> FileFacts {
        let root = path.parent().unwrap_or(Path::new("/"));
        let index = ProjectIndex::join(root, vec![(path.to_path_buf(), summary.clone())]);
        index
            .facts
            .into_values()
            .next()
            .map(Arc::unwrap_or_clone)
            .unwrap_or_default()
    }
}

/// One question that the model of a file asks of its [`FileFacts`].
///
/// A file of the project is linted in the same pass that summarizes it, before the
/// summaries are joined, with facts guessed from the file alone ([`FileFacts::guess`]);
/// the model records every question it asks of them. Once the project is joined, that
/// lint stands if every recorded question has the same answer under the file's real
/// facts (the model is deterministic, so the lint would have come out the same), and the
/// file is linted again otherwise. The model reads the facts only through [`Facts`], so
/// no question goes unrecorded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FactQuery {
    Torch,
    ExternalCaller(String),
    DetachedImport(String),
    DetachedElements(String),
    DetachedMethod(String),
    ModuleImport(String),
    BackwardParams(String),
    ModuleParams(String),
    StateDictParams(String),
    ForwardImport(String),
    MappedFunction(String),
    FeedsTraining,
    ForwardMethod(String),
    ModelStep(String),
    TrainingMethod(String),
    ResettingMethod(String),
    ReturnedParam(String),
    PlacingImport(String),
    FrozenImport(String),
    QuietMethod(String),
    ProjectCuda,
    ProjectGpu,
    ProjectTrains,
    ProjectCpuCheckpoints,
    DetachedForward(String),
    TrainingCaller(String),
    NoGradDecorator(String),
}

/// The answer to a [`FactQuery`], to compare the guessed facts with the real ones.
#[derive(PartialEq, Eq, Debug)]
enum Answer<'f> {
    Bool(bool),
    Caller(Option<bool>),
    Params(Option<&'f [u32]>),
    Position(Option<u32>),
    Device(Option<&'f str>),
}

impl FactQuery {
    fn answer<'f>(&self, f: &'f FileFacts) -> Answer<'f> {
        match self {
            FactQuery::Torch => Answer::Bool(f.torch),
            FactQuery::ExternalCaller(n) => Answer::Caller(f.external_callers.get(n).copied()),
            FactQuery::TrainingCaller(n) => Answer::Bool(f.training_callers.contains(n)),
            FactQuery::DetachedImport(n) => Answer::Bool(f.detached_imports.contains(n)),
            FactQuery::DetachedElements(n) => {
                Answer::Params(f.detached_element_imports.get(n).map(Vec::as_slice))
            }
            FactQuery::DetachedMethod(n) => Answer::Bool(f.detached_methods.contains(n)),
            FactQuery::ModuleImport(n) => Answer::Bool(f.module_imports.contains(n)),
            FactQuery::BackwardParams(n) => {
                Answer::Params(f.backward_param_imports.get(n).map(Vec::as_slice))
            }
            FactQuery::ModuleParams(n) => {
                Answer::Params(f.module_param_imports.get(n).map(Vec::as_slice))
            }
            FactQuery::StateDictParams(n) => {
                Answer::Params(f.state_dict_param_imports.get(n).map(Vec::as_slice))
            }
            FactQuery::ForwardImport(n) => Answer::Bool(f.forward_imports.contains(n)),
            FactQuery::MappedFunction(n) => Answer::Bool(f.mapped_functions.contains(n)),
            FactQuery::FeedsTraining => Answer::Bool(f.feeds_training),
            FactQuery::ForwardMethod(n) => Answer::Bool(f.forward_methods.contains(n)),
            FactQuery::ModelStep(n) => Answer::Bool(f.model_steps.contains(n)),
            FactQuery::TrainingMethod(n) => Answer::Bool(f.training_methods.contains(n)),
            FactQuery::ResettingMethod(n) => Answer::Bool(f.resetting_methods.contains(n)),
            FactQuery::ReturnedParam(n) => {
                Answer::Position(f.param_returning_imports.get(n).copied())
            }
            FactQuery::PlacingImport(n) => {
                Answer::Device(f.placing_imports.get(n).map(String::as_str))
            }
            FactQuery::FrozenImport(n) => Answer::Bool(f.frozen_imports.contains(n)),
            FactQuery::NoGradDecorator(n) => Answer::Bool(f.no_grad_decorators.contains(n)),
            FactQuery::QuietMethod(n) => Answer::Bool(f.quiet_methods.contains(n)),
            FactQuery::ProjectCuda => Answer::Bool(f.project_cuda),
            FactQuery::ProjectGpu => Answer::Bool(f.project_gpu),
            FactQuery::ProjectTrains => Answer::Bool(f.project_trains),
            FactQuery::ProjectCpuCheckpoints => Answer::Bool(f.project_cpu_checkpoints),
            FactQuery::DetachedForward(n) => {
                Answer::Params(f.detached_forward_imports.get(n).map(Vec::as_slice))
            }
        }
    }

    /// Whether `a` and `b` answer this question alike.
    pub fn agrees(&self, a: &FileFacts, b: &FileFacts) -> bool {
        self.answer(a) == self.answer(b)
    }
}

/// The questions a model asked of its facts, when they are being recorded.
pub type FactLog = std::cell::RefCell<Option<rustc_hash::FxHashSet<FactQuery>>>;

/// A file's facts as the model reads them: one method per question, each recorded in
/// the model's log when it keeps one.
#[derive(Clone, Copy)]
pub struct Facts<'m> {
    facts: &'m FileFacts,
    log: &'m FactLog,
}

impl<'m> Facts<'m> {
    pub fn new(facts: &'m FileFacts, log: &'m FactLog) -> Self {
        Facts { facts, log }
    }

    fn ask(&self, q: impl FnOnce() -> FactQuery) {
        if let Some(log) = self.log.borrow_mut().as_mut() {
            log.insert(q());
        }
    }

    /// Whether the file is PyTorch code, through its own imports or the project files
    /// it imports.
    pub fn torch(&self) -> bool {
        self.ask(|| FactQuery::Torch);
        self.facts.torch
    }

    /// Whether another file backpropagates what this file's function `name` returns.
    pub fn training_caller(&self, name: &str) -> bool {
        self.ask(|| FactQuery::TrainingCaller(name.to_owned()));
        self.facts.training_callers.contains(name)
    }

    /// Whether every call of this file's function `name` from other files runs under
    /// `no_grad` (`None`: no other file calls it).
    pub fn external_caller(&self, name: &str) -> Option<bool> {
        self.ask(|| FactQuery::ExternalCaller(name.to_owned()));
        self.facts.external_callers.get(name).copied()
    }

    /// Whether the imported `name` is a project function returning a detached value.
    pub fn detached_import(&self, name: &str) -> bool {
        self.ask(|| FactQuery::DetachedImport(name.to_owned()));
        self.facts.detached_imports.contains(name)
    }

    /// The positions of the tuple that the imported project function `name` returns
    /// which carry no graph.
    pub fn detached_elements(&self, name: &str) -> Option<&'m [u32]> {
        self.ask(|| FactQuery::DetachedElements(name.to_owned()));
        self.facts
            .detached_element_imports
            .get(name)
            .map(Vec::as_slice)
    }

    /// Whether every project definition of the method `name` returns a detached value.
    pub fn detached_method(&self, name: &str) -> bool {
        self.ask(|| FactQuery::DetachedMethod(name.to_owned()));
        self.facts.detached_methods.contains(name)
    }

    /// The positions of the output of the imported project module class `name` that
    /// carry no graph (`u32::MAX`: the whole output).
    pub fn detached_forward(&self, name: &str) -> Option<&'m [u32]> {
        self.ask(|| FactQuery::DetachedForward(name.to_owned()));
        self.facts
            .detached_forward_imports
            .get(name)
            .map(Vec::as_slice)
    }

    /// Whether the imported `name` is an `nn.Module` subclass of the project.
    pub fn module_import(&self, name: &str) -> bool {
        self.ask(|| FactQuery::ModuleImport(name.to_owned()));
        self.facts.module_imports.contains(name)
    }

    /// The positions of the arguments that the imported project function `name`
    /// backpropagates.
    pub fn backward_params(&self, name: &str) -> Option<&'m [u32]> {
        self.ask(|| FactQuery::BackwardParams(name.to_owned()));
        self.facts
            .backward_param_imports
            .get(name)
            .map(Vec::as_slice)
    }

    /// The positions of the arguments that the imported project function `name` (or
    /// `module.function` of an imported project module) uses as modules.
    pub fn module_params(&self, name: &str) -> Option<&'m [u32]> {
        self.ask(|| FactQuery::ModuleParams(name.to_owned()));
        self.facts.module_param_imports.get(name).map(Vec::as_slice)
    }

    /// Positions of the arguments that the imported project function `name` loads as
    /// state dicts.
    pub fn state_dict_params(&self, name: &str) -> Option<&'m [u32]> {
        self.ask(|| FactQuery::StateDictParams(name.to_owned()));
        self.facts
            .state_dict_param_imports
            .get(name)
            .map(Vec::as_slice)
    }

    /// Whether the imported `name` is a project function running a forward with grad
    /// on and not training.
    pub fn forward_import(&self, name: &str) -> bool {
        self.ask(|| FactQuery::ForwardImport(name.to_owned()));
        self.facts.forward_imports.contains(name)
    }

    /// Whether some project module class runs a forward in its method `name`, and no
    /// project definition of it trains.
    pub fn forward_method(&self, name: &str) -> bool {
        self.ask(|| FactQuery::ForwardMethod(name.to_owned()));
        self.facts.forward_methods.contains(name)
    }

    /// Whether some project module class runs a forward in its method `name` and some
    /// project method calls it on `self`: a step of a larger routine of the model.
    pub fn model_step(&self, name: &str) -> bool {
        self.ask(|| FactQuery::ModelStep(name.to_owned()));
        self.facts.model_steps.contains(name)
    }

    /// Whether some project module class defines a method `name` that asks for
    /// gradients or resets them (`maml.finetunning(...)` adapting a copy with
    /// `torch.autograd.grad`): a call of it is training, not inference.
    pub fn training_method(&self, name: &str) -> bool {
        self.ask(|| FactQuery::TrainingMethod(name.to_owned()));
        self.facts.training_methods.contains(name)
    }

    /// Whether every project definition of the method `name` resets gradients.
    pub fn resetting_method(&self, name: &str) -> bool {
        self.ask(|| FactQuery::ResettingMethod(name.to_owned()));
        self.facts.resetting_methods.contains(name)
    }

    /// The position of the argument that the imported project function `name` hands
    /// back unchanged.
    pub fn returned_param(&self, name: &str) -> Option<u32> {
        self.ask(|| FactQuery::ReturnedParam(name.to_owned()));
        self.facts.param_returning_imports.get(name).copied()
    }

    /// Whether the project's classes define method `name` running forwards only under
    /// `no_grad`: a call of it records no graph.
    pub fn quiet_method(&self, name: &str) -> bool {
        self.ask(|| FactQuery::QuietMethod(name.to_owned()));
        self.facts.quiet_methods.contains(name)
    }

    /// Whether the imported name `name` builds a module frozen from the start.
    /// Whether `name` (a function of this file or an imported one) is a decorator
    /// that disables gradients in what it decorates.
    pub fn no_grad_decorator(&self, name: &str) -> bool {
        self.ask(|| FactQuery::NoGradDecorator(name.to_owned()));
        self.facts.no_grad_decorators.contains(name)
    }

    /// Whether another file maps this file's function `name` over data that is not
    /// for evaluation.
    pub fn mapped_function(&self, name: &str) -> bool {
        self.ask(|| FactQuery::MappedFunction(name.to_owned()));
        self.facts.mapped_functions.contains(name)
    }

    /// Whether a file of the project that trains imports this one.
    pub fn feeds_training(&self) -> bool {
        self.ask(|| FactQuery::FeedsTraining);
        self.facts.feeds_training
    }

    pub fn frozen_import(&self, name: &str) -> bool {
        self.ask(|| FactQuery::FrozenImport(name.to_owned()));
        self.facts.frozen_imports.contains(name)
    }

    /// Whether the project runs on CUDA devices and saves checkpoints.
    pub fn project_cuda(&self) -> bool {
        self.ask(|| FactQuery::ProjectCuda);
        self.facts.project_cuda
    }

    /// Whether some file of the project runs on CUDA devices.
    pub fn project_gpu(&self) -> bool {
        self.ask(|| FactQuery::ProjectGpu);
        self.facts.project_gpu
    }

    /// Whether every checkpoint of weights the project writes holds CPU tensors.
    pub fn project_cpu_checkpoints(&self) -> bool {
        self.ask(|| FactQuery::ProjectCpuCheckpoints);
        self.facts.project_cpu_checkpoints
    }

    /// Whether some file of the project trains a model.
    pub fn project_trains(&self) -> bool {
        self.ask(|| FactQuery::ProjectTrains);
        self.facts.project_trains
    }

    /// The device the imported project function `name` returns its model on.
    pub fn placing_import(&self, name: &str) -> Option<&'m str> {
        self.ask(|| FactQuery::PlacingImport(name.to_owned()));
        self.facts.placing_imports.get(name).map(String::as_str)
    }
}

/// Packages that make a file PyTorch code.
pub(crate) const TORCH_FAMILY: &[&str] = &[
    "torch",
    "torchvision",
    "torchaudio",
    "torchtext",
    "lightning",
    "pytorch_lightning",
    "transformers",
    "accelerate",
    "peft",
    "diffusers",
    "timm",
    "deepspeed",
    "trl",
    "fairseq",
    "apex",
];

/// Packages of the PyTorch family that serve other frameworks too (`TFAutoModel`,
/// `FlaxUNet2DConditionModel`): beside an import of one of those, they say nothing.
const MULTI_FRAMEWORK: &[&str] = &["transformers", "diffusers"];

/// Whether imports of these top-level packages make a file PyTorch code by themselves:
/// a PyTorch-only package, or a multi-framework one with no other framework beside it
/// (a TensorFlow script that imports `transformers` is TensorFlow code).
fn imports_torch<'s>(tops: impl Iterator<Item = &'s str> + Clone) -> bool {
    let foreign = tops.clone().any(|t| FOREIGN.contains(&t));
    tops.into_iter()
        .any(|t| TORCH_FAMILY.contains(&t) && (!foreign || !MULTI_FRAMEWORK.contains(&t)))
}

/// Other array frameworks.
pub(crate) const FOREIGN: &[&str] = &[
    "jax",
    "flax",
    "tensorflow",
    "keras",
    "optax",
    "haiku",
    "mxnet",
    "paddle",
    "mindspore",
    "oneflow",
    "megengine",
];

/// Libraries that carry no autograd graph: arrays, tables, plots, images, notebook
/// display, graphs of nodes, configuration files.
pub(crate) const PLAIN: &[&str] = &[
    "numpy",
    "matplotlib",
    "pandas",
    "scipy",
    "sklearn",
    "gym",
    "tqdm",
    "PIL",
    "cv2",
    "IPython",
    "ipywidgets",
    "seaborn",
    "plotly",
    "networkx",
    "sympy",
    "yaml",
    "h5py",
    "imageio",
    "skimage",
    "tabulate",
];

/// Whether a file with imports of these top-level packages (`.` for a relative import)
/// may be PyTorch code: it imports a PyTorch package, or imports no other array
/// framework and something beyond plain libraries (a project module, an unknown
/// package), or nothing at all.
pub fn maybe_torch<'s>(tops: impl Iterator<Item = &'s str> + Clone) -> bool {
    let torch = imports_torch(tops.clone());
    let (mut foreign, mut other, mut any) = (false, false, false);
    for t in tops {
        any = true;
        foreign |= FOREIGN.contains(&t);
        other |= !PLAIN.contains(&t)
            && !crate::stdlib::is_stdlib(t)
            && !TORCH_FAMILY.contains(&t)
            && !FOREIGN.contains(&t);
    }
    torch || (!foreign && (other || !any))
}

/// The closest folder above `path` (itself included, if a folder) holding
/// `pyproject.toml`, `setup.py` or `.git`.
pub fn project_root(path: &Path) -> Option<PathBuf> {
    let start = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()?.to_path_buf()
    };
    let start = std::fs::canonicalize(if start.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &start
    })
    .ok()?;
    start
        .ancestors()
        .find(|d| {
            ["pyproject.toml", "setup.py", ".git"]
                .iter()
                .any(|m| d.join(m).exists())
        })
        .map(Path::to_path_buf)
}

/// The summary of one file's source (`None` if it does not parse).
pub fn summarize(text: &str) -> Option<FileSummary> {
    let tree = parse(text)?;
    let model = SemanticModel::build(&tree, text);
    Some(summarize_model(&model))
}

fn parse(text: &str) -> Option<tree_sitter::Tree> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    parser.parse(text, None)
}

/// A file as the project index summarized it, for the lint to go on from.
pub struct Summarized<'a, 'm> {
    pub summary: &'a FileSummary,
    pub bytes: &'a [u8],
    /// The text the summary was computed from (invalid UTF-8 replaced).
    pub text: &'a str,
    /// The model the summary was computed from, without project facts; `None` when
    /// the file was summarized by its imports alone.
    pub model: Option<&'m mut SemanticModel<'a>>,
}

/// Whether a file's text can hold facts beyond its imports: PyTorch code, a grad-mode
/// switch, a detaching call. Other files (most of a large non-ML tree) are summarized
/// by their imports alone, without building their model.
fn needs_model(text: &str) -> bool {
    const NEEDLES: &[&str] = &[
        "torch",
        "lightning",
        "no_grad",
        "inference_mode",
        "grad_enabled",
        ".item()",
        ".detach()",
    ];
    NEEDLES
        .iter()
        .any(|n| memchr::memmem::find(text.as_bytes(), n.as_bytes()).is_some())
}

/// The summary of a file that [`needs_model`] rules out: its imports only, read from
/// the lines that start an `import` or `from ... import` statement (with their
/// parenthesized or backslash-continued names), without parsing the file.
fn summarize_imports(text: &str) -> FileSummary {
    let mut s = FileSummary {
        imports_only: true,
        ..Default::default()
    };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if !(t.starts_with("import ") || t.starts_with("from ")) {
            continue;
        }
        let mut stmt = t.split('#').next().unwrap_or("").to_owned();
        // Continuations: an open parenthesis or a trailing backslash.
        while (stmt.contains('(') && !stmt.contains(')')) || stmt.trim_end().ends_with('\\') {
            let Some(next) = lines.next() else { break };
            stmt = stmt.trim_end().trim_end_matches('\\').to_owned();
            stmt.push(' ');
            stmt.push_str(next.split('#').next().unwrap_or(""));
        }
        let stmt = stmt.replace(['(', ')'], " ");
        import_line(stmt.trim(), &mut s.imports);
    }
    finish_imports(&mut s);
    // A launcher with no PyTorch word (`trainer = RewardModelTrainer(...);
    // trainer.train()`) still trains: read from the text, as the model would.
    s.trains = [".backward(", "Trainer(", ".train("]
        .iter()
        .any(|n| memchr::memmem::find(text.as_bytes(), n.as_bytes()).is_some());
    s
}

/// One `import a.b as c, d` or `from m import x as y, z` (or `*`) statement.
fn import_line(stmt: &str, out: &mut Vec<ImportSummary>) {
    let names = |list: &str| -> Vec<(String, Option<String>)> {
        list.split(',')
            .filter_map(|part| {
                let mut w = part.split_whitespace();
                let name = w.next()?.to_owned();
                let alias = match (w.next(), w.next()) {
                    (Some("as"), Some(a)) => Some(a.to_owned()),
                    _ => None,
                };
                Some((name, alias))
            })
            .collect()
    };
    if let Some(rest) = stmt.strip_prefix("import ") {
        for (dotted, alias) in names(rest) {
            plain_import(&dotted, alias.as_deref(), out);
        }
    } else if let Some(rest) = stmt.strip_prefix("from ") {
        let Some((module, list)) = rest.split_once(" import ") else {
            return;
        };
        let module = module.trim().to_owned();
        if list.trim() == "*" {
            out.push(ImportSummary {
                local: "*".to_owned(),
                module,
                name: None,
            });
            return;
        }
        for (name, alias) in names(list) {
            out.push(ImportSummary {
                local: alias.unwrap_or_else(|| name.clone()),
                module: module.clone(),
                name: Some(name),
            });
        }
    }
}

/// The summary of one file's text: the model's facts when they may matter.
pub fn summarize_text(text: &str) -> Option<FileSummary> {
    if needs_model(text) {
        summarize(text)
    } else {
        Some(summarize_imports(text))
    }
}

/// The summary of a built model.
pub fn summarize_model(model: &SemanticModel<'_>) -> FileSummary {
    model.begin_summary();
    let mut s = FileSummary::default();
    // The builder enters every import outside plain strings; the summary keeps the
    // imports of ordinary code only (none inside a string, another import, or below an
    // anonymous node, which only error recovery makes). Reverse source order is the
    // order a depth-first stack visits them, which ties in `finish_imports` keep.
    for &n in model.import_nodes.iter().rev() {
        if summarised_import(n) {
            imports_of(model, n, &mut s.imports);
        }
    }
    finish_imports(&mut s);
    // Receivers the file treats as modules (`self.model.eval()`, `.cuda()`,
    // `.state_dict()`): calling one is a forward even where its value is not known
    // (`self.model = None` in `__init__`, the model assigned later from a loader).
    let mut handled: Vec<&str> = model
        .calls
        .iter()
        .filter_map(|c| match model.method_call(c) {
            Some((
                recv,
                "eval" | "train" | "cuda" | "state_dict" | "load_state_dict" | "parameters"
                | "named_parameters" | "zero_grad",
            )) => Some(model.text(recv)),
            _ => None,
        })
        .collect();
    handled.sort_unstable();
    handled.dedup();
    for (id, scope) in model.scopes.iter_enumerated() {
        if scope.kind == ScopeKind::Class
            && scope
                .parent
                .is_some_and(|p| model.scopes[p].kind == ScopeKind::Module)
            && model.is_module_class(id)
        {
            s.module_classes.push(scope.name.to_owned());
            if model.freezes_itself(id) {
                s.frozen_classes.push(scope.name.to_owned());
            }
        }
        let Some(name) = qualname(model, id) else {
            continue;
        };
        let calls = model.calls_of_function(Some(id));
        let runs_forward = calls.iter().any(|&c| {
            let call = &model.calls[c];
            model.value(call.node, call.site) == Value::Graph(Origin::Output)
        });
        // A body that runs all of its calls with gradients off (`@torch.no_grad()` on
        // the method, or one `with` around it) records no graph, whatever it calls: its
        // callers need not know that its receivers are modules.
        let disabled_body = !calls.is_empty()
            && calls
                .iter()
                .all(|&c| model.calls[c].site.grad == GradMode::Disabled);
        let no_grad_forward = disabled_body || runs_forward_under_no_grad(model, id, &handled, 2);
        // A property hands back what it reads (`self.rag.question_encoder`), which its
        // caller may call as a module.
        let property = scope.node.parent().is_some_and(|d| {
            let mut c = d.walk();
            d.kind_str() == "decorated_definition"
                && d.named_children(&mut c)
                    .any(|x| x.kind_str() == "decorator" && model.text(x).contains("property"))
        });
        let inert = !property
            && calls.iter().all(|&c| {
                let f = crate::semantic::unwrap_parens(model.calls[c].function);
                let t = model.text(f);
                model
                    .qualified(f)
                    .is_some_and(|q| q.is_torch() || matches!(q.first(), Some("math" | "numpy")))
                    || f.kind_str() == "identifier"
                        && (crate::semantic::names::is_detaching_builtin(t)
                            || crate::semantic::names::is_passthrough_builtin(t)
                            || matches!(
                                t,
                                "isinstance" | "range" | "print" | "tuple" | "list" | "dict"
                            ))
            });
        let wants_grad = calls.iter().any(|&c| {
            model.backward_at(c).is_some()
                || model.qualified(model.calls[c].function).is_some_and(|q| {
                    q.is_torch() && q.has_module("autograd") && q.last() == Some("grad")
                })
        });
        let resets_grads = calls.iter().any(|&c| model.grad_reset_here(c).is_some())
            || model.grad_attribute_assignments().iter().any(|&a| {
                model.resets_grad_by_store(a)
                    && model.function_of(model.assignments[a].site.scope) == Some(id)
            });
        // `return None` says nothing about what the other returns give (a factory that
        // returns `None` for a missing config and a module otherwise), as for same-file
        // callees in the model.
        let values: Vec<Value> = scope
            .returns
            .iter()
            .filter(|(e, _)| e.kind_str() != "none")
            .map(|&(e, site)| model.value(e, site))
            .collect();
        let returns_graph = values.iter().any(|v| {
            matches!(
                v,
                Value::Graph(_) | Value::Module | Value::LossFn | Value::Optimizer
            )
        });
        // Argument positions and returned parameters are asked of module-level
        // functions only: a method's positions shift with its receiver.
        let top_level = scope.class.is_none();
        s.functions.push(FnSummary {
            name,
            method: scope.class.is_some(),
            runs_forward,
            // Some `return` is known detached and none may carry a graph (a `return 0`
            // guard beside `return loss.item()`; a value the model cannot decide is no
            // evidence either way).
            returns_detached: values.contains(&Value::Detached) && !returns_graph,
            returns_graph,
            resets_grads,
            backward_params: if top_level {
                model.backward_params(id)
            } else {
                Vec::new()
            },
            module_params: if top_level {
                model.module_params(id)
            } else {
                Vec::new()
            },
            state_dict_params: if top_level {
                model.state_dict_params(id)
            } else {
                Vec::new()
            },
            wants_grad,
            returns_param: if top_level {
                model.returned_parameter(id)
            } else {
                None
            },
            returns_device: if top_level {
                model.returned_device(id)
            } else {
                None
            },
            returns_frozen: scope.class.is_none()
                && !scope.returns.is_empty()
                && scope
                    .returns
                    .iter()
                    .filter(|(e, _)| e.kind_str() != "none")
                    .all(|&(e, site)| model.frozen_module(e, site)),
            no_grad_forward,
            detached_outputs: match scope.class {
                // A forward that backpropagates (a meta-learning step) is a training
                // step: what it hands back is not offered (see `instance_forward`).
                Some(c)
                    if scope.name == "forward"
                        && model.is_module_class(c)
                        && !wants_grad
                        && !resets_grads =>
                {
                    model.detached_outputs(id)
                }
                _ => Vec::new(),
            },
            detached_elements: if top_level {
                let mut d = model.detached_outputs(id);
                d.retain(|&i| i != u32::MAX);
                d
            } else {
                Vec::new()
            },
            inert,
            no_grad_decorator: scope.class.is_none()
                && scope
                    .parent
                    .is_some_and(|p| model.scopes[p].kind == ScopeKind::Module)
                && names_only_no_grad(model, scope.node),
        });
    }
    let imported: HashMap<&str, ()> = s.imports.iter().map(|i| (i.local.as_str(), ())).collect();
    for call in &model.calls {
        let Some(mut target) =
            callee_locals(model, call.function, call.site, call.node.start_byte())
        else {
            continue;
        };
        // `validate = rvae.validater(loader); validate(...)`: calling a name bound to
        // what a project factory returned runs the closure that factory hands back.
        let mut factories = Vec::new();
        if call.function.kind_str() == "identifier" && !imported.contains_key(target.0[0]) {
            if let Some(b) = model.binding_of(call.function, call.site) {
                let at = call.node.start_byte();
                factories = model
                    .local_bindings(b.owner, b.name)
                    .filter(|b| b.kind == BindingKind::Assign && b.index.is_none() && b.pos <= at)
                    .filter_map(|b| b.value.map(crate::semantic::unwrap_parens))
                    .filter(|v| v.kind_str() == "call")
                    .filter_map(|v| {
                        callee_locals(model, v.child_by_field_name("function")?, call.site, at)
                    })
                    .collect();
            }
        }
        target.0.retain(|l| imported.contains_key(l));
        for f in &mut factories {
            f.0.retain(|l| imported.contains_key(l));
        }
        // A call in another framework's code says nothing of PyTorch's grad mode. (Asked
        // only of calls that reach the project: it walks up the tree.)
        if (target.0.is_empty() && factories.iter().all(|f| f.0.is_empty()))
            || model.foreign_framework_site(call.node)
        {
            continue;
        }
        let no_grad = model.grad_mode(call.site) == GradMode::Disabled;
        let trains = model.call_flows_into_backward(call.node);
        let targets = factories
            .into_iter()
            .map(|f| (f, true))
            .chain(std::iter::once((target, false)));
        for ((locals, attr), result) in targets {
            for local in locals {
                s.calls.push(CallSummary {
                    local: local.to_owned(),
                    attr: attr.clone(),
                    no_grad,
                    result,
                    trains: !result && trains,
                });
            }
        }
    }
    for (f, site) in model.mapped_callables() {
        let (callee, result) = match f.kind_str() {
            "call" => match f.child_by_field_name("function") {
                Some(c) => (c, true),
                None => continue,
            },
            _ => (f, false),
        };
        let Some((locals, attr)) = callee_locals(model, callee, site, f.start_byte()) else {
            continue;
        };
        for local in locals.into_iter().filter(|l| imported.contains_key(l)) {
            s.mapped.push(CallSummary {
                local: local.to_owned(),
                attr: attr.clone(),
                no_grad: false,
                result,
                trains: false,
            });
        }
    }
    for call in &model.calls {
        let Some((recv, m)) = model.method_call(call) else {
            continue;
        };
        let r = model.text(recv);
        // Only a name can be imported: hashing the text of a long receiver (a chain
        // of thousands of calls) for each of its links was quadratic.
        if m.starts_with("__") || recv.kind_str() == "identifier" && imported.contains_key(r) {
            continue;
        }
        let quiet = model.grad_mode(call.site) == GradMode::Disabled;
        // A call in another framework's code (a `_tensorflow_evaluator` beside the
        // PyTorch one) says nothing of PyTorch's grad mode.
        if !quiet && model.foreign_framework_site(call.node) {
            continue;
        }
        let own = matches!(r, "self" | "cls");
        if !own && !quiet && model.call_flows_into_backward(call.node) {
            s.trained_method_calls.insert(m.to_owned());
        }
        // With grad on inside a method: quiet when its host's every call is.
        let host = (!quiet)
            .then(|| model.function_of(call.site.scope))
            .flatten()
            .and_then(|f| qualname(model, f))
            .and_then(|q| q.split_once('.').map(|(_, h)| h.to_owned()))
            .filter(|h| h != m);
        if let Some(h) = host {
            s.hosted_method_calls
                .entry(m.to_owned())
                .or_default()
                .insert(h);
            continue;
        }
        let modes = if own {
            &mut s.self_method_calls
        } else {
            &mut s.method_calls
        };
        match modes.get_mut(m) {
            Some(q) => *q &= quiet,
            None => {
                modes.insert(m.to_owned(), quiet);
            }
        }
    }
    s.calls.sort_by(|a, b| {
        (&a.local, &a.attr, a.result, a.no_grad).cmp(&(&b.local, &b.attr, b.result, b.no_grad))
    });
    s.calls.dedup();
    s.self_calls = model
        .calls
        .iter()
        .filter_map(|c| {
            let f = crate::semantic::unwrap_parens(c.function);
            let o = f.child_by_field_name("object")?;
            (f.kind_str() == "attribute" && o.kind_str() == "identifier" && model.text(o) == "self")
                .then(|| {
                    f.child_by_field_name("attribute")
                        .map(|a| model.text(a).to_owned())
                })?
        })
        .collect();
    s.self_calls.sort_unstable();
    s.self_calls.dedup();
    s.cuda = model.runs_on_cuda();
    s.trains = model.trains();
    for id in model.calls.ids() {
        match model.saved_weights(id) {
            None => continue,
            Some(SavedWeights::Cpu) => s.cpu_weight_saves = true,
            Some(SavedWeights::Device) => s.device_weight_saves = true,
            Some(SavedWeights::NoWeights) => {}
        }
        s.saves = true;
    }
    s
}

/// Whether the function `def_node` is a decorator (factory) that names torch's
/// no-grad modes and nothing that enables gradients: it defines a wrapper or hands
/// back a call, and its body refers to `torch.no_grad` / `torch.inference_mode`.
fn names_only_no_grad(model: &SemanticModel<'_>, def_node: Node<'_>) -> bool {
    // Most functions name neither mode: a scan of their text spares the tree walk.
    let text = model.text(def_node);
    if !text.contains("no_grad") && !text.contains("inference_mode") {
        return false;
    }
    let Some(body) = def_node.field("body") else {
        return false;
    };
    let (mut no_grad, mut enables, mut wraps) = (false, false, false);
    let mut stack = vec![body];
    let mut budget = 4096;
    while let Some(n) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            return false;
        }
        match n.kind_str() {
            "function_definition" => wraps = true,
            "return_statement" => {
                wraps |= n
                    .named_child(0)
                    .is_some_and(|r| crate::semantic::unwrap_parens(r).kind_str() == "call")
            }
            "attribute" | "identifier" => {
                if let Some(q) = model.qualified(n) {
                    if q.is_torch() {
                        match q.last() {
                            Some("no_grad" | "inference_mode") => no_grad = true,
                            Some("enable_grad" | "set_grad_enabled") => enables = true,
                            _ => {}
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    no_grad && !enables && wraps
}

/// Method names that the classes of `files` define running no forward with grad on:
/// forwards only under `no_grad` (an agent's `select_action`), or, in a module class,
/// no call of anything but torch, math and builtins (`vae.process_out(latent)`, a
/// scale and shift).
fn quiet_methods<'s>(files: impl Iterator<Item = &'s FileSummary>) -> BTreeSet<String> {
    #[derive(Default)]
    struct Defs {
        no_grad_forward: bool,
        runs_forward: bool,
        in_module: bool,
        active: bool,
    }
    let mut defs: BTreeMap<&str, Defs> = BTreeMap::new();
    for qs in files {
        for g in qs.functions.iter().filter(|g| g.method) {
            let (class, m) = g.name.rsplit_once('.').unwrap_or(("", &g.name));
            let e = defs.entry(m).or_default();
            e.no_grad_forward |= g.no_grad_forward;
            e.runs_forward |= g.runs_forward;
            e.in_module |= qs.module_classes.iter().any(|c| c == class);
            e.active |= !g.inert;
        }
    }
    defs.into_iter()
        .filter(|(m, d)| {
            !d.runs_forward
                && (d.no_grad_forward || d.in_module && !d.active)
                && !m.starts_with("__")
                && !crate::semantic::names::FORWARD_METHODS.contains(m)
        })
        .map(|(m, _)| m.to_owned())
        .collect()
}

/// Whether function `f` runs a forward under `no_grad`: calls a module there, or a
/// same-file helper that calls one (`with torch.no_grad(): loss = self.run_model(x)`),
/// or, `depth` levels down, a same-file helper that does so itself (`do_predict`
/// calling `self.do_inference(...)`).
fn runs_forward_under_no_grad(
    model: &SemanticModel<'_>,
    f: ScopeId,
    handled: &[&str],
    depth: u32,
) -> bool {
    // Under no_grad a forward's value is detached: what is called tells it apart.
    let is_module = |call: &crate::semantic::Call<'_>| {
        model.value(call.function, call.site) == Value::Module
            || handled.binary_search(&model.text(call.function)).is_ok()
    };
    let calls_module = |g: ScopeId| {
        model.calls_of_function(Some(g)).iter().any(|&c| {
            let call = &model.calls[c];
            is_module(call) || model.value(call.node, call.site) == Value::Graph(Origin::Output)
        })
    };
    model.calls_of_function(Some(f)).iter().any(|&c| {
        let call = &model.calls[c];
        let callee = model.callee(c).filter(|&g| g != f);
        (call.site.grad == GradMode::Disabled
            && (is_module(call) || callee.is_some_and(calls_module)))
            || (depth > 0
                && callee.is_some_and(|g| runs_forward_under_no_grad(model, g, handled, depth - 1)))
    })
}

/// The names a call of `f` may reach, as other files define them: `local` for
/// `local(...)`, and for `obj.attr(...)` the receiver's name and each class it may be
/// built from before `at` (`gan = GAN(args); gan.visualize(...)`, `gan = CGAN(args)` in
/// another branch), with `attr`.
fn callee_locals<'s>(
    model: &SemanticModel<'s>,
    f: Node<'_>,
    site: crate::semantic::Site,
    at: usize,
) -> Option<(Vec<&'s str>, Option<String>)> {
    match f.kind_str() {
        "identifier" => Some((vec![model.text(f)], None)),
        "attribute" => {
            let o = f.child_by_field_name("object")?;
            let a = f.child_by_field_name("attribute")?;
            if o.kind_str() != "identifier" {
                return None;
            }
            let mut locals = vec![model.text(o)];
            if let Some(b) = model.binding_of(o, site) {
                locals.extend(
                    model
                        .local_bindings(b.owner, b.name)
                        .filter(|b| {
                            b.kind == BindingKind::Assign && b.index.is_none() && b.pos <= at
                        })
                        .filter_map(|b| {
                            b.value
                                .map(crate::semantic::unwrap_parens)
                                .filter(|v| v.kind_str() == "call")
                                .and_then(|v| v.child_by_field_name("function"))
                                .filter(|f| f.kind_str() == "identifier")
                                .map(|f| model.text(f))
                        }),
                );
            }
            Some((locals, Some(model.text(a).to_owned())))
        }
        _ => None,
    }
}

/// The name other files give the closure `f` that its enclosing function returns:
/// the enclosing function's [`qualname`] followed by `()` (`RVAE.validater()`).
pub fn closure_name(model: &SemanticModel<'_>, f: ScopeId) -> Option<String> {
    if !model.is_returned_closure(f) {
        return None;
    }
    Some(format!("{}()", qualname(model, model.scopes[f].parent?)?))
}

/// Whether an import the builder entered sits in ordinary code: every ancestor named,
/// none a string, comment or import. Imports are few and shallow, so the ancestor walk
/// costs less than a second walk of the tree.
fn summarised_import(n: Node<'_>) -> bool {
    let mut p = n.parent();
    while let Some(a) = p {
        if !a.is_named()
            || matches!(
                a.kind_str(),
                "import_statement" | "import_from_statement" | "string" | "comment"
            )
        {
            return false;
        }
        p = a.parent();
    }
    true
}

fn finish_imports(s: &mut FileSummary) {
    s.imports
        .sort_by(|a, b| (&a.local, &a.module).cmp(&(&b.local, &b.module)));
    let tops = s
        .imports
        .iter()
        .map(|i| i.module.split('.').next().unwrap_or(""));
    let (torch, foreign) = (
        imports_torch(tops.clone()),
        tops.clone().any(|t| FOREIGN.contains(&t)),
    );
    s.torch |= torch;
    s.foreign |= foreign;
}

/// `f` for a module-level function, `C.m` for a method of a module-level class.
pub fn qualname(model: &SemanticModel<'_>, f: ScopeId) -> Option<String> {
    let s = &model.scopes[f];
    if s.kind != ScopeKind::Function {
        return None;
    }
    let parent = &model.scopes[s.parent?];
    match parent.kind {
        ScopeKind::Module => Some(s.name.to_owned()),
        ScopeKind::Class
            if parent
                .parent
                .is_some_and(|p| model.scopes[p].kind == ScopeKind::Module) =>
        {
            Some(format!("{}.{}", parent.name, s.name))
        }
        _ => None,
    }
}

fn imports_of(model: &SemanticModel<'_>, node: Node<'_>, out: &mut Vec<ImportSummary>) {
    imports_of_text(model.source, node, out);
}

fn imports_of_text(source: &str, node: Node<'_>, out: &mut Vec<ImportSummary>) {
    let text = |n: Node<'_>| &source[n.byte_range()];
    let module = node.child_by_field_name("module_name").map(text);
    let mut c = node.walk();
    let names: Vec<Node<'_>> = node.children_by_field_name("name", &mut c).collect();
    let star = node.kind_str() == "import_from_statement" && names.is_empty();
    if star {
        if let Some(m) = module {
            out.push(ImportSummary {
                local: "*".to_owned(),
                module: m.to_owned(),
                name: None,
            });
        }
        return;
    }
    for n in names {
        let (dotted, alias) = match n.kind_str() {
            "aliased_import" => (
                n.child_by_field_name("name"),
                n.child_by_field_name("alias").map(text),
            ),
            _ => (Some(n), None),
        };
        let Some(dotted) = dotted else { continue };
        let dotted = text(dotted);
        match module {
            Some(m) => out.push(ImportSummary {
                local: alias.unwrap_or(dotted).to_owned(),
                module: m.to_owned(),
                name: Some(dotted.to_owned()),
            }),
            None => plain_import(dotted, alias, out),
        }
    }
}

/// What `import a.b` (or `import a.b as x`) binds: the alias, or else the top package
/// `a` and, for a submodule, its dotted path too, which is how its names are used
/// (`libs.clip.FrozenCLIPEmbedder()` after `import libs.clip`).
fn plain_import(dotted: &str, alias: Option<&str>, out: &mut Vec<ImportSummary>) {
    let head = dotted.split('.').next().unwrap_or(dotted);
    if alias.is_none() && dotted != head {
        out.push(ImportSummary {
            local: dotted.to_owned(),
            module: dotted.to_owned(),
            name: None,
        });
    }
    out.push(match alias {
        Some(a) => ImportSummary {
            local: a.to_owned(),
            module: dotted.to_owned(),
            name: None,
        },
        None => ImportSummary {
            local: head.to_owned(),
            module: head.to_owned(),
            name: None,
        },
    });
}

/// The project: every summarized file, and the facts each file gets.
#[derive(Default)]
pub struct ProjectIndex {
    facts: HashMap<PathBuf, Arc<FileFacts>>,
}

impl ProjectIndex {
    /// Summarizes `files` (absolute or relative to the working folder; all of one
    /// project under `root`) and joins the summaries. `summaries` serves and receives
    /// cached summaries by content.
    pub fn build(root: &Path, files: &[PathBuf], summaries: &dyn SummaryStore) -> ProjectIndex {
        Self::build_with(
            root,
            files,
            summaries,
            &|_: &Path, _: Summarized<'_, '_>| None::<()>,
        )
        .0
    }

    /// [`Self::build`], handing each file that is summarized afresh (not from the
    /// cache) to `visit` along with its text and, when it was built, its model: the
    /// lint of the file then reuses the parse and the model that its summary came
    /// from. What `visit` returns is kept by the file's path (canonical); the model
    /// and its tree are dropped as soon as `visit` returns, so no more than one per
    /// thread is alive at a time.
    pub fn build_with<T: Send>(
        root: &Path,
        files: &[PathBuf],
        summaries: &dyn SummaryStore,
        visit: &(dyn Fn(&Path, Summarized<'_, '_>) -> Option<T> + Sync),
    ) -> (ProjectIndex, Vec<(PathBuf, T)>) {
        let (notebooks, files): (Vec<&PathBuf>, Vec<&PathBuf>) = files
            .iter()
            .partition(|p| p.extension().is_some_and(|e| e == "ipynb"));
        // Notebooks are summarized from their code cells, and each `%%writefile name.py`
        // cell as the file it writes; they are linted later, with the joined facts.
        let written: Vec<(PathBuf, FileSummary)> = notebooks
            .par_iter()
            .flat_map_iter(|p| notebook_summaries(p))
            .collect();
        let mut summarized: Vec<(PathBuf, FileSummary, Option<T>)> = files
            .par_iter()
            .filter_map(|p| {
                // Regular files only, bounded: a FIFO or a device must not block or
                // fill memory (the lint stage reports them).
                let bytes =
                    crate::source::read_file(p, crate::source::DEFAULT_MAX_FILE_SIZE).ok()?;
                let key = content_key(&bytes);
                if let Some(s) = summaries.get(key) {
                    return Some((canon(p), s, None));
                }
                let path = canon(p);
                let text = String::from_utf8_lossy(&bytes);
                let (s, seen) = if needs_model(&text) {
                    let tree = catch_quietly(|| parse(&text)).ok().flatten()?;
                    let mut model = catch_quietly(|| SemanticModel::build(&tree, &text)).ok()?;
                    let s = catch_quietly(|| summarize_model(&model)).ok()?;
                    let seen = visit(
                        &path,
                        Summarized {
                            summary: &s,
                            bytes: &bytes,
                            text: &text,
                            model: Some(&mut model),
                        },
                    );
                    (s, seen)
                } else {
                    let s = catch_quietly(|| summarize_imports(&text)).ok()?;
                    let seen = visit(
                        &path,
                        Summarized {
                            summary: &s,
                            bytes: &bytes,
                            text: &text,
                            model: None,
                        },
                    );
                    (s, seen)
                };
                summaries.put(key, &s);
                Some((path, s, seen))
            })
            .collect();
        // A file on disk wins over a notebook cell that would write it.
        let on_disk: BTreeSet<PathBuf> = summarized.iter().map(|x| x.0.clone()).collect();
        for (p, s) in written {
            if !on_disk.contains(&p) {
                summarized.push((p, s, None));
            }
        }
        summarized.sort_by(|a, b| a.0.cmp(&b.0));
        summarized.dedup_by(|a, b| a.0 == b.0);
        let mut seen = Vec::new();
        let summarized = summarized
            .into_iter()
            .map(|(p, s, t)| {
                if let Some(t) = t {
                    seen.push((p.clone(), t));
                }
                (p, s)
            })
            .collect();
        (Self::join(root, summarized), seen)
    }

    /// Joins the summaries of one project's files into the facts of each.
    pub fn join(root: &Path, summarized: Vec<(PathBuf, FileSummary)>) -> ProjectIndex {
        let files: BTreeMap<PathBuf, FileSummary> = summarized.into_iter().collect();
        let root = canon(root);
        let resolver = Resolver {
            root: &root,
            files: &files,
            memo: Default::default(),
            modules: Default::default(),
        };
        // Whether each file is PyTorch code through its imports (a fixpoint).
        // Initially: a PyTorch import, or (the project's own modules left out: they are
        // decided by the fixpoint) imports that may be PyTorch.
        let mut torch: BTreeMap<&Path, bool> = files
            .iter()
            .map(|(p, s)| {
                let unresolved = s
                    .imports
                    .iter()
                    .filter(|i| resolver.module_file(p, &i.module).is_none())
                    .map(|i| i.module.split('.').next().unwrap_or("."))
                    .map(|t| if t.is_empty() { "." } else { t });
                let t = s.torch
                    || if s.imports.is_empty() {
                        !s.foreign
                    } else {
                        let v: Vec<&str> = unresolved.collect();
                        !v.is_empty() && maybe_torch(v.into_iter()) && !s.foreign
                    };
                (p.as_path(), t)
            })
            .collect();
        let deps: BTreeMap<&Path, Vec<PathBuf>> = files
            .iter()
            .map(|(p, s)| {
                // `from pkg import sub` depends on `pkg/sub.py` too, when that is a file.
                let d =
                    s.imports
                        .iter()
                        .flat_map(|i| {
                            let sub = i.name.as_ref().and_then(|n| {
                                resolver.module_file(p, &format!("{}.{n}", i.module))
                            });
                            resolver.module_file(p, &i.module).into_iter().chain(sub)
                        })
                        .collect();
                (p.as_path(), d)
            })
            .collect();
        loop {
            let mut changed = false;
            for (p, d) in &deps {
                if !torch[p] && !files[*p].foreign && d.iter().any(|q| torch[q.as_path()]) {
                    torch.insert(p, true);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // A helper module that a PyTorch file imports (the tokenization of a training
        // script in a `utils.py` that needs no torch import of its own) runs in that
        // PyTorch program. Decided after the fixpoint: a file importing such a helper
        // (a chapter of scikit-learn code sharing an environment check with the
        // PyTorch chapters) is not made PyTorch by it.
        for (p, d) in &deps {
            if !files[*p].torch {
                continue;
            }
            for q in d {
                if let Some((k, qs)) = files.get_key_value(q) {
                    if !qs.foreign {
                        torch.insert(k.as_path(), true);
                    }
                }
            }
        }
        // Cross-file callers of each function: (file, name) -> all under no_grad.
        let mut callers: BTreeMap<(PathBuf, String), bool> = BTreeMap::new();
        let mut trainers: BTreeSet<(PathBuf, String)> = BTreeSet::new();
        for (p, s) in &files {
            for call in &s.calls {
                let Some(target) = resolver.call_target(p, s, call) else {
                    continue;
                };
                if call.trains {
                    trainers.insert(target.clone());
                }
                let e = callers.entry(target).or_insert(true);
                *e &= call.no_grad;
            }
        }
        // Files that a training file imports, and the functions that such files or
        // training files map over data that is not for evaluation.
        let feeding: BTreeSet<&Path> = deps
            .iter()
            .filter(|(p, _)| files[**p].trains)
            .flat_map(|(_, d)| d.iter().map(PathBuf::as_path))
            .collect();
        let mapped: BTreeSet<(PathBuf, String)> = files
            .iter()
            .filter(|(p, s)| s.trains || feeding.contains(p.as_path()))
            .flat_map(|(p, s)| {
                s.mapped
                    .iter()
                    .filter_map(|m| resolver.call_target(p, s, m))
            })
            .collect();
        // A method whose receiver no summary resolves (`waveglow.infer(mel)` on a model
        // loaded from a checkpoint, `self.eval_step(batch)` in a base class that
        // subclasses in other files override) is called wherever a call of its name
        // is: when every such call in the project runs under no_grad, so do the
        // forwards of each of its definitions.
        let mut method_modes: BTreeMap<&str, bool> = BTreeMap::new();
        let mut hosts: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for s in files.values() {
            for (m, &quiet) in s.method_calls.iter().chain(&s.self_method_calls) {
                *method_modes.entry(m.as_str()).or_insert(true) &= quiet;
            }
            for (m, hs) in &s.hosted_method_calls {
                method_modes.entry(m.as_str()).or_insert(true);
                hosts
                    .entry(m.as_str())
                    .or_default()
                    .extend(hs.iter().map(String::as_str));
            }
        }
        // A hosted call is quiet once every call of its host is: grow the quiet set
        // until nothing changes (a host never called anywhere stays loud).
        let mut quiet_called: BTreeSet<&str> = method_modes
            .iter()
            .filter(|&(m, &q)| q && !hosts.contains_key(m))
            .map(|(m, _)| *m)
            .collect();
        loop {
            let grown: Vec<&str> = hosts
                .iter()
                .filter(|&(m, hs)| {
                    !quiet_called.contains(m)
                        && method_modes.get(m) == Some(&true)
                        && hs.iter().all(|h| quiet_called.contains(h))
                })
                .map(|(m, _)| *m)
                .collect();
            if grown.is_empty() {
                break;
            }
            quiet_called.extend(grown);
        }
        for (m, q) in method_modes.iter_mut() {
            *q = quiet_called.contains(m);
        }
        let mut definers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for s in files.values() {
            for g in s.functions.iter().filter(|g| g.method) {
                let m = g.name.rsplit('.').next().unwrap_or(&g.name);
                definers.entry(m).or_default().insert(g.name.as_str());
            }
        }
        // A method whose result some file backpropagates, on a receiver no summary
        // resolves, computes part of a loss wherever it is defined: PPO's
        // `evaluate_actions` is a training pass, whatever its name says.
        let trained: BTreeSet<&str> = files
            .values()
            .flat_map(|s| s.trained_method_calls.iter().map(String::as_str))
            .collect();
        for (p, s) in &files {
            for g in s.functions.iter().filter(|g| g.method) {
                let m = g.name.rsplit('.').next().unwrap_or(&g.name);
                if method_modes.get(m) == Some(&true) {
                    callers.entry((p.clone(), g.name.clone())).or_insert(true);
                }
                if trained.contains(m) {
                    trainers.insert((p.clone(), g.name.clone()));
                }
            }
        }
        // Method names whose every definition returns a detached value.
        let mut methods: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
        for s in files.values() {
            for f in s.functions.iter().filter(|f| f.method) {
                let m = f.name.rsplit('.').next().unwrap_or(&f.name);
                let e = methods.entry(m).or_insert((false, false));
                e.0 |= f.returns_detached;
                e.1 |= f.returns_graph;
            }
        }
        let detached_methods: BTreeSet<String> = methods
            .into_iter()
            .filter(|(m, (d, g))| *d && !*g && !crate::semantic::names::FORWARD_METHODS.contains(m))
            .map(|(m, _)| m.to_owned())
            .collect();
        // Method names whose every definition resets gradients.
        let mut resets: BTreeMap<&str, bool> = BTreeMap::new();
        for s in files.values() {
            for f in s.functions.iter().filter(|f| f.method) {
                let m = f.name.rsplit('.').next().unwrap_or(&f.name);
                *resets.entry(m).or_insert(true) &= f.resets_grads;
            }
        }
        let resetting_methods: Arc<BTreeSet<String>> = Arc::new(
            resets
                .into_iter()
                .filter(|&(_, r)| r)
                .map(|(m, _)| m.to_owned())
                .collect(),
        );
        // Method names that a project module class runs a forward in, none training.
        let mut fwd: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
        let mut training: BTreeSet<String> = BTreeSet::new();
        for s in files.values() {
            for f in s.functions.iter().filter(|f| f.method) {
                let Some((class, m)) = f.name.rsplit_once('.') else {
                    continue;
                };
                let e = fwd.entry(m).or_insert((false, false));
                let in_module = s.module_classes.iter().any(|c| c == class);
                e.0 |= f.runs_forward && in_module;
                e.1 |= f.wants_grad || f.resets_grads;
                if in_module && (f.wants_grad || f.resets_grads) {
                    training.insert(m.to_owned());
                }
            }
        }
        let fwd_defined: Vec<&str> = fwd
            .iter()
            .filter(|(_, (r, _))| *r)
            .map(|(m, _)| *m)
            .collect();
        let forward_methods: BTreeSet<String> = fwd
            .into_iter()
            .filter(|(m, (r, t))| {
                *r && !*t
                    && !crate::semantic::names::FORWARD_METHODS.contains(m)
                    && !crate::semantic::names::is_module_api_method(m)
                    && !m.starts_with("__")
            })
            .map(|(m, _)| m.to_owned())
            .collect();
        let self_called: BTreeSet<&str> = files
            .values()
            .flat_map(|s| s.self_calls.iter().map(String::as_str))
            .collect();
        let model_steps: BTreeSet<String> = fwd_defined
            .into_iter()
            .filter(|m| self_called.contains(m))
            .map(str::to_owned)
            .collect();
        // Shared, not copied per file: on a large project these sets hold thousands of
        // names, and a copy for each of thousands of files held gigabytes.
        let (detached_methods, forward_methods, model_steps, training_methods) = (
            Arc::new(detached_methods),
            Arc::new(forward_methods),
            Arc::new(model_steps),
            Arc::new(training),
        );
        // Checkpoints written by a project that runs on CUDA may hold GPU tensors; a
        // project that saves nothing loads weights made elsewhere (a model zoo's, a
        // conversion's), whose device it cannot know.
        let project_gpu = files.values().any(|s| s.cuda);
        let project_cuda = project_gpu && files.values().any(|s| s.saves);
        let project_trains = files.values().any(|s| s.trains);
        // The project's own save helper moves every tensor to the CPU (basicsr's
        // `save_network`), and nothing else it saves holds weights on the device.
        let project_cpu_checkpoints = files.values().any(|s| s.cpu_weight_saves)
            && !files.values().any(|s| s.device_weight_saves);
        let project_quiet = quiet_methods(files.values());
        let mut facts = HashMap::new();
        for (p, s) in &files {
            let mut f = FileFacts {
                torch: torch[p.as_path()],
                project_cuda,
                project_gpu,
                project_trains,
                project_cpu_checkpoints,
                detached_methods: detached_methods.clone(),
                forward_methods: forward_methods.clone(),
                model_steps: model_steps.clone(),
                training_methods: training_methods.clone(),
                resetting_methods: resetting_methods.clone(),
                ..Default::default()
            };
            // Methods that the classes this file can see (its own and those of the
            // project files it imports) define running no forward with grad on: a
            // repository's other scripts may reuse the name for an agent that does
            // not (a second algorithm's `select_action`). Those that every class of
            // the project defines so count wherever the model comes from (a trainer
            // handed a model whose every class decorates `recognize` with no_grad).
            let seen = std::iter::once(p).chain(deps[p.as_path()].iter());
            f.quiet_methods = quiet_methods(seen.filter_map(|q| files.get(q)));
            f.quiet_methods.extend(project_quiet.iter().cloned());
            f.feeds_training = feeding.contains(p.as_path());
            f.mapped_functions = mapped
                .range((p.clone(), String::new())..)
                .take_while(|(q, _)| q == p)
                .map(|(_, n)| n.clone())
                .collect();
            for func in s.functions.iter().filter(|g| g.no_grad_decorator) {
                f.no_grad_decorators.insert(func.name.clone());
            }
            for func in &s.functions {
                if let Some(&all) = callers.get(&(p.clone(), func.name.clone())) {
                    f.external_callers.insert(func.name.clone(), all);
                }
                if trainers.contains(&(p.clone(), func.name.clone())) {
                    f.training_callers.insert(func.name.clone());
                }
                // The closure this function returns, called where its result went.
                let result = format!("{}()", func.name);

                if let Some(&all) = callers.get(&(p.clone(), result.clone())) {
                    f.external_callers.insert(result, all);
                }
            }
            for i in &s.imports {
                let Some(name) = &i.name else {
                    // `import pkg.core as core`: its module classes, as `core.Net`;
                    // `from pkg.networks import *`: as `Net`.
                    if let Some(file) = resolver.module_file(p, &i.module) {
                        let qualify = |class: &String| {
                            if i.local == "*" {
                                class.clone()
                            } else {
                                format!("{}.{class}", i.local)
                            }
                        };
                        let ts = &files[&file];
                        f.module_imports
                            .extend(ts.module_classes.iter().map(qualify));
                        for g in ts.functions.iter().filter(|g| !g.method) {
                            if !g.module_params.is_empty() {
                                f.module_param_imports
                                    .insert(qualify(&g.name), g.module_params.clone());
                            }
                            if !g.state_dict_params.is_empty() {
                                f.state_dict_param_imports
                                    .insert(qualify(&g.name), g.state_dict_params.clone());
                            }
                            // `ptu.get_numpy(q)`: a helper of the imported module
                            // returning a detached value.
                            if g.returns_detached {
                                f.detached_imports.insert(qualify(&g.name));
                            }
                            if !g.detached_elements.is_empty() {
                                f.detached_element_imports
                                    .insert(qualify(&g.name), g.detached_elements.clone());
                            }
                        }
                        f.frozen_imports
                            .extend(ts.frozen_classes.iter().map(qualify));
                    }
                    continue;
                };
                let Some(file) = resolver.module_file(p, &i.module) else {
                    continue;
                };
                if let Some((tf, def)) = resolver.definition(&file, name) {
                    let ts = &files[&tf];
                    if ts
                        .functions
                        .iter()
                        .any(|g| g.name == def && g.returns_detached)
                    {
                        f.detached_imports.insert(i.local.clone());
                    }
                    if let Some(g) = ts
                        .functions
                        .iter()
                        .find(|g| g.name == def && !g.method && !g.detached_elements.is_empty())
                    {
                        f.detached_element_imports
                            .insert(i.local.clone(), g.detached_elements.clone());
                    }
                    if ts.functions.iter().any(|g| {
                        g.name == def
                            && !g.method
                            && g.runs_forward
                            && !g.wants_grad
                            && !g.resets_grads
                    }) {
                        f.forward_imports.insert(i.local.clone());
                    }
                    if ts.module_classes.contains(&def) {
                        f.module_imports.insert(i.local.clone());
                        let forward = format!("{def}.forward");
                        if let Some(g) = ts
                            .functions
                            .iter()
                            .find(|g| g.name == forward && !g.detached_outputs.is_empty())
                        {
                            f.detached_forward_imports
                                .insert(i.local.clone(), g.detached_outputs.clone());
                        }
                    }
                    if ts
                        .functions
                        .iter()
                        .any(|g| g.name == def && g.no_grad_decorator)
                    {
                        f.no_grad_decorators.insert(i.local.clone());
                    }
                    if ts.frozen_classes.contains(&def)
                        || ts
                            .functions
                            .iter()
                            .any(|g| g.name == def && !g.method && g.returns_frozen)
                    {
                        f.frozen_imports.insert(i.local.clone());
                    }
                    if let Some(k) = ts
                        .functions
                        .iter()
                        .find(|g| g.name == def && !g.method)
                        .and_then(|g| g.returns_param)
                    {
                        f.param_returning_imports.insert(i.local.clone(), k);
                    }
                    if let Some(d) = ts
                        .functions
                        .iter()
                        .find(|g| g.name == def && !g.method)
                        .and_then(|g| g.returns_device.clone())
                    {
                        f.placing_imports.insert(i.local.clone(), d);
                    }
                    if let Some(g) = ts
                        .functions
                        .iter()
                        .find(|g| g.name == def && !g.backward_params.is_empty())
                    {
                        f.backward_param_imports
                            .insert(i.local.clone(), g.backward_params.clone());
                    }
                    // The first module-level definition of the name that uses some
                    // arguments in that role.
                    let params = |role: fn(&FnSummary) -> &Vec<u32>| {
                        ts.functions
                            .iter()
                            .filter(|g| g.name == def && !g.method)
                            .map(role)
                            .find(|p| !p.is_empty())
                            .cloned()
                    };
                    if let Some(p) = params(|g| &g.module_params) {
                        f.module_param_imports.insert(i.local.clone(), p);
                    }
                    if let Some(p) = params(|g| &g.state_dict_params) {
                        f.state_dict_param_imports.insert(i.local.clone(), p);
                    }
                }
            }
            facts.insert(p.clone(), Arc::new(f));
        }
        ProjectIndex { facts }
    }

    /// The facts of the file at `path`, if it belongs to the project.
    pub fn facts_for(&self, path: &Path) -> Option<Arc<FileFacts>> {
        self.facts.get(&canon(path)).cloned()
    }

    pub fn len(&self) -> usize {
        self.facts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }
}

/// Several projects' indexes (a run may name files of more than one).
#[derive(Default)]
pub struct Projects(pub Vec<ProjectIndex>);

impl Projects {
    pub fn facts_for(&self, path: &Path) -> Option<Arc<FileFacts>> {
        self.0.iter().find_map(|p| p.facts_for(path))
    }
}

/// The summaries a notebook contributes: its code cells under its own path, and each
/// `%%writefile name.py` cell under the path it writes (beside the notebook).
fn notebook_summaries(p: &Path) -> Vec<(PathBuf, FileSummary)> {
    let Ok(bytes) = crate::source::read_file(p, crate::source::DEFAULT_MAX_FILE_SIZE) else {
        return Vec::new();
    };
    let raw = crate::source::SourceText::decode(&bytes).text;
    let Ok(nb) = crate::notebook::Notebook::parse(&raw) else {
        return Vec::new();
    };
    let path = canon(p);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out = Vec::new();
    if let Some(s) = catch_quietly(|| summarize_text(&nb.source)).ok().flatten() {
        out.push((path.clone(), s));
    }
    for w in &nb.written {
        let rel = Path::new(&w.name);
        // Only a plain relative path beside the notebook: no `..`, no absolute path.
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        if let Some(s) = catch_quietly(|| summarize_text(&w.text)).ok().flatten() {
            out.push((dir.join(rel), s));
        }
    }
    out
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

pub fn content_key(bytes: &[u8]) -> (u64, u64) {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    (h.finish(), bytes.len() as u64)
}

/// Where summaries are cached by content.
pub trait SummaryStore: Sync {
    fn get(&self, key: (u64, u64)) -> Option<FileSummary>;
    fn put(&self, key: (u64, u64), summary: &FileSummary);
}

/// No cache.
pub struct NoStore;

impl SummaryStore for NoStore {
    fn get(&self, _: (u64, u64)) -> Option<FileSummary> {
        None
    }
    fn put(&self, _: (u64, u64), _: &FileSummary) {}
}

/// A file and a name defined in it.
type Def = (PathBuf, String);

struct Resolver<'r> {
    root: &'r Path,
    files: &'r BTreeMap<PathBuf, FileSummary>,
    /// Answers of [`Resolver::definition`].
    memo: std::cell::RefCell<HashMap<Def, Option<Def>>>,
    /// Answers of [`Resolver::module_file`], by importing folder and module.
    modules: std::cell::RefCell<HashMap<PathBuf, HashMap<String, Option<PathBuf>>>>,
}

impl Resolver<'_> {
    /// The project file of `module` imported from `from`. Memoized by folder and
    /// module: every file of a package asks for the same few modules, and each miss
    /// costs several path lookups.
    fn module_file(&self, from: &Path, module: &str) -> Option<PathBuf> {
        let dir = from.parent()?;
        if let Some(hit) = self.modules.borrow().get(dir).and_then(|m| m.get(module)) {
            return hit.clone();
        }
        let found = self.find_module_file(from, module);
        self.modules
            .borrow_mut()
            .entry(dir.to_path_buf())
            .or_default()
            .insert(module.to_owned(), found.clone());
        found
    }

    fn find_module_file(&self, from: &Path, module: &str) -> Option<PathBuf> {
        let dots = module.chars().take_while(|&c| c == '.').count();
        let rest = &module[dots..];
        let dir = from.parent()?;
        let bases: Vec<PathBuf> = if dots > 0 {
            let mut b = dir.to_path_buf();
            for _ in 1..dots {
                b = b.parent()?.to_path_buf();
            }
            vec![b]
        } else {
            // The importing folder, then each folder above it inside the project: a
            // project vendored in a subfolder (`yolov5-master/classify/val.py` importing
            // `utils.general`) puts its own root on `sys.path`.
            let mut b: Vec<PathBuf> = dir
                .ancestors()
                .take_while(|a| a.starts_with(self.root) && *a != self.root)
                .map(Path::to_path_buf)
                .collect();
            b.push(self.root.to_path_buf());
            b.push(self.root.join("src"));
            b
        };
        for base in bases {
            let mut p = base;
            for seg in rest.split('.').filter(|s| !s.is_empty()) {
                p.push(seg);
            }
            let file = p.with_extension("py");
            if self.files.contains_key(&file) {
                return Some(file);
            }
            let init = p.join("__init__.py");
            if self.files.contains_key(&init) {
                return Some(init);
            }
        }
        None
    }

    /// Where `name` of the module file `file` is defined: the file and the function or
    /// class name there, through re-exports (`from .utils import *`). Memoized; each
    /// query visits a file at most once.
    fn definition(&self, file: &Path, name: &str) -> Option<(PathBuf, String)> {
        let key = (file.to_path_buf(), name.to_owned());
        if let Some(hit) = self.memo.borrow().get(&key) {
            return hit.clone();
        }
        let mut seen = std::collections::HashSet::new();
        let found = self.definition_in(file, name, true, &mut seen);
        self.memo.borrow_mut().insert(key, found.clone());
        found
    }

    /// `named`: `name` was imported from `file` by name, so a file summarized from its
    /// imports alone defines it; not so for a name looked for through `import *`.
    fn definition_in(
        &self,
        file: &Path,
        name: &str,
        named: bool,
        seen: &mut std::collections::HashSet<(PathBuf, String)>,
    ) -> Option<(PathBuf, String)> {
        if seen.len() > 256 || !seen.insert((file.to_path_buf(), name.to_owned())) {
            return None;
        }
        let s = self.files.get(file)?;
        // A function, a module class, or any class with methods (`C.m`).
        let is_class = |f: &FnSummary| {
            f.method
                && f.name
                    .strip_prefix(name)
                    .is_some_and(|r| r.starts_with('.'))
        };
        if s.functions.iter().any(|f| f.name == name || is_class(f))
            || s.module_classes.iter().any(|c| c == name)
        {
            return Some((file.to_path_buf(), name.to_owned()));
        }
        for i in &s.imports {
            if i.local == name {
                if let Some(n) = &i.name {
                    let f = self.module_file(file, &i.module)?;
                    return self.definition_in(&f, n, true, seen);
                }
            }
        }
        // A helper module with no PyTorch word (tokenization in a `utils.py`) defines
        // what it does not import; its summary lists no functions.
        // A package's `__init__.py` does not define the submodule of that name.
        let submodule = file.file_name().is_some_and(|n| n == "__init__.py")
            && file.parent().is_some_and(|d| {
                self.files.contains_key(&d.join(format!("{name}.py")))
                    || self.files.contains_key(&d.join(name).join("__init__.py"))
            });
        if s.imports_only
            && named
            && !submodule
            && !s.imports.iter().any(|i| i.local == name || i.local == "*")
        {
            return Some((file.to_path_buf(), name.to_owned()));
        }
        for i in s.imports.iter().filter(|i| i.local == "*") {
            if let Some(f) = self.module_file(file, &i.module) {
                if let Some(d) = self.definition_in(&f, name, false, seen) {
                    return Some(d);
                }
            }
        }
        None
    }

    /// The (file, function name) a call of an imported name reaches.
    fn call_target(
        &self,
        from: &Path,
        s: &FileSummary,
        call: &CallSummary,
    ) -> Option<(PathBuf, String)> {
        let (file, name) = self.callee(from, s, call)?;
        Some(if call.result {
            (file, format!("{name}()"))
        } else {
            (file, name)
        })
    }

    fn callee(
        &self,
        from: &Path,
        s: &FileSummary,
        call: &CallSummary,
    ) -> Option<(PathBuf, String)> {
        let import = s.imports.iter().find(|i| i.local == call.local)?;
        match (&import.name, &call.attr) {
            // `from m import f; f()` or `from m import C; C.m()` (rare) or a submodule.
            (Some(n), attr) => {
                let file = self.module_file(from, &import.module)?;
                if let Some((tf, def)) = self.definition(&file, n) {
                    return match attr {
                        None => Some((tf, def)),
                        Some(a) => Some((tf, format!("{def}.{a}"))),
                    };
                }
                // `from pkg import utils; utils.f()`
                let sub = self.module_file(from, &format!("{}.{}", import.module, n))?;
                self.definition(&sub, attr.as_deref()?)
            }
            // `import m as u; u.f()`
            (None, Some(a)) => {
                let file = self.module_file(from, &import.module)?;
                self.definition(&file, a)
            }
            (None, None) => None,
        }
    }
}
