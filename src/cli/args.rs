//! The command line: clap's definitions of the commands and their flags.

use super::ExitStatus;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use oomlint::render::{Color, Format};

/// A fast static linter for the PyTorch code patterns that run GPUs out of memory.
#[derive(Parser)]
#[command(name = "oomlint", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Lint Python files (the default command: `oomlint src/` is `oomlint check src/`).
    Check(CheckArgs),
    /// Print the documentation of a rule (or of every rule, with `--all`).
    Rule {
        /// A rule code or name: OOM201, undetached-loss-append.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        rule: Option<String>,
        /// Print the documentation of every rule.
        #[arg(long)]
        all: bool,
    },
    /// List all rules.
    Rules {
        #[arg(
            long,
            visible_alias = "output-format",
            value_enum,
            default_value = "text"
        )]
        format: ListFormat,
    },
    /// Run the language server (LSP over stdin and stdout) for editors.
    Server,
    /// Remove the result cache (`.oomlint_cache/`) of the current directory.
    Clean,
    /// Lint, then measure what each finding really costs in memory with libtorch
    /// (needs a build with `--features dynamic`).
    Confirm(ConfirmArgs),
    /// One variant of one `confirm` scenario, in a child process (internal).
    #[command(name = "__scenario", hide = true)]
    Scenario(oomlint::confirm::ScenarioArgs),
    /// The README's table of the options of `check`, in Markdown (internal).
    #[command(name = "__options", hide = true)]
    Options,
}

#[derive(Args)]
pub struct ConfirmArgs {
    #[command(flatten)]
    pub check: CheckArgs,
    #[command(flatten)]
    pub measure: oomlint::confirm::ConfirmOptions,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Text,
    Json,
    /// The Markdown table that the README carries.
    Markdown,
}

/// `--fail-on`: which findings fail the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Errors and warnings.
    Warning,
    /// Errors only.
    Error,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Files or directories to lint [default: .]
    pub paths: Vec<PathBuf>,
    /// Output format; `--output-format` is ruff's name for it.
    #[arg(
        long,
        visible_alias = "output-format",
        value_enum,
        default_value = "text"
    )]
    pub format: Format,
    /// When to colour the text output: `auto` colours a terminal, and any output when
    /// `FORCE_COLOR` is set; `NO_COLOR` turns `auto` off.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
    /// Enable only these rules (codes or prefixes, comma-separated: OOM201,OOM3).
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Enable these rules in addition to the selected ones.
    #[arg(long, value_delimiter = ',')]
    pub extend_select: Vec<String>,
    /// Disable these rules (codes or prefixes).
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Skip files and directories matching this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Lint files that .gitignore, .ignore and git's excludes would skip.
    #[arg(long)]
    pub no_respect_gitignore: bool,
    /// Number of threads [default: number of CPUs].
    #[arg(short = 'j', long)]
    pub threads: Option<usize>,
    /// Print how many findings each rule gave instead of the findings.
    #[arg(long)]
    pub statistics: bool,
    /// Exit 0 even when there are findings.
    #[arg(long)]
    pub exit_zero: bool,
    /// The least severity of a finding that makes the exit code 1: `error` lets
    /// warnings (OOM401, OOM402) pass.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value = "warning")]
    pub fail_on: FailOn,
    /// Exit 2 when the paths hold no Python file to lint (a CI job pointed at the wrong
    /// folder fails instead of passing); without it, a warning.
    #[arg(long)]
    pub exit_non_zero_on_empty: bool,
    /// Print only the findings: no summary line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Parse every file, even those the prefilter shows no rule can fire on (for tests
    /// and benchmarks).
    #[arg(long, hide = true)]
    pub no_prefilter: bool,
    /// Parse only the parts of each file that the rules need (experimental; for tests and
    /// benchmarks).
    #[arg(long, hide = true)]
    pub chunk: bool,
    /// Print on stderr how many files the prefilter let through to the parser.
    #[arg(long, hide = true)]
    pub prefilter_stats: bool,
    /// Parse and stop: the benchmark's baseline for the cost of analysis and rules.
    #[arg(long, hide = true)]
    pub parse_only: bool,
    /// Lint every file afresh: neither read nor write the result cache (`.oomlint_cache/`).
    #[arg(long)]
    pub no_cache: bool,
    /// Use this configuration file for every file (pyproject.toml, oomlint.toml or .oomlint.toml).
    #[arg(long, value_name = "PATH", conflicts_with = "isolated")]
    pub config: Option<PathBuf>,
    /// Ignore every configuration file.
    #[arg(long)]
    pub isolated: bool,
    /// Print the settings that apply to the given path, the file they came from and,
    /// for a file, the rules its per-file-ignores turn off.
    #[arg(long)]
    pub show_settings: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output_file: Option<PathBuf>,
    /// Read the source from stdin (as the path `-` does) and report it under this name
    /// (it need not exist): configuration and per-file-ignores apply by this name.
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<PathBuf>,
    /// Apply the configured excludes to files named on the command line too (for pre-commit).
    #[arg(long)]
    pub force_exclude: bool,
    /// Skip files (and stdin input) larger than this, with a warning: bytes, or a size
    /// with a unit (64M, 10MiB, 500KB).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = oomlint::source::parse_size)]
    pub max_file_size: u64,
    /// Add `# noqa: CODE` to every line with a finding (merged into a `noqa` list already
    /// there), so an existing repository adopts oomlint in one commit; prints how many
    /// comments were added.
    #[arg(long, conflicts_with_all = ["stdin_filename", "statistics"])]
    pub add_noqa: bool,
    /// Files that cannot be linted (binary, unreadable, not a regular file, a broken
    /// notebook) are still reported in every format, but do not make the exit code 2.
    #[arg(long)]
    pub allow_unlintable: bool,
    /// Apply the safe fixes, and report what remains.
    #[arg(long, help_heading = "Fixes")]
    pub fix: bool,
    /// Apply the unsafe fixes too (with --fix, --fix-only or --diff); alone, count them
    /// as fixable in the output.
    #[arg(long, help_heading = "Fixes")]
    pub unsafe_fixes: bool,
    /// Print a unified diff of the fixes instead of applying them; exit 1 when there is
    /// a diff.
    #[arg(long, help_heading = "Fixes", conflicts_with = "fix_only")]
    pub diff: bool,
    /// Apply the fixes and report nothing that remains; exit 0 unless something failed.
    #[arg(long, help_heading = "Fixes")]
    pub fix_only: bool,
}

impl CheckArgs {
    /// Whether this run changes files or shows what it would change.
    pub fn fixing(&self) -> bool {
        self.fix || self.fix_only || self.diff
    }

    /// The least applicability a fix needs to be applied (and marked `[*]`).
    pub fn min_applicability(&self) -> oomlint::fix::Applicability {
        if self.unsafe_fixes {
            oomlint::fix::Applicability::Unsafe
        } else {
            oomlint::fix::Applicability::Safe
        }
    }
}

const SUBCOMMANDS: &[&str] = &[
    "check",
    "rule",
    "rules",
    "clean",
    "server",
    "confirm",
    "__scenario",
    "__options",
    "help",
];

/// Parses the command line; `check` is optional: `oomlint src/` and
/// `oomlint --format json src/` lint. A usage error (clap's message, which quotes the
/// arguments, sanitised like everything else that reaches the terminal) is `Err`.
pub fn parse(mut args: Vec<OsString>) -> Result<Cli, ExitStatus> {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let is_global_flag = matches!(first, "-h" | "--help" | "-V" | "--version");
    if !SUBCOMMANDS.contains(&first) && !is_global_flag {
        if let Some(near) = mistyped_subcommand(first) {
            eprintln!(
                "error: unrecognized subcommand '{}'\n\n  tip: a similar subcommand exists: '{near}'\n\nFor more information, try '--help'.",
                oomlint::render::sanitize(first)
            );
            return Err(ExitStatus::Error);
        }
        args.insert(1, OsString::from("check"));
    }
    let command = args
        .get(1)
        .and_then(|a| a.to_str())
        .unwrap_or("")
        .to_owned();
    match Cli::try_parse_from(args) {
        Ok(cli) => Ok(cli),
        Err(e) if e.use_stderr() => {
            let e = suggest_visible_flag(e, &command);
            eprint!(
                "{}",
                oomlint::render::sanitize_lines(&e.render().to_string())
            );
            Err(ExitStatus::Error)
        }
        Err(e) => e.exit(),
    }
}

/// The one of `candidates` most like `word` (Jaro similarity, as clap's own
/// suggestions), if any is alike enough to be what was meant.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `oomlint chek .`: a first argument that is no path on disk, looks like no path (no
/// `/` or `.`), and is close to a subcommand's name was meant as that subcommand.
fn mistyped_subcommand(first: &str) -> Option<&'static str> {
    if first.is_empty()
        || first.starts_with('-')
        || first.contains(['/', '\\', '.'])
        || std::path::Path::new(first).exists()
    {
        return None;
    }
    let visible = ["check", "rule", "rules", "clean", "confirm"];
    closest(first, visible)
}

/// clap's tip for an unknown flag weighs every flag, hidden ones included, and knows
/// nothing of what the user meant: `--output-formt` would get `--output-file`. The tip
/// here is the closest visible flag or visible alias of the subcommand, or none.
fn suggest_visible_flag(e: clap::Error, command: &str) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(invalid)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let Some(typed) = invalid.strip_prefix("--") else {
        return e;
    };
    let typed = typed.split('=').next().unwrap_or(typed);
    let root = Cli::command();
    let Some(cmd) = root.find_subcommand(command) else {
        return e;
    };
    let mut longs: Vec<String> = Vec::new();
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        longs.extend(a.get_long().map(str::to_owned));
        longs.extend(
            a.get_visible_aliases()
                .into_iter()
                .flatten()
                .map(str::to_owned),
        );
    }
    longs.push("help".to_owned());
    let suggestion = closest(typed, longs.iter().map(String::as_str));
    let mut out = clap::Error::new(ErrorKind::UnknownArgument).with_cmd(cmd);
    for (kind, value) in e.context() {
        if kind != ContextKind::SuggestedArg {
            out.insert(kind, value.clone());
        }
    }
    if let Some(s) = suggestion {
        out.insert(
            ContextKind::SuggestedArg,
            ContextValue::String(format!("--{s}")),
        );
    }
    out
}

/// The README's options table: every visible flag of `check`, with its values and
/// default, then every output format; generated from the clap definitions above, so
/// `tests/readme.rs` can keep the README in step with them.
pub fn options_markdown() -> String {
    use clap::CommandFactory;
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let root = Cli::command();
    let check = root.find_subcommand("check").expect("check subcommand");
    let mut out = String::from("| Option | What it does |\n| --- | --- |\n");
    for a in check.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .map(|v| v.to_string())
            .unwrap_or_else(|| a.get_id().as_str().to_ascii_uppercase());
        let takes_value = a.get_action().takes_values();
        let mut name = match (a.get_short(), a.get_long()) {
            (_, None) => format!("`{value}`"),
            (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
            (None, Some(l)) => format!("`--{l}`"),
        };
        if a.get_long().is_some() && takes_value {
            name.push_str(&format!(" `<{value}>`"));
        }
        for alias in a.get_visible_aliases().into_iter().flatten() {
            name.push_str(&format!(", `--{alias}`"));
        }
        let mut what = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        if !what.ends_with(['.', ']']) {
            what.push('.');
        }
        let possible = if takes_value {
            a.get_possible_values()
        } else {
            Vec::new()
        };
        let values: Vec<String> = possible
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() && a.get_id() != "format" {
            what.push_str(&format!(" One of {}.", values.join(", ")));
        }
        if a.get_id() == "format" {
            what.push_str(" One of the formats below.");
        }
        if let Some(d) = a.get_default_values().first().filter(|_| takes_value) {
            what.push_str(&format!(" Default: `{}`.", d.to_string_lossy()));
        }
        out.push_str(&format!("| {} | {} |\n", name, cell(what.trim())));
    }
    out.push_str("\n| Format | Output |\n| --- | --- |\n");
    for v in <Format as clap::ValueEnum>::value_variants() {
        let Some(p) = clap::ValueEnum::to_possible_value(v) else {
            continue;
        };
        let help = p.get_help().map(|h| h.to_string()).unwrap_or_default();
        out.push_str(&format!("| `{}` | {} |\n", p.get_name(), cell(&help)));
    }
    out
}
