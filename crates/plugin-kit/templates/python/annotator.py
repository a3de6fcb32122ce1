"""{{name}}: an mcpproxy annotator. Marks tools whose name starts with `query_` read-only;
says nothing about the others (the next annotator is asked)."""

from typing import Optional

from wit_world import exports
from wit_world.exports.annotator import Basis, Inference
from wit_world.exports.metadata import PluginInfo
from wit_world.imports.types import Annotations, SafetyClass, Tool


class Metadata(exports.Metadata):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name="{{name}}", version="0.1.0", description="Marks query_ tools read-only"
        )


class Annotator(exports.Annotator):
    def infer(self, tool: Tool) -> Optional[Inference]:
        if not tool.name.startswith("query_"):
            return None
        return Inference(
            annotations=Annotations(
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=None,
                open_world_hint=None,
            ),
            safety_class=SafetyClass.READ_ONLY,
            basis=Basis.INFERRED,
            why="name prefix 'query_'",
        )
