//! Configuration: `[tool.oomlint]` in `pyproject.toml`, or `oomlint.toml` /
//! `.oomlint.toml` (the table at the top level). For each linted file the closest
//! configuration in its folder or a folder above wins; in one folder `.oomlint.toml`
//! wins over `oomlint.toml`, which wins over `pyproject.toml`, and a `pyproject.toml`
//! without `[tool.oomlint]` is passed over. `--config PATH` uses one file for all,
//! `--isolated` none. Globs in a configuration are relative to its folder.
//!
//! Command-line options layer on top: `--select` replaces the configured `select` and
//! `ignore`; `--extend-select`, `--ignore` and `--exclude` add to the configured ones.

// A configuration error carries the file's text for its report; it is made at most once
// per run, so its size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use miette::{Diagnostic, NamedSource, SourceSpan};
use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use crate::rule::Rule;
use crate::{paths, selection, walk};

/// The file names that hold a configuration, in the order they win within one folder.
pub const CONFIG_FILES: &[&str] = &[".oomlint.toml", "oomlint.toml", "pyproject.toml"];

/// A configuration file that cannot be used: the run stops with exit code 2.
#[derive(Debug, Error, Diagnostic)]
pub enum ConfigError {
    #[error("{path}:{line}: {message}")]
    #[diagnostic(code(oomlint::config))]
    Invalid {
        path: String,
        line: usize,
        message: String,
        #[source_code]
        src: NamedSource<String>,
        #[label("{label}")]
        span: SourceSpan,
        label: String,
        #[help]
        help: Option<String>,
    },

    #[error("{path}: cannot read configuration: {reason}")]
    #[diagnostic(code(oomlint::config))]
    Io { path: String, reason: String },
}

/// The keys of `[tool.oomlint]`, as written, with spans for error reports.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Options {
    select: Option<Vec<Spanned<String>>>,
    ignore: Option<Vec<Spanned<String>>>,
    extend_select: Option<Vec<Spanned<String>>>,
    exclude: Option<Vec<Spanned<String>>>,
    extend_exclude: Option<Vec<Spanned<String>>>,
    per_file_ignores: Option<BTreeMap<Spanned<String>, Vec<Spanned<String>>>>,
    respect_gitignore: Option<bool>,
}

#[derive(Deserialize)]
struct Pyproject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    oomlint: Option<Options>,
}

/// Keys accepted in a configuration (for the help of an unknown-key error).
const KEYS: &str =
    "select, ignore, extend-select, exclude, extend-exclude, per-file-ignores, respect-gitignore";

/// One loaded configuration file, or the defaults.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file it came from; `None` for the defaults.
    pub file: Option<PathBuf>,
    /// The absolute folder its globs are relative to.
    pub root: PathBuf,
    pub select: Option<Vec<String>>,
    pub ignore: Vec<String>,
    pub extend_select: Vec<String>,
    pub exclude: Option<Vec<String>>,
    pub extend_exclude: Vec<String>,
    pub per_file_ignores: Vec<(String, Vec<String>)>,
    pub respect_gitignore: Option<bool>,
}

impl Config {
    /// Reads and validates a configuration file. `Ok(None)`: a `pyproject.toml`
    /// without `[tool.oomlint]`.
    pub fn load(path: &Path) -> Result<Option<Config>, ConfigError> {
        let shown = paths::relative_to_cwd(&path.to_string_lossy()).into_owned();
        let shown = paths::display(Path::new(&shown));
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: shown.clone(),
            reason: crate::error::io_reason(&e),
        })?;
        let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
        Config::parse(
            &shown,
            &text,
            is_pyproject,
            &absolute(path.parent().unwrap_or(Path::new("."))),
        )
    }

    /// Parses configuration text; `shown` names the file in errors.
    pub fn parse(
        shown: &str,
        text: &str,
        is_pyproject: bool,
        root: &Path,
    ) -> Result<Option<Config>, ConfigError> {
        let err = |span: Range<usize>, message: String, label: &str, help: Option<String>| {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            ConfigError::Invalid {
                path: shown.to_owned(),
                line,
                message,
                src: NamedSource::new(shown, text.to_owned()),
                span: (span.start, span.end.saturating_sub(span.start)).into(),
                label: label.to_owned(),
                help,
            }
        };
        let parsed: Result<Option<Options>, toml::de::Error> = if is_pyproject {
            toml::from_str::<Pyproject>(text).map(|p| p.tool.and_then(|t| t.oomlint))
        } else {
            toml::from_str::<Options>(text).map(Some)
        };
        let opts = match parsed {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(None),
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = e.message().trim().to_owned();
                let (message, help) = if let Some(key) = unknown_key(&msg) {
                    let table = if is_pyproject {
                        "[tool.oomlint]"
                    } else {
                        "the configuration"
                    };
                    (
                        format!("unknown key `{key}` in {table}"),
                        Some(format!("the keys are: {KEYS}")),
                    )
                } else {
                    (format!("invalid configuration: {msg}"), None)
                };
                return Err(err(span, message, "here", help));
            }
        };

        let codes = |key: &str,
                     v: Option<Vec<Spanned<String>>>|
         -> Result<Option<Vec<String>>, ConfigError> {
            let Some(v) = v else { return Ok(None) };
            for c in &v {
                if selection::matching(c.get_ref()).is_err() {
                    return Err(err(
                        c.span(),
                        format!("unknown rule code or prefix `{}` in `{key}`", c.get_ref()),
                        "unknown rule code",
                        Some("see `oomlint rules` for the codes".to_owned()),
                    ));
                }
            }
            Ok(Some(v.into_iter().map(Spanned::into_inner).collect()))
        };
        let globs = |key: &str,
                     v: Option<Vec<Spanned<String>>>|
         -> Result<Option<Vec<String>>, ConfigError> {
            let Some(v) = v else { return Ok(None) };
            for g in &v {
                if let Err(e) = compile_glob(g.get_ref()) {
                    return Err(err(
                        g.span(),
                        format!("invalid glob `{}` in `{key}`: {}", g.get_ref(), e.kind()),
                        "invalid glob",
                        None,
                    ));
                }
            }
            Ok(Some(v.into_iter().map(Spanned::into_inner).collect()))
        };

        let mut per_file = Vec::new();
        for (glob, list) in opts.per_file_ignores.unwrap_or_default() {
            if let Err(e) = compile_glob(glob.get_ref()) {
                return Err(err(
                    glob.span(),
                    format!(
                        "invalid glob `{}` in `per-file-ignores`: {}",
                        glob.get_ref(),
                        e.kind()
                    ),
                    "invalid glob",
                    None,
                ));
            }
            let list = codes("per-file-ignores", Some(list))?.unwrap_or_default();
            per_file.push((glob.into_inner(), list));
        }
        Ok(Some(Config {
            file: None,
            root: root.to_path_buf(),
            select: codes("select", opts.select)?,
            ignore: codes("ignore", opts.ignore)?.unwrap_or_default(),
            extend_select: codes("extend-select", opts.extend_select)?.unwrap_or_default(),
            exclude: globs("exclude", opts.exclude)?,
            extend_exclude: globs("extend-exclude", opts.extend_exclude)?.unwrap_or_default(),
            per_file_ignores: per_file,
            respect_gitignore: opts.respect_gitignore,
        }))
    }
}

/// `unknown field `foo`, expected one of ...` -> `foo`.
fn unknown_key(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn compile_glob(g: &str) -> Result<globset::Glob, globset::Error> {
    let g = g.trim_end_matches('/');
    GlobBuilder::new(g).literal_separator(true).build()
}

/// The command-line options that layer over a configuration.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub select: Vec<String>,
    pub extend_select: Vec<String>,
    pub ignore: Vec<String>,
    pub exclude: Vec<String>,
    /// `Some(false)` for `--no-respect-gitignore`.
    pub respect_gitignore: Option<bool>,
}

/// A configuration with the command line applied: what linting a file needs.
pub struct Settings {
    pub config: Config,
    pub rules: Vec<&'static Rule>,
    pub respect_gitignore: bool,
    /// Globs matched against names of files and folders (no `/` in the glob).
    exclude_names: GlobSet,
    /// Globs matched against paths relative to `config.root`.
    exclude_paths: GlobSet,
    /// `per-file-ignores`, compiled once into two sets for the whole table.
    per_file: PerFile,
    /// Every exclude glob, for `--show-settings`.
    pub exclude: Vec<String>,
}

impl Settings {
    pub fn new(config: Config, cli: &Overrides) -> Result<Settings, crate::error::UsageError> {
        let (select, ignore): (Vec<String>, Vec<String>) = if cli.select.is_empty() {
            let mut ig = config.ignore.clone();
            ig.extend(cli.ignore.iter().cloned());
            (config.select.clone().unwrap_or_default(), ig)
        } else {
            (cli.select.clone(), cli.ignore.clone())
        };
        let mut extend = config.extend_select.clone();
        extend.extend(cli.extend_select.iter().cloned());
        let rules = selection::resolve(&select, &extend, &ignore)?;

        let mut exclude: Vec<String> = match &config.exclude {
            Some(e) => e.clone(),
            None => walk::SKIPPED_DIRS.iter().map(|s| s.to_string()).collect(),
        };
        exclude.extend(config.extend_exclude.iter().cloned());
        exclude.extend(cli.exclude.iter().cloned());
        let (exclude_names, exclude_paths) = glob_sets(&exclude)?;
        let per_file = PerFile::new(&config.per_file_ignores)?;
        Ok(Settings {
            respect_gitignore: cli
                .respect_gitignore
                .or(config.respect_gitignore)
                .unwrap_or(true),
            config,
            rules,
            exclude_names,
            exclude_paths,
            per_file,
            exclude,
        })
    }

    /// Whether the walk skips this file or folder: its name matches an exclude glob
    /// without `/`, or its path below the root one with `/`. Folders above it are not
    /// looked at: the walk never enters an excluded folder, and one named on the command
    /// line is walked.
    pub fn is_excluded(&self, path: &Path) -> bool {
        matches_any(
            &self.exclude_names,
            &self.exclude_paths,
            &self.config.root,
            path,
            false,
        )
    }

    /// `--force-exclude`: also when a folder above it (below the root) is excluded.
    pub fn is_excluded_anywhere(&self, path: &Path) -> bool {
        matches_any(
            &self.exclude_names,
            &self.exclude_paths,
            &self.config.root,
            path,
            true,
        )
    }

    /// The enabled rules that `per-file-ignores` turn off for `path`, in code order.
    pub fn rules_off(&self, path: &Path) -> Vec<&'static Rule> {
        let off = self.per_file.rules_off(&self.config.root, path);
        self.rules
            .iter()
            .copied()
            .filter(|r| off.iter().any(|o| std::ptr::eq(*o, *r)))
            .collect()
    }

    /// The rules to run on `path`: the enabled ones less its `per-file-ignores`.
    pub fn rules_for(&self, path: &Path) -> std::borrow::Cow<'_, [&'static Rule]> {
        let off = self.per_file.rules_off(&self.config.root, path);
        if off.is_empty() {
            std::borrow::Cow::Borrowed(&self.rules)
        } else {
            std::borrow::Cow::Owned(
                self.rules
                    .iter()
                    .copied()
                    .filter(|r| !off.iter().any(|o| std::ptr::eq(*o, *r)))
                    .collect(),
            )
        }
    }

    /// What `--show-settings` prints.
    pub fn describe(&self, path: &str) -> String {
        let mut s = String::new();
        let list = |v: &[String]| {
            v.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(s, "Settings for {path}");
        match &self.config.file {
            Some(f) => {
                let _ = writeln!(s, "config file: {}", f.display());
            }
            None => {
                let _ = writeln!(s, "config file: none (defaults)");
            }
        }
        let _ = writeln!(s, "root: {}", self.config.root.display());
        let codes: Vec<String> = self.rules.iter().map(|r| r.code.to_owned()).collect();
        let _ = writeln!(s, "enabled rules = [{}]", list(&codes));
        if let Some(sel) = &self.config.select {
            let _ = writeln!(s, "select = [{}]", list(sel));
        }
        let _ = writeln!(s, "extend-select = [{}]", list(&self.config.extend_select));
        let _ = writeln!(s, "ignore = [{}]", list(&self.config.ignore));
        let _ = writeln!(s, "exclude = [{}]", list(&self.exclude));
        let _ = writeln!(s, "per-file-ignores = {{");
        for (g, c) in &self.config.per_file_ignores {
            let _ = writeln!(s, "  {g:?} = [{}]", list(c));
        }
        let _ = writeln!(s, "}}");
        let _ = writeln!(s, "respect-gitignore = {}", self.respect_gitignore);
        s
    }
}

/// `per-file-ignores`: every glob of the table in one of two sets (names, paths below
/// the root, as [`matches_any`] splits them), each glob knowing its entry, so the rules
/// of a file cost one match per folder level, not one per entry (20,000 entries over
/// 20,000 files took two minutes).
#[derive(Default)]
struct PerFile {
    names: GlobSet,
    name_entry: Vec<usize>,
    paths: GlobSet,
    path_entry: Vec<usize>,
    /// The rules each entry turns off.
    off: Vec<Vec<&'static Rule>>,
}

impl PerFile {
    fn new(table: &[(String, Vec<String>)]) -> Result<PerFile, crate::error::UsageError> {
        if table.is_empty() {
            return Ok(PerFile::default());
        }
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        let mut pf = PerFile::default();
        for (i, (g, codes)) in table.iter().enumerate() {
            let glob = compile_glob(g).map_err(|e| {
                crate::error::UsageError::Other(format!("invalid glob `{g}`: {}", e.kind()))
            })?;
            if g.trim_end_matches('/').contains('/') {
                paths.add(glob);
                pf.path_entry.push(i);
            } else {
                names.add(glob);
                pf.name_entry.push(i);
            }
            let mut off = Vec::new();
            for c in codes {
                off.extend(selection::matching(c)?);
            }
            pf.off.push(off);
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|e| crate::error::UsageError::Other(format!("invalid glob: {e}")))
        };
        pf.names = build(names)?;
        pf.paths = build(paths)?;
        Ok(pf)
    }

    /// The rules the entries matching `path` turn off: the same matching as
    /// [`matches_any`] with `ancestors`, for all entries at once.
    fn rules_off(&self, root: &Path, path: &Path) -> Vec<&'static Rule> {
        if self.off.is_empty() {
            return Vec::new();
        }
        let mut hit = vec![false; self.off.len()];
        let mut buf = Vec::new();
        let abs = absolute(path);
        let rel = abs.strip_prefix(root).ok();
        let mut mark = |set: &GlobSet, entry: &[usize], candidate: &Path| {
            set.matches_into(candidate, &mut buf);
            for &k in &buf {
                hit[entry[k]] = true;
            }
        };
        if !self.names.is_empty() {
            match rel {
                Some(rel) => {
                    for c in rel.components() {
                        if let Component::Normal(n) = c {
                            mark(&self.names, &self.name_entry, Path::new(n));
                        }
                    }
                }
                None => {
                    if let Some(n) = abs.file_name() {
                        mark(&self.names, &self.name_entry, Path::new(n));
                    }
                }
            }
        }
        if let Some(rel) = rel.filter(|r| !self.paths.is_empty() && !r.as_os_str().is_empty()) {
            for a in rel.ancestors().filter(|a| !a.as_os_str().is_empty()) {
                mark(&self.paths, &self.path_entry, a);
            }
        }
        hit.iter()
            .zip(&self.off)
            .filter(|(h, _)| **h)
            .flat_map(|(_, off)| off.iter().copied())
            .collect()
    }
}

fn glob_sets(globs: &[String]) -> Result<(GlobSet, GlobSet), crate::error::UsageError> {
    let mut names = GlobSetBuilder::new();
    let mut paths = GlobSetBuilder::new();
    for g in globs {
        let glob = compile_glob(g).map_err(|e| {
            crate::error::UsageError::Other(format!("invalid glob `{g}`: {}", e.kind()))
        })?;
        if g.trim_end_matches('/').contains('/') {
            paths.add(glob);
        } else {
            names.add(glob);
        }
    }
    let build = |b: GlobSetBuilder| {
        b.build()
            .map_err(|e| crate::error::UsageError::Other(format!("invalid glob: {e}")))
    };
    Ok((build(names)?, build(paths)?))
}

/// A glob without `/` matches the name of the file (or, with `ancestors`, of a folder
/// above it below the root); one with `/` matches the path relative to the root (or,
/// with `ancestors`, that of a folder above it).
fn matches_any(
    names: &GlobSet,
    paths: &GlobSet,
    root: &Path,
    path: &Path,
    ancestors: bool,
) -> bool {
    if names.is_empty() && paths.is_empty() {
        return false;
    }
    let abs = absolute(path);
    // A path outside the root is matched by its name only.
    let rel = abs.strip_prefix(root).ok();
    if !names.is_empty() {
        let hit = match (ancestors, rel) {
            (true, Some(rel)) => rel
                .components()
                .any(|c| matches!(c, Component::Normal(n) if names.is_match(n))),
            _ => abs.file_name().is_some_and(|n| names.is_match(n)),
        };
        if hit {
            return true;
        }
    }
    let Some(rel) = rel else { return false };
    if paths.is_empty() || rel.as_os_str().is_empty() {
        return false;
    }
    if ancestors {
        rel.ancestors()
            .any(|a| !a.as_os_str().is_empty() && paths.is_match(a))
    } else {
        paths.is_match(rel)
    }
}

/// `path` made absolute against the working directory, with `.` and `..` folded.
pub fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// How configuration is found for the files of one run.
pub enum Mode {
    /// The closest configuration above each file.
    Discover,
    /// `--config PATH`: this one for all files.
    Fixed(Arc<Settings>),
    /// `--isolated`: the defaults for all files.
    Isolated(Arc<Settings>),
}

/// Finds and caches the settings of each folder; safe to share between walker threads.
pub struct Resolver {
    mode: Mode,
    overrides: Overrides,
    /// Settings by absolute folder.
    cache: Mutex<HashMap<PathBuf, Arc<Settings>>>,
    default: Arc<Settings>,
    errors: Mutex<Vec<ConfigError>>,
    usage_errors: Mutex<Vec<crate::error::UsageError>>,
}

impl Resolver {
    pub fn new(
        config_file: Option<&Path>,
        isolated: bool,
        overrides: Overrides,
    ) -> Result<Resolver, Box<dyn Diagnostic + Send + Sync>> {
        let default = Arc::new(
            Settings::new(
                Config {
                    root: absolute(Path::new(".")),
                    ..Default::default()
                },
                &overrides,
            )
            .map_err(|e| Box::new(e) as Box<dyn Diagnostic + Send + Sync>)?,
        );
        let mode = if isolated {
            Mode::Isolated(default.clone())
        } else if let Some(p) = config_file {
            let is_toml = |c: Option<Config>| {
                c.unwrap_or(Config {
                    root: absolute(p.parent().unwrap_or(Path::new("."))),
                    ..Default::default()
                })
            };
            let mut c = is_toml(
                Config::load(p).map_err(|e| Box::new(e) as Box<dyn Diagnostic + Send + Sync>)?,
            );
            c.file = Some(p.to_path_buf());
            Mode::Fixed(Arc::new(
                Settings::new(c, &overrides)
                    .map_err(|e| Box::new(e) as Box<dyn Diagnostic + Send + Sync>)?,
            ))
        } else {
            Mode::Discover
        };
        Ok(Resolver {
            mode,
            overrides,
            cache: Mutex::new(HashMap::new()),
            default,
            errors: Mutex::new(Vec::new()),
            usage_errors: Mutex::new(Vec::new()),
        })
    }

    /// The settings for a file at `path` (which need not exist: `--stdin-filename`).
    pub fn for_file(&self, path: &Path) -> Arc<Settings> {
        let abs = absolute(path);
        let dir = abs.parent().unwrap_or(Path::new("/"));
        self.for_dir(dir)
    }

    /// The settings that apply inside folder `dir`.
    pub fn for_dir(&self, dir: &Path) -> Arc<Settings> {
        match &self.mode {
            Mode::Fixed(s) | Mode::Isolated(s) => return s.clone(),
            Mode::Discover => {}
        }
        let dir = absolute(dir);
        if let Some(s) = self.cache.lock().expect("lock").get(&dir) {
            return s.clone();
        }
        let found = self.discover(&dir);
        self.cache.lock().expect("lock").insert(dir, found.clone());
        found
    }

    fn discover(&self, dir: &Path) -> Arc<Settings> {
        for name in CONFIG_FILES {
            let candidate = dir.join(name);
            if !candidate.is_file() {
                continue;
            }
            match Config::load(&candidate) {
                Ok(Some(mut c)) => {
                    c.file = Some(candidate);
                    return match Settings::new(c, &self.overrides) {
                        Ok(s) => Arc::new(s),
                        Err(e) => {
                            self.usage_errors.lock().expect("lock").push(e);
                            self.default.clone()
                        }
                    };
                }
                Ok(None) => continue,
                Err(e) => {
                    self.errors.lock().expect("lock").push(e);
                    return self.default.clone();
                }
            }
        }
        match dir.parent() {
            Some(parent) => self.for_dir(parent),
            None => self.default.clone(),
        }
    }

    /// Configuration errors met so far (each file once), for the caller to report.
    pub fn take_errors(&self) -> Vec<Box<dyn Diagnostic + Send + Sync>> {
        let mut out: Vec<Box<dyn Diagnostic + Send + Sync>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for e in self.errors.lock().expect("lock").drain(..) {
            if seen.insert(e.to_string()) {
                out.push(Box::new(e));
            }
        }
        for e in self.usage_errors.lock().expect("lock").drain(..) {
            if seen.insert(e.to_string()) {
                out.push(Box::new(e));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, py: bool) -> Result<Option<Config>, ConfigError> {
        Config::parse("pyproject.toml", text, py, Path::new("/p"))
    }

    #[test]
    fn pyproject_without_table_is_skipped() {
        assert!(parse("[project]\nname = 'x'\n", true).unwrap().is_none());
        assert!(parse("[tool.ruff]\nselect = ['E']\n", true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn keys_are_read() {
        let c = parse(
            "[tool.oomlint]\nselect = ['OOM2']\nextend-exclude = ['old/']\n\
             per-file-ignores = { 'tests/*' = ['OOM201'] }\nrespect-gitignore = false\n",
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.select, Some(vec!["OOM2".to_owned()]));
        assert_eq!(c.extend_exclude, ["old/"]);
        assert_eq!(
            c.per_file_ignores,
            [("tests/*".to_owned(), vec!["OOM201".to_owned()])]
        );
        assert_eq!(c.respect_gitignore, Some(false));
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = parse(
            "[tool.oomlint]\nselect = ['OOM2']\nselct = ['OOM201']\n",
            true,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "pyproject.toml:3: unknown key `selct` in [tool.oomlint]"
        );
    }

    #[test]
    fn unknown_code_names_key_and_line() {
        let e = parse("\n\nignore = ['OOM999']\n", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pyproject.toml:3: unknown rule code or prefix `OOM999` in `ignore`"
        );
    }

    #[test]
    fn globs_match_names_and_relative_paths() {
        let c = Config {
            root: PathBuf::from("/p"),
            extend_exclude: vec!["legacy/old".into(), "scratch_*.py".into()],
            per_file_ignores: vec![("tests/**/*.py".into(), vec!["OOM201".into()])],
            ..Default::default()
        };
        let s = Settings::new(c, &Overrides::default()).unwrap();
        assert!(s.is_excluded(Path::new("/p/legacy/old")));
        assert!(!s.is_excluded(Path::new("/p/legacy/old/a.py")));
        assert!(s.is_excluded_anywhere(Path::new("/p/legacy/old/a.py")));
        assert!(!s.is_excluded_anywhere(Path::new("/p/src/legacy/old/a.py")));
        assert!(s.is_excluded(Path::new("/p/src/scratch_1.py")));
        assert!(s.is_excluded(Path::new("/p/src/.venv")));
        assert!(!s.is_excluded(Path::new("/p/src/.venv/x.py")));
        assert!(s.is_excluded_anywhere(Path::new("/p/src/.venv/x.py")));
        // Outside the root only the name counts.
        assert!(!s.is_excluded_anywhere(Path::new("/q/build/x.py")));
        assert!(s.is_excluded(Path::new("/q/build")));
        assert!(!s.is_excluded(Path::new("/p/src/train.py")));
        assert!(!s
            .rules_for(Path::new("/p/tests/unit/t.py"))
            .iter()
            .any(|r| r.code == "OOM201"));
        assert!(s
            .rules_for(Path::new("/p/src/t.py"))
            .iter()
            .any(|r| r.code == "OOM201"));
    }

    /// `per-file-ignores` is one pair of glob sets: N entries over N files cost one match
    /// per folder level of each file (20,000 x 20,000 was 400 million matches, two
    /// minutes); each file still gets exactly the entries that match it, by name, by
    /// path, and by a folder above it. The time is printed, not asserted (the machine is
    /// shared); `tests/stress.rs`-style figures belong to benchmarks.
    #[test]
    fn many_per_file_ignores_match_right() {
        let n = 4_000;
        let mut table: Vec<(String, Vec<String>)> = (0..n)
            .map(|i| (format!("pkg{}/m{i}.py", i % 7), vec!["OOM201".to_owned()]))
            .collect();
        table.push(("special_*.py".to_owned(), vec!["OOM202".to_owned()]));
        table.push(("legacy".to_owned(), vec!["OOM3".to_owned()]));
        let c = Config {
            root: PathBuf::from("/p"),
            per_file_ignores: table,
            ..Default::default()
        };
        let s = Settings::new(c, &Overrides::default()).unwrap();
        let all = s.rules.len();
        let t = std::time::Instant::now();
        for i in 0..n {
            let off = all
                - s.rules_for(Path::new(&format!("/p/pkg{}/m{i}.py", i % 7)))
                    .len();
            assert_eq!(off, 1, "{i}");
        }
        println!("{n} per-file-ignores over {n} files: {:?}", t.elapsed());
        let has = |p: &str, code: &str| s.rules_for(Path::new(p)).iter().any(|r| r.code == code);
        assert!(has("/p/pkg1/m0.py", "OOM201"), "m0 is in pkg0");
        assert!(!has("/p/a/special_x.py", "OOM202"));
        assert!(has("/p/a/other.py", "OOM202"));
        assert!(!has("/p/legacy/deep/x.py", "OOM301"));
        assert!(has("/p/src/x.py", "OOM301"));
        // Outside the root only the name counts.
        assert!(!has("/q/special_1.py", "OOM202"));
        assert!(has("/q/pkg0/m0.py", "OOM201"));
    }
}
