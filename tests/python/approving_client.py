"""A client as the official MCP Python SDK makes one over streamable HTTP, with an
elicitation callback that plays the person at the client: it approves a call whose question
names APPROVE_MARKER and denies any other. With APPROVE_MARKER `-` it declares no
elicitation at all (someone else must answer) and asks for progress on each call. It makes
each call of CALLS (a JSON list of [tool, arguments]) through mcpproxy and prints, as one
JSON object, the questions it was asked, the progress messages and each call's result.

usage: approving_client.py URL APPROVE_MARKER CALLS
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, marker, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    seen = {"questions": [], "results": [], "progress": []}

    async def on_elicit(context, params):
        seen["questions"].append(
            {"message": params.message, "schema": params.requested_schema}
        )
        if marker in params.message:
            return types.ElicitResult(
                action="accept", content={"approve": True, "reason": "looks right"}
            )
        return types.ElicitResult(action="accept", content={"approve": False})

    async def on_progress(progress, total, message):
        seen["progress"].append({"progress": progress, "total": total, "message": message})

    elicit = on_elicit if marker != "-" else None
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            for tool, arguments in calls:
                result = await session.call_tool(tool, arguments, progress_callback=on_progress)
                seen["results"].append(
                    {
                        "is_error": bool(result.is_error),
                        "text": "\n".join(c.text for c in result.content if c.type == "text"),
                    }
                )
    print(json.dumps(seen))


asyncio.run(main())
