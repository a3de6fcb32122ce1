#!/usr/bin/env bash
# Where the CPU of a proxied call goes (issue 52): `mcp-load -c C` against the fixture's
# `echo` over HTTP (the direct call), then against `mcpproxy serve` running the same fixture
# over stdio in its default sandbox, and for each the CPU each process spent per call
# (utime + stime from /proc/PID/stat, over the measured calls only): the fixture, the load
# client and, through the proxy, mcpproxy (its journal's writer thread apart) and the
# fixture it runs. On two cores the processes share the machine, so the calls/s a path
# reaches follows the CPU its processes spend per call.
#
#   tools/call-cpu.sh target/dist/mcpproxy target/dist/mcp-fixture target/dist/mcp-load \
#       [CALLS=10000] [C=16] [DURABILITY=async]
#
# Talks only to loopback.
set -euo pipefail
mcpproxy=$(realpath "$1")
fixture=$(realpath "$2")
load=$(realpath "$3")
calls=${4:-10000}
concurrency=${5:-16}
durability=${6:-async}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tick=$(getconf CLK_TCK)
# Seconds of CPU of a process (its threads included), or of one thread (PID/task/TID).
cpu() { awk -v t="$tick" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
per_call() { awk -v a="$1" -v b="$2" -v n="$calls" 'BEGIN {printf "%d", (b - a) * 1e6 / n}'; }
# The load client's CPU per call, from the `time -f "%U %S"` of its run.
load_per_call() { awk -v n="$calls" '{printf "%d", ($1 + $2) * 1e6 / n}' "$work/load-time"; }
wait_for() {
    for _ in $(seq 300); do grep -q "$2" "$1" && return 0; sleep 0.1; done
    echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1
}

fport=$(port); pport=$(port)
"$fixture" --http "127.0.0.1:$fport" > "$work/fixture.log" 2>&1 &
fixture_pid=$!; pids+=("$fixture_pid")
python3 - "$work/config.json" "$pport" "$work/data" "$durability" "$fixture" <<'PY'
import json, sys
path, port, data, durability, fixture = sys.argv[1:]
json.dump({"listen": f"127.0.0.1:{port}", "data_dir": data,
           "activity": {"durability": durability},
           "mcpServers": [{"name": "fx", "command": fixture}]}, open(path, "w"))
PY
"$mcpproxy" serve --config "$work/config.json" > "$work/proxy.log" 2>&1 &
proxy_pid=$!; pids+=("$proxy_pid")
wait_for "$work/fixture.log" MCP_FIXTURE_LISTENING
wait_for "$work/proxy.log" "listening on"
# The sandboxed fixture: the proxy's grandchild (the sandbox's first process is between).
inner=""
for _ in $(seq 100); do
    inner=$(pgrep -f "^$fixture\$" | while read -r pid; do
        [ "$pid" != "$fixture_pid" ] && echo "$pid"; done | head -1)
    [ -n "$inner" ] && break; sleep 0.1
done
[ -n "$inner" ] || { echo "the proxy did not start the fixture" >&2; exit 1; }
writer=$(grep -l '^activity-writer$' /proc/"$proxy_pid"/task/*/comm | head -1 | xargs dirname)
writer=${writer#/proc/}

direct=(--url "http://127.0.0.1:$fport/mcp" --tool echo --args '{"text":"hi"}')
proxied=(--url "http://127.0.0.1:$pport/mcp" --tool call_tool_read
    --args '{"name":"fx:echo","args":{"text":"hi"}}')
"$load" "${direct[@]}" -n 500 -c "$concurrency" > /dev/null
"$load" "${proxied[@]}" -n 500 -c "$concurrency" > /dev/null

echo "== direct: mcp-load -> fixture over HTTP, $calls calls at c=$concurrency"
f0=$(cpu "$fixture_pid")
/usr/bin/time -f "%U %S" -o "$work/load-time" "$load" "${direct[@]}" -n "$calls" \
    -c "$concurrency" > "$work/direct.out"
f1=$(cpu "$fixture_pid")
grep -E "throughput|latency" "$work/direct.out"
echo "CPU per call: fixture $(per_call "$f0" "$f1") µs, mcp-load $(load_per_call) µs"

echo "== proxied: mcp-load -> mcpproxy -> fixture over stdio, $calls calls at c=$concurrency"
p0=$(cpu "$proxy_pid"); w0=$(cpu "$writer"); i0=$(cpu "$inner")
/usr/bin/time -f "%U %S" -o "$work/load-time" "$load" "${proxied[@]}" -n "$calls" \
    -c "$concurrency" > "$work/proxied.out"
p1=$(cpu "$proxy_pid"); w1=$(cpu "$writer"); i1=$(cpu "$inner")
grep -E "throughput|latency" "$work/proxied.out"
echo "CPU per call: mcpproxy $(per_call "$p0" "$p1") µs (of it the journal's writer" \
    "$(per_call "$w0" "$w1") µs), fixture $(per_call "$i0" "$i1") µs," \
    "mcp-load $(load_per_call) µs"
