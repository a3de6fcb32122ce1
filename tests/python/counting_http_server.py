"""An MCP server made with the official Python SDK (MCPServer, streamable HTTP on
127.0.0.1) that counts the JSON-RPC requests it is sent, by method, as they arrive on the
wire (before the SDK sees them). Its tools: `echo`, and `add_tool`, which adds a tool of
the given name (an echo too) and announces the change as the SDK does on MCP 2026-07-28,
to the `subscriptions/listen` streams open to it. For tests/upstream_list_cache.rs.

It listens on a port of the kernel's choosing and prints `listening PORT` on stdout once
it does. `GET /counts` answers the counts so far as a JSON object (method -> requests);
`GET /healthz` answers 200 for a load balancer's health check.

With TTL_MS, its `tools/list` results carry `ttlMs: TTL_MS` and `cacheScope: "public"`;
without it they carry the SDK's default (`ttlMs: 0`, `cacheScope: "private"`).

usage: counting_http_server.py [TTL_MS]
"""

import asyncio
import json
import socket
import sys
from collections import Counter

import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer

ttl_ms = int(sys.argv[1]) if len(sys.argv) > 1 else None
hints = None if ttl_ms is None else {"tools/list": CacheHint(ttl_ms=ttl_ms, scope="public")}
server = MCPServer("counting", cache_hints=hints)
counts: Counter[str] = Counter()


@server.tool()
def echo(text: str) -> str:
    """Answers TEXT."""
    return text


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool named NAME that answers its text, and says the tool list changed."""
    server.add_tool(echo, name=name, description=f"Answers TEXT (added as {name}).")
    await ctx.notify_tools_changed()
    return f"added {name}"


inner = server.streamable_http_app(host="127.0.0.1")


async def answer(send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def methods_of(body: bytes) -> list[str]:
    """The methods of the JSON-RPC requests and notifications in a POST body."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [m["method"] for m in messages if isinstance(m, dict) and isinstance(m.get("method"), str)]


async def app(scope, receive, send):
    if scope["type"] != "http":
        return await inner(scope, receive, send)
    if scope["method"] == "GET" and scope["path"] == "/counts":
        return await answer(send, 200, json.dumps(counts).encode())
    if scope["method"] == "GET" and scope["path"] == "/healthz":
        return await answer(send, 200, b"{}")
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if scope["method"] == "POST":
        counts.update(methods_of(body))
    else:
        counts[scope["method"]] += 1
    replayed = False

    async def replay():
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    await inner(scope, replay, send)


async def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening {listener.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[listener])


asyncio.run(main())
