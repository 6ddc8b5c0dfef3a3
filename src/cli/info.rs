//! The commands that inform rather than lint: `rule`, `rules`, `--show-settings`; and
//! `clean`, which removes the result cache.

use std::path::Path;

use oomlint::config::Resolver;
use oomlint::rule::FixAvailability;
use oomlint::rules;

use super::args::ListFormat;
use super::{config_failed, usage_error, ExitStatus};

/// `oomlint rule CODE|NAME` (or `--all`): the documentation of a rule, or of every rule.
pub fn rule(rule: Option<&str>, all: bool) -> ExitStatus {
    let print = |r: &oomlint::rule::Rule| {
        println!("# {} ({})\n", r.code, r.name);
        let fix = match r.fix {
            FixAvailability::None => "Fix: none",
            FixAvailability::Sometimes => "Fix: sometimes available (see Fix safety)",
            FixAvailability::Always => "Fix: always available (see Fix safety)",
        };
        println!("{fix}\n");
        print!("{}", r.documentation());
    };
    if all {
        for (i, r) in rules::ALL.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print(r);
        }
        return ExitStatus::Success;
    }
    let wanted = rule.unwrap_or_default();
    let found = rules::ALL
        .iter()
        .find(|r| r.code.eq_ignore_ascii_case(wanted) || r.name == wanted);
    match found {
        Some(r) => {
            print(r);
            ExitStatus::Success
        }
        None => {
            let near = super::args::closest(
                &wanted.to_ascii_lowercase(),
                rules::ALL.iter().map(|r| r.name),
            )
            .or_else(|| {
                super::args::closest(
                    &wanted.to_ascii_uppercase(),
                    rules::ALL.iter().map(|r| r.code),
                )
            });
            let tip = match near {
                Some(n) => format!("; did you mean `{n}`?"),
                None => " (see `oomlint rules`)".to_owned(),
            };
            usage_error(&format!("unknown rule `{wanted}`{tip}"))
        }
    }
}

/// `oomlint rules`: every rule, as text, JSON or the README's Markdown table.
pub fn rules(format: ListFormat) -> ExitStatus {
    match format {
        ListFormat::Text => {
            // `[*]` marks the rules that can fix, as ruff marks fixable findings.
            for r in rules::ALL {
                let fix = if r.fix == FixAvailability::None {
                    "   "
                } else {
                    "[*]"
                };
                println!("{:<8} {:<28} {fix} {}", r.code, r.name, r.summary());
            }
        }
        ListFormat::Markdown => print!("{}", oomlint::rules::markdown_table()),
        ListFormat::Json => {
            let list: Vec<serde_json::Value> = rules::ALL
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "code": r.code,
                        "name": r.name,
                        "severity": r.severity,
                        "fix": r.fix,
                        "summary": r.summary(),
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&list).expect("json"));
        }
    }
    ExitStatus::Success
}

/// `oomlint clean`: removes the result cache of the current directory.
pub fn clean() -> ExitStatus {
    match oomlint::cache::clean(Path::new(".")) {
        Ok(true) => {
            eprintln!("Removed {}/", oomlint::cache::DIR);
            ExitStatus::Success
        }
        Ok(false) => {
            eprintln!("No {}/ here", oomlint::cache::DIR);
            ExitStatus::Success
        }
        Err(e) => usage_error(&format!(
            "{}: cannot remove: {}",
            oomlint::cache::DIR,
            oomlint::error::io_reason(&e)
        )),
    }
}

/// `oomlint check --show-settings PATH`: the settings that apply to `p`, and the file
/// they came from.
pub fn show_settings(resolver: &Resolver, p: &Path) -> ExitStatus {
    let settings = if p.is_dir() {
        resolver.for_dir(p)
    } else {
        resolver.for_file(p)
    };
    if config_failed(resolver) {
        return ExitStatus::Error;
    }
    let mut text = settings.describe(&oomlint::paths::display(p));
    // For a file, what its per-file-ignores entries turn off (a folder matches none).
    if !p.is_dir() {
        let off: Vec<String> = settings
            .rules_off(p)
            .iter()
            .map(|r| format!("{:?}", r.code))
            .collect();
        text.push_str(&format!(
            "rules off for this file (per-file-ignores) = [{}]\n",
            off.join(", ")
        ));
    }
    print!("{}", oomlint::render::sanitize_lines(&text));
    ExitStatus::Success
}

/// `oomlint __options`: the README's options table (`tests/readme.rs` compares them).
pub fn options_table() -> ExitStatus {
    print!("{}", super::args::options_markdown());
    ExitStatus::Success
}
