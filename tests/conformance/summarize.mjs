// Summarises a `conformance server -o DIR` run: DIR holds one `server-<scenario>-<time>/`
// directory per scenario with its `checks.json`. Prints one JSON object:
//   { "suite", "url", "passed": [..], "failed": [..],
//     "scenarios": { name: { "passed", "counts": { STATUS: n }, "failures": [..] } } }
// A scenario passes when none of its checks has status FAILURE (as the suite's own summary).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [dir, url] = process.argv.slice(2);
const pkg = JSON.parse(
  readFileSync(
    new URL("node_modules/@modelcontextprotocol/conformance/package.json", import.meta.url),
    "utf8",
  ),
);
const scenarios = {};
for (const entry of readdirSync(dir).sort()) {
  const match = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry);
  if (!match) continue;
  const checks = JSON.parse(readFileSync(join(dir, entry, "checks.json"), "utf8"));
  const counts = {};
  const failures = [];
  for (const check of checks) {
    counts[check.status] = (counts[check.status] ?? 0) + 1;
    if (check.status === "FAILURE") {
      failures.push(`${check.id}: ${check.errorMessage ?? check.description}`);
    }
  }
  scenarios[match[1]] = { passed: failures.length === 0, counts, failures };
}
const names = Object.keys(scenarios).sort();
const summary = {
  suite: `${pkg.name} ${pkg.version}`,
  url,
  passed: names.filter((name) => scenarios[name].passed),
  failed: names.filter((name) => !scenarios[name].passed),
  scenarios,
};
process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
