#!/usr/bin/env python3
"""A stdio MCP server's own round trip (issue 52): the floor under a proxied call to it.

Starts SERVER (with ARGS) with pipes, initializes a session, then writes CALLS `tools/call`
lines of TOOL (default `echo` with {"text": "hi"}) one at a time, each after the answer to
the one before, and prints the p50 and mean of the time from writing a line to reading its
answer (the first WARMUP calls left out). No proxy and no sandbox: what the server and the
pipes cost by themselves. Python's own share is a few microseconds a call.

    tools/stdio-roundtrip.py target/dist/mcp-fixture [--calls 3000] [--warmup 500] [-- ARGS]
"""

import argparse
import json
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--arguments", default='{"text": "hi"}')
    parser.add_argument("args", nargs="*")
    opts = parser.parse_args()
    if opts.calls <= opts.warmup:
        parser.error("--calls must be more than --warmup")
    server = subprocess.Popen(
        [opts.server, *opts.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stdio-roundtrip", "version": "1"}}})
    if b'"result"' not in server.stdout.readline():
        print("the server did not initialize", file=sys.stderr)
        return 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    arguments = json.loads(opts.arguments)
    times = []
    for i in range(opts.calls):
        line = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                           "params": {"name": opts.tool, "arguments": arguments}})
        start = time.perf_counter()
        server.stdin.write((line + "\n").encode())
        answer = server.stdout.readline()
        times.append(time.perf_counter() - start)
        if b'"result"' not in answer:
            print(f"call {i + 1} failed: {answer[:200]!r}", file=sys.stderr)
            return 1
    server.stdin.close()
    server.wait(timeout=10)
    measured = sorted(times[opts.warmup:])
    p50 = measured[len(measured) // 2] * 1e6
    mean = sum(measured) / len(measured) * 1e6
    print(f"stdio round trip over {len(measured)} calls: p50 {p50:.0f} µs, mean {mean:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
