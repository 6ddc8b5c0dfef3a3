use crate::prelude::*;
use crate::semantic::NodeExt;
use crate::semantic::{unwrap_parens, AssignOp, Node};

declare_rule! {
    /// ## What it does
    /// Flags a running total that lives across iterations (`total += loss`,
    /// `total = total + loss`, `self.running -= loss`) being accumulated from a tensor
    /// that carries its autograd graph, with grad enabled.
    ///
    /// ## Why is this bad?
    /// `total + loss` is a new tensor whose graph links to both operands, so the total
    /// chains every iteration's graph to the next: nothing that any step produced can be
    /// freed until the total dies. It is the classic "memory grows every epoch" bug of
    /// loss logging; with model outputs (`total += out.sum()` in an evaluation loop) it
    /// keeps every activation too.
    ///
    /// Not flagged: `loss.item()`/`loss.detach()`, code under `torch.no_grad()`, totals
    /// created fresh in the same iteration, and a total that is itself backpropagated
    /// later (summing several losses before one `backward()` is intended).
    ///
    /// ## Example
    /// ```python
    /// total_loss = 0.0
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     optimizer.zero_grad()
    ///     total_loss += loss  # chains every step's graph
    /// ```
    ///
    /// ## How to fix
    /// Accumulate a Python number (or a detached tensor, to avoid a device sync per step):
    /// ```python
    ///     total_loss += loss.item()
    ///     total_loss += loss.detach()
    /// ```
    ///
    /// ## Fix safety
    /// Every finding has a fix. It is safe (`.item()`) when the total is only ever read
    /// as a number afterwards (arithmetic, comparisons, f-strings, `print`, `float`,
    /// a logger's scalar such as `self.log` or `add_scalar`) and the accumulated value
    /// is provably one element (a reduction such as `.mean()`, a loss function's result
    /// without `reduction="none"`, `outputs.loss`, what `backward()` is called on):
    /// the program then computes the same numbers. Otherwise it is unsafe (`.detach()`):
    /// the total stays a tensor but no longer requires grad, which code that returns it
    /// or calls tensor methods on it might notice.
    pub static UNDETACHED_LOSS_ACCUMULATE = Rule {
        code: "OOM202",
        name: "undetached-loss-accumulate",
        severity: Severity::Error,
        fix: FixAvailability::Always,
        check,
        prefilter: |s| s.graph_source() && s.per_step_context(),
        parts: Some(|s| s.graph_source() && (s.for_loop || s.per_step_context())),
    };
}

fn check(model: &SemanticModel<'_>, _cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for a in &model.assignments {
        let target = unwrap_parens(a.target);
        if !matches!(target.kind_str(), "identifier" | "attribute") {
            continue;
        }
        let added = match a.op {
            AssignOp::Augmented("+=" | "-=") => {
                // `losses += [loss]` is an append (OOM201), not a sum.
                if matches!(unwrap_parens(a.value).kind_str(), "list" | "tuple") {
                    continue;
                }
                a.value
            }
            AssignOp::Plain => {
                // `total = total + loss` / `total = loss + total`
                let v = unwrap_parens(a.value);
                if v.kind_str() != "binary_operator" {
                    continue;
                }
                let op = v.field("operator").map(|o| model.text(o));
                if !matches!(op, Some("+" | "-")) {
                    continue;
                }
                let (Some(l), Some(r)) = (v.field("left"), v.field("right")) else {
                    continue;
                };
                let t = model.text(target);
                if model.text(unwrap_parens(l)) == t {
                    r
                } else if model.text(unwrap_parens(r)) == t && op == Some("+") {
                    l
                } else {
                    continue;
                }
            }
            _ => continue,
        };
        let Value::Graph(origin) = model.value(added, a.site) else {
            continue;
        };
        if !model.keeps_graph_alive(target, a.site) {
            continue;
        }
        let name = model.text(target);
        // `epoch_total += total`: the graph comes from another accumulation.
        let related = model
            .graph_accumulation(added, a.site)
            .filter(|stmt| *stmt != a.node)
            .map(|stmt| Related {
                range: model.range(stmt),
                message: built_up_by(model.text(stmt)),
            })
            .into_iter()
            .collect();
        let what = match origin {
            Origin::Loss => "a loss",
            Origin::Output => "a model output",
        };
        out.push(Diagnostic {
            range: model.range(a.node),
            message: format!(
                "`{name}` accumulates {what} with its autograd graph, chaining every iteration's graph together"
            ),
            help: format!(
                "accumulate {} for logging, or `.detach()` it to keep a tensor",
                item_of(model.text(unwrap_parens(added)))
            ),
            pattern: Pattern::AccumulateGraph { origin },
            fix: Some(detach_fix(
                model,
                added,
                model.read_only_as_number(target, a.site) && model.is_scalar(added, a.site),
            )),
            related,
        });
    }
}

/// `x.item()` when `safe` (the total is only read as a number and `x` is one element),
/// else `x.detach()`, which keeps a tensor (on its device, without the graph) but may
/// change what later code sees: its `requires_grad`, and a tensor where a number was.
fn detach_fix(model: &SemanticModel<'_>, value: Node<'_>, safe: bool) -> Fix {
    let v = unwrap_parens(value);
    let method = if safe { ".item()" } else { ".detach()" };
    let edits = model.call_on(value, method);
    let shown = item_of(model.text(v)).replace(".item()", method);
    if safe {
        Fix::safe(format!("Accumulate {shown}"), edits)
    } else {
        Fix::unsafe_(format!("Accumulate {shown}"), edits)
    }
}

/// `loss.item()`, `(loss * n).item()`, or a description when the expression is long.
fn item_of(s: &str) -> String {
    let simple = s
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"_.[]()\"',".contains(&c));
    if simple && s.len() <= 40 {
        format!("`{s}.item()`")
    } else if s.len() <= 40 && !s.contains('\n') {
        format!("`({s}).item()`")
    } else {
        "the value's `.item()`".to_owned()
    }
}

/// The note on a value whose graph an accumulation builds up; the statement is quoted
/// when it is short and on one line (the note gives its location either way).
fn built_up_by(stmt: &str) -> String {
    if stmt.len() <= 60 && !stmt.contains('\n') {
        format!("its graph is built up by `{stmt}`")
    } else {
        "its graph is built up by an accumulation".to_owned()
    }
}
