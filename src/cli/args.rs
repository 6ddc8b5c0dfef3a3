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
    /// Print the documentation of a rule.
    Rule {
        /// A rule code, e.g. OOM201.
        code: String,
    },
    /// List all rules.
    Rules {
        #[arg(long, value_enum, default_value = "text")]
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

#[derive(Args)]
pub struct CheckArgs {
    /// Files or directories to lint [default: .]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// When to colour the text output.
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
    /// Print only the findings: no summary line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Parse every file, even those the prefilter shows no rule can fire on (for tests
    /// and benchmarks).
    #[arg(long, hide = true)]
    pub no_prefilter: bool,
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
    /// Print the settings that apply to the given path, and the file they came from.
    #[arg(long)]
    pub show_settings: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output_file: Option<PathBuf>,
    /// Read the source from stdin and report it under this name (it need not exist).
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
}

const SUBCOMMANDS: &[&str] = &[
    "check",
    "rule",
    "rules",
    "clean",
    "server",
    "confirm",
    "__scenario",
    "help",
];

/// Parses the command line; `check` is optional: `oomlint src/` and
/// `oomlint --format json src/` lint. A usage error (clap's message, which quotes the
/// arguments, sanitised like everything else that reaches the terminal) is `Err`.
pub fn parse(mut args: Vec<OsString>) -> Result<Cli, ExitStatus> {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let is_global_flag = matches!(first, "-h" | "--help" | "-V" | "--version");
    if !SUBCOMMANDS.contains(&first) && !is_global_flag {
        args.insert(1, OsString::from("check"));
    }
    match Cli::try_parse_from(args) {
        Ok(cli) => Ok(cli),
        Err(e) if e.use_stderr() => {
            eprint!(
                "{}",
                oomlint::render::sanitize_lines(&e.render().to_string())
            );
            Err(ExitStatus::Error)
        }
        Err(e) => e.exit(),
    }
}
