//! One file, start to finish. A [`Linter`] holds what every file of a run shares (the
//! rules, the options, the result cache) and takes each file through named stages:
//! read, decode, prefilter, parse, model, rules, suppress, finish.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use tree_sitter::{Parser, Tree};

use crate::cache::{Cache, Key};
use crate::config::Resolver;
use crate::error::{FileError, FileWarning};
use crate::fix::{apply_fixes, with_line_ending, Applicability, Edit, Fix};
use crate::noqa::Suppressions;
use crate::notebook::Notebook;
use crate::prefilter::Scan;
use crate::project::{FactQuery, FileFacts, Projects, Summarized};
use crate::report::{FileReport, Finding, RelatedLocation};
use crate::rule::{Context, Diagnostic, Rule};
use crate::semantic::SemanticModel;
use crate::source::{LineCol, LineIndex, SourceText};

/// How to lint. The default is what the CLI does.
#[derive(Clone, Copy, Debug)]
pub struct LintOptions {
    /// Skip parsing files that no enabled rule can fire on ([`crate::prefilter`]).
    pub prefilter: bool,
    /// Stop after parsing (the benchmark's baseline for the cost of the analysis).
    pub parse_only: bool,
    /// Parse only the parts of a file that the rules need ([`crate::chunk`]), where the
    /// lint parses the file itself (not where the project index's parse serves it).
    /// Off by default: the selection keeps most bytes ([`crate::chunk`] says why).
    pub chunk: bool,
    /// Files larger than this are skipped with a warning (`--max-file-size`).
    pub max_file_size: u64,
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            prefilter: true,
            parse_only: false,
            chunk: false,
            max_file_size: crate::source::DEFAULT_MAX_FILE_SIZE,
        }
    }
}

/// Lints files: the rules, the options and the result cache of one run. Shared by the
/// threads of the run (`&Linter` is all a thread needs).
pub struct Linter {
    rules: RuleSource,
    options: LintOptions,
    cache: Option<Cache>,
    /// The project index: what other files say about each file ([`crate::project`]).
    project: Option<Arc<Projects>>,
}

/// Where the rules of a file come from.
enum RuleSource {
    /// The same rules for every file.
    Fixed(Vec<&'static Rule>),
    /// Each file's configuration (its `select`, `ignore` and `per-file-ignores`).
    Configured(Arc<Resolver>),
}

impl Linter {
    /// A linter that runs `rules` on every file, with the default options and no cache.
    pub fn new(rules: &[&'static Rule]) -> Linter {
        Linter {
            rules: RuleSource::Fixed(rules.to_vec()),
            options: LintOptions::default(),
            cache: None,
            project: None,
        }
    }

    /// A linter that runs on each file the rules its configuration enables.
    pub fn configured(resolver: Arc<Resolver>) -> Linter {
        Linter {
            rules: RuleSource::Configured(resolver),
            options: LintOptions::default(),
            cache: None,
            project: None,
        }
    }

    pub fn with_options(self, options: LintOptions) -> Linter {
        Linter { options, ..self }
    }

    /// Serve unchanged files from `cache`, and record fresh results in it.
    pub fn with_cache(self, cache: Cache) -> Linter {
        Linter {
            cache: Some(cache),
            ..self
        }
    }

    /// Lint each file with the facts that the rest of its project gives it.
    pub fn with_project(self, project: Arc<Projects>) -> Linter {
        Linter {
            project: Some(project),
            ..self
        }
    }

    /// The cache, for the project index's summaries.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    fn facts_for(&self, path: &Path) -> Option<Arc<FileFacts>> {
        self.project.as_ref()?.facts_for(path)
    }

    /// Writes the results of this run to the cache, if there is one.
    pub fn save_cache(self) -> std::io::Result<()> {
        self.cache.map_or(Ok(()), Cache::save)
    }

    /// The rules to run on the file at `path`.
    fn rules_for(&self, path: &Path) -> Cow<'_, [&'static Rule]> {
        match &self.rules {
            RuleSource::Fixed(rules) => Cow::Borrowed(rules),
            RuleSource::Configured(resolver) => {
                Cow::Owned(resolver.for_file(path).rules_for(path).into_owned())
            }
        }
    }

    /// Reads and lints one file, reported under its [`display`](crate::paths::display)
    /// name. With a cache, the result is served from it when the file, its rules and the
    /// build are unchanged since the cached run.
    pub fn lint_path(&self, path: &Path) -> FileReport {
        let mut report = self.lint_path_read(path);
        report.file = Some(path.to_path_buf());
        report
    }

    fn lint_path_read(&self, path: &Path) -> FileReport {
        let display = crate::paths::display(path);
        let rules = self.rules_for(path);
        let bytes = match read(path, &display, self.options.max_file_size) {
            Ok(bytes) => bytes,
            Err(report) => return *report,
        };
        let facts = self.facts_for(path);
        let Some(cache) = &self.cache else {
            return lint_file(&display, &bytes, &rules, self.options, facts);
        };
        // Keyed by the project facts too: a dependency whose summary changes what this
        // file sees re-lints it.
        let key = Key::new(&bytes, &rules).with_facts(facts.as_ref().map(|f| f.fingerprint()));
        if let Some(hit) = cache.get(&display, &key, &bytes) {
            return hit;
        }
        let report = lint_file(&display, &bytes, &rules, self.options, facts);
        cache.put(key, &report);
        report
    }

    /// Lints the file at `path` in the project index's pass over it, from the text and
    /// the model that its summary was computed from, with facts guessed from the file
    /// alone. [`Linter::lint_path_after`] keeps the result if the project's facts for
    /// the file answer every question the lint asked as the guess did. `None` where the
    /// lint cannot start there (a notebook, a file over `--max-file-size`, a panic: the
    /// second pass lints it and reports what goes wrong).
    pub fn lint_in_index(&self, path: &Path, seen: Summarized<'_, '_>) -> Option<Speculation> {
        let display = crate::paths::display(path);
        if self.options.parse_only
            || display.ends_with(".ipynb")
            || seen.bytes.len() as u64 > self.options.max_file_size
        {
            return None;
        }
        let rules = self.rules_for(path);
        let key = self.cache.as_ref().map(|_| Key::new(seen.bytes, &rules));
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let guess = FileFacts::alone(&canonical, seen.summary);
        let Summarized {
            bytes, text, model, ..
        } = seen;
        let (report, guess) = catch_quietly(move || {
            let mut report = FileReport {
                path: display.clone(),
                ..Default::default()
            };
            let Some(decoded) = decode(&mut report, bytes) else {
                return (report, Some((FileFacts::default(), Vec::new())));
            };
            // The summary read the text with invalid UTF-8 replaced and no other
            // decoding: its model serves only if the lint reads the same text.
            let built = model.filter(|_| decoded == text);
            let (report, guess) = match built {
                Some(m) => lint_parsed(
                    report,
                    text,
                    &rules,
                    self.options,
                    ProjectFacts::Guessed(Box::new(guess)),
                    Some(m),
                ),
                None => lint_parsed(
                    report,
                    &decoded,
                    &rules,
                    self.options,
                    ProjectFacts::Guessed(Box::new(guess)),
                    None,
                ),
            };
            (report, guess)
        })
        .ok()?;
        let (guess, queries) = guess?;
        Some(Speculation {
            report,
            key,
            guess,
            queries,
        })
    }

    /// The report of the file at `path`: the lint of the index's pass when the facts
    /// that the project gives the file agree with the guess on every question it
    /// asked, else a fresh [`Linter::lint_path`]. Whether the first was kept comes
    /// back too.
    pub fn lint_path_after(&self, path: &Path, seen: Option<Speculation>) -> (FileReport, bool) {
        if let (Some(spec), Some(facts)) = (seen, self.facts_for(path)) {
            if spec.queries.iter().all(|q| q.agrees(&spec.guess, &facts)) {
                if let (Some(cache), Some(key)) = (&self.cache, spec.key) {
                    cache.put(key.with_facts(Some(facts.fingerprint())), &spec.report);
                }
                let mut report = spec.report;
                report.file = Some(path.to_path_buf());
                return (report, true);
            }
        }
        (self.lint_path(path), false)
    }

    /// Lints `bytes` as the source of the file at `path` (which need not exist: stdin),
    /// reported under its display name; the cache is not used.
    pub fn lint_source(&self, path: impl AsRef<Path>, bytes: &[u8]) -> FileReport {
        let path = path.as_ref();
        let rules = self.rules_for(path);
        let facts = self.facts_for(path);
        lint_file(
            &crate::paths::display(path),
            bytes,
            &rules,
            self.options,
            facts,
        )
    }
}

/// How many times a file is re-linted and fixed again before the fixer stops: a fix
/// may uncover another finding, and fixes that collided wait for the next pass.
pub const MAX_FIX_PASSES: usize = 10;

/// What fixing one file gave.
#[derive(Debug, Default)]
pub struct FixOutcome {
    /// The file's new bytes, when some fix was applied.
    pub fixed: Option<Vec<u8>>,
    /// How many findings the fixes removed.
    pub applied: usize,
    /// The findings of the fixed text (of the original one when nothing was applied).
    pub report: FileReport,
    /// Why the file was left unchanged although fixes were offered.
    pub refused: Option<String>,
}

impl Linter {
    /// Lints `bytes` as the file at `path` and applies the fixes of at least `min`
    /// applicability, re-linting after each pass until no fix applies or
    /// [`MAX_FIX_PASSES`] passes ran. Fixes that would make tree-sitter see syntax errors
    /// (ERROR or MISSING nodes) the original text did not have are refused, and so are
    /// files whose text would not survive being written back (UTF-16, invalid UTF-8, a
    /// lone `\r` line ending). Line endings and a UTF-8 byte order mark are kept;
    /// notebooks are fixed in their cells. Nothing is written: the caller writes
    /// [`FixOutcome::fixed`] (with [`crate::fix::write_atomic`]) or shows a diff.
    pub fn fix_source(&self, path: &Path, bytes: &[u8], min: Applicability) -> FixOutcome {
        let display = crate::paths::display(path);
        let rules = self.rules_for(path);
        let facts = self.facts_for(path);
        let lint = |b: &[u8]| {
            let mut r = lint_file(&display, b, &rules, self.options, facts.clone());
            r.file = Some(path.to_path_buf());
            r
        };
        let first = lint(bytes);
        let wants_fix = |r: &FileReport| {
            r.findings
                .iter()
                .any(|f| f.fix.as_ref().is_some_and(|x| x.applies(min)))
        };
        if !wants_fix(&first) {
            return FixOutcome {
                report: first,
                ..Default::default()
            };
        }
        let refuse = |mut report: FileReport, why: String| {
            report.warnings.push(FileWarning::NotFixed {
                path: report.path.clone(),
                reason: why.clone(),
            });
            FixOutcome {
                report,
                refused: Some(why),
                ..Default::default()
            }
        };
        let Some((bom, decoded)) = editable(bytes) else {
            return refuse(
                first,
                "not fixed: only UTF-8 files with \\n or \\r\\n line endings are fixed".to_owned(),
            );
        };
        let notebook = display.ends_with(".ipynb");
        let python = |raw: &str| -> Option<String> {
            if notebook {
                Notebook::parse(raw).ok().map(|nb| nb.source)
            } else {
                Some(raw.to_owned())
            }
        };
        let Some(original_errors) = python(&decoded).map(|t| syntax_errors(&t)) else {
            return FixOutcome {
                report: first,
                ..Default::default()
            };
        };
        let ending = crate::fix::line_ending(&decoded);
        let mut text = decoded;
        let mut report = first;
        let mut applied = 0;
        for pass in 0..MAX_FIX_PASSES {
            if pass > 0 {
                report = lint(&[bom, text.as_bytes()].concat());
            }
            let fixes: Vec<Fix> = report
                .findings
                .iter()
                .filter_map(|f| f.fix.as_ref())
                .filter(|f| f.applies(min))
                .map(|f| Fix {
                    edits: f
                        .edits
                        .iter()
                        .map(|e| {
                            Edit::replace(e.range.clone(), with_line_ending(&e.content, ending))
                        })
                        .collect(),
                    ..f.clone()
                })
                .collect();
            if fixes.is_empty() {
                break;
            }
            let next = if notebook {
                let Ok(nb) = Notebook::parse(&text) else {
                    break;
                };
                let fits: Vec<&Fix> = fixes
                    .iter()
                    .filter(|f| nb.apply_edits(&text, &f.edits).is_ok())
                    .collect();
                let a = apply_fixes(&nb.source, fits);
                match nb.apply_edits(&text, &a.edits) {
                    Ok(t) => (t, a.fixed),
                    Err(_) => break,
                }
            } else {
                let a = apply_fixes(&text, &fixes);
                (a.text, a.fixed)
            };
            if next.1 == 0 || next.0 == text {
                break;
            }
            let errors = python(&next.0).map_or(usize::MAX, |t| syntax_errors(&t));
            if errors > original_errors {
                return refuse(
                    lint(bytes),
                    "not fixed: the fixes would introduce a syntax error; file left unchanged"
                        .to_owned(),
                );
            }
            text = next.0;
            applied += next.1;
            if pass + 1 == MAX_FIX_PASSES {
                report = lint(&[bom, text.as_bytes()].concat());
            }
        }
        let fixed = (applied > 0).then(|| [bom, text.as_bytes()].concat());
        FixOutcome {
            fixed,
            applied,
            report,
            refused: None,
        }
    }
}

/// What adding `# noqa` comments to one file gave.
#[derive(Debug, Default)]
pub struct NoqaOutcome {
    /// The file's new bytes, when a comment was added.
    pub fixed: Option<Vec<u8>>,
    /// How many lines got a comment (or a code added to theirs).
    pub added: usize,
    /// Why the file was left unchanged although it has findings.
    pub refused: Option<String>,
}

impl Linter {
    /// Lints `bytes` as the file at `path` and adds `# noqa: CODE` for each finding
    /// ([`crate::noqa::add_noqa_edits`]): an existing repository adopts oomlint in one
    /// commit. Notebooks get the comments in their cells. Refused, like fixes, where the
    /// text would not survive being written back or would gain a syntax error. Nothing
    /// is written.
    pub fn add_noqa_source(&self, path: &Path, bytes: &[u8]) -> NoqaOutcome {
        let report = self.lint_source(path, bytes);
        if report.findings.is_empty() {
            return NoqaOutcome::default();
        }
        let refuse = |why: &str| NoqaOutcome {
            refused: Some(why.to_owned()),
            ..Default::default()
        };
        let Some((bom, raw)) = editable(bytes) else {
            return refuse(
                "no noqa added: only UTF-8 files with \\n or \\r\\n line endings are edited",
            );
        };
        let nb = if report.path.ends_with(".ipynb") {
            match Notebook::parse(&raw) {
                Ok(nb) => Some(nb),
                Err(_) => return NoqaOutcome::default(),
            }
        } else {
            None
        };
        let python = nb.as_ref().map_or(raw.as_str(), |nb| nb.source.as_str());
        let Some(tree) = parse_python(python) else {
            return refuse("no noqa added: the file could not be parsed");
        };
        let findings: Vec<(usize, &str)> = report
            .findings
            .iter()
            .map(|f| (f.range.0, f.code))
            .collect();
        let edits = crate::noqa::add_noqa_edits(tree.root_node(), python, &findings);
        if edits.is_empty() {
            return NoqaOutcome::default();
        }
        let new = match &nb {
            Some(nb) => nb.apply_edits(&raw, &edits),
            None => crate::fix::apply_edits(&raw, &edits),
        };
        let Ok(new) = new else {
            return refuse("no noqa added: a comment would not fit in its notebook cell");
        };
        let new_python = match &nb {
            Some(_) => Notebook::parse(&new).map(|nb| nb.source).ok(),
            None => Some(new.clone()),
        };
        let errors = new_python.map_or(usize::MAX, |t| syntax_errors(&t));
        if errors > syntax_errors(python) {
            return refuse("no noqa added: the comments would introduce a syntax error");
        }
        NoqaOutcome {
            fixed: Some([bom, new.as_bytes()].concat()),
            added: edits.len(),
            refused: None,
        }
    }
}

/// The text of a file that edits can be written back to, and its UTF-8 byte order mark
/// (empty if none): UTF-8 with `\n` or `\r\n` line endings, nothing that decoding
/// changed.
fn editable(bytes: &[u8]) -> Option<(&'static [u8], String)> {
    let decoded = SourceText::decode(bytes);
    let bom: &'static [u8] = if bytes.starts_with(b"\xEF\xBB\xBF") {
        b"\xEF\xBB\xBF"
    } else {
        b""
    };
    if decoded.utf16 || decoded.invalid_utf8 || decoded.text.as_bytes() != &bytes[bom.len()..] {
        return None;
    }
    Some((bom, decoded.text))
}

/// How many ERROR and MISSING nodes tree-sitter finds in `text` (a walk, not recursion:
/// nesting may be deep).
pub fn syntax_errors(text: &str) -> usize {
    let Ok(Some(tree)) = catch_quietly(|| PARSER.with(|p| p.borrow_mut().parse(text, None))) else {
        PARSER.with(|p| *p.borrow_mut() = new_parser());
        return usize::MAX;
    };
    if !tree.root_node().has_error() {
        return 0;
    }
    let mut n = 0;
    let mut c = tree.walk();
    loop {
        let node = c.node();
        if node.is_error() || node.is_missing() {
            n += 1;
        }
        if node.has_error() && c.goto_first_child() {
            continue;
        }
        while !c.goto_next_sibling() {
            if !c.goto_parent() {
                return n;
            }
        }
    }
}

/// A file linted in the project index's pass, before the project's facts were known
/// ([`Linter::lint_in_index`]).
pub struct Speculation {
    report: FileReport,
    /// The cache key of the file's bytes and rules, facts not yet included.
    key: Option<Key>,
    guess: FileFacts,
    queries: Vec<FactQuery>,
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(new_parser());
}

fn new_parser() -> Parser {
    let mut p = Parser::new();
    p.set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("tree-sitter-python matches the tree-sitter ABI");
    p
}

/// The syntax tree of `text`, from this thread's parser: for the edits that need the
/// tree outside a lint (`--add-noqa`, the language server). `None` if the parser
/// panicked or gave up.
pub fn parse_python(text: &str) -> Option<Tree> {
    let mut report = FileReport::default();
    parse_tree(&mut report, text)
}

/// Stage `read`: the bytes of a regular file of at most `limit` bytes, or a report of
/// why they cannot be read (too large: a warning; not a regular file or unreadable: an
/// error).
fn read(path: &Path, display: &str, limit: u64) -> Result<Vec<u8>, Box<FileReport>> {
    use crate::source::ReadError;
    crate::source::read_file(path, limit).map_err(|e| {
        Box::new(match e {
            ReadError::TooLarge(size) => FileReport {
                path: display.to_owned(),
                warnings: vec![too_large(display, size, limit)],
                ..Default::default()
            },
            ReadError::NotRegular(kind) => FileReport {
                path: display.to_owned(),
                errors: vec![FileError::NotRegular {
                    path: display.to_owned(),
                    kind: kind.to_owned(),
                }],
                ..Default::default()
            },
            ReadError::Io(e) => FileReport {
                path: display.to_owned(),
                errors: vec![FileError::Io {
                    path: display.to_owned(),
                    reason: crate::error::io_reason(&e),
                }],
                ..Default::default()
            },
        })
    })
}

/// The warning for a file (or stdin) larger than `--max-file-size`.
pub fn too_large(display: &str, size: Option<u64>, limit: u64) -> FileWarning {
    FileWarning::TooLarge {
        path: display.to_owned(),
        size: size.map_or_else(String::new, |n| {
            format!("{}, ", crate::source::format_size(n))
        }),
        limit: crate::source::format_size(limit),
    }
}

/// Lints the bytes of one file reported under `path`. A panic anywhere in it (decoding,
/// parsing, the semantic model, a rule) is caught and reported as an internal error
/// naming the file: one bad file never costs the others.
fn lint_file(
    path: &str,
    bytes: &[u8],
    rules: &[&'static Rule],
    opts: LintOptions,
    facts: Option<Arc<FileFacts>>,
) -> FileReport {
    catch_quietly(|| lint_file_unguarded(path, bytes, rules, opts, facts)).unwrap_or_else(
        |message| FileReport {
            path: path.to_owned(),
            errors: vec![FileError::Internal {
                path: path.to_owned(),
                rule: "the linter".to_owned(),
                message,
            }],
            ..Default::default()
        },
    )
}

fn lint_file_unguarded(
    path: &str,
    bytes: &[u8],
    rules: &[&'static Rule],
    opts: LintOptions,
    facts: Option<Arc<FileFacts>>,
) -> FileReport {
    let mut report = FileReport {
        path: path.to_owned(),
        ..Default::default()
    };
    let Some(text) = decode(&mut report, bytes) else {
        return report;
    };
    if path.ends_with(".ipynb") {
        return lint_notebook(report, &text, rules, opts, facts);
    }
    lint_text(report, text, rules, opts, facts)
}

/// Stage `decode`: the text of the file (UTF-16 with a BOM decoded, invalid UTF-8
/// replaced with a warning), or `None` for a binary file, which is an error: a file
/// that could not be linted must not pass as clean.
fn decode(report: &mut FileReport, bytes: &[u8]) -> Option<String> {
    let src = SourceText::decode(bytes);
    // After decoding: UTF-16 text holds NUL bytes, but no NUL character.
    if memchr::memchr(0, src.text.as_bytes()).is_some() {
        report.errors.push(FileError::Binary {
            path: report.path.clone(),
        });
        return None;
    }
    if src.invalid_utf8 {
        report.warnings.push(FileWarning::InvalidUtf8 {
            path: report.path.clone(),
        });
    }
    Some(src.text)
}

/// Lints the code cells of a notebook; positions in findings are positions in the
/// `.ipynb` file, and each finding knows its cell for the text formats.
fn lint_notebook(
    mut report: FileReport,
    raw: &str,
    rules: &[&'static Rule],
    opts: LintOptions,
    facts: Option<Arc<FileFacts>>,
) -> FileReport {
    let nb = match Notebook::parse(raw) {
        Ok(nb) => nb,
        Err(e) => {
            report.errors.push(FileError::Notebook {
                path: report.path.clone(),
                reason: e.to_string(),
            });
            return report;
        }
    };
    let mut report = lint_text(report, nb.source.clone(), rules, opts, facts);
    let module_findings = lint_written_files(&mut report, &nb, rules, opts);
    let has_syntax_error = report
        .warnings
        .iter()
        .any(|w| matches!(w, FileWarning::Syntax { .. }));
    if report.findings.is_empty() && !has_syntax_error {
        return report;
    }
    let raw_index = LineIndex::new(raw);
    // A syntax error's position too is a position in the `.ipynb` file.
    if has_syntax_error {
        let src_index = LineIndex::new(&nb.source);
        for w in &mut report.warnings {
            if let FileWarning::Syntax { line, column, .. } = w {
                let start = src_index.line_start(*line - 1).unwrap_or(0);
                let at = nb.source[start..]
                    .chars()
                    .take(*column - 1)
                    .map(char::len_utf8)
                    .sum::<usize>();
                let lc = raw_index.line_col(raw, nb.raw_offset(start + at));
                (*line, *column) = (lc.line, lc.column);
            }
        }
    }
    if report.findings.is_empty() {
        return report;
    }
    let cells = nb.index();
    let lines = LineIndex::new(&nb.source);
    for f in &mut report.findings {
        f.cell = Some(cells.locate(&nb.source, &lines, f.range.0));
        let s = raw_index.line_col(raw, nb.raw_offset(f.range.0));
        // The end is exclusive: map the last character, then step past it.
        let last = nb.raw_offset(f.range.1.saturating_sub(1).max(f.range.0));
        let e = raw_index.line_col(raw, last);
        f.line = s.line;
        f.column = s.column;
        f.end_line = e.line;
        f.end_column = e.column + usize::from(f.range.1 > f.range.0);
    }
    if module_findings {
        report
            .findings
            .sort_by(|a, b| (a.line, a.column, a.code).cmp(&(b.line, b.column, b.code)));
        report.source = Some(Arc::from(nb.display_source()));
    }
    report
}

/// Lints each `%%writefile name.py` cell as a module of its own and adds what it finds
/// to `report`, with ranges (and syntax errors' lines) in the notebook's concatenated
/// source. Whether any finding came from such a cell.
fn lint_written_files(
    report: &mut FileReport,
    nb: &Notebook,
    rules: &[&'static Rule],
    opts: LintOptions,
) -> bool {
    if nb.written.is_empty() {
        return false;
    }
    let lines = LineIndex::new(&nb.source);
    let mut found = false;
    for w in &nb.written {
        let sub = lint_text(
            FileReport {
                path: report.path.clone(),
                ..Default::default()
            },
            w.text.clone(),
            rules,
            opts,
            None,
        );
        // The cell starts a line of the concatenated source: columns stay, lines shift.
        let first_line = lines.line_col(&nb.source, w.start).line;
        for mut f in sub.findings {
            f.range = (f.range.0 + w.start, f.range.1 + w.start);
            for r in &mut f.related {
                r.range = (r.range.0 + w.start, r.range.1 + w.start);
            }
            report.findings.push(f);
            found = true;
        }
        for mut warn in sub.warnings {
            if let FileWarning::Syntax { line, .. } = &mut warn {
                *line += first_line - 1;
            }
            report.warnings.push(warn);
        }
        report.errors.extend(sub.errors);
    }
    found
}

/// Lints decoded Python source.
fn lint_text(
    report: FileReport,
    text: String,
    rules: &[&'static Rule],
    opts: LintOptions,
    facts: Option<Arc<FileFacts>>,
) -> FileReport {
    lint_parsed(report, &text, rules, opts, ProjectFacts::Known(facts), None).0
}

/// The project facts a file is linted with.
enum ProjectFacts {
    Known(Option<Arc<FileFacts>>),
    /// Guessed from the file alone, every question asked of them recorded
    /// ([`crate::project::FactQuery`]).
    Guessed(Box<FileFacts>),
}

/// The facts a lint guessed, and the questions it asked of them.
type Guess = (FileFacts, Vec<FactQuery>);

/// Lints decoded Python source, from `built` (the model of `text`, built without
/// project facts for the file's summary) when there is one, else from a parse of its
/// own.
fn lint_parsed<'t>(
    mut report: FileReport,
    text: &'t str,
    rules: &[&'static Rule],
    opts: LintOptions,
    facts: ProjectFacts,
    built: Option<&mut SemanticModel<'t>>,
) -> (FileReport, Option<Guess>) {
    let scan = (opts.prefilter || opts.chunk && built.is_none()).then(|| Scan::new(text));
    if opts.prefilter
        && !scan
            .as_ref()
            .is_some_and(|s| rules.iter().any(|r| (r.prefilter)(s)))
    {
        report.skipped_by_prefilter = true;
        return (report, Some((FileFacts::default(), Vec::new())));
    }
    let src = Source::new(text);
    match built {
        Some(model) => {
            syntax_warning(&mut report, model, &src);
            analyze(report, model, rules, &src, facts)
        }
        None => {
            let ranges = scan
                .filter(|_| opts.chunk)
                .and_then(|scan| crate::chunk::select(text, &scan, rules));
            let tree = match ranges {
                Some(ranges) => parse_ranges(&mut report, text, &ranges),
                None => parse(&mut report, text),
            };
            report.parsed_bytes = Some((tree.as_ref().map_or(text.len(), |t| t.1), text.len()));
            let Some((tree, _)) = tree else {
                return (report, None);
            };
            if opts.parse_only {
                return (report, None);
            }
            let Some(mut model) = model(&mut report, &tree, &src) else {
                return (report, None);
            };
            analyze(report, &mut model, rules, &src, facts)
        }
    }
}

/// Stages `rules`, `suppress` and `finish`, with the project facts given to the model.
fn analyze(
    mut report: FileReport,
    model: &mut SemanticModel,
    rules: &[&'static Rule],
    src: &Source,
    facts: ProjectFacts,
) -> (FileReport, Option<Guess>) {
    let guess = match facts {
        ProjectFacts::Known(Some(facts)) => {
            model.set_project(facts);
            None
        }
        ProjectFacts::Known(None) => None,
        ProjectFacts::Guessed(guess) => {
            model.set_project(Arc::new((*guess).clone()));
            model.record_fact_queries();
            Some(*guess)
        }
    };
    run_rules(&mut report, model, rules, src);
    suppress(&mut report, model, src, rules);
    let guess = guess.map(|g| (g, model.fact_queries()));
    (finish(report, model, src.text), guess)
}

/// Decoded source, with its line index built on first use: most files have no finding
/// and no syntax error.
struct Source<'t> {
    text: &'t str,
    lines: OnceCell<LineIndex>,
}

impl<'t> Source<'t> {
    fn new(text: &'t str) -> Self {
        Source {
            text,
            lines: OnceCell::new(),
        }
    }

    fn line_col(&self, offset: usize) -> LineCol {
        self.lines
            .get_or_init(|| LineIndex::new(self.text))
            .line_col(self.text, offset)
    }
}

/// Stage `parse`, for the parts of the file in `ranges` ([`crate::chunk`]): the tree of
/// those byte ranges, every position in it a position in `text`, and how many bytes
/// were parsed. A tree with a syntax error is thrown away for a parse of the whole
/// file: leaving parts out must never make an error (and the error of the whole file
/// is the one reported).
fn parse_ranges(
    report: &mut FileReport,
    text: &str,
    ranges: &[std::ops::Range<usize>],
) -> Option<(Tree, usize)> {
    let ts = crate::chunk::ts_ranges(text, ranges);
    let parsed = catch_quietly(|| {
        PARSER.with(|p| {
            let mut p = p.borrow_mut();
            p.set_included_ranges(&ts).ok()?;
            let tree = p.parse(text, None);
            // The parser is shared by the thread's files: back to the whole text.
            p.set_included_ranges(&[]).ok()?;
            tree
        })
    });
    let chunked: usize = ranges.iter().map(|r| r.len()).sum();
    match parsed {
        Ok(Some(tree)) if !tree.root_node().has_error() => Some((tree, chunked)),
        Ok(_) => parse(report, text),
        Err(_) => {
            PARSER.with(|p| *p.borrow_mut() = new_parser());
            parse(report, text)
        }
    }
}

/// Stage `parse`: the syntax tree (a panic in the parser is an internal error), and
/// how many bytes were parsed.
fn parse(report: &mut FileReport, text: &str) -> Option<(Tree, usize)> {
    parse_tree(report, text).map(|t| (t, text.len()))
}

fn parse_tree(report: &mut FileReport, text: &str) -> Option<Tree> {
    let parsed = catch_quietly(|| PARSER.with(|p| p.borrow_mut().parse(text, None)));
    match parsed {
        Ok(Some(tree)) => Some(tree),
        Ok(None) | Err(_) => {
            if parsed.is_err() {
                // Whatever state the parser was left in, the next file gets a fresh one.
                PARSER.with(|p| *p.borrow_mut() = new_parser());
            }
            report.errors.push(FileError::Internal {
                path: report.path.clone(),
                rule: "the parser".to_owned(),
                message: parsed
                    .err()
                    .unwrap_or_else(|| "tree-sitter returned no tree".to_owned()),
            });
            None
        }
    }
}

/// Stage `model`: the semantic model of the file, and a warning at its first syntax
/// error.
fn model<'a>(
    report: &mut FileReport,
    tree: &'a Tree,
    src: &Source<'a>,
) -> Option<SemanticModel<'a>> {
    let path = report.path.as_str();
    let model = match catch_quietly(|| SemanticModel::build(tree, src.text)) {
        Ok(model) => model,
        Err(message) => {
            report.errors.push(FileError::Internal {
                path: path.to_owned(),
                rule: "the semantic model".to_owned(),
                message,
            });
            return None;
        }
    };
    syntax_warning(report, &model, src);
    Some(model)
}

/// A warning at the model's first syntax error.
fn syntax_warning(report: &mut FileReport, model: &SemanticModel, src: &Source) {
    if let Some(at) = model.first_syntax_error {
        let lc = src.line_col(at);
        report.warnings.push(FileWarning::Syntax {
            path: report.path.clone(),
            line: lc.line,
            column: lc.column,
        });
    }
}

/// Stage `rules`: every enabled rule reads the model; its diagnostics become findings.
fn run_rules(
    report: &mut FileReport,
    model: &SemanticModel,
    rules: &[&'static Rule],
    src: &Source,
) {
    let path = report.path.clone();
    let path = path.as_str();
    let cx = Context::for_path(path);
    let mut diags: Vec<Diagnostic> = Vec::new();
    // JAX, TensorFlow or plain NumPy code: no PyTorch pattern can be in it. The rules
    // about suppression comments still run.
    let torch = model.is_torch_code();
    for rule in rules {
        if !torch && !rule.code.starts_with("OOM0") {
            continue;
        }
        let start = diags.len();
        // A bug in one rule must not cost the other rules or the other files.
        let result = catch_quietly(|| (rule.check)(model, &cx, &mut diags));
        if let Err(message) = result {
            diags.truncate(start);
            report.errors.push(FileError::Internal {
                path: path.to_owned(),
                rule: format!("rule {}", rule.code),
                message,
            });
            continue;
        }
        for d in diags.drain(start..) {
            report.findings.push(finding(rule, d, path, src));
        }
    }
}

/// A rule's diagnostic as a finding of the file at `path`.
fn finding(rule: &'static Rule, d: Diagnostic, path: &str, src: &Source) -> Finding {
    let s = src.line_col(d.range.start);
    let e = src.line_col(d.range.end);
    Finding {
        code: rule.code,
        name: rule.name,
        severity: rule.severity,
        message: d.message,
        help: d.help,
        path: path.to_owned(),
        line: s.line,
        column: s.column,
        end_line: e.line,
        end_column: e.column,
        range: (d.range.start, d.range.end),
        pattern: d.pattern,
        cell: None,
        fix: d.fix,
        related: d
            .related
            .into_iter()
            .map(|r| {
                let s = src.line_col(r.range.start);
                let e = src.line_col(r.range.end);
                RelatedLocation {
                    message: r.message,
                    line: s.line,
                    column: s.column,
                    end_line: e.line,
                    end_column: e.column,
                    range: (r.range.start, r.range.end),
                }
            })
            .collect(),
    }
}

/// Stage `suppress`: drops the findings that a suppression comment names, warns of a
/// file-level comment written after code (it covers only its own line), and, when the
/// unused-noqa rule is enabled, reports the `# noqa` comments that suppressed nothing.
fn suppress(report: &mut FileReport, model: &SemanticModel, src: &Source, rules: &[&'static Rule]) {
    let text = src.text;
    // Suppression comments are tree-sitter comment nodes: never text inside a string.
    // Read even without findings, so a misplaced file-level comment is always reported.
    let noqa = Suppressions::from_comments(model.comments.iter().map(|c| {
        let own_line = crate::noqa::starts_line(text, c.start_byte());
        (c.start_position().row + 1, &text[c.byte_range()], own_line)
    }));
    for &line in noqa.misplaced_file_level() {
        report.warnings.push(FileWarning::FileNoqaAfterCode {
            path: report.path.clone(),
            line,
        });
    }
    let unused_rule = rules
        .iter()
        .copied()
        .find(|r| std::ptr::eq(*r, crate::rules::UNUSED_NOQA));
    if noqa.is_empty() || (report.findings.is_empty() && unused_rule.is_none()) {
        return;
    }
    // The line where each finding's `# noqa` belongs, besides its first line.
    let comment_lines: Vec<usize> = report
        .findings
        .iter()
        .map(|f| {
            let end = crate::noqa::comment_line_end(model.root, text, f.range.0);
            src.line_col(end).line
        })
        .collect();
    let unused = unused_rule.map(|rule| {
        // Each finding answers for its first line and its comment line: a set, so a
        // file of many comments and findings costs their sum, not their product.
        let mut hit: rustc_hash::FxHashSet<(usize, &str)> = rustc_hash::FxHashSet::default();
        for (f, &cl) in report.findings.iter().zip(&comment_lines) {
            for line in [f.line, cl] {
                hit.insert((line, f.code));
                hit.insert((line, ""));
            }
        }
        let hits = |line: usize, code: Option<&str>| hit.contains(&(line, code.unwrap_or("")));
        let found = crate::noqa::unused(
            text,
            model
                .comments
                .iter()
                .map(|c| crate::noqa::comment_range(*c, text)),
            |at| src.line_col(at).line,
            hits,
            |code| crate::rules::by_code(code).is_some(),
            |code| rules.iter().any(|r| r.code == code),
            rule.code,
        );
        (rule, found)
    });
    let mut keep = comment_lines.iter();
    report.findings.retain(|f| {
        let cl = keep.next().copied().unwrap_or(f.line);
        !noqa.suppresses_on(f.code, f.line, cl)
    });
    let Some((rule, found)) = unused else {
        return;
    };
    let path = report.path.clone();
    for u in found {
        let d = unused_diagnostic(u);
        let f = finding(rule, d, &path, src);
        if !noqa.names_code(f.code, f.line) {
            report.findings.push(f);
        }
    }
}

/// The unused-noqa finding of one directive.
fn unused_diagnostic(u: crate::noqa::Unused) -> Diagnostic {
    let list = |codes: &[String]| {
        codes
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (message, title) = if u.blanket {
        (
            "this `# noqa` suppresses nothing: no finding on this line".to_owned(),
            "Remove the unused `# noqa`".to_owned(),
        )
    } else {
        let mut parts = Vec::new();
        if !u.unused.is_empty() {
            parts.push(format!("unused {}", list(&u.unused)));
        }
        if !u.unknown.is_empty() {
            parts.push(format!("unknown {}", list(&u.unknown)));
        }
        (
            format!(
                "`# noqa` names codes that suppress nothing here: {}",
                parts.join("; ")
            ),
            "Remove the unused codes".to_owned(),
        )
    };
    Diagnostic {
        range: u.range,
        message,
        help: "remove the codes that suppress nothing (the whole comment when none is left)"
            .to_owned(),
        pattern: crate::pattern::Pattern::UnusedSuppression,
        fix: Some(crate::fix::Fix {
            title,
            edits: vec![u.edit],
            applicability: crate::fix::Applicability::Safe,
        }),
        related: Vec::new(),
    }
}

/// Stage `finish`: a warning if the analysis hit its depth limit, the findings in
/// position order without duplicates, and the text kept for the snippets.
fn finish(mut report: FileReport, model: &SemanticModel, text: &str) -> FileReport {
    if model.depth_limited() {
        report.warnings.push(FileWarning::TooDeep {
            path: report.path.clone(),
        });
    }
    report
        .findings
        .sort_by(|a, b| (a.line, a.column, a.code).cmp(&(b.line, b.column, b.code)));
    report.findings.dedup();
    if !report.findings.is_empty() {
        report.source = Some(Arc::from(text));
    }
    report
}

thread_local! {
    /// How many [`catch_quietly`] calls are running on this thread.
    static QUIET: Cell<u32> = const { Cell::new(0) };
    /// Where the last quietly caught panic happened.
    static PANICKED_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` and returns its panic, if any, as a message that says where it happened.
/// The default panic report (`thread '...' panicked at ...`) is not printed for it: the
/// caller reports the panic as an internal error that names the file.
pub fn catch_quietly<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let quiet = QUIET.try_with(Cell::get).unwrap_or(0) > 0;
            if !quiet {
                return default(info);
            }
            let at = info.location().map(|l| l.to_string());
            let _ = PANICKED_AT.try_with(|p| *p.borrow_mut() = at);
        }));
    });
    QUIET.with(|q| q.set(q.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get() - 1));
    result.map_err(|panic| {
        let message = panic_message(&panic);
        match PANICKED_AT.with(|p| p.borrow_mut().take()) {
            Some(at) => format!("{message} (at {at})"),
            None => message,
        }
    })
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::project::{NoStore, ProjectIndex};

    fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                python_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "py") {
                out.push(p);
            }
        }
    }

    /// What a report says, to compare two.
    fn said(r: &FileReport) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{}\n{:?}",
            r.findings,
            r.warnings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            r.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            r.skipped_by_prefilter,
            r.source,
        )
    }

    /// A lint kept from the index's pass is the lint the file gets on its own with the
    /// project's facts: on every fixture, as one project and as each fixture project.
    #[test]
    fn lints_kept_from_the_index_pass_are_fresh_lints() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut roots = vec![fixtures.clone()];
        for e in std::fs::read_dir(fixtures.join("project"))
            .unwrap()
            .flatten()
        {
            roots.push(e.path());
        }
        let (mut kept, mut again) = (0, 0);
        // Counted on the fixtures linted as one project. The fixture projects (inside it
        // too) exist to make facts of other files matter, so most of their files are
        // linted again; what it costs on real code is measured by the benchmarks.
        let (mut kept_top, mut again_top) = (0, 0);
        for root in roots {
            let top = root == fixtures;
            let mut files = Vec::new();
            python_files(&root, &mut files);
            files.sort();
            let linter = Linter::new(crate::rules::ALL);
            let (index, seen) = ProjectIndex::build_with(&root, &files, &NoStore, &|p, s| {
                linter.lint_in_index(p, s)
            });
            assert_eq!(seen.len(), files.len(), "{}", root.display());
            let linter = linter.with_project(Arc::new(Projects(vec![index])));
            for (path, spec) in seen {
                let fresh = linter.lint_path(&path);
                let (report, was_kept) = linter.lint_path_after(&path, Some(spec));
                assert_eq!(said(&report), said(&fresh), "{}", path.display());
                if was_kept {
                    kept += 1;
                    kept_top += usize::from(top);
                } else {
                    again += 1;
                    again_top += usize::from(top);
                }
            }
        }
        // Both ways are exercised: a good share of files keep their first lint (at
        // least a third), files whose facts from other files matter are linted again.
        assert!(
            kept_top * 2 > again_top && again > 0 && kept > 0,
            "kept {kept} ({kept_top} as one project), linted again {again} ({again_top})"
        );
    }

    /// A file whose lint asked a question that the project answers differently from
    /// the guess is linted again.
    #[test]
    fn a_lint_that_asked_what_the_project_changes_is_not_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(
            root.join("helpers.py"),
            "def mean_loss(out, y):\n    return criterion(out, y).item()\n",
        )
        .unwrap();
        let train = "import torch\nfrom helpers import mean_loss\nlosses = []\n\
                     for x, y in loader:\n    loss = mean_loss(model(x), y)\n    losses.append(loss)\n";
        std::fs::write(root.join("train.py"), train).unwrap();
        let files = vec![root.join("helpers.py"), root.join("train.py")];
        let linter = Linter::new(crate::rules::ALL);
        let (index, seen) =
            ProjectIndex::build_with(&root, &files, &NoStore, &|p, s| linter.lint_in_index(p, s));
        let linter = linter.with_project(Arc::new(Projects(vec![index])));
        let mut seen: std::collections::HashMap<_, _> = seen.into_iter().collect();
        let spec = seen.remove(&root.join("train.py")).unwrap();
        assert!(spec
            .queries
            .contains(&FactQuery::DetachedImport("mean_loss".to_owned())));
        let (report, kept) = linter.lint_path_after(&root.join("train.py"), Some(spec));
        assert!(!kept);
        assert_eq!(
            said(&report),
            said(&linter.lint_path(&root.join("train.py")))
        );
    }
}
