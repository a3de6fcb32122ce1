//! Tests of relaying: the `_meta` passed on, settling a call behind its progress, and the
//! bounds of what waits for a client that does not read.

use std::time::Duration;

use rmcp::model::{LoggingLevel, RequestId};
use rmcp::service::{Peer, RoleServer};

use super::*;
use crate::back_channel::outbox::{DROPPED_NOTE_LOGGER, MAX_QUEUED_LOGS, MAX_WAITING_PROGRESS};
use crate::back_channel::sessions::SessionKey;
use crate::back_channel::test_support::{message, origin, session, token, unread_session};

#[test]
fn forwardable_meta_drops_the_token_and_session_keys_and_caps_size() {
    let mut meta = RequestMetaObject::default();
    meta.0.insert("progressToken".into(), 7.into());
    meta.0.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        "2026-07-28".into(),
    );
    meta.0.insert("traceparent".into(), "00-abc".into());
    let kept = forwardable_meta(&meta).expect("traceparent stays");
    assert_eq!(kept.0.len(), 1);
    assert_eq!(kept.0["traceparent"], "00-abc");

    let mut only_token = RequestMetaObject::default();
    only_token.0.insert("progressToken".into(), 1.into());
    assert!(forwardable_meta(&only_token).is_none());

    let mut huge = RequestMetaObject::default();
    huge.0.insert(
        "blob".into(),
        "x".repeat(MAX_FORWARDED_META_BYTES + 1).into(),
    );
    assert!(forwardable_meta(&huge).is_none());
}

/// A back channel with one call of server `fs` in flight (progress token 1).
fn one_call(peer: &Peer<RoleServer>) -> (Arc<BackChannel>, CallGuard) {
    let channel = BackChannel::new();
    let call = channel.register_call(
        "fs",
        RequestId::Number(1),
        token(1),
        origin(SessionKey::new(), peer, 1),
    );
    (channel, call)
}

#[tokio::test]
async fn a_counted_settle_waits_for_that_many_relays_to_start_and_end() {
    let (peer, _server, _client) = session().await;
    let (channel, call) = one_call(&peer);
    call.settle_counted(0).await;
    let relaying = channel.clone();
    let relays = tokio::spawn(async move {
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let (_, ticket) = relaying.origin_by_progress("fs", &token(1)).unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
            drop(ticket);
        }
    });
    call.settle_counted(2).await;
    assert_eq!(call.relays.started.load(Ordering::Acquire), 2);
    assert_eq!(call.relays.active.load(Ordering::Acquire), 0);
    relays.await.unwrap();
}

#[tokio::test]
async fn a_counted_settle_gives_up_on_a_notification_never_relayed() {
    let (peer, _server, _client) = session().await;
    let (_channel, call) = one_call(&peer);
    let started = tokio::time::Instant::now();
    call.settle_counted(1).await;
    // It returns (no relay ever starts), and not before the limit.
    assert!(started.elapsed() >= SETTLE_LIMIT);
}

#[tokio::test]
async fn a_call_settles_at_once_without_progress_and_waits_for_relays_in_flight() {
    let (peer, _server, _client) = session().await;
    let (channel, call) = one_call(&peer);
    call.settle().await;
    let (_, ticket) = channel.origin_by_progress("fs", &token(1)).unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(ticket);
    });
    call.settle().await;
    assert_eq!(
        call.relays.active.load(Ordering::Acquire),
        0,
        "settle waited for the relay"
    );
    release.await.unwrap();
}

#[tokio::test]
async fn logs_for_a_client_that_does_not_read_are_capped_and_the_drop_told_once() {
    let (peer, _server, mut lines, _write) = unread_session(4096).await;
    let channel = BackChannel::new();
    let key = SessionKey::new();
    channel.set_log_level(key, &peer, LoggingLevel::Info);
    // Queued while nothing runs (one thread, no await): the client reads none of them
    // meanwhile.
    let sent = 2000;
    for n in 0..sent {
        let receivers = channel.log_receivers("fs", LoggingLevel::Info);
        assert_eq!(receivers.len(), 1);
        let mut log = LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            format!("{n:05} {}", "x".repeat(1000)).into(),
        );
        log.logger = Some("fs".into());
        channel.relay_log("fs", receivers, log);
        // Below the client's level: not queued at all.
        assert!(channel.log_receivers("fs", LoggingLevel::Debug).is_empty());
    }
    assert_eq!(channel.outboxes.len(), 1);
    let mut received = Vec::new();
    let note = loop {
        let line = lines.next_line().await.unwrap().expect("a line");
        let message = message(&line);
        assert_eq!(message["method"], "notifications/message", "{message}");
        if message["params"]["logger"] == DROPPED_NOTE_LOGGER {
            break message;
        }
        received.push(message["params"]["data"].as_str().unwrap()[..5].to_owned());
    };
    assert_eq!(received.len(), MAX_QUEUED_LOGS, "the cap, no more");
    assert_eq!(received[0], "00000");
    assert_eq!(
        received[MAX_QUEUED_LOGS - 1],
        format!("{:05}", MAX_QUEUED_LOGS - 1)
    );
    assert_eq!(note["params"]["level"], "warning");
    let text = note["params"]["data"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("{} messages dropped", sent - MAX_QUEUED_LOGS)),
        "{text}"
    );
    // The queue is forgotten once drained.
    for _ in 0..100 {
        if channel.outboxes.len() == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(channel.outboxes.len(), 0);
}

#[tokio::test]
async fn progress_waiting_for_a_slow_client_is_bounded_and_keeps_the_latest_of_each_token() {
    let (peer, _server, mut lines, _write) = unread_session(4096).await;
    let channel = BackChannel::new();
    let key = SessionKey::new();
    let first = channel.register_call("fs", RequestId::Number(7), token(70), origin(key, &peer, 1));
    let second =
        channel.register_call("fs", RequestId::Number(8), token(80), origin(key, &peer, 2));
    for step in 1..=500 {
        for upstream in [70, 80] {
            let (origin, ticket) = channel
                .origin_by_progress("fs", &token(upstream))
                .expect("in flight");
            let client_token = origin.progress_token.clone().expect("asked for progress");
            let progress =
                ProgressNotificationParam::new(client_token, f64::from(step)).with_total(500.0);
            channel.relay_progress(&origin, progress, ticket);
        }
    }
    // One taken up late (below the newest waiting, which it would replace) is stale.
    let (origin, ticket) = channel.origin_by_progress("fs", &token(70)).unwrap();
    let client_token = origin.progress_token.clone().unwrap();
    channel.relay_progress(
        &origin,
        ProgressNotificationParam::new(client_token, 250.0),
        ticket,
    );
    // A change queued after them comes after them.
    channel.open_session(key, &peer, None);
    channel.relay_change(
        channel.all_sessions(),
        &ServerNotification::ToolListChangedNotification(Default::default()),
    );
    let mut seen = Vec::new();
    loop {
        let line = lines.next_line().await.unwrap().expect("a line");
        let message = message(&line);
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
        assert_eq!(message["method"], "notifications/progress", "{message}");
        seen.push((
            message["params"]["progressToken"].as_i64().unwrap(),
            message["params"]["progress"].as_f64().unwrap(),
        ));
    }
    // The first few of each token as they came, then the latest in place of the rest.
    let mut expected = Vec::new();
    for step in 1..MAX_WAITING_PROGRESS {
        expected.extend([(1, step as f64), (2, step as f64)]);
    }
    expected.extend([(1, 500.0), (2, 500.0)]);
    assert_eq!(seen, expected);
    // Every relay has ended (sent or replaced): the answers need not wait.
    first.settle().await;
    second.settle().await;
    assert_eq!(first.relays.started.load(Ordering::Acquire), 501);
    assert_eq!(first.relays.active.load(Ordering::Acquire), 0);
    assert_eq!(second.relays.active.load(Ordering::Acquire), 0);
}
