//! The queues of notifications on their way from upstreams to one client session, or to one
//! `subscriptions/listen` stream. Whoever relays a notification only queues it (a lock, a
//! push, no waiting); a task of the queue's own sends what is queued, one notification at a
//! time, for as long as the queue holds something. An upstream therefore never waits on a
//! client, and a client that reads slowly, or not at all, costs a bounded amount of memory
//! however much its upstreams send:
//!
//! - **progress** (`notifications/progress`): at most [`MAX_WAITING_PROGRESS`] notifications
//!   of each progress token wait (a client that keeps up sees every one); past that the
//!   newest one waiting is replaced by the latest, so the latest always arrives. One below
//!   the one it would replace (rmcp's tasks took it up late) is dropped.
//! - **log messages** (`notifications/message`): at most [`MAX_QUEUED_LOGS`] messages and
//!   [`MAX_QUEUED_LOG_BYTES`] bytes wait; past that they are dropped and counted, and once
//!   the queue has drained the client gets one log message of mcpproxy's own (logger
//!   `mcpproxy`, level `warning` or the level the client asked for if higher) that starts
//!   with "N messages dropped".
//! - **changes** (`list_changed`, `resources/updated`): one of each kind (and resource)
//!   waits; announcing it again while it waits changes nothing.
//!
//! The task judges each log and progress message with the proxy's result guards (the
//! [`RelayGuard`]) right before it sends it: only what is sent is judged, and an upstream's
//! stream is never held up by the guards. A message they withhold is replaced by a line
//! saying so.
//!
//! A queue exists while it holds something or its task is sending; an idle queue is
//! forgotten, and so is one whose client went away (its task ends at the first failed
//! send). Nothing else is buffered on the way: rmcp carries one notification of a queue at a
//! time.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam,
    ProgressNotification, ProgressNotificationParam, ProgressToken, ServerNotification,
};
use rmcp::service::{Peer, RoleServer, SubscriptionSendError, SubscriptionSink};

use super::channel::lock;
use super::relay::RelayTicket;
use super::sessions::{SessionKey, rank};

/// The most log messages waiting for one client session or stream. A client reads them as
/// fast as it can; past this many waiting it is not keeping up, and the rest are dropped
/// (and counted, see the module docs).
pub(super) const MAX_QUEUED_LOGS: usize = 256;

/// The most bytes of log messages (their JSON `data` and `logger`) waiting for one client
/// session or stream: 256 messages of the largest size relayed (16 KiB) would be 4 MiB.
pub(super) const MAX_QUEUED_LOG_BYTES: usize = 1 << 20;

/// The most progress notifications of one progress token (one call) waiting; past this the
/// newest waiting is replaced by the latest.
pub(super) const MAX_WAITING_PROGRESS: usize = 8;

/// The logger of mcpproxy's own note about dropped messages.
pub(super) const DROPPED_NOTE_LOGGER: &str = "mcpproxy";

/// At most this many server names are listed in a note about dropped messages.
const MAX_NAMED_SERVERS: usize = 8;

/// Whose queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum QueueKey {
    /// A client session (or a stateless request, which is a session of its own).
    Session(SessionKey),
    /// A `subscriptions/listen` stream, by its registration id.
    Stream(u64),
}

/// Where a queue's notifications go.
#[derive(Clone)]
pub(super) enum Target {
    Session(Peer<RoleServer>),
    Stream(SubscriptionSink),
}

/// Why a queue stopped sending.
#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("the client session is closed")]
    Closed,
}

impl Target {
    fn is_closed(&self) -> bool {
        match self {
            Self::Session(peer) => peer.is_transport_closed(),
            // The stream's registration is dropped with it, which forgets its queue.
            Self::Stream(_) => false,
        }
    }

    async fn send(&self, notification: ServerNotification) -> Result<(), SendError> {
        match self {
            Self::Session(peer) => peer
                .send_notification(notification)
                .await
                .map_err(|_| SendError::Closed),
            Self::Stream(sink) => match sink.send(notification).await {
                Ok(()) => Ok(()),
                // The stream's filter does not take it: skipped, the stream goes on.
                Err(
                    SubscriptionSendError::NotificationNotAccepted(_)
                    | SubscriptionSendError::UnsupportedNotification(_),
                ) => Ok(()),
                Err(_) => Err(SendError::Closed),
            },
        }
    }
}

/// One notification to queue.
pub(super) enum Item {
    /// Progress of a call, already carrying the client's progress token, and the ticket
    /// its call's answer waits for (see `CallGuard::settle`).
    Progress(ProgressNotificationParam, RelayTicket),
    /// A log message of `server`, for a client that wants messages at `min_level` and above.
    Log {
        server: String,
        message: LoggingMessageNotificationParam,
        min_level: LoggingLevel,
    },
    /// A change (`list_changed`, `resources/updated`); anything else is bounded like logs.
    Change(ServerNotification),
}

/// What a change notification is about: one of each waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ChangeKey {
    Tools,
    Prompts,
    Resources,
    Updated(String),
}

fn change_key(notification: &ServerNotification) -> Option<ChangeKey> {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => Some(ChangeKey::Tools),
        ServerNotification::PromptListChangedNotification(_) => Some(ChangeKey::Prompts),
        ServerNotification::ResourceListChangedNotification(_) => Some(ChangeKey::Resources),
        ServerNotification::ResourceUpdatedNotification(n) => {
            Some(ChangeKey::Updated(n.params.uri.clone()))
        }
        _ => None,
    }
}

/// A place in the queue's order.
enum Slot {
    /// Progress, and the ticket its call's answer waits for.
    Progress(ProgressNotificationParam, RelayTicket),
    /// A log message (or another notification bounded like one) and what it counts.
    Bounded {
        notification: ServerNotification,
        bytes: usize,
    },
    Change(ChangeKey, ServerNotification),
}

/// The next notification to send, and the ticket to drop once it is sent.
type Next = (ServerNotification, Option<RelayTicket>);

#[derive(Default)]
struct Queue {
    slots: VecDeque<Slot>,
    /// Slots taken off the front so far: the slot at index `i` is the `popped + i`th ever
    /// queued.
    popped: u64,
    /// Per progress token: the number of the newest of its slots, and how many wait.
    progress: HashMap<ProgressToken, (u64, usize)>,
    changes: HashSet<ChangeKey>,
    /// Log messages waiting, and their bytes.
    logs: usize,
    log_bytes: usize,
    /// Log messages dropped since the last note, and whose.
    dropped: u64,
    dropped_from: BTreeSet<String>,
    /// The least severe level the client takes (for the note).
    note_level: Option<LoggingLevel>,
    /// A task is sending this queue.
    sending: bool,
    /// The client went away: nothing more is queued or sent.
    closed: bool,
}

impl Queue {
    fn add(&mut self, item: Item) {
        match item {
            Item::Progress(params, ticket) => {
                let token = params.progress_token.clone();
                if let Some(&(newest, waiting)) = self.progress.get(&token)
                    && waiting >= MAX_WAITING_PROGRESS
                {
                    // The latest replaces the newest waiting (whose ticket is let go); one
                    // below it came late and is dropped.
                    let index = newest
                        .checked_sub(self.popped)
                        .and_then(|i| usize::try_from(i).ok())
                        .unwrap_or(usize::MAX);
                    if let Some(Slot::Progress(queued, queued_ticket)) = self.slots.get_mut(index)
                        && params.progress.partial_cmp(&queued.progress)
                            != Some(std::cmp::Ordering::Less)
                    {
                        *queued = params;
                        *queued_ticket = ticket;
                    }
                    return;
                }
                let number = self.popped + self.slots.len() as u64;
                let waiting = self.progress.get(&token).map_or(0, |(_, n)| *n);
                self.progress.insert(token, (number, waiting + 1));
                self.slots.push_back(Slot::Progress(params, ticket));
            }
            Item::Log {
                server,
                message,
                min_level,
            } => {
                self.note_level = Some(min_level);
                let bytes = log_bytes(&message);
                let notification = ServerNotification::LoggingMessageNotification(
                    LoggingMessageNotification::new(message),
                );
                self.add_bounded(notification, bytes, Some(server));
            }
            Item::Change(notification) => match change_key(&notification) {
                Some(key) => {
                    if self.changes.insert(key.clone()) {
                        self.slots.push_back(Slot::Change(key, notification));
                    }
                }
                None => {
                    let bytes = serde_json::to_vec(&notification).map_or(0, |b| b.len());
                    self.add_bounded(notification, bytes, None);
                }
            },
        }
    }

    fn add_bounded(
        &mut self,
        notification: ServerNotification,
        bytes: usize,
        from: Option<String>,
    ) {
        if self.logs >= MAX_QUEUED_LOGS || self.log_bytes + bytes > MAX_QUEUED_LOG_BYTES {
            self.dropped += 1;
            if let Some(server) = from
                && self.dropped_from.len() < MAX_NAMED_SERVERS
            {
                self.dropped_from.insert(server);
            }
            return;
        }
        self.logs += 1;
        self.log_bytes += bytes;
        self.slots.push_back(Slot::Bounded {
            notification,
            bytes,
        });
    }

    /// The next notification to send: the oldest waiting, else the note about dropped
    /// messages, else none.
    fn pop(&mut self) -> Option<Next> {
        if self.closed {
            return None;
        }
        if let Some(slot) = self.slots.pop_front() {
            self.popped += 1;
            return Some(match slot {
                Slot::Progress(params, ticket) => {
                    if let Some((_, waiting)) = self.progress.get_mut(&params.progress_token) {
                        *waiting -= 1;
                        if *waiting == 0 {
                            self.progress.remove(&params.progress_token);
                        }
                    }
                    let notification =
                        ServerNotification::ProgressNotification(ProgressNotification::new(params));
                    (notification, Some(ticket))
                }
                Slot::Bounded {
                    notification,
                    bytes,
                } => {
                    self.logs -= 1;
                    self.log_bytes -= bytes;
                    (notification, None)
                }
                Slot::Change(key, notification) => {
                    self.changes.remove(&key);
                    (notification, None)
                }
            });
        }
        self.take_note().map(|note| (note, None))
    }

    /// The note about the messages dropped since the last one, if any were.
    fn take_note(&mut self) -> Option<ServerNotification> {
        if self.dropped == 0 {
            return None;
        }
        let dropped = std::mem::take(&mut self.dropped);
        let servers = std::mem::take(&mut self.dropped_from);
        let level = match self.note_level {
            Some(min) if rank(min) > rank(LoggingLevel::Warning) => min,
            _ => LoggingLevel::Warning,
        };
        let from = match servers.len() {
            0 => String::new(),
            1 => format!(" from server {}", quoted(&servers)),
            _ => format!(" from servers {}", quoted(&servers)),
        };
        let text = format!(
            "{dropped} messages dropped: upstream log messages{from} came faster than this \
             client read them; mcpproxy keeps at most {MAX_QUEUED_LOGS} waiting for a session \
             and drops the rest"
        );
        let mut message = LoggingMessageNotificationParam::new(level, text.into());
        message.logger = Some(DROPPED_NOTE_LOGGER.to_owned());
        Some(ServerNotification::LoggingMessageNotification(
            LoggingMessageNotification::new(message),
        ))
    }

    fn is_idle(&self) -> bool {
        self.slots.is_empty() && self.dropped == 0
    }

    /// Forgets everything waiting (letting the tickets go); nothing more is taken.
    fn close(&mut self) {
        self.closed = true;
        self.slots.clear();
        self.progress.clear();
        self.changes.clear();
        self.logs = 0;
        self.log_bytes = 0;
        self.dropped = 0;
    }
}

fn quoted(servers: &BTreeSet<String>) -> String {
    servers
        .iter()
        .map(|s| format!("'{}'", mcpproxy_support::quote(s)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a log message counts against [`MAX_QUEUED_LOG_BYTES`]: its `data` as JSON and its
/// logger name, without copying either.
fn log_bytes(message: &LoggingMessageNotificationParam) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, &message.data);
    count.0 + message.logger.as_ref().map_or(0, String::len)
}

struct Outbox {
    target: Target,
    queue: Mutex<Queue>,
}

/// Every queue, by whose it is.
#[derive(Default)]
pub(super) struct Outboxes {
    by_key: Mutex<HashMap<QueueKey, Arc<Outbox>>>,
    /// The proxy's result guards, run over log and progress messages as they are sent.
    pub(super) relay_guard: OnceLock<Arc<dyn super::asking::RelayGuard>>,
}

impl Outboxes {
    /// Queues `item` for `key` (made with `target` if it has no queue yet), and starts the
    /// queue's task if none is sending. Dropped at once when the client is gone.
    pub(super) fn push(
        self: &Arc<Self>,
        key: QueueKey,
        target: impl FnOnce() -> Target,
        item: Item,
    ) {
        let mut by_key = lock(&self.by_key);
        let outbox = match by_key.get(&key) {
            Some(outbox) => outbox.clone(),
            None => {
                let target = target();
                if target.is_closed() {
                    return;
                }
                let outbox = Arc::new(Outbox {
                    target,
                    queue: Mutex::new(Queue::default()),
                });
                by_key.insert(key, outbox.clone());
                outbox
            }
        };
        let start = {
            let mut queue = lock(&outbox.queue);
            if queue.closed {
                return;
            }
            queue.add(item);
            let start = !queue.sending && !queue.is_idle();
            queue.sending |= start;
            start
        };
        drop(by_key);
        if !start {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(send_all(self.clone(), key, outbox));
            }
            // No runtime to send from (never the case while serving): nothing is kept.
            Err(_) => self.forget(key),
        }
    }

    /// Forgets the queue of `key` (its client is gone): what waits is dropped, its task ends.
    pub(super) fn forget(&self, key: QueueKey) {
        let removed = lock(&self.by_key).remove(&key);
        if let Some(outbox) = removed {
            lock(&outbox.queue).close();
        }
    }

    /// Queues that exist (holding something or sending).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.by_key).len()
    }
}

/// The task of one queue: sends what it holds, one notification at a time, and ends (the
/// queue forgotten) when it is empty or its client is gone.
async fn send_all(outboxes: Arc<Outboxes>, key: QueueKey, outbox: Arc<Outbox>) {
    loop {
        let next = lock(&outbox.queue).pop();
        let (notification, ticket) = match next {
            Some(next) => next,
            None => {
                // Looked at again under the map's lock, which every push holds while it
                // queues: a push either came before (and is sent now) or finds no task and
                // starts one.
                let mut by_key = lock(&outboxes.by_key);
                let mut queue = lock(&outbox.queue);
                match queue.pop() {
                    Some(next) => next,
                    None => {
                        queue.sending = false;
                        if by_key.get(&key).is_some_and(|o| Arc::ptr_eq(o, &outbox)) {
                            by_key.remove(&key);
                        }
                        return;
                    }
                }
            }
        };
        let notification = match outboxes.relay_guard.get() {
            Some(guard) => guarded(guard.as_ref(), notification).await,
            None => notification,
        };
        let sent = outbox.target.send(notification).await;
        drop(ticket);
        if let Err(e) = sent {
            tracing::debug!(?key, "notifications not relayed: {e}");
            let mut by_key = lock(&outboxes.by_key);
            lock(&outbox.queue).close();
            if by_key.get(&key).is_some_and(|o| Arc::ptr_eq(o, &outbox)) {
                by_key.remove(&key);
            }
            return;
        }
    }
}

/// `notification` with the upstream's words in it (a log message's logger and data, a
/// progress message) judged by `guard`; what it withholds is replaced by a line saying so.
async fn guarded(
    guard: &dyn super::asking::RelayGuard,
    notification: ServerNotification,
) -> ServerNotification {
    match notification {
        ServerNotification::LoggingMessageNotification(mut log) => {
            let params = &mut log.params;
            let logger = params.logger.take().unwrap_or_default();
            // The logger is `server` or `server:logger` (the handler tagged it).
            let server = logger.split(':').next().unwrap_or_default().to_owned();
            let data = std::mem::take(&mut params.data);
            let values = vec![serde_json::Value::String(logger), data];
            match guard.guard(&server, "notifications/message", values).await {
                Some(values) => {
                    let mut values = values.into_iter();
                    params.logger = values.next().and_then(|v| v.as_str().map(str::to_owned));
                    params.data = values.next().unwrap_or_default();
                }
                None => {
                    params.logger = Some(server.clone());
                    let what = format!("log message from server '{server}'");
                    params.data = serde_json::Value::String(withheld_text(&what));
                }
            }
            ServerNotification::LoggingMessageNotification(log)
        }
        ServerNotification::ProgressNotification(mut progress) => {
            if let Some(message) = progress.params.message.take() {
                let values = vec![serde_json::Value::String(message)];
                progress.params.message = Some(
                    match guard
                        .guard("", "notifications/progress", values)
                        .await
                        .as_deref()
                    {
                        Some([serde_json::Value::String(message)]) => message.clone(),
                        _ => withheld_text("progress message"),
                    },
                );
            }
            ServerNotification::ProgressNotification(progress)
        }
        other => other,
    }
}

/// What a client reads instead of a log or progress message the result guards withheld.
fn withheld_text(what: &str) -> String {
    format!("(a {what} was withheld by the result guards; `mcpproxy serve` logs why)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(n: usize, size: usize) -> Item {
        Item::Log {
            server: "fx".into(),
            message: LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                format!("{n:06} {}", "x".repeat(size)).into(),
            ),
            min_level: LoggingLevel::Debug,
        }
    }

    fn drain(queue: &mut Queue) -> Vec<ServerNotification> {
        std::iter::from_fn(|| queue.pop().map(|(n, _)| n)).collect()
    }

    fn log_text(n: &ServerNotification) -> Option<(&str, String)> {
        match n {
            ServerNotification::LoggingMessageNotification(n) => Some((
                n.params.logger.as_deref().unwrap_or_default(),
                n.params.data.as_str().unwrap_or_default().to_owned(),
            )),
            _ => None,
        }
    }

    #[test]
    fn logs_past_the_cap_are_dropped_with_one_note_once_drained() {
        let mut queue = Queue::default();
        for n in 0..1000 {
            queue.add(log(n, 10));
        }
        assert_eq!(queue.logs, MAX_QUEUED_LOGS);
        let sent = drain(&mut queue);
        assert_eq!(
            sent.len(),
            MAX_QUEUED_LOGS + 1,
            "the kept ones and one note"
        );
        // The oldest were kept, in order.
        let (_, first) = log_text(&sent[0]).unwrap();
        assert!(first.starts_with("000000 "), "{first}");
        let (_, last) = log_text(&sent[MAX_QUEUED_LOGS - 1]).unwrap();
        assert!(last.starts_with("000255 "), "{last}");
        let (logger, note) = log_text(&sent[MAX_QUEUED_LOGS]).unwrap();
        assert_eq!(logger, DROPPED_NOTE_LOGGER);
        assert!(
            note.starts_with(&format!("{} messages dropped", 1000 - MAX_QUEUED_LOGS)),
            "{note}"
        );
        assert!(note.contains("from server 'fx'"), "{note}");
        match &sent[MAX_QUEUED_LOGS] {
            ServerNotification::LoggingMessageNotification(n) => {
                assert_eq!(n.params.level, LoggingLevel::Warning);
            }
            other => panic!("{other:?}"),
        }
        assert!(queue.is_idle());
        assert!(queue.pop().is_none(), "one note, not one per drain");
    }

    #[test]
    fn log_bytes_are_capped_too() {
        let mut queue = Queue::default();
        // 64 KiB each: 16 fit in 1 MiB (with their quotes and numbers, 15).
        for n in 0..40 {
            queue.add(log(n, 64 << 10));
        }
        assert!(queue.log_bytes <= MAX_QUEUED_LOG_BYTES);
        assert_eq!(queue.logs, 15);
        assert_eq!(queue.dropped, 25);
        drain(&mut queue);
        assert_eq!((queue.logs, queue.log_bytes), (0, 0));
    }

    #[test]
    fn the_note_is_never_below_the_level_the_client_asked_for() {
        let mut queue = Queue::default();
        for n in 0..=MAX_QUEUED_LOGS {
            queue.add(Item::Log {
                server: "fx".into(),
                message: LoggingMessageNotificationParam::new(LoggingLevel::Error, n.into()),
                min_level: LoggingLevel::Error,
            });
        }
        let note = drain(&mut queue).pop().unwrap();
        match note {
            ServerNotification::LoggingMessageNotification(n) => {
                assert_eq!(n.params.level, LoggingLevel::Error);
                assert_eq!(n.params.logger.as_deref(), Some(DROPPED_NOTE_LOGGER));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn changes_wait_once_each() {
        let mut queue = Queue::default();
        for _ in 0..100 {
            queue.add(Item::Change(
                ServerNotification::ToolListChangedNotification(Default::default()),
            ));
            for uri in ["file:///a", "file:///b"] {
                queue.add(Item::Change(
                    ServerNotification::ResourceUpdatedNotification(
                        rmcp::model::ResourceUpdatedNotification::new(
                            rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                        ),
                    ),
                ));
            }
        }
        assert_eq!(drain(&mut queue).len(), 3);
        // Once sent, the next announcement waits again.
        queue.add(Item::Change(
            ServerNotification::ToolListChangedNotification(Default::default()),
        ));
        assert_eq!(drain(&mut queue).len(), 1);
    }

    #[test]
    fn a_closed_queue_takes_and_gives_nothing() {
        let mut queue = Queue::default();
        queue.add(log(1, 1));
        queue.close();
        assert!(queue.pop().is_none());
        assert!(queue.is_idle());
    }
}
