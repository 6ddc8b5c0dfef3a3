use crate::prelude::*;
use crate::semantic::NodeExt;
use crate::semantic::{CallId, GradMode, LoopId, unwrap_parens, Node, ScopeId, Site};

declare_rule! {
    /// ## What it does
    /// Flags evaluation and inference code that runs the model with autograd on: a
    /// function named for evaluation (`evaluate`, `validate`, `predict*`, `infer*`; `test*`
    /// only with a second signal such as a loop over data) or for inference (`generate*`,
    /// `sample*`, `visualize*`, `translate`), the code after `model.eval()`, a loop over an
    /// evaluation loader (`val_loader`, `self.test_loader`), or a loop that only reads the
    /// model's outputs detached and asks for no gradient, when a forward in it (directly,
    /// through a same-file helper, or through a model method) is not under
    /// `torch.no_grad()`/`torch.inference_mode()`. Also the code after a training loop
    /// (a script's prediction, the per-epoch evaluation after the loop over batches) and
    /// a branch of a training loop that asks for no gradient (a preview every N steps),
    /// where a forward's outputs are only read detached; and the code after a batch is
    /// drawn by hand from evaluation data (`x, y = next(iter(test_loader))`: a test
    /// episode, a prediction cell) when nothing there asks for gradients; and a function
    /// that runs the model only to read its outputs detached, hands back nothing it
    /// computed (a plotting helper's `return ax`) and trains nothing; and, in code that
    /// trains, a forward whose outputs only reach detached reads (an agent's action
    /// chosen through the Q-network, a target network's output detached at once, a
    /// generator run only to be `.detach()`-ed for the critic's step); and a forward on a
    /// `Variable(x, volatile=True)` input, through the names it is bound to (code from
    /// before PyTorch 0.4 asking for inference with a flag ignored since), unless a
    /// backward reads its outputs. Models written
    /// as bare tensors (`W = torch.randn(..., requires_grad=True)`) count: math on
    /// them is their forward. Reported once per region; after `model.eval()`, each loop
    /// that runs the model is a region of its own (the test loop, then a figure drawn
    /// example by example), and a call into a helper already reported is not reported
    /// again. The model is recognised by what is done with it (`extractor.eval()`,
    /// a name bound to one of its methods: `encode = gen_a.encode if a2b else
    /// gen_b.encode`,
    /// `self.qf.parameters()`, or handed to a project helper that uses it so:
    /// `soft_update(self.target_qf, self.qf, tau)`), not only by its name; a value handed
    /// to a project helper that returns it detached (`ptu.get_numpy(q)`) is a detached
    /// read. A branch whose values a later backward reads (the mixed-precision branch of
    /// a step) is training, not a preview. Calls made by a method whose every call in the
    /// project runs under `no_grad` run there too (a base task's `evaluation` calling
    /// `self.valid_step`), and functions named for another framework
    /// (`_tensorflow_evaluator`) are not PyTorch code. A file named or placed like a
    /// test module (`*_test.py`, `tests.py`, under `tests/`) is skipped only when it
    /// holds test cases (`test_*` functions or methods, `Test*` classes, a pytest or
    /// unittest import).
    ///
    /// ## Why is this bad?
    /// With grad enabled every forward records the autograd graph and keeps the
    /// activations it needs for a backward pass that never comes. Each batch's memory is
    /// only released when its outputs die; any output kept (for metrics, predictions) keeps
    /// its whole graph, so evaluation can take several times the memory of inference and
    /// run out of memory on batches that training handled. It is also slower.
    ///
    /// `model.eval()` does not disable gradients: it only switches dropout and batch norm
    /// to inference behaviour.
    ///
    /// Not flagged: code under `torch.no_grad()`/`torch.inference_mode()` or
    /// `torch.set_grad_enabled(False)` at any enclosing level, a function decorated with
    /// `@torch.no_grad()` (or only ever called under no_grad in the same file), Lightning's
    /// `validation_step`/`test_step`/`predict_step` (Lightning disables grad), HF
    /// `model.generate(...)`, pipelines (`pipeline(...)`, diffusers' `*Pipeline`, which
    /// disable grad themselves), TensorFlow and Flax models, modules whose parameters
    /// are all frozen (`requires_grad_(False)` before `.eval()`, or a class that freezes
    /// itself in `__init__`), a `with` that picks `no_grad()` or a null context at run
    /// time, functions that want gradients (`.backward()`,
    /// `torch.autograd.grad`, `requires_grad_()`: saliency maps, adversarial examples,
    /// test-time training), pytest `test_*` functions, and demos of an untrained model:
    /// a layer or model of the file built just before (no weights loaded, not trained,
    /// not switched to `.eval()` since) run outside any loop, as notebooks show a
    /// layer's feature maps or a model's output shape before training. The same model
    /// run on evaluation data (a batch drawn from a test loader, `X_test`) before
    /// training is still reported.
    ///
    /// ## Example
    /// ```python
    /// def evaluate(model, val_loader):
    ///     model.eval()
    ///     correct = 0
    ///     for x, y in val_loader:
    ///         correct += (model(x).argmax(1) == y).sum().item()  # builds a graph
    ///     return correct
    /// ```
    ///
    /// ## How to fix
    /// ```python
    /// @torch.no_grad()
    /// def evaluate(model, val_loader):
    ///     ...
    /// ```
    /// or wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`).
    ///
    /// ## Fix safety
    /// For an evaluation function, the fix adds `@torch.no_grad()` (spelled as the file
    /// imports torch: `@t.no_grad()`, `@no_grad()`). It is safe when nothing the
    /// function hands back can reach a backward pass anywhere in the project: every
    /// `return` gives a detached value (a number, `.item()`, `.cpu().numpy()`), it
    /// yields nothing, stores no graph through a parameter or `self`, and asks for no
    /// gradient itself; otherwise a caller might backpropagate through its result, and
    /// the fix is unsafe. For a loop after `model.eval()` or over evaluation data, the
    /// fix wraps the loop in `with torch.no_grad():`, re-indented with the file's
    /// indentation unit (lines inside a multi-line string are left as they are); it is
    /// always unsafe, since code after the loop may use the outputs it produced. A file
    /// that does not import torch gains `import torch`.
    pub static EVAL_WITHOUT_NO_GRAD = Rule {
        code: "OOM301",
        name: "eval-without-no-grad",
        severity: Severity::Error,
        fix: FixAvailability::Sometimes,
        check,
        prefilter: |s| {
            s.graph_source()
                && (s.attr("eval")
                    || s.any_def(|d| is_eval_function_name(d) || is_test_name(d))
                    || s.any_def(names::is_inference_function_name)
                    || s.any_word(is_eval_loader_name)
                    // Inference loops: a forward's output read detached.
                    || s.any_word(names::is_detached_read))
        },
        parts: Some(|s| {
            // Not `graph_source()`: the model may come from elsewhere in the file.
            s.attr("eval")
                || s.any_def(|d| is_eval_function_name(d) || is_test_name(d))
                || s.any_def(names::is_inference_function_name)
                || s.any_word(is_eval_loader_name)
                || s.any_word(names::is_detached_read)
        }),
    };
}

/// Where evaluation happens in one function: the whole function (named for evaluation
/// or inference), a `model.eval()` ... `model.train()` region, or a loop over
/// evaluation data. Each is reported at most once (its first forward with grad on).
#[derive(Clone, Copy)]
enum Region<'a> {
    Function,
    AfterEval(usize, usize, &'a str),
    Loop(LoopId),
    /// A loop that runs forwards only to read their outputs detached (acting in an
    /// environment, decoding, printing predictions) and asks for no gradient anywhere
    /// in it or in the same-file functions it calls.
    Inference(LoopId),
    /// The whole of a routine that trains or evaluates behind a flag, which a caller
    /// runs with the flag set to evaluate.
    FlagEval,
    /// What follows a training loop in the block around it (a script's prediction
    /// after training, at module level or in `main`; the per-epoch evaluation after the
    /// loop over batches), from the byte where that loop ends, in the loop around it
    /// (`None`: outside loops): forwards there whose outputs only reach detached reads.
    AfterTraining(usize, Option<LoopId>),
    /// A branch of a training loop's body that asks for no gradient (`if step % 100
    /// == 0:` saving a preview): forwards there whose outputs only reach detached reads.
    Branch(LoopId, Node<'a>),
    /// A function (or script) that trains: a forward there, outside `no_grad`, whose
    /// outputs only reach detached reads in its block (an agent's action chosen with
    /// the Q-network, a policy sampled for the environment, an accuracy computed from
    /// a forward of its own) feeds no backward: inference inside training.
    InTraining,
    /// The rest of the block after a batch is drawn from evaluation data by hand
    /// (`x, y = next(iter(test_loader))`, `test_loader.__iter__().next()`): a test
    /// episode, a prediction demo on one test batch. From the byte where the draw ends
    /// to the end of its block, when nothing there asks for gradients.
    EvalDraw(usize, usize),
    /// A function that asks for no gradient and whose every forward's outputs only
    /// reach detached reads (`.detach().numpy()` for a plot, a similarity map): it can
    /// only be inference, whatever its name.
    DetachedOnly,
    /// The forwards of one loop (`None`: outside loops) whose input is a
    /// `Variable(x, volatile=True)`: code written to run without autograd under a flag
    /// that PyTorch ignores since 0.4.
    Volatile(Option<LoopId>),
}

fn check(model: &SemanticModel<'_>, cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    // A pytest module's functions are tests; a script that is only named like one (an
    // evaluation run saved as `model_test.py`) is what the rule is for.
    if cx.is_test_file && model.defines_test_cases() {
        return;
    }
    let fx = Forwards::new(model);
    let mut found: Vec<(Option<ScopeId>, CallId, Diagnostic)> = Vec::new();
    // Functions reported as a whole: a call into one from another region is reported
    // there, not again at the call site.
    let named_kinds: std::collections::HashMap<ScopeId, &'static str> = model
        .scopes
        .ids()
        .filter(|&s| model.scope(s).is_function())
        .filter_map(|s| named_context(model, &fx, s).map(|k| (s, k)))
        .collect();
    let named_fns: Vec<ScopeId> = model
        .scopes
        .ids()
        .filter(|s| named_kinds.contains_key(s))
        .collect();
    // Loops over evaluation data, found once (not once per function).
    let all_eval_loops: Vec<(Option<ScopeId>, LoopId)> = model
        .loops
        .ids()
        .filter(|&l| {
            model
                .loop_(l)
                .iter
                .is_some_and(|it| iterates_eval_loader(model, it))
        })
        .map(|l| (model.function_of(model.loop_(l).scope), l))
        .collect();
    let all_eval_draws: Vec<(Option<ScopeId>, usize, usize)> = eval_draws(model);
    let all_inference_loops: Vec<(Option<ScopeId>, LoopId)> = inference_loops(model)
        .into_iter()
        .map(|l| (model.function_of(model.loop_(l).scope), l))
        .collect();
    // A file that trains nothing and loads no weights: its `__main__` block can only
    // run untrained models. Decided once: asked for every candidate forward.
    let untrained_script = !model.trains() && !loads_weights(model);
    // `volatile=True` is rare: a file without the word has no such input to trace.
    let volatile_file = model.text(model.root).contains("volatile");
    let functions = model
        .scopes
        .ids()
        .filter(|&s| model.scope(s).is_function())
        .map(Some)
        .chain(std::iter::once(None));
    for f in functions {
        let calls = model.calls_of_function(f);
        let named = f.and_then(|f| named_kinds.get(&f).copied());
        // `model.eval()` ... `model.train()` regions: (start, end, model text).
        let mut regions: Vec<(usize, usize, &str)> = Vec::new();
        for &i in &calls {
            let c = &model.calls[i];
            let Some((recv, m)) = model.method_call(c) else {
                continue;
            };
            if m == "eval" && c.arguments.is_some_and(|a| a.named_child_count() == 0) {
                let v = model.value(recv, c.site);
                // A module switched off first (`extractor.requires_grad_(False)` then
                // `.eval()`) records no graph on inputs that ask for none.
                if matches!(v, Value::Module | Value::Instance(_))
                    && !model.frozen_before(model.text(unwrap_parens(recv)), c.node, c.site)
                {
                    // `net = Net(...).eval()`: the region is about the name bound.
                    let bound = c
                        .node
                        .parent()
                        .filter(|p| p.kind_str() == "assignment" && unwrap_parens(recv).kind_str() == "call")
                        .and_then(|p| p.field("left"))
                        .filter(|t| t.kind_str() == "identifier");
                    regions.push((c.node.end_byte(), usize::MAX, model.text(bound.unwrap_or(recv))));
                }
            } else if m == "train" {
                // Training a part of what was put in eval mode ends the region too:
                // `[model[k].eval() for k in model]` then `model.predictor.train()`, or
                // `net.eval()` then `net.head.train()`, trains from there on.
                let t = model.text(recv);
                let ends = |r: &str| {
                    let whole = match r.strip_suffix(']').and_then(|x| x.rfind('[').map(|i| &x[..i])) {
                        Some(base) => base,
                        None => r,
                    };
                    t == r
                        || t == whole
                        || t.strip_prefix(whole).is_some_and(|rest| rest.starts_with(['.', '[']))
                };
                for r in regions.iter_mut().filter(|r| ends(r.2) && r.1 == usize::MAX) {
                    if c.node.start_byte() > r.0 {
                        r.1 = c.node.start_byte();
                    }
                }
            }
        }
        let mut contexts: Vec<Region<'_>> = Vec::new();
        if named.is_some() {
            contexts.push(Region::Function);
        } else {
            // A module's own `forward` that switches a part to eval mode and delegates
            // (a LightningModule wrapping a detector) runs under its caller's grad mode:
            // the caller is the place to report.
            let own_forward = f.is_some_and(|f| {
                let sc = model.scope(f);
                sc.name == "forward" && sc.class.is_some_and(|c| model.is_module_class(c))
            });
            if !own_forward {
                contexts.extend(regions.iter().map(|&(s, e, m)| Region::AfterEval(s, e, m)));
            }
            contexts.extend(
                all_eval_loops
                    .iter()
                    .filter(|(g, _)| *g == f)
                    .map(|&(_, l)| Region::Loop(l)),
            );
        }
        if named.is_none() {
            contexts.extend(
                all_inference_loops
                    .iter()
                    .filter(|(g, _)| *g == f)
                    .map(|&(_, l)| l)
                    .filter(|l| !all_eval_loops.iter().any(|(_, e)| model.loop_within(Some(*e), *l)))
                    .map(Region::Inference),
            );
        }
        // Calls that want gradients in this function: their loops (or the whole
        // function, for those outside any loop) are exempt, nothing else.
        let grad_calls: Vec<CallId> = calls
            .iter()
            .copied()
            .filter(|&i| asks_for_grad(model, i))
            .collect();
        // Behind a flag with an evaluation path, they exempt only what runs under that
        // flag: the forwards shared by both paths run with grad on when evaluating.
        let gate = flag_gate(model, f, &grad_calls);
        let grad_calls = if gate.is_some() { Vec::new() } else { grad_calls };
        if gate.is_some_and(|(_, by_caller)| by_caller) && named.is_none() {
            contexts.push(Region::FlagEval);
        }
        if named.is_none() && gate.is_none() {
            let ends = training_ends(model, &grad_calls);
            contexts.extend(ends.iter().map(|&(end, within)| Region::AfterTraining(end, within)));
            // Each loop after the training, at its level, that trains nothing is a region
            // of its own (a figure drawn image by image after the test prediction).
            for &(end, within) in &ends {
                contexts.extend(
                    model
                        .loops
                        .ids()
                        .filter(|&l| {
                            let lp = model.loop_(l);
                            lp.parent == within
                                && model.function_of(lp.scope) == f
                                && lp.node.start_byte() >= end
                                && !grad_calls.iter().any(|&g| model.loop_within(model.calls[g].site.loop_, l))
                        })
                        .map(Region::Inference),
                );
            }
        }
        if named.is_none()
            && gate.is_none()
            && grad_calls.is_empty()
            && match f {
                Some(f) => detached_only_function(model, &fx, f),
                None => detached_only_module(model, &fx, cx.file_name.ends_with(".ipynb")),
            }
        {
            contexts.push(Region::DetachedOnly);
        }
        // First: a batch drawn by hand is an episode of its own (a prediction cell
        // after a notebook's test loop), reported even inside a wider region.
        if named.is_none() && gate.is_none() {
            let draws: Vec<Region<'_>> = all_eval_draws
                .iter()
                .filter(|(g, ..)| *g == f)
                .filter(|&&(_, s, e)| {
                    !grad_calls.iter().any(|&g| {
                        let at = model.calls[g].node.start_byte();
                        at >= s && at < e
                    })
                })
                .map(|&(_, s, e)| Region::EvalDraw(s, e))
                .collect();
            let n = draws.len();
            contexts.splice(0..0, draws);
            // Then a preview branch of a training loop, before the wider regions after
            // a first training loop, so that its finding says where it stands.
            let branches: Vec<Region<'_>> = quiet_branches(model, f, &grad_calls)
                .into_iter()
                .map(|(l, b)| Region::Branch(l, b))
                .collect();
            contexts.splice(n..n, branches);
        }
        // A method of a class that trains (an agent's `choose_action` beside its
        // `learn`) runs between training steps, as the training loop's own code does.
        // So does a helper whose result a caller backpropagates (`loss =
        // calc_loss(batch, net, tgt_net)`): a target network's forward in it is read
        // only detached.
        let trains_here = !grad_calls.is_empty()
            || f.and_then(|f| model.scope(f).class).is_some_and(|c| model.class_trains(c))
            || f.is_some_and(|f| model.returns_into_backward(f));
        if named.is_none() && gate.is_none() && trains_here && !f.is_some_and(|f| reached_from_forward(model, f)) {
            contexts.push(Region::InTraining);
        }
        // Forwards on `volatile=True` inputs, last: a region already found says more.
        let mut volatile: Vec<Option<LoopId>> = calls
            .iter()
            .filter(|&&i| {
                volatile_file && model.function_of(model.calls[i].site.scope) == f && model.volatile_input(i)
            })
            .map(|&i| model.calls[i].site.loop_)
            .collect();
        volatile.dedup();
        contexts.extend(volatile.into_iter().map(Region::Volatile));
        let scope_body = f.map_or(Some(model.root), |f| model.scope(f).node.field("body"));
        if contexts.is_empty() {
            continue;
        }
        // A model file's check under `__main__` that runs an untrained model on random
        // input to print a shape: nothing trained is evaluated (issue class 1).
        let smoke_test = |i: CallId| untrained_script && under_main_guard(model, model.calls[i].node);
        let mut reported: Vec<(usize, usize)> = Vec::new();
        for ctx in contexts {
            // A script's other regions (after `.eval()`, an evaluation loop) say where
            // its evaluation is; the whole script is the region only when they found
            // nothing.
            if matches!(ctx, Region::DetachedOnly) && f.is_none() && !reported.is_empty() {
                continue;
            }
            // Nor is a forward on a `volatile=True` input where the function already
            // has a finding: that one says where its evaluation is.
            if matches!(ctx, Region::Volatile(_)) && !reported.is_empty() {
                continue;
            }
            let exempting = region_grad_calls(model, &grad_calls, ctx);
            let candidates: Vec<CallId> = calls.iter().copied().filter(|&i| {
                let c = &model.calls[i];
                // A lambda or nested function inside is its own scope.
                if model.function_of(c.site.scope) != f {
                    return false;
                }
                // Asked after the cheap tests below: the data-flow ones walk every later
                // read of the forward's outputs.
                let in_context = || match ctx {
                    Region::Function | Region::FlagEval => true,
                    Region::Loop(l) => model.loop_within(c.site.loop_, l),
                    Region::Inference(l) => {
                        model.loop_within(c.site.loop_, l) && output_only_detached(model, i, l)
                    }
                    Region::AfterTraining(start, within) => {
                        // At the training loop's level or in a loop after it (a
                        // sampling loop after training), which starts past `start`.
                        within.is_none_or(|w| model.loop_within(c.site.loop_, w))
                            && c.node.start_byte() >= start
                            && !fx.only_by_method(i)
                            && within
                                .map(|p| model.loop_(p).body)
                                .or(scope_body)
                                .is_some_and(|b| output_only_detached_after_training(model, i, b))
                    }
                    Region::Branch(l, b) => {
                        c.site.loop_ == Some(l)
                            && c.node.start_byte() >= b.start_byte()
                            && c.node.end_byte() <= b.end_byte()
                            && !fx.only_by_method(i)
                            && output_only_detached_in(model, i, b)
                    }
                    Region::EvalDraw(s, e) => {
                        let at = c.node.start_byte();
                        at >= s && at < e && !fx.only_by_method(i)
                    }
                    Region::InTraining => {
                        !fx.only_by_method(i)
                            // Bare-tensor math in a file that trains by hand is mostly
                            // the training itself (a loss built over several cells):
                            // only its clearer regions (after training, sampling loops)
                            // count.
                            && !model.computes_on_raw_trainable(i)
                            // A helper that keeps what it computed for a later loss
                            // (REINFORCE's `saved_log_probs.append(...)`) is training.
                            && !model.callee(i).is_some_and(|g| stores_graph(model, &fx, g))
                            // What a name bound to it flows into matters only when the
                            // value bound still carries the graph.
                            && (detached_at_once(model, i) || !result_feeds_grad(model, i))
                            && c.site
                                .loop_
                                .filter(|&l| model.function_of(model.loop_(l).scope) == f)
                                .map(|l| model.loop_(l).body)
                                .or(scope_body)
                                .is_some_and(|b| output_only_detached_in(model, i, b))
                    }
                    // Meant to run without autograd: exempt only where something in
                    // reach wants its graph and its outputs reach more than detached reads.
                    Region::Volatile(l) => {
                        c.site.loop_ == l
                            && model.volatile_input(i)
                            && (!wants_grad_here(model, &grad_calls, i)
                                || c.site
                                    .loop_
                                    .map(|l| model.loop_(l).body)
                                    .or(scope_body)
                                    .is_some_and(|b| output_only_detached_in(model, i, b)))
                    }
                    Region::DetachedOnly => {
                        model.callee(i).is_none()
                            && !fx.only_by_method(i)
                            && scope_body.is_some_and(|b| output_only_detached_in(model, i, b))
                    }
                    Region::AfterEval(s, e, m) => {
                        let at = c.node.start_byte();
                        at >= s
                            && at < e
                            && (callee_root(model, c.function) == m
                                || model.callee(i).is_some()
                                || is_model_forward(model, i)
                                || project_forward(model, i).is_some_and(|r| r.is_none_or(|r| r == m)))
                    }
                };
                model.grad_enabled(c.site)
                    && !model.callee(i).is_some_and(|g| named_fns.contains(&g))
                    && fx.is_forward(i)
                    && in_context()
                    && !wants_grad_here(model, &exempting, i)
                    && !model.frozen_at(i)
                    && !smoke_test(i)
                    // The TensorFlow branch of a pipeline (`if self.framework == "tf":`).
                    && !model.foreign_framework_site(c.node)
                    && gate.is_none_or(|(g, _)| guard_of(model, c.node) != Some(g))
            }).collect();
            // Reported at a definite forward when there is one, not at a method of the
            // model only taken to be one (`net.round_sigma(t)` before `net(x, t)`).
            let first = candidates
                .iter()
                .copied()
                .find(|&i| !fx.only_by_method(i))
                .or_else(|| candidates.first().copied());
            let Some(first) = first else { continue };
            let c = &model.calls[first];
            // One finding per region: a loop inside a region already reported (or a
            // region whose first forward is the one already reported) adds nothing.
            let span = match ctx {
                Region::Loop(l) | Region::Inference(l) | Region::Volatile(Some(l)) => {
                    let n = model.loop_(l).node;
                    (n.start_byte(), n.end_byte())
                }
                // A forward in a loop after `.eval()` covers that loop: a later loop
                // over other data (a figure drawn example by example after the test
                // loop) is a region of its own, with its own fix.
                Region::AfterEval(s, e, _) => {
                    let mut outer = None;
                    let mut l = c.site.loop_;
                    while let Some(id) = l {
                        let lp = model.loop_(id);
                        if model.function_of(lp.scope) != f || lp.node.start_byte() < s {
                            break;
                        }
                        outer = Some(lp.node.end_byte());
                        l = lp.parent;
                    }
                    (s, outer.unwrap_or(e))
                }
                Region::EvalDraw(s, e) => (s, e),
                Region::Branch(_, b) => (b.start_byte(), b.end_byte()),
                // A prediction straight after training covers what precedes it; a loop
                // after it (a figure drawn image by image) is a region of its own.
                Region::AfterTraining(s, within) if c.site.loop_ == within => (s, c.node.end_byte()),
                Region::AfterTraining(s, within) => {
                    (s, within.map_or(usize::MAX, |p| model.loop_(p).node.end_byte()))
                }
                Region::Function
                | Region::FlagEval
                | Region::DetachedOnly
                | Region::InTraining
                | Region::Volatile(None) => (0, usize::MAX),
            };
            let at = c.node.start_byte();
            if reported
                .iter()
                .any(|&(s, e)| (at >= s && at < e) || (span.0 >= s && span.0 < e))
            {
                continue;
            }
            reported.push(span);
            let context = match (ctx, named) {
                (Region::Function, Some(kind)) => {
                    let name = f.map_or("", |f| model.scope(f).name);
                    format!("{kind} `{name}`")
                }
                (Region::Loop(_), _) => "this evaluation loop".to_owned(),
                (Region::FlagEval, _) => {
                    let name = f.map_or("", |f| model.scope(f).name);
                    let flag = gate.map_or("", |((g, _), _)| g);
                    format!("the evaluation path of `{name}` (called with `{flag}` set to evaluate)")
                }
                (Region::Inference(_), _) => {
                    "this loop, which only reads the model's outputs detached,".to_owned()
                }
                (Region::Branch(..), _) => {
                    "this branch of the training loop, which only reads the model's outputs detached,".to_owned()
                }
                (Region::InTraining, _) => {
                    "a forward whose outputs are only read detached (no gradient flows from it)".to_owned()
                }
                (Region::DetachedOnly, _) => match f {
                    Some(f) => format!("`{}`, which only reads the model's outputs detached,", model.scope(f).name),
                    None => "this script, which trains nothing and only reads the model's outputs detached,".to_owned(),
                },
                (Region::Volatile(_), _) => {
                    "a forward on a `volatile=True` input (a flag PyTorch ignores since 0.4)".to_owned()
                }
                (Region::EvalDraw(..), _) => {
                    "code on a batch drawn from evaluation data".to_owned()
                }
                (Region::AfterTraining(..), _) => {
                    "prediction after the training loop, whose outputs are only read detached,".to_owned()
                }
                _ => "code after `.eval()`".to_owned(),
            };
            found.push((f, first, Diagnostic {
                range: model.range(c.node),
                message: format!(
                    "{context} runs the model with autograd enabled: each forward records a graph and keeps activations that are never used"
                ),
                help: "wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`), or decorate the function with `@torch.no_grad()`".to_owned(),
                pattern: Pattern::GradEnabledEval,
                fix: no_grad_fix(model, ctx, f, first),
                related: Vec::new(),
            }));
        }
    }
    // A region whose forward is a call into a function reported itself is the same
    // problem, reported once, in the callee.
    // A method called on a receiver of unknown class (`agent.select_action(s)` on an
    // agent passed in) is that method when the file defines it once.
    let reported: Vec<Option<ScopeId>> = found.iter().map(|(f, _, _)| *f).collect();
    // Through same-file helpers too: `result(path)` drawing what `predict(path)`,
    // reported itself, returns.
    let reaches_reported = |g: ScopeId| {
        let mut work = vec![(g, 0)];
        let mut seen = vec![g];
        while let Some((h, depth)) = work.pop() {
            if reported.contains(&Some(h)) {
                return true;
            }
            if depth == 4 {
                continue;
            }
            for c in model.calls_of_function(Some(h)) {
                if let Some(k) = model.callee(c).filter(|k| !seen.contains(k)) {
                    seen.push(k);
                    work.push((k, depth + 1));
                }
            }
        }
        false
    };
    let into_reported = |i: CallId| match model.callee(i) {
        Some(g) => reaches_reported(g),
        None => model.method_call(&model.calls[i]).is_some_and(|(_, meth)| {
            let defs = model.methods_named(meth);
            defs.len() == 1 && reported.contains(&Some(defs[0]))
        }),
    };
    out.extend(
        found
            .into_iter()
            .filter(|(_, first, _)| !into_reported(*first))
            .map(|(_, _, d)| d),
    );
}

/// The fix of a region: `@torch.no_grad()` on an evaluation function (safe when
/// nothing it hands back can reach a backward pass, in this file or another: it
/// returns only detached values, stores no graph outside itself, and asks for no
/// gradient), or its loop wrapped in `with torch.no_grad():` (unsafe: code after the
/// loop in the region may still want the graph). `torch` is spelled as the file
/// imports it; a file that does not import it gains `import torch`.
fn no_grad_fix(model: &SemanticModel<'_>, ctx: Region<'_>, f: Option<ScopeId>, first: CallId) -> Option<Fix> {
    let (no_grad, import) = match model.torch_spelling("no_grad") {
        Some(s) => (s, None),
        None => ("torch.no_grad".to_owned(), Some(model.import_torch()?)),
    };
    let (mut edits, safe, title) = match ctx {
        Region::Function => {
            let f = f?;
            let def = model.scope(f).node;
            let edit = model.insert_line_before(def, &format!("@{no_grad}()"))?;
            let safe = !model.outputs_may_reach_backward(f) && !function_wants_grad(model, Some(f));
            let title = format!("Decorate `{}` with `@{no_grad}()`", model.scope(f).name);
            (vec![edit], safe, title)
        }
        Region::Loop(l) | Region::Inference(l) | Region::Volatile(Some(l)) => {
            let edits = model.wrap_in(model.loop_(l).node, &format!("with {no_grad}():"))?;
            (edits, false, format!("Wrap the loop in `with {no_grad}():`"))
        }
        Region::AfterEval(start, _, _) | Region::AfterTraining(start, _) => {
            // The outermost loop of the region that holds the forward.
            let mut l = model.calls[first].site.loop_?;
            while let Some(p) = model.loop_(l).parent {
                if model.loop_(p).node.start_byte() < start {
                    break;
                }
                l = p;
            }
            if model.loop_(l).node.start_byte() < start {
                return None;
            }
            let edits = model.wrap_in(model.loop_(l).node, &format!("with {no_grad}():"))?;
            (edits, false, format!("Wrap the loop in `with {no_grad}():`"))
        }
        // A branch inside a training loop, or a whole routine behind a flag: no block
        // of its own to wrap without restructuring the code.
        Region::FlagEval
        | Region::Branch(..)
        | Region::EvalDraw(..)
        | Region::DetachedOnly
        | Region::InTraining
        | Region::Volatile(None) => return None,
    };
    edits.extend(import);
    Some(if safe {
        Fix::safe(title, edits)
    } else {
        Fix::unsafe_(title, edits)
    })
}

/// Outermost loops that ask for no gradient, in their body or in the same-file
/// functions they call: where a forward there only feeds detached reads, it is
/// inference.
fn inference_loops(model: &SemanticModel<'_>) -> Vec<LoopId> {
    let wants = WantsGrad::new(model);
    model
        .loops
        .ids()
        .filter(|&l| {
            let lp = model.loop_(l);
            // A loop in a method that the module's own `forward` runs is part of the
            // model (decoding in eval mode): the grad mode is its caller's.
            let in_forward = model
                .function_of(lp.scope)
                .is_some_and(|f| reached_from_forward(model, f));
            lp.parent.is_none()
                && !in_forward
                && is_data_loop(model, l)
                && !runs_once(model, l)
                && !model.calls_in_loop(l).any(|(i, c)| {
                    asks_for_grad(model, i)
                        || model.callee(i).is_none()
                            && model
                                .method_call(c)
                                .is_some_and(|(_, meth)| wants.method(meth))
                })
                && !model.loop_callees(l).iter().any(|&g| wants.function(g))
        })
        .collect()
}

/// [`function_wants_grad`] decided once per function, and for the methods of a name
/// once per name: a file of many training scripts defines `forward` and `step` many
/// times over, and asking again for each loop and call is quadratic in its size.
struct WantsGrad<'m, 'a> {
    model: &'m SemanticModel<'a>,
    functions: std::cell::RefCell<std::collections::HashMap<ScopeId, bool>>,
    methods: std::cell::RefCell<std::collections::HashMap<&'m str, bool>>,
}

impl<'m, 'a> WantsGrad<'m, 'a> {
    fn new(model: &'m SemanticModel<'a>) -> Self {
        WantsGrad {
            model,
            functions: Default::default(),
            methods: Default::default(),
        }
    }

    fn function(&self, f: ScopeId) -> bool {
        if let Some(&w) = self.functions.borrow().get(&f) {
            return w;
        }
        let w = function_wants_grad(self.model, Some(f));
        self.functions.borrow_mut().insert(f, w);
        w
    }

    /// Whether some same-file method named `meth` wants gradients.
    fn method(&self, meth: &'m str) -> bool {
        if let Some(&w) = self.methods.borrow().get(meth) {
            return w;
        }
        let w = method_defs(self.model, meth).any(|g| self.function(g));
        self.methods.borrow_mut().insert(meth, w);
        w
    }
}

/// Same-file methods named `meth`, of any class: what a call on a receiver of unknown
/// class may run.
fn method_defs<'m, 'a>(
    model: &'m SemanticModel<'a>,
    meth: &'m str,
) -> impl Iterator<Item = ScopeId> + use<'m, 'a> {
    model.methods_named(meth).iter().copied()
}

/// Whether the chain of reads from `node` up to `top` leaves the graph at some link:
/// `net(x).cpu().data.numpy().flatten()` is detached from `.data` on (a method of a
/// detached value brings no graph back, `requires_grad_` aside). A read of the shape
/// only (`out.size()`, `out.shape`) does not count as using the output.
fn chain_detached(model: &SemanticModel<'_>, node: Node<'_>, top: Node<'_>, site: Site) -> Option<bool> {
    let mut n = node;
    let mut detached = false;
    let mut first_attr = true;
    while n.id() != top.id() {
        let Some(p) = n.parent() else { break };
        if p.kind_str() == "attribute" {
            let a = p.field("attribute").map_or("", |a| model.text(a));
            if first_attr && matches!(a, "size" | "shape" | "dim" | "ndim" | "ndimension") {
                return None;
            }
            first_attr = false;
            if a == "requires_grad_" {
                return Some(false);
            }
        }
        n = p;
        if !detached && matches!(n.kind_str(), "attribute" | "call") && model.value(n, site) == Value::Detached {
            detached = true;
        }
    }
    Some(detached)
}

/// Whether the chain of reads from `node` up to `top` is only calls of conversions
/// (`.to(device)`, `.cpu()`, `.float()`) and `.detach()`, which change nothing in place.
fn discards_conversion(model: &SemanticModel<'_>, node: Node<'_>, top: Node<'_>) -> bool {
    let mut n = node;
    let mut calls = 0;
    while n.id() != top.id() {
        let Some(p) = n.parent() else { return false };
        match p.kind_str() {
            "attribute" => {
                let m = p.field("attribute").map_or("", |a| model.text(a));
                if !(names::is_conversion_method(m) || m == "detach") {
                    return false;
                }
            }
            "call" => calls += 1,
            _ => return false,
        }
        n = p;
    }
    calls > 0
}

/// Whether the chain of reads from `node` up to `top` calls the method `name`.
fn chain_has(model: &SemanticModel<'_>, node: Node<'_>, top: Node<'_>, name: &str) -> bool {
    let mut n = node;
    while n.id() != top.id() {
        let Some(p) = n.parent() else { break };
        if p.kind_str() == "attribute" && p.field("attribute").is_some_and(|a| model.text(a) == name) {
            return true;
        }
        n = p;
    }
    false
}

/// Whether an expression is detached at some link of its chain of reads:
/// `self.actor(s).cpu().data.numpy().flatten()`.
fn expr_detached(model: &SemanticModel<'_>, e: Node<'_>, site: Site) -> bool {
    let mut n = Some(unwrap_parens(e));
    while let Some(x) = n {
        if model.value(x, site) == Value::Detached {
            return true;
        }
        n = match x.kind_str() {
            "call" => x.field("function"),
            "attribute" => {
                if x.field("attribute").is_some_and(|a| model.text(a) == "requires_grad_") {
                    return false;
                }
                x.field("object")
            }
            "subscript" => x.field("value"),
            "parenthesized_expression" => x.named_child(0),
            _ => None,
        };
    }
    false
}

/// The largest expression that reads `node`'s value: `net(x).cpu().data.numpy()` for
/// `net(x)`.
fn read_chain(node: Node<'_>) -> Node<'_> {
    let mut n = node;
    while let Some(p) = n.parent() {
        let continues = match p.kind_str() {
            "attribute" => p.field("object").is_some_and(|o| o.id() == n.id()),
            "call" => p.field("function").is_some_and(|o| o.id() == n.id()),
            "subscript" => p.field("value").is_some_and(|o| o.id() == n.id()),
            "parenthesized_expression" => true,
            _ => false,
        };
        if !continues {
            break;
        }
        n = p;
    }
    n
}

/// Whether a forward's outputs are only read detached in loop `l`: the call chain ends
/// detached (`.cpu().numpy()`, `.argmax()`, a helper returning `.item()`), or every
/// later read of the name it is bound to does.
fn output_only_detached(model: &SemanticModel<'_>, call: CallId, l: LoopId) -> bool {
    output_only_detached_in(model, call, model.loop_(l).body)
}

/// Whether a forward's outputs are only read detached in `body`, the block it stands in
/// (a loop body, or the rest of its function or module).
fn output_only_detached_in<'a>(model: &SemanticModel<'a>, call: CallId, body: Node<'a>) -> bool {
    only_detached(model, call, body, false)
}

/// [`output_only_detached_in`] for code after a training loop, where a value computed
/// on into a name nothing reads later (an autoregressive step's output fed back as the
/// next input) also keeps no graph. Inside a model's own methods the same shape is part
/// of a forward (a residual quantizer's loop), so it is not taken there.
fn output_only_detached_after_training<'a>(model: &SemanticModel<'a>, call: CallId, body: Node<'a>) -> bool {
    only_detached(model, call, body, true)
}

fn only_detached<'a>(model: &SemanticModel<'a>, call: CallId, body: Node<'a>, tail_ok: bool) -> bool {
    let c = &model.calls[call];
    let top = read_chain(c.node);
    if top.id() != c.node.id() {
        match chain_detached(model, c.node, top, c.site) {
            Some(true) => return true,
            // A read of the shape only, or `requires_grad_()` turning the graph back on.
            None => return false,
            Some(false) if chain_has(model, c.node, top, "requires_grad_") => return false,
            // Not detached yet (`net(x).max(1)[1]`): where the chain's value goes decides.
            Some(false) => {}
        }
    }
    if model.value(top, c.site) == Value::Detached {
        return true;
    }
    // A same-file helper (`agent.select_action(s)`, on an agent of this file or passed
    // in): what every method of that name returns.
    let defs: Vec<ScopeId> = match (model.callee(call), model.method_call(c)) {
        (Some(g), _) if top.id() == c.node.id() => vec![g],
        (None, Some((_, meth))) if top.id() == c.node.id() => method_defs(model, meth).collect(),
        _ => Vec::new(),
    };
    if defs.iter().any(|&g| !model.scope(g).returns.is_empty())
        && defs.iter().all(|&g| {
            model
                .scope(g)
                .returns
                .iter()
                .all(|&(r, site)| expr_detached(model, r, site))
        })
    {
        return true;
    }
    if computed_into_detached_read(model, top, c.site) {
        return true;
    }
    // Bound to names, directly or through tensor operations (`_, pred = torch.max(net(x), 1)`).
    let Some(p) = top
        .parent()
        .filter(|p| p.kind_str() == "assignment")
        .or_else(|| flows_into_assignment(top))
    else {
        return false;
    };
    bound_only_read_detached(model, p, body, c.site, 0, tail_ok)
}

/// Whether `x` is computed on, through calls and operators, into an expression read
/// detached: `loss(net(x), y).item()`, `torch.multinomial(probs, 1).item()`.
fn computed_into_detached_read<'a>(model: &SemanticModel<'a>, mut x: Node<'a>, site: Site) -> bool {
    for _ in 0..8 {
        let Some(p) = x.parent() else { break };
        x = match p.kind_str() {
            "argument_list" => match p.parent() {
                Some(call) => call,
                None => break,
            },
            "keyword_argument" => match p.parent().and_then(|a| a.parent()) {
                Some(call) => call,
                None => break,
            },
            // An element of a list or tuple built on the spot (`torch.cat([real,
            // rec[:16]]).cpu()`): where the whole goes.
            "binary_operator" | "unary_operator" | "parenthesized_expression" | "list" | "tuple" => p,
            _ => break,
        };
        let t = read_chain(x);
        if t.id() != x.id() && chain_detached(model, x, t, site) == Some(true) {
            return true;
        }
        // Handed to a torch function that gives no graph (`torch.argmax(out, dim=1)`,
        // `torch.eq(pred, y)`).
        if x.kind_str() == "call"
            && model
                .qualified(unwrap_parens(x.field("function").unwrap_or(x)))
                .is_some_and(|q| q.is_torch() && q.last().is_some_and(names::is_non_differentiable_torch_fn))
        {
            return true;
        }
        // Written out as an image or a logged value (`save_image(grid, path)`,
        // `writer.add_image("sample", grid, step)`).
        if x.kind_str() == "call" && x.field("function").is_some_and(|f| names::is_logging_sink(callee_name(model, f))) {
            return true;
        }
        // Handed to a project helper whose result carries no graph and that
        // backpropagates none of its arguments (`ptu.get_numpy(q_target)`).
        if x.kind_str() == "call" && detaching_helper(model, x) && model.value(x, site) == Value::Detached {
            return true;
        }
    }
    false
}

/// Whether call `x` is of a helper of the project that returns detached values and
/// backpropagates none of its arguments: a same-file function, or a function imported
/// from a project file (by name, or through its module: `ptu.get_numpy`).
fn detaching_helper(model: &SemanticModel<'_>, x: Node<'_>) -> bool {
    let Some(i) = model.call_index(x) else { return false };
    match model.callee(i) {
        Some(g) => model.scope(g).class.is_none() && model.backward_params(g).is_empty(),
        None => {
            let f = unwrap_parens(model.calls[i].function);
            let name = model.text(f);
            let imported = match f.kind_str() {
                "identifier" => Some(f),
                "attribute" => f.field("object").filter(|o| o.kind_str() == "identifier"),
                _ => None,
            }
            .and_then(|n| model.binding_of(n, model.calls[i].site))
            .is_some_and(|b| b.kind == crate::semantic::BindingKind::Import);
            imported
                && model
                    .project()
                    .is_some_and(|p| p.detached_import(name) && p.backward_params(name).is_none())
        }
    }
}

/// The name a call's function ends in: `save_image` in `vutils.save_image`.
fn callee_name<'a>(model: &SemanticModel<'a>, f: Node<'a>) -> &'a str {
    let f = unwrap_parens(f);
    match f.kind_str() {
        "attribute" => f.field("attribute").map_or("", |a| model.text(a)),
        "identifier" => model.text(f),
        _ => "",
    }
}

/// Where the first loop that trains (asks for gradients in its body) ends, in each
/// block that holds one, by the loop around that block (`None`: outside loops): code
/// after it that runs the model and only reads the result is prediction or evaluation.
fn training_ends(model: &SemanticModel<'_>, grad_calls: &[CallId]) -> Vec<(usize, Option<LoopId>)> {
    let mut ends: Vec<(usize, Option<LoopId>)> = Vec::new();
    for &g in grad_calls {
        let mut l = model.calls[g].site.loop_;
        while let Some(id) = l {
            let lp = model.loop_(id);
            let end = lp.node.end_byte();
            match ends.iter_mut().find(|(_, w)| *w == lp.parent) {
                Some(e) => e.0 = e.0.min(end),
                None => ends.push((end, lp.parent)),
            }
            l = lp.parent;
        }
    }
    ends.sort_unstable_by_key(|&(end, _)| end);
    ends
}

/// The branches (`if` blocks straight in the body) of loops of function `f` that train
/// in their own body, where nothing asks for gradients: a preview or a log every N
/// steps.
fn quiet_branches<'a>(model: &SemanticModel<'a>, f: Option<ScopeId>, grad_calls: &[CallId]) -> Vec<(LoopId, Node<'a>)> {
    let mut out = Vec::new();
    for l in model.loops.ids() {
        if model.function_of(model.loop_(l).scope) != f || !grad_calls.iter().any(|&g| model.calls[g].site.loop_ == Some(l)) {
            continue;
        }
        let body = model.loop_(l).body;
        let mut w = body.walk();
        for st in body.named_children(&mut w).filter(|st| st.kind_str() == "if_statement") {
            let Some(b) = st.field("consequence") else { continue };
            let quiet = !grad_calls.iter().any(|&g| {
                let n = model.calls[g].node;
                n.start_byte() >= b.start_byte() && n.end_byte() <= b.end_byte()
            });
            if quiet && !feeds_later_backward(model, b, body, grad_calls) {
                out.push((l, b));
            }
        }
    }
    out
}

/// Whether a call asking for gradients later in loop body `body` reads a name that
/// branch `b` binds, not rebound on the way: the mixed-precision branch of a step
/// computes the loss that a later `if use_amp:` backpropagates through the scaler.
fn feeds_later_backward<'a>(model: &SemanticModel<'a>, b: Node<'a>, body: Node<'a>, grad_calls: &[CallId]) -> bool {
    let mut bound: Vec<&str> = Vec::new();
    let mut stack = vec![b];
    while let Some(n) = stack.pop() {
        let mut w = n.walk();
        if n.kind_str() == "assignment" {
            // Only the names it binds: its left side, unpacked.
            let mut left: Vec<Node<'a>> = n.field("left").into_iter().collect();
            while let Some(t) = left.pop() {
                match t.kind_str() {
                    "identifier" if !bound.contains(&model.text(t)) => bound.push(model.text(t)),
                    "pattern_list" | "tuple_pattern" | "list_pattern" => {
                        let mut tw = t.walk();
                        left.extend(t.named_children(&mut tw));
                    }
                    _ => {}
                }
            }
            stack.extend(n.field("right"));
            continue;
        }
        // Expressions bind nothing (a walrus aside); statements and blocks may.
        if n.kind_str().ends_with("statement") || matches!(n.kind_str(), "block" | "else_clause" | "elif_clause" | "with_clause" | "expression_statement") {
            stack.extend(n.named_children(&mut w));
        }
    }
    grad_calls.iter().any(|&g| {
        let call = model.calls[g].node;
        let (from, at) = (b.end_byte(), call.start_byte());
        if at < from || call.end_byte() > body.end_byte() {
            return false;
        }
        bound.iter().any(|&name| {
            let read = !model.identifiers_in(name, at..call.end_byte()).is_empty();
            // Rebound in a block that holds the call: that value is the one it reads.
            let rebound = model.identifiers_in(name, from..at).iter().any(|&n| {
                is_assignment_target(n)
                    && statement_block(n).is_some_and(|blk| blk.start_byte() <= at && call.end_byte() <= blk.end_byte())
            });
            read && !rebound
        })
    })
}

/// The block (or module) holding the statement that contains `n`.
fn statement_block(n: Node<'_>) -> Option<Node<'_>> {
    let mut x = n;
    while let Some(p) = x.parent() {
        if matches!(p.kind_str(), "block" | "module") {
            return Some(p);
        }
        x = p;
    }
    None
}

/// The calls asking for gradients that exempt forwards of region `ctx`. Between
/// `model.eval()` and the next `model.train()` only those in that stretch count: a
/// preview right after `G.eval()` in a loop that also trains wants no gradient.
fn region_grad_calls(model: &SemanticModel<'_>, grad_calls: &[CallId], ctx: Region<'_>) -> Vec<CallId> {
    match ctx {
        Region::AfterEval(s, e, _) | Region::EvalDraw(s, e) => grad_calls
            .iter()
            .copied()
            .filter(|&g| {
                let at = model.calls[g].node.start_byte();
                at >= s && at < e
            })
            .collect(),
        // Its forwards' outputs are only read detached: none can feed a backward.
        // The volatile region decides its exemption per forward.
        Region::AfterTraining(..) | Region::Branch(..) | Region::InTraining | Region::Volatile(_) => Vec::new(),
        _ => grad_calls.to_vec(),
    }
}

/// The names that assignment `p` binds, if it binds only plain names.
fn bound_names<'a>(model: &SemanticModel<'a>, p: Node<'a>) -> Option<Vec<&'a str>> {
    let left = p.field("left")?;
    let mut bound: Vec<&str> = Vec::new();
    let mut stack = vec![left];
    while let Some(x) = stack.pop() {
        match x.kind_str() {
            "identifier" => bound.push(model.text(x)),
            "pattern_list" | "tuple_pattern" => {
                let mut w = x.walk();
                stack.extend(x.named_children(&mut w));
            }
            _ => return None,
        }
    }
    Some(bound)
}

/// The assignment whose right side computes from `n` through tensor operations,
/// calls and containers (`feats = torch.cat((a, b), 1).view(-1)`, `rel =
/// head(feats)`): where a value that is not read detached flows on.
fn flows_into_assignment<'a>(n: Node<'a>) -> Option<Node<'a>> {
    let mut x = n;
    while let Some(p) = x.parent() {
        match p.kind_str() {
            "assignment" => {
                return p.field("right").filter(|r| r.id() == x.id()).map(|_| p);
            }
            "attribute" | "call" | "argument_list" | "subscript" | "parenthesized_expression"
            | "binary_operator" | "unary_operator" | "tuple" | "list" | "keyword_argument" => x = p,
            // `chosen = greedy if deterministic else sampled`: a branch's value is the
            // value bound; the condition between them is not.
            "conditional_expression" if p.named_child(1).is_none_or(|c| c.id() != x.id()) => x = p,
            _ => return None,
        }
    }
    None
}

/// Whether every later read, in `body`, of the names that assignment `p` binds is
/// detached, following the values computed from them into other names (through
/// tensor operations and further forwards) up to a few steps, with at least one
/// detached read of the first names.
fn bound_only_read_detached<'a>(
    model: &SemanticModel<'a>,
    p: Node<'a>,
    body: Node<'a>,
    site: Site,
    depth: u32,
    tail_ok: bool,
) -> bool {
    let Some(bound) = bound_names(model, p) else {
        return false;
    };
    let after = p.end_byte();
    let cuts = rebound_at(model, p, body, &bound);
    let mut reads = 0;
    for &name in &bound {
        // Reads after a rebinding in the same block are the new value's business.
        let cut = cuts
            .iter()
            .filter(|&&(c, _)| c == name)
            .map(|&(_, at)| at)
            .min()
            .unwrap_or(usize::MAX);
        let end = body.end_byte().min(cut);
        match reads_detached(model, name, after..end.max(after), body, site, depth, tail_ok) {
            Some(r) => reads += r,
            None => return false,
        }
    }
    // A value computed on into a name that nothing reads afterwards (`input = output`
    // at the end of a decoding step, read again by the next step's forward) keeps no
    // graph beyond the step, where `tail_ok`; the value it came from must still be read
    // detached.
    reads > 0 || tail_ok && depth > 0 && !read_after_region(model, p, body, &bound)
}

/// How many reads of `name` in `range` (inside `body`) are detached, as
/// [`bound_only_read_detached`] counts them; `None` when one may carry the graph on.
fn reads_detached<'a>(
    model: &SemanticModel<'a>,
    name: &'a str,
    range: std::ops::Range<usize>,
    body: Node<'a>,
    site: Site,
    depth: u32,
    tail_ok: bool,
) -> Option<usize> {
    let mut reads = 0;
    for &n in model.identifiers_in(name, range.clone()) {
        // Rebound later (alone or in an unpacking): that is a new value.
        if is_assignment_target(n) {
            continue;
        }
        // `torch.max(out.data, 1)` reads through `.data`; a bare use may carry the
        // graph; `out.size()` reads nothing of it.
        let chain = read_chain(n);
        // `loss.backward()`, `scaler.scale(loss).backward()`: the graph is wanted.
        if reaches_backward_call(model, n) {
            return None;
        }
        // Handed to a plot (whole or indexed): matplotlib converts it to NumPy.
        let plotted = chain
            .parent()
            .filter(|a| a.kind_str() == "argument_list")
            .and_then(|a| a.parent())
            .and_then(|c| c.field("function"))
            .filter(|f| f.kind_str() == "attribute")
            .and_then(|f| f.field("attribute"))
            .is_some_and(|m| names::is_plotting_sink(model.text(m)));
        // A bare name as a statement: a notebook cell displaying the value (its repr
        // needs no graph), or nothing at all in a script.
        let displayed = chain.id() == n.id()
            && chain.parent().is_some_and(|p| p.kind_str() == "expression_statement");
        // Formatted into text (`f"{acc:.4f}"`, `f"{is_correct.mean()}"`): a read of
        // its value, but `f"{out.shape}"` reads only the shape.
        let formatted = chain.parent().is_some_and(|p| p.kind_str() == "interpolation");
        // A conversion whose result is thrown away (`q_backup.to(device)` as a
        // statement, a stray `target.detach()`): nothing flows from it.
        let discarded = chain.id() != n.id()
            && chain.parent().is_some_and(|p| p.kind_str() == "expression_statement")
            && discards_conversion(model, n, chain);
        // Written into in place (`next_q[done] = 0.0`, `x[mask] += 1`): the same
        // tensor, read later under its name; the write hands its graph to nothing.
        let written_into = chain.kind_str() == "subscript"
            && chain.parent().is_some_and(|a| {
                matches!(a.kind_str(), "assignment" | "augmented_assignment")
                    && a.field("left").is_some_and(|l| l.id() == chain.id())
            });
        if discarded || written_into {
            continue;
        }
        let detached = if plotted || displayed || handed_to_detaching_helper(model, n, depth) {
            Some(true)
        } else if chain.id() == n.id() {
            Some(formatted)
        } else {
            match chain_detached(model, n, chain, site) {
                Some(false) if formatted => Some(true),
                d => d,
            }
        };
        match detached {
            Some(true) => reads += 1,
            None => {}
            // Computed on into a detached read: `torch.multinomial(probs, 1).item()`.
            Some(false) if computed_into_detached_read(model, chain, site) => reads += 1,
            // Computed into another name: what becomes of that one.
            Some(false) => match flows_into_assignment(n) {
                Some(q) if depth < 8 && bound_only_read_detached(model, q, body, site, depth + 1, tail_ok) => {
                    reads += 1;
                }
                _ => return None,
            },
        }
    }
    Some(reads)
}

/// Whether the bare name `n` is a positional argument of a call of a plain function of
/// this file that only reads that parameter detached (`view_images(outputs, labels)`
/// whose first line is `imgs = imgs.detach().cpu().numpy()`): the value's graph ends
/// in the helper.
fn handed_to_detaching_helper(model: &SemanticModel<'_>, n: Node<'_>, depth: u32) -> bool {
    let Some(args) = n.parent().filter(|a| a.kind_str() == "argument_list") else {
        return false;
    };
    let Some(call) = args.parent().and_then(|c| model.call_index(c)) else {
        return false;
    };
    let Some(f) = model.callee(call) else {
        return false;
    };
    let sc = model.scope(f);
    if depth >= 4 || sc.class.is_some() || !sc.is_function() {
        return false;
    }
    let Some(i) = model.positional_args(model.calls[call].node).position(|a| a.id() == n.id()) else {
        return false;
    };
    let (Some(&param), Some(body)) = (sc.params.get(i), sc.node.field("body")) else {
        return false;
    };
    // Reads after the parameter is rebound at the top of the body (`imgs = imgs.detach()
    // ...numpy()`) are of the new value.
    let cut = model
        .identifiers_in(param, body.start_byte()..body.end_byte())
        .iter()
        .filter(|&&t| is_assignment_target(t))
        .filter_map(|&t| t.parent().filter(|a| a.kind_str() == "assignment"))
        .find(|a| a.parent().and_then(|s| s.parent()).is_some_and(|b| b.id() == body.id()))
        .map_or(body.end_byte(), |a| a.end_byte());
    let site = Site {
        scope: f,
        loop_: None,
        grad: GradMode::Enabled,
    };
    reads_detached(model, param, body.start_byte()..cut, body, site, depth + 1, false).is_some_and(|r| r > 0)
}

/// Whether a call's value is detached in its own chain of reads
/// (`target_net(s2).max(1)[0].detach()`).
fn detached_at_once(model: &SemanticModel<'_>, call: CallId) -> bool {
    let c = &model.calls[call];
    let top = read_chain(c.node);
    top.id() != c.node.id() && chain_detached(model, c.node, top, c.site) == Some(true)
}

/// Whether the read `n` is backpropagated where it stands: the receiver or an argument
/// of a backward pass (`loss.backward()`, `scaler.scale(loss).backward()`,
/// `accelerator.backward(loss)`, `torch.autograd.grad(loss, xs)`), directly or through
/// arithmetic (`(loss / accum).backward()`).
fn reaches_backward_call(model: &SemanticModel<'_>, n: Node<'_>) -> bool {
    let mut x = n;
    while let Some(p) = x.parent() {
        match p.kind_str() {
            "call" => {
                if model.call_index(p).is_some_and(|i| asks_for_grad(model, i)) {
                    return true;
                }
            }
            "attribute" | "argument_list" | "keyword_argument" | "binary_operator" | "unary_operator"
            | "parenthesized_expression" | "subscript" => {}
            _ => return false,
        }
        x = p;
    }
    false
}

/// Whether one of `bound` (bound by `p`) is read after `body` in the function or module
/// that holds it: a value the region leaves to code after it (`output` reshaped in a
/// branch, its loss taken after the branch).
fn read_after_region<'a>(model: &SemanticModel<'a>, p: Node<'a>, body: Node<'a>, bound: &[&'a str]) -> bool {
    let mut scope = p;
    while let Some(up) = scope.parent() {
        scope = up;
        if matches!(scope.kind_str(), "function_definition" | "lambda") {
            break;
        }
    }
    let from = body.end_byte();
    let to = scope.end_byte().max(from);
    bound
        .iter()
        .any(|&name| model.identifiers_in(name, from..to).iter().any(|&n| !is_assignment_target(n)))
}

/// Where each of `bound` is rebound after assignment `p` by an assignment in the same
/// block (`predict = predict.data.max(1)[1]`): the end of the first such assignment.
fn rebound_at<'a>(model: &SemanticModel<'a>, p: Node<'a>, body: Node<'a>, bound: &[&'a str]) -> Vec<(&'a str, usize)> {
    let block = |a: Node<'a>| a.parent().and_then(|s| s.parent()).map(|b| b.id());
    let mut cuts: Vec<(&'a str, usize)> = Vec::new();
    for &name in bound {
        for &n in model.identifiers_in(name, p.end_byte()..body.end_byte()) {
            if !is_assignment_target(n) {
                continue;
            }
            let mut q = n;
            while let Some(up) = q.parent() {
                q = up;
                if q.kind_str() == "assignment" {
                    break;
                }
            }
            // Statements of one block follow each other: the first rebinding found in
            // source order ends first.
            if q.kind_str() == "assignment" && block(q) == block(p) {
                match cuts.iter_mut().find(|(x, _)| *x == name) {
                    Some(c) => c.1 = c.1.min(q.end_byte()),
                    None => cuts.push((name, q.end_byte())),
                }
                break;
            }
        }
    }
    cuts
}

/// Whether function `f` is evaluation or inference as a whole, and which kind (for the
/// message): its name says so, and for the weaker names a second signal agrees.
fn named_context(
    model: &SemanticModel<'_>,
    fx: &Forwards<'_, '_>,
    f: ScopeId,
) -> Option<&'static str> {
    let s = model.scope(f);
    if names::is_no_grad_hook(s.name) || function_wants_grad(model, Some(f)) {
        return None;
    }
    // Its results feed a backward in a caller (SAC's `evaluate` sampling for the
    // policy loss, a `predict` used by the training loss): part of training.
    // Another file's too (PPO's `evaluate_actions`, whose log-probs the trainer's
    // loss backpropagates).
    if model.callers(f).iter().any(|&c| result_feeds_grad(model, c)) || model.returns_into_backward(f) {
        return None;
    }
    let in_module_class = s.class.is_some_and(|c| model.is_module_class(c));
    if is_eval_function_name(s.name) || is_test_name(s.name) {
        // An eval-named method of a module class (`predict`, `predict_contacts`) is part
        // of the model, usually called from `forward`: not an evaluation entry point.
        if in_module_class {
            return None;
        }
        // `test()` at the end of a model file is often a shape smoke test: ask for a
        // second signal (a loop over data, `.eval()`, an eval loader, a metric).
        if is_test_name(s.name) && !has_eval_signal(model, f) {
            return None;
        }
        return Some("evaluation function");
    }
    if names::is_inference_function_name(s.name) {
        // A module's own `sample`/`generate` counts only when it is a generation loop
        // (a reparameterisation `sample` inside `forward` is training).
        if in_module_class && !has_generation_loop(model, f) {
            return None;
        }
        // A step that another routine of the model runs (`self.sample_latent(...)` in a
        // generation loop, of this file or another): the routine is the entry point,
        // its grad mode the one this runs in.
        if in_module_class
            && (!model.callers(f).is_empty()
                || model.project().is_some_and(|p| p.model_step(s.name)))
        {
            return None;
        }
        // Sampling that keeps graphs for a later backward (REINFORCE's log-probs) is
        // training.
        if stores_graph(model, fx, f) {
            return None;
        }
        return Some("inference function");
    }
    None
}

/// Whether the value of a call is used for gradients: it is bound to a name (or a
/// tuple of names) that flows into a backward (SAC's `evaluate` sampling actions for
/// the policy loss). A preview every N steps of a training loop is not.
fn result_feeds_grad(model: &SemanticModel<'_>, call: CallId) -> bool {
    let c = &model.calls[call];
    let mut n = c.node;
    while let Some(p) = n.parent() {
        match p.kind_str() {
            "assignment" | "augmented_assignment" => {
                let Some(t) = p.field("left") else { break };
                let mut stack = vec![t];
                while let Some(x) = stack.pop() {
                    if matches!(x.kind_str(), "identifier" | "attribute")
                        && model.bound_flows_into_backward(x, p, c.site)
                    {
                        return true;
                    }
                    if matches!(x.kind_str(), "pattern_list" | "tuple_pattern" | "list_pattern" | "parenthesized_expression") {
                        let mut w = x.walk();
                        stack.extend(x.named_children(&mut w));
                    }
                }
                break;
            }
            "expression_statement" | "block" | "module" => break,
            _ => n = p,
        }
    }
    false
}

fn is_test_name(name: &str) -> bool {
    let l = name.trim_start_matches('_').to_ascii_lowercase();
    l == "test" || l.starts_with("test_")
}

/// A loop that generates step by step: a `while` loop or a `for` over `range(...)`, not
/// a loop over the module's own layers (`for block in self.ladders`).
fn has_generation_loop(model: &SemanticModel<'_>, f: ScopeId) -> bool {
    model.loops.iter().any(|l| {
        model.function_of(l.scope) == Some(f)
            && l.iter.is_none_or(|it| {
                let it = unwrap_parens(it);
                it.kind_str() == "call"
                    && it.field("function").is_some_and(|x| model.text(x) == "range")
            })
    })
}

/// A loop over data: a `while` loop (an episode, a decoding loop), a `for` over
/// anything but `range(...)`, or a `range` over a count of data (`range(num_images)`,
/// `range(len(dataset))`); `range(3)` or `range(len(word))` over a toy input is not.
fn is_data_loop(model: &SemanticModel<'_>, l: LoopId) -> bool {
    let Some(it) = model.loop_(l).iter else {
        return true;
    };
    let it = unwrap_parens(it);
    if !(it.kind_str() == "call" && it.field("function").is_some_and(|x| model.text(x) == "range")) {
        return true;
    }
    // `range(3)`, `range(len(word))`: a literal count, or the length of a name that is
    // not data. `range(num_images)`, `range(NUM_MASKS)`, `range(len(dataset))` are.
    let Some(args) = it.field("arguments") else {
        return false;
    };
    let mut c = args.walk();
    let args: Vec<Node<'_>> = args.named_children(&mut c).collect();
    args.iter().any(|&a| {
        let a = unwrap_parens(a);
        match a.kind_str() {
            "integer" | "unary_operator" => false,
            "call" if a.field("function").is_some_and(|f| model.text(f) == "len") => a
                .field("arguments")
                .and_then(|x| x.named_child(0))
                .is_some_and(|x| {
                    let t = model.text(x);
                    let t = t.rsplit('.').next().unwrap_or(t);
                    names::is_data_name(t)
                }),
            _ => true,
        }
    })
}

/// Whether a loop's body ends in an unconditional `break`: it runs at most once (a
/// shape probe on the first batch).
fn runs_once(model: &SemanticModel<'_>, l: LoopId) -> bool {
    let body = model.loop_(l).body;
    let n = body.named_child_count();
    n > 0 && body.named_child((n - 1) as u32).is_some_and(|last| last.kind_str() == "break_statement")
}

/// A second signal that a `test` function evaluates: a loop, `.eval()`, a loop over
/// evaluation data, or a metric (`argmax`, `.eq(...)`, `accuracy`).
fn has_eval_signal(model: &SemanticModel<'_>, f: ScopeId) -> bool {
    let data_loop = model
        .loops
        .ids()
        .any(|l| model.function_of(model.loop_(l).scope) == Some(f) && is_data_loop(model, l));
    data_loop
        || model.calls_of_function(Some(f)).into_iter().any(|i| {
            let c = &model.calls[i];
            let name = match model.method_call(c) {
                Some((_, m)) => m,
                None => model.text(c.function),
            };
            let l = name.to_ascii_lowercase();
            l == "eval" || l == "argmax" || l == "eq" || l.contains("accuracy") || l.contains("metric")
        })
}

/// Whether `f` keeps a graph it produced: appends a model output to a container or
/// stores one on an attribute (saved log-probs for a later policy-gradient step).
fn stores_graph(model: &SemanticModel<'_>, _fx: &Forwards<'_, '_>, f: ScopeId) -> bool {
    // Into a local list: a value known to carry a graph; into an attribute
    // (`policy.saved_log_probs.append(...)`): anything not known to be detached.
    let keeps = model.calls_of_function(Some(f)).into_iter().any(|i| {
        let c = &model.calls[i];
        let Some((recv, m)) = model.method_call(c) else {
            return false;
        };
        let on_attr = unwrap_parens(recv).kind_str() == "attribute";
        matches!(m, "append" | "extend" | "insert")
            && model.positional_args(c.node).any(|a| match model.value(a, c.site) {
                Value::Graph(_) => true,
                Value::Detached => false,
                _ => on_attr,
            })
    });
    keeps
        || model.assignments.iter().any(|a| {
            model.function_of(a.site.scope) == Some(f)
                && unwrap_parens(a.target).kind_str() == "attribute"
                && matches!(model.value(a.value, a.site), Value::Graph(_))
        })
}

/// Whether a forward feeds a gradient computation: a call in the same loop body, or a
/// later call nested in its loop (or, outside loops, later in the function), asks for
/// gradients. A forward
/// in a loop before a later training loop is not exempt (a teacher run to fill a
/// buffer), nor is an evaluation after the step of a training function.
fn wants_grad_here(model: &SemanticModel<'_>, grad_calls: &[CallId], fwd: CallId) -> bool {
    let c = &model.calls[fwd];
    grad_calls.iter().any(|&g| {
        let gc = &model.calls[g];
        // The same loop body (a backward earlier in the body follows the previous
        // iteration's forward), or a later call nested in the forward's loop.
        c.site.loop_.is_some() && gc.site.loop_ == c.site.loop_
            || gc.node.start_byte() > c.node.start_byte()
                && c.site.loop_.is_none_or(|l| model.loop_within(gc.site.loop_, l))
    })
}

/// Which calls run a model forward, seen through same-file helpers and model methods.
struct Forwards<'m, 'a> {
    model: &'m SemanticModel<'a>,
    /// Per function: 0 unknown, 1 in progress, 2 no forward, 3 runs a forward.
    memo: std::cell::RefCell<Vec<u8>>,
    /// Per call, the answer of [`Self::is_forward`]: 0 unknown, 1 no, 2 yes. Each
    /// region of a function asks of every call in it.
    calls: std::cell::RefCell<Vec<u8>>,
    /// Receivers that the file treats as a module: `.eval()`-ed, `.to()`-ed,
    /// `load_state_dict`-ed, called directly. A name that only looks like a model
    /// (`generator` of random numbers, `sim_model` of a search library) is not enough
    /// to make its methods forwards.
    handled_as_module: Vec<&'a str>,
    module_names: Vec<&'a str>,
    /// Modules whose parameters are frozen, by function (`None`: any function).
    frozen: Vec<(Option<Option<ScopeId>>, &'a str)>,
}

impl<'m, 'a> Forwards<'m, 'a> {
    fn new(model: &'m SemanticModel<'a>) -> Self {
        let mut handled_as_module: Vec<&'a str> = model
            .calls
            .iter()
            .filter_map(|c| match model.method_call(c) {
                Some((
                    recv,
                    "eval" | "train" | "to" | "cuda" | "load_state_dict" | "parameters"
                    | "state_dict" | "forward" | "half" | "zero_grad",
                )) => Some(model.text(recv)),
                None if model.value(c.function, c.site) == Value::Module => {
                    Some(model.text(c.function))
                }
                _ => None,
            })
            .collect();
        // What holds a module as an attribute is a module too (`ac.pi.parameters()`:
        // `ac` is an actor-critic whose heads are called as `ac.pi(obs)`).
        let holders: Vec<&'a str> = handled_as_module
            .iter()
            .filter_map(|t| t.rsplit_once('.').map(|(holder, _)| holder))
            .filter(|h| *h != "self" && !h.contains(['(', '[']))
            .collect();
        handled_as_module.extend(holders);
        handled_as_module.sort_unstable();
        handled_as_module.dedup();
        // Names only a module answers to (`G.load_state_dict(...)`, `net.parameters()`,
        // `net.eval()`) or loaded whole with `torch.load(...)`: calling one is a forward
        // even when its class is defined elsewhere.
        let mut module_names: Vec<&'a str> = model
            .calls
            .iter()
            .filter_map(|c| match model.method_call(c) {
                Some((
                    recv,
                    "eval" | "train" | "load_state_dict" | "parameters" | "named_parameters"
                    | "state_dict" | "apply" | "zero_grad" | "modules" | "children",
                )) if recv.kind_str() == "identifier" => Some(model.text(recv)),
                _ => None,
            })
            .chain(model.assignments.iter().filter_map(|a| {
                let v = unwrap_parens(a.value);
                let loaded = v.kind_str() == "call"
                    && v.field("function")
                        .and_then(|f| model.qualified(f))
                        .is_some_and(|q| q.is_torch() && q.last() == Some("load"));
                (loaded && a.target.kind_str() == "identifier").then(|| model.text(a.target))
            }))
            .collect();
        module_names.sort_unstable();
        module_names.dedup();
        Self {
            model,
            memo: std::cell::RefCell::new(vec![0; model.scopes.len()]),
            calls: std::cell::RefCell::new(vec![0; model.calls.len()]),
            handled_as_module,
            module_names,
            frozen: frozen_modules(model),
        }
    }

    /// A call that runs a forward with grad on: `model(x)`, `model.encode(x)` on a
    /// module, or a same-file helper or method that does (`get_pred(x)`,
    /// `agent.select_action(s)`, `run(model)`).
    fn is_forward(&self, call: CallId) -> bool {
        match self.calls.borrow()[crate::semantic::ids::Idx::index(call)] {
            1 => return false,
            2 => return true,
            _ => {}
        }
        // Building a module (`nn.LSTM(3, 5)`) or handing one back (`net.to(device)`)
        // runs nothing. Asked last: the value of a call costs more than the rest.
        let yes = self.may_be_forward(call) && {
            let c = &self.model.calls[call];
            self.model.value(c.node, c.site) != Value::Module
        };
        self.calls.borrow_mut()[crate::semantic::ids::Idx::index(call)] = if yes { 2 } else { 1 };
        yes
    }

    fn may_be_forward(&self, call: CallId) -> bool {
        let m = self.model;
        // A frozen module's methods (`encoder.encode(x)` of a class of this file that
        // froze itself) record no graph either.
        if self.is_frozen(call) {
            return false;
        }
        // A network run as it was just built (a shape demo of an untrained layer) is
        // evaluated by nobody.
        if m.untrained_at(call) {
            return false;
        }
        // A same-file function or method (`self.load_model(...)` included): what it does.
        if let Some(g) = m.callee(call) {
            return self.function_runs_forward(g);
        }
        let c = &m.calls[call];
        // A method the project's classes define running their forwards only under
        // `no_grad` (an agent's `select_action`): no graph, whatever the receiver is.
        if m
            .method_call(c)
            .is_some_and(|(_, meth)| !names::FORWARD_METHODS.contains(&meth) && m.project().is_some_and(|p| p.quiet_method(meth)))
        {
            return false;
        }
        // A forward takes an input: `self.model.merge_adapter()` is a method of the model.
        if c.arguments.is_some_and(|a| a.kind_str() == "argument_list" && a.named_child_count() == 0) {
            return false;
        }
        if is_model_forward(m, call) {
            return true;
        }
        // A helper or module method of another project file that runs a forward.
        if method_defs(m, m.method_call(c).map_or("", |(_, meth)| meth)).next().is_none()
            && project_forward(m, call).is_some()
        {
            return true;
        }
        let f = unwrap_parens(c.function);
        // A name bound to a method of a module (`encode = trainer.gen_a.encode if a2b
        // else trainer.gen_b.encode`): calling it runs that module.
        if f.kind_str() == "identifier" && self.bound_method_of_module(f, c.site) {
            return true;
        }
        // A name some function of the file handles as a module, unless its value here is
        // known to be something else (`generator = pipeline(...)` beside a GAN's
        // `generator.eval()` elsewhere in the file).
        if f.kind_str() == "identifier"
            && self.module_names.contains(&m.text(f))
            && !m.built_by_no_grad_callable(f, c.site)
        {
            return true;
        }
        // A model written as bare trainable tensors: its forward is the tensor math.
        if m.computes_on_raw_trainable(call) {
            return true;
        }
        // A method: with a same-file class defining it, whether that method runs a
        // forward (`agent.select_action(s)` on an agent passed in); on a module defined
        // elsewhere, anything but the module API.
        if let Some((recv, meth)) = m.method_call(c) {
            if names::is_module_api_method(meth) {
                return false;
            }
            // `torch.device(arg)`, `np.mean(x)`: a function of an imported module, no
            // method of a class of the file however it is named.
            if recv.kind_str() == "identifier"
                && m.binding_of(recv, c.site).is_some_and(|b| b.kind == crate::semantic::BindingKind::Import)
            {
                return false;
            }
            // An instance of a known class of the file: its own method decides.
            if let Value::Instance(class) = m.value(recv, c.site) {
                if let Some(g) = m.method_of(class, meth, 0) {
                    return self.function_runs_forward(g);
                }
            }
            let defs: Vec<ScopeId> = method_defs(m, meth).collect();
            if !defs.is_empty() {
                return defs.into_iter().any(|g| self.function_runs_forward(g));
            }
            if m.value(recv, c.site) != Value::Module
                || !self.handled_as_module.contains(&m.text(recv))
                || m.project().is_some_and(|p| p.training_method(meth))
            {
                return false;
            }
            // `self.helper()` in a class whose helper is not in this file: unknown.
            return recv.kind_str() != "identifier" || m.text(recv) != "self";
        }
        false
    }

    /// Whether the name `f` is bound to a method of a module that runs a forward (in
    /// every branch of a conditional expression).
    fn bound_method_of_module(&self, f: Node<'a>, site: crate::semantic::Site) -> bool {
        let m = self.model;
        let Some(b) = m.binding_of(f, site) else {
            return false;
        };
        if b.kind != crate::semantic::BindingKind::Assign || b.index.is_some() {
            return false;
        }
        let Some(v) = b.value.map(unwrap_parens) else {
            return false;
        };
        // What the method does, from its definitions in this file, else from the
        // project's module classes (`encode` of a generator defined elsewhere); an
        // attribute that is no such method (`model.tokenizer`) is not a forward.
        let runs_forward = |meth: &str| {
            let defs: Vec<ScopeId> = method_defs(m, meth).collect();
            if defs.is_empty() {
                m.project().is_some_and(|p| p.forward_method(meth))
            } else {
                // A static helper of the class (no `self`) runs none of its modules.
                defs.into_iter().any(|g| {
                    m.scope(g).params.first().is_some_and(|p| *p == "self") && self.function_runs_forward(g)
                })
            }
        };
        let method = |x: Node<'a>| {
            let x = unwrap_parens(x);
            x.kind_str() == "attribute"
                && x.field("attribute").is_some_and(|a| {
                    let meth = m.text(a);
                    !names::is_module_api_method(meth) && runs_forward(meth)
                })
                && x.field("object").is_some_and(|o| {
                    let t = m.text(unwrap_parens(o));
                    self.handled_as_module.contains(&t) || m.value(o, b.site) == Value::Module
                })
        };
        if v.kind_str() == "conditional_expression" {
            let mut c = v.walk();
            let parts: Vec<Node<'a>> = v.named_children(&mut c).collect();
            // `a if cond else b`: the two values, not the condition.
            parts.len() == 3 && method(parts[0]) && method(parts[2])
        } else {
            method(v)
        }
    }

    /// A call of a module whose parameters are all frozen: on inputs that ask for no
    /// gradient it records no graph.
    fn is_frozen(&self, call: CallId) -> bool {
        let m = self.model;
        let c = &m.calls[call];
        let recv = match m.method_call(c) {
            Some((r, _)) => r,
            None => c.function,
        };
        if m.frozen_module(recv, c.site) {
            return true;
        }
        let t = m.text(unwrap_parens(recv));
        let f = m.function_of(c.site.scope);
        self.frozen
            .iter()
            .any(|&(g, x)| x == t && g.is_none_or(|g| g == f || g.is_none()))
    }

    /// A call taken to be a forward only because it is a method of a module defined
    /// elsewhere.
    fn only_by_method(&self, call: CallId) -> bool {
        let m = self.model;
        m.callee(call).is_none()
            && !is_model_forward(m, call)
            && m.method_call(&m.calls[call]).is_some()
            && !m.computes_on_raw_trainable(call)
            // The project's module classes run a forward in that method
            // (`self.policy.sample(state)`): a forward by what it does, not its name.
            && project_forward(m, call).is_none()
    }

    /// Whether a same-file function runs a forward not under `no_grad` and does not
    /// itself want gradients.
    fn function_runs_forward(&self, f: ScopeId) -> bool {
        let i = crate::semantic::ids::Idx::index(f);
        match self.memo.borrow()[i] {
            1 | 2 => return false,
            3 => return true,
            _ => {}
        }
        self.memo.borrow_mut()[i] = 1;
        let m = self.model;
        let runs = !function_wants_grad(m, Some(f))
            && m.calls_of_function(Some(f)).into_iter().any(|i| {
                let c = &m.calls[i];
                m.function_of(c.site.scope) == Some(f)
                    && c.site.grad != GradMode::Disabled
                    && self.is_forward(i)
            });
        self.memo.borrow_mut()[i] = if runs { 3 } else { 2 };
        runs
    }
}

/// The receiver a forward is called on: `model` in `model(x)` and `model.forward(x)`.
fn callee_root<'a>(model: &SemanticModel<'a>, f: Node<'a>) -> &'a str {
    let f = unwrap_parens(f);
    if f.kind_str() == "attribute"
        && f.field("attribute")
            .is_some_and(|a| names::FORWARD_METHODS.contains(&model.text(a)))
    {
        if let Some(o) = f.field("object") {
            return model.text(o);
        }
    }
    model.text(f)
}

/// Whether function `f` runs forwards (definite ones: a module called) only to read
/// their outputs detached, hands back nothing it computed, asks for no gradient
/// and is no part of a model's own forward: a plot of a decision boundary, a
/// similarity map, an embedding export. Its callers may not use its results for a
/// backward either.
fn detached_only_function<'a>(model: &SemanticModel<'a>, fx: &Forwards<'_, 'a>, f: ScopeId) -> bool {
    let s = model.scope(f);
    if names::is_no_grad_hook(s.name)
        || names::FORWARD_METHODS.contains(&s.name)
        || s.name.starts_with("__")
        || function_wants_grad(model, Some(f))
        || reached_from_forward(model, f)
        || model.callers(f).iter().any(|&c| result_feeds_grad(model, c))
    {
        return false;
    }
    // It hands back nothing it computed: nothing, or what it was given (`return ax`
    // of a plotting helper). A function returning its detached results (an agent's
    // `select_action`) is a step of whatever calls it, and the caller decides.
    // A local bound to a parameter is that parameter (`out = tokens` ... `out["ids"] =
    // torch.cat(...)` ... `return out`: a decoding step extending the dict it was given).
    if !s.returns.iter().all(|&(r, site)| {
        r.kind_str() == "none" || model.holds_parameter(r, site, f)
    }) {
        return false;
    }
    let Some(body) = s.node.field("body") else {
        return false;
    };
    forwards_only_read_detached(model, fx, Some(f), body)
}

/// [`detached_only_function`] for a script's module level: a file that trains nothing
/// anywhere and loads trained weights (a demo or evaluation script that restores a
/// model and runs it on an image), or a notebook that trains nothing (a course's
/// demonstration cells), whose module-level forwards only feed detached reads. In a
/// script without weights loaded, forwards at module level are a model file's shape
/// check under `__main__` or a tutorial's demonstration of an API.
fn detached_only_module<'a>(model: &SemanticModel<'a>, fx: &Forwards<'_, 'a>, notebook: bool) -> bool {
    (loads_weights(model) || notebook)
        && !model.trains()
        && !function_wants_grad(model, None)
        && forwards_only_read_detached(model, fx, None, model.root)
}

/// Whether the file restores trained weights: `torch.load`, `load_state_dict`,
/// `from_pretrained`, Lightning's `load_from_checkpoint`.
fn loads_weights(model: &SemanticModel<'_>) -> bool {
    model.calls.iter_enumerated().any(|(i, c)| {
        model.torch_load(i).is_some()
            || model
                .method_call(c)
                .is_some_and(|(_, m)| matches!(m, "load_state_dict" | "from_pretrained" | "load_from_checkpoint"))
    })
}

/// Whether `node` runs only when the file is executed as a script: inside a
/// module-level `if __name__ == "__main__":`.
fn under_main_guard(model: &SemanticModel<'_>, node: Node<'_>) -> bool {
    let mut n = node;
    while let Some(p) = n.parent() {
        if p.kind_str() == "if_statement"
            && p.parent().is_some_and(|m| m.kind_str() == "module")
            && p.field("condition").is_some_and(|c| {
                let t = model.text(c);
                t.contains("__name__") && t.contains("__main__")
            })
        {
            return true;
        }
        n = p;
    }
    false
}

/// Whether the scope `f` (`None`: module level) trains nothing through another routine
/// and runs at least one forward of its own with grad on, every one read only detached.
fn forwards_only_read_detached<'a>(
    model: &SemanticModel<'a>,
    fx: &Forwards<'_, 'a>,
    f: Option<ScopeId>,
    body: Node<'a>,
) -> bool {
    // Nor does it train through another routine (an agent's rollout acting with the
    // policy, then calling `agent.update()`): acting there is part of training.
    let wants = WantsGrad::new(model);
    let trains = model.calls_of_function(f).into_iter().any(|i| {
        let c = &model.calls[i];
        model.callee(i).is_some_and(|g| wants.function(g))
            || model.method_call(c).is_some_and(|(_, meth)| {
                wants.method(meth)
                    || model.project().is_some_and(|p| p.training_method(meth))
            })
    });
    if trains {
        return false;
    }
    let mut any = false;
    for i in model.calls_of_function(f) {
        let c = &model.calls[i];
        // Its own forwards: a helper's are the helper's to report, where the
        // helper's own facts (a frozen network it loads) are in view.
        if model.function_of(c.site.scope) != f
            || c.site.grad == GradMode::Disabled
            || model.callee(i).is_some()
            || fx.only_by_method(i)
            || !fx.is_forward(i)
        {
            continue;
        }
        if !output_only_detached_in(model, i, body) {
            return false;
        }
        any = true;
    }
    any
}

/// Batches drawn by hand from evaluation data, with the function they are drawn in
/// and the span after the draw to the end of its block: `x, y = next(iter(test_loader))`,
/// `iter(test_iter).next()`, `test_loader.__iter__().next()`, and `next(it)` where `it =
/// iter(val_loader)` earlier in the same scope.
fn eval_draws(model: &SemanticModel<'_>) -> Vec<(Option<ScopeId>, usize, usize)> {
    let mut out = Vec::new();
    for a in model.assignments.iter() {
        let v = unwrap_parens(a.value);
        if v.kind_str() != "call" {
            continue;
        }
        let Some(func) = v.field("function").map(unwrap_parens) else {
            continue;
        };
        // `next(x)` / `x.next()` / `x.__next__()`: what is drawn from is `x`.
        let from = match func.kind_str() {
            "identifier" if model.text(func) == "next" => v
                .field("arguments")
                .and_then(|args| args.named_child(0)),
            "attribute"
                if func
                    .field("attribute")
                    .is_some_and(|m| matches!(model.text(m), "next" | "__next__")) =>
            {
                func.field("object")
            }
            _ => None,
        };
        let Some(from) = from.map(unwrap_parens) else {
            continue;
        };
        let evalish = iterates_eval_loader(model, from)
            || (from.kind_str() == "identifier"
                && model.binding_of(from, a.site).is_some_and(|b| {
                    b.kind == crate::semantic::BindingKind::Assign
                        && b.pos < from.start_byte()
                        && b.value.is_some_and(|x| iterates_eval_loader(model, x))
                }));
        if !evalish {
            continue;
        }
        // The statement's block: the rest of it runs on the batch.
        let mut stmt = a.node;
        while let Some(p) = stmt.parent() {
            if matches!(p.kind_str(), "block" | "module") {
                out.push((model.function_of(a.site.scope), a.node.end_byte(), p.end_byte()));
                break;
            }
            stmt = p;
        }
    }
    out
}

/// `for x, y in val_loader`, `enumerate(tqdm(test_loader))`, `self.val_dataloader()`.
fn iterates_eval_loader(model: &SemanticModel<'_>, iter: Node<'_>) -> bool {
    let mut stack = vec![iter];
    while let Some(n) = stack.pop() {
        match n.kind_str() {
            "identifier" if is_eval_loader_name(model.text(n)) => return true,
            "attribute" => {
                if let Some(a) = n.field("attribute") {
                    if is_eval_loader_name(model.text(a)) {
                        return true;
                    }
                }
                if let Some(o) = n.field("object") {
                    stack.push(o);
                }
            }
            "call" | "argument_list" | "parenthesized_expression" => {
                let mut c = n.walk();
                stack.extend(n.named_children(&mut c));
            }
            _ => {}
        }
    }
    false
}

/// Whether a call asks for gradients: a backward pass, `torch.autograd.grad`,
/// `requires_grad_()`, or a call of a same-file helper that does (the model's fact).
fn asks_for_grad(model: &SemanticModel<'_>, call: CallId) -> bool {
    model.asks_for_grad(call)
}

/// Whether a function asks for gradients itself: it backpropagates, calls
/// `torch.autograd.grad`, or turns `requires_grad` on (saliency, adversarial
/// examples, test-time training).
fn function_wants_grad(model: &SemanticModel<'_>, f: Option<ScopeId>) -> bool {
    for i in model.calls_of_function(f) {
        if asks_for_grad(model, i) {
            return true;
        }
    }
    model.grad_attribute_assignments().iter().any(|&i| {
        let a = &model.assignments[i];
        model.function_of(a.site.scope) == f
            && unwrap_parens(a.target)
                .field("attribute")
                .is_some_and(|x| model.text(x) == "requires_grad")
            && model.text(a.value) == "True"
    })
}

/// Whether a call runs a model forward: `model(x)`, `model.net(x)`, `model.forward(x)`.
fn is_model_forward(model: &SemanticModel<'_>, call: CallId) -> bool {
    let c = &model.calls[call];
    // Handed the module, it is a function about models, except the torch function
    // that runs one (`nn.parallel.data_parallel(net, inputs, gpus)`).
    if model.is_functional_forward(c) {
        return true;
    }
    // A call known to make no graph is no forward worth a finding (a parameterless
    // module built on the spot and applied to fresh tensors).
    if c.site.grad != GradMode::Disabled && model.value(c.node, c.site) == Value::Detached
        || model.is_no_forward_call(c.node, c.site)
    {
        return false;
    }
    if let Some((recv, m)) = model.method_call(c) {
        if names::FORWARD_METHODS.contains(&m) {
            return model.value(recv, c.site) == Value::Module;
        }
        if matches!(m, "generate") {
            return false;
        }
    }
    model.value(c.function, c.site) == Value::Module
}

/// Function names that say evaluation: `evaluate`, `eval_epoch`, `validate`, `val_step`,
/// `test`, `predict`, `infer`, `inference`. pytest's `test_*` functions are tests, not
/// evaluation.
fn is_eval_function_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    let l = l.trim_start_matches('_');
    if l.starts_with("test_") {
        return false;
    }
    l == "evaluate"
        || l.starts_with("eval")
        || l.starts_with("valid")
        || l.starts_with("val_")
        || l == "val"
        || l == "test"
        || l.starts_with("predict")
        || l.starts_with("infer")
}

/// Data loaders of evaluation data: `val_loader`, `valid_dataloader`, `test_loader`,
/// `eval_dataloader`, `self.val_dataloader()`.
fn is_eval_loader_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    let mut parts = l.split('_').filter(|p| !p.is_empty());
    let first = parts.next().unwrap_or("");
    let evalish = matches!(
        first,
        "val" | "valid" | "validation" | "eval" | "evaluation" | "test" | "dev"
    );
    evalish && (l.contains("loader") || l.ends_with("_dl") || l.ends_with("_iter"))
}

/// The flag that guards a statement in its function: the innermost `if` whose branch
/// holds it, as (condition text without `not`, whether the branch runs when it is true).
/// `elif` branches and conditions other than a plain test are not followed.
fn guard_of<'a>(model: &SemanticModel<'a>, node: Node<'a>) -> Option<(&'a str, bool)> {
    let mut n = node;
    while let Some(p) = n.parent() {
        match p.kind_str() {
            "function_definition" | "class_definition" | "module" | "lambda" => return None,
            "if_statement" => {
                let in_then = p.field("consequence").is_some_and(|b| b.id() == n.id());
                let in_else = n.kind_str() == "else_clause";
                if in_then || in_else {
                    let mut cond = unwrap_parens(p.field("condition")?);
                    let mut pol = in_then;
                    while cond.kind_str() == "not_operator" {
                        cond = unwrap_parens(cond.field("argument")?);
                        pol = !pol;
                    }
                    return Some((model.text(cond), pol));
                }
                if n.kind_str() == "elif_clause" {
                    return None;
                }
            }
            _ => {}
        }
        n = p;
    }
    None
}

/// A routine that trains or evaluates behind a flag (`def run_epoch(..., train=True)`
/// with `if train: loss.backward()`): every call in it that asks for gradients is
/// guarded by the same flag, and the function has an evaluation path where the flag
/// makes them unreachable: `.eval()` on a module in the other branch of that flag, or a
/// caller that passes the flag's other value (`run_epoch(model, loader, train=False)`).
/// Returns the flag and whether a caller passes the other value.
fn flag_gate<'a>(
    model: &SemanticModel<'a>,
    f: Option<ScopeId>,
    grad_calls: &[CallId],
) -> Option<((&'a str, bool), bool)> {
    let first = grad_calls.first()?;
    let gate = guard_of(model, model.calls[*first].node)?;
    if grad_calls.iter().any(|&g| guard_of(model, model.calls[g].node) != Some(gate)) {
        return None;
    }
    let evals_other_way = model.calls_of_function(f).into_iter().any(|i| {
        let c = &model.calls[i];
        model.function_of(c.site.scope) == f
            && model.method_call(c).is_some_and(|(recv, m)| {
                m == "eval"
                    && c.arguments.is_some_and(|a| a.named_child_count() == 0)
                    && matches!(model.value(recv, c.site), Value::Module | Value::Instance(_))
            })
            && guard_of(model, c.node) == Some((gate.0, !gate.1))
    });
    if evals_other_way {
        return Some((gate, false));
    }
    // A caller passes the flag's other value, with grad on.
    let f = f?;
    let sc = model.scope(f);
    let pos = sc.params.iter().position(|&p| p == gate.0)?;
    let other = if gate.1 { "False" } else { "True" };
    let called_other_way = model.callers(f).iter().any(|&i| {
        let c = &model.calls[i];
        let by_name = model.keyword_arg(c.node, gate.0);
        let offset = usize::from(sc.self_param().is_some() && c.function.kind_str() == "attribute");
        let by_pos = pos
            .checked_sub(offset)
            .and_then(|k| model.positional_args(c.node).nth(k));
        by_name.or(by_pos).is_some_and(|v| model.text(v) == other) && model.grad_enabled(c.site)
    });
    called_other_way.then_some((gate, true))
}

/// A call into another project file that runs a forward: an imported function that
/// does (`Some(None)`), or a method that the project's module classes run a forward in,
/// on a module (`Some(Some(receiver))`, `vae.inference(n)`).
fn project_forward<'a>(model: &SemanticModel<'a>, call: CallId) -> Option<Option<&'a str>> {
    let p = model.project()?;
    let c = &model.calls[call];
    if model.callee(call).is_some() {
        return None;
    }
    let f = unwrap_parens(c.function);
    if f.kind_str() == "identifier" {
        return p.forward_import(model.text(f)).then_some(None);
    }
    let (recv, meth) = model.method_call(c)?;
    (p.forward_method(meth) && model.value(recv, c.site) == Value::Module)
        .then(|| Some(model.text(recv)))
}

/// Modules whose parameters are all frozen: `for p in net.parameters(): p.requires_grad
/// = False`, or `net.requires_grad_(False)`, by the function that does it; and
/// `self.net = self.load()` where `load` returns a module it froze (for any function).
/// A module that the file also unfreezes (a GAN's critic, frozen only for the
/// generator's step) is not frozen.
fn frozen_modules<'a>(model: &SemanticModel<'a>) -> Vec<(Option<Option<ScopeId>>, &'a str)> {
    let mut out: Vec<(Option<Option<ScopeId>>, &'a str)> = Vec::new();
    let mut thawed: Vec<&'a str> = Vec::new();
    for &i in model.grad_attribute_assignments() {
        let a = &model.assignments[i];
        let t = unwrap_parens(a.target);
        if t.field("attribute").is_none_or(|x| model.text(x) != "requires_grad") {
            continue;
        }
        let frozen = model.text(a.value) == "False";
        let Some(l) = a.site.loop_ else { continue };
        let lp = model.loop_(l);
        let var = lp.node.field("left").map(|v| model.text(v));
        let Some(it) = lp.iter.map(unwrap_parens).filter(|it| it.kind_str() == "call") else {
            continue;
        };
        let Some(f) = it.field("function").filter(|f| f.kind_str() == "attribute") else {
            continue;
        };
        if f.field("attribute").is_some_and(|a| model.text(a) == "parameters")
            && t.field("object").map(|o| model.text(o)) == var
        {
            if let Some(o) = f.field("object") {
                if frozen {
                    out.push((Some(model.function_of(lp.scope)), model.text(o)));
                } else {
                    thawed.push(model.text(o));
                }
            }
        }
    }
    for c in &model.calls {
        if let Some((recv, "requires_grad_")) = model.method_call(c) {
            if model.positional_args(c.node).next().is_some_and(|a| model.text(a) == "False") {
                out.push((Some(model.function_of(c.site.scope)), model.text(recv)));
            } else {
                thawed.push(model.text(recv));
            }
        }
    }
    out.retain(|(_, x)| !thawed.contains(x));
    let returned: Vec<&'a str> = model
        .assignments
        .iter()
        .filter_map(|a| {
            let t = unwrap_parens(a.target);
            let v = unwrap_parens(a.value);
            if t.kind_str() != "attribute" || v.kind_str() != "call" {
                return None;
            }
            let g = model.callee(model.call_index(v)?)?;
            model
                .scope(g)
                .returns
                .iter()
                .any(|&(r, _)| out.contains(&(Some(Some(g)), model.text(r))))
                .then(|| model.text(t))
        })
        .collect();
    out.extend(returned.into_iter().map(|t| (None, t)));
    out
}

/// Whether method `f` of a module class is `forward` or is called from it (through up
/// to three methods of the class).
fn reached_from_forward(model: &SemanticModel<'_>, f: ScopeId) -> bool {
    let Some(class) = model.scope(f).class.filter(|&c| model.is_module_class(c)) else {
        return false;
    };
    let mut frontier = vec![f];
    for _ in 0..4 {
        let mut next = Vec::new();
        for g in frontier {
            if names::FORWARD_METHODS.contains(&model.scope(g).name) {
                return true;
            }
            for &c in model.callers(g) {
                if let Some(h) = model.function_of(model.calls[c].site.scope) {
                    if model.scope(h).class == Some(class) && h != g {
                        next.push(h);
                    }
                }
            }
        }
        frontier = next;
    }
    false
}

/// Whether an identifier is (part of) the target of an assignment or a `for`:
/// `out = ...`, `obs, _ = env.step(a)`.
fn is_assignment_target(n: Node<'_>) -> bool {
    let mut x = n;
    while let Some(q) = x.parent() {
        match q.kind_str() {
            "pattern_list" | "tuple_pattern" | "list_pattern" => x = q,
            "assignment" | "for_statement" => {
                return q.field("left").is_some_and(|t| t.id() == x.id());
            }
            _ => return false,
        }
    }
    false
}
