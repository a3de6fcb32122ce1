"""{{name}}: an mcpproxy validator. Rejects calls to the tools its settings block:
{"blocked_tools": ["server:tool", ...]}. An exception that escapes validate() rejects the
call (the proxy fails closed)."""

import json

from wit_world import exports
from wit_world.exports.metadata import PluginInfo
from wit_world.imports import host
from wit_world.imports.types import CallRequest, Verdict, Verdict_Allow, Verdict_Reject


class Metadata(exports.Metadata):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name="{{name}}",
            version="0.1.0",
            description="Rejects calls to the tools its settings block",
        )


class Validator(exports.Validator):
    def validate(self, request: CallRequest) -> Verdict:
        try:
            settings = json.loads(host.config())
        except ValueError as e:
            return Verdict_Reject(f"{{name}}: invalid settings: {e}")
        tool = f"{request.tool.server}:{request.tool.name}"
        if tool in settings.get("blocked_tools", []):
            return Verdict_Reject(
                f"Tool '{tool}' is blocked by {{name}}; ask an operator to unblock it"
            )
        return Verdict_Allow()
