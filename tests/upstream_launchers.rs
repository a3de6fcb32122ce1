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
    let proxy = Proxy::start(
        &config_with(vec![
            npx_server(&npm.url(), cache.path(), &[]),
            uvx_server(&pypi.url(), cache.path(), &[]),
        ]),
        &[],
    );
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
    let mut first = Proxy::start(
        &config_with(vec![
            npx_server(&npm_url, cache.path(), &[]),
            uvx_server(&pypi_url, cache.path(), &[]),
        ]),
        &[],
    );
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
    let second = Proxy::start(
        &config_with(vec![
            npx_server(&npm_url, cache.path(), &pairs(npx_offline)),
            uvx_server(&pypi_url, cache.path(), &pairs(uv_offline)),
        ]),
        &[],
    );
    both_work(&second).await;
}
