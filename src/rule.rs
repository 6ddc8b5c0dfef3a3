//! What a rule is: a code, a name, a severity, documentation, and a check over the
//! semantic model of one file.

use serde::Serialize;
use std::ops::Range;

use crate::fix::Fix;
use crate::pattern::Pattern;
use crate::prefilter::Scan;
use crate::semantic::SemanticModel;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One problem a rule found, before the engine attaches file and position.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub range: Range<usize>,
    pub message: String,
    pub help: String,
    /// What memory the problem costs: `confirm` measures by it.
    pub pattern: Pattern,
    /// The edits that remove the problem, if the rule knows them.
    pub fix: Option<Fix>,
    /// Other places that explain the finding (the line that made a value carry a
    /// graph, say), as SARIF's related locations and LSP's related information.
    pub related: Vec<Related>,
}

/// A secondary location of a diagnostic, with what it has to do with the finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Related {
    pub range: Range<usize>,
    pub message: String,
}

/// What a rule knows of the file beyond its semantic model, the way selene passes a
/// context to its lints.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The file's name, without its folder.
    pub file_name: &'a str,
    /// A file named or placed like a test module (`test_*.py`, `*_test.py`,
    /// `conftest.py`, `tests.py`, anything under `tests/`): where it holds test cases,
    /// its `test` functions are tests, not evaluation.
    pub is_test_file: bool,
}

impl<'a> Context<'a> {
    /// The context of the file at `path` (as displayed: `/` or `\\` separated).
    pub fn for_path(path: &'a str) -> Self {
        let file_name = path.rsplit(['/', '\\']).next().unwrap_or(path);
        let stem = file_name.strip_suffix(".py").unwrap_or(file_name);
        let stem = stem.strip_suffix(".ipynb").unwrap_or(stem);
        // Named like a test module, or inside a test suite's folder (`tests/`): with
        // test cases in it (see `defines_test_cases`), it is a test module.
        let in_test_folder = path.split(['/', '\\']).rev().skip(1).any(|d| d == "tests");
        let is_test_file = stem.starts_with("test_")
            || stem.ends_with("_test")
            || matches!(stem, "conftest" | "tests")
            || in_test_folder;
        Context {
            file_name,
            is_test_file,
        }
    }
}

/// Whether a rule's findings come with a fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FixAvailability {
    /// Never: the rule cannot know the edit.
    None,
    /// For some findings (where the rule can tell the edit).
    Sometimes,
    /// For every finding.
    Always,
}

impl FixAvailability {
    /// How `oomlint rules` and the README's table say it.
    pub fn as_str(self) -> &'static str {
        match self {
            FixAvailability::None => "",
            FixAvailability::Sometimes => "sometimes",
            FixAvailability::Always => "always",
        }
    }
}

pub struct Rule {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// Whether its findings come with a fix (what its "Fix safety" section explains).
    pub fix: FixAvailability,
    /// The rule's documentation: the doc comment of its `declare_rule!`, in Markdown.
    pub doc: &'static str,
    pub check: fn(&SemanticModel<'_>, &Context<'_>, &mut Vec<Diagnostic>),
    /// What a file must contain for the rule to fire at all, checked on a cheap scan of
    /// the raw text before parsing ([`crate::prefilter`]). It may over-approximate,
    /// never drop a finding: a test runs every fixture with and without it.
    pub prefilter: fn(&Scan<'_>) -> bool,
    /// Where in a file a finding of the rule may be, checked on the scan of each part
    /// of the file (a function, a method, a class; with the same-file functions it
    /// calls and the module-level code) that [`crate::chunk`] splits it into: a part
    /// that passes is parsed, with what it calls and what calls it. `None`: the
    /// prefilter itself, for a rule whose prefilter already names what must be near its
    /// finding. Over-approximate it like the prefilter: a test runs every fixture with
    /// and without chunking.
    pub parts: Option<fn(&Scan<'_>) -> bool>,
}

impl Rule {
    /// The documentation with the one leading space of each `///` line removed.
    pub fn documentation(&self) -> String {
        let mut out = String::with_capacity(self.doc.len());
        for line in self.doc.lines() {
            out.push_str(line.strip_prefix(' ').unwrap_or(line));
            out.push('\n');
        }
        out.trim_end().to_owned() + "\n"
    }

    /// The first paragraph of "What it does", on one line.
    pub fn summary(&self) -> String {
        let doc = self.documentation();
        let mut lines = doc
            .lines()
            .skip_while(|l| !l.starts_with("## What it does"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty() && !l.starts_with("##"));
        let mut s = String::new();
        for l in lines.by_ref() {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(l.trim());
        }
        s
    }
}

/// Declares a rule whose doc comment is its documentation, the way clippy's
/// `declare_clippy_lint!` collects doc attributes without a proc-macro.
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        pub static $ident:ident = Rule { $($field:ident $(: $value:expr)?),* $(,)? };
    ) => {
        pub static $ident: $crate::rule::Rule = $crate::rule::Rule {
            doc: concat!($($doc, "\n"),*),
            $($field $(: $value)?),*
        };
    };
}
