//! oomlint: a static linter for the PyTorch code patterns that run GPUs out of memory.
//!
//! Data flows one way: paths are walked ([`walk`]), each file is read and parsed once
//! by a [`lint::Linter`], a [`semantic::SemanticModel`] is built once per file, every
//! enabled rule reads that model and pushes [`rule::Diagnostic`]s, and the engine turns
//! them into serializable [`report::Finding`]s that the [`render`]ers print. The
//! command line (`src/cli/`) is a client of this library, in the binary.

pub mod cache;
pub mod chunk;
pub mod config;
pub mod confirm;
pub mod error;
pub mod fix;
pub mod lint;
pub mod noqa;
pub mod notebook;
pub mod paths;
pub mod pattern;
pub mod prefilter;
pub mod project;
pub mod render;
pub mod report;
pub mod rule;
pub mod selection;
pub mod semantic;
pub mod server;
pub mod source;
pub mod stdlib;
pub mod testing;
pub mod walk;

#[path = "../rules/mod.rs"]
pub mod rules;

/// What a rule file needs, in one `use`.
pub mod prelude {
    pub use crate::declare_rule;
    pub use crate::fix::{Applicability, Edit, Fix};
    pub use crate::pattern::Pattern;
    pub use crate::rule::{Context, Diagnostic, FixAvailability, Related, Rule, Severity};
    pub use crate::semantic::{names, GradMode, Origin, SemanticModel, Value};
}
