//! The summary line that ends the text output, on stderr:
//! `Found 3 problems in 2 files (14 files checked)`.

use std::fmt;

use oomlint::report::FileReport;

/// What a run found, counted.
pub struct Summary {
    pub findings: usize,
    pub files_with_findings: usize,
    pub checked: usize,
    /// Paths that could not be walked and files that could not be linted.
    pub errors: usize,
    /// Files skipped as larger than `--max-file-size`.
    pub skipped: usize,
    /// With `--fix`: how many findings the fixes removed (`findings` are those left).
    pub fixed: Option<usize>,
}

impl Summary {
    pub fn new(reports: &[FileReport], checked: usize, errors: usize, skipped: usize) -> Summary {
        Summary {
            findings: reports.iter().map(|r| r.findings.len()).sum(),
            files_with_findings: reports.iter().filter(|r| !r.findings.is_empty()).count(),
            checked,
            errors,
            skipped,
            fixed: None,
        }
    }

    /// `14 files checked`, and how many were skipped as too large.
    fn checked(&self) -> String {
        match self.skipped {
            0 => format!("{} {} checked", self.checked, files_word(self.checked)),
            n => format!(
                "{} {} checked, {n} skipped as too large",
                self.checked,
                files_word(self.checked)
            ),
        }
    }
}

fn files_word(n: usize) -> &'static str {
    if n == 1 {
        "file"
    } else {
        "files"
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Summary {
            findings: n_findings,
            files_with_findings: n_files_with,
            errors,
            skipped,
            ..
        } = *self;
        let checked = self.checked();
        let fixed = self.fixed.unwrap_or(0);
        if fixed > 0 {
            // ruff's wording: the problems found, how many the fixes removed, how many are left.
            let and_errors = match errors {
                0 => String::new(),
                1 => "; 1 error (see above)".to_owned(),
                n => format!("; {n} errors (see above)"),
            };
            let found = n_findings + fixed;
            return write!(
                f,
                "Found {found} {} ({fixed} fixed, {n_findings} remaining) in {n_files_with} {} ({checked}){and_errors}",
                if found == 1 { "problem" } else { "problems" },
                files_word(n_files_with),
            );
        }
        if n_findings == 0 && errors > 0 {
            // Not "all checks passed": some files could not be checked at all.
            write!(
                f,
                "No problems found, but {errors} {} (see above) ({checked})",
                if errors == 1 { "error" } else { "errors" },
            )
        } else if n_findings == 0 && skipped > 0 {
            write!(f, "No problems found in the files linted ({checked})")
        } else if n_findings == 0 {
            write!(f, "All checks passed ({checked})")
        } else {
            // Files that could not be linted are not forgotten beside the findings.
            let and_errors = match errors {
                0 => String::new(),
                1 => "; 1 error (see above)".to_owned(),
                n => format!("; {n} errors (see above)"),
            };
            write!(
                f,
                "Found {n_findings} {} in {n_files_with} {} ({checked}){and_errors}",
                if n_findings == 1 {
                    "problem"
                } else {
                    "problems"
                },
                files_word(n_files_with),
            )
        }
    }
}
