//! `oomlint check` (and `oomlint confirm`): settings, threads, the files (walked, or
//! stdin), linting, the measurements of `confirm`, the output, the problems met with
//! files, the summary line, and the exit status.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use oomlint::cache::Cache;
use oomlint::config::{Overrides, Resolver};
use oomlint::confirm::{ConfirmOptions, Confirmations};
use oomlint::error::FileError;
use oomlint::fix::Applicability;
use oomlint::lint::{LintOptions, Linter, Speculation};
use oomlint::project::{project_root, NoStore, ProjectIndex, Projects, Summarized, SummaryStore};
use oomlint::render::{self, Color, Format};
use oomlint::report::FileReport;
use oomlint::rule::Severity;
use oomlint::walk::{self, FileEntry};

use super::args::{CheckArgs, FailOn};
use super::summary::Summary;
use super::{config_failed, report_error, usage_error, ExitStatus};

/// What linting gave: the paths that could not be walked, and a report per file (after
/// fixing, of the fixed file), with what fixing did to it.
struct Linted {
    walk_errors: Vec<FileError>,
    reports: Vec<FileReport>,
    fixes: Vec<Fixed>,
}

/// What `--fix`, `--fix-only` or `--diff` did to one file.
#[derive(Default)]
struct Fixed {
    /// How many findings the fixes removed (or, with `--diff`, would remove).
    applied: usize,
    /// `--diff`: the unified diff of the fixes.
    diff: Option<String>,
    /// stdin: the fixed text (the text as read, when nothing was fixed).
    stdout: Option<Vec<u8>>,
}

/// How this run fixes, when it does.
#[derive(Clone, Copy)]
struct FixMode {
    min: Applicability,
    /// `--diff`: show, write nothing.
    diff: bool,
}

pub fn check(a: CheckArgs, confirm: Option<ConfirmOptions>) -> ExitStatus {
    match run(&a, confirm.as_ref()) {
        Ok(status) | Err(status) => status,
    }
}

fn run(a: &CheckArgs, confirm: Option<&ConfirmOptions>) -> Result<ExitStatus, ExitStatus> {
    let resolver = resolver(a)?;
    if a.threads == Some(0) {
        return Err(usage_error("--threads must be at least 1"));
    }
    let (threads, clamped) = walk::threads(a.threads);
    if let Some(warning) = clamped {
        eprintln!("oomlint: warning: {warning}");
    }
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => return Err(usage_error(&format!("cannot start threads: {e}"))),
    };
    let lint_opts = LintOptions {
        prefilter: !a.no_prefilter,
        parse_only: a.parse_only,
        chunk: a.chunk,
        max_file_size: a.max_file_size,
    };
    let paths = if a.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        a.paths.clone()
    };

    if a.show_settings {
        return Ok(super::info::show_settings(&resolver, &paths[0]));
    }
    if a.statistics
        && !matches!(
            a.format,
            Format::Text | Format::Concise | Format::Json | Format::Jsonl
        )
    {
        return Err(usage_error(
            "--statistics prints a table (text, concise) or JSON (json, jsonl); not this --format",
        ));
    }

    // `-` among the paths, or `--stdin-filename`, reads stdin.
    let dash = a.paths.iter().any(|p| p.as_os_str() == "-");
    let from_stdin = dash || a.stdin_filename.is_some();
    if from_stdin && a.add_noqa {
        return Err(usage_error("--add-noqa edits files: it cannot edit stdin"));
    }
    let fix = a.fixing().then_some(FixMode {
        min: a.min_applicability(),
        diff: a.diff,
    });
    let Linted {
        walk_errors,
        reports,
        fixes,
    } = if from_stdin {
        let name = a
            .stdin_filename
            .clone()
            .unwrap_or_else(|| PathBuf::from("-"));
        lint_stdin(a, &name, &resolver, lint_opts, fix)?
    } else {
        lint_paths(a, &paths, &resolver, lint_opts, threads, &pool, fix)?
    };
    // A CI job pointed at the wrong folder must not pass in silence.
    let empty = !from_stdin && reports.is_empty() && walk_errors.is_empty();
    if empty {
        eprintln!("oomlint: warning: no Python files found under the given paths");
    }
    if fix.is_some() {
        if empty && a.exit_non_zero_on_empty {
            return Ok(ExitStatus::Error);
        }
        return Ok(finish_fixing(a, &walk_errors, &reports, &fixes));
    }

    if a.add_noqa {
        return Ok(add_noqa(
            a,
            &resolver,
            lint_opts,
            &reports,
            &walk_errors,
            &pool,
        ));
    }

    // `oomlint confirm`: measure the findings before printing them.
    let confirmations = match confirm {
        Some(opts) => match oomlint::confirm::run(&reports, opts) {
            Ok(c) => Some(c),
            Err(e) => return Err(usage_error(&e.to_string())),
        },
        None => None,
    };
    write_output(a, &reports, confirmations.as_ref())?;

    if a.prefilter_stats {
        let skipped = reports.iter().filter(|r| r.skipped_by_prefilter).count();
        eprintln!(
            "prefilter: parsed {} of {} files ({skipped} skipped)",
            reports.len() - skipped,
            reports.len()
        );
        let parsed: Vec<(usize, usize)> = reports.iter().filter_map(|r| r.parsed_bytes).collect();
        let in_parts = parsed.iter().filter(|(p, t)| p < t).count();
        let (kept, total) = parsed.iter().fold((0, 0), |(k, t), (p, f)| (k + p, t + f));
        eprintln!(
            "chunks: the lint parsed {kept} of {total} bytes of the {} files it parsed itself ({in_parts} in parts)",
            parsed.len()
        );
    }
    let fatal = report_problems(&walk_errors, &reports, a.allow_unlintable);
    let summary = Summary::new(&reports, walk_errors.len());
    if a.format == Format::Text && !a.quiet {
        eprintln!("{summary}");
        print_fix_hint(&reports, a.min_applicability(), false);
    }
    if empty && a.exit_non_zero_on_empty {
        return Ok(ExitStatus::Error);
    }
    let least = match a.fail_on {
        FailOn::Warning => Severity::Warning,
        FailOn::Error => Severity::Error,
    };
    let failing = reports
        .iter()
        .flat_map(|r| &r.findings)
        .filter(|f| f.severity >= least)
        .count();
    Ok(ExitStatus::of_run(fatal, failing, a.exit_zero))
}

/// The end of a run that fixes: the remaining findings (`--fix`), the diffs (`--diff`)
/// or nothing (`--fix-only`), the summary, and the exit status: `--diff` fails when
/// there is a diff, `--fix` when findings remain, `--fix-only` only on errors.
fn finish_fixing(
    a: &CheckArgs,
    walk_errors: &[FileError],
    reports: &[FileReport],
    fixes: &[Fixed],
) -> ExitStatus {
    let applied: usize = fixes.iter().map(|f| f.applied).sum();
    let mut stdout = std::io::stdout().lock();
    let mut written = Ok(());
    for f in fixes {
        if let Some(text) = &f.stdout {
            written = written.and_then(|_| stdout.write_all(text));
        }
    }
    if a.diff {
        for f in fixes {
            if let Some(d) = &f.diff {
                written =
                    written.and_then(|_| stdout.write_all(render::sanitize_lines(d).as_bytes()));
            }
        }
    }
    written = written.and_then(|_| stdout.flush());
    drop(stdout);
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return usage_error(&format!("cannot write output: {e}"));
        }
    }
    // The remaining findings: on stdout with --fix (stdin's stdout holds the fixed text:
    // they go to stderr there), nowhere with --fix-only or --diff.
    let stdin = a.stdin_filename.is_some() || a.paths.iter().any(|p| p.as_os_str() == "-");
    if a.fix && !a.fix_only && !a.diff {
        let result = if stdin {
            render::render(
                &mut std::io::stderr().lock(),
                a.format,
                reports,
                false,
                None,
            )
        } else {
            write_output(a, reports, None).map_err(|_| std::io::Error::other("output"))
        };
        if result.is_err() {
            return ExitStatus::Error;
        }
    }
    let fatal = report_problems(walk_errors, reports, a.allow_unlintable);
    let mut summary = Summary::new(reports, walk_errors.len());
    summary.fixed = Some(applied);
    summary.files_with_findings = reports
        .iter()
        .zip(fixes)
        .filter(|(r, f)| !r.findings.is_empty() || f.applied > 0)
        .count();
    let remaining = summary.findings;
    if !a.quiet {
        if a.diff {
            eprintln!(
                "Would fix {applied} {} ({remaining} remaining)",
                if applied == 1 { "problem" } else { "problems" }
            );
        } else if a.fix_only {
            eprintln!(
                "Fixed {applied} {}",
                if applied == 1 { "problem" } else { "problems" }
            );
        } else if a.format == Format::Text || stdin {
            eprintln!("{summary}");
            print_fix_hint(reports, a.min_applicability(), true);
        }
    }
    let has_diff = fixes.iter().any(|f| f.diff.is_some());
    if fatal > 0 {
        ExitStatus::Error
    } else if a.diff {
        if has_diff && !a.exit_zero {
            ExitStatus::Failure
        } else {
            ExitStatus::Success
        }
    } else if a.fix_only {
        ExitStatus::Success
    } else {
        ExitStatus::of_run(0, remaining, a.exit_zero)
    }
}

/// ruff's hint under the summary: how many findings `--fix` would fix, and how many
/// more `--unsafe-fixes` would. After fixing, only the hidden ones are worth a line.
fn print_fix_hint(reports: &[FileReport], min: Applicability, fixed: bool) {
    let fixes = reports
        .iter()
        .flat_map(|r| &r.findings)
        .filter_map(|f| f.fix.as_ref());
    let (mut fixable, mut hidden) = (0, 0);
    for f in fixes {
        if f.applies(min) {
            fixable += 1;
        } else {
            hidden += 1;
        }
    }
    let hidden_note = match hidden {
        0 => String::new(),
        1 => "1 hidden fix can be enabled with the --unsafe-fixes option".to_owned(),
        n => format!("{n} hidden fixes can be enabled with the --unsafe-fixes option"),
    };
    if fixable > 0 && !fixed {
        if hidden_note.is_empty() {
            eprintln!("[*] {fixable} fixable with the --fix option");
        } else {
            eprintln!("[*] {fixable} fixable with the --fix option ({hidden_note})");
        }
    } else if hidden > 0 {
        eprintln!("No fixes available ({hidden_note})");
    }
}

/// The configuration of the run: the files it names, with the command line's overrides.
fn resolver(a: &CheckArgs) -> Result<Arc<Resolver>, ExitStatus> {
    let overrides = Overrides {
        select: a.select.clone(),
        extend_select: a.extend_select.clone(),
        ignore: a.ignore.clone(),
        exclude: a.exclude.clone(),
        respect_gitignore: a.no_respect_gitignore.then_some(false),
    };
    match Resolver::new(a.config.as_deref(), a.isolated, overrides) {
        Ok(r) => Ok(Arc::new(r)),
        Err(e) => {
            report_error(e.as_ref());
            Err(ExitStatus::Error)
        }
    }
}

/// `--stdin-filename NAME`: lints stdin as the file `NAME`.
fn lint_stdin(
    a: &CheckArgs,
    name: &Path,
    resolver: &Arc<Resolver>,
    lint_opts: LintOptions,
    fix: Option<FixMode>,
) -> Result<Linted, ExitStatus> {
    let only_dash = a.paths.len() == 1 && a.paths[0].as_os_str() == "-";
    if !a.paths.is_empty() && !only_dash {
        return Err(usage_error(if a.stdin_filename.is_some() {
            "--stdin-filename reads stdin: give no paths with it (or only `-`)"
        } else {
            "`-` reads stdin: give no other path with it"
        }));
    }
    let bytes = match oomlint::source::read_bounded(std::io::stdin().lock(), a.max_file_size) {
        Ok(b) => b,
        Err(e) => return Err(usage_error(&format!("cannot read stdin: {e}"))),
    };
    let settings = resolver.for_file(name);
    if config_failed(resolver) {
        return Err(ExitStatus::Error);
    }
    let mut fixes = Vec::new();
    let reports = if a.force_exclude && settings.is_excluded_anywhere(name) {
        if fix.is_some_and(|m| !m.diff) {
            fixes.push(Fixed {
                stdout: bytes,
                ..Default::default()
            });
        }
        Vec::new()
    } else if let Some(bytes) = bytes {
        let linter = Linter::configured(resolver.clone()).with_options(lint_opts);
        match fix {
            None => vec![linter.lint_source(name, &bytes)],
            Some(mode) => {
                // stdin is not written back: --fix prints the fixed text, --diff the diff.
                let out = linter.fix_source(name, &bytes, mode.min);
                let display = oomlint::paths::display(name);
                let new = out.fixed.as_deref().unwrap_or(&bytes);
                fixes.push(Fixed {
                    applied: out.applied,
                    diff: diff_of(mode, &display, &bytes, out.fixed.as_deref()),
                    stdout: (!mode.diff).then(|| new.to_vec()),
                });
                vec![out.report]
            }
        }
    } else {
        let display = oomlint::paths::display(name);
        vec![FileReport {
            path: display.clone(),
            warnings: vec![oomlint::lint::too_large(&display, None, a.max_file_size)],
            ..Default::default()
        }]
    };
    fixes.resize_with(reports.len().max(fixes.len()), Fixed::default);
    Ok(Linted {
        walk_errors: Vec::new(),
        reports,
        fixes,
    })
}
/// `--diff`: the unified diff of a file's fixes, if they change it.
fn diff_of(mode: FixMode, display: &str, old: &[u8], new: Option<&[u8]>) -> Option<String> {
    let new = new.filter(|_| mode.diff)?;
    let d = oomlint::fix::unified_diff(
        display,
        &String::from_utf8_lossy(old),
        &String::from_utf8_lossy(new),
    );
    (!d.is_empty()).then_some(d)
}

/// Fixes one linted file: lints it again with the fixes applied, pass after pass, and
/// writes the result atomically (or, with `--diff`, only diffs it). A file that cannot
/// be written keeps its findings and gets an error; the other files are still fixed.
fn fix_file(
    linter: &Linter,
    path: &Path,
    report: FileReport,
    mode: FixMode,
    max_file_size: u64,
) -> (FileReport, Fixed) {
    let wants = report
        .findings
        .iter()
        .any(|f| f.fix.as_ref().is_some_and(|x| x.applies(mode.min)));
    if !wants {
        return (report, Fixed::default());
    }
    let Ok(bytes) = oomlint::source::read_file(path, max_file_size) else {
        return (report, Fixed::default());
    };
    let out = linter.fix_source(path, &bytes, mode.min);
    let Some(new) = out.fixed else {
        return (out.report, Fixed::default());
    };
    let display = oomlint::paths::display(path);
    if mode.diff {
        let diff = diff_of(mode, &display, &bytes, Some(&new));
        return (
            out.report,
            Fixed {
                applied: out.applied,
                diff,
                stdout: None,
            },
        );
    }
    match oomlint::fix::write_atomic(path, &new) {
        Ok(()) => (
            out.report,
            Fixed {
                applied: out.applied,
                ..Default::default()
            },
        ),
        Err(e) => {
            let mut report = report;
            report.errors.push(FileError::Write {
                path: display,
                reason: oomlint::error::io_reason(&e),
            });
            (report, Fixed::default())
        }
    }
}

/// Walks `paths` and lints every Python file and notebook found, on `pool`.
fn lint_paths(
    a: &CheckArgs,
    paths: &[PathBuf],
    resolver: &Arc<Resolver>,
    lint_opts: LintOptions,
    threads: usize,
    pool: &rayon::ThreadPool,
    fix: Option<FixMode>,
) -> Result<Linted, ExitStatus> {
    let root_settings = resolver.for_dir(if paths[0].is_dir() {
        &paths[0]
    } else {
        paths[0].parent().unwrap_or(Path::new("."))
    });
    let excluder = {
        let resolver = resolver.clone();
        walk::Excluder(Arc::new(move |p: &Path| {
            resolver.for_file(p).is_excluded(p)
        }))
    };
    let opts = walk::WalkOptions {
        respect_gitignore: root_settings.respect_gitignore,
        exclude: a.exclude.clone(),
        threads,
        excluded: Some(excluder),
    };
    let (mut files, walk_errors) = walk::collect(paths, &opts);
    if a.force_exclude {
        files.retain(|f| !resolver.for_file(&f.path).is_excluded_anywhere(&f.path));
    }
    // Configuration is read as folders are met: report any bad one before linting.
    for f in &files {
        resolver.for_file(&f.path);
    }
    if config_failed(resolver) {
        return Err(ExitStatus::Error);
    }
    let mut linter = Linter::configured(resolver.clone()).with_options(lint_opts);
    // `--no-prefilter` runs (tests, benchmarks) want every file linted for real.
    if !a.no_cache && !a.no_prefilter && !a.parse_only {
        match Cache::open(Path::new(".")) {
            Ok(cache) => linter = linter.with_cache(cache),
            Err(e) => eprintln!("oomlint: warning: {}", render::sanitize(&e.to_string())),
        }
    }
    // The project index: every Python file of each project the linted files belong to,
    // summarized once, before the per-file rules. The linted files are linted in the
    // same pass, from the same parse, with facts guessed from each file alone; the
    // second pass keeps those lints that the project's facts bear out.
    let mut seen = Vec::new();
    if !a.parse_only {
        let (projects, mut linted) = pool.install(|| project_index(paths, &files, &opts, &linter));
        linter = linter.with_project(Arc::new(projects));
        seen = files.iter().map(|f| linted.remove(&f.path)).collect();
    }
    seen.resize_with(files.len(), || None);
    let linted: Vec<(FileReport, bool, Fixed)> = pool.install(|| {
        files
            .par_iter()
            .zip(seen.into_par_iter())
            .map(|(f, seen)| {
                let (report, kept) = linter.lint_path_after(&f.path, seen);
                let (report, fixed) = match fix {
                    Some(mode) => fix_file(&linter, &f.path, report, mode, a.max_file_size),
                    None => (report, Fixed::default()),
                };
                (report, kept, fixed)
            })
            .collect()
    });
    let kept = linted.iter().filter(|(_, kept, _)| *kept).count();
    let (reports, fixes): (Vec<FileReport>, Vec<Fixed>) =
        linted.into_iter().map(|(r, _, f)| (r, f)).unzip();
    if a.prefilter_stats {
        eprintln!(
            "project: {kept} of {} files linted in the index's pass, {} linted again",
            reports.len(),
            reports.len() - kept
        );
    }
    if let Err(e) = linter.save_cache() {
        eprintln!(
            "oomlint: warning: {}: cannot write the cache: {}",
            oomlint::cache::DIR,
            oomlint::error::io_reason(&e)
        );
    }
    Ok(Linted {
        walk_errors,
        reports,
        fixes,
    })
}

/// The index of each project that the named `paths` belong to: the project root is the
/// closest folder with `pyproject.toml`, `setup.py` or `.git` (else the named folder, or
/// the folder of a named file), and every Python file under it is summarized, so that a
/// single file named on the command line still sees the files beside it. A named file
/// with no project marker above it sees only the files in its own folder: its folder
/// is often `/tmp`, `~/Downloads` or a home folder, whose whole tree is not a project
/// (linting `/tmp/x.py` walked 9,000 unrelated files under `/tmp` for a minute).
fn project_index(
    paths: &[PathBuf],
    files: &[FileEntry],
    opts: &walk::WalkOptions,
    linter: &Linter,
) -> (Projects, HashMap<PathBuf, Speculation>) {
    // The linted files by canonical path (the first of several names for one file).
    let mut canonical: HashMap<PathBuf, &Path> = HashMap::new();
    for f in files {
        if let Ok(c) = std::fs::canonicalize(&f.path) {
            canonical.entry(c).or_insert(&f.path);
        }
    }
    let lint = |p: &Path, seen: Summarized<'_, '_>| {
        let walked = *canonical.get(p)?;
        Some((walked.to_path_buf(), linter.lint_in_index(walked, seen)?))
    };
    let mut linted = HashMap::new();
    // Each root, and whether it is only a named file's folder without its subfolders.
    let mut roots: Vec<(PathBuf, bool)> = paths
        .iter()
        .filter_map(|p| {
            if let Some(root) = project_root(p) {
                return Some((root, false));
            }
            let is_dir = p.is_dir();
            let dir = if is_dir { p.as_path() } else { p.parent()? };
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            Some((std::fs::canonicalize(dir).ok()?, !is_dir))
        })
        .collect();
    // A folder named both ways is walked whole (`false` sorts first).
    roots.sort();
    roots.dedup_by(|later, first| later.0 == first.0);
    // A root inside another walked root is the same project.
    let deep: Vec<PathBuf> = roots
        .iter()
        .filter(|(_, shallow)| !shallow)
        .map(|(r, _)| r.clone())
        .collect();
    roots.retain(|(r, _)| !deep.iter().any(|o| o != r && r.starts_with(o)));
    let store: &dyn SummaryStore = match linter.cache() {
        Some(c) => c,
        None => &NoStore,
    };
    let mut out = Projects::default();
    for (root, shallow) in roots {
        let walked = paths.len() == 1
            && std::fs::canonicalize(&paths[0]).ok().as_deref() == Some(root.as_path());
        let py: Vec<PathBuf> = if shallow {
            walk::files_beside(&root, opts)
        } else if walked {
            files.iter().map(|f| f.path.clone()).collect()
        } else {
            walk::collect(std::slice::from_ref(&root), opts)
                .0
                .into_iter()
                .map(|f| f.path)
                .collect()
        };
        // The linted files belong to the project even where the walk of the root skips
        // them (a folder that the root's `.gitignore` names).
        let mut py: Vec<PathBuf> = py
            .into_iter()
            .chain(files.iter().map(|f| f.path.clone()))
            .filter(|p| p.extension().is_some_and(|e| e == "py" || e == "ipynb"))
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|p| {
                if shallow {
                    p.parent() == Some(root.as_path())
                } else {
                    p.starts_with(&root)
                }
            })
            .collect();
        py.sort();
        py.dedup();
        let (index, seen) = ProjectIndex::build_with(&root, &py, store, &lint);
        out.0.push(index);
        // A file of two projects (one root inside the other was merged, so only
        // through a link) keeps the lint of the first.
        for (_, (walked, s)) in seen {
            linted.entry(walked).or_insert(s);
        }
    }
    (out, linted)
}

/// `--add-noqa`: adds the comments to the files with findings, each written atomically,
/// and says how many. A file that cannot be edited is reported and fails the run.
fn add_noqa(
    a: &CheckArgs,
    resolver: &Arc<Resolver>,
    lint_opts: LintOptions,
    reports: &[FileReport],
    walk_errors: &[FileError],
    pool: &rayon::ThreadPool,
) -> ExitStatus {
    let linter = Linter::configured(resolver.clone()).with_options(lint_opts);
    let todo: Vec<&Path> = reports
        .iter()
        .filter(|r| !r.findings.is_empty())
        .filter_map(|r| r.file.as_deref())
        .collect();
    let results: Vec<(String, Result<usize, String>)> = pool.install(|| {
        todo.par_iter()
            .map(|path| {
                let shown = oomlint::paths::display(path);
                let outcome = oomlint::source::read_file(path, a.max_file_size)
                    .map_err(|e| match e {
                        oomlint::source::ReadError::Io(e) => {
                            format!("cannot read it: {}", oomlint::error::io_reason(&e))
                        }
                        _ => "it changed while oomlint ran; not edited".to_owned(),
                    })
                    .map(|bytes| linter.add_noqa_source(path, &bytes));
                let result = match outcome {
                    Err(e) => Err(e),
                    Ok(o) => match (o.refused, o.fixed) {
                        (Some(why), _) => Err(why),
                        (None, Some(bytes)) => oomlint::fix::write_atomic(path, &bytes)
                            .map(|()| o.added)
                            .map_err(|e| {
                                format!("cannot write it: {}", oomlint::error::io_reason(&e))
                            }),
                        (None, None) => Ok(0),
                    },
                };
                (shown, result)
            })
            .collect()
    });
    let problems = report_problems(walk_errors, reports, a.allow_unlintable);
    let mut failed = problems;
    let mut added = 0;
    for (shown, r) in results {
        match r {
            Ok(n) => added += n,
            Err(why) => {
                failed += 1;
                eprintln!(
                    "oomlint: error: {}: {}",
                    render::sanitize(&shown),
                    render::sanitize(&why)
                );
            }
        }
    }
    let s = if added == 1 { "" } else { "s" };
    eprintln!("Added {added} noqa comment{s}.");
    if failed > 0 {
        ExitStatus::Error
    } else {
        ExitStatus::Success
    }
}

/// Writes the findings (or `--statistics`) to stdout or `--output-file`.
fn write_output(
    a: &CheckArgs,
    reports: &[FileReport],
    confirmations: Option<&Confirmations>,
) -> Result<(), ExitStatus> {
    let stdout = std::io::stdout();
    let mut out: Box<dyn Write> = match &a.output_file {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => {
                return Err(usage_error(&format!(
                    "{}: cannot write output file: {}",
                    p.display(),
                    oomlint::error::io_reason(&e)
                )))
            }
        },
        None => Box::new(stdout.lock()),
    };
    let terminal = a.output_file.is_none() && std::io::stdout().is_terminal();
    let color = match a.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => auto_color(terminal, env_set("NO_COLOR"), env_set("FORCE_COLOR")),
    };
    let written = if a.statistics {
        render::render_statistics(&mut out, reports, a.format)
    } else {
        render::render_with(
            &mut out,
            a.format,
            reports,
            confirmations,
            render::RenderOptions {
                color,
                width: text_width(terminal),
                fixable: a.min_applicability(),
            },
        )
    };
    if let Err(e) = written.and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(usage_error(&format!("cannot write output: {e}")));
        }
    }
    Ok(())
}

/// Problems with files go to stderr after the findings, in path order: the paths that
/// could not be walked, then each file's warnings and errors. Returns how many of the
/// errors make the exit status 2 (`--allow-unlintable` spares unlintable files).
fn report_problems(
    walk_errors: &[FileError],
    reports: &[FileReport],
    allow_unlintable: bool,
) -> usize {
    let mut fatal = walk_errors.len();
    for e in walk_errors {
        eprintln!("oomlint: error: {}", render::sanitize(&e.to_string()));
    }
    for r in reports {
        for w in &r.warnings {
            eprintln!("oomlint: warning: {}", render::sanitize(&w.to_string()));
        }
        for e in &r.errors {
            fatal += usize::from(!(allow_unlintable && e.is_unlintable()));
            eprintln!("oomlint: error: {}", render::sanitize(&e.to_string()));
        }
    }
    fatal
}

/// The width of the text output: the terminal's (`COLUMNS` when the terminal does not
/// say), within bounds that keep the snippets readable, or a fixed width when stdout is
/// not a terminal (a file, a pipe, a CI log), so that output is the same everywhere.
fn text_width(terminal: bool) -> usize {
    if !terminal {
        return render::TEXT_WIDTH;
    }
    let columns = terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok());
    columns.map_or(render::TEXT_WIDTH, |c| c.clamp(40, 400))
}

/// Whether an environment variable is set to something (`NO_COLOR=` set empty counts as
/// unset, as no-color.org and force-color.org ask).
fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// `--color auto`: `NO_COLOR` turns colour off, else `FORCE_COLOR` turns it on (a CI log
/// that shows colours is not a terminal), else colour when stdout is a terminal.
fn auto_color(terminal: bool, no_color: bool, force_color: bool) -> bool {
    !no_color && (force_color || terminal)
}

#[cfg(test)]
mod tests {
    #[test]
    fn auto_color() {
        use super::auto_color;
        assert!(auto_color(true, false, false));
        assert!(!auto_color(false, false, false));
        assert!(auto_color(false, false, true));
        assert!(!auto_color(true, true, false));
        assert!(!auto_color(false, true, true), "NO_COLOR wins");
    }
}
