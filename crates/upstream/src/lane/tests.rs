//! Tests of the call lane: answers found, lines never interleaved, progress counted.

use super::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A lane over in-memory pipes: what the "server" reads, and where it writes.
fn pipes() -> (
    Lane,
    LaneReader<tokio::io::DuplexStream>,
    SessionWriter,
    BufReader<tokio::io::DuplexStream>,
    tokio::io::DuplexStream,
) {
    let (server_out, stdout) = tokio::io::duplex(1 << 20);
    let (stdin, server_in) = tokio::io::duplex(1 << 20);
    let (lane, reader, writer) = split(stdout, stdin);
    (lane, reader, writer, BufReader::new(server_in), server_out)
}

async fn read_line(reader: &mut (impl AsyncBufReadExt + Unpin)) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).await.expect("read");
    line
}

#[tokio::test]
async fn a_lane_answer_reaches_its_request_and_other_lines_reach_rmcp() {
    let (lane, reader, _writer, mut server_in, mut server_out) = pipes();
    let mut rmcp = BufReader::new(reader);
    let mut request = lane.start();
    request
        .send("tools/call", &serde_json::json!({"name": "echo"}))
        .await
        .expect("send");
    let sent: serde_json::Value =
        serde_json::from_str(&read_line(&mut server_in).await).expect("json");
    assert_eq!(sent["id"], FIRST_ID);
    assert_eq!(sent["method"], "tools/call");
    assert_eq!(sent["params"]["name"], "echo");
    // A notification, rmcp's own answer (a small id), then the lane's answer with its
    // result first (as the TypeScript SDK writes it), in one write.
    let lines = format!(
        "{}\n{}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
        format_args!(r#"{{"result":{{"content":[]}},"jsonrpc":"2.0","id":{FIRST_ID}}}"#),
    );
    server_out.write_all(lines.as_bytes()).await.expect("write");
    // rmcp's session reads on; the lane's answer is taken out on the way.
    assert!(
        read_line(&mut rmcp)
            .await
            .contains("notifications/progress")
    );
    assert_eq!(
        read_line(&mut rmcp).await,
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n"
    );
    let reply = request.answer().await.expect("answer");
    let Ok(ReplyContent::Result(result)) = reply.outcome() else {
        panic!("not a result");
    };
    assert_eq!(result.get(), r#"{"content":[]}"#);
    drop(server_out);
    assert_eq!(
        read_line(&mut rmcp).await,
        "",
        "end of input after the last line"
    );
}

#[tokio::test]
async fn answers_for_ids_nobody_waits_for_go_to_rmcp() {
    let (lane, reader, _writer, _server_in, mut server_out) = pipes();
    let mut rmcp = BufReader::new(reader);
    let request = lane.start();
    let other = FIRST_ID + 7;
    let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{other},\"result\":{{}}}}\n");
    server_out.write_all(line.as_bytes()).await.expect("write");
    // A request from the server with a lane-like id is a request, not an answer.
    let asked = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}}\n",
        request.id()
    );
    server_out.write_all(asked.as_bytes()).await.expect("write");
    assert_eq!(read_line(&mut rmcp).await, line);
    assert_eq!(read_line(&mut rmcp).await, asked);
    assert_eq!(lane.0.waiting.load(Ordering::Acquire), 1);
    drop(request);
    assert_eq!(lane.0.waiting.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn an_error_answer_is_read_whole() {
    let (lane, mut reader, _writer, _server_in, mut server_out) = pipes();
    let mut request = lane.start();
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32602,\"message\":\"no such tool\",\"data\":{{\"tool\":\"x\"}}}}}}\n",
        request.id()
    );
    server_out.write_all(line.as_bytes()).await.expect("write");
    // Someone must read the server's output: rmcp's session does, in the proxy.
    let mut sink = [0u8; 64];
    let read = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let _ = reader.read(&mut sink).await;
    });
    let reply = request.answer().await.expect("answer");
    let Ok(ReplyContent::Error(error)) = reply.outcome() else {
        panic!("not an error");
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.message, "no such tool");
    assert_eq!(error.data, Some(serde_json::json!({"tool": "x"})));
    read.abort();
}

#[tokio::test]
async fn the_end_of_the_servers_output_fails_waiting_requests() {
    let (lane, reader, _writer, _server_in, server_out) = pipes();
    let mut request = lane.start();
    let mut rmcp = BufReader::new(reader);
    drop(server_out);
    assert_eq!(read_line(&mut rmcp).await, "");
    assert!(matches!(request.answer().await, Err(LaneError::Ended)));
}

#[tokio::test]
async fn lines_of_the_lane_and_of_rmcp_never_interleave() {
    let (lane, _reader, mut writer, mut server_in, _server_out) = pipes();
    let long = "x".repeat(200_000);
    let session = tokio::spawn(async move {
        for n in 0..20 {
            let line = format!("{{\"rmcp\":{n},\"pad\":\"{}\"}}\n", "y".repeat(100_000));
            writer.write_all(line.as_bytes()).await.expect("write");
        }
        writer
    });
    let calls = lane.clone();
    let lane_writes = tokio::spawn(async move {
        for _ in 0..20 {
            let request = calls.start();
            request
                .send("tools/call", &serde_json::json!({ "pad": long }))
                .await
                .expect("send");
        }
    });
    for _ in 0..40 {
        let line = read_line(&mut server_in).await;
        serde_json::from_str::<serde_json::Value>(&line).expect("every line is whole JSON");
    }
    lane_writes.await.expect("lane writes");
    let writer = session.await.expect("session");
    // rmcp's session ends: the server's stdin closes and new lane writes fail.
    drop(writer);
    assert_eq!(read_line(&mut server_in).await, "");
    let late = lane.start();
    assert!(matches!(
        late.send("tools/call", &serde_json::json!({})).await,
        Err(LaneError::Closed)
    ));
}

#[test]
fn only_responses_with_lane_ids_are_lane_answers() {
    let first = FIRST_ID.to_string();
    let answer = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
    assert_eq!(
        classify(answer(&first).as_bytes()),
        LineKind::Answer(FIRST_ID)
    );
    assert_eq!(classify(answer("4").as_bytes()), LineKind::Other);
    assert_eq!(
        classify(answer(&format!("\"{first}\"")).as_bytes()),
        LineKind::Other
    );
    assert_eq!(
        classify(answer("4503599627370496.5").as_bytes()),
        LineKind::Other
    );
    assert_eq!(classify(b"not json"), LineKind::Other);
    let request = format!(r#"{{"jsonrpc":"2.0","id":{first},"method":"ping"}}"#);
    assert_eq!(classify(request.as_bytes()), LineKind::Other);
}

#[test]
fn progress_for_lane_tokens_is_told_apart() {
    let progress = |token: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":1,"progressToken":{token}}}}}"#
        )
    };
    let first = FIRST_ID.to_string();
    assert_eq!(
        classify(progress(&first).as_bytes()),
        LineKind::Progress(FIRST_ID)
    );
    assert_eq!(classify(progress("3").as_bytes()), LineKind::Other);
    assert_eq!(
        classify(progress(&format!("\"{first}\"")).as_bytes()),
        LineKind::Other
    );
    let other = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"progressToken":{first}}}}}"#
    );
    assert_eq!(classify(other.as_bytes()), LineKind::Other);
}

#[tokio::test]
async fn an_answer_says_how_much_progress_went_ahead_of_it() {
    let (lane, reader, _writer, _server_in, mut server_out) = pipes();
    let mut rmcp = BufReader::new(reader);
    let mut request = lane.start();
    let other = lane.start();
    let progress = |token: i64, n: u32| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{token},\"progress\":{n}}}}}\n"
        )
    };
    let lines = [
        progress(request.id(), 1),
        progress(other.id(), 1),
        progress(request.id(), 2),
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
            request.id()
        ),
    ]
    .concat();
    server_out.write_all(lines.as_bytes()).await.expect("write");
    // rmcp gets the three notifications, to relay; the answer counts this request's two.
    for _ in 0..3 {
        assert!(
            read_line(&mut rmcp)
                .await
                .contains("notifications/progress")
        );
    }
    let reply = request.answer().await.expect("answer");
    assert_eq!(reply.progress_before(), 2);
}

#[tokio::test]
async fn the_cancellation_names_the_request() {
    let (lane, _reader, _writer, mut server_in, _server_out) = pipes();
    let request = lane.start();
    request.cancel("request timeout").await.expect("cancel");
    let sent: serde_json::Value =
        serde_json::from_str(&read_line(&mut server_in).await).expect("json");
    assert_eq!(sent["method"], "notifications/cancelled");
    assert_eq!(sent["params"]["requestId"], request.id());
    assert_eq!(sent["params"]["reason"], "request timeout");
    assert!(sent.get("id").is_none(), "a notification has no id");
}

#[tokio::test]
async fn a_line_whose_writer_gives_up_is_still_written_whole() {
    // A pipe of 64 bytes: a long line takes many writes, each waiting for the reader.
    let (server_out, stdout) = tokio::io::duplex(64);
    let (stdin, server_in) = tokio::io::duplex(64);
    let (lane, _reader, mut writer) = split(stdout, stdin);
    let mut server_in = BufReader::new(server_in);
    let long = "z".repeat(10_000);
    let request = lane.start();
    let params = serde_json::json!({ "pad": long });
    let send = request.send("tools/call", &params);
    // The caller gives up once the line is started (the pipe is full).
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(20), send)
            .await
            .is_err()
    );
    drop(request);
    // rmcp's next line waits for the lane's to be finished, then follows it.
    let session = tokio::spawn(async move {
        writer.write_all(b"{\"rmcp\":1}\n").await.expect("write");
        writer
    });
    let first: serde_json::Value =
        serde_json::from_str(&read_line(&mut server_in).await).expect("whole JSON");
    assert_eq!(first["params"]["pad"].as_str().map(str::len), Some(10_000));
    assert_eq!(read_line(&mut server_in).await, "{\"rmcp\":1}\n");
    drop(session.await.expect("session"));
    drop(server_out);
}
