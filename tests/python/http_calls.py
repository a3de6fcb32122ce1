"""A client as the official MCP Python SDK makes one over streamable HTTP: calls
`call_tool_read fx:echo` COUNT times at URL and prints {"texts": [...]} as JSON. The SDK
ends the session with a DELETE on the way out; what it thinks of the answer goes to its
log on stderr.

usage: http_calls.py URL COUNT
"""

import asyncio
import json
import logging
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    texts = []
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(count):
                arguments = {"name": "fx:echo", "args": {"text": f"http-{i}"}}
                result = await session.call_tool("call_tool_read", arguments)
                texts.append(result.content[0].text if result.content else "")
    print(json.dumps({"texts": texts}))


logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
asyncio.run(main())
