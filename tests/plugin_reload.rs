//! End-to-end: plugins live. A running `serve --plugins DIR` loads its policy plugins again
//! on `mcpproxy plugins reload` (and on its own when the dir changes): a validator added to
//! the dir (a real component built from source) judges the next call; a broken component,
//! or one that faults on the probe call, is refused with the reason, and the set in force
//! keeps judging.

use std::time::Duration;

use serde_json::json;

use crate::support::mcp::{Proxy, call, config_with, connect, is_error, stdio_fixture};
use crate::support::{TestCommand, artifact};

/// `mcpproxy_plugin_decisions_total{plugin="test-allow-all",decision="allow"}`, or 0.
async fn allow_all_decisions(proxy: &Proxy) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", proxy.base()))
        .header("x-api-key", proxy.api_key())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"mcpproxy_plugin_decisions_total{plugin="test-allow-all",decision="allow"} "#,
            )
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `mcpproxy serve --plugins DIR` with a stdio fixture `fx`, and its empty plugins dir.
struct Served {
    proxy: Proxy,
    plugins: tempfile::TempDir,
    _log: tempfile::NamedTempFile,
}

impl Served {
    fn start() -> Self {
        let log = tempfile::NamedTempFile::new().unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let dir = plugins.path().to_str().unwrap().to_owned();
        let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())]))
            .args(&["--plugins", &dir])
            .start();
        Self {
            proxy,
            plugins,
            _log: log,
        }
    }

    /// `mcpproxy plugins reload` against it.
    fn reload(&self) -> crate::support::CmdOutput {
        TestCommand::new(self.proxy.data_dir.path())
            .args(["plugins", "reload", "--config"])
            .arg_path(&self.proxy.data_dir.path().join("mcp_config.json"))
            .output()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_swaps_the_validators_only_when_the_new_set_passes() {
    let served = Served::start();
    let (proxy, plugins) = (&served.proxy, &served.plugins);
    let reload = || served.reload();
    let client = connect(&proxy.url).await;
    let echo = |text: &'static str| {
        let client = &client;
        async move {
            call(
                client,
                "call_tool_read",
                json!({"name": "fx:echo", "args": {"text": text}}),
            )
            .await
            .unwrap()
        }
    };
    assert!(!is_error(&echo("before").await));
    assert_eq!(allow_all_decisions(proxy).await, 0.0);

    // A validator added to the dir: after the reload it judges the next call.
    std::fs::copy(artifact("allow_all"), plugins.path().join("allow_all.wasm")).unwrap();
    let out = reload();
    out.assert_code(0);
    assert!(
        out.stdout().contains("test-allow-all") && out.stdout().contains("intent-matrix"),
        "{}",
        out.stdout()
    );
    assert!(!is_error(&echo("judged").await));
    let judged = allow_all_decisions(proxy).await;
    assert!(judged >= 1.0, "the new validator judged the call: {judged}");

    // A broken component: refused, naming it; the set in force keeps judging.
    std::fs::write(plugins.path().join("broken.wasm"), b"\0asm not really").unwrap();
    let out = reload();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr().contains("broken.wasm") && out.stderr().contains("keep judging"),
        "{}",
        out.stderr()
    );
    assert!(!is_error(&echo("still").await));
    assert!(allow_all_decisions(proxy).await > judged);
    std::fs::remove_file(plugins.path().join("broken.wasm")).unwrap();

    // A component that loads but traps when it judges: refused at the probe call.
    std::fs::copy(artifact("trap"), plugins.path().join("trap.wasm")).unwrap();
    let out = reload();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr().contains("probe") && out.stderr().contains("test-trap"),
        "{}",
        out.stderr()
    );
    let before = allow_all_decisions(proxy).await;
    assert!(
        !is_error(&echo("after the trap").await),
        "the trap never judges"
    );
    assert!(allow_all_decisions(proxy).await > before);
    std::fs::remove_file(plugins.path().join("trap.wasm")).unwrap();

    // The watch: the dir changed back to a good set, so it reloads on its own.
    std::fs::remove_file(plugins.path().join("allow_all.wasm")).unwrap();
    let what = "the watch reloads without allow-all";
    crate::support::poll::until(what, Duration::from_secs(60), || async {
        let before = allow_all_decisions(proxy).await;
        assert!(!is_error(&echo("watched").await));
        match allow_all_decisions(proxy).await {
            after if after == before => Ok(()),
            after => Err(format!("allow-all still judges: {before} -> {after}")),
        }
    })
    .await;
    client.cancel().await.unwrap();
}

/// Result guards are reloaded too: a guard added to the dir guards the next answer (the
/// `guard-trap` fixture withholds an answer holding `TRAP`), beside the ones in force (a
/// token is still redacted).
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_puts_a_new_result_guard_in_force_beside_the_others() {
    let served = Served::start();
    let (proxy, plugins) = (&served.proxy, &served.plugins);
    let reload = || served.reload();
    let client = connect(&proxy.url).await;
    let echo = |text: String| {
        let client = &client;
        async move {
            call(
                client,
                "call_tool_read",
                json!({"name": "fx:echo", "args": {"text": text}}),
            )
            .await
            .unwrap()
        }
    };
    let before = echo("a TRAP word".to_owned()).await;
    assert!(!is_error(&before), "no guard-trap yet");

    std::fs::copy(
        artifact("guard_trap"),
        plugins.path().join("guard_trap.wasm"),
    )
    .unwrap();
    let out = reload();
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("result guards: secret-redactor 0.1.0, guard-trap"),
        "{}",
        out.stdout()
    );
    let after = echo("a TRAP word".to_owned()).await;
    let text = crate::support::mcp::text(&after);
    assert!(
        is_error(&after) && text.contains("guard-trap"),
        "the new guard withholds it: {text}"
    );
    let token = "ghp_R7kQ2mZx9Lw4Tv8Np3Hs6Jd1Fb5Gc0Ya2Ue7W";
    let redacted = echo(format!("token {token}")).await;
    let text = crate::support::mcp::text(&redacted);
    assert!(!is_error(&redacted), "{text}");
    assert!(
        !text.contains(token) && text.contains("[REDACTED"),
        "{text}"
    );
    client.cancel().await.unwrap();
}
