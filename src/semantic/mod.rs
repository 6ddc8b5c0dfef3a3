//! The semantic model: the facts about one file that every rule asks for, computed
//! in one iterative pass over the syntax tree (`builder`) plus lazy, memoized
//! queries, split by concern:
//!
//! - [`ids`]: typed indices (`ScopeId`, `LoopId`, `CallId`, `BindingId`, `AssignId`)
//!   and the `IndexVec` they index;
//! - `syntax`: node helpers, import-resolved dotted names, call arguments, the call
//!   index by node;
//! - `scopes`: module, classes, functions; enclosing function and class; module
//!   classes; name bindings;
//! - `iteration`: loops and per-step hooks, what runs once per step (through same-file
//!   calls), step loops, values that live across iterations;
//! - `grad`: grad mode at every fact (`torch.no_grad()` and friends, decorators,
//!   Lightning hooks, functions only ever called under no_grad);
//! - `provenance`: value provenance (graph-carrying, detached, module, optimizer...)
//!   from bindings, and the names that flow into a backward pass;
//! - [`optim`]: backward passes, optimizer steps, stores to `.grad`;
//! - `device`: model outputs left on the accelerator, containers concatenated after a loop;
//! - `loading`: `from_pretrained` loads and their dtype, `torch.load` and `map_location`,
//!   CUDA and XLA use;
//! - `passes`: passes over a graph (`backward`, `autograd.grad`), `retain_graph`, which follow which;
//! - [`state`]: dtype and device of models before a conversion;
//! - `flow`: dominance and complete `if`/`else` chains;
//! - `uses`: how a stored value is used later (only as a number? only summed?), whether
//!   a value is a scalar, whether a function's outputs can reach a backward: the facts
//!   that make a fix safe;
//! - `edits`: the syntax of fixes: statements, indentation, how the file spells `torch`;
//! - [`names`]: the vocabulary (method lists shared with the prefilter, name heuristics).

mod builder;
mod device;
mod edits;
mod flow;
mod grad;
pub mod ids;
mod iteration;
mod loading;
pub mod names;
pub mod optim;
mod passes;
mod provenance;
mod raw;
pub use optim::GradReset;
pub use provenance::AppendedParameter;
mod scopes;
pub mod state;
mod syntax;
mod uses;

use std::cell::{Cell, OnceCell, RefCell};
use std::ops::Range;

use rustc_hash::{FxHashMap, FxHashSet};
/// Syntax nodes, re-exported so that rules need no import but the model's.
pub use tree_sitter::Node;
use tree_sitter::Tree;

pub use names::QualName;
pub use syntax::{unwrap_parens, NodeExt};

pub use ids::{AssignId, BindingId, CallId, Idx, IndexVec, LoopId, ScopeId};
pub use loading::{LoadDType, MapLocation, PretrainedLoad, SavedWeights, TorchLoad};
pub use passes::GraphPass;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    Lambda,
}

#[derive(Debug)]
pub struct Scope<'a> {
    pub kind: ScopeKind,
    pub name: &'a str,
    pub node: Node<'a>,
    pub parent: Option<ScopeId>,
    /// Base class expressions of a class.
    pub bases: Vec<Node<'a>>,
    /// For a method: the class it is defined in.
    pub class: Option<ScopeId>,
    /// Parameter names, in order (`self` included).
    pub params: Vec<&'a str>,
    /// Expressions of `return` statements, with where they stand.
    pub returns: Vec<(Node<'a>, Site)>,
}

impl Scope<'_> {
    pub fn is_function(&self) -> bool {
        matches!(self.kind, ScopeKind::Function | ScopeKind::Lambda)
    }
    /// The name of the receiver parameter of a method (`self` by convention).
    pub fn self_param(&self) -> Option<&str> {
        self.class.and(self.params.first().copied())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    For,
    While,
}

#[derive(Debug)]
pub struct Loop<'a> {
    pub kind: LoopKind,
    pub node: Node<'a>,
    /// The block that runs once per iteration.
    pub body: Node<'a>,
    /// The iterable of a `for` loop.
    pub iter: Option<Node<'a>>,
    pub scope: ScopeId,
    /// The enclosing loop in the same scope.
    pub parent: Option<LoopId>,
}

/// Grad mode as written around a fact. `Default` means nothing in the function says:
/// the mode then comes from the callers (see [`SemanticModel::grad_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradMode {
    Default,
    Enabled,
    Disabled,
    /// `torch.set_grad_enabled(flag)` with a flag not known statically.
    Unknown,
}

/// Where a fact sits: its scope, its innermost loop in that scope, and the grad mode written around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub scope: ScopeId,
    pub loop_: Option<LoopId>,
    pub grad: GradMode,
}

#[derive(Debug)]
pub struct Call<'a> {
    pub node: Node<'a>,
    pub function: Node<'a>,
    pub arguments: Option<Node<'a>>,
    pub site: Site,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp<'a> {
    /// `x = v`
    Plain,
    /// `x += v`, with the operator (`+=`).
    Augmented(&'a str),
}

/// An assignment statement: the facts rules need about stores (`d[k] = v`, `t += v`).
#[derive(Debug)]
pub struct Assignment<'a> {
    pub node: Node<'a>,
    pub target: Node<'a>,
    pub value: Node<'a>,
    pub op: AssignOp<'a>,
    pub site: Site,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// `x = v` (or element `index` of an unpacking `a, b = v`).
    Assign,
    /// `x += v`: the new value combines the previous one with `v`.
    Augmented,
    /// Target of a `for` loop or comprehension.
    ForTarget,
    /// `with ... as x`.
    WithAs,
    Parameter,
    Import,
    Definition,
    /// `global x` / `nonlocal x` in a function: the name lives elsewhere.
    Global,
}

/// What a name (a local, or a `self.` attribute of a class) is bound to at one place.
#[derive(Debug)]
pub struct Binding<'a> {
    pub kind: BindingKind,
    pub name: &'a str,
    /// The bound value (the right-hand side, the iterable, the context manager).
    pub value: Option<Node<'a>>,
    /// Position in an unpacking target (`a, b = ...`).
    pub index: Option<u32>,
    /// Byte offset from which the binding is visible.
    pub pos: usize,
    pub site: Site,
    /// The scope the name is bound in (the class, for a `self.` attribute).
    pub owner: ScopeId,
}

/// A key for names: a local of a scope, or an attribute of `self` in a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKey<'a> {
    Local(ScopeId, &'a str),
    Attr(ScopeId, &'a str),
}

/// A backward pass, and the expression it backpropagates.
#[derive(Debug)]
pub struct Backward<'a> {
    pub call: CallId,
    pub loss: Node<'a>,
    /// `dist_autograd.backward(context_id, [loss])`: the gradients go to the
    /// distributed-autograd context of the iteration, not to `.grad`.
    pub distributed: bool,
}

pub use crate::pattern::Origin;

/// The provenance of an expression's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A tensor that still carries its autograd graph.
    Graph(Origin),
    /// Known to carry no graph (a Python number, a detached tensor, an index).
    Detached,
    /// An `nn.Module`.
    Module,
    /// A loss module or loss function object (`nn.CrossEntropyLoss()`).
    LossFn,
    Optimizer,
    /// An instance of a class defined in this file.
    Instance(ScopeId),
    Unknown,
}

/// A unit of repetition: a loop body, or a method that frameworks call once per step.
/// What runs "per iteration" of a unit includes the same-file functions it calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Loop(LoopId),
    Hook(ScopeId),
}

/// Why code runs once per training (or evaluation) step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iteration {
    /// In the body of this loop.
    Loop(LoopId),
    /// In a function called from a loop body or a per-step hook (same file).
    Called,
    /// In a method that frameworks call once per step (`training_step`, `compute_loss`).
    Hook,
}

pub struct SemanticModel<'a> {
    pub source: &'a str,
    pub root: Node<'a>,
    pub scopes: IndexVec<ScopeId, Scope<'a>>,
    pub loops: IndexVec<LoopId, Loop<'a>>,
    pub calls: IndexVec<CallId, Call<'a>>,
    pub assignments: IndexVec<AssignId, Assignment<'a>>,
    pub bindings: IndexVec<BindingId, Binding<'a>>,
    pub backwards: Vec<Backward<'a>>,
    /// Every comment, in source order (for suppressions and fixture markers).
    pub comments: Vec<Node<'a>>,
    /// Every import statement the builder entered, in source order, so the project
    /// summary reads them without walking the tree a second time.
    pub import_nodes: Vec<Node<'a>>,
    /// Whether a string of the code (no docstring, not inside another string) names a
    /// CUDA device: found by the builder's walk ([`Self::is_cuda_string`]).
    pub cuda_string: bool,
    /// The first syntax error (an ERROR or MISSING node), as a byte offset.
    pub first_syntax_error: Option<usize>,
    names: FxHashMap<NameKey<'a>, Vec<BindingId>>,
    /// The plain-assignment bindings of `names`, in the same order.
    assigns: FxHashMap<NameKey<'a>, Vec<BindingId>>,
    imports: FxHashMap<&'a str, QualName<'a>>,
    /// Functions (by name) per defining scope.
    functions: FxHashMap<(ScopeId, &'a str), ScopeId>,
    classes: FxHashMap<&'a str, ScopeId>,
    /// Resolved same-file callee of each call.
    callees: IndexVec<CallId, Option<ScopeId>>,
    /// Call by syntax node id: chained calls (`x.float().float()`) share a start byte,
    /// so a search by position alone is linear in the chain.
    call_ids: FxHashMap<usize, CallId>,
    /// Names backpropagated directly (`name.backward()`), per enclosing function.
    backward_receivers: FxHashSet<(Option<ScopeId>, &'a str)>,
    /// Names that a method only modules have is called on (`net.eval()`,
    /// `net.parameters()`), per enclosing function: a parameter or an opaque local used
    /// so is a module whatever it is called.
    module_receivers: FxHashSet<(Option<ScopeId>, &'a str)>,
    /// Calls that resolve to each function scope.
    callers: IndexVec<ScopeId, Vec<CallId>>,
    /// Functions reachable (same file) from each loop's body.
    loop_callees: IndexVec<LoopId, Vec<ScopeId>>,
    /// Per-step hooks, with the functions reachable from each.
    hook_callees: Vec<(ScopeId, Vec<ScopeId>)>,
    /// Calls made in each function (its nested blocks and loops included).
    calls_by_function: IndexVec<ScopeId, Vec<CallId>>,
    memo: Memos<'a>,
    /// What the rest of the project says about this file ([`crate::project`]).
    project: Option<std::sync::Arc<crate::project::FileFacts>>,
    /// The questions asked of `project`, while they are recorded.
    fact_log: crate::project::FactLog,
}

/// The memo tables of the lazy queries; cells, so that the model is shared immutably.
#[derive(Default)]
struct Memos<'a> {
    /// Whether each scope runs once per step through calls from step loops or hooks,
    /// and whether through step loops.
    iterated: OnceCell<(IndexVec<ScopeId, bool>, IndexVec<ScopeId, bool>)>,
    step_loops: RefCell<IndexVec<LoopId, Option<bool>>>,
    /// Assignments to `.grad`/`.requires_grad` attributes.
    grad_stores: OnceCell<Vec<AssignId>>,
    /// Whether the file creates no tensor that requires grad ([`grad`]).
    no_grad_leaf: OnceCell<bool>,
    /// Whether some call of the file runs a value known as a module.
    /// (`None`: not asked yet; `Some(None)`: being decided.)
    calls_module: Cell<Option<Option<bool>>>,
    /// Set while the file's summary for the project is made: what a function returns
    /// is then told to other files whose calls are not known yet.
    summarizing: Cell<bool>,
    /// Bindings of tensors made trainable by hand ([`raw`]).
    raw_trainable: OnceCell<FxHashSet<BindingId>>,
    /// Whether a binding's value computes on one.
    raw_bindings: RefCell<FxHashMap<BindingId, bool>>,
    /// Calls `self.requires_grad_(...)`.
    self_grad_toggles: OnceCell<Vec<CallId>>,
    /// Calls `x.requires_grad_(...)` on any receiver.
    grad_toggles: OnceCell<Vec<CallId>>,
    /// Conversion calls (`.to(...)`, `.half()`) by receiver.
    conversions: OnceCell<FxHashMap<NameKey<'a>, state::ConversionsOf>>,
    /// Names and bindings that flow into a backward pass.
    backward_flow: OnceCell<provenance::BackwardFlow<'a>>,
    /// Bindings whose value is read by `.numpy()` without a detach.
    numpy_reads: OnceCell<FxHashSet<BindingId>>,
    /// Modules known by what is done with them beyond [`SemanticModel::module_receivers`]
    /// (see [`SemanticModel::module_args`]): names per function, `self.` attributes
    /// per class.
    module_args: OnceCell<provenance::ModuleArgs<'a>>,
    /// `self.` attributes, per class, that some method of the class freezes and none
    /// thaws ([`SemanticModel::frozen_attribute`]).
    frozen_attrs: OnceCell<FxHashSet<(ScopeId, &'a str)>>,
    /// What is grown into each container (`xs.append(v)`): by the binding a local
    /// container resolves to, by key for a `self.` attribute.
    grown: OnceCell<provenance::Grown<'a>>,
    binding_values: RefCell<IndexVec<BindingId, Memo>>,
    /// For calls evaluated at their own site: a chain of 100,000 `.float()` calls is
    /// then evaluated once, not once per link and level.
    call_values: RefCell<IndexVec<CallId, Memo>>,
    /// By (function, element index or `u32::MAX` for the whole value).
    return_values: RefCell<FxHashMap<(ScopeId, u32), Memo>>,
    scope_grad: RefCell<IndexVec<ScopeId, Option<GradMode>>>,
    /// Methods that grow a list held on `self` by one of their parameters.
    appended_params: OnceCell<FxHashMap<ScopeId, provenance::AppendedParameter<'a>>>,
    /// Methods (functions of a class body) by name.
    methods_by_name: OnceCell<FxHashMap<&'a str, Vec<ScopeId>>>,
    /// Every identifier node of the file by its text, in source order.
    identifiers: OnceCell<FxHashMap<&'a str, Vec<Node<'a>>>>,
    depth_exceeded: Cell<bool>,
    /// The names and `self.` attributes each function or class mentions, by the node
    /// id of that scope (one walk per scope, for every fix that asks how a name is used).
    mentions: RefCell<FxHashMap<usize, std::rc::Rc<uses::Mentions<'a>>>>,
    /// Answers of `read_only_as_number` / `container_only_reduced`, by scope node id,
    /// receiver (`""` for a local), name and query.
    use_answers: RefCell<FxHashMap<UseKey<'a>, bool>>,
    /// (function, text) of what is backpropagated with a bare `.backward()`.
    bare_backwards: OnceCell<FxHashSet<(Option<ScopeId>, &'a str)>>,
    /// Functions with a backward pass in them (or in functions nested in them).
    backward_functions: OnceCell<FxHashSet<ScopeId>>,
    /// Functions whose own body asks for gradients, directly or through same-file
    /// functions it calls (see `SemanticModel::asks_for_grad_fn`).
    grad_functions: OnceCell<FxHashSet<ScopeId>>,
    /// Assignments by enclosing function.
    assigns_by_function: OnceCell<FxHashMap<Option<ScopeId>, Vec<AssignId>>>,
    /// The file's indentation unit where no block near a fix says.
    indent_unit: OnceCell<String>,
    /// How the file spells `torch.<attr>`, by attr.
    torch_spelling: RefCell<FxHashMap<String, Option<String>>>,
}

/// A use query: scope node id, receiver (`""` for a local), name, which query.
type UseKey<'a> = (usize, &'a str, &'a str, u8);

impl<'a> Memos<'a> {
    /// Empty memo tables for the facts of `m`.
    fn sized(m: &SemanticModel<'a>) -> Self {
        Memos {
            step_loops: RefCell::new(IndexVec::from_elem(None, m.loops.len())),
            binding_values: RefCell::new(IndexVec::from_elem(Memo::Todo, m.bindings.len())),
            call_values: RefCell::new(IndexVec::from_elem(Memo::Todo, m.calls.len())),
            scope_grad: RefCell::new(IndexVec::from_elem(None, m.scopes.len())),
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memo {
    Todo,
    InProgress,
    Done(Value),
}

impl<'a> SemanticModel<'a> {
    /// Builds the model of one parsed file in a single iterative pass.
    pub fn build(tree: &'a Tree, source: &'a str) -> Self {
        builder::build(tree, source)
    }

    /// Gives the model the facts of the rest of the project. Answers computed before
    /// (the file's summary is computed from the same model, without facts) are
    /// forgotten.
    pub fn set_project(&mut self, facts: std::sync::Arc<crate::project::FileFacts>) {
        self.memo = Memos::sized(self);
        self.project = Some(facts);
    }

    /// Marks the model as making the file's project summary (see
    /// [`SemanticModel::set_project`], which ends that).
    pub fn begin_summary(&self) {
        self.memo.summarizing.set(true);
    }

    /// Starts recording every question asked of the project facts
    /// ([`crate::project::FactQuery`]).
    pub fn record_fact_queries(&mut self) {
        *self.fact_log.get_mut() = Some(FxHashSet::default());
    }

    /// The questions recorded since [`Self::record_fact_queries`].
    pub fn fact_queries(&self) -> Vec<crate::project::FactQuery> {
        self.fact_log
            .borrow()
            .as_ref()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The project facts of this file, if the file was linted as part of a project.
    pub fn project(&self) -> Option<crate::project::Facts<'_>> {
        self.project
            .as_deref()
            .map(|f| crate::project::Facts::new(f, &self.fact_log))
    }
}
