//! The commands that inform rather than lint: `rule`, `rules`, `--show-settings`; and
//! `clean`, which removes the result cache.

use std::path::Path;

use oomlint::config::Resolver;
use oomlint::rule::FixAvailability;
use oomlint::rules;

use super::args::ListFormat;
use super::{config_failed, usage_error, ExitStatus};

/// `oomlint rule CODE`: the documentation of a rule.
pub fn rule(code: &str) -> ExitStatus {
    match rules::by_code(code) {
        Some(r) => {
            println!("# {} ({})\n", r.code, r.name);
            let fix = match r.fix {
                FixAvailability::None => "Fix: none",
                FixAvailability::Sometimes => "Fix: sometimes available (see Fix safety)",
                FixAvailability::Always => "Fix: always available (see Fix safety)",
            };
            println!("{fix}\n");
            print!("{}", r.documentation());
            ExitStatus::Success
        }
        None => usage_error(&format!("unknown rule code `{code}` (see `oomlint rules`)")),
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
    print!(
        "{}",
        oomlint::render::sanitize_lines(&settings.describe(&oomlint::paths::display(p)))
    );
    ExitStatus::Success
}
