//! The parent side of `oomlint confirm`: which scenarios the findings call for, one
//! child process per variant, a progress bar on stderr, and the verdicts.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::verdict::judge;
use super::{
    ChildReport, ConfirmError, ConfirmOptions, Confirmation, Confirmations, DeviceInfo,
    Measurement, Scenario, Variant, WARMUP,
};
use crate::report::FileReport;

/// The hidden subcommand that runs one variant.
pub const SCENARIO_SUBCOMMAND: &str = "__scenario";

pub fn run(reports: &[FileReport], opts: &ConfirmOptions) -> Result<Confirmations, ConfirmError> {
    let mut scenarios: Vec<Scenario> = Vec::new();
    for f in reports.iter().flat_map(|r| r.findings.iter()) {
        let Some(s) = Scenario::for_finding(f) else {
            continue;
        };
        if !scenarios.contains(&s) {
            scenarios.push(s);
        }
    }
    let sizes = opts.sizes();
    if scenarios.is_empty() {
        return Ok(Confirmations::assign(reports, |f| {
            Arc::new(Confirmation::skipped(
                None,
                sizes.clone(),
                opts.iterations,
                format!("no measurement scenario for {}", f.code),
            ))
        }));
    }
    let exe = std::env::current_exe()
        .map_err(|e| ConfirmError::Harness(format!("cannot find the oomlint binary: {e}")))?;

    let probe = match child(&exe, &["--probe".to_owned()], opts, &mut |_| {}) {
        Ok(ChildReport::Probe(info)) => info,
        Ok(ChildReport::Failed { error, .. }) => return Err(ConfirmError::Device(error)),
        Ok(other) => {
            return Err(ConfirmError::Harness(format!(
                "unexpected answer from the probe: {other:?}"
            )))
        }
        Err(e) => return Err(ConfirmError::Harness(e)),
    };
    if let Some(note) = &probe.note {
        let note: String = note.chars().take(160).collect();
        eprintln!("oomlint: measuring on the CPU ({note})");
    }

    let steps = |s: Scenario| {
        if s.iterates() {
            u64::from(WARMUP + opts.iterations)
        } else {
            1
        }
    };
    let total: u64 = scenarios.iter().map(|&s| 2 * steps(s)).sum();
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:24}] {pos}/{len} {wide_msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("measuring on {}", probe.name));

    let mut done = 0u64;
    let mut results: HashMap<Scenario, Arc<Confirmation>> = HashMap::new();
    for &s in &scenarios {
        let mut measured: Vec<Result<(DeviceInfo, Measurement), String>> = Vec::new();
        for variant in [Variant::Flagged, Variant::Fixed] {
            let label = match variant {
                Variant::Flagged => "as flagged",
                Variant::Fixed => "fixed",
            };
            bar.set_message(format!("{} ({label})", s.name()));
            let args = [
                format!("--scenario={}", s.name()),
                format!("--variant={}", label_arg(variant)),
            ];
            let r = child(&exe, &args, opts, &mut |n| bar.set_position(done + n));
            done += steps(s);
            bar.set_position(done);
            measured.push(match r {
                Ok(ChildReport::Measured {
                    device,
                    measurement,
                }) => Ok((device, measurement)),
                Ok(ChildReport::Failed { error, .. }) => Err(format!("{label}: {error}")),
                Ok(other) => Err(format!("{label}: unexpected answer {other:?}")),
                Err(e) => Err(format!("{label}: {e}")),
            });
        }
        let fixed = measured.pop().expect("two variants");
        let flagged = measured.pop().expect("two variants");
        let c = match (flagged, fixed) {
            (Ok((device, f)), Ok((_, x))) => {
                judge(s, sizes.clone(), opts.iterations, &device, f, x)
            }
            (Err(e), _) | (_, Err(e)) => {
                let mut c = Confirmation::skipped(
                    Some(s),
                    sizes.clone(),
                    opts.iterations,
                    format!("the harness failed: {e}"),
                );
                c.device = probe.name.clone();
                c
            }
        };
        results.insert(s, Arc::new(c));
    }
    bar.finish_and_clear();

    Ok(Confirmations::assign(
        reports,
        |f| match Scenario::for_finding(f).and_then(|s| results.get(&s)) {
            Some(c) => c.clone(),
            None => Arc::new(Confirmation::skipped(
                None,
                sizes.clone(),
                opts.iterations,
                format!("no measurement scenario for {}", f.code),
            )),
        },
    ))
}

fn label_arg(v: Variant) -> &'static str {
    match v {
        Variant::Flagged => "flagged",
        Variant::Fixed => "fixed",
    }
}

/// Runs the binary's `__scenario` subcommand and returns its report. `progress` gets
/// the child's iteration count as it goes. A child that dies without a report (an
/// abort, a signal) is an error that says how it ended.
fn child(
    exe: &Path,
    args: &[String],
    opts: &ConfirmOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ChildReport, String> {
    let mut cmd = Command::new(exe);
    cmd.arg(SCENARIO_SUBCOMMAND)
        .args(args)
        .args(opts.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut proc = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let mut stderr = proc.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let stdout = proc.stdout.take().expect("piped");
    let mut result = None;
    let mut last_iteration = 0u64;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(n) = line.strip_prefix("P ") {
            if let Ok(n) = n.trim().parse::<u64>() {
                last_iteration = n;
                progress(n);
            }
        } else if let Some(json) = line.strip_prefix("R ") {
            result = Some(
                serde_json::from_str::<ChildReport>(json)
                    .map_err(|e| format!("unreadable report from the harness: {e}"))?,
            );
        }
    }
    let status = proc
        .wait()
        .map_err(|e| format!("cannot wait for the harness: {e}"))?;
    let stderr = err_reader.join().unwrap_or_default();
    if let Some(r) = result {
        return Ok(r);
    }
    let last_err = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect::<String>();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let what = match sig {
                libc::SIGKILL => " (SIGKILL: the kernel's OOM killer, if memory ran out)",
                libc::SIGABRT => " (SIGABRT: libtorch aborted)",
                libc::SIGSEGV => " (SIGSEGV)",
                _ => "",
            };
            return Err(format!(
                "the harness was killed by signal {sig}{what} after {last_iteration} iterations{}",
                if last_err.is_empty() {
                    String::new()
                } else {
                    format!(": {last_err}")
                }
            ));
        }
    }
    Err(format!(
        "the harness exited with {status} after {last_iteration} iterations without a report{}",
        if last_err.is_empty() {
            String::new()
        } else {
            format!(": {last_err}")
        }
    ))
}
