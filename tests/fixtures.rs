//! Runs every fixture under `fixtures/` as its own test: the findings of all rules
//! must be exactly the `# error: CODE` markers.

use std::path::Path;

fn fixture(path: &Path, source: Vec<u8>) -> datatest_stable::Result<()> {
    let shown = path.to_string_lossy().replace('\\', "/");
    oomlint::testing::check_fixture(&shown, &source, oomlint::rules::ALL).map_err(|m| m.into())
}

datatest_stable::harness! {
    { test = fixture, root = "fixtures", pattern = r"\.py$" },
}
