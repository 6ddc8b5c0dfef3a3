//! The `oomlint` command: parses the command line, runs the command, and turns how it
//! went into the exit code.
//!
//! The command line lives in the binary, not in the library: the library is the engine
//! (lint, configure, render into any writer) and knows no process, terminal or exit
//! code; the command line is one client of it, tested end to end through the binary.

mod args;
mod check;
mod info;
mod summary;

use std::ffi::OsString;
use std::process::ExitCode;

use args::Command;

/// How a run ends. The one place that decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: nothing found (or `--exit-zero`), and every file was linted.
    Success,
    /// 1: findings.
    Failure,
    /// 2: oomlint could not do what was asked: a usage or configuration error, a file
    /// that could not be linted, output that could not be written.
    Error,
}

impl ExitStatus {
    /// The status of a finished run: `errors` counts the problems that make it fail (a
    /// file that could not be linted, unless `--allow-unlintable`).
    fn of_run(errors: usize, findings: usize, exit_zero: bool) -> ExitStatus {
        if errors > 0 {
            ExitStatus::Error
        } else if findings > 0 && !exit_zero {
            ExitStatus::Failure
        } else {
            ExitStatus::Success
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        match status {
            ExitStatus::Success => ExitCode::SUCCESS,
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
        }
    }
}

/// Runs the command that `args` (the process's arguments) name.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let cli = match args::parse(args) {
        Ok(cli) => cli,
        Err(status) => return status.into(),
    };
    let status = match cli.command {
        Command::Check(a) => check::check(a, None),
        Command::Confirm(c) if !oomlint::confirm::AVAILABLE => {
            let _ = c;
            usage_error(oomlint::confirm::NOT_BUILT)
        }
        Command::Confirm(c) => check::check(c.check, Some(c.measure)),
        // The child process of `confirm` speaks its own protocol through its exit code.
        Command::Scenario(s) => return oomlint::confirm::scenario_main(&s),
        Command::Rule { rule, all } => info::rule(rule.as_deref(), all),
        Command::Options => info::options_table(),
        Command::Clean => info::clean(),
        Command::Server => server(),
        Command::Rules { format } => info::rules(format),
    };
    status.into()
}

/// `oomlint server`: the language server on stdio until the editor says `exit`.
fn server() -> ExitStatus {
    let (connection, io_threads) = lsp_server::Connection::stdio();
    let served = oomlint::server::serve(&connection);
    drop(connection);
    let joined = io_threads.join();
    match served.and(joined.map_err(|e| e.to_string())) {
        Ok(()) => ExitStatus::Success,
        Err(e) => usage_error(&format!("language server: {e}")),
    }
}

/// Prints an error in how oomlint was invoked (or in its environment).
fn usage_error(msg: &str) -> ExitStatus {
    eprintln!("oomlint: error: {}", oomlint::render::sanitize(msg));
    ExitStatus::Error
}

/// Prints a miette report of a tool error (a configuration error) to stderr. Its text
/// comes from a file (a key, a value, the lines around them): it is rendered without
/// colour and every line passes through [`oomlint::render::sanitize`], so no escape
/// sequence in a configuration reaches the terminal.
fn report_error(d: &dyn miette::Diagnostic) {
    let mut s = String::new();
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .with_links(false);
    if handler.render_report(&mut s, d).is_err() {
        s = d.to_string();
    }
    eprint!("{}", oomlint::render::sanitize_lines(&s));
}

/// Reports the configuration errors met so far; whether there were any.
fn config_failed(resolver: &oomlint::config::Resolver) -> bool {
    let errors = resolver.take_errors();
    for e in &errors {
        report_error(e.as_ref());
    }
    !errors.is_empty()
}
