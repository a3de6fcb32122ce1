//! The built-in tools mcpproxy exposes to MCP clients: `retrieve_tools` and the three
//! `call_tool_*` variants, with descriptions that tell an agent which variant to use
//! (`operation_type` is inferred from the variant; the intent fields are optional).

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use mcpproxy_policy::{CompactJson, DATA_SENSITIVITIES, OperationType};

pub(super) const RETRIEVE_TOOLS: &str = "retrieve_tools";
pub(super) const CODE_EXECUTION: &str = "code_execution";
pub(super) const UPSTREAM_SERVERS: &str = "upstream_servers";
/// The removed legacy tool; calling it gets a message naming the replacements.
pub(super) const LEGACY_CALL_TOOL: &str = "call_tool";

pub const LEGACY_CALL_TOOL_MESSAGE: &str = "Tool 'call_tool' not found. Use call_tool_read, call_tool_write, or call_tool_destructive with matching intent.operation_type. See retrieve_tools for annotations and recommendations.";

/// Usage advice returned with every search.
pub(super) const USAGE_INSTRUCTIONS: &str = "Use call_tool_read for read-only operations, call_tool_write for modifications, call_tool_destructive for deletions. Intent must match tool variant: pick the variant given in each tool's call_with. Pass the tool's name (server:tool) as 'name' and its arguments as 'args' (an object) or 'args_json' (a JSON string).";

/// Default and maximum `limit` of retrieve_tools.
pub(super) const DEFAULT_LIMIT: usize = 15;
pub(super) const MAX_LIMIT: usize = 100;

/// How many of retrieve_tools' best hits carry their `inputSchema` by default.
pub(super) const TOP_SCHEMAS: usize = 3;
/// A hit scoring under this share of the best hit's score is left out: it shares a common
/// word with the query and little else ("write a file" matched every tool that mentions
/// files, 13 of 14, with their schemas: 14 KB an agent reads for one call).
const RELEVANCE_FLOOR: f32 = 0.4;

/// Which hits of retrieve_tools carry their `inputSchema` (`schemas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Schemas {
    /// The [`TOP_SCHEMAS`] best (the default).
    Top,
    All,
    None,
}

/// retrieve_tools' hits cut by relevance ([`RELEVANCE_FLOOR`]), as JSON, with the schemas
/// `schemas` asks for; a hit without its schema says how to get it.
pub(super) fn trim_hits(hits: Vec<crate::proxy::RetrievedTool>, schemas: Schemas) -> Vec<Value> {
    let best = hits.first().map_or(0.0, |hit| hit.score);
    hits.into_iter()
        .filter(|hit| hit.score >= best * RELEVANCE_FLOOR)
        .enumerate()
        .map(|(rank, mut hit)| {
            let keep = match schemas {
                Schemas::All => true,
                Schemas::Top => rank < TOP_SCHEMAS,
                Schemas::None => false,
            };
            if !keep {
                // Not turned into JSON values only to be removed below.
                hit.input_schema = CompactJson::null();
                hit.output_schema = None;
            }
            let mut value = serde_json::to_value(&hit).unwrap_or(Value::Null);
            if !keep && let Some(fields) = value.as_object_mut() {
                fields.remove("inputSchema");
                fields.remove("outputSchema");
                fields.insert(
                    "schema".into(),
                    json!("left out: retrieve_tools with \"schemas\": \"all\" (or a query naming this tool) gives it"),
                );
            }
            value
        })
        .collect()
}

fn schema(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

/// Every built-in tool, in the order `tools/list` shows them; `upstream_servers` last when
/// `management` is offered.
pub fn builtin_tools_with(management: bool) -> Vec<Tool> {
    let mut tools = builtin_tools();
    if management {
        tools.push(upstream_servers_tool());
    }
    tools
}

/// The tool that lists and changes the upstream servers. Annotated destructive, so IDEs ask
/// before each use: adding a server starts a program.
fn upstream_servers_tool() -> Tool {
    let json_string = |what: &str| json!({"type": "string", "description": format!("{what} as a JSON string (\"null\" removes it in update/patch)")});
    Tool::new(
        UPSTREAM_SERVERS,
        "Manage upstream MCP servers. Operations: list (servers with health), add (a new server; always quarantined until a person approves it), remove, update and patch (deep merge: only the fields given change; objects such as env and headers merge, arrays such as args are replaced, null removes a field), tail_log (a server's recent stderr lines). Changes are written to mcp_config.json and applied at once.",
        schema(json!({
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": ["list", "add", "remove", "update", "patch", "tail_log"]},
                "name": {"type": "string", "description": "The server's name (letters, digits, - and _); required except for list"},
                "command": {"type": "string", "description": "add: the program of a stdio server"},
                "args": {"type": "array", "items": {"type": "string"}, "description": "The program's arguments"},
                "args_json": json_string("args"),
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables of a stdio server"},
                "env_json": json_string("env"),
                "working_dir": {"type": "string"},
                "isolation": {"type": "object", "description": "The sandbox of a stdio server: enabled, network (\"none\" or \"all\"), read, write, env_passthrough, memory_mb, max_processes, open_files, cpu_seconds, required. A change makes the server wait for a person's approval."},
                "isolation_json": json_string("isolation"),
                "url": {"type": "string", "description": "add: the URL of a streamable-HTTP server"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "headers_json": json_string("headers"),
                "enabled": {"type": "boolean"},
                "tool_call_timeout_ms": {"type": "integer", "minimum": 1},
                "lines": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50, "description": "tail_log: how many lines"}
            },
            "required": ["operation"]
        })),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(false),
    )
}

/// Every built-in tool but `upstream_servers`, in the order `tools/list` shows them.
pub(super) fn builtin_tools() -> Vec<Tool> {
    let mut tools = vec![Tool::new(
        RETRIEVE_TOOLS,
        "Search for tools across all upstream servers. Results include annotations (readOnlyHint, destructiveHint) and recommended call_with variant. Use call_tool_read for read-only operations, call_tool_write for modifications, call_tool_destructive for deletions. Intent must match tool variant.",
        schema(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in words (e.g. 'list github repositories')"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT, "description": "How many tools to return at most (hits far less relevant than the best are left out)"},
                "schemas": {"type": "string", "enum": ["top", "all", "none"], "default": "top", "description": "Which hits carry their inputSchema: the 3 best (top), every one (all) or none"}
            },
            "required": ["query"]
        })),
    )
    .annotate(ToolAnnotations::new().read_only(true).destructive(false).open_world(false))];
    for variant in OperationType::ALL {
        tools.push(call_variant_tool(variant));
    }
    tools
}

fn call_variant_tool(variant: OperationType) -> Tool {
    let description = match variant {
        OperationType::Read => {
            "Execute a read-only tool discovered via retrieve_tools. Use for operations that query data without modifying state. intent.operation_type, if given, must be 'read'. Will be rejected if server marks tool as destructive."
        }
        OperationType::Write => {
            "Execute a state-modifying tool discovered via retrieve_tools. Use for operations that create or update resources. intent.operation_type, if given, must be 'write'. Will be rejected if server marks tool as destructive."
        }
        OperationType::Destructive => {
            "Execute a destructive tool discovered via retrieve_tools. Use for operations that delete or permanently modify resources. intent.operation_type, if given, must be 'destructive'. Most permissive - allowed regardless of server annotations."
        }
    };
    let annotations = match variant {
        OperationType::Read => ToolAnnotations::new().read_only(true).destructive(false),
        OperationType::Write => ToolAnnotations::new().read_only(false).destructive(false),
        OperationType::Destructive => ToolAnnotations::new().read_only(false).destructive(true),
    }
    .open_world(true);
    Tool::new(
        variant.tool_name(),
        description,
        schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool to call, as server:tool (from retrieve_tools)"},
                "args": {"type": "object", "description": "The tool's arguments as an object"},
                "args_json": {"type": "string", "description": "The tool's arguments as a JSON string (alternative to args)"},
                "intent": {
                    "type": "object",
                    "description": "Optional intent declaration",
                    "properties": {
                        "operation_type": {"type": "string", "enum": ["read", "write", "destructive"], "description": format!("Must be '{}' if given", variant.as_str())},
                        "data_sensitivity": {"type": "string", "enum": DATA_SENSITIVITIES},
                        "reason": {"type": "string", "maxLength": 1000}
                    }
                },
                "intent_data_sensitivity": {"type": "string", "enum": DATA_SENSITIVITIES, "description": "Data classification for the audit trail"},
                "intent_reason": {"type": "string", "maxLength": 1000, "description": "Why this call is made, for the audit trail"}
            },
            "required": ["name"]
        })),
    )
    .annotate(annotations)
}

/// `code_execution`, offered when the config enables it. Annotated as able to change things
/// (a script with a write or destructive ceiling can), so IDEs ask before each run.
pub(super) fn code_execution_tool() -> Tool {
    Tool::new(
        CODE_EXECUTION,
        "Execute JavaScript code to orchestrate multiple tools in one step, keeping intermediate results out of the conversation. `code` is a function body whose `return` value (JSON-serialisable) is the result; the global `input` holds the `input` parameter. In the script, call_tool(\"server:tool\", args) returns {ok: true, result} (result is the tool's MCP result: content, structuredContent) or {ok: false, error}, synchronously; console.log lines come back with the result. Every call passes the proxy's policy with intent.operation_type as its ceiling (default read: write and destructive tools are refused). No files, network or timers: only call_tool.",
        schema(json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "A JavaScript function body, e.g. \"const r = call_tool('fs:read_file', {path: input.path}); return r.ok ? r.result.content[0].text.length : r.error;\""},
                "input": {"description": "Any JSON value: the script's global `input`"},
                "intent": {
                    "type": "object",
                    "description": "The ceiling of every call the script makes, and what the audit trail records",
                    "properties": {
                        "operation_type": {"type": "string", "enum": ["read", "write", "destructive"], "default": "read"},
                        "data_sensitivity": {"type": "string", "enum": DATA_SENSITIVITIES},
                        "reason": {"type": "string", "maxLength": 1000}
                    }
                },
                "options": {
                    "type": "object",
                    "description": "Limits of this run; each is capped by the proxy's configuration",
                    "properties": {
                        "timeout_ms": {"type": "integer", "minimum": 1},
                        "max_tool_calls": {"type": "integer", "minimum": 0},
                        "allowed_servers": {"type": "array", "items": {"type": "string"}, "description": "Only these servers may be called"}
                    }
                }
            },
            "required": ["code"]
        })),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    )
}
