//! What memory a finding costs, as a typed value the rule sets from the facts it holds.
//!
//! `confirm` measures a finding by its pattern (and the fixes will edit by it); nothing
//! downstream of a rule reads the wording of its message.

use serde::{Deserialize, Serialize};

/// Where an autograd graph comes from: a loss (its graph only, once `backward()` has
/// freed the activations) or a model output (the graph and every activation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Loss,
    Output,
}

/// The memory pattern behind a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pattern {
    /// Gradients summed over every backward because they are never reset.
    NoZeroGrad,
    /// A graph-carrying tensor kept in a container that outlives the iteration.
    KeepGraph { origin: Origin },
    /// A running total chaining every iteration's graph together.
    AccumulateGraph { origin: Origin },
    /// Forwards run with autograd on where no gradient is wanted.
    GradEnabledEval,
    /// A conversion to the dtype the weights already have.
    RedundantDtype,
    /// A converted copy made while the original stays referenced.
    DtypeCopy,
    /// A move to the device the weights are already on.
    RedundantDevice,
    /// A move of the whole model repeated on every iteration of a loop.
    DeviceMoveInLoop,
    /// A second placement of weights that `device_map` already placed.
    DeviceCopy,
    /// A backward pass that keeps its graph although no later pass uses it.
    RetainGraph,
    /// Evaluation outputs collected on the accelerator across the whole loader.
    EvalOutputsOnDevice,
    /// Weights loaded in one dtype, then converted to another.
    LoadThenConvert,
    /// A checkpoint loaded onto the device it was saved from.
    CheckpointOnDevice,
    /// Every batch padded to the maximum length.
    PadToMaxLength,
    /// No memory at all: a `# noqa` comment that suppresses nothing (unused-noqa).
    UnusedSuppression,
}

impl Pattern {
    /// Every memory pattern, one of each shape (for the confirm table and its test);
    /// [`Pattern::UnusedSuppression`] costs no memory and is not among them.
    pub const ALL: &'static [Pattern] = &[
        Pattern::NoZeroGrad,
        Pattern::KeepGraph {
            origin: Origin::Loss,
        },
        Pattern::KeepGraph {
            origin: Origin::Output,
        },
        Pattern::AccumulateGraph {
            origin: Origin::Loss,
        },
        Pattern::AccumulateGraph {
            origin: Origin::Output,
        },
        Pattern::GradEnabledEval,
        Pattern::RedundantDtype,
        Pattern::DtypeCopy,
        Pattern::RedundantDevice,
        Pattern::DeviceMoveInLoop,
        Pattern::DeviceCopy,
        Pattern::RetainGraph,
        Pattern::EvalOutputsOnDevice,
        Pattern::LoadThenConvert,
        Pattern::CheckpointOnDevice,
        Pattern::PadToMaxLength,
    ];

    /// A short human description, for the README's confirm table.
    pub fn describe(self) -> &'static str {
        match self {
            Pattern::NoZeroGrad => "gradients never reset",
            Pattern::KeepGraph {
                origin: Origin::Loss,
            } => "a loss kept with its graph",
            Pattern::KeepGraph {
                origin: Origin::Output,
            } => "a model output kept with its graph and activations",
            Pattern::AccumulateGraph {
                origin: Origin::Loss,
            } => "a running total of losses with their graphs",
            Pattern::AccumulateGraph {
                origin: Origin::Output,
            } => "a running total of model outputs with their graphs",
            Pattern::GradEnabledEval => "evaluation with autograd on",
            Pattern::RedundantDtype => "a conversion to the dtype the model already has",
            Pattern::DtypeCopy => "a converted copy beside the original",
            Pattern::RedundantDevice => "a move to the device the model is already on",
            Pattern::DeviceMoveInLoop => "the whole model moved on every iteration",
            Pattern::DeviceCopy => "a move of weights `device_map` already placed",
            Pattern::RetainGraph => "a graph retained after its last backward",
            Pattern::EvalOutputsOnDevice => "evaluation outputs collected on the device",
            Pattern::LoadThenConvert => "weights loaded in one dtype, then converted",
            Pattern::CheckpointOnDevice => "a checkpoint loaded onto the device it was saved from",
            Pattern::PadToMaxLength => "batches padded to the maximum length",
            Pattern::UnusedSuppression => "a suppression comment that suppresses nothing",
        }
    }
}
