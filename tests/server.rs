//! `oomlint server` driven over stdio by a small LSP client, as an editor drives it:
//! initialize, open a document with a bug, receive the diagnostic, ask for the code
//! actions, apply one, change the document, receive an empty list; the same for a
//! notebook's cells. Every message is kept, and the transcript is written to
//! `target/lsp-transcript.jsonl` (or `$OOMLINT_LSP_TRANSCRIPT`).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

struct Client {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    /// Messages received but not yet asked for.
    backlog: Vec<Value>,
    next_id: i64,
    transcript: Vec<Value>,
    started: Instant,
}

impl Client {
    fn start(dir: &std::path::Path) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_oomlint"))
            .arg("server")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("oomlint server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut len = None;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length: ") {
                        len = v.parse::<usize>().ok();
                    }
                }
                let mut body = vec![0; len.expect("Content-Length header")];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let v: Value = serde_json::from_slice(&body).expect("a JSON message");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            child,
            stdin,
            incoming: rx,
            backlog: Vec::new(),
            next_id: 1,
            transcript: Vec::new(),
            started: Instant::now(),
        }
    }

    fn record(&mut self, dir: &str, msg: &Value) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.transcript
            .push(json!({ "ms": ms, "dir": dir, "msg": msg }));
    }

    fn send(&mut self, msg: Value) {
        self.record("->", &msg);
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.wait(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The first message (kept or new) that `pred` accepts; the others stay kept.
    fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(m) => {
                    self.record("<-", &m);
                    if pred(&m) {
                        return m;
                    }
                    self.backlog.push(m);
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no expected message within {WAIT:?}; received meanwhile: {:#?}",
                    self.backlog
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server hung up; received: {:#?}", self.backlog)
                }
            }
        }
    }

    /// The next diagnostics published for `uri` (at `version`, when given).
    fn diagnostics(&mut self, uri: &str, version: Option<i64>) -> Vec<Value> {
        let m = self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && version.is_none_or(|v| m["params"]["version"] == v)
        });
        m["params"]["diagnostics"].as_array().unwrap().clone()
    }

    fn save_transcript(&self) {
        let path = std::env::var("OOMLINT_LSP_TRANSCRIPT").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/target/lsp-transcript.jsonl").to_owned()
        });
        let text: String = self
            .transcript
            .iter()
            .map(|m| m.to_string() + "\n")
            .collect();
        let _ = std::fs::write(path, text);
    }
}

fn file_uri(path: &std::path::Path) -> String {
    let s = path.to_str().unwrap();
    format!("file://{}", s.replace(' ', "%20"))
}

/// Applies LSP text edits (UTF-16 positions; the test texts are ASCII) to `text`.
fn apply(text: &str, edits: &[Value]) -> String {
    let offset = |p: &Value| {
        let (line, ch) = (
            p["line"].as_u64().unwrap(),
            p["character"].as_u64().unwrap(),
        );
        let start: usize = text
            .split_inclusive('\n')
            .take(line as usize)
            .map(str::len)
            .sum();
        start + ch as usize
    };
    let mut edits: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().unwrap(),
            )
        })
        .collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_owned();
    for (s, e, t) in edits {
        out.replace_range(s..e, t);
    }
    out
}

const TRAIN: &str = "\
import torch


def train(model, loader, criterion, optimizer):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
";

const ACCUM: &str = "\
import torch


def train(model, loader, criterion, optimizer):
    running = 0.0
    history = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        running = running + loss
        loss.backward()
        optimizer.step()
        history.append(running)
    return history
";

const STALE: &str = "\
def mean(values):
    return sum(values) / len(values)  # noqa: E501, OOM202
";

#[test]
fn editor_session_over_stdio() {
    let t = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap();
    // The project's configuration turns on unused-noqa: the server resolves it as the
    // command line does.
    std::fs::write(
        root.join("pyproject.toml"),
        "[tool.oomlint]\nextend-select = [\"OOM001\"]\n",
    )
    .unwrap();
    // On disk the file is clean: the server must lint the editor's text, not this.
    std::fs::write(root.join("train.py"), "import torch\n").unwrap();
    let mut c = Client::start(&root);

    let init = c.request(
        "initialize",
        json!({
            "processId": null,
            "rootUri": file_uri(&root),
            "capabilities": { "notebookDocument": { "synchronization": {} } },
        }),
    );
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["notebookDocumentSync"]["notebookSelector"][0]["cells"][0]["language"],
        "python"
    );
    assert!(caps["codeActionProvider"]["codeActionKinds"]
        .as_array()
        .unwrap()
        .contains(&json!("source.fixAll.oomlint")));
    c.notify("initialized", json!({}));

    // A bug in the open document: the diagnostic, its code, link and severity.
    let uri = file_uri(&root.join("train.py"));
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": "python", "version": 1, "text": TRAIN } }),
    );
    let diags = c.diagnostics(&uri, Some(1));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d["code"], "OOM201");
    assert_eq!(d["source"], "oomlint");
    assert_eq!(d["severity"], 1);
    assert_eq!(d["range"]["start"], json!({ "line": 10, "character": 8 }));
    assert!(d["codeDescription"]["href"]
        .as_str()
        .unwrap()
        .ends_with("/rules/undetached_loss_append.rs"));

    // Code actions: add noqa (and the rule's own fix, when the rule gives one).
    let actions = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": d["range"], "context": { "diagnostics": [d] } }),
    );
    let actions = actions["result"].as_array().unwrap().clone();
    let noqa = actions
        .iter()
        .find(|a| a["title"] == "Add `# noqa: OOM201`")
        .unwrap_or_else(|| panic!("no add-noqa action: {actions:#?}"));
    assert_eq!(noqa["kind"], "quickfix");
    for fix in actions.iter().filter(|a| a["title"] != noqa["title"]) {
        // A rule's fix: a quickfix on this document, preferred exactly when safe.
        assert_eq!(fix["kind"], "quickfix");
        assert!(fix["edit"]["changes"][&uri].is_array(), "{fix:#}");
    }
    let edited = apply(TRAIN, noqa["edit"]["changes"][&uri].as_array().unwrap());
    assert!(
        edited.contains("        losses.append(loss)  # noqa: OOM201\n"),
        "{edited}"
    );
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": edited }] }),
    );
    assert_eq!(c.diagnostics(&uri, Some(2)), Vec::<Value>::new());

    // An incremental change brings the bug back; the debounced lint sees the buffer.
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 3 }, "contentChanges": [{
            "range": { "start": { "line": 10, "character": 27 }, "end": { "line": 10, "character": 43 } },
            "text": "",
        }] }),
    );
    let diags = c.diagnostics(&uri, Some(3));
    assert_eq!(diags.len(), 1, "{diags:#?}");

    // A stale noqa (OOM001, selected by the project's pyproject.toml): its fix is safe,
    // preferred, and removes only oomlint's code; fixAll applies it too.
    let stale = file_uri(&root.join("stats.py"));
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": stale, "languageId": "python", "version": 1, "text": STALE } }),
    );
    let diags = c.diagnostics(&stale, Some(1));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0]["code"], "OOM001");
    let actions = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": stale }, "range": diags[0]["range"], "context": { "diagnostics": diags } }),
    );
    let actions = actions["result"].as_array().unwrap().clone();
    let fix = actions
        .iter()
        .find(|a| a["title"] == "Remove the unused codes")
        .unwrap_or_else(|| panic!("no fix: {actions:#?}"));
    assert_eq!(fix["isPreferred"], true);
    let fixed = apply(STALE, fix["edit"]["changes"][&stale].as_array().unwrap());
    assert!(fixed.ends_with("len(values)  # noqa: E501\n"), "{fixed}");
    let all = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": stale }, "range": diags[0]["range"],
                "context": { "diagnostics": [], "only": ["source.fixAll"] } }),
    );
    let all = all["result"].as_array().unwrap().clone();
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0]["kind"], "source.fixAll.oomlint");
    assert_eq!(
        apply(STALE, all[0]["edit"]["changes"][&stale].as_array().unwrap()),
        fixed
    );
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": stale, "version": 2 }, "contentChanges": [{ "text": fixed }] }),
    );
    assert_eq!(c.diagnostics(&stale, Some(2)), Vec::<Value>::new());

    // Related information: the line that built up the graph a kept value carries.
    let accum = file_uri(&root.join("accum.py"));
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": accum, "languageId": "python", "version": 1, "text": ACCUM } }),
    );
    let diags = c.diagnostics(&accum, Some(1));
    let kept = diags
        .iter()
        .find(|d| d["code"] == "OOM201")
        .unwrap_or_else(|| panic!("no OOM201: {diags:#?}"));
    let related = kept["relatedInformation"]
        .as_array()
        .expect("related information");
    assert_eq!(related[0]["location"]["uri"], accum);
    assert_eq!(related[0]["location"]["range"]["start"]["line"], 9);
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": accum } }),
    );
    assert_eq!(c.diagnostics(&accum, None), Vec::<Value>::new());

    // A notebook: the finding is published on the cell it is in, at the cell's line.
    let nb = file_uri(&root.join("explore.ipynb"));
    let cell = |n: u32| {
        format!(
            "vscode-notebook-cell:{}#W{n}",
            root.join("explore.ipynb").display()
        )
    };
    let (c0, c1, c2) = (cell(0), cell(1), cell(2));
    let cell2 = "losses = []\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    losses.append(loss)";
    c.notify(
        "notebookDocument/didOpen",
        json!({
            "notebookDocument": { "uri": nb, "notebookType": "jupyter-notebook", "version": 1, "cells": [
                { "kind": 2, "document": c0 }, { "kind": 1, "document": c1 }, { "kind": 2, "document": c2 }
            ] },
            "cellTextDocuments": [
                { "uri": c0, "languageId": "python", "version": 1, "text": "%matplotlib inline\nimport torch" },
                { "uri": c1, "languageId": "markdown", "version": 1, "text": "# Training" },
                { "uri": c2, "languageId": "python", "version": 1, "text": cell2 },
            ],
        }),
    );
    let diags = c.diagnostics(&c2, None);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0]["code"], "OOM201");
    assert_eq!(
        diags[0]["range"]["start"],
        json!({ "line": 4, "character": 4 })
    );
    let actions = c.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": c2 }, "range": diags[0]["range"], "context": { "diagnostics": diags } }),
    );
    let actions = actions["result"].as_array().unwrap().clone();
    let noqa = actions
        .iter()
        .find(|a| a["title"] == "Add `# noqa: OOM201`")
        .unwrap_or_else(|| panic!("no add-noqa action: {actions:#?}"));
    let edits = noqa["edit"]["changes"][&c2].as_array().unwrap().clone();
    let edited = apply(cell2, &edits);
    assert!(
        edited.ends_with("losses.append(loss)  # noqa: OOM201"),
        "{edited}"
    );
    let changes: Vec<Value> = edits
        .iter()
        .map(|e| json!({ "range": e["range"], "text": e["newText"] }))
        .collect();
    c.notify(
        "notebookDocument/didChange",
        json!({
            "notebookDocument": { "uri": nb, "version": 2 },
            "change": { "cells": { "textContent": [
                { "document": { "uri": c2, "version": 2 }, "changes": changes }
            ] } },
        }),
    );
    assert_eq!(c.diagnostics(&c2, Some(2)), Vec::<Value>::new());

    // Bad input is answered, not fatal.
    let bad = c.request("textDocument/codeAction", json!({ "textDocument": 42 }));
    assert_eq!(bad["error"]["code"], -32602);
    let unknown = c.request("textDocument/hover", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    c.notify("textDocument/didChange", json!({ "nonsense": true }));
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": "untitled:Untitled-1", "languageId": "python", "version": 1,
                "text": "def f(:\n    x = (((\n\u{0}" } }),
    );
    c.diagnostics("untitled:Untitled-1", Some(1));

    // Closing clears the diagnostics of a file and of a notebook's cells.
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": uri } }),
    );
    assert_eq!(c.diagnostics(&uri, None), Vec::<Value>::new());
    c.notify(
        "notebookDocument/didClose",
        json!({ "notebookDocument": { "uri": nb }, "cellTextDocuments": [{ "uri": c0 }, { "uri": c1 }, { "uri": c2 }] }),
    );
    assert_eq!(c.diagnostics(&c2, None), Vec::<Value>::new());

    let shutdown = c.request("shutdown", Value::Null);
    assert!(shutdown["error"].is_null(), "{shutdown}");
    c.notify("exit", Value::Null);
    c.save_transcript();
    let status = c.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// The block after the `<!-- ci: NAME ...` marker of the README.
fn readme_block(name: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let at = readme
        .find(&format!("<!-- ci: {name} "))
        .unwrap_or_else(|| panic!("README has no {name} block"));
    let rest = &readme[at..];
    let start = rest.find("```").expect("a code block");
    let body = &rest[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").expect("the block ends")].to_owned()
}

#[test]
fn readme_editor_snippets_start_the_server() {
    // VS Code: JSON settings naming the command and its argument.
    let vscode: Value = serde_json::from_str(&readme_block("editor-vscode")).expect("JSON");
    assert_eq!(vscode["glspc.server.command"], "oomlint");
    assert_eq!(vscode["glspc.server.commandArguments"], json!(["server"]));
    assert!(vscode["glspc.server.languageId"]
        .as_array()
        .unwrap()
        .contains(&json!("python")));

    // Helix: TOML that defines the server and attaches it to Python.
    let helix: toml::Value = toml::from_str(&readme_block("editor-helix")).expect("TOML");
    let server = &helix["language-server"]["oomlint"];
    assert_eq!(server["command"].as_str(), Some("oomlint"));
    assert_eq!(
        server["args"].as_array().unwrap(),
        &vec![toml::Value::from("server")]
    );
    let python = helix["language"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"].as_str() == Some("python"))
        .expect("a [[language]] for python");
    assert!(python["language-servers"]
        .as_array()
        .unwrap()
        .contains(&toml::Value::from("oomlint")));

    // Neovim: Lua, checked structurally: brackets balance outside strings and
    // comments, `vim.lsp.start` is called, and its `cmd` is the command line.
    let lua = readme_block("editor-neovim");
    let mut stack = Vec::new();
    let mut chars = lua.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                let mut closed = false;
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        closed = true;
                        break;
                    } else if d == '\n' {
                        break;
                    }
                }
                assert!(closed, "an unterminated string in the Neovim snippet");
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '(' | '{' | '[' => stack.push(c),
            ')' | '}' | ']' => {
                let open = stack
                    .pop()
                    .expect("a closing bracket without an opening one");
                assert_eq!(
                    open,
                    match c {
                        ')' => '(',
                        '}' => '{',
                        _ => '[',
                    }
                );
            }
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed brackets: {stack:?}");
    assert!(lua.contains("vim.lsp.start({"));
    let cmd = lua.split("cmd = {").nth(1).expect("a cmd table");
    let cmd: Vec<&str> = cmd[..cmd.find('}').unwrap()]
        .split(',')
        .map(|s| s.trim().trim_matches('"'))
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(cmd, ["oomlint", "server"]);
    let end_count = lua.matches("end").count();
    let fn_count = lua.matches("function").count();
    assert_eq!(end_count, fn_count, "each function has its end");
}
