#!/usr/bin/env bash
# Assembles the ordinary-output corpus the secret-redactor's false-positive rate is measured
# on (docs/benchmarks.md, "Result guards") into DIR, from what a Rust and Node development
# machine has: source files (the `src/` of every crate in the cargo registry, no tests), JSON
# (every .json under an npm install), and logs (system logs, build-script output, `git log`
# of this repository, `dpkg -l`, `ps`). Then run:
#   SECRET_REDACTOR_CORPUS=DIR cargo test --release -p secret-redactor measure_false_positives -- --ignored --nocapture
set -euo pipefail
out=${1:?usage: corpus.sh DIR}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out/source" "$out/json" "$out/logs"
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
for crate in "$registry"/*/*/; do
    name=$(basename "$crate")
    [ -d "$crate/src" ] || continue
    mkdir -p "$out/source/$name"
    (cd "$crate/src" && find . -name '*.rs' -not -path '*/tests/*' -print0 |
        xargs -0 -r cp --parents -t "$out/source/$name")
done
npm_dir=${NPM_DIR:-$repo/tests/npm/node_modules}
(cd "$npm_dir" && find . -name '*.json' -print0 | xargs -0 -r cp --parents -t "$out/json")
for log in /var/log/*.log /var/log/apt/*.log; do
    [ -r "$log" ] && cp "$log" "$out/logs/$(echo "$log" | tr / _).log"
done
find "$repo/target" -path '*/build/*/output' -size +0 2>/dev/null | head -400 |
    while read -r f; do cp "$f" "$out/logs/build_$(echo "$f" | md5sum | cut -c1-12).log"; done
git -C "$repo" log --stat -n 5000 > "$out/logs/git-log.log"
dpkg -l > "$out/logs/dpkg-l.log" 2>/dev/null || true
ps aux > "$out/logs/ps.log"
echo "corpus in $out: $(find "$out" -type f | wc -l) files"
