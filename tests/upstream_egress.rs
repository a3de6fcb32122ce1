//! End-to-end: egress by host. A sandboxed server with `"network": {"allow": [...]}` reaches
//! a loopback HTTP service the list names, through mcpproxy's egress proxy, by each way a
//! client asks a proxy (a plain `http://` request, `CONNECT`, SOCKS5); it cannot reach a
//! service the list does not name, nor one whose allowed *name* resolves to a loopback
//! address the list does not name itself (DNS rebinding), nor anything by connecting
//! directly (its network namespace has no route out). Every connection is an `egress`
//! record, is counted in `/metrics` and shows in `upstream inspect`. Everything is on
//! loopback.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::TestCommand;
use crate::support::mcp::{Client, Proxy, call, config_with, connect, fixture_bin, is_error, text};
use crate::support::sandbox_supported;

fn hostile_bin() -> PathBuf {
    fixture_bin().with_file_name("mcp-hostile")
}

/// A loopback HTTP service answering every request with `hello from NAME`; its port.
async fn http_service(name: &'static str) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = format!("hello from {name}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    port
}

async fn report(client: &Client) -> BTreeMap<String, String> {
    let result = call(client, "call_tool_read", json!({"name": "net:probe"}))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    serde_json::from_str(&text(&result)).unwrap_or_else(|e| panic!("{e}: {}", text(&result)))
}

fn outcome<'a>(report: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    report
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {report:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_reaches_only_what_its_allow_list_names_and_every_connection_is_recorded() {
    if !sandbox_supported() {
        return;
    }
    let allowed = http_service("allowed").await;
    let unlisted = http_service("unlisted").await;
    let rebound = http_service("rebound").await;
    let fetch_allowed = format!("http://127.0.0.1:{allowed}/pkg");
    let tunnel_allowed = format!("127.0.0.1:{allowed}");
    let socks_allowed = format!("127.0.0.1:{allowed}");
    let fetch_unlisted = format!("http://127.0.0.1:{unlisted}/");
    // Allowed by name, but `localhost` resolves to a loopback address that is not listed.
    let tunnel_rebound = format!("localhost:{rebound}");
    let direct = format!("127.0.0.1:{allowed}");
    let server = json!({
        "name": "net",
        "command": hostile_bin(),
        "args": [
            "--fetch", fetch_allowed, "--tunnel", tunnel_allowed, "--socks", socks_allowed,
            "--fetch", fetch_unlisted, "--tunnel", tunnel_rebound, "--connect", direct,
        ],
        "isolation": {"network": {"allow": [
            format!("127.0.0.1:{allowed}"),
            format!("localhost:{rebound}"),
        ]}},
    });
    let proxy = Proxy::builder(&config_with(vec![server])).start();
    let client = connect(&proxy.url).await;
    let report = report(&client).await;

    for key in [
        format!("fetch {fetch_allowed}"),
        format!("tunnel {tunnel_allowed}"),
        format!("socks {socks_allowed}"),
    ] {
        let got = outcome(&report, &key);
        assert!(
            got.starts_with("ok: HTTP/1.1 200") && got.ends_with("hello from allowed"),
            "{key}: {got}"
        );
    }
    let got = outcome(&report, &format!("fetch {fetch_unlisted}"));
    assert!(
        got.starts_with("denied: HTTP/1.1 403")
            && got.contains("not in the server's egress allow-list")
            && got.contains(&format!("add \"127.0.0.1:{unlisted}\"")),
        "{got}"
    );
    let got = outcome(&report, &format!("tunnel {tunnel_rebound}"));
    assert!(
        got.starts_with("denied: HTTP/1.1 403") && got.contains("DNS rebinding"),
        "{got}"
    );
    // Ignoring the proxy variables: no route out of the namespace.
    let got = outcome(&report, &format!("connect {direct}"));
    assert!(got.starts_with("denied: "), "{got}");
    assert!(!got.contains("hello"), "{got}");

    // Each connection is recorded: three carried, two refused by the rules (the probe ran
    // at start-up too, so at least these).
    let records = proxy.finished_records("egress", 10).await;
    let count = |status: &str, destination: &str| {
        records
            .iter()
            .filter(|r| r["status"] == status && r["tool_name"] == destination)
            .count()
    };
    assert!(
        count("success", &format!("127.0.0.1:{allowed}")) >= 6,
        "{records:?}"
    );
    assert!(
        count("blocked", &format!("127.0.0.1:{unlisted}")) >= 2,
        "{records:?}"
    );
    assert!(
        count("blocked", &format!("localhost:{rebound}")) >= 2,
        "{records:?}"
    );
    let carried = records
        .iter()
        .find(|r| r["status"] == "success" && r["details"]["protocol"] == "socks5")
        .expect("a SOCKS5 record");
    assert_eq!(carried["server_name"], "net");
    assert_eq!(carried["details"]["address"], "127.0.0.1");
    assert!(
        carried["details"]["bytes_received"].as_u64().unwrap() > 0,
        "{carried}"
    );
    assert!(
        carried["details"]["bytes_sent"].as_u64().unwrap() > 0,
        "{carried}"
    );

    // Counted in /metrics.
    let metrics = proxy.get_text("/metrics").await;
    let counter = |outcome: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("mcpproxy_egress_connections_total{")
                    && l.contains("server=\"net\"")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(counter("connected") >= 6.0, "{metrics}");
    assert!(counter("refused") >= 4.0, "{metrics}");
    assert!(
        metrics.contains("mcpproxy_egress_bytes_total{"),
        "{metrics}"
    );

    // And in `upstream inspect` and the list.
    let config = proxy.data_dir.path().join("mcp_config.json");
    let inspect = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "inspect", "net", "--config"])
        .args([&config])
        .output();
    inspect.assert_code(0);
    assert!(
        inspect.stdout().contains(&format!(
            "Egress: allows 127.0.0.1:{allowed}, localhost:{rebound}"
        )),
        "{}",
        inspect.stdout()
    );
    assert!(
        inspect
            .stdout()
            .contains(&format!("refused 127.0.0.1:{unlisted}")),
        "{}",
        inspect.stdout()
    );
    let list = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "list", "--config"])
        .args([&config])
        .output();
    assert!(
        list.stdout().contains("on (network allow"),
        "{}",
        list.stdout()
    );
    let status = proxy.get_json("/api/v1/upstreams").await;
    assert!(status.to_string().contains("\"egress\""), "{status}");
    client.cancel().await.unwrap();
}

/// A server that fails to start because its sandbox refused a file: the start error (the
/// server's state), its log and the security analysis name the file and the `isolation`
/// line that would allow it.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_refused_by_the_sandbox_names_the_grant_that_would_allow_it() {
    if !sandbox_supported() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let settings = outside.path().join("settings.json");
    std::fs::write(&settings, "{}").unwrap();
    let server = json!({
        "name": "needs",
        "command": "/bin/sh",
        "args": ["-c", format!("cat {} >&2 && exec sleep 60; exit 1", settings.display())],
        "isolation": {},
    });
    let proxy = Proxy::builder(&config_with(vec![server])).start();
    let wanted = format!(
        "its sandbox refused reading {path}; to allow it, add to the server's \"isolation\" (a person approves the changed launch): {{\"read\":[\"{path}\"]}}",
        path = settings.display()
    );
    crate::support::poll::until(
        "the start error names the grant",
        std::time::Duration::from_secs(30),
        || async {
            let status = proxy.get_json("/api/v1/upstreams").await;
            if status.to_string().contains(&wanted.replace('"', "\\\"")) {
                Ok(())
            } else {
                Err(format!("no {wanted:?} in {status}"))
            }
        },
    )
    .await;
    let config = proxy.data_dir.path().join("mcp_config.json");
    let logs = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "logs", "needs", "--config"])
        .args([&config])
        .output();
    assert!(
        logs.stdout().contains(&format!("mcpproxy: {wanted}")),
        "{}",
        logs.stdout()
    );
    let inspect = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "inspect", "needs", "--config"])
        .args([&config])
        .output();
    assert!(
        inspect
            .stdout()
            .contains(&format!("Refused lately: {wanted}")),
        "{}",
        inspect.stdout()
    );
}
