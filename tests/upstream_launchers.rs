//! Servers started through package launchers (`npx -y`, `uvx`) that download them from
//! registries on loopback (`support::registries`: verdaccio and pypiserver, no upstream of
//! their own): the harness itself, without a sandbox (`"isolation": {"enabled": false}`),
//! so a failure here is the registries' or the launchers', never the sandbox's. The first
//! start downloads into caches under a temp dir; a second start with the registries gone
//! runs from those caches.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Client, Proxy, call, config_with, connect, is_error, text};
use crate::support::registries::{
    NpmRegistry, PY_PACKAGE, PY_VERSION, PypiIndex, npm_env, npm_spec, npm_version, uv_env, uvx,
};
use crate::support::sandbox_supported;

/// server-everything through `npx -y` from the registry at `registry`.
fn npx_server(registry: &str, cache: &Path, extra_env: &[(&str, &str)]) -> Value {
    let mut env = npm_env(registry, cache);
    add(&mut env, extra_env);
    json!({
        "name": "everything",
        "command": "npx",
        "args": ["-y", npm_spec(), "stdio"],
        "env": env,
        "isolation": {"enabled": false},
    })
}

/// The echo server through `uvx` from the index at `index`.
fn uvx_server(index: &str, cache: &Path, extra_env: &[(&str, &str)]) -> Value {
    let mut env = uv_env(cache);
    add(&mut env, extra_env);
    json!({
        "name": "py",
        "command": uvx(),
        "args": ["--index-url", index, format!("{PY_PACKAGE}=={PY_VERSION}")],
        "env": env,
        "isolation": {"enabled": false},
    })
}

fn add(env: &mut Map<String, Value>, extra: &[(&str, &str)]) {
    for (k, v) in extra {
        env.insert((*k).to_owned(), json!(v));
    }
}

fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The names `retrieve_tools` finds for `query`.
async fn found(client: &Client, query: &str) -> Vec<String> {
    let hits = call(
        client,
        "retrieve_tools",
        json!({"query": query, "limit": 50}),
    )
    .await
    .expect("retrieve_tools");
    let body: Value = serde_json::from_str(&text(&hits)).expect("retrieve_tools answers JSON");
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Both servers listed (a first start downloads, so they are waited for) and each answering
/// one call.
async fn both_work(proxy: &Proxy) {
    let client = connect(&proxy.url).await;
    crate::support::poll::until(
        "both servers' tools are listed",
        std::time::Duration::from_secs(180),
        || async {
            let names = found(&client, "echo").await;
            for (server, tool) in [("everything", "everything:echo"), ("py", "py:echo")] {
                if !names.iter().any(|n| n == tool) {
                    let logs = TestCommand::new(proxy.data_dir.path())
                        .args(["upstream", "logs", server])
                        .output();
                    return Err(format!(
                        "{tool} not listed: {names:?}; its log:\n{}{}",
                        logs.stdout(),
                        logs.stderr()
                    ));
                }
            }
            Ok(())
        },
    )
    .await;
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "everything:echo", "args": {"message": "through the registry"}}),
    )
    .await
    .expect("call everything:echo");
    assert!(!is_error(&echoed), "{}", text(&echoed));
    assert!(
        text(&echoed).contains("through the registry"),
        "{}",
        text(&echoed)
    );
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "py:echo", "args": {"text": "from the index"}}),
    )
    .await
    .expect("call py:echo");
    assert!(!is_error(&echoed), "{}", text(&echoed));
    assert_eq!(text(&echoed), format!("echo {PY_VERSION}: from the index"));
    client.cancel().await.expect("close the client");
}

/// `npx -y` and `uvx` install their servers from the loopback registries with empty caches
/// and serve their tools.
#[tokio::test(flavor = "multi_thread")]
async fn npx_and_uvx_servers_install_from_loopback_registries() {
    let Some(npm) = NpmRegistry::start() else {
        return;
    };
    let Some(pypi) = PypiIndex::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let proxy = Proxy::builder(&config_with(vec![
        npx_server(&npm.url(), cache.path(), &[]),
        uvx_server(&pypi.url(), cache.path(), &[]),
    ]))
    .start();
    both_work(&proxy).await;
    // They really came from the registries, into the caches given in their env.
    assert!(
        cache.path().join("npm/_npx").is_dir(),
        "npx installed nothing into its cache"
    );
    let archive = cache.path().join("uv/cache/archive-v0");
    assert!(
        std::fs::read_dir(&archive).is_ok_and(|mut d| d.next().is_some()),
        "uvx installed nothing into {}",
        archive.display()
    );
    drop(npm);
}

/// A second start with both registries stopped runs the servers from the caches the first
/// start filled (told to prefer them, as the launchers' `offline_env` says).
#[tokio::test(flavor = "multi_thread")]
async fn a_second_start_runs_from_the_cache_with_the_registries_gone() {
    let Some(mut npm) = NpmRegistry::start() else {
        return;
    };
    let Some(mut pypi) = PypiIndex::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let (npm_url, pypi_url) = (npm.url(), pypi.url());
    let mut first = Proxy::builder(&config_with(vec![
        npx_server(&npm_url, cache.path(), &[]),
        uvx_server(&pypi_url, cache.path(), &[]),
    ]))
    .start();
    both_work(&first).await;
    first.stop();
    npm.stop();
    pypi.stop();

    // The same launches, with the launchers told to use what they have.
    let plan = |command: &str, server: &Value| {
        let args: Vec<String> = server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        mcpproxy_sandbox::launcher_plan(
            command,
            &args,
            &Default::default(),
            &|_| None,
            None,
            cache.path(),
        )
        .expect("a launcher plan")
    };
    let npx = npx_server(&npm_url, cache.path(), &[]);
    let uv = uvx_server(&pypi_url, cache.path(), &[]);
    let (npx_plan, uv_plan) = (plan("npx", &npx), plan(&uvx().display().to_string(), &uv));
    // What the first start put in the caches, read from their layout.
    assert_eq!(
        mcpproxy_sandbox::resolved_version(&npx_plan, cache.path()),
        Some(npm_version())
    );
    assert_eq!(
        mcpproxy_sandbox::resolved_version(&uv_plan, cache.path()).as_deref(),
        Some(PY_VERSION)
    );
    let (npx_offline, uv_offline) = (&npx_plan.offline_env, &uv_plan.offline_env);
    assert!(!npx_offline.is_empty() && !uv_offline.is_empty());
    let second = Proxy::builder(&config_with(vec![
        npx_server(&npm_url, cache.path(), &pairs(npx_offline)),
        uvx_server(&pypi_url, cache.path(), &pairs(uv_offline)),
    ]))
    .start();
    both_work(&second).await;
}

/// `npx -y` in the default sandbox: `npm_config_registry` names the loopback registry, and
/// nothing else is configured for the sandbox.
fn sandboxed_npx_server(registry: &str) -> Value {
    let mut env = Map::new();
    for (k, v) in [
        ("npm_config_registry", registry),
        ("npm_config_userconfig", "/dev/null"),
        ("npm_config_update_notifier", "false"),
        ("npm_config_audit", "false"),
        ("npm_config_fund", "false"),
    ] {
        env.insert(k.to_owned(), json!(v));
    }
    json!({
        "name": "everything",
        "command": "npx",
        "args": ["-y", npm_spec(), "stdio"],
        "env": env,
        "isolation": {},
    })
}

/// `uvx` in the default sandbox, with the venv's interpreter and no download of Python.
fn sandboxed_uvx_server(index: &str) -> Value {
    let mut env = uv_env(Path::new("/unused"));
    for cache_key in ["UV_CACHE_DIR", "UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR"] {
        env.remove(cache_key);
    }
    json!({
        "name": "py",
        "command": uvx(),
        "args": ["--index-url", index, format!("{PY_PACKAGE}=={PY_VERSION}")],
        "env": env,
        "isolation": {},
    })
}

/// `npx -y` and `uvx` in the default sandbox: the first start downloads through the egress
/// proxy (each registry joins the server's allow-list, and each connection is an `egress`
/// record) into a cache of the server's own under the data dir; a connection to anything
/// else is refused and recorded; the second start, with both registries gone, runs from that
/// cache (offline) in the same sandbox.
#[tokio::test(flavor = "multi_thread")]
async fn launchers_run_sandboxed_through_the_egress_proxy_and_then_from_their_cache() {
    if !sandbox_supported() {
        return;
    }
    let Some(mut npm) = NpmRegistry::start() else {
        return;
    };
    let Some(mut pypi) = PypiIndex::start() else {
        return;
    };
    let config = config_with(vec![
        sandboxed_npx_server(&npm.url()),
        sandboxed_uvx_server(&pypi.url()),
    ]);
    let mut first = Proxy::builder(&config).start();
    both_work(&first).await;

    // Through the egress proxy, to the registries and nowhere else.
    let records = first.finished_records("egress", 2).await;
    for (server, registry) in [("everything", npm.host_port()), ("py", pypi.host_port())] {
        let carried = records
            .iter()
            .filter(|r| r["server_name"] == server && r["status"] == "success")
            .collect::<Vec<_>>();
        assert!(!carried.is_empty(), "no egress of {server}: {records:?}");
        assert!(
            carried.iter().all(|r| r["tool_name"] == registry.as_str()),
            "{server} reached more than {registry}: {records:?}"
        );
    }
    // Any other destination is refused, and recorded: a service on this machine's loopback
    // that its allow-list does not name.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in other.incoming().flatten() {
            use std::io::Write;
            let mut stream = stream;
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreached");
        }
    });
    let client = connect(&first.url).await;
    let fetched = call(
        &client,
        "call_tool_read",
        json!({"name": "py:fetch", "args": {"url": format!("http://127.0.0.1:{other_port}/")}}),
    )
    .await
    .expect("call py:fetch");
    assert!(is_error(&fetched), "{}", text(&fetched));
    assert!(
        text(&fetched).starts_with("403: ")
            && text(&fetched).contains("not in the server's egress allow-list"),
        "{}",
        text(&fetched)
    );
    client.cancel().await.expect("close the client");
    let destination = format!("127.0.0.1:{other_port}");
    let records = first.finished_records("egress", 3).await;
    assert!(
        records.iter().any(|r| r["server_name"] == "py"
            && r["status"] == "blocked"
            && r["tool_name"] == destination.as_str()),
        "{records:?}"
    );

    let config_file = first.data_dir.path().join("mcp_config.json");
    let logs = TestCommand::new(first.data_dir.path())
        .args(["upstream", "logs", "everything", "--config"])
        .args([&config_file])
        .output();
    assert!(
        logs.stdout()
            .contains(&format!("npx runs {} from {}", npm_spec(), npm.url()))
            && logs.stdout().contains("first start: downloads it"),
        "{}",
        logs.stdout()
    );
    // The caches are the servers' own, under the data dir.
    let launchers = first.data_dir.path().join("launchers");
    let dirs: Vec<_> = std::fs::read_dir(&launchers)
        .expect("a launchers dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(
        dirs.iter().any(|d| d.join("npm/_npx").is_dir()),
        "npx's cache is not under {}",
        launchers.display()
    );
    // The approval shows where the launcher downloads from.
    let inspect = TestCommand::new(first.data_dir.path())
        .args(["upstream", "inspect", "py", "--config"])
        .args([&config_file])
        .output();
    assert!(
        inspect.stdout().contains(&format!(
            "launcher: uvx runs {PY_PACKAGE}=={PY_VERSION} from {}",
            pypi.url()
        )),
        "{}",
        inspect.stdout()
    );

    // Second start, registries gone: from the cache, still sandboxed.
    first.stop();
    npm.stop();
    pypi.stop();
    let data_dir = std::mem::replace(&mut first.data_dir, tempfile::tempdir().unwrap());
    let second = Proxy::builder(&config).data_dir(data_dir).start();
    both_work(&second).await;
    let logs = TestCommand::new(second.data_dir.path())
        .args(["upstream", "logs", "everything", "--config"])
        .args([&config_file])
        .output();
    assert!(
        logs.stdout().contains(&format!(
            "version {} from its cache (offline)",
            npm_version()
        )),
        "{}",
        logs.stdout()
    );
}

/// A Claude Desktop config whose servers are `npx -y` and `uvx`, imported by a person: each
/// starts in the default sandbox after one approval, downloading from its registry.
#[tokio::test(flavor = "multi_thread")]
async fn imported_launcher_servers_start_sandboxed_after_one_approval_each() {
    if !sandbox_supported() {
        return;
    }
    let Some(npm) = NpmRegistry::start() else {
        return;
    };
    let Some(pypi) = PypiIndex::start() else {
        return;
    };
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let config = proxy.data_dir.path().join("mcp_config.json");
    let desktop = tempfile::tempdir().unwrap();
    let from = desktop.path().join("claude_desktop_config.json");
    // Claude Desktop's form: servers by name, no sandbox settings of mcpproxy's.
    let entry = |server: Value| json!({"command": server["command"], "args": server["args"], "env": server["env"]});
    let claude = json!({"mcpServers": {
        "everything": entry(sandboxed_npx_server(&npm.url())),
        "py": entry(sandboxed_uvx_server(&pypi.url())),
    }});
    std::fs::write(&from, claude.to_string()).unwrap();
    let import = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "import", "--yes", "--from"])
        .args([&from])
        .args(["--config"])
        .args([&config])
        .output();
    import.assert_code(0);
    assert_eq!(
        import.stdout().matches("added (quarantined)").count(),
        2,
        "{}",
        import.stdout()
    );
    for name in ["everything", "py"] {
        proxy
            .approve_when_listed(name, std::time::Duration::from_secs(180))
            .await;
    }
    both_work(&proxy).await;
    let list = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "list", "--config"])
        .args([&config])
        .output();
    assert_eq!(
        list.stdout()
            .matches("on (network allow 127.0.0.1:")
            .count(),
        2,
        "{}",
        list.stdout()
    );
}
