"""{{name}}: an mcpproxy result guard. Blocks any result (tool result, prompt or resource)
that holds one of its marker words: {"marker_words": ["CONFIDENTIAL"]} (the default). An
exception that escapes guard() blocks the result (the proxy fails closed)."""

import json
from typing import List

from wit_world import exports
from wit_world.exports.metadata import PluginInfo
from wit_world.exports.result_guard import (
    Answer,
    Answer_Block,
    Answer_Items,
    Block,
    GuardContext,
    Item,
    ItemAction_Pass,
)
from wit_world.imports import host


class Metadata(exports.Metadata):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name="{{name}}",
            version="0.1.0",
            description="Blocks results that hold a marker word",
        )


class ResultGuard(exports.ResultGuard):
    def guard(self, context: GuardContext, items: List[Item]) -> Answer:
        try:
            settings = json.loads(host.config())
        except ValueError as e:
            return Answer_Block(Block(kind="settings", reason=f"{{name}}: invalid settings: {e}"))
        words = settings.get("marker_words", ["CONFIDENTIAL"])
        for item in items:
            for word in words:
                if word in item.text:
                    return Answer_Block(
                        Block(
                            kind="marker-word",
                            reason=f"the result of {context.server}:{context.name} is marked "
                            f"{word}; ask its owner for a copy you may share",
                        )
                    )
        return Answer_Items([ItemAction_Pass() for _ in items])
