#!/usr/bin/env bash
# retrieve_tools end to end (issue 52): mcp-load against a proxy whose one HTTP upstream
# serves 10,000 tools, beside the same proxy setup over the fixture's 16 tools and a direct
# call to the fixture (the HTTP round trip's floor), all in one run; and each proxy's memory
# (VmRSS, RssAnon, RssFile from /proc) once it has listed its tools, and after the searches,
# besides the memory of a proxy with the 10,000 tools from a stdio server.
#
#   tools/search-load.sh target/dist/mcpproxy target/dist/mcp-fixture \
#       target/dist/mcp-load [CALLS=2000]
#
# Talks only to loopback.
set -euo pipefail
mcpproxy=$(realpath "$1")
fixture=$(realpath "$2")
load=$(realpath "$3")
calls=${4:-2000}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$work"; echo "work: $work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 10,000 tools from a 40-word vocabulary, as benches/search.rs makes them.
mkdir -p "$work/tools"
python3 - "$work/tools/tools.json" <<'PY'
import json, sys
W = ("create delete list get update search repository issue branch file directory user project "
     "cluster pod deployment message channel email calendar event database table query row bucket "
     "object image document page comment ticket invoice payment customer order metric alert log "
     "trace").split()
w = lambda i: W[i % len(W)]
tools = [{"name": f"{w(k)}_{w(k // 7 + 3)}_{k}",
          "description": f"{w(k*3)} the {w(k*5+1)} of a {w(k*11+2)} in the {w(k+9)}. "
                         f"Returns a {w(k*13)} with {w(k*17+4)} and {w(k*19+5)}.",
          "inputSchema": {"type": "object", "properties": {
              w(k*23): {"type": "string"}, w(k*29+1): {"type": "string"},
              "limit": {"type": "integer"}}}}
         for k in range(10000)]
json.dump(tools, open(sys.argv[1], "w"))
PY

# start_proxy NAME FIXTURE_ARGS...: a fixture over HTTP and a proxy in front of it; sets
# fixture_url and proxy_url once the proxy has listed the fixture's tools. With STDIO=1, the
# proxy runs the fixture as a stdio server instead (no fixture_url).
start_proxy() {
    local name=$1; shift
    local fport pport dir=$work/$name server
    mkdir -p "$dir"
    fport=$(port); pport=$(port)
    if [ -n "${STDIO:-}" ]; then
        server=$(python3 -c 'import json, sys; print(json.dumps(
            {"name": "big", "command": sys.argv[2], "args": sys.argv[3:],
             "isolation": {"read": [sys.argv[1]]}}))' "$work/tools" "$fixture" "$@")
    else
        "$fixture" --http "127.0.0.1:$fport" "$@" > "$dir/fixture.log" 2>&1 &
        pids+=($!)
        server="{\"name\": \"big\", \"url\": \"http://127.0.0.1:$fport/mcp\"}"
    fi
    cat > "$dir/config.json" <<JSON
{"listen": "127.0.0.1:$pport", "activity": {"durability": "async"},
 "mcpServers": [$server]}
JSON
    HOME=$dir "$mcpproxy" serve --config "$dir/config.json" --data-dir "$dir/data" \
        > "$dir/serve.log" 2>&1 &
    pids+=($!)
    proxy_pid=$!
    # The CLI is asked only once serve has made its data dir (a data dir the CLI made first
    # would not be serve's first start, whose config servers are approved as written).
    for _ in $(seq 1 600); do
        grep -q 'listening on' "$dir/serve.log" && break
        sleep 0.1
    done
    for _ in $(seq 1 600); do
        "$mcpproxy" upstream list --data-dir "$dir/data" 2>/dev/null | grep -q ' ready ' && break
        sleep 0.1
    done
    fixture_url=http://127.0.0.1:$fport/mcp
    proxy_url=http://127.0.0.1:$pport/mcp
    echo "$name: $("$mcpproxy" upstream list --data-dir "$dir/data" | awk 'NR == 2 {print $3}') tools"
    sleep 2
    memory "$name, listed"
}

# memory LABEL: the last proxy's resident memory, as /proc/PID/status gives it.
memory() {
    echo "$1: $(grep -E '^(VmRSS|RssAnon|RssFile)' "/proc/$proxy_pid/status" | tr -s ' \t' ' ' | paste -sd ' ')"
}

measure() {
    echo "== $1"
    shift
    "$load" "$@" -n "$calls" | grep -E 'requests|latency'
}

start_proxy small
small_fixture=$fixture_url small_proxy=$proxy_url
# The same 10,000 tools from a stdio server, for its memory only: rmcp's HTTP client keeps
# every listed tool's input schema for the 2026-07-28 `Mcp-Param-*` headers, a stdio
# session does not (docs/benchmarks.md).
STDIO=1 start_proxy big-stdio --raw-tools "$work/tools/tools.json"
kill "$proxy_pid"
start_proxy big --raw-tools "$work/tools/tools.json"
big_proxy=$proxy_url big_pid=$proxy_pid
measure "direct echo to the fixture (16 tools)" --url "$small_fixture" --tool echo --args '{"text":"hi"}'
for query in "delete repository" "query database table rows with a limit" "create_issue_3"; do
    args=$(printf '{"query": "%s"}' "$query")
    measure "retrieve_tools '$query', 16 tools" --url "$small_proxy" --tool retrieve_tools --args "$args"
    measure "retrieve_tools '$query', 10,000 tools" --url "$big_proxy" --tool retrieve_tools --args "$args"
done
proxy_pid=$big_pid
memory "big, after the searches"
