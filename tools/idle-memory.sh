#!/usr/bin/env bash
# The proxy's idle memory (issue 52): `mcpproxy serve` with three stdio servers from
# tests/npm (server-everything, server-filesystem, server-memory) in their default sandbox,
# measured SETTLE seconds after each of STARTS starts on one data dir (the first start
# compiles the plugins and pins the tools; the others find both). Servers written in the
# config before the data dir's first start run without an approval.. Prints VmRSS, RssAnon
# and RssFile (/proc/PID/status) and the Private/Shared split (/proc/PID/smaps_rollup).
#
#   tools/idle-memory.sh target/dist/mcpproxy [STARTS=5] [SETTLE=12] [START=eager|lazy] \
#       [CALLS=0] [QUIET=70]
#
# With CALLS, each start is measured again after CALLS `retrieve_tools` and CALLS
# `call_tool_read memory:read_graph` from `mcp-load` (beside the binary), then again QUIET
# seconds later: the memory a proxy holds in use, and once it has gone quiet again (it gives
# memory back at the first quiet 30 s window after busy ones, so within 60 s).
#
# Needs `npm ci --prefix tests/npm`. Talks only to loopback.
set -euo pipefail
binary=$(realpath "$1")
starts=${2:-5}
settle=${3:-12}
start_mode=${4:-eager}
calls=${5:-0}
quiet=${6:-70}
load="$(dirname "$binary")/mcp-load"
repo=$(cd "$(dirname "$0")/.." && pwd)
npm_dir="$repo/tests/npm"
[ -x "$npm_dir/node_modules/.bin/mcp-server-everything" ] || {
    echo "run: npm ci --prefix tests/npm" >&2
    exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/served" "$work/memory"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/mcp_config.json" <<JSON
{
  "listen": "127.0.0.1:$port",
  "start": "$start_mode",
  "activity": { "durability": "async" },
  "mcpServers": [
    { "name": "everything", "command": "npx",
      "args": ["--prefix", "$npm_dir", "--no-install", "mcp-server-everything", "stdio"] },
    { "name": "filesystem", "command": "npx",
      "args": ["--prefix", "$npm_dir", "--no-install", "mcp-server-filesystem", "$work/served"],
      "isolation": { "write": ["$work/served"] } },
    { "name": "memory", "command": "npx",
      "args": ["--prefix", "$npm_dir", "--no-install", "mcp-server-memory"],
      "env": { "MEMORY_FILE_PATH": "$work/memory/memory.jsonl" },
      "isolation": { "write": ["$work/memory"] } }
  ]
}
JSON
# The binary's pages in the page cache, as for every start after the first (see
# docs/benchmarks.md: RssFile counts only neighbours already cached).
cat "$binary" > /dev/null
export HOME="$work/home" NO_COLOR=1
mkdir -p "$HOME"
data="$work/data"
printf 'start\tVmRSS_MiB\tRssAnon_MiB\tRssFile_MiB\tPrivate_MiB\tShared_MiB\tstates\n'
# report LABEL: one row for the running proxy ($pid).
report() {
    kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$pid/status"; }
    smaps() { awk -v k="$1" '$1 == k":" {s += $2} END {print s}' "/proc/$pid/smaps_rollup"; }
    private=$(( $(smaps Private_Clean) + $(smaps Private_Dirty) ))
    shared=$(( $(smaps Shared_Clean) + $(smaps Shared_Dirty) ))
    states=$("$binary" upstream list --data-dir "$data" 2>/dev/null \
        | awk 'NR > 1 {printf "%s=%s/%s ", $1, $2, $3}' || true)
    printf '%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\n' "$1" \
        "$(echo "$(kib VmRSS) / 1024" | bc -l)" "$(echo "$(kib RssAnon) / 1024" | bc -l)" \
        "$(echo "$(kib RssFile) / 1024" | bc -l)" "$(echo "$private / 1024" | bc -l)" \
        "$(echo "$shared / 1024" | bc -l)" "$states"
}
for i in $(seq 1 "$starts"); do
    "$binary" serve --config "$work/mcp_config.json" --data-dir "$data" \
        > "$work/serve-$i.log" 2>&1 &
    pid=$!
    sleep "$settle"
    report "$i"
    if [ "$calls" -gt 0 ]; then
        url="http://127.0.0.1:$port/mcp"
        "$load" --url "$url" --tool retrieve_tools --args '{"query": "read a file"}' -n "$calls" > /dev/null
        "$load" --url "$url" --tool call_tool_read \
            --args '{"name": "memory:read_graph", "args": {}}' -n "$calls" > /dev/null
        report "$i+$calls calls"
        sleep "$quiet"
        report "$i+${quiet}s quiet"
    fi
    kill -INT "$pid"
    wait "$pid" || true
done
