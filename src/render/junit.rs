//! `--format junit`: JUnit XML for CI systems that read test reports. One test suite
//! per linted file; a file without findings is one passing test case, each finding
//! is a failing test case named by code and position, and a file that could not be
//! linted (binary, unreadable, a broken notebook, an internal error) is an error case.

use std::io::{self, Write};

use crate::report::FileReport;

/// Escapes text for XML attributes and content; drops characters XML 1.0 forbids.
fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            '\t' => o.push_str("&#9;"),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => o.push('\u{FFFD}'),
            // Allowed in XML, but a terminal that shows the report could act on them.
            c if c.is_control() || super::is_invisible_format(c) => {
                o.push_str(&format!("&#x{:x};", c as u32))
            }
            c => o.push(c),
        }
    }
    o
}

pub(super) fn render_junit(out: &mut dyn Write, reports: &[FileReport]) -> io::Result<()> {
    let cases = |r: &FileReport| (r.findings.len() + r.errors.len()).max(1);
    let failures: usize = reports.iter().map(|r| r.findings.len()).sum();
    let errors: usize = reports.iter().map(|r| r.errors.len()).sum();
    let tests: usize = reports.iter().map(cases).sum();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="oomlint" tests="{tests}" failures="{failures}" errors="{errors}">"#
    )?;
    for r in reports {
        let path = xml_escape(&r.path);
        writeln!(
            out,
            r#"  <testsuite name="{path}" tests="{}" failures="{}" errors="{}">"#,
            cases(r),
            r.findings.len(),
            r.errors.len()
        )?;
        if r.findings.is_empty() && r.errors.is_empty() {
            writeln!(out, r#"    <testcase name="oomlint" classname="{path}"/>"#)?;
        }
        for e in &r.errors {
            let message = xml_escape(&e.to_string());
            writeln!(out, r#"    <testcase name="oomlint" classname="{path}">"#)?;
            writeln!(
                out,
                r#"      <error message="{message}" type="{}">{message}</error>"#,
                xml_escape(&e.code_name())
            )?;
            writeln!(out, "    </testcase>")?;
        }
        for f in &r.findings {
            let at = match &f.cell {
                Some(c) => format!("cell {}:{}:{}", c.cell, c.line, c.column),
                None => format!("{}:{}", f.line, f.column),
            };
            writeln!(
                out,
                r#"    <testcase name="{} {}:{at}" classname="{path}" file="{path}" line="{}">"#,
                f.code, path, f.line
            )?;
            let mut body = format!(
                "{}:{at}: {} {} ({})\nhelp: {}",
                r.path, f.code, f.message, f.name, f.help
            );
            for rel in &f.related {
                body.push_str(&format!(
                    "\nnote: {} ({}:{}:{})",
                    rel.message, r.path, rel.line, rel.column
                ));
            }
            writeln!(
                out,
                r#"      <failure message="{}" type="{}">{}</failure>"#,
                xml_escape(&f.message),
                f.code,
                xml_escape(&body)
            )?;
            writeln!(out, "    </testcase>")?;
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}
