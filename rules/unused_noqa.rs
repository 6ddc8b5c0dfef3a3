use crate::prelude::*;

declare_rule! {
    /// ## What it does
    /// Flags `# noqa` comments that suppress nothing: a code of an enabled oomlint rule
    /// that has no finding on that line, an `OOM` code that no rule has, or a bare
    /// `# noqa` on a line where no enabled rule reports anything. Codes of other tools
    /// in the same comment (`E501`, `F401`) and codes of rules that are not enabled for
    /// the file are left alone. Not enabled by default: select it with
    /// `--extend-select OOM001` (or `extend-select = ["OOM001"]`), together with the
    /// rules whose comments it should judge.
    ///
    /// ## Why is this bad?
    /// A suppression outlives the code it was written for. Once the finding is fixed, a
    /// stale `# noqa: OOM201` hides the next real graph leak on that line without anyone
    /// seeing it, and a misspelt code (`OOM210`) never suppressed anything at all.
    ///
    /// ## Example
    /// ```python
    /// losses.append(loss.item())  # noqa: OOM201
    /// ```
    ///
    /// ## How to fix
    /// Remove the codes that suppress nothing, or the whole comment when none is left:
    /// `losses.append(loss.item())`.
    ///
    /// The rule is computed when suppressions are applied, after every other rule ran
    /// on the file, so it sees exactly which comments were used.
    ///
    /// ## Fix safety
    /// Every finding has a safe fix: it edits only the comment, removing the unused and
    /// unknown `OOM` codes (the whole `# noqa`, and the line when the comment stood
    /// alone, when nothing else is left). Other tools' codes and other comment sections
    /// stay.
    pub static UNUSED_NOQA = Rule {
        code: "OOM001",
        name: "unused-noqa",
        severity: Severity::Warning,
        fix: FixAvailability::Always,
        // Nothing to do on the model: the suppression stage reports it.
        check: |_, _, _| {},
        prefilter: |s| s.mentions_noqa(),
        parts: None,
    };
}
