//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) carried through the
//! proxy. A call that an upstream answers with a task (`resultType: "task"`) was judged and
//! recorded like any call; the task's id is remembered with the server that made it and
//! the client session that asked, so `tasks/get`, `tasks/update` and `tasks/cancel` reach
//! that server, and nobody else's tasks. The call's record stays `pending` (with the task
//! id in its details) until a `tasks/get` shows the task ended; then it is completed with
//! the outcome, as a call's record is when its result arrives.
//!
//! On the aggregate endpoint a task id carries its server (`server:id`), as prompt names
//! do, so two servers' ids never clash; on a direct endpoint it is the server's own.
//!
//! Bounds: an id is at most [`MAX_TASK_ID_BYTES`] of printable text (a longer or stranger
//! one is refused and the task cancelled), at most [`MAX_TASKS`] tasks are followed at once
//! (past that the oldest is forgotten), and a task is forgotten when its `ttlMs` has passed
//! (after [`LIFETIME_WITHOUT_TTL`] when the server set none).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{
    CancelTaskParams, ClientRequest, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult,
    Request, ServerResult, TaskPayload, UpdateTaskParams,
};
use serde_json::json;

use mcpproxy_activity::{ActivityRecord, Status};
use mcpproxy_policy::Evaluation;
use mcpproxy_upstream::back_channel::{CallOrigin, SessionKey};
use mcpproxy_upstream::{self as upstream, Upstream};

use super::catalog::unexpected;
use super::{CallOutcome, CatalogError, Proxy, Scope};

/// The longest task id accepted from a server.
pub(super) const MAX_TASK_ID_BYTES: usize = 256;
/// How many tasks are followed at once.
pub(super) const MAX_TASKS: usize = 4096;
/// How long a task whose server set no `ttlMs` is followed.
pub(super) const LIFETIME_WITHOUT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest a task is followed, whatever its `ttlMs`.
const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Who may follow a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// The client session that made it.
    Session(SessionKey),
    /// Whoever has its id: a stateless request (2026-07-28 without a session) made it, and
    /// nothing else identifies that client.
    HolderOfId,
}

impl Owner {
    fn of(origin: &CallOrigin) -> Self {
        if origin.stateless {
            Self::HolderOfId
        } else {
            Self::Session(origin.session)
        }
    }

    fn admits(self, origin: &CallOrigin) -> bool {
        match self {
            Self::HolderOfId => true,
            // A stateless request is no session's, whatever key its handler was given.
            Self::Session(key) => !origin.stateless && key == origin.session,
        }
    }
}

/// One task being followed.
struct Route {
    owner: Owner,
    created: Instant,
    expires: Instant,
    /// The call's record, pending until the task ends; `None` once completed.
    pending: Option<(ActivityRecord, Instant)>,
}

/// The tasks being followed, by (server, the server's task id).
#[derive(Default)]
pub(super) struct TaskRoutes {
    routes: Mutex<HashMap<(String, String), Route>>,
}

impl TaskRoutes {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Route>> {
        mcpproxy_support::lock(&self.routes)
    }

    fn insert(&self, key: (String, String), route: Route) {
        let mut routes = self.lock();
        let now = Instant::now();
        if routes.len() >= MAX_TASKS {
            routes.retain(|_, r| r.expires > now);
        }
        if routes.len() >= MAX_TASKS
            && let Some(oldest) = routes
                .iter()
                .min_by_key(|(_, r)| r.created)
                .map(|(k, _)| k.clone())
        {
            tracing::warn!(
                server = %oldest.0,
                "following more than {MAX_TASKS} tasks: forgot the oldest, task {}",
                mcpproxy_support::quote(&oldest.1)
            );
            routes.remove(&oldest);
        }
        routes.insert(key, route);
    }

    /// Whether `origin` may follow the task; forgets it when it has expired.
    fn admits(&self, key: &(String, String), origin: &CallOrigin) -> bool {
        let mut routes = self.lock();
        match routes.get(key) {
            Some(route) if route.expires <= Instant::now() => {
                routes.remove(key);
                false
            }
            Some(route) => route.owner.admits(origin),
            None => false,
        }
    }

    /// Notes what `tasks/get` showed: a new `ttlMs`, and the end of the task, whose
    /// pending record is returned (once).
    fn observed(
        &self,
        key: &(String, String),
        task: &DetailedTask,
    ) -> Option<(ActivityRecord, Instant)> {
        let mut routes = self.lock();
        let route = routes.get_mut(key)?;
        if let Some(ttl) = task.task.ttl_ms {
            route.expires = route.created + Duration::from_millis(ttl).min(MAX_LIFETIME);
        }
        if task.status().is_terminal() {
            route.pending.take()
        } else {
            None
        }
    }
}

/// Why a task id from a server is not passed on, if it is not.
fn check_task_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("an empty task id".into());
    }
    if id.len() > MAX_TASK_ID_BYTES {
        return Err(format!(
            "a task id of {} bytes (mcpproxy accepts at most {MAX_TASK_ID_BYTES})",
            id.len()
        ));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(format!(
            "a task id with the control character U+{:04X}",
            c as u32
        ));
    }
    Ok(())
}

/// The task id a client sees for `id` of `server`.
pub fn shown_task_id(scope: Scope<'_>, server: &str, id: &str) -> String {
    match scope {
        Scope::All => format!("{server}:{id}"),
        Scope::Server(_) => id.to_owned(),
    }
}

/// Which task of which server a client's task id names, or why it names none.
fn resolve(scope: Scope<'_>, id: &str) -> Result<(String, String), CatalogError> {
    match scope {
        Scope::Server(server) => Ok((server.to_owned(), id.to_owned())),
        Scope::All => match id.split_once(':') {
            Some((server, task)) if !server.is_empty() && !task.is_empty() => {
                Ok((server.to_owned(), task.to_owned()))
            }
            _ => Err(unknown_task(id)),
        },
    }
}

fn unknown_task(id: &str) -> CatalogError {
    // No id mcpproxy hands out is longer (the server's name, ':' and the server's id); a
    // longer one is not echoed back.
    let named = if id.len() <= 2 * MAX_TASK_ID_BYTES {
        format!("'{}'", mcpproxy_support::quote(id))
    } else {
        format!("of {} bytes", id.len())
    };
    CatalogError::NotFound(format!(
        "unknown task {named}: no task of that id was started through this session, or it has \
         expired (tasks/get takes the taskId a tools/call answered with)"
    ))
}

impl Proxy {
    /// The outcome of a call the upstream answered with a task: followed and passed on to a
    /// client that declared the tasks extension; otherwise (or with an id mcpproxy does not
    /// pass on) cancelled upstream and answered with an error.
    pub(super) fn task_started(
        &self,
        upstream: &Arc<Upstream>,
        task: CreateTaskResult,
        pending: ActivityRecord,
        started: Instant,
        evaluation: Evaluation,
        origin: Option<&CallOrigin>,
    ) -> CallOutcome {
        let refusal = match origin {
            None => "the server answered with a task, which only an MCP client that declared \
                     the tasks extension can follow; the task was cancelled: call it over MCP"
                .to_owned(),
            Some(origin) if !origin.can_follow_tasks() => {
                "the server answered with a task although the client did not declare the tasks \
                 extension (io.modelcontextprotocol/tasks); the task was cancelled"
                    .to_owned()
            }
            Some(origin) => match check_task_id(&task.task.task_id) {
                Ok(()) => {
                    return self.follow_task(upstream, task, pending, started, evaluation, origin);
                }
                Err(why) => format!(
                    "the server answered with {why}; mcpproxy does not pass it on and \
                     cancelled the task"
                ),
            },
        };
        cancel_quietly(upstream.clone(), task.task.task_id);
        let result = Err(upstream::Error::Call {
            server: upstream.name().to_owned(),
            tool: evaluation.request.tool.name.clone(),
            message: refusal,
        });
        self.journal
            .submit(super::record::completed(pending, &result, started));
        CallOutcome::Called { evaluation, result }
    }

    /// Follows a task the client can follow: its record shows the task id, and the task
    /// is routed from now on.
    fn follow_task(
        &self,
        upstream: &Upstream,
        task: CreateTaskResult,
        pending: ActivityRecord,
        started: Instant,
        evaluation: Evaluation,
        origin: &CallOrigin,
    ) -> CallOutcome {
        let server = upstream.name().to_owned();
        let id = task.task.task_id.clone();
        let mut record = pending;
        record.details = Some(json!({ "task_id": id, "task_status": task.task.status }));
        self.journal.submit(record.clone());
        let now = Instant::now();
        let lifetime = task
            .task
            .ttl_ms
            .map_or(LIFETIME_WITHOUT_TTL, Duration::from_millis)
            .min(MAX_LIFETIME);
        self.tasks.insert(
            (server.clone(), id.clone()),
            Route {
                owner: Owner::of(origin),
                created: now,
                expires: now + lifetime,
                pending: Some((record, started)),
            },
        );
        CallOutcome::Task {
            evaluation,
            server,
            task,
        }
    }

    /// `tasks/get`, from the server that made the task. The first answer that shows the
    /// task ended completes the call's record.
    pub async fn get_task(
        &self,
        scope: Scope<'_>,
        mut params: GetTaskParams,
        origin: &CallOrigin,
    ) -> Result<GetTaskResult, CatalogError> {
        let shown = params.task_id.clone();
        let (upstream, key) = self.task_route(scope, &shown, origin)?;
        params.task_id = key.1.clone();
        params.meta = None;
        let request = ClientRequest::GetTaskRequest(Request::new(params));
        match upstream.request(request, Some(origin)).await? {
            ServerResult::GetTaskResult(mut result) => {
                let observed = self.tasks.observed(&key, &result.task);
                let tool = observed.as_ref().map_or("", |(r, _)| r.tool_name.as_str());
                let guarded = self
                    .guard_task_payload(upstream.name(), tool, &mut result.task.payload)
                    .await;
                if let Some((record, started)) = observed {
                    let mut record = task_ended(record, &result.task, started);
                    guarded.note(&mut record);
                    self.journal.submit(record);
                }
                result.task.task.task_id = shown;
                Ok(result)
            }
            _ => Err(unexpected(&upstream, "tasks/get")),
        }
    }

    /// `tasks/update`: the client's answers to the task's questions, to the server that
    /// made it.
    pub async fn update_task(
        &self,
        scope: Scope<'_>,
        mut params: UpdateTaskParams,
        origin: &CallOrigin,
    ) -> Result<(), CatalogError> {
        let (upstream, key) = self.task_route(scope, &params.task_id, origin)?;
        params.task_id = key.1;
        params.meta = None;
        let request = ClientRequest::UpdateTaskRequest(Request::new(params));
        upstream.request(request, Some(origin)).await?;
        Ok(())
    }

    /// `tasks/cancel`, to the server that made the task.
    pub async fn cancel_task(
        &self,
        scope: Scope<'_>,
        mut params: CancelTaskParams,
        origin: &CallOrigin,
    ) -> Result<(), CatalogError> {
        let (upstream, key) = self.task_route(scope, &params.task_id, origin)?;
        params.task_id = key.1;
        params.meta = None;
        let request = ClientRequest::CancelTaskRequest(Request::new(params));
        upstream.request(request, Some(origin)).await?;
        Ok(())
    }

    /// The server a client's task id leads to, and the key it is followed under; an id
    /// this client did not get (or that expired) is unknown.
    fn task_route(
        &self,
        scope: Scope<'_>,
        id: &str,
        origin: &CallOrigin,
    ) -> Result<(Arc<Upstream>, (String, String)), CatalogError> {
        let key = resolve(scope, id)?;
        if !self.tasks.admits(&key, origin) {
            return Err(unknown_task(id));
        }
        let upstream = self.upstreams.get(&key.0).ok_or_else(|| unknown_task(id))?;
        Ok((upstream, key))
    }
}

/// Cancels a task mcpproxy does not pass on, without waiting or minding the answer.
fn cancel_quietly(upstream: Arc<Upstream>, id: String) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let request = ClientRequest::CancelTaskRequest(Request::new(CancelTaskParams::new(id)));
        if let Err(e) = upstream.request(request, None).await {
            tracing::debug!(server = upstream.name(), "cannot cancel the task: {e}");
        }
    });
}

/// The pending record of a call answered with a task, completed with how the task ended.
fn task_ended(mut record: ActivityRecord, task: &DetailedTask, started: Instant) -> ActivityRecord {
    record.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    record.details = Some(json!({ "task_id": task.task.task_id, "task_status": task.status() }));
    match &task.payload {
        TaskPayload::Completed { result } => {
            record.response_bytes = super::record::json_len(result);
            if result.get("isError").and_then(serde_json::Value::as_bool) == Some(true) {
                record.status = Status::Error;
                record.error_message = first_text(result);
            } else {
                record.status = Status::Success;
            }
        }
        TaskPayload::Failed { error } => {
            record.status = Status::Error;
            record.error_message = Some(
                error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the task failed")
                    .chars()
                    .take(1000)
                    .collect(),
            );
        }
        TaskPayload::Cancelled => {
            record.status = Status::Error;
            record.error_message = Some("the task was cancelled".into());
        }
        _ => {}
    }
    record
}

/// The first text content of a tool result, capped, for the record's error message.
fn first_text(result: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    result
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|c| c.get("text")?.as_str())
        .map(|t| t.chars().take(1000).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_bounded_printable_text() {
        assert!(check_task_id("3f0c9a52-4d7e-4b1a-9a49-7b1c2f0d8e11").is_ok());
        assert!(check_task_id("").is_err());
        assert!(check_task_id(&"x".repeat(MAX_TASK_ID_BYTES)).is_ok());
        let long = check_task_id(&"x".repeat(MAX_TASK_ID_BYTES + 1)).unwrap_err();
        assert!(long.contains("257 bytes"), "{long}");
        let control = check_task_id("a\u{1b}[31m").unwrap_err();
        assert!(control.contains("U+001B"), "{control}");
    }

    #[test]
    fn aggregate_ids_carry_their_server_and_direct_ids_do_not() {
        assert_eq!(shown_task_id(Scope::All, "conf", "t-1"), "conf:t-1");
        assert_eq!(shown_task_id(Scope::Server("conf"), "conf", "t-1"), "t-1");
        assert_eq!(
            resolve(Scope::All, "conf:t:1").unwrap(),
            ("conf".to_owned(), "t:1".to_owned())
        );
        assert_eq!(
            resolve(Scope::Server("conf"), "conf:t").unwrap(),
            ("conf".to_owned(), "conf:t".to_owned())
        );
        for bad in ["t-1", ":t-1", "conf:"] {
            assert!(
                matches!(resolve(Scope::All, bad), Err(CatalogError::NotFound(_))),
                "{bad}"
            );
        }
        let huge = unknown_task(&"x".repeat(1 << 20)).to_string();
        assert!(
            huge.len() < 300,
            "a huge id is not echoed: {} bytes",
            huge.len()
        );
        assert!(huge.contains("of 1048576 bytes"), "{huge}");
    }

    #[test]
    fn the_oldest_task_is_forgotten_past_the_bound() {
        let routes = TaskRoutes::default();
        let now = Instant::now();
        for n in 0..=MAX_TASKS {
            routes.insert(
                ("s".into(), n.to_string()),
                Route {
                    owner: Owner::HolderOfId,
                    created: now + Duration::from_millis(n as u64),
                    expires: now + Duration::from_secs(3600),
                    pending: None,
                },
            );
        }
        let routes = routes.lock();
        assert_eq!(routes.len(), MAX_TASKS);
        assert!(!routes.contains_key(&("s".into(), "0".into())));
        assert!(routes.contains_key(&("s".into(), MAX_TASKS.to_string())));
    }
}
