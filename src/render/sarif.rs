//! `--format sarif`: SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
//! The driver lists each rule that fired (id, name, short description, full
//! documentation, default level); each result has a physical location in the file (for a
//! notebook, in the `.ipynb` file, with the cell in the result's properties).

use serde_json::{json, Value};

use crate::confirm::Confirmations;
use crate::report::FileReport;
use crate::rule::Severity;
use crate::rules;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A path as a SARIF `uri`: relative paths stay relative (resolved against the
/// working directory, `%SRCROOT%`), absolute ones become `file://` URIs; characters
/// outside RFC 3986's unreserved set and `/` are percent-encoded.
fn path_uri(path: &str) -> String {
    bytes_uri(path.as_bytes())
}

/// [`path_uri`] of the bytes of a path, which need not be UTF-8: every byte outside the
/// unreserved set is percent-encoded, as RFC 3986 says for any octet, so a name that is
/// not UTF-8 keeps its bytes instead of becoming U+FFFD.
fn bytes_uri(path: &[u8]) -> String {
    let p: Vec<u8> = path
        .iter()
        .map(|&b| if b == b'\\' { b'/' } else { b })
        .collect();
    let mut out = String::with_capacity(p.len());
    let absolute = p.starts_with(b"/");
    if absolute {
        out.push_str("file://");
    }
    for &b in &p {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `uri` of a report's file: from the bytes of its path where it was read from one
/// (relative to the working directory when below it), else from the shown path.
fn report_uri(r: &FileReport, shown: &str) -> String {
    #[cfg(unix)]
    if let Some(p) = &r.file {
        use std::os::unix::ffi::OsStrExt;
        // As `walk::display` shows it: no leading `./`.
        let p = p.strip_prefix(".").unwrap_or(p);
        let rel = match (p.is_absolute(), std::env::current_dir()) {
            (true, Ok(cwd)) => p.strip_prefix(&cwd).unwrap_or(p).to_path_buf(),
            _ => p.to_path_buf(),
        };
        return bytes_uri(rel.as_os_str().as_bytes());
    }
    let _ = r;
    path_uri(&crate::paths::relative_to_cwd(shown))
}

/// A location in the file a report is about.
fn artifact(r: &FileReport, shown: &str) -> Value {
    let uri = report_uri(r, shown);
    if uri.starts_with("file://") {
        json!({ "uri": uri })
    } else {
        json!({ "uri": uri, "uriBaseId": "%SRCROOT%" })
    }
}

/// What could not be linted, and what was linted only in part: SARIF's tool execution
/// notifications (errors and warnings), each naming the file.
fn notifications(reports: &[FileReport]) -> Vec<Value> {
    let mut out = Vec::new();
    for r in reports {
        let errors = r
            .errors
            .iter()
            .map(|e| ("error", e.to_string(), e.code_name()));
        let warnings = r.warnings.iter().map(|w| {
            let code = miette::Diagnostic::code(w).map_or_else(String::new, |c| c.to_string());
            ("warning", w.to_string(), code)
        });
        for (level, text, code) in errors.chain(warnings) {
            out.push(json!({
                "level": level,
                "message": { "text": text },
                "descriptor": { "id": code },
                "locations": [{ "physicalLocation": { "artifactLocation": artifact(r, &r.path) } }],
            }));
        }
    }
    out
}

/// The SARIF log of the findings; with `oomlint confirm`, each result's message gets the
/// verdict line, and its property bag the `confirmation` object.
pub(super) fn sarif_value(reports: &[FileReport], confirmations: Option<&Confirmations>) -> Value {
    let mut fired: Vec<&'static str> = reports
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.code))
        .collect();
    fired.sort_unstable();
    fired.dedup();
    let rule_list: Vec<Value> = fired
        .iter()
        .filter_map(|c| rules::by_code(c))
        .map(|r| {
            let doc = r.documentation();
            json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": { "text": r.summary() },
                "fullDescription": { "text": doc, "markdown": doc },
                "help": { "text": doc, "markdown": doc },
                "defaultConfiguration": { "level": level(r.severity) },
            })
        })
        .collect();
    let mut results = Vec::new();
    for (ri, r) in reports.iter().enumerate() {
        for (fi, f) in r.findings.iter().enumerate() {
            let confirmation = confirmations.and_then(|c| c.get(ri, fi));
            let mut text = format!("{}\nhelp: {}", f.message, f.help);
            if let Some(c) = confirmation {
                text.push('\n');
                text.push_str(&c.line());
            }
            let mut result = json!({
                "ruleId": f.code,
                "ruleIndex": fired.iter().position(|c| *c == f.code).unwrap_or(0),
                "level": level(f.severity),
                "message": { "text": text },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": artifact(r, &f.path),
                        "region": {
                            "startLine": f.line,
                            "startColumn": f.column,
                            "endLine": f.end_line,
                            "endColumn": f.end_column,
                        }
                    }
                }],
            });
            if !f.related.is_empty() {
                let related: Vec<Value> = f
                    .related
                    .iter()
                    .enumerate()
                    .map(|(i, rel)| {
                        json!({
                            "id": i,
                            "message": { "text": rel.message },
                            "physicalLocation": {
                                "artifactLocation": artifact(r, &f.path),
                                "region": {
                                    "startLine": rel.line,
                                    "startColumn": rel.column,
                                    "endLine": rel.end_line,
                                    "endColumn": rel.end_column,
                                }
                            }
                        })
                    })
                    .collect();
                result["relatedLocations"] = json!(related);
            }
            if let Some(c) = &f.cell {
                result["properties"] =
                    json!({ "cell": c.cell, "cellLine": c.line, "cellColumn": c.column });
            }
            if let Some(c) = confirmation {
                if !result["properties"].is_object() {
                    result["properties"] = json!({});
                }
                result["properties"]["confirmation"] = json!(c);
            }
            results.push(result);
        }
    }
    let mut run = json!({
        "tool": {
            "driver": {
                "name": "oomlint",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rule_list,
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": results,
    });
    let notes = notifications(reports);
    if !notes.is_empty() {
        let failed = reports.iter().any(|r| !r.errors.is_empty());
        run["invocations"] = json!([{
            "executionSuccessful": !failed,
            "toolExecutionNotifications": notes,
        }]);
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        assert_eq!(path_uri("src/a b.py"), "src/a%20b.py");
        assert_eq!(path_uri("/x/y.py"), "file:///x/y.py");
        assert_eq!(bytes_uri(b"bad\xff\xfe.py"), "bad%FF%FE.py");
        assert_eq!(bytes_uri("caf\u{e9}.py".as_bytes()), "caf%C3%A9.py");
    }
}
