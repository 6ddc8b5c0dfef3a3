//! `--format github`: one GitHub Actions workflow command per finding, so findings show
//! as annotations on the pull request.
//! `::error file=PATH,line=L,col=C,endLine=L2,endColumn=C2,title=oomlint (OOM201)::MESSAGE`

use std::io::{self, Write};

use crate::confirm::Confirmations;
use crate::report::FileReport;
use crate::rule::Severity;

/// Escapes a workflow-command message: `%`, `\r`, `\n`; other control characters (an
/// ANSI escape in a file name or a string in the source) become visible `\u{1b}`, so the
/// log that shows the command shows no escape sequence.
fn escape_data(s: &str) -> String {
    let visible: String = s
        .chars()
        .map(|c| {
            if (c.is_control() && !matches!(c, '\n' | '\r')) || super::is_invisible_format(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect();
    visible
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property value: as a message, plus `:` and `,`.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One workflow command per finding; with `oomlint confirm`, the verdict as the message's
/// last line.
pub(super) fn render_github(
    out: &mut dyn Write,
    reports: &[FileReport],
    confirmations: Option<&Confirmations>,
) -> io::Result<()> {
    for (ri, r) in reports.iter().enumerate() {
        for (fi, f) in r.findings.iter().enumerate() {
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let mut message = String::new();
            if let Some(cell) = &f.cell {
                message.push_str(&format!("cell {}, line {}: ", cell.cell, cell.line));
            }
            message.push_str(&format!("{} {}\nhelp: {}", f.code, f.message, f.help));
            for rel in &f.related {
                message.push_str(&format!("\nnote: {} (line {})", rel.message, rel.line));
            }
            if let Some(c) = confirmations.and_then(|c| c.get(ri, fi)) {
                message.push('\n');
                message.push_str(&c.line());
            }
            writeln!(
                out,
                "::{level} file={},line={},col={},endLine={},endColumn={},title={}::{}",
                escape_property(&crate::paths::relative_to_cwd(&f.path)),
                f.line,
                f.column,
                f.end_line,
                f.end_column,
                escape_property(&format!("oomlint ({})", f.code)),
                escape_data(&message)
            )?;
        }
        // A file that could not be linted is an annotation too, never a silent pass.
        for e in &r.errors {
            writeln!(
                out,
                "::error file={},title={}::{}",
                escape_property(&crate::paths::relative_to_cwd(e.path())),
                escape_property(&format!(
                    "oomlint ({})",
                    e.code_name().trim_start_matches("oomlint::")
                )),
                escape_data(&e.to_string())
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(escape_data("50%\r\nx: y, z"), "50%25%0D%0Ax: y, z");
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(escape_data("a\x1b[31m\u{2028}"), "a\\u{1b}[31m\\u{2028}");
    }
}
