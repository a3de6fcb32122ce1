//! Tests of the call registry.

use rmcp::model::RequestId;

use super::*;
use crate::back_channel::test_support::{origin, session, token};

#[tokio::test]
async fn calls_are_found_by_progress_token_and_request_id_until_they_end() {
    let (peer, _server, _client) = session().await;
    let channel = BackChannel::new();
    let key = SessionKey::new();
    let first = channel.register_call("fs", RequestId::Number(7), token(70), origin(key, &peer, 1));
    let second =
        channel.register_call("fs", RequestId::Number(8), token(80), origin(key, &peer, 2));
    let other = channel.register_call("gh", RequestId::Number(7), token(70), origin(key, &peer, 3));

    let (found, ticket) = channel
        .origin_by_progress("fs", &token(80))
        .expect("by token");
    assert_eq!(found.request_id, RequestId::Number(2));
    drop(ticket);
    assert!(channel.origin_by_progress("fs", &token(99)).is_none());
    // The same token on another server is another call.
    let (found, _) = channel.origin_by_progress("gh", &token(70)).expect("gh");
    assert_eq!(found.request_id, RequestId::Number(3));

    // Associated by request id; without one, the newest call to that server.
    let by_id = channel
        .origin_for_request("fs", Some(&RequestId::Number(7)))
        .unwrap();
    assert_eq!(by_id.request_id, RequestId::Number(1));
    let newest = channel.origin_for_request("fs", None).unwrap();
    assert_eq!(newest.request_id, RequestId::Number(2));

    assert_eq!(channel.calls_in_flight(), 3);
    drop(second);
    assert_eq!(
        channel.origin_for_request("fs", None).unwrap().request_id,
        RequestId::Number(1)
    );
    drop((first, other));
    assert_eq!(channel.calls_in_flight(), 0);
    assert!(channel.origin_for_request("fs", None).is_none());
}
