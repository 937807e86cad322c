// Prints a YAML file as JSON (npm package "yaml"). Used by tests/test_action.py to read
// action.yml, whose steps it then runs and lints.
const fs = require("fs");
const YAML = require("yaml");

process.stdout.write(JSON.stringify(YAML.parse(fs.readFileSync(process.argv[2], "utf8"))) + "\n");
