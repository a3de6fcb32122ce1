"""secret-guard: an mcpproxy validator plugin written in Python.

Rejects a call whose arguments carry something that looks like a secret, so an agent
cannot paste credentials into a tool (an issue tracker, a chat, a web request):

  * AWS access key IDs (``AKIA...``/``ASIA...``), private key blocks
    (``-----BEGIN ... PRIVATE KEY-----``), GitHub, Slack and Google API tokens;
  * long high-entropy tokens (32+ characters of base64-like text mixing digits, lower and
    upper case, with more than 4 bits of entropy per character), unless ``entropy_check``
    is false.

Settings (all optional; other keys, such as the intent_declaration switches every
validator receives, are ignored):

  * ``allow_tools``: list of ``server:tool`` names (or ``server:*``) that are not checked;
  * ``extra_patterns``: object ``{label: regex}`` of further secrets to look for;
  * ``tool_patterns``: object ``{"server:tool": {label: regex}}``, patterns for one tool;
  * ``entropy_check``: bool, default true;
  * ``warn_only``: bool, default false: warn (the call goes through) instead of rejecting.

Bad settings are answered with a rejection that says what is wrong (fail closed). A
pattern that is not a valid regular expression is the one thing left uncaught: ``re``
raises, the exception escapes ``validate``, and the proxy rejects the call, naming the
plugin; calls that do not use that pattern are unaffected.

Built into a WebAssembly component of mcpproxy's ``validator-plugin`` world with
componentize-py (see build.sh).
"""

import json
import math
import re

from wit_world import exports
from wit_world.exports.metadata import PluginInfo
from wit_world.imports import host
from wit_world.imports.types import (
    CallRequest,
    Verdict,
    Verdict_Allow,
    Verdict_Reject,
    Verdict_Warn,
)

NAME = "secret-guard"
VERSION = "0.1.0"

# Compiled once, when componentize-py snapshots the module: calls do not pay for it.
BUILTIN_PATTERNS = {
    "an AWS access key ID": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    "a Slack token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
}
TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{32,}")
MIN_ENTROPY_BITS = 4.0


class Metadata(exports.Metadata):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name=NAME,
            version=VERSION,
            description="Rejects calls whose arguments look like they carry secrets",
        )


class Validator(exports.Validator):
    def validate(self, request: CallRequest) -> Verdict:
        tool = f"{request.tool.server}:{request.tool.name}"
        try:
            settings = Settings(json.loads(host.config()))
        except (ValueError, TypeError) as e:
            return reject(f"{NAME}: invalid settings: {e}")
        if settings.allows(tool):
            return Verdict_Allow()
        patterns = dict(BUILTIN_PATTERNS)
        # An invalid regex raises re.error here, on purpose: see the module's docstring.
        for label, regex in settings.patterns_for(tool).items():
            patterns[label] = re.compile(regex)
        try:
            args = json.loads(request.args_json)
        except ValueError:
            return reject(f"{NAME}: the arguments of '{tool}' are not valid JSON")

        for where, text in strings(args, ""):
            found = find_secret(text, patterns, settings.entropy_check)
            if found is None:
                continue
            message = (
                f"Argument '{where}' of tool '{tool}' looks like it holds {found}; "
                f"secrets may not be sent to tools. Remove it, or refer to the secret by "
                f"name and let the tool read it from its own configuration"
            )
            if settings.warn_only:
                return Verdict_Warn(message)
            return reject(message)
        return Verdict_Allow()


class Settings:
    """The plugin's settings, checked: a wrong type raises TypeError with the key's name."""

    def __init__(self, raw):
        if not isinstance(raw, dict):
            raise TypeError("the settings must be a JSON object")
        self.allow_tools = raw.get("allow_tools", [])
        if not isinstance(self.allow_tools, list) or not all(
            isinstance(t, str) for t in self.allow_tools
        ):
            raise TypeError("allow_tools must be a list of 'server:tool' strings")
        self.extra = labelled(raw.get("extra_patterns", {}), "extra_patterns")
        per_tool = raw.get("tool_patterns", {})
        if not isinstance(per_tool, dict):
            raise TypeError("tool_patterns must be an object of 'server:tool' -> patterns")
        self.per_tool = {
            tool: labelled(patterns, f"tool_patterns.{tool}")
            for tool, patterns in per_tool.items()
        }
        self.entropy_check = flag(raw, "entropy_check", True)
        self.warn_only = flag(raw, "warn_only", False)

    def allows(self, tool: str) -> bool:
        server = tool.split(":", 1)[0]
        return tool in self.allow_tools or f"{server}:*" in self.allow_tools

    def patterns_for(self, tool: str) -> dict:
        return {**self.extra, **self.per_tool.get(tool, {})}


def labelled(value, key: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise TypeError(f"{key} must be an object of label -> regular expression")
    return value


def flag(raw: dict, key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false")
    return value


def strings(value, where: str):
    """Every string in a JSON value (object keys excluded), with its path (`a.b[2]`)."""
    if isinstance(value, str):
        yield where or "(arguments)", value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings(item, f"{where}[{i}]")


def find_secret(text: str, patterns: dict, entropy_check: bool):
    """What secret `text` seems to hold (a label), or None."""
    for label, pattern in patterns.items():
        if pattern.search(text):
            return label
    if entropy_check:
        for token in TOKEN.findall(text):
            if mixed(token) and entropy(token) > MIN_ENTROPY_BITS:
                return "a high-entropy token"
    return None


def mixed(token: str) -> bool:
    """Digits, lower and upper case letters together: long paths and words rarely are."""
    return (
        any(c.isdigit() for c in token)
        and any(c.islower() for c in token)
        and any(c.isupper() for c in token)
    )


def entropy(token: str) -> float:
    """Shannon entropy of `token`, in bits per character."""
    counts = {}
    for ch in token:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def reject(message: str) -> Verdict:
    host.log(host.LogLevel.DEBUG, message)
    return Verdict_Reject(message)
