//! `oomlint confirm`: measure what each finding really costs, with libtorch.
//!
//! A static finding says "this pattern can leak". For each distinct scenario that the
//! findings call for, `confirm` runs a small harness twice, **as flagged** and **as
//! fixed**, on a model of the sizes given (or the user's TorchScript module), measures
//! the memory of both in the same run, and attaches a verdict to every finding:
//! `confirmed` (with the figures), `not confirmed` (the difference is within noise: the
//! figures say so) or `skipped` (why).
//!
//! The flow stays one-way: the static check produces findings, this module produces a
//! [`Confirmations`] table beside them, and the renderers print both. Each variant runs
//! in a child process (the binary re-invoked through the hidden `__scenario`
//! subcommand), so a libtorch abort or an out-of-memory cannot take the run down: an OOM
//! in the flagged variant is itself a confirmation.
//!
//! Only the child side ([`harness`]) and the process orchestration need libtorch; they
//! are built with the cargo feature `dynamic`. The options, the scenario choice, the
//! verdict arithmetic and the output types are always built (and unit-tested by the
//! plain `cargo test`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::pattern::{Origin, Pattern};
use crate::report::{FileReport, Finding};

#[cfg(feature = "dynamic")]
mod ffi;
#[cfg(feature = "dynamic")]
mod harness;
#[cfg(feature = "dynamic")]
mod parent;
pub mod verdict;

pub use verdict::{format_bytes, slope};

/// Whether this binary was built with the `dynamic` feature (libtorch).
pub const AVAILABLE: bool = cfg!(feature = "dynamic");

/// What `oomlint confirm` says in a build without the `dynamic` feature.
pub const NOT_BUILT: &str = "`oomlint confirm` needs libtorch: this oomlint was built without the `dynamic` feature.
Build it with libtorch 2.11.0 from the PyPI wheel (no Python import needed):
  python3 -m venv .torch
  .torch/bin/pip install --no-deps torch==2.11.0 \"nvidia-cuda-runtime==13.0.96.*\" \"nvidia-cuda-cupti==13.0.85.*\"
  export LIBTORCH=$PWD/.torch/lib/python3.11/site-packages/torch
  cargo build --release --features dynamic";

/// Warm-up iterations before any figure is taken (allocator caches, thread pools).
pub const WARMUP: u32 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// The first CUDA GPU when libtorch finds one, else the CPU.
    Auto,
    /// The first CUDA GPU; an error when there is none.
    Cuda,
    /// The CPU (live heap bytes through mallinfo2).
    Cpu,
}

/// An input shape such as `32x3x224x224`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shape(pub Vec<i64>);

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        f.write_str(&parts.join("x"))
    }
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    let dims: Result<Vec<i64>, _> = s
        .split(['x', 'X', ','])
        .map(|d| match d.trim().parse::<i64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "`{d}` is not a positive dimension (expected e.g. 32x3x224x224)"
            )),
        })
        .collect();
    let dims = dims?;
    if dims.is_empty() {
        return Err("empty shape".to_owned());
    }
    Ok(Shape(dims))
}

/// The sizes and the device of the measurement: the options of `oomlint confirm`,
/// passed on unchanged to each scenario's child process.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmOptions {
    /// Where to measure.
    #[arg(long, value_enum, default_value = "auto", help_heading = "Measurement")]
    pub device: DeviceChoice,
    /// Measured iterations per variant (after 10 warm-up iterations).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(3..=100_000), help_heading = "Measurement")]
    pub iterations: u32,
    /// Batch size of the built-in model's input.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Measurement")]
    pub batch: i64,
    /// Sequence length of the built-in model's input.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Measurement")]
    pub seq: i64,
    /// Hidden size of the built-in model (attention and MLP blocks).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Measurement")]
    pub hidden: i64,
    /// Number of blocks of the built-in model.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(i64).range(1..), help_heading = "Measurement")]
    pub layers: i64,
    /// A TorchScript module (`torch.jit.trace(...).save(path)`) to measure instead of the built-in model.
    #[arg(
        long,
        value_name = "PATH",
        requires = "input_shape",
        help_heading = "Measurement"
    )]
    pub model: Option<PathBuf>,
    /// The input shape for --model, e.g. 32x3x224x224 (a float tensor).
    #[arg(long, value_name = "SHAPE", value_parser = parse_shape, requires = "model", help_heading = "Measurement")]
    pub input_shape: Option<Shape>,
}

impl ConfirmOptions {
    /// The command-line arguments that reproduce these options (for a child process).
    pub fn to_args(&self) -> Vec<String> {
        let device = match self.device {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Cuda => "cuda",
            DeviceChoice::Cpu => "cpu",
        };
        let mut a = vec![
            format!("--device={device}"),
            format!("--iterations={}", self.iterations),
            format!("--batch={}", self.batch),
            format!("--seq={}", self.seq),
            format!("--hidden={}", self.hidden),
            format!("--layers={}", self.layers),
        ];
        if let (Some(m), Some(s)) = (&self.model, &self.input_shape) {
            a.push("--model".to_owned());
            a.push(m.to_string_lossy().into_owned());
            a.push(format!("--input-shape={s}"));
        }
        a
    }

    /// The sizes, as reported with each confirmation.
    pub fn sizes(&self) -> Sizes {
        match (&self.model, &self.input_shape) {
            (Some(m), Some(s)) => Sizes::Model {
                model: m.to_string_lossy().into_owned(),
                input_shape: s.0.clone(),
            },
            _ => Sizes::Builtin {
                batch: self.batch,
                seq: self.seq,
                hidden: self.hidden,
                layers: self.layers,
            },
        }
    }
}

/// The model a scenario ran on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Sizes {
    Builtin {
        batch: i64,
        seq: i64,
        hidden: i64,
        layers: i64,
    },
    Model {
        model: String,
        input_shape: Vec<i64>,
    },
}

impl std::fmt::Display for Sizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sizes::Builtin {
                batch,
                seq,
                hidden,
                layers,
            } => write!(
                f,
                "batch {batch}, seq {seq}, hidden {hidden}, {layers} layer{}",
                if *layers == 1 { "" } else { "s" }
            ),
            Sizes::Model { model, input_shape } => {
                write!(f, "{model}, input {}", Shape(input_shape.clone()))
            }
        }
    }
}

/// The two variants of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Flagged,
    Fixed,
}

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Live bytes that stay after each iteration (the slope over the measured iterations).
    RetainedPerIteration,
    /// The peak during the steps, above the live bytes before them.
    ExtraPeak,
    /// Live bytes that stay once the conversion is done, above those before it.
    ExtraRetained,
}

/// A harness scenario: one pattern that rules flag, runnable as flagged and as fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Training loop appending the loss with its graph, vs `.item()`.
    KeepLoss,
    /// Training loop summing the loss into a running total with its graph, vs `.item()`.
    AccumulateLoss,
    /// Loop keeping model outputs with their graph, vs `.detach()`.
    KeepOutput,
    /// Loop summing model outputs into a total with their graph, vs `.item()`.
    AccumulateOutput,
    /// Evaluation loop collecting outputs with grad enabled, vs under no_grad.
    EvalGrad,
    /// Optimizer steps without zero_grad, vs zero_grad(set_to_none=True).
    NoZeroGrad,
    /// Weights converted to float16 into new tensors while the float32 originals stay, vs in place.
    DtypeCopy,
    /// A conversion to the dtype the weights already have, vs none.
    DtypeRedundant,
    /// A second copy of the weights made on the device while the first stays, vs one moved in place.
    DeviceCopy,
    /// A move to the device the weights are already on, vs none.
    DeviceRedundant,
    /// Training steps whose backward keeps the graph until the next step, vs frees it.
    RetainGraph,
    /// Evaluation keeping every batch's outputs on the device, vs reduced and moved to the CPU.
    EvalOutputsOnDevice,
    /// Weights created in float32 then converted to float16, vs created in float16.
    LoadThenConvert,
    /// A checkpoint read into fresh tensors on the device beside the model, vs memory-mapped on the CPU.
    CheckpointOnDevice,
    /// Training steps on batches padded to 4x the sequence length, vs padded to the longest.
    PadToMaxLength,
}

impl Scenario {
    /// The scenario that measures a pattern; `None` for a pattern that costs no memory.
    /// Exhaustive: a new `Pattern` does not compile until it has a scenario (or says it
    /// has none).
    pub fn of(pattern: Pattern) -> Option<Scenario> {
        Some(match pattern {
            Pattern::NoZeroGrad => Scenario::NoZeroGrad,
            Pattern::KeepGraph {
                origin: Origin::Loss,
            } => Scenario::KeepLoss,
            Pattern::KeepGraph {
                origin: Origin::Output,
            } => Scenario::KeepOutput,
            Pattern::AccumulateGraph {
                origin: Origin::Loss,
            } => Scenario::AccumulateLoss,
            Pattern::AccumulateGraph {
                origin: Origin::Output,
            } => Scenario::AccumulateOutput,
            Pattern::GradEnabledEval => Scenario::EvalGrad,
            Pattern::RedundantDtype => Scenario::DtypeRedundant,
            Pattern::DtypeCopy => Scenario::DtypeCopy,
            Pattern::RedundantDevice | Pattern::DeviceMoveInLoop => Scenario::DeviceRedundant,
            Pattern::DeviceCopy => Scenario::DeviceCopy,
            Pattern::RetainGraph => Scenario::RetainGraph,
            Pattern::EvalOutputsOnDevice => Scenario::EvalOutputsOnDevice,
            Pattern::LoadThenConvert => Scenario::LoadThenConvert,
            Pattern::CheckpointOnDevice => Scenario::CheckpointOnDevice,
            Pattern::PadToMaxLength => Scenario::PadToMaxLength,
            Pattern::UnusedSuppression => return None,
        })
    }

    /// The scenario that measures a finding: the one of its pattern.
    pub fn for_finding(f: &Finding) -> Option<Scenario> {
        Scenario::of(f.pattern)
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::KeepLoss => "keep-loss",
            Scenario::AccumulateLoss => "accumulate-loss",
            Scenario::KeepOutput => "keep-output",
            Scenario::AccumulateOutput => "accumulate-output",
            Scenario::EvalGrad => "eval-grad",
            Scenario::NoZeroGrad => "no-zero-grad",
            Scenario::DtypeCopy => "dtype-copy",
            Scenario::DtypeRedundant => "dtype-redundant",
            Scenario::DeviceCopy => "device-copy",
            Scenario::DeviceRedundant => "device-redundant",
            Scenario::RetainGraph => "retain-graph",
            Scenario::EvalOutputsOnDevice => "eval-outputs-on-device",
            Scenario::LoadThenConvert => "load-then-convert",
            Scenario::CheckpointOnDevice => "checkpoint-on-device",
            Scenario::PadToMaxLength => "pad-to-max-length",
        }
    }

    pub fn metric(self) -> Metric {
        match self {
            Scenario::KeepLoss
            | Scenario::AccumulateLoss
            | Scenario::KeepOutput
            | Scenario::AccumulateOutput
            | Scenario::EvalGrad
            | Scenario::EvalOutputsOnDevice => Metric::RetainedPerIteration,
            Scenario::NoZeroGrad
            | Scenario::RetainGraph
            | Scenario::PadToMaxLength
            | Scenario::LoadThenConvert
            | Scenario::CheckpointOnDevice => Metric::ExtraPeak,
            Scenario::DtypeCopy
            | Scenario::DtypeRedundant
            | Scenario::DeviceCopy
            | Scenario::DeviceRedundant => Metric::ExtraRetained,
        }
    }

    /// Whether the scenario loops over iterations (the others convert or load once).
    pub fn iterates(self) -> bool {
        !matches!(
            self,
            Scenario::DtypeCopy
                | Scenario::DtypeRedundant
                | Scenario::DeviceCopy
                | Scenario::DeviceRedundant
                | Scenario::LoadThenConvert
                | Scenario::CheckpointOnDevice
        )
    }

    /// What the two variants do, in a few words each.
    pub fn variants(self) -> (&'static str, &'static str) {
        match self {
            Scenario::KeepLoss => (
                "training loop appending the loss with its graph",
                "appending `loss.item()`",
            ),
            Scenario::AccumulateLoss => (
                "training loop with `total += loss`",
                "`total += loss.item()`",
            ),
            Scenario::KeepOutput => (
                "loop keeping each output with its graph",
                "keeping `output.detach()`",
            ),
            Scenario::AccumulateOutput => (
                "loop with `total += output.sum()`",
                "`total += output.sum().item()`",
            ),
            Scenario::EvalGrad => (
                "evaluation loop collecting outputs with grad enabled",
                "the same under `torch.no_grad()`",
            ),
            Scenario::NoZeroGrad => (
                "optimizer steps without `zero_grad()`",
                "`zero_grad(set_to_none=True)` each step",
            ),
            Scenario::DtypeCopy => (
                "weights converted to float16 into new tensors, float32 originals kept",
                "converted in place",
            ),
            Scenario::DtypeRedundant => (
                "float16 weights converted to float16 again",
                "no conversion",
            ),
            Scenario::DeviceCopy => (
                "a second copy of the weights made on the device, the first kept",
                "moved in place",
            ),
            Scenario::DeviceRedundant => {
                ("weights moved to the device they are already on", "no move")
            }
            Scenario::RetainGraph => (
                "training steps with `backward(retain_graph=True)`, the loss kept until the next step",
                "`backward()`",
            ),
            Scenario::EvalOutputsOnDevice => (
                "evaluation under no_grad keeping every batch's outputs on the device",
                "keeping `output.argmax(-1).cpu()`",
            ),
            Scenario::LoadThenConvert => (
                "weights created in float32, then converted to float16",
                "created in float16",
            ),
            Scenario::CheckpointOnDevice => (
                "a checkpoint read into new tensors on the device, then copied into the model",
                "memory-mapped on the CPU (`map_location=\"cpu\", mmap=True`), then copied",
            ),
            Scenario::PadToMaxLength => (
                "training steps on batches padded to 4x the sequence length",
                "padded to the sequence length",
            ),
        }
    }
}

impl Metric {
    /// What the figure is, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Metric::RetainedPerIteration => "bytes retained per iteration",
            Metric::ExtraPeak => "extra peak during the steps",
            Metric::ExtraRetained => "bytes kept after the conversion or move",
        }
    }
}

/// The README's confirm table, generated from [`Scenario::of`]: which scenario measures
/// each pattern, what its two variants run and which figure decides.
pub fn markdown_table() -> String {
    let mut s = String::from(
        "| Pattern | Scenario | As flagged | As fixed | Figure |\n| --- | --- | --- | --- | --- |\n",
    );
    for &p in Pattern::ALL {
        let Some(sc) = Scenario::of(p) else { continue };
        let (flagged, fixed) = sc.variants();
        s.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            p.describe(),
            sc.name(),
            flagged,
            fixed,
            sc.metric().describe()
        ));
    }
    s
}

/// The verdict on one finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The flagged variant costs clearly more memory than the fixed one.
    Confirmed,
    /// The measured difference is within noise.
    NotConfirmed,
    /// Not measured (no scenario for the rule, or the harness failed).
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Confirmed => "confirmed",
            Verdict::NotConfirmed => "not confirmed",
            Verdict::Skipped => "skipped",
        }
    }
}

/// Where a child ran and how it measured: reported by the probe and by every scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// `cpu`, or `cuda:0`.
    pub device: String,
    /// A name for people: `CPU` or the GPU's name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// What the bytes are: `live heap (mallinfo2)` or `CUDA caching allocator, allocated bytes`.
    pub memory: String,
    /// The device's free and total memory before the scenario (CUDA only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// Why CUDA was not used under `--device auto`, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a child measured for one variant: raw figures, sent to the parent as JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Live bytes before the measured part (after the warm-up, or before the conversion).
    pub baseline_bytes: i64,
    /// Live bytes after each measured iteration (after each converted tensor).
    pub samples: Vec<i64>,
    /// Live bytes at the end.
    pub final_bytes: i64,
    /// The highest live bytes during the measured part (on the CPU: the highest sample,
    /// taken after each forward, backward and iteration; on CUDA: the allocator's peak).
    pub peak_bytes: i64,
    /// Bytes of the model's parameters.
    pub param_bytes: i64,
    /// On a GPU: the host's live heap after each measured iteration too (autograd's
    /// graph nodes live in host memory whatever the device).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_samples: Vec<i64>,
    /// Gradient norm after each optimizer step (no-zero-grad only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grad_norms: Vec<f64>,
    /// The iteration (0-based, warm-up included) that ran out of memory, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_at_iteration: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_message: Option<String>,
}

/// One variant's figures as reported in a confirmation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantFigures {
    /// What this variant does.
    pub runs: &'static str,
    /// The figure the verdict compares (bytes per iteration, or bytes).
    pub value_bytes: f64,
    #[serde(flatten)]
    pub measurement: Measurement,
    /// Last gradient norm over the first (no-zero-grad only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_norm_growth: Option<f64>,
}

/// The measurement attached to a finding in `oomlint confirm`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Confirmation {
    pub verdict: Verdict,
    /// The line printed under the diagnostic (without the verdict and device).
    pub summary: String,
    pub scenario: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// The device, for people (`CPU`, `NVIDIA H100 80GB HBM3`).
    pub device: String,
    /// How bytes were counted.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub memory: String,
    pub sizes: Sizes,
    pub warmup_iterations: u32,
    pub iterations: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flagged: Option<VariantFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<VariantFigures>,
    /// Flagged minus fixed, in the metric's unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_bytes: Option<f64>,
    /// The smallest difference counted as real (noise floor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_total_bytes: Option<u64>,
    /// At the measured rate, the iteration after which the device's free memory is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_after_iterations: Option<u64>,
}

impl Confirmation {
    /// The line shown under a diagnostic in text output.
    pub fn line(&self) -> String {
        let on = if self.device.is_empty() {
            String::new()
        } else {
            format!(" on {}", self.device)
        };
        format!("{}{on}: {}", self.verdict.as_str(), self.summary)
    }

    /// What was measured, in one line (text output prints it below [`Self::line`]).
    pub fn measured(&self) -> Option<String> {
        let (flagged, fixed) = (self.flagged.as_ref()?, self.fixed.as_ref()?);
        let once = <Scenario as clap::ValueEnum>::value_variants()
            .iter()
            .find(|s| s.name() == self.scenario)
            .is_some_and(|s| !s.iterates());
        let runs = if once {
            String::new()
        } else {
            format!(
                "; {} iterations after {} warm-up",
                self.iterations, self.warmup_iterations
            )
        };
        Some(format!(
            "measured: {} vs {}; {}{runs}",
            flagged.runs, fixed.runs, self.sizes
        ))
    }

    /// A confirmation that says why nothing was measured.
    pub fn skipped(
        scenario: Option<Scenario>,
        sizes: Sizes,
        opts_iterations: u32,
        why: String,
    ) -> Self {
        Confirmation {
            verdict: Verdict::Skipped,
            summary: why,
            scenario: scenario.map_or("", Scenario::name),
            metric: scenario.map(Scenario::metric),
            device: String::new(),
            memory: String::new(),
            sizes,
            warmup_iterations: WARMUP,
            iterations: opts_iterations,
            flagged: None,
            fixed: None,
            difference_bytes: None,
            threshold_bytes: None,
            device_free_bytes: None,
            device_total_bytes: None,
            oom_after_iterations: None,
        }
    }
}

/// The confirmations of a run, beside the findings: `get(report, finding)` by index.
#[derive(Clone, Debug, Default)]
pub struct Confirmations {
    by_report: Vec<Vec<Option<Arc<Confirmation>>>>,
}

impl Confirmations {
    pub fn get(&self, report: usize, finding: usize) -> Option<&Confirmation> {
        self.by_report
            .get(report)?
            .get(finding)?
            .as_ref()
            .map(|c| c.as_ref())
    }

    /// Attaches to each finding the confirmation of its scenario (or a skip).
    pub fn assign(
        reports: &[FileReport],
        mut of: impl FnMut(&Finding) -> Arc<Confirmation>,
    ) -> Self {
        Confirmations {
            by_report: reports
                .iter()
                .map(|r| r.findings.iter().map(|f| Some(of(f))).collect())
                .collect(),
        }
    }
}

/// Why `oomlint confirm` could not run at all (a usage error, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error("{NOT_BUILT}")]
    NotBuilt,
    #[error("{0}")]
    Device(String),
    #[error("cannot run the measurement harness: {0}")]
    Harness(String),
}

/// Runs the scenarios that the findings call for and returns their confirmations.
/// Progress goes to stderr.
pub fn run(reports: &[FileReport], opts: &ConfirmOptions) -> Result<Confirmations, ConfirmError> {
    #[cfg(feature = "dynamic")]
    {
        parent::run(reports, opts)
    }
    #[cfg(not(feature = "dynamic"))]
    {
        let _ = (reports, opts);
        Err(ConfirmError::NotBuilt)
    }
}

/// The arguments of the hidden `__scenario` subcommand: one variant of one scenario,
/// run in a child process of `oomlint confirm`.
#[derive(clap::Args, Clone, Debug)]
pub struct ScenarioArgs {
    /// Only report the device that would be used.
    #[arg(long, conflicts_with_all = ["scenario", "variant"])]
    pub probe: bool,
    #[arg(long, value_enum, required_unless_present = "probe")]
    pub scenario: Option<Scenario>,
    #[arg(long, value_enum, required_unless_present = "probe")]
    pub variant: Option<Variant>,
    #[command(flatten)]
    pub opts: ConfirmOptions,
}

/// Entry point of the `__scenario` child: prints `P <iteration>` lines while it runs and
/// one `R <json>` line with its [`ChildReport`] at the end.
pub fn scenario_main(args: &ScenarioArgs) -> std::process::ExitCode {
    #[cfg(feature = "dynamic")]
    {
        harness::main(args)
    }
    #[cfg(not(feature = "dynamic"))]
    {
        let _ = args;
        eprintln!("oomlint: error: {NOT_BUILT}");
        std::process::ExitCode::from(2)
    }
}

/// The last line of a child's output.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildReport {
    Probe(DeviceInfo),
    Measured {
        device: DeviceInfo,
        measurement: Measurement,
    },
    Failed {
        #[serde(default)]
        device: Option<DeviceInfo>,
        error: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_has_a_scenario_and_a_table_row() {
        let table = markdown_table();
        for &p in Pattern::ALL {
            let s = Scenario::of(p).expect("a memory pattern has a scenario");
            assert!(table.contains(p.describe()), "{p:?}");
            assert!(table.contains(&format!("`{}`", s.name())), "{p:?}");
        }
    }

    #[test]
    fn shapes_and_child_args() {
        assert_eq!(
            parse_shape("32x3x224x224"),
            Ok(Shape(vec![32, 3, 224, 224]))
        );
        assert!(parse_shape("32x0").is_err());
        assert!(parse_shape("axb").is_err());
        let o = ConfirmOptions {
            device: DeviceChoice::Cpu,
            iterations: 5,
            batch: 2,
            seq: 3,
            hidden: 4,
            layers: 1,
            model: Some(PathBuf::from("m.pt")),
            input_shape: Some(Shape(vec![2, 8])),
        };
        assert_eq!(
            o.to_args(),
            [
                "--device=cpu",
                "--iterations=5",
                "--batch=2",
                "--seq=3",
                "--hidden=4",
                "--layers=1",
                "--model",
                "m.pt",
                "--input-shape=2x8"
            ]
        );
        assert_eq!(o.sizes().to_string(), "m.pt, input 2x8");
    }
}
