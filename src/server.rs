//! `oomlint server`: the Language Server Protocol, synchronous, over any
//! [`lsp_server::Connection`] (the command line gives it stdio).
//!
//! Documents are linted from the text the editor sends, never from disk: on open and
//! save at once, on change after a quiet spell ([`DEBOUNCE`]). Python files and the code
//! cells of notebooks (LSP 3.17 notebook documents) are linted; a notebook's cells are
//! joined the way `.ipynb` files are ([`crate::notebook`]) and findings are published on
//! the cell they start in. Configuration is resolved as on the command line (the
//! `pyproject.toml` of the document's project, `per-file-ignores`), and the files beside
//! the document give it their project facts ([`crate::project`]), read from disk and
//! summarized once per project until a file of it is saved.
//!
//! Code actions: each finding's fix (marked preferred when safe), "Add `# noqa: CODE`"
//! (the edit `--add-noqa` makes), and `source.fixAll.oomlint`, which applies the safe
//! fixes as `--fix` does. A panic while linting or answering becomes a log message.

// lsp-types keys `WorkspaceEdit::changes` by `Uri`, whose interior cell caches parsed
// parts and takes no part in hashing or equality (rust-analyzer allows this lint too).
#![allow(clippy::mutable_key_type)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, CodeDescription, Diagnostic,
    DiagnosticRelatedInformation, DiagnosticSeverity, DidChangeNotebookDocumentParams,
    DidChangeTextDocumentParams, DidCloseNotebookDocumentParams, DidCloseTextDocumentParams,
    DidOpenNotebookDocumentParams, DidOpenTextDocumentParams, DidSaveNotebookDocumentParams,
    DidSaveTextDocumentParams, Location, NotebookCellKind, NumberOrString, Position,
    PublishDiagnosticsParams, Range, TextDocumentContentChangeEvent, TextEdit, Uri, WorkspaceEdit,
};
use serde_json::{json, Value};

use crate::config::{Overrides, Resolver};
use crate::fix::{Applicability, Edit};
use crate::lint::{catch_quietly, Linter};
use crate::notebook::Notebook;
use crate::project::{project_root, NoStore, ProjectIndex, Projects};
use crate::report::{FileReport, Finding};
use crate::rule::Severity;

/// How long the text must rest after a change before it is linted.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// The code action kind that applies every safe fix of a document.
pub const FIX_ALL: &str = "source.fixAll.oomlint";

/// A project with more Python files than this is linted without its project facts:
/// summarizing it would stall the editor (a home folder with no project marker).
const MAX_INDEXED_FILES: usize = 20_000;

/// What the server tells the client it can do.
pub fn capabilities() -> Value {
    json!({
        "positionEncoding": "utf-16",
        "textDocumentSync": {
            "openClose": true,
            "change": 2,
            "save": { "includeText": false }
        },
        "notebookDocumentSync": {
            "notebookSelector": [{
                "notebook": { "notebookType": "jupyter-notebook" },
                "cells": [{ "language": "python" }]
            }],
            "save": true
        },
        "codeActionProvider": {
            "codeActionKinds": ["quickfix", FIX_ALL],
            "resolveProvider": false
        }
    })
}

/// Runs the server on `connection` until the client says `exit` or hangs up.
pub fn serve(connection: &Connection) -> Result<(), String> {
    let caps = capabilities();
    let init = connection
        .initialize(caps)
        .map_err(|e| format!("initialize: {e}"))?;
    let mut server = Server::new(connection, &init);
    server.run();
    Ok(())
}

/// An open text document: a Python file or a notebook cell.
struct TextDoc {
    uri: Uri,
    text: String,
    version: i32,
}

/// An open notebook: its cells in order (the code cells are linted).
struct NotebookDoc {
    uri: Uri,
    version: i32,
    cells: Vec<(Uri, bool)>,
}

/// One published diagnostic and the edits its code actions offer.
struct Entry {
    uri: Uri,
    diagnostic: Diagnostic,
    fix: Option<(String, Applicability, HashMap<Uri, Vec<TextEdit>>)>,
    noqa: Option<HashMap<Uri, Vec<TextEdit>>>,
}

/// How positions map between the linted text and the documents: a Python file is the
/// text itself; a notebook's joined source maps back to its cells.
enum Layout<'a> {
    File {
        uri: &'a Uri,
        text: &'a str,
        /// Bytes the decoder dropped at the start (a byte order mark).
        shift: usize,
    },
    Cells {
        nb: Notebook,
        index: crate::notebook::CellIndex,
        lines: crate::source::LineIndex,
        /// Per code cell, in order: its document and its text.
        cells: Vec<(&'a Uri, &'a str)>,
    },
}

impl Layout<'_> {
    /// The document and position of byte `offset` of the linted text.
    fn locate(&self, offset: usize) -> Option<(Uri, usize, &str)> {
        match self {
            Layout::File { uri, text, shift } => Some(((*uri).clone(), offset + shift, text)),
            Layout::Cells {
                nb,
                index,
                lines,
                cells,
            } => {
                let at = index.locate(&nb.source, lines, offset);
                let (uri, text) = cells.get(at.cell.checked_sub(1)?)?;
                let within = offset.checked_sub(at.code.start)?.min(text.len());
                Some(((*uri).clone(), within, text))
            }
        }
    }

    fn range(&self, start: usize, end: usize) -> Option<(Uri, Range)> {
        let (uri, s, text) = self.locate(start)?;
        let (uri2, e, _) = self.locate(end.max(start))?;
        let e = if uri2 == uri { e } else { text.len() };
        Some((uri, Range::new(position(text, s), position(text, e.max(s)))))
    }

    /// Edits of the linted text as edits of the documents; `None` if one does not lie
    /// within one document.
    fn edits(&self, edits: &[Edit]) -> Option<HashMap<Uri, Vec<TextEdit>>> {
        let mut out: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
        for e in edits {
            let (uri, s, text) = self.locate(e.range.start)?;
            let (uri2, end, _) = self.locate(e.range.end)?;
            if uri2 != uri || end < s {
                return None;
            }
            let range = Range::new(position(text, s), position(text, end));
            out.entry(uri).or_default().push(TextEdit {
                range,
                new_text: e.content.clone(),
            });
        }
        Some(out)
    }
}

/// The LSP position (UTF-16 code units) of byte `offset` of `text`.
pub fn position(text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count();
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    Position::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(character).unwrap_or(u32::MAX),
    )
}

/// The byte offset of an LSP position in `text`, clamped to the text (a position past
/// the end of a line is the line's end).
pub fn offset(text: &str, pos: Position) -> usize {
    let mut line_start = 0;
    for _ in 0..pos.line {
        match text[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => return text.len(),
        }
    }
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let mut units = 0u32;
    for (i, c) in text[line_start..line_end].char_indices() {
        if units >= pos.character {
            return line_start + i;
        }
        units += c.len_utf16() as u32;
    }
    line_end
}

/// Applies one content change (a whole text, or a range replaced).
pub fn apply_change(text: &mut String, change: TextDocumentContentChangeEvent) {
    match change.range {
        None => *text = change.text,
        Some(r) => {
            let s = offset(text, r.start);
            let e = offset(text, r.end).max(s);
            text.replace_range(s..e, &change.text);
        }
    }
}

/// The path a document URI names, if it is a `file:` URI.
pub fn uri_path(uri: &Uri) -> Option<PathBuf> {
    let s = uri.as_str();
    let rest = s.strip_prefix("file://")?;
    // `file:///path` or `file://host/path`: the path starts at the next `/`.
    let path = &rest[rest.find('/')?..];
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = percent_decode(path);
    #[cfg(windows)]
    {
        let s = String::from_utf8_lossy(&bytes);
        // `/c:/x` is `c:/x`.
        let s = match s.as_bytes() {
            [b'/', d, b':', ..] if d.is_ascii_alphabetic() => s[1..].to_owned(),
            _ => s.into_owned(),
        };
        Some(PathBuf::from(s))
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

struct Server<'c> {
    conn: &'c Connection,
    docs: HashMap<String, TextDoc>,
    notebooks: HashMap<String, NotebookDoc>,
    /// Cell document -> its notebook.
    owner: HashMap<String, String>,
    /// What was last published, per linted unit (a file or a notebook).
    results: HashMap<String, Vec<Entry>>,
    /// The documents each unit last published on (a notebook's cells).
    published: HashMap<String, Vec<Uri>>,
    /// Units changed and not linted yet, and when they may be.
    pending: HashMap<String, Instant>,
    projects: HashMap<PathBuf, Arc<Projects>>,
    shutdown: bool,
}

impl<'c> Server<'c> {
    fn new(conn: &'c Connection, _init: &Value) -> Self {
        Server {
            conn,
            docs: HashMap::new(),
            notebooks: HashMap::new(),
            owner: HashMap::new(),
            results: HashMap::new(),
            published: HashMap::new(),
            pending: HashMap::new(),
            projects: HashMap::new(),
            shutdown: false,
        }
    }

    fn run(&mut self) {
        loop {
            let next_due = self.pending.values().min().copied();
            let msg = match next_due {
                Some(due) => {
                    let wait = due.saturating_duration_since(Instant::now());
                    match self.conn.receiver.recv_timeout(wait) {
                        Ok(m) => Some(m),
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                    }
                }
                None => match self.conn.receiver.recv() {
                    Ok(m) => Some(m),
                    Err(_) => return,
                },
            };
            match msg {
                Some(Message::Request(req)) => self.guarded("a request", |s| s.request(req)),
                Some(Message::Notification(n)) => {
                    if n.method == "exit" {
                        return;
                    }
                    self.guarded("a notification", |s| s.notification(n));
                }
                Some(Message::Response(_)) => {}
                None => {}
            }
            let now = Instant::now();
            let due: Vec<String> = self
                .pending
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(k, _)| k.clone())
                .collect();
            for key in due {
                self.pending.remove(&key);
                self.guarded("linting", |s| s.lint_and_publish(&key));
            }
        }
    }

    /// Runs `f`; a panic in it is logged, and the server goes on.
    fn guarded(&mut self, what: &str, f: impl FnOnce(&mut Self)) {
        if let Err(message) = catch_quietly(|| f(self)) {
            self.log(1, &format!("oomlint: internal error in {what}: {message}"));
        }
    }

    fn send(&self, msg: impl Into<Message>) {
        // The client hung up: the loop ends at the next receive.
        let _ = self.conn.sender.send(msg.into());
    }

    fn log(&self, level: u8, message: &str) {
        self.send(Notification::new(
            "window/logMessage".to_owned(),
            json!({ "type": level, "message": message }),
        ));
    }

    fn request(&mut self, req: Request) {
        if self.shutdown {
            self.send(Response::new_err(
                req.id,
                ErrorCode::InvalidRequest as i32,
                "the server is shutting down".to_owned(),
            ));
            return;
        }
        match req.method.as_str() {
            "shutdown" => {
                self.shutdown = true;
                self.send(Response::new_ok(req.id, Value::Null));
            }
            "textDocument/codeAction" => {
                match serde_json::from_value::<CodeActionParams>(req.params) {
                    Ok(p) => {
                        let actions = self.code_actions(p);
                        self.send(Response::new_ok(req.id, actions));
                    }
                    Err(e) => self.invalid_params(req.id, &e),
                }
            }
            _ => self.send(Response::new_err(
                req.id,
                ErrorCode::MethodNotFound as i32,
                format!("oomlint does not answer {}", req.method),
            )),
        }
    }

    fn invalid_params(&self, id: RequestId, e: &serde_json::Error) {
        self.send(Response::new_err(
            id,
            ErrorCode::InvalidParams as i32,
            format!("invalid parameters: {e}"),
        ));
    }

    fn notification(&mut self, n: Notification) {
        fn parse<T: serde::de::DeserializeOwned>(s: &Server, n: Notification) -> Option<T> {
            match serde_json::from_value(n.params) {
                Ok(p) => Some(p),
                Err(e) => {
                    s.log(2, &format!("oomlint: ignored {}: {e}", n.method));
                    None
                }
            }
        }
        match n.method.as_str() {
            "textDocument/didOpen" => {
                let Some(p) = parse::<DidOpenTextDocumentParams>(self, n) else {
                    return;
                };
                let d = p.text_document;
                let key = d.uri.as_str().to_owned();
                self.docs.insert(
                    key.clone(),
                    TextDoc {
                        uri: d.uri,
                        text: d.text,
                        version: d.version,
                    },
                );
                self.lint_and_publish(&key);
            }
            "textDocument/didChange" => {
                let Some(p) = parse::<DidChangeTextDocumentParams>(self, n) else {
                    return;
                };
                let key = p.text_document.uri.as_str().to_owned();
                let Some(doc) = self.docs.get_mut(&key) else {
                    return;
                };
                doc.version = p.text_document.version;
                for c in p.content_changes {
                    apply_change(&mut doc.text, c);
                }
                self.schedule(&key);
            }
            "textDocument/didSave" => {
                let Some(p) = parse::<DidSaveTextDocumentParams>(self, n) else {
                    return;
                };
                let key = p.text_document.uri.as_str().to_owned();
                self.saved(&p.text_document.uri);
                self.lint_and_publish(&key);
            }
            "textDocument/didClose" => {
                let Some(p) = parse::<DidCloseTextDocumentParams>(self, n) else {
                    return;
                };
                let key = p.text_document.uri.as_str().to_owned();
                self.docs.remove(&key);
                self.pending.remove(&key);
                self.clear(&key);
            }
            "notebookDocument/didOpen" => {
                let Some(p) = parse::<DidOpenNotebookDocumentParams>(self, n) else {
                    return;
                };
                let nb = p.notebook_document;
                let key = nb.uri.as_str().to_owned();
                for d in p.cell_text_documents {
                    let cell = d.uri.as_str().to_owned();
                    self.owner.insert(cell.clone(), key.clone());
                    self.docs.insert(
                        cell,
                        TextDoc {
                            uri: d.uri,
                            text: d.text,
                            version: d.version,
                        },
                    );
                }
                let cells = nb
                    .cells
                    .into_iter()
                    .map(|c| (c.document, c.kind == NotebookCellKind::Code))
                    .collect();
                self.notebooks.insert(
                    key.clone(),
                    NotebookDoc {
                        uri: nb.uri,
                        version: nb.version,
                        cells,
                    },
                );
                self.lint_and_publish(&key);
            }
            "notebookDocument/didChange" => {
                let Some(p) = parse::<DidChangeNotebookDocumentParams>(self, n) else {
                    return;
                };
                self.notebook_changed(p);
            }
            "notebookDocument/didSave" => {
                let Some(p) = parse::<DidSaveNotebookDocumentParams>(self, n) else {
                    return;
                };
                let key = p.notebook_document.uri.as_str().to_owned();
                self.saved(&p.notebook_document.uri);
                self.lint_and_publish(&key);
            }
            "notebookDocument/didClose" => {
                let Some(p) = parse::<DidCloseNotebookDocumentParams>(self, n) else {
                    return;
                };
                let key = p.notebook_document.uri.as_str().to_owned();
                if let Some(nb) = self.notebooks.remove(&key) {
                    for (cell, _) in nb.cells {
                        self.docs.remove(cell.as_str());
                        self.owner.remove(cell.as_str());
                    }
                }
                for d in p.cell_text_documents {
                    self.docs.remove(d.uri.as_str());
                    self.owner.remove(d.uri.as_str());
                }
                self.pending.remove(&key);
                self.clear(&key);
            }
            "workspace/didChangeConfiguration" | "workspace/didChangeWatchedFiles" => {
                // A configuration or a file beside the documents may have changed.
                self.projects.clear();
                let keys: Vec<String> = self.units();
                for k in keys {
                    self.schedule(&k);
                }
            }
            _ => {}
        }
    }

    /// The linted units: open Python files and open notebooks.
    fn units(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .docs
            .keys()
            .filter(|k| !self.owner.contains_key(*k))
            .cloned()
            .collect();
        keys.extend(self.notebooks.keys().cloned());
        keys
    }

    fn notebook_changed(&mut self, p: DidChangeNotebookDocumentParams) {
        let key = p.notebook_document.uri.as_str().to_owned();
        let Some(nb) = self.notebooks.get_mut(&key) else {
            return;
        };
        nb.version = p.notebook_document.version;
        let Some(cells) = p.change.cells else {
            return;
        };
        if let Some(structure) = cells.structure {
            let a = structure.array;
            let start = (a.start as usize).min(nb.cells.len());
            let end = start
                .saturating_add(a.delete_count as usize)
                .min(nb.cells.len());
            let new: Vec<(Uri, bool)> = a
                .cells
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.document, c.kind == NotebookCellKind::Code))
                .collect();
            nb.cells.splice(start..end, new);
            for d in structure.did_open.unwrap_or_default() {
                let cell = d.uri.as_str().to_owned();
                self.owner.insert(cell.clone(), key.clone());
                self.docs.insert(
                    cell,
                    TextDoc {
                        uri: d.uri,
                        text: d.text,
                        version: d.version,
                    },
                );
            }
            for d in structure.did_close.unwrap_or_default() {
                self.docs.remove(d.uri.as_str());
                self.owner.remove(d.uri.as_str());
            }
        }
        if let Some(data) = cells.data {
            if let Some(nb) = self.notebooks.get_mut(&key) {
                for c in data {
                    if let Some(slot) = nb.cells.iter_mut().find(|(u, _)| *u == c.document) {
                        slot.1 = c.kind == NotebookCellKind::Code;
                    }
                }
            }
        }
        for t in cells.text_content.unwrap_or_default() {
            if let Some(doc) = self.docs.get_mut(t.document.uri.as_str()) {
                doc.version = t.document.version;
                for c in t.changes {
                    apply_change(&mut doc.text, c);
                }
            }
        }
        self.schedule(&key);
    }

    fn schedule(&mut self, key: &str) {
        // A cell's change re-lints its notebook.
        let key = self
            .owner
            .get(key)
            .cloned()
            .unwrap_or_else(|| key.to_owned());
        self.pending.insert(key, Instant::now() + DEBOUNCE);
    }

    /// A saved file may change what the files beside it know: rebuild its project's
    /// index on the next lint.
    fn saved(&mut self, uri: &Uri) {
        if let Some(path) = uri_path(uri) {
            self.projects.retain(|root, _| !path.starts_with(root));
        }
    }

    fn clear(&mut self, key: &str) {
        self.results.remove(key);
        for uri in self.published.remove(key).unwrap_or_default() {
            self.publish(uri, Vec::new(), None);
        }
    }

    fn publish(&self, uri: Uri, diagnostics: Vec<Diagnostic>, version: Option<i32>) {
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        };
        self.send(Notification::new(
            "textDocument/publishDiagnostics".to_owned(),
            params,
        ));
    }

    /// The path a unit is linted as, and whether it exists on disk: an unsaved buffer is
    /// linted as a file in the working folder.
    fn path_of(uri: &Uri, notebook: bool) -> PathBuf {
        uri_path(uri).unwrap_or_else(|| {
            let name = uri
                .as_str()
                .rsplit(['/', ':'])
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or("untitled");
            let ext = if notebook { ".ipynb" } else { ".py" };
            let name = if name.ends_with(ext) {
                name.to_owned()
            } else {
                format!("{name}{ext}")
            };
            std::env::current_dir()
                .unwrap_or_else(|_| PathBuf::from("."))
                .join(name)
        })
    }

    /// A linter configured for `path` as the command line would be, with the facts of
    /// its project; `None` if the configuration excludes the file.
    fn linter_for(&mut self, path: &Path) -> Option<Linter> {
        let resolver = match Resolver::new(None, false, Overrides::default()) {
            Ok(r) => Arc::new(r),
            Err(e) => {
                self.log(1, &format!("oomlint: configuration: {e}"));
                return None;
            }
        };
        let settings = resolver.for_file(path);
        for e in resolver.take_errors() {
            self.log(1, &format!("oomlint: configuration: {e}"));
        }
        if settings.is_excluded_anywhere(path) {
            return None;
        }
        let linter = Linter::configured(resolver);
        Some(match self.project_of(path) {
            Some(p) => linter.with_project(p),
            None => linter,
        })
    }

    fn project_of(&mut self, path: &Path) -> Option<Arc<Projects>> {
        // Without a project marker above it, a document's project is its own folder,
        // not the folder's subfolders (as on the command line).
        let (root, shallow) = match project_root(path) {
            Some(root) => (root, false),
            None => (std::fs::canonicalize(path.parent()?).ok()?, true),
        };
        if let Some(p) = self.projects.get(&root) {
            return Some(p.clone());
        }
        let opts = crate::walk::WalkOptions {
            respect_gitignore: true,
            threads: 2,
            ..Default::default()
        };
        let files = if shallow {
            crate::walk::files_beside(&root, &opts)
        } else {
            let (files, _) = crate::walk::collect(std::slice::from_ref(&root), &opts);
            files.into_iter().map(|f| f.path).collect()
        };
        let py: Vec<PathBuf> = files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .collect();
        let projects = if py.len() > MAX_INDEXED_FILES {
            Projects::default()
        } else {
            Projects(vec![ProjectIndex::build(&root, &py, &NoStore)])
        };
        let projects = Arc::new(projects);
        self.projects.insert(root, projects.clone());
        Some(projects)
    }

    fn lint_and_publish(&mut self, key: &str) {
        let key = self
            .owner
            .get(key)
            .cloned()
            .unwrap_or_else(|| key.to_owned());
        // Linted now from the current text: a debounced lint still waiting is moot.
        self.pending.remove(&key);
        let (entries, targets) = if self.notebooks.contains_key(&key) {
            self.lint_notebook(&key)
        } else if self.docs.contains_key(&key) {
            self.lint_file(&key)
        } else {
            return;
        };
        let mut by_uri: HashMap<String, (Uri, Vec<Diagnostic>, Option<i32>)> = targets
            .iter()
            .map(|u| {
                let version = self.docs.get(u.as_str()).map(|d| d.version);
                (u.as_str().to_owned(), (u.clone(), Vec::new(), version))
            })
            .collect();
        for e in &entries {
            if let Some(slot) = by_uri.get_mut(e.uri.as_str()) {
                slot.1.push(e.diagnostic.clone());
            }
        }
        // Cells that had diagnostics and are gone from the notebook get an empty list.
        for old in self.published.remove(&key).unwrap_or_default() {
            by_uri
                .entry(old.as_str().to_owned())
                .or_insert_with(|| (old.clone(), Vec::new(), None));
        }
        let mut keys: Vec<&String> = by_uri.keys().collect();
        keys.sort();
        for k in keys {
            let (uri, diags, version) = &by_uri[k];
            self.publish(uri.clone(), diags.clone(), *version);
        }
        self.published.insert(key.clone(), targets);
        self.results.insert(key, entries);
    }

    /// Lints an open Python file from its text.
    fn lint_file(&mut self, key: &str) -> (Vec<Entry>, Vec<Uri>) {
        let Some(doc) = self.docs.get(key) else {
            return (Vec::new(), Vec::new());
        };
        let uri = doc.uri.clone();
        let text = doc.text.clone();
        let path = Self::path_of(&uri, false);
        let Some(linter) = self.linter_for(&path) else {
            return (Vec::new(), vec![uri]);
        };
        let report = linter.lint_source(&path, text.as_bytes());
        self.log_problems(&report);
        let shift = if text.starts_with('\u{feff}') { 3 } else { 0 };
        let layout = Layout::File {
            uri: &uri,
            text: &text,
            shift,
        };
        let python = &text[shift..];
        let entries = entries(&report, &layout, python);
        (entries, vec![uri.clone()])
    }

    /// The cells of an open notebook, as the `.ipynb` JSON they would be saved as (code
    /// cells only), and their documents.
    fn notebook_json(&self, key: &str) -> Option<(String, Vec<(Uri, String)>)> {
        let nb = self.notebooks.get(key)?;
        let cells: Vec<(Uri, String)> = nb
            .cells
            .iter()
            .filter(|(_, code)| *code)
            .filter_map(|(u, _)| Some((u.clone(), self.docs.get(u.as_str())?.text.clone())))
            .collect();
        let json = json!({
            "cells": cells.iter().map(|(_, t)| json!({
                "cell_type": "code", "metadata": {}, "execution_count": null,
                "outputs": [], "source": t,
            })).collect::<Vec<_>>(),
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
        });
        Some((serde_json::to_string(&json).ok()?, cells))
    }

    fn lint_notebook(&mut self, key: &str) -> (Vec<Entry>, Vec<Uri>) {
        let Some((raw, cells)) = self.notebook_json(key) else {
            return (Vec::new(), Vec::new());
        };
        let targets: Vec<Uri> = cells.iter().map(|(u, _)| u.clone()).collect();
        let nb_uri = self.notebooks[key].uri.clone();
        let path = Self::path_of(&nb_uri, true);
        let Some(linter) = self.linter_for(&path) else {
            return (Vec::new(), targets);
        };
        let report = linter.lint_source(&path, raw.as_bytes());
        self.log_problems(&report);
        let Ok(nb) = Notebook::parse(&raw) else {
            return (Vec::new(), targets);
        };
        let source = nb.source.clone();
        let layout = Layout::Cells {
            index: nb.index(),
            lines: crate::source::LineIndex::new(&nb.source),
            nb,
            cells: cells.iter().map(|(u, t)| (u, t.as_str())).collect(),
        };
        (entries(&report, &layout, &source), targets)
    }

    fn log_problems(&self, report: &FileReport) {
        for e in &report.errors {
            self.log(1, &format!("oomlint: {e}"));
        }
    }

    fn code_actions(&mut self, p: CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = p.text_document.uri;
        let key = self
            .owner
            .get(uri.as_str())
            .cloned()
            .unwrap_or_else(|| uri.as_str().to_owned());
        // Answer from the current text, not from one that a pending lint replaces.
        if self.pending.remove(&key).is_some() || !self.results.contains_key(&key) {
            self.lint_and_publish(&key);
        }
        let wants = |kind: &str| match &p.context.only {
            None => true,
            Some(only) => only.iter().any(|k| {
                let k = k.as_str();
                kind == k || kind.starts_with(&format!("{k}."))
            }),
        };
        let mut actions = Vec::new();
        let entries = self.results.get(&key).map_or(&[][..], Vec::as_slice);
        for e in entries {
            if e.uri != uri || !overlaps(e.diagnostic.range, p.range) {
                continue;
            }
            if !wants("quickfix") {
                continue;
            }
            if let Some((title, applicability, edits)) = &e.fix {
                actions.push(action(
                    title.clone(),
                    CodeActionKind::QUICKFIX,
                    Some(e.diagnostic.clone()),
                    edits.clone(),
                    *applicability == Applicability::Safe,
                ));
            }
            if let Some(edits) = &e.noqa {
                let code = match &e.diagnostic.code {
                    Some(NumberOrString::String(c)) => c.clone(),
                    _ => String::new(),
                };
                actions.push(action(
                    format!("Add `# noqa: {code}`"),
                    CodeActionKind::QUICKFIX,
                    Some(e.diagnostic.clone()),
                    edits.clone(),
                    false,
                ));
            }
        }
        let has_safe = entries
            .iter()
            .any(|e| matches!(&e.fix, Some((_, Applicability::Safe, _))));
        if has_safe && wants(FIX_ALL) {
            if let Some(edits) = self.fix_all(&key) {
                actions.push(action(
                    "Fix all safe oomlint problems".to_owned(),
                    CodeActionKind::new(FIX_ALL),
                    None,
                    edits,
                    false,
                ));
            }
        }
        actions
    }

    /// The edits that apply every safe fix of a unit, as `--fix` applies them (passes
    /// until stable, refused if the result would not parse): each changed document
    /// replaced whole.
    fn fix_all(&mut self, key: &str) -> Option<HashMap<Uri, Vec<TextEdit>>> {
        let mut out = HashMap::new();
        if self.notebooks.contains_key(key) {
            let (raw, cells) = self.notebook_json(key)?;
            let path = Self::path_of(&self.notebooks[key].uri, true);
            let linter = self.linter_for(&path)?;
            let fixed = linter.fix_source(&path, raw.as_bytes(), Applicability::Safe);
            let fixed: Value = serde_json::from_slice(&fixed.fixed?).ok()?;
            for (i, (uri, old)) in cells.iter().enumerate() {
                let new = match &fixed["cells"][i]["source"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
                    _ => continue,
                };
                if &new != old {
                    out.insert(uri.clone(), vec![whole(old, new)]);
                }
            }
        } else {
            let doc = self.docs.get(key)?;
            let (uri, old) = (doc.uri.clone(), doc.text.clone());
            let path = Self::path_of(&uri, false);
            let linter = self.linter_for(&path)?;
            let fixed = linter.fix_source(&path, old.as_bytes(), Applicability::Safe);
            let new = String::from_utf8(fixed.fixed?).ok()?;
            out.insert(uri, vec![whole(&old, new)]);
        }
        (!out.is_empty()).then_some(out)
    }
}

/// An edit replacing all of `old` with `new`.
fn whole(old: &str, new: String) -> TextEdit {
    TextEdit {
        range: Range::new(Position::new(0, 0), position(old, old.len())),
        new_text: new,
    }
}

fn action(
    title: String,
    kind: CodeActionKind,
    diagnostic: Option<Diagnostic>,
    changes: HashMap<Uri, Vec<TextEdit>>,
    preferred: bool,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(kind),
        diagnostics: diagnostic.map(|d| vec![d]),
        edit: Some(WorkspaceEdit {
            changes: Some(changes),
            ..Default::default()
        }),
        is_preferred: preferred.then_some(true),
        ..Default::default()
    })
}

fn overlaps(a: Range, b: Range) -> bool {
    let key = |p: Position| (p.line, p.character);
    key(a.start) <= key(b.end) && key(b.start) <= key(a.end)
}

/// The diagnostics of a report, with their code actions' edits. `python` is the text
/// the findings' byte ranges index (a file's text, or a notebook's joined cells).
fn entries(report: &FileReport, layout: &Layout<'_>, python: &str) -> Vec<Entry> {
    let tree = if report.findings.is_empty() {
        None
    } else {
        crate::lint::parse_python(python)
    };
    report
        .findings
        .iter()
        .filter_map(|f| entry(f, layout, python, tree.as_ref()))
        .collect()
}

fn entry(
    f: &Finding,
    layout: &Layout<'_>,
    python: &str,
    tree: Option<&tree_sitter::Tree>,
) -> Option<Entry> {
    let (uri, range) = layout.range(f.range.0, f.range.1)?;
    let related: Vec<DiagnosticRelatedInformation> = f
        .related
        .iter()
        .filter_map(|r| {
            let (uri, range) = layout.range(r.range.0, r.range.1)?;
            Some(DiagnosticRelatedInformation {
                location: Location { uri, range },
                message: r.message.clone(),
            })
        })
        .collect();
    let href = crate::rules::doc_url(f.code).and_then(|u| u.parse::<Uri>().ok());
    let diagnostic = Diagnostic {
        range,
        severity: Some(match f.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(f.code.to_owned())),
        code_description: href.map(|href| CodeDescription { href }),
        source: Some("oomlint".to_owned()),
        message: format!("{}\nhelp: {}", f.message, f.help),
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    };
    let fix = f.fix.as_ref().and_then(|fix| {
        let edits = layout.edits(&fix.edits)?;
        Some((fix.title.clone(), fix.applicability, edits))
    });
    let noqa = tree.and_then(|t| {
        let edits = crate::noqa::add_noqa_edits(t.root_node(), python, &[(f.range.0, f.code)]);
        if edits.is_empty() {
            return None;
        }
        layout.edits(&edits)
    });
    Some(Entry {
        uri,
        diagnostic,
        fix,
        noqa,
    })
}
