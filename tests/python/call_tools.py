"""An agent as the official MCP Python SDK makes one over streamable HTTP: makes each call
of CALLS (a JSON list of [proxy tool, upstream tool, arguments]) at URL in turn and prints
[{"is_error": ..., "texts": [...]}, ...] as JSON, one entry per call.

usage: call_tools.py URL CALLS
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, calls = sys.argv[1], json.loads(sys.argv[2])
    answers = []
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for proxy_tool, name, args in calls:
                result = await session.call_tool(proxy_tool, {"name": name, "args": args})
                texts = [c.text for c in result.content if getattr(c, "text", None) is not None]
                answers.append({"is_error": bool(result.is_error), "texts": texts})
    print(json.dumps(answers))


if __name__ == "__main__":
    asyncio.run(main())
