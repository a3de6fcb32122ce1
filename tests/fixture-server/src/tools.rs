//! The fixture's tool table and the handlers behind it.
//!
//! The built-in tools are declared once in [`BUILTINS`] (name, description,
//! annotations, `_meta`, parameters) and listed in that order; tools added at
//! run time by `add_tool` follow them. All state is shared by every session.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolResult, ContentBlock, JsonObject, MetaObject, ProgressNotificationParam, Tool,
        ToolAnnotations,
    },
    service::RequestContext,
};
// Logging is deprecated by SEP-2577 (2026-07-28); `flood` sends log messages as servers of
// earlier versions do.
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::overrides::Overrides;

/// The JSON type of one tool parameter.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Integer,
}

/// One required parameter of a built-in tool.
struct Param {
    name: &'static str,
    kind: Kind,
    description: &'static str,
}

/// The declaration of one built-in tool.
struct Spec {
    name: &'static str,
    description: &'static str,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    safety_class: Option<&'static str>,
    params: &'static [Param],
}

impl Spec {
    const fn plain(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            description,
            read_only: None,
            destructive: None,
            idempotent: None,
            safety_class: None,
            params: &[],
        }
    }

    const fn read_only(mut self, value: bool) -> Self {
        self.read_only = Some(value);
        self
    }

    const fn destructive(mut self, value: bool) -> Self {
        self.destructive = Some(value);
        self
    }

    const fn idempotent(mut self, value: bool) -> Self {
        self.idempotent = Some(value);
        self
    }

    const fn safety_class(mut self, value: &'static str) -> Self {
        self.safety_class = Some(value);
        self
    }

    const fn params(mut self, params: &'static [Param]) -> Self {
        self.params = params;
        self
    }

    fn to_tool(&self) -> Tool {
        let mut tool = Tool::new(self.name, self.description, input_schema(self.params));
        if self.read_only.is_some() || self.destructive.is_some() || self.idempotent.is_some() {
            let mut annotations = ToolAnnotations::new();
            if let Some(value) = self.read_only {
                annotations = annotations.read_only(value);
            }
            if let Some(value) = self.destructive {
                annotations = annotations.destructive(value);
            }
            if let Some(value) = self.idempotent {
                annotations = annotations.idempotent(value);
            }
            tool = tool.annotate(annotations);
        }
        if let Some(class) = self.safety_class {
            let mut meta = MetaObject::new();
            meta.insert("safety_class".into(), Value::from(class));
            tool = tool.with_meta(meta);
        }
        tool
    }
}

const fn string(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        kind: Kind::String,
        description,
    }
}

const ID: Param = string("id", "Identifier of the target object");

/// Every built-in tool, in `tools/list` order.
const BUILTINS: &[Spec] = &[
    Spec::plain("get_status", "Report that the fixture server is up").read_only(true),
    Spec::plain("echo", "Return the given text unchanged")
        .read_only(true)
        .idempotent(true)
        .params(&[string("text", "Text to echo back")]),
    Spec::plain("update_note", "Create or replace an in-memory note")
        .read_only(false)
        .destructive(false)
        .params(&[ID, string("text", "New note text")]),
    Spec::plain("delete_note", "Delete an in-memory note")
        .destructive(true)
        .params(&[ID]),
    Spec::plain(
        "both_hints",
        "Carry contradictory read-only and destructive hints",
    )
    .read_only(true)
    .destructive(true),
    Spec::plain("list_items", "List the fixture's items"),
    Spec::plain("delete_item", "Delete an item").params(&[ID]),
    Spec::plain("run_job", "Run a named job").params(&[string("job", "Name of the job to run")]),
    Spec::plain("mystery_tool", "Do something unspecified"),
    Spec::plain("frobnicate", "Frobnicate the widgets").safety_class("read-only"),
    Spec::plain("wipe_cache", "Wipe the cache").safety_class("dangerous"),
    Spec::plain("fail", "Always return a tool-level error").read_only(true),
    Spec::plain("slow", "Sleep for the given number of milliseconds")
        .read_only(true)
        .params(&[Param {
            name: "ms",
            kind: Kind::Integer,
            description: "How long to sleep, in milliseconds",
        }]),
    Spec::plain(
        "add_tool",
        "Add a dynamic tool and announce the list change",
    )
    .params(&[string("name", "Name of the tool to add")]),
    Spec::plain(
        "announce_tools_changed",
        "Send notifications/tools/list_changed without changing anything",
    ),
    Spec::plain(
        "flood",
        "Send `count` notifications of `bytes` bytes each during the call, whatever the client \
         asked for: log messages (`kind` log, level info, logger flood) or progress for the \
         request's token (`kind` progress); then write `count` to `done_file` and answer",
    )
    .read_only(true)
    .params(&[
        Param {
            name: "count",
            kind: Kind::Integer,
            description: "How many notifications to send",
        },
        Param {
            name: "bytes",
            kind: Kind::Integer,
            description: "Filler bytes in each (log data, progress message)",
        },
        string("kind", "log or progress"),
        string(
            "done_file",
            "A file to write once every notification is sent",
        ),
    ]),
];

/// `{"type":"object","properties":{...},"required":[...]}` for `params`.
fn input_schema(params: &[Param]) -> JsonObject {
    let properties: JsonObject = params
        .iter()
        .map(|param| {
            let kind = match param.kind {
                Kind::String => "string",
                Kind::Integer => "integer",
            };
            let schema = json!({ "type": kind, "description": param.description });
            (param.name.to_owned(), schema)
        })
        .collect();
    let required: Vec<&str> = params.iter().map(|param| param.name).collect();
    let mut schema = JsonObject::new();
    schema.insert("type".into(), Value::from("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::from(required));
    }
    schema
}

fn dynamic_tool(name: &str) -> Tool {
    Tool::new(
        name.to_owned(),
        format!("Dynamically added tool {name}"),
        input_schema(&[]),
    )
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// Deserialize `arguments` into the tool's argument type, or `invalid_params`.
fn parse<T: DeserializeOwned>(tool: &str, arguments: &JsonObject) -> Result<T, McpError> {
    serde_json::from_value(Value::Object(arguments.clone())).map_err(|error| {
        McpError::invalid_params(
            format!("invalid arguments for tool `{tool}`: {error}"),
            None,
        )
    })
}

#[derive(Deserialize)]
struct TextArgs {
    text: String,
}

#[derive(Deserialize)]
struct NoteArgs {
    id: String,
    text: String,
}

#[derive(Deserialize)]
struct IdArgs {
    id: String,
}

#[derive(Deserialize)]
struct JobArgs {
    job: String,
}

#[derive(Deserialize)]
struct SlowArgs {
    ms: u64,
}

#[derive(Deserialize)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize)]
struct FloodArgs {
    count: u64,
    bytes: usize,
    kind: String,
    done_file: PathBuf,
}

/// The tool set and its state, shared by every session of one server process.
#[derive(Debug)]
pub struct Tools {
    server_name: String,
    notes: Mutex<HashMap<String, String>>,
    dynamic: RwLock<Vec<String>>,
    /// The `--tool-overrides` file, re-read whenever a definition is produced.
    overrides: Option<PathBuf>,
}

impl Tools {
    /// A fresh tool set that reports `server_name` from `get_status` and
    /// applies the tool overrides in the file `overrides`, if given.
    pub fn new(server_name: String, overrides: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            server_name,
            notes: Mutex::new(HashMap::new()),
            dynamic: RwLock::new(Vec::new()),
            overrides,
        })
    }

    /// The overrides as the file holds them right now.
    fn overrides(&self) -> Overrides {
        Overrides::load(self.overrides.as_deref())
    }

    fn dynamic_names(&self) -> Vec<String> {
        mcpproxy_support::read_lock(&self.dynamic).clone()
    }

    /// Every tool: the built-ins in table order, then the dynamic ones in
    /// the order they were added, each with its current override applied.
    pub fn list(&self) -> Vec<Tool> {
        let overrides = self.overrides();
        BUILTINS
            .iter()
            .map(Spec::to_tool)
            .chain(self.dynamic_names().iter().map(|name| dynamic_tool(name)))
            .map(|tool| overrides.apply(tool))
            .collect()
    }

    /// The definition of the tool called `name`, if there is one, with its
    /// current override applied.
    pub fn get(&self, name: &str) -> Option<Tool> {
        let tool = match BUILTINS.iter().find(|spec| spec.name == name) {
            Some(spec) => spec.to_tool(),
            None => self
                .dynamic_names()
                .iter()
                .any(|dynamic| dynamic == name)
                .then(|| dynamic_tool(name))?,
        };
        Some(self.overrides().apply(tool))
    }

    /// Run the tool `name` with `arguments`.
    pub async fn call(
        &self,
        name: &str,
        arguments: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        Ok(match name {
            "get_status" => {
                let mut result = text("ok");
                result.structured_content =
                    Some(json!({ "status": "ok", "server": self.server_name }));
                result
            }
            // MCP_FIXTURE_ECHO_REPEAT=N answers with the text N times (a huge reply);
            // MCP_FIXTURE_ECHO_PROGRESS=N sends N progress notifications for the request's
            // progress token first, the last one right before the answer.
            "echo" => {
                let echoed = parse::<TextArgs>(name, arguments)?.text;
                let steps: u32 = std::env::var("MCP_FIXTURE_ECHO_PROGRESS")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=steps {
                        let progress = ProgressNotificationParam::new(token.clone(), step.into())
                            .with_total(steps.into());
                        if let Err(error) = context.peer.notify_progress(progress).await {
                            tracing::warn!(%error, "could not send notifications/progress");
                        }
                    }
                }
                let repeat = std::env::var("MCP_FIXTURE_ECHO_REPEAT")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                text(echoed.repeat(repeat))
            }
            "update_note" => {
                let NoteArgs { id, text: note } = parse(name, arguments)?;
                self.notes_mut().insert(id.clone(), note);
                text(format!("updated {id}"))
            }
            "delete_note" => {
                let IdArgs { id } = parse(name, arguments)?;
                self.notes_mut().remove(&id);
                text(format!("deleted note {id}"))
            }
            "both_hints" => text("both"),
            "list_items" => text("item-1, item-2"),
            "delete_item" => text(format!(
                "deleted item {}",
                parse::<IdArgs>(name, arguments)?.id
            )),
            "run_job" => text(format!("ran {}", parse::<JobArgs>(name, arguments)?.job)),
            "mystery_tool" => text("mystery"),
            "frobnicate" => text("frobnicated"),
            "wipe_cache" => text("wiped"),
            "fail" => CallToolResult::error(vec![ContentBlock::text("fixture failure")]),
            "slow" => {
                let SlowArgs { ms } = parse(name, arguments)?;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("slept {ms}")),
                    () = context.ct.cancelled() => {
                        return Err(McpError::internal_error("slow: request cancelled", None));
                    }
                }
            }
            "add_tool" => {
                let NameArgs { name: added } = parse(name, arguments)?;
                self.add_dynamic(&added)?;
                if let Err(error) = context.peer.notify_tool_list_changed().await {
                    tracing::warn!(%error, "could not send notifications/tools/list_changed");
                }
                text(format!("added {added}"))
            }
            #[allow(deprecated)]
            "flood" => {
                let FloodArgs {
                    count,
                    bytes,
                    kind,
                    done_file,
                } = parse(name, arguments)?;
                let filler = "x".repeat(bytes);
                match kind.as_str() {
                    "log" => {
                        for n in 0..count {
                            let mut log = LoggingMessageNotificationParam::new(
                                LoggingLevel::Info,
                                Value::from(format!("{n:07} {filler}")),
                            );
                            log.logger = Some("flood".into());
                            if let Err(error) = context.peer.notify_logging_message(log).await {
                                tracing::warn!(%error, "could not send notifications/message");
                                break;
                            }
                        }
                    }
                    "progress" => {
                        let token = context.meta.get_progress_token().ok_or_else(|| {
                            McpError::invalid_params(
                                "flood with kind progress needs a progressToken in _meta",
                                None,
                            )
                        })?;
                        for n in 1..=count {
                            let progress = ProgressNotificationParam::new(token.clone(), n as f64)
                                .with_total(count as f64)
                                .with_message(filler.clone());
                            if let Err(error) = context.peer.notify_progress(progress).await {
                                tracing::warn!(%error, "could not send notifications/progress");
                                break;
                            }
                        }
                    }
                    other => {
                        return Err(McpError::invalid_params(
                            format!(
                                "invalid arguments for tool `flood`: kind `{other}` is neither log nor progress"
                            ),
                            None,
                        ));
                    }
                }
                std::fs::write(&done_file, count.to_string()).map_err(|error| {
                    McpError::internal_error(
                        format!("flood: cannot write {}: {error}", done_file.display()),
                        None,
                    )
                })?;
                text(format!("sent {count}"))
            }
            "announce_tools_changed" => {
                if let Err(error) = context.peer.notify_tool_list_changed().await {
                    tracing::warn!(%error, "could not send notifications/tools/list_changed");
                }
                text("announced")
            }
            other if self.dynamic_names().iter().any(|dynamic| dynamic == other) => {
                text(format!("dynamic {other}"))
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("tool not found: {other}"),
                    None,
                ));
            }
        })
    }

    fn notes_mut(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        mcpproxy_support::lock(&self.notes)
    }

    /// Register a dynamic tool; adding an existing dynamic name is a no-op.
    fn add_dynamic(&self, name: &str) -> Result<(), McpError> {
        if name.is_empty() {
            return Err(McpError::invalid_params(
                "invalid arguments for tool `add_tool`: `name` must not be empty",
                None,
            ));
        }
        if BUILTINS.iter().any(|spec| spec.name == name) {
            return Err(McpError::invalid_params(
                format!("invalid arguments for tool `add_tool`: `{name}` is a built-in tool"),
                None,
            ));
        }
        let mut dynamic = mcpproxy_support::write_lock(&self.dynamic);
        if !dynamic.iter().any(|existing| existing == name) {
            dynamic.push(name.to_owned());
        }
        Ok(())
    }
}
