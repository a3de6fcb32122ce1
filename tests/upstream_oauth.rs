//! Logging in to a remote MCP server behind a real OAuth authorization server: oidc-provider
//! (a certified OpenID Connect server, from npm) in front of an MCP server built with the
//! official TypeScript SDK that checks every request's token against it
//! (`tests/oauth/server.mjs`, installed by `npm ci --prefix tests/oauth`, run with the Node 22
//! of `tests/conformance`). mcpproxy finds the server asks for a login, `mcpproxy upstream
//! login` logs in through a scripted browser (`tests/oauth/browser.py`: the development
//! login and consent pages), calls succeed, the short-lived access token is refreshed, and
//! once the grant is revoked (RFC 7009, at the authorization server) the server goes back to
//! `login required` instead of reconnecting in a loop. So it does when the authorization
//! server restarts and forgets the client mcpproxy registered (`invalid_client` at the
//! refresh): the stale registration is dropped and the next login registers anew.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::Proxy;
use crate::support::node::oauth_dir;
use crate::support::poll::until_blocking;
use crate::support::time::let_pass_blocking;

/// The access token's life at the authorization server. mcpproxy refreshes a token that
/// has less than 30 s left, so one of 35 s is refreshed once it is 5 s old.
const ACCESS_TOKEN_TTL_SECS: u64 = 35;

/// The authorization server and the MCP server behind it.
struct OAuthServer {
    child: Child,
    mcp: String,
    control: String,
}

impl OAuthServer {
    fn start(node: &Path) -> Self {
        let mut child = Command::new(node)
            .arg(oauth_dir().join("server.mjs"))
            .arg(ACCESS_TOKEN_TTL_SECS.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tests/oauth/server.mjs");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        stdout
            .read_line(&mut line)
            .expect("read the OAuth server's addresses");
        // Keep reading what it prints: a closed pipe would end it at its next line.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let addresses: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the OAuth server printed {line:?}: {e}"));
        Self {
            child,
            mcp: addresses["mcp"].as_str().expect("mcp").to_owned(),
            control: addresses["control"].as_str().expect("control").to_owned(),
        }
    }

    fn stats(&self) -> Value {
        http_json("GET", &format!("{}/test/stats", self.control))
    }

    /// Revokes every refresh token it issued at its RFC 7009 endpoint (and so the grants).
    fn revoke(&self) -> Value {
        http_json("POST", &format!("{}/test/revoke", self.control))
    }

    /// Restarts the authorization server on the same port with an empty store: it forgets
    /// every client it registered and every token it issued.
    fn restart_authorization_server(&self) -> Value {
        http_json("POST", &format!("{}/test/restart", self.control))
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rest_post(url: &str, key: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        reqwest::Client::new()
            .post(url)
            .header("X-API-Key", key)
            .send()
            .await
            .expect("reach the proxy")
            .json()
            .await
            .expect("a JSON answer")
    })
}

fn http_status(url: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        reqwest::get(url)
            .await
            .expect("reach the proxy")
            .status()
            .as_u16()
    })
}

fn http_json(method: &str, url: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let request = match method {
            "POST" => client.post(url),
            _ => client.get(url),
        };
        request
            .send()
            .await
            .expect("reach the OAuth test server")
            .json()
            .await
            .expect("a JSON answer")
    })
}

/// `mcpproxy upstream ACTION s --config CONFIG ...` against the running proxy's data dir.
fn upstream(proxy: &Proxy, config: &Path, action: &str, extra: &[&str]) -> TestCommand {
    TestCommand::new(proxy.data_dir.path())
        .env("MCPPROXY_CREDENTIALS", "file")
        .args(["upstream", action, "s"])
        .args(extra)
        .args(["--config"])
        .arg_path(config)
}

fn state_of(proxy: &Proxy, config: &Path) -> String {
    listed_server(proxy, config, "state")
}

/// A field of the (one) server in `mcpproxy upstream list -o json`.
fn listed_server(proxy: &Proxy, config: &Path, field: &str) -> String {
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "list", "-o", "json", "--config"])
        .arg_path(config)
        .output();
    let list: Value = serde_json::from_str(&out.stdout()).unwrap_or(Value::Null);
    list[0][field].as_str().unwrap_or_default().to_owned()
}

/// The config of the tests' proxy: the server `s` behind `server`'s login, with the
/// plugins' deadline of every test proxy (`config_with`): calls are judged, never timed out
/// by a loaded machine.
fn proxy_config(server: &OAuthServer) -> Value {
    json!({
        "mcpServers": [{ "name": "s", "url": server.mcp }],
        "plugins": {"limits": {"timeout_ms": crate::support::mcp::PLUGIN_TIMEOUT_MS}},
    })
}

fn wait_for_state(proxy: &Proxy, config: &Path, wanted: &str) {
    let what = format!("the server reaches '{wanted}'");
    until_blocking(&what, Duration::from_secs(30), || {
        let state = state_of(proxy, config);
        if state == wanted {
            Ok(())
        } else {
            Err(format!("it is '{state}'"))
        }
    });
}

fn echo(proxy: &Proxy, config: &Path, text: &str) -> crate::support::CmdOutput {
    TestCommand::new(proxy.data_dir.path())
        .args(["call", "tool-read", "s:echo", "--args"])
        .args([json!({ "text": text }).to_string()])
        .args(["--config"])
        .arg_path(config)
        .output()
}

/// `mcpproxy upstream login s` with the scripted browser; the login must succeed.
fn log_in(proxy: &Proxy, config: &Path) {
    let login = upstream(proxy, config, "login", &["--timeout", "60"])
        .env(
            "BROWSER",
            oauth_dir().join("browser.py").to_str().expect("path"),
        )
        .output();
    assert_eq!(
        login.code(),
        Some(0),
        "{}\n{}",
        login.stdout(),
        login.stderr()
    );
}

/// The client ids the authorization server registered (dynamic client registration).
fn registrations(server: &OAuthServer) -> Vec<String> {
    server.stats()["registrations"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 51 item 18: the authorization server restarts and forgets the client mcpproxy
/// registered; the refresh is answered `invalid_client`. The server goes to `login
/// required` (saying why and with the command), stays there without reconnecting, the
/// call's error says so in words (no Rust type name), the refused registration is dropped,
/// and the next login registers a new client and works.
#[test]
fn a_client_the_restarted_authorization_server_forgot_needs_a_login_that_registers_anew() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let server = OAuthServer::start(&node);
    let config = proxy_config(&server);
    let data_dir = tempfile::tempdir().expect("tempdir");
    let proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[("MCPPROXY_CREDENTIALS", Path::new("file"))])
        .start();
    let config_path = proxy.data_dir.path().join("mcp_config.json");
    let credentials = proxy.data_dir.path().join("credentials.json");
    wait_for_state(&proxy, &config_path, "login_required");
    log_in(&proxy, &config_path);
    wait_for_state(&proxy, &config_path, "ready");
    echo(&proxy, &config_path, "hello").assert_code(0);
    let first = registrations(&server);
    assert_eq!(first.len(), 1, "one registration: {first:?}");
    let stored = std::fs::read_to_string(&credentials).expect("credentials");
    assert!(stored.contains(&first[0]), "the registration is stored");

    // The authorization server restarts with an empty store: the server refuses the access
    // token it no longer knows, and the refresh is answered `invalid_client`.
    assert_eq!(server.restart_authorization_server()["restarted"], 1);
    let restarted = std::time::Instant::now();
    let after = echo(&proxy, &config_path, "after the restart");
    assert_ne!(after.code(), Some(0), "{}", after.stdout());
    let said = format!("{}{}", after.stdout(), after.stderr());
    assert!(
        !said.contains("rmcp::") && !said.contains("::<"),
        "the call's error names a Rust type: {said}"
    );
    assert!(
        said.contains("needs a login") && said.contains("mcpproxy upstream login s"),
        "the call's error does not say a login is needed: {said}"
    );
    wait_for_state(&proxy, &config_path, "login_required");
    let took = restarted.elapsed();
    let detail = listed_server(&proxy, &config_path, "detail");
    for words in [
        "no longer knows this client (invalid_client)",
        "register anew",
        "mcpproxy upstream login s",
    ] {
        assert!(detail.contains(words), "the status says {detail:?}");
    }
    let stats = server.stats();
    let refusals = stats["token_errors"]["invalid_client"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        (1..=3).contains(&refusals),
        "the refresh was refused {refusals} time(s): {stats}"
    );

    // It stays there: no reconnection knocks at the server or the token endpoint.
    let_pass_blocking(
        Duration::from_secs(3),
        "a proxy that kept reconnecting after the refusal would knock meanwhile",
    );
    let later = server.stats();
    assert_eq!(later["refused"], stats["refused"], "{later}");
    assert_eq!(later["token_errors"], stats["token_errors"], "{later}");
    assert_eq!(state_of(&proxy, &config_path), "login_required");
    let log: Vec<String> = proxy.proc.stderr_lines.try_iter().collect();
    let attempts = log
        .iter()
        .filter(|l| l.contains("cannot connect to upstream"))
        .count();
    assert!(attempts <= 2, "{attempts} connection attempts: {log:#?}");
    // The registration the authorization server refused is forgotten.
    let stored = std::fs::read_to_string(&credentials).unwrap_or_default();
    assert!(
        !stored.contains(&first[0]),
        "the refused registration is still stored"
    );

    // The next login registers a new client, and calls work again.
    log_in(&proxy, &config_path);
    wait_for_state(&proxy, &config_path, "ready");
    let now = registrations(&server);
    assert_eq!(now.len(), 2, "a new registration: {now:?}");
    assert_ne!(now[1], first[0]);
    let answer = echo(&proxy, &config_path, "registered anew");
    assert_eq!(answer.code(), Some(0), "{}", answer.stderr());
    assert!(answer.stdout().contains("registered anew"));
    eprintln!(
        "login_required {} ms after the restart; {refusals} refused refresh(es); the call said: {said}",
        took.as_millis()
    );
}

#[test]
fn a_login_through_a_real_authorization_server_is_used_refreshed_and_lost_on_revocation() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let server = OAuthServer::start(&node);
    // The plugins' deadline of every test proxy (`config_with`): calls are judged, never
    // timed out by a loaded machine.
    let config = proxy_config(&server);
    let data_dir = tempfile::tempdir().expect("tempdir");
    let proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[("MCPPROXY_CREDENTIALS", Path::new("file"))])
        .listening()
        .start();
    let config_path = proxy.data_dir.path().join("mcp_config.json");

    // The server answers 401: mcpproxy says a login is needed, with the command, and waits.
    wait_for_state(&proxy, &config_path, "login_required");
    let refused = echo(&proxy, &config_path, "before");
    assert_ne!(refused.code(), Some(0));
    assert!(
        refused.stderr().contains("mcpproxy upstream login s"),
        "{}",
        refused.stderr()
    );
    assert_eq!(server.stats()["grants"]["authorization_code"], 0);

    // Log in through the CLI with a scripted browser: register, sign in, consent, come back.
    let login = upstream(&proxy, &config_path, "login", &["--timeout", "60"])
        .env(
            "BROWSER",
            oauth_dir().join("browser.py").to_str().expect("path"),
        )
        .output();
    assert_eq!(
        login.code(),
        Some(0),
        "{}\n{}",
        login.stdout(),
        login.stderr()
    );
    assert!(login.stderr().contains("/auth?"), "{}", login.stderr());
    assert!(
        login.stdout().contains("logged in to 's'"),
        "{}",
        login.stdout()
    );
    wait_for_state(&proxy, &config_path, "ready");
    assert_eq!(server.stats()["grants"]["authorization_code"], 1);

    let answer = echo(&proxy, &config_path, "hello");
    assert_eq!(answer.code(), Some(0), "{}", answer.stderr());
    assert!(answer.stdout().contains("hello"), "{}", answer.stdout());
    assert_eq!(server.stats()["grants"]["refresh_token"], 0);

    // The token is stored where the config and the journal are not, readable by its owner only.
    let credentials = proxy.data_dir.path().join("credentials.json");
    let mode = std::fs::metadata(&credentials)
        .expect("the tokens are kept in the data dir's credentials file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = std::fs::read_to_string(&credentials).expect("read credentials");
    let token = access_token(&stored).expect("an access token is stored");
    assert!(
        !std::fs::read_to_string(&config_path)
            .expect("config")
            .contains(&token)
    );
    let records = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "list", "-o", "json", "--config"])
        .arg_path(&config_path)
        .output();
    assert!(
        !records.stdout().contains(&token),
        "a record shows the token"
    );

    // Once the token is within 30 s of expiring, the next request refreshes it first.
    until_blocking(
        "the access token is refreshed",
        Duration::from_secs(40),
        || {
            let_pass_blocking(
                Duration::from_secs(1),
                "the token nears its expiry only as time passes: one call a second meanwhile",
            );
            let answer = echo(&proxy, &config_path, "later");
            assert_eq!(answer.code(), Some(0), "{}", answer.stderr());
            let stats = server.stats();
            if stats["grants"]["refresh_token"].as_u64() >= Some(1) {
                Ok(())
            } else {
                Err(stats.to_string())
            }
        },
    );

    // Revoked at the authorization server: the refresh is refused, and the server waits for
    // a person's login (no reconnect loop).
    assert!(server.revoke()["revoked"].as_u64() >= Some(1));
    let after = echo(&proxy, &config_path, "revoked");
    assert_ne!(
        after.code(),
        Some(0),
        "a call after revocation ran: {}",
        after.stdout()
    );
    wait_for_state(&proxy, &config_path, "login_required");
    let calls = server.stats()["calls"].clone();
    let refused_before = server.stats()["refused"].as_u64().unwrap_or_default();
    let_pass_blocking(
        Duration::from_secs(2),
        "a proxy that kept knocking after the login was lost would call meanwhile",
    );
    assert_eq!(server.stats()["calls"], calls);
    assert_eq!(
        server.stats()["refused"].as_u64().unwrap_or_default(),
        refused_before,
        "mcpproxy kept knocking after the login was lost"
    );

    // The page's way: a login started through the REST API comes back to the proxy's own
    // `/oauth/callback`, which finishes it; the server is ready again.
    let begun = rest_post(
        &format!("{}/api/v1/upstreams/s/login", proxy.base()),
        &proxy.api_key(),
    );
    assert_eq!(begun["success"], true, "{begun}");
    let redirect_uri = begun["data"]["redirect_uri"]
        .as_str()
        .expect("redirect_uri");
    assert_eq!(redirect_uri, format!("{}/oauth/callback", proxy.base()));
    let authorization_url = begun["data"]["authorization_url"].as_str().expect("url");
    let browser = Command::new(oauth_dir().join("browser.py"))
        .arg(authorization_url)
        .output()
        .expect("run the scripted browser");
    assert!(
        browser.status.success(),
        "{}",
        String::from_utf8_lossy(&browser.stderr)
    );
    wait_for_state(&proxy, &config_path, "ready");
    let answer = echo(&proxy, &config_path, "again");
    assert_eq!(answer.code(), Some(0), "{}", answer.stderr());
    // A redirect that belongs to no login is refused, and says so.
    let stray = http_status(&format!(
        "{}/oauth/callback?code=x&state=not-a-login",
        proxy.base()
    ));
    assert_eq!(stray, 400);

    // `logout` forgets the tokens.
    let logout = upstream(&proxy, &config_path, "logout", &[]).output();
    assert_eq!(logout.code(), Some(0), "{}", logout.stderr());
    assert!(
        logout.stdout().contains("forgot the tokens"),
        "{}",
        logout.stdout()
    );
    let stored = std::fs::read_to_string(&credentials).unwrap_or_default();
    assert!(!stored.contains(&token));
}

/// The access token in the credentials file's text (a JSON document holding JSON text).
fn access_token(stored: &str) -> Option<String> {
    let at = stored.find("access_token")?;
    let rest = &stored[at + "access_token".len()..];
    let start = rest.find(|c: char| c.is_ascii_alphanumeric())?;
    let token: String = rest[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    (token.len() >= 16).then_some(token)
}

/// Every `access_token` and `refresh_token` value in the credentials file's text.
fn stored_tokens(stored: &str) -> Vec<String> {
    let mut found = Vec::new();
    for key in ["access_token", "refresh_token"] {
        for (at, _) in stored.match_indices(key) {
            let rest = &stored[at + key.len()..];
            let Some(start) = rest.find(|c: char| c.is_ascii_alphanumeric()) else {
                continue;
            };
            let token: String = rest[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            if token.len() >= 16 && !found.contains(&token) {
                found.push(token);
            }
        }
    }
    found
}

/// GET `url` (with the API key when given): the status line and the body, as text.
fn get_text(url: &str, key: Option<&str>) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new().get(url);
        if let Some(key) = key {
            request = request.header("X-API-Key", key);
        }
        let response = request.send().await.expect("GET");
        format!(
            "{} {}",
            response.status(),
            response.text().await.expect("body")
        )
    })
}

/// docs/security.md: a remote server's OAuth tokens are never in a log line, a record, a
/// REST answer or `/metrics`. The proxy runs with `RUST_LOG=trace` (every library's every
/// line) through a login, calls, a refresh and a second login through the REST API; then
/// no access or refresh token it ever stored appears in its log, in what the REST API and
/// `/metrics` answer, or in what the CLI printed.
#[test]
fn oauth_tokens_never_reach_the_log_the_rest_api_or_metrics() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let server = OAuthServer::start(&node);
    // The plugins' deadline of every test proxy (`config_with`): calls are judged, never
    // timed out by a loaded machine.
    let config = proxy_config(&server);
    let data_dir = tempfile::tempdir().expect("tempdir");
    let proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[
            ("MCPPROXY_CREDENTIALS", Path::new("file")),
            ("RUST_LOG", Path::new("trace")),
        ])
        .args(&["-vv"])
        .listening()
        .start();
    let config_path = proxy.data_dir.path().join("mcp_config.json");
    let credentials = proxy.data_dir.path().join("credentials.json");
    wait_for_state(&proxy, &config_path, "login_required");

    let mut printed = String::new();
    let login = upstream(&proxy, &config_path, "login", &["--timeout", "60"])
        .env(
            "BROWSER",
            oauth_dir().join("browser.py").to_str().expect("path"),
        )
        .output();
    assert_eq!(login.code(), Some(0), "{}", login.stderr());
    printed.push_str(&login.stdout());
    printed.push_str(&login.stderr());
    wait_for_state(&proxy, &config_path, "ready");
    let mut tokens = stored_tokens(&std::fs::read_to_string(&credentials).expect("credentials"));
    assert!(
        tokens.len() >= 2,
        "an access and a refresh token: {tokens:?}"
    );

    // Calls until the access token is refreshed (it lives 35 s; refreshed with 30 s left).
    let mut first = true;
    until_blocking("the token is refreshed", Duration::from_secs(40), || {
        if !first {
            let_pass_blocking(
                Duration::from_secs(1),
                "the token nears its expiry only as time passes: one call a second meanwhile",
            );
        }
        first = false;
        let answer = echo(&proxy, &config_path, "hello");
        assert_eq!(answer.code(), Some(0), "{}", answer.stderr());
        printed.push_str(&answer.stdout());
        printed.push_str(&answer.stderr());
        let stats = server.stats();
        if stats["grants"]["refresh_token"].as_u64() >= Some(1) {
            Ok(())
        } else {
            Err(stats.to_string())
        }
    });
    echo(&proxy, &config_path, "after the refresh").assert_code(0);

    // A second login, the page's way, through the REST API and the proxy's callback.
    let begun = rest_post(
        &format!("{}/api/v1/upstreams/s/login", proxy.base()),
        &proxy.api_key(),
    );
    printed.push_str(&begun.to_string());
    let authorization_url = begun["data"]["authorization_url"].as_str().expect("url");
    let browser = Command::new(oauth_dir().join("browser.py"))
        .arg(authorization_url)
        .output()
        .expect("run the scripted browser");
    assert!(browser.status.success());
    printed.push_str(&String::from_utf8_lossy(&browser.stdout));
    wait_for_state(&proxy, &config_path, "ready");
    echo(&proxy, &config_path, "after the second login").assert_code(0);
    for token in stored_tokens(&std::fs::read_to_string(&credentials).expect("credentials")) {
        if !tokens.contains(&token) {
            tokens.push(token);
        }
    }
    assert!(tokens.len() >= 4, "two logins' tokens: {tokens:?}");

    // What the REST API and /metrics answer.
    let key = proxy.api_key();
    let base = proxy.base();
    let mut answers = Vec::new();
    for path in [
        "/api/v1/status",
        "/api/v1/upstreams",
        "/api/v1/upstreams/s",
        "/api/v1/upstreams/s/analysis",
        "/api/v1/upstreams/s/logs",
        "/api/v1/activity?limit=1000",
        "/api/v1/tools",
    ] {
        answers.push((path, get_text(&format!("{base}{path}"), Some(&key))));
    }
    answers.push(("/metrics", get_text(&format!("{base}/metrics"), None)));
    assert!(
        answers
            .iter()
            .any(|(_, a)| a.contains("oauth") || a.contains("login")),
        "the answers say nothing of the login: {answers:?}"
    );

    // The log: everything mcpproxy wrote on stderr, at trace level.
    let log: Vec<String> = proxy.proc.stderr_lines.try_iter().collect();
    assert!(
        log.iter().any(|l| l.contains("TRACE")),
        "the log is not at trace level"
    );
    for token in &tokens {
        for line in &log {
            assert!(
                !line.contains(token.as_str()),
                "a log line shows a token: {line}"
            );
        }
        for (path, answer) in &answers {
            assert!(
                !answer.contains(token.as_str()),
                "{path} shows a token: {answer}"
            );
        }
        assert!(
            !printed.contains(token.as_str()),
            "the CLI printed a token: {printed}"
        );
    }
}
