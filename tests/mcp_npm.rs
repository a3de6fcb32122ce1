//! End-to-end against the official `@modelcontextprotocol/server-filesystem`, started with
//! npx from `tests/npm` (installed by `.ci/run` with `npm ci --prefix tests/npm`).

use serde_json::json;

use crate::support::mcp::{
    Proxy, call, config_with, connect, is_error, npm_bin_installed, npm_dir, text,
};

#[tokio::test(flavor = "multi_thread")]
async fn server_filesystem_reads_pass_and_destructive_writes_need_the_destructive_variant() {
    if !npm_bin_installed("mcp-server-filesystem") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("hello.txt"), "hello from disk").unwrap();
    let upstream = json!({
        "name": "fs",
        "command": "npx",
        "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-filesystem", root_path],
        // The directory it serves, granted to its sandbox (the rest of the sandbox is the
        // default: no network, a private home, nothing else of the disk).
        "isolation": {"write": [root_path]},
    });
    let proxy = Proxy::builder(&config_with(vec![upstream])).start();
    let client = connect(&proxy.url).await;

    // Reads go through call_tool_read (server-filesystem marks them readOnlyHint).
    let hello = root_path.join("hello.txt");
    let read = call(
        &client,
        "call_tool_read",
        json!({"name": "fs:read_text_file", "args": {"path": hello}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&read), "{}", text(&read));
    assert!(text(&read).contains("hello from disk"), "{}", text(&read));
    let listed = call(
        &client,
        "call_tool_read",
        json!({"name": "fs:list_directory", "args": {"path": root_path}}),
    )
    .await
    .unwrap();
    assert!(text(&listed).contains("hello.txt"), "{}", text(&listed));

    // write_file carries destructiveHint: refused on read and write, the file untouched.
    let target = root_path.join("written.txt");
    let write_args = json!({"path": target, "content": "written through mcpproxy"});
    for variant in ["call_tool_read", "call_tool_write"] {
        let result = call(
            &client,
            variant,
            json!({"name": "fs:write_file", "args": write_args}),
        )
        .await
        .unwrap();
        assert!(is_error(&result), "{variant}: {}", text(&result));
        assert_eq!(
            text(&result),
            "Tool 'fs:write_file' is marked destructive by server, use call_tool_destructive"
        );
        assert!(!target.exists(), "{variant} wrote the file");
    }

    // retrieve_tools says so too.
    let found = call(
        &client,
        "retrieve_tools",
        json!({"query": "write file", "limit": 5}),
    )
    .await
    .unwrap();
    let body: serde_json::Value = serde_json::from_str(&text(&found)).unwrap();
    let write_file = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fs:write_file")
        .expect("fs:write_file found");
    assert_eq!(write_file["call_with"], "call_tool_destructive");

    let written = call(
        &client,
        "call_tool_destructive",
        json!({"name": "fs:write_file", "args": write_args, "intent_reason": "e2e test"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&written), "{}", text(&written));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written through mcpproxy"
    );

    // create_directory is a plain write ({readOnlyHint: false, destructiveHint: false}): an
    // IDE that auto-approves call_tool_read must not be able to run it that way.
    let dir = root_path.join("viaread");
    let result = call(
        &client,
        "call_tool_read",
        json!({"name": "fs:create_directory", "args": {"path": dir}}),
    )
    .await
    .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert_eq!(
        text(&result),
        "Tool 'fs:create_directory' is marked as not read-only by server, use call_tool_write"
    );
    assert!(!dir.exists(), "call_tool_read created the directory");
    let created = call(
        &client,
        "call_tool_write",
        json!({"name": "fs:create_directory", "args": {"path": dir}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&created), "{}", text(&created));
    assert!(dir.is_dir(), "call_tool_write did not create the directory");
    client.cancel().await.unwrap();
}
