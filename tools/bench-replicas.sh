#!/usr/bin/env bash
# Throughput of one mcpproxy replica against three behind HAProxy, measured with mcp-load.
#
#   tools/bench-replicas.sh [REQUESTS] [CONCURRENCY]
#
# Needs the dist binaries (cargo build --profile dist -p mcpproxy -p mcp-fixture -p mcp-load),
# Debian's haproxy and postgresql-15 (the replicas share their state in one PostgreSQL, as
# in docs/deploy-team.md). Everything listens on 127.0.0.1 and lives in a temp dir that is
# removed at exit. Each replica serves the fixture as its own stdio upstream (`fx`), the way
# a team's gateway runs its servers; the client calls `call_tool_read fx:echo` over
# keep-alive connections, spread over 16 sessions (each stuck to its replica by HAProxy).
# Cases, each run 3 times interleaved (medians reported by hand in docs/benchmarks.md):
#   one   : mcp-load -> replica-1 directly
#   lb-1  : mcp-load -> HAProxy -> replica-1
#   lb-3  : mcp-load -> HAProxy -> replica-1..3
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-4000}
concurrency=${2:-16}
bin=target/dist
for b in mcpproxy mcp-fixture mcp-load; do
    [ -x "$bin/$b" ] || { echo "missing $bin/$b: cargo build --profile dist -p mcpproxy -p mcp-fixture -p mcp-load" >&2; exit 1; }
done
command -v haproxy >/dev/null || { echo "haproxy is not installed (apt-get install haproxy)" >&2; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/postgres" ] || { echo "postgresql is not installed (apt-get install postgresql)" >&2; exit 1; }

work=$(mktemp -d)
chmod 711 "$work"   # the postgres user reaches its own dir inside
pids=()
replica_pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
as_pg() { if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups "$@"; else "$@"; fi; }

# PostgreSQL
pg_port=$(free_port)
mkdir -p "$work/pg"
[ "$(id -u)" -eq 0 ] && chown postgres: "$work/pg"
as_pg "$pgbin/initdb" -D "$work/pg/data" -U mcpproxy --auth=trust >/dev/null
as_pg "$pgbin/postgres" -D "$work/pg/data" -h 127.0.0.1 -p "$pg_port" -k "$work/pg" >"$work/pg.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do "$pgbin/pg_isready" -h 127.0.0.1 -p "$pg_port" -q && break; sleep 0.1; done
as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$pg_port" -U mcpproxy mcpproxy

# Three replicas
ports=()
for i in 1 2 3; do
    port=$(free_port); ports+=("$port")
    dir="$work/replica-$i"; mkdir -p "$dir"
    cat >"$dir/mcp_config.json" <<JSON
{
  "activity": {"durability": "sync"},
  "http": {"max_sessions": 1000},
  "cluster": {"postgres": "postgres://mcpproxy@127.0.0.1:$pg_port/mcpproxy", "replica": "replica-$i"},
  "mcpServers": [{"name": "fx", "command": "$PWD/$bin/mcp-fixture", "isolation": {"enabled": false}}]
}
JSON
    "$bin/mcpproxy" serve --listen "127.0.0.1:$port" --config "$dir/mcp_config.json" --data-dir "$dir" \
        >"$dir/out.log" 2>&1 &
    pids+=($!); replica_pids+=($!)
done
for port in "${ports[@]}"; do
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
done
sleep 2   # the upstreams connect

haproxy_cfg() { # PORT REPLICA_COUNT
    cat <<CFG
global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
frontend mcp
  bind 127.0.0.1:$1
  default_backend replicas
backend replicas
  balance roundrobin
  stick-table type string len 128 size 100k expire 30m
  stick on req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
CFG
    for i in $(seq "$2"); do echo "  server replica-$i 127.0.0.1:${ports[$((i-1))]}"; done
}
lb1=$(free_port); lb3=$(free_port)
haproxy_cfg "$lb1" 1 >"$work/lb1.cfg"; haproxy_cfg "$lb3" 3 >"$work/lb3.cfg"
haproxy -db -f "$work/lb1.cfg" >"$work/lb1.log" 2>&1 & pids+=($!)
haproxy -db -f "$work/lb3.cfg" >"$work/lb3.log" 2>&1 & pids+=($!)
sleep 1

# CPU time (user + system, clock ticks) the replicas have used so far.
replica_ticks() {
    local total=0
    for p in "${replica_pids[@]}"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$total"
}
ticks_per_s=$(getconf CLK_TCK)

run() { # NAME URL
    local before after
    before=$(replica_ticks)
    "$bin/mcp-load" --url "$2" --tool call_tool_read --args '{"name":"fx:echo","args":{"text":"hi"}}' \
        --requests "$requests" --concurrency "$concurrency" --sessions 16 --warmup 400 \
        --connections keep-alive --output json >"$work/$1.json"
    after=$(replica_ticks)
    python3 - "$1" "$work/$1.json" "$((after - before))" "$ticks_per_s" "$((requests + 400))" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
cpu_us = int(sys.argv[3]) / int(sys.argv[4]) * 1e6 / int(sys.argv[5])
print(f"{sys.argv[1]:6} {r['calls_per_sec']:>9.0f} calls/s  p50 {r.get('p50_us', 0):>7} us  "
      f"p99 {r.get('p99_us', 0):>7} us  errors {r['errors']}  replicas' CPU {cpu_us:>5.0f} us/call")
PY
}
echo "requests $requests, concurrency $concurrency, $(nproc) cores"
for round in 1 2 3; do
    echo "round $round"
    run one "http://127.0.0.1:${ports[0]}/mcp"
    run lb-1 "http://127.0.0.1:$lb1/mcp"
    run lb-3 "http://127.0.0.1:$lb3/mcp"
done
