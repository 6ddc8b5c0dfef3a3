//! The summary line that ends the text output, on stderr:
//! `Found 3 problems in 2 files (14 files checked); 1 file could not be read`.

use std::fmt;

use oomlint::report::FileReport;

/// What a run found, counted. Every file the walk gave is one of: checked, skipped as
/// too large, or could not be read; paths that could not be walked are counted apart.
pub struct Summary {
    pub findings: usize,
    pub files_with_findings: usize,
    /// Files linted.
    pub checked: usize,
    /// Files that could not be read or linted (each counted once, whatever the number of
    /// its errors).
    pub unreadable_files: usize,
    /// Paths named on the command line (or met in the walk) that could not be walked.
    pub unreadable_paths: usize,
    /// Files skipped as larger than `--max-file-size`.
    pub skipped: usize,
    /// With `--fix`: how many findings the fixes removed (`findings` are those left).
    pub fixed: Option<usize>,
    /// With `--fix`: files whose fixes could not be written (read-only).
    pub unwritten_files: usize,
}

impl Summary {
    pub fn new(reports: &[FileReport], unreadable_paths: usize) -> Summary {
        // A file whose fixes could not be written was read and linted.
        let unwritten = |r: &&FileReport| {
            r.errors
                .iter()
                .all(|e| matches!(e, oomlint::error::FileError::Write { .. }))
        };
        let unreadable_files = reports
            .iter()
            .filter(|r| !r.errors.is_empty() && !unwritten(r))
            .count();
        let unwritten_files = reports
            .iter()
            .filter(|r| !r.errors.is_empty() && unwritten(r))
            .count();
        let skipped = reports
            .iter()
            .filter(|r| r.errors.is_empty())
            .filter(|r| {
                r.warnings
                    .iter()
                    .any(|w| matches!(w, oomlint::error::FileWarning::TooLarge { .. }))
            })
            .count();
        Summary {
            findings: reports.iter().map(|r| r.findings.len()).sum(),
            files_with_findings: reports.iter().filter(|r| !r.findings.is_empty()).count(),
            checked: reports.len() - unreadable_files - skipped,
            unreadable_files,
            unreadable_paths,
            skipped,
            fixed: None,
            unwritten_files,
        }
    }

    /// `; 1 file could not be read; 2 files skipped as too large`, or nothing.
    fn problems(&self) -> String {
        let mut s = String::new();
        let unreadable = self.unreadable_files + self.unreadable_paths;
        if unreadable > 0 {
            // A path that could not be walked may be a folder: "path" covers both.
            let noun = if self.unreadable_paths > 0 {
                plural(unreadable, "path", "paths")
            } else {
                plural(unreadable, "file", "files")
            };
            s.push_str(&format!("; {unreadable} {noun} could not be read"));
        }
        if self.unwritten_files > 0 {
            s.push_str(&format!(
                "; {} {} could not be written",
                self.unwritten_files,
                plural(self.unwritten_files, "file", "files")
            ));
        }
        if self.skipped > 0 {
            s.push_str(&format!(
                "; {} {} skipped as too large",
                self.skipped,
                plural(self.skipped, "file", "files")
            ));
        }
        s
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checked = format!(
            "{} {} checked",
            self.checked,
            plural(self.checked, "file", "files")
        );
        let problems = self.problems();
        let fixed = self.fixed.unwrap_or(0);
        if fixed > 0 {
            // ruff's wording: the problems found, how many the fixes removed, how many are left.
            let found = self.findings + fixed;
            return write!(
                f,
                "Found {found} {} ({fixed} fixed, {} remaining) in {} {} ({checked}){problems}",
                plural(found, "problem", "problems"),
                self.findings,
                self.files_with_findings,
                plural(self.files_with_findings, "file", "files"),
            );
        }
        if self.findings > 0 {
            write!(
                f,
                "Found {} {} in {} {} ({checked}){problems}",
                self.findings,
                plural(self.findings, "problem", "problems"),
                self.files_with_findings,
                plural(self.files_with_findings, "file", "files"),
            )
        } else if !problems.is_empty() {
            // Not "all checks passed": some files were not checked at all.
            write!(f, "No problems found in {checked}{problems}")
        } else if self.checked == 0 {
            write!(f, "No Python files found ({checked})")
        } else {
            write!(f, "All checks passed ({checked})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(
        findings: usize,
        files: usize,
        checked: usize,
        files_bad: usize,
        paths_bad: usize,
        skipped: usize,
    ) -> String {
        Summary {
            findings,
            files_with_findings: files,
            checked,
            unreadable_files: files_bad,
            unreadable_paths: paths_bad,
            skipped,
            fixed: None,
            unwritten_files: 0,
        }
        .to_string()
    }

    #[test]
    fn wording_after_fixes() {
        let mut s = Summary {
            findings: 1,
            files_with_findings: 2,
            checked: 3,
            unreadable_files: 0,
            unreadable_paths: 0,
            skipped: 0,
            fixed: Some(2),
            unwritten_files: 1,
        };
        assert_eq!(
            s.to_string(),
            "Found 3 problems (2 fixed, 1 remaining) in 2 files (3 files checked); 1 file could not be written"
        );
        s.findings = 0;
        s.unwritten_files = 0;
        assert_eq!(
            s.to_string(),
            "Found 2 problems (2 fixed, 0 remaining) in 2 files (3 files checked)"
        );
    }

    #[test]
    fn wording() {
        assert_eq!(
            summary(3, 2, 14, 1, 0, 0),
            "Found 3 problems in 2 files (14 files checked); 1 file could not be read"
        );
        assert_eq!(
            summary(1, 1, 1, 0, 0, 0),
            "Found 1 problem in 1 file (1 file checked)"
        );
        assert_eq!(
            summary(0, 0, 1, 0, 1, 0),
            "No problems found in 1 file checked; 1 path could not be read"
        );
        assert_eq!(
            summary(0, 0, 0, 2, 0, 1),
            "No problems found in 0 files checked; 2 files could not be read; 1 file skipped as too large"
        );
        assert_eq!(
            summary(0, 0, 0, 0, 0, 0),
            "No Python files found (0 files checked)"
        );
        assert_eq!(
            summary(0, 0, 5, 0, 0, 0),
            "All checks passed (5 files checked)"
        );
        for s in [summary(3, 2, 14, 1, 1, 1), summary(0, 0, 3, 1, 0, 1)] {
            assert_eq!(s.matches('(').count(), s.matches(')').count(), "{s}");
            assert!(!s.contains(") ("), "doubled brackets: {s}");
        }
    }
}
