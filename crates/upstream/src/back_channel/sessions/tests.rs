//! Tests of client sessions: log levels, subscriptions, what a closed session leaves.

use std::sync::atomic::Ordering;

use rmcp::model::{
    LoggingMessageNotificationParam, ProgressNotificationParam, RequestId, RequestMetaObject,
};

use super::*;
use crate::back_channel::test_support::{origin, session, token, unread_session};

#[test]
fn log_levels_are_ordered_by_severity() {
    assert!(rank(LoggingLevel::Error) > rank(LoggingLevel::Warning));
    assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
    assert_eq!(rank(LoggingLevel::Emergency), 7);
}

#[tokio::test]
async fn log_levels_pick_the_sessions_that_asked_and_none_that_did_not() {
    let (quiet_peer, _s1, _c1) = session().await;
    let (debug_peer, _s2, _c2) = session().await;
    let (error_peer, _s3, _c3) = session().await;
    let (modern_peer, _s4, _c4) = session().await;
    let channel = BackChannel::new();
    let (quiet, debug, error) = (SessionKey::new(), SessionKey::new(), SessionKey::new());
    channel.open_session(quiet, &quiet_peer, None);
    channel.set_log_level(debug, &debug_peer, LoggingLevel::Debug);
    channel.set_log_level(error, &error_peer, LoggingLevel::Error);
    assert_eq!(channel.most_verbose_level(), Some(LoggingLevel::Debug));
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Critical).len(), 2);
    // A session that set no level hears nothing, even from a server it has a call in
    // flight to.
    let _call = channel.register_call(
        "fs",
        RequestId::Number(1),
        token(1),
        origin(quiet, &quiet_peer, 1),
    );
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
    assert_eq!(
        channel.log_receivers("fs", LoggingLevel::Emergency).len(),
        2
    );
    // A 2026-07-28 request that set its own level hears the server it calls, at that
    // level and above, while it is in flight.
    let modern = SessionKey::new();
    let mut request = origin(modern, &modern_peer, 2);
    let mut meta = RequestMetaObject::default();
    meta.set_log_level(LoggingLevel::Warning);
    request.protocol = Some((rmcp::model::ProtocolVersion::V_2026_07_28, meta));
    let call = channel.register_call("fs", RequestId::Number(2), token(2), request);
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Warning).len(), 2);
    assert_eq!(channel.log_receivers("gh", LoggingLevel::Warning).len(), 1);
    drop(call);
    assert_eq!(channel.log_receivers("fs", LoggingLevel::Warning).len(), 1);
    assert_eq!(channel.all_sessions().len(), 3);
}

#[tokio::test]
async fn a_closed_session_forgets_what_waits_for_it() {
    let (peer, _server, _lines, _write) = unread_session(1024).await;
    let channel = BackChannel::new();
    let key = SessionKey::new();
    channel.set_log_level(key, &peer, LoggingLevel::Debug);
    let call = channel.register_call("fs", RequestId::Number(1), token(1), origin(key, &peer, 1));
    let (origin, ticket) = channel.origin_by_progress("fs", &token(1)).unwrap();
    channel.relay_progress(
        &origin,
        ProgressNotificationParam::new(token(1), 1.0),
        ticket,
    );
    for n in 0..10 {
        channel.relay_log(
            "fs",
            channel.log_receivers("fs", LoggingLevel::Info),
            LoggingMessageNotificationParam::new(LoggingLevel::Info, n.into()),
        );
    }
    assert_eq!(channel.outboxes.len(), 1);
    channel.close_session(key);
    assert_eq!(channel.outboxes.len(), 0);
    assert_eq!(
        call.relays.active.load(Ordering::Acquire),
        0,
        "the waiting progress was let go"
    );
}

#[tokio::test]
async fn subscriptions_are_shared_counted_bounded_and_released_on_close() {
    let (peer_a, _s1, _c1) = session().await;
    let (peer_b, _s2, _c2) = session().await;
    let channel = BackChannel::new();
    let (a, b) = (SessionKey::new(), SessionKey::new());
    assert_eq!(channel.subscribe(a, &peer_a, "fs", "file:///x"), Ok(true));
    assert_eq!(channel.subscribe(b, &peer_b, "fs", "file:///x"), Ok(false));
    assert_eq!(channel.subscribers("fs", "file:///x").len(), 2);
    assert!(
        !channel.unsubscribe(a, "fs", "file:///x"),
        "b still holds it"
    );
    assert_eq!(channel.subscribers("fs", "file:///x").len(), 1);
    assert_eq!(channel.subscribe(b, &peer_b, "fs", "file:///y"), Ok(true));
    let mut orphaned = channel.close_session(b);
    orphaned.sort();
    assert_eq!(
        orphaned,
        vec![
            ("fs".to_owned(), "file:///x".to_owned()),
            ("fs".to_owned(), "file:///y".to_owned())
        ]
    );
    for i in 0..MAX_SUBSCRIPTIONS_PER_SESSION {
        assert!(
            channel
                .subscribe(a, &peer_a, "fs", &format!("u{i}"))
                .is_ok()
        );
    }
    let refused = channel.subscribe(a, &peer_a, "fs", "one-more").unwrap_err();
    assert!(refused.contains("unsubscribe from some first"), "{refused}");
}

#[test]
fn session_keys_are_unique() {
    let a = SessionKey::new();
    let b = SessionKey::new();
    assert_ne!(a, b);
}
