"""A client as the official MCP Python SDK makes one over streamable HTTP, used against the
official server-everything behind mcpproxy. It declares elicitation (answering each request
with NAME), asks for progress on the long-running tool, sets a log level, lists and reads
prompts and resources, and prints what it saw as one JSON object.

usage: everything_client.py URL NAME
  URL   an MCP endpoint (e.g. http://127.0.0.1:PORT/mcp/servers/everything)
  NAME  what the client answers to an elicitation's `name` field
"""

import asyncio
import json
import logging
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, answer_name = sys.argv[1], sys.argv[2]
    seen = {"elicitations": [], "progress": [], "logs": []}

    async def on_elicit(context, params):
        seen["elicitations"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": answer_name, "check": True})

    async def on_log(params):
        seen["logs"].append({"level": params.level, "logger": params.logger})

    async def on_progress(progress, total, message):
        seen["progress"].append([progress, total])

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(
            read, write, elicitation_callback=on_elicit, logging_callback=on_log
        ) as session:
            init = await session.initialize()
            seen["capabilities"] = init.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            seen["annotations"] = {
                t.name: (t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if t.annotations else None)
                for t in tools.tools
            }

            elicited = await session.call_tool("trigger-elicitation-request", {})
            seen["elicitation_result"] = {
                "is_error": bool(elicited.is_error),
                "text": "\n".join(c.text for c in elicited.content if c.type == "text"),
            }

            done = await session.call_tool(
                "trigger-long-running-operation",
                {"duration": 0.4, "steps": 4},
                progress_callback=on_progress,
            )
            seen["long_running"] = {
                "is_error": bool(done.is_error),
                "text": "\n".join(c.text for c in done.content if c.type == "text"),
            }

            # Log messages: ask for all of them, start the server's simulated logging, wait for
            # one (it logs every 5 s), stop it.
            await session.set_logging_level("debug")
            await session.call_tool("toggle-simulated-logging", {})
            for _ in range(150):
                if seen["logs"]:
                    break
                await asyncio.sleep(0.1)
            await session.call_tool("toggle-simulated-logging", {})

            prompts = await session.list_prompts()
            seen["prompts"] = sorted(p.name for p in prompts.prompts)
            simple = next((p for p in prompts.prompts if not p.arguments), None)
            if simple is not None:
                got = await session.get_prompt(simple.name)
                seen["prompt"] = {"name": simple.name, "messages": len(got.messages)}

            resources = await session.list_resources()
            seen["resources"] = sorted(r.uri for r in resources.resources)
            if resources.resources:
                first = resources.resources[0]
                read_back = await session.read_resource(first.uri)
                seen["read"] = {
                    "uri": str(first.uri),
                    "contents": len(read_back.contents),
                }
            templates = await session.list_resource_templates()
            seen["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    print(json.dumps(seen))


logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
asyncio.run(main())
