#!/usr/bin/env bash
# Runs the MCP conformance suite's server scenarios (all 65 of them, `--suite all`) against
# one MCP endpoint and writes a JSON summary: per scenario, whether it passed (no check
# FAILED; warnings allowed), its check counts and the failed checks' messages.
#
#   tests/conformance/run.sh URL OUTPUT.json [extra `conformance server` options]
#
# The suite and the Node 22 it needs come from `npm ci --prefix tests/conformance`. Its
# full console output is written beside the summary (OUTPUT.log). Exits non-zero only
# when the suite could not run; failed scenarios are in the summary.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 URL OUTPUT.json [conformance server options]" >&2
    exit 2
fi
url=$1
out=$2
shift 2

here=$(cd "$(dirname "$0")" && pwd)
node="$here/node_modules/.bin/node"
cli="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node" ] || [ ! -f "$cli" ]; then
    echo "the conformance suite is not installed: npm ci --prefix tests/conformance" >&2
    exit 3
fi

checks=$(mktemp -d)
trap 'rm -rf "$checks"' EXIT
log="${out%.json}.log"
# The suite exits 1 when any scenario fails; that is a result, not an error.
"$node" "$cli" server --url "$url" --suite all --timeout 20000 -o "$checks" "$@" >"$log" 2>&1 || true
"$node" "$here/summarize.mjs" "$checks" "$url" >"$out"
