#!/usr/bin/env bash
# mcpproxy as the CLIENT of one MCP conformance scenario: the suite's `conformance client`
# starts the scenario's server and runs this script with the server's URL appended
# (`--command tests/conformance/client.sh`); MCP_CONFORMANCE_SCENARIO names the scenario.
#
#   tests/conformance/client.sh URL
#
# Steps, in order:
#   1. a temporary data dir and a config with URL as the one HTTP upstream ("scenario");
#   2. `mcpproxy serve` on a free loopback port, in the background;
#   3. wait until the upstream is ready, or in a terminal state (error, login required);
#      (an OAuth login step goes here, between "started" and "exercise")
#   4. exercise it with the CLI as the scenario expects (tools list, calls);
#   5. stop the proxy (and remove the data dir).
#
# MCPPROXY (the binary) defaults to target/debug/mcpproxy of this checkout. The proxy's log
# is printed to stderr when the script ends, for the suite's report.
set -uo pipefail

url=${!#}
scenario=${MCP_CONFORMANCE_SCENARIO:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mcpproxy=${MCPPROXY:-$root/target/debug/mcpproxy}
node="$here/node_modules/.bin/node"
if [ ! -x "$mcpproxy" ]; then
    echo "client.sh: no mcpproxy binary at $mcpproxy (cargo build, or set MCPPROXY)" >&2
    exit 3
fi

# --- 1. data dir and config -------------------------------------------------------------
data=$(mktemp -d)
export MCPPROXY_DATA_DIR="$data"
export MCPPROXY_CONFIG="$data/mcp_config.json"
export MCPPROXY_CREDENTIALS=file
export NO_COLOR=1
# The OAuth settings of the auth scenarios: a pre-registered client when the scenario gives
# one (MCP_CONFORMANCE_CONTEXT), and the Client ID Metadata Document URL the suite expects.
oauth=$(MCP_CONFORMANCE_CONTEXT=${MCP_CONFORMANCE_CONTEXT:-} "$node" -e '
    let c = {};
    try { c = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}"); } catch {}
    const o = { client_metadata_url: "https://conformance-test.local/client-metadata.json" };
    if (c.client_id) o.client_id = c.client_id;
    if (c.client_id && c.client_secret) o.client_secret = c.client_secret;
    process.stdout.write(JSON.stringify(o));')
cat >"$MCPPROXY_CONFIG" <<JSON
{
  "mcpServers": [{"name": "scenario", "url": "$url", "oauth": $oauth}],
  "upstream": {"reconnect_initial_ms": 200, "reconnect_max_ms": 1000}
}
JSON

# --- 2. start the proxy -----------------------------------------------------------------
# MCPPROXY_PLUGIN_CACHE: a directory of compiled plugins shared by the runs (a debug build
# spends seconds compiling the embedded plugins on a start with an empty cache).
cache=${MCPPROXY_PLUGIN_CACHE:-}
if [ -n "$cache" ] && [ -d "$cache" ]; then
    mkdir -p "$data/cache/plugins"
    cp -R "$cache/." "$data/cache/plugins/" 2>/dev/null || true
fi
"$mcpproxy" serve --listen 127.0.0.1:0 >"$data/serve.log" 2>&1 &
serve_pid=$!
# The proxy owns the data dir once its control socket is there; a CLI command run before
# that would take the data dir itself.
# Every wait below is bounded by time, generously: on a loaded machine a debug build takes
# seconds per CLI command, so a bound counted in polls would give up too early.
until [ -S "$data/mcpproxy.sock" ] || [ "$SECONDS" -ge 120 ]; do
    sleep 0.1
done
stop() {
    # --- 5. stop the proxy ----------------------------------------------------------------
    kill "$serve_pid" 2>/dev/null
    wait "$serve_pid" 2>/dev/null
    sed 's/^/mcpproxy: /' "$data/serve.log" >&2
    rm -rf "$data"
}
trap stop EXIT

# --- 3. wait for the upstream -----------------------------------------------------------
upstream_state() {
    "$mcpproxy" upstream list -o json 2>/dev/null |
        "$node" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const l=JSON.parse(s);const u=(Array.isArray(l)?l:l.servers||[]).find(x=>x.name==="scenario");process.stdout.write(u?String(u.state):"")}catch{}})'
}
state=""
ready_by=$((SECONDS + 120))
while [ "$SECONDS" -lt "$ready_by" ]; do
    state=$(upstream_state)
    case "$state" in
    ready | error | login_required | unapproved | quarantined) break ;;
    esac
    sleep 0.1
done
echo "client.sh: upstream state: ${state:-unknown}" >&2
if [ -n "$cache" ] && [ -d "$data/cache/plugins" ]; then
    mkdir -p "$cache"
    cp -R -n "$data/cache/plugins/." "$cache/" 2>/dev/null || true
fi

# --- 3b. log in when the server asks for it (the auth scenarios) --------------------------
# The suite's authorization server redirects /authorize straight back with a code: the
# "browser" only follows redirects to the login's loopback redirect URI.
login() {
    BROWSER="$here/browser.sh" "$mcpproxy" upstream login scenario --timeout 20 >&2 || return 1
    local settled_by=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$settled_by" ]; do
        state=$(upstream_state)
        case "$state" in
        connecting | disconnected | authenticating) sleep 0.1 ;;
        *) break ;;
        esac
    done
    echo "client.sh: after login: $state" >&2
}
if [ "$state" = login_required ]; then
    login
fi

# --- 4. exercise it ---------------------------------------------------------------------
call() { # call TOOL ARGS_JSON
    "$mcpproxy" call tool-write "scenario:$1" --args "$2" -o json --reason "conformance scenario $scenario" >&2 || true
}
tools_json=$("$mcpproxy" tools list --server scenario -o json 2>/dev/null || echo '[]')
echo "client.sh: tools: $tools_json" >&2
tool_schema() { # tool_schema NAME: the inputSchema the proxy shows for NAME
    printf '%s' "$tools_json" | "$node" -e '
        let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
          const list=JSON.parse(s); const tools=Array.isArray(list)?list:(list.tools||[]);
          const t=tools.find(t=>t.name===process.argv[1]||t.name==="scenario:"+process.argv[1]||t.tool===process.argv[1]);
          process.stdout.write(JSON.stringify(t?(t.inputSchema||t.input_schema||{}):{}));
        })' "$1"
}
case "$scenario" in
auth/*)
    # List and call every tool; a server that then asks for more access (403
    # insufficient_scope) gets a login for it and the calls again, as a person would do,
    # until mcpproxy refuses to loop.
    for _ in 1 2 3 4; do
        tools_json=$("$mcpproxy" tools list --server scenario -o json 2>/dev/null || echo '[]')
        for t in $(printf '%s' "$tools_json" | "$node" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const l=JSON.parse(s);for(const t of (Array.isArray(l)?l:(l.tools||[])))console.log(String(t.name).replace(/^scenario:/,""))}catch{}})'); do
            call "$t" '{}'
        done
        state=$(upstream_state)
        [ "$state" = login_required ] || break
        login || break
    done
    ;;
tools_call)
    call add_numbers '{"a": 2, "b": 3}'
    ;;
request-metadata | http-standard-headers)
    for t in $(printf '%s' "$tools_json" | "$node" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const l=JSON.parse(s);for(const t of (Array.isArray(l)?l:(l.tools||[])))console.log(String(t.name).replace(/^scenario:/,""))})'); do
        call "$t" '{}'
    done
    ;;
http-custom-headers)
    call test_custom_headers '{"region":"us-west1","priority":5,"verbose":true,"query":"q","non_ascii_val":"日本語","whitespace_val":" padded ","leading_space_val":" lead","trailing_space_val":"trail ","internal_space_val":"a b c","control_char_val":"a\u0001b","crlf_val":"a\r\nb","tab_val":"\tt"}'
    call test_custom_headers_null '{"region":"us-west1","priority":1,"verbose":null,"query":"q"}'
    ;;
http-invalid-tool-headers)
    call valid_tool '{"region":"us"}'
    ;;
json-schema-2020-12-preservation)
    schema=$(tool_schema json_schema_2020_12_tool)
    call json_schema_echo "{\"schema\": $schema}"
    ;;
sep-2322-client-request-state)
    call test_mrtr_echo_state '{}'
    call test_mrtr_no_state '{}'
    call test_mrtr_unrelated '{}'
    call test_mrtr_no_result_type '{}'
    ;;
*)
    # initialize, json-schema-ref-no-deref, sse-retry, ...: connecting and listing is the
    # exercise; call the first tool if there is one.
    first=$(printf '%s' "$tools_json" | "$node" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const l=JSON.parse(s);const t=(Array.isArray(l)?l:(l.tools||[]))[0];if(t)process.stdout.write(String(t.name).replace(/^scenario:/,""))}catch{}})')
    if [ -n "$first" ]; then call "$first" '{}'; fi
    ;;
esac
exit 0
