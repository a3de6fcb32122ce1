"""An IDE as the official MCP Python SDK makes one: starts `mcpproxy serve --stdio`, calls
`call_tool_read fx:echo` COUNT times, and prints {"texts": [...], "errors": [...]} as JSON.

usage: stdio_calls.py MCPPROXY CONFIG DATA_DIR CLIENT_NAME COUNT
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    binary, config, data_dir, name, count = sys.argv[1:6]
    server = StdioServerParameters(
        command=binary,
        args=["serve", "--stdio", "--config", config, "--data-dir", data_dir],
    )
    texts, errors = [], []
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(int(count)):
                arguments = {"name": "fx:echo", "args_json": json.dumps({"text": f"{name}-{i}"})}
                result = await session.call_tool("call_tool_read", arguments)
                text = result.content[0].text if result.content else ""
                (errors if result.is_error else texts).append(text)
    print(json.dumps({"texts": texts, "errors": errors}))


asyncio.run(main())
