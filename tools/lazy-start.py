"""Times `mcpproxy serve` from its start to the first retrieve_tools answer that names the
echo tool of every one of N servers (each slow to start: --startup-delay-ms), lazy vs
eager. usage: tests/python/.venv/bin/python tools/lazy-start.py MCPPROXY FIXTURE N DELAY_MS ROUNDS
(the official MCP Python SDK is the client: its own connect and call are in the times)"""
import asyncio, json, os, subprocess, sys, tempfile, time, socket
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

binary, fixture, n, delay, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def config(mode, port):
    return {"start": mode, "idle_stop_secs": 600, "listen": f"127.0.0.1:{port}",
            "mcpServers": [{"name": f"s{i:02}", "command": fixture,
                            "args": ["--name", f"s{i:02}", "--startup-delay-ms", delay],
                            "isolation": {}} for i in range(n)]}

async def all_found(url):
    async with streamable_http_client(url) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("retrieve_tools", {"query": "echo", "limit": 50, "schemas": "none"})
            hits = json.loads(res.content[0].text)["tools"]
            names = {h["name"] for h in hits}
            return all(f"s{i:02}:echo" in names for i in range(n))

async def time_start(data_dir, mode):
    port = free_port()
    path = os.path.join(data_dir, "mcp_config.json")
    json.dump(config(mode, port), open(path, "w"))
    env = dict(os.environ, HOME=data_dir, NO_COLOR="1")
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "serve", "--config", path, "--data-dir", data_dir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        while True:
            try:
                if await all_found(url):
                    return time.monotonic() - t0
            except Exception:
                pass
            await asyncio.sleep(0.005)
            if time.monotonic() - t0 > 60:
                return None
    finally:
        proc.terminate(); proc.wait()

async def main():
    for mode in ["lazy", "eager"]:
        data_dir = tempfile.mkdtemp()
        first = await time_start(data_dir, mode)   # the first start learns the tools
        times = [await time_start(data_dir, mode) for _ in range(rounds)]
        print(json.dumps({"mode": mode, "servers": n, "startup_delay_ms": int(delay),
                          "first_start_s": first, "later_starts_ms": [round(t * 1000) for t in times if t]}))

asyncio.run(main())
