//! Approvals asked of a 2026-07-28 client (`approvals` with `via: client`): such a client
//! sends stateless requests, so nothing can be asked of it mid-call; the proxy answers the
//! call with an `input_required` result that carries the approval form, and the client's
//! retry (with `inputResponses` and the `requestState`) carries the answer. The question is
//! bound to the call: a retry with other arguments is refused, an answer is taken once, a
//! denial refuses, a retry without the answer is asked again, and nothing reaches the
//! upstream before an approval.

use serde_json::{Value, json};

use crate::support::approvals::{approve, deleted, stateless_delete as delete};
use crate::support::mcp::{Proxy, config_with, stdio_fixture};

/// The `requestState` of an `input_required` answer that asks for the approval, after
/// checking the form shows the call.
fn asked(answer: &Value, id: &str) -> String {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let question = &result["inputRequests"]["mcpproxy_approval"];
    assert_eq!(question["method"], "elicitation/create", "{answer}");
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("delete_note") && message.contains(&format!("\"{id}\"")),
        "the form shows the tool and its arguments: {message}"
    );
    assert_eq!(
        question["params"]["requestedSchema"]["required"],
        json!(["approve"])
    );
    result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned()
}

/// The text of a refused call (a tool error).
fn refusal(answer: &Value) -> String {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_07_28_client_is_asked_through_input_required_and_its_answer_covers_one_call() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["approvals"] = json!({"ask": ["destructive"], "timeout_secs": 120});
    let proxy = Proxy::builder(&config).start();

    // Asked: nothing reaches the upstream.
    let first = asked(&delete(&proxy, "a", None).await, "a");
    assert!(deleted(log.path()).is_empty());

    // An approval asked for arguments A does not release a call with arguments B; the
    // question is spent either way.
    let other = refusal(&delete(&proxy, "b", Some((&first, approve(true)))).await);
    assert!(other.contains("was asked for another call"), "{other}");
    let spent = refusal(&delete(&proxy, "a", Some((&first, approve(true)))).await);
    assert!(spent.contains("answered already"), "{spent}");
    assert!(deleted(log.path()).is_empty());

    // Approved: the call is sent once; the same answer sent again releases nothing.
    let second = asked(&delete(&proxy, "a", None).await, "a");
    let done = delete(&proxy, "a", Some((&second, approve(true)))).await;
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(deleted(log.path()), ["a"]);
    let replayed = refusal(&delete(&proxy, "a", Some((&second, approve(true)))).await);
    assert!(replayed.contains("answered already"), "{replayed}");
    assert_eq!(deleted(log.path()), ["a"]);

    // Denied, or declined: refused with the words of the issue.
    let third = asked(&delete(&proxy, "c", None).await, "c");
    let denied = refusal(&delete(&proxy, "c", Some((&third, approve(false)))).await);
    assert_eq!(
        denied,
        "The call to 'fx:delete_note' was denied by the user"
    );
    let fourth = asked(&delete(&proxy, "c", None).await, "c");
    let cancel = json!({"mcpproxy_approval": {"action": "cancel"}});
    let cancelled = refusal(&delete(&proxy, "c", Some((&fourth, cancel))).await);
    assert_eq!(
        cancelled,
        "The call to 'fx:delete_note' was cancelled by the user"
    );

    // A retry without the answer is asked again, with a new question.
    let fifth = asked(&delete(&proxy, "d", None).await, "d");
    let again = asked(&delete(&proxy, "d", Some((&fifth, json!({})))).await, "d");
    assert_ne!(fifth, again);
    assert_eq!(deleted(log.path()), ["a"]);

    // On the record: the asking round, the approved call, the refusals.
    let page = proxy
        .get_json("/api/v1/activity?tool=delete_note&limit=100")
        .await;
    let records = page["data"]["records"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let approved: Vec<&Value> = records
        .iter()
        .filter(|r| r["approval"]["decision"] == "approved")
        .collect();
    assert_eq!(approved.len(), 1, "{page}");
    assert_eq!(approved[0]["arguments"]["id"], "a");
    assert_eq!(approved[0]["approval"]["asked_via"], "client");
    assert_eq!(approved[0]["approval"]["decided_by"], "client");
    assert_eq!(approved[0]["status"], "success");
    let decisions = |decision: &str| {
        records
            .iter()
            .filter(|r| r["approval"]["decision"] == decision)
            .count()
    };
    assert_eq!(decisions("asked"), 6, "{page}");
    assert_eq!(decisions("denied"), 1, "{page}");
    assert_eq!(decisions("cancelled"), 1, "{page}");
    assert_eq!(decisions("refused"), 3, "{page}");
    for refused in records.iter().filter(|r| {
        ["denied", "cancelled", "refused"]
            .contains(&r["approval"]["decision"].as_str().unwrap_or_default())
    }) {
        assert_eq!(refused["status"], "blocked", "{refused}");
    }
}
