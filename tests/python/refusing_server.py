"""An MCP server made with the official Python SDK (MCPServer, stdio) whose tools do what a
sandboxed server trips over: open a TCP connection, fetch a URL, read a file. A tool that
raises is answered `Error executing tool NAME` and its traceback goes to stderr, as the
SDK does for every server built on it. For tests/upstream_refusal_errors.rs.

usage: refusing_server.py
"""

import asyncio
import urllib.request

from mcp.server.mcpserver import MCPServer

server = MCPServer("refusing")


@server.tool()
async def connect_to(host: str, port: int) -> str:
    """Opens a TCP connection to HOST:PORT and closes it."""
    _, writer = await asyncio.open_connection(host, port)
    writer.close()
    return f"connected to {host}:{port}"


@server.tool()
def fetch_url(url: str) -> str:
    """Fetches URL (through the proxy the environment names, if any)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode(errors="replace")


@server.tool()
def read_file(path: str, depth: int = 0) -> str:
    """Reads the text file at PATH, DEPTH calls down (a framework's deep stack: a failure's
    traceback then has about 4 lines per level)."""
    return _down(path, depth)


# Two functions calling each other: Python folds a frame repeated back to back, not these.
def _down(path: str, depth: int) -> str:
    return _across(path, depth - 1) if depth > 0 else _open(path)


def _across(path: str, depth: int) -> str:
    return _down(path, depth - 1) if depth > 0 else _open(path)


def _open(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


if __name__ == "__main__":
    server.run()
