//! Whole-file tests: defaults, the full example, loading from disk, and the golden files in
//! `tests/fixtures/config/{valid,invalid}`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::model::{DEFAULT_DIR, DEFAULT_REDACT_KEYS, FILE_NAME, MAX_CONFIG_BYTES};
use mcpproxy_policy::Limits;
use mcpproxy_policy::journal::{Durability, Retention};

use super::*;

fn parse(text: &str) -> Config {
    match Config::from_json(text, "t.json") {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    }
}

fn error(text: &str) -> String {
    match Config::from_json(text, "t.json") {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn empty_object_is_the_default() {
    let config = parse("{}");
    assert_eq!(config, Config::default());
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.tool_call_timeout, Duration::from_secs(60));
    assert!(config.intent.strict_server_validation);
    assert!(!config.intent.require_operation_type);
    assert_eq!(config.plugins.limits.timeout, Duration::from_millis(50));
    assert_eq!(config.plugins.limits.memory_bytes, 32 << 20);
    assert_eq!(config.plugins.annotators, None);
    assert_eq!(config.activity.durability, Durability::Sync);
    assert_eq!(
        config.activity.retention.max_age,
        Duration::from_secs(90 * 86_400)
    );
    assert_eq!(config.activity.retention.max_records, 1_000_000);
    assert_eq!(config.activity.retention.max_bytes, 1 << 30);
    assert_eq!(config.activity.redact_keys, DEFAULT_REDACT_KEYS);
    assert_eq!(
        config.upstream.reconnect_initial,
        Duration::from_millis(500)
    );
    assert_eq!(config.upstream.reconnect_max, Duration::from_secs(30));
    assert_eq!(config.upstream.tools_refresh, Duration::from_secs(300));
    assert!(!config.upstream.advertise_roots);
}

#[test]
fn full_example_reads_every_key() {
    let text = fs::read_to_string(fixtures().join("valid/full.json")).expect("full.json");
    let config = Config::from_json_in(
        &text,
        "full.json",
        Path::new("/etc/mcp"),
        Some(Path::new("/home/u")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.listen.to_string(), "0.0.0.0:9090");
    assert_eq!(
        config.data_dir.as_deref(),
        Some(Path::new("/home/u/.mcpproxy-test"))
    );
    assert_eq!(config.api_key.as_deref(), Some("s3cret-key"));
    assert_eq!(config.allowed_origins, ["https://app.example.com"]);
    assert_eq!(config.allowed_hosts, ["proxy.lan:9090"]);
    assert_eq!(config.tool_call_timeout, Duration::from_secs(30));
    assert_eq!(
        config.http,
        HttpConfig {
            auth_token: Some("0123456789abcdef0123456789abcdef".into()),
            max_connections: 512,
            max_sessions: 64,
            max_sessions_per_client: 8,
            header_timeout: Duration::from_secs(5),
            session_idle: Duration::from_secs(600),
            metrics_public: true,
        }
    );
    assert!(!format!("{config:?}").contains("0123456789abcdef"));

    let [github, remote] = &config.servers[..] else {
        panic!("two servers: {:?}", config.servers)
    };
    assert_eq!(github.name, "github");
    assert!(github.enabled);
    assert!(!github.quarantined);
    assert_eq!(github.tool_call_timeout, Some(Duration::from_secs(5)));
    let Transport::Stdio {
        command,
        args,
        env,
        working_dir,
    } = &github.transport
    else {
        panic!("stdio: {github:?}")
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(env.get("GITHUB_TOKEN").map(String::as_str), Some("ghp_x"));
    assert_eq!(working_dir.as_deref(), Some(Path::new("/etc/mcp/work")));
    assert_eq!(remote.name, "remote_docs");
    assert!(!remote.enabled);
    assert!(remote.quarantined);
    assert_eq!(remote.tool_call_timeout, None);
    assert_eq!(
        remote.transport,
        Transport::Http {
            url: "https://docs.example.com/mcp".to_owned(),
            headers: [("Authorization".to_owned(), "Bearer abc".to_owned())].into(),
        }
    );
    assert_eq!(config.server("remote_docs"), Some(remote));

    assert!(!config.intent.strict_server_validation);
    assert!(config.intent.require_operation_type);
    assert_eq!(
        config.intent.as_settings(),
        serde_json::json!({"strict_server_validation": false, "require_operation_type": true})
    );

    let plugins = &config.plugins;
    assert_eq!(plugins.dir.as_deref(), Some(Path::new("/etc/mcp/plugins")));
    assert_eq!(
        plugins.annotators.as_deref(),
        Some(&["prefix-annotator".to_owned()][..])
    );
    assert_eq!(
        plugins.validators.as_deref(),
        Some(&["intent-matrix".to_owned(), "routing-policy".to_owned()][..])
    );
    assert_eq!(plugins.sinks, ["clickhouse-sink"]);
    let global = Limits {
        timeout: Duration::from_millis(100),
        memory_bytes: 64 << 20,
        reuse_instance: false,
    };
    assert_eq!(plugins.limits, global);
    assert_eq!(plugins.limits_for("intent-matrix"), global);
    assert_eq!(
        plugins.limits_for("clickhouse-sink"),
        Limits {
            timeout: Duration::from_millis(2000),
            memory_bytes: 64 << 20,
            reuse_instance: true,
        },
        "a key left out of plugin_limits comes from plugins.limits"
    );
    assert_eq!(
        plugins.settings_for("clickhouse-sink"),
        serde_json::json!({"url": "http://127.0.0.1:8123", "table": "activity"})
    );
    assert_eq!(plugins.settings_for("intent-matrix"), serde_json::json!({}));

    let activity = &config.activity;
    assert_eq!(
        activity.durability,
        Durability::Async {
            flush: Duration::from_millis(250)
        }
    );
    assert_eq!(
        activity.retention,
        Retention {
            max_age: Duration::from_secs(30 * 86_400),
            max_records: 5000,
            max_bytes: 10_485_760,
            max_undelivered_bytes: 4 << 30,
            ..Retention::default()
        }
    );
    assert_eq!(activity.max_argument_bytes, 1024);
    assert_eq!(activity.redact_keys, ["password", "cookie"]);

    assert_eq!(
        config.upstream,
        UpstreamConfig {
            reconnect_initial: Duration::from_millis(250),
            reconnect_max: Duration::from_secs(10),
            tools_refresh: Duration::from_secs(60),
            advertise_roots: true,
        }
    );
}

#[test]
fn debug_output_hides_secrets() {
    let config = parse(
        r#"{"api_key": "k-123", "mcpServers": [
            {"name": "a", "command": "x", "env": {"TOKEN": "t-456"}},
            {"name": "b", "url": "http://h", "headers": {"Authorization": "Bearer b-789"}}
        ]}"#,
    );
    let debug = format!("{config:?}");
    for secret in ["k-123", "t-456", "b-789"] {
        assert!(!debug.contains(secret), "{debug}");
    }
    assert!(
        debug.contains("TOKEN") && debug.contains("Authorization"),
        "{debug}"
    );
}

#[test]
fn map_form_takes_names_from_keys() {
    let config = parse(
        r#"{"mcpServers": {
            "github": {"command": "npx", "args": ["-y", "server-github"]},
            "docs": {"name": "docs", "url": "http://127.0.0.1:3000/mcp"}
        }}"#,
    );
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "docs"]);
    assert_eq!(
        error(r#"{"mcpServers": {"github": {"name": "gh", "command": "x"}}}"#),
        "t.json: mcpServers.github.name: 'gh' differs from the server's key 'github': drop 'name' or make the two the same"
    );
    assert_eq!(
        error(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#),
        "t.json: mcpServers.a: the server 'a' is defined twice: server names must be unique"
    );
    assert_eq!(
        error(r#"{"mcpServers": {"git hub": {"command": "x"}}}"#),
        "t.json: mcpServers[\"git hub\"]: 'git hub' is not a valid server name: use letters, digits, '-' and '_' (no ':' — it separates server and tool)"
    );
}

#[test]
fn protocol_is_inferred_or_checked() {
    let config = parse(
        r#"{"mcpServers": [
            {"name": "a", "command": "x", "protocol": "stdio"},
            {"name": "b", "url": "http://h/mcp", "protocol": "streamable-http"},
            {"name": "c", "url": "http://h/mcp", "protocol": "http"}
        ]}"#,
    );
    assert!(matches!(
        config.servers[0].transport,
        Transport::Stdio { .. }
    ));
    assert!(matches!(
        config.servers[1].transport,
        Transport::Http { .. }
    ));
    assert!(matches!(
        config.servers[2].transport,
        Transport::Http { .. }
    ));
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "command": "x", "protocol": "http"}]}"#),
        "t.json: mcpServers[0].protocol: 'http' needs 'url', but this server has 'command'"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "url": "http://h", "protocol": "stdio"}]}"#),
        "t.json: mcpServers[0].protocol: 'stdio' needs 'command', but this server has 'url'"
    );
    assert!(
        error(r#"{"mcpServers": [{"name": "a", "url": "http://h", "protocol": "sse"}]}"#)
            .contains("'sse' is not supported")
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "protocol": "stdio"}]}"#),
        "t.json: mcpServers[0]: missing key 'command': a stdio server is started with a command"
    );
}

#[test]
fn stdio_and_http_keys_do_not_mix() {
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "command": "x", "headers": {}}]}"#),
        "t.json: mcpServers[0].headers: 'headers' only applies to a server reached by 'url'; this one has 'command'"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "url": "http://h", "env": {}}]}"#),
        "t.json: mcpServers[0].env: 'env' only applies to a server started with 'command'; this one has 'url'"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "url": "http://h", "working_dir": "/"}]}"#),
        "t.json: mcpServers[0].working_dir: 'working_dir' only applies to a server started with 'command'; this one has 'url'"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "command": " "}]}"#),
        "t.json: mcpServers[0].command: the command is empty"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "command": "x", "env": {"A=B": "c"}}]}"#),
        "t.json: mcpServers[0].env[\"A=B\"]: 'A=B' is not an environment variable name: it must be non-empty, without '='"
    );
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "url": "http://h", "headers": {"X Key": "v"}}]}"#),
        "t.json: mcpServers[0].headers[\"X Key\"]: 'X Key' is not an HTTP header name: use letters, digits and '-'"
    );
}

#[test]
fn server_timeouts_and_flags() {
    let config = parse(
        r#"{"mcpServers": [{"name": "a", "command": "x", "enabled": false, "quarantined": true,
            "tool_call_timeout_ms": 3600000}]}"#,
    );
    let server = &config.servers[0];
    assert!(!server.enabled);
    assert!(server.quarantined);
    assert_eq!(server.tool_call_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(
        error(r#"{"mcpServers": [{"name": "a", "command": "x", "tool_call_timeout_ms": 0}]}"#),
        "t.json: mcpServers[0].tool_call_timeout_ms: 0 is out of range: use 1 to 3600000 milliseconds (1 hour)"
    );
}

#[test]
fn plugin_lists_and_limits() {
    let config =
        parse(r#"{"plugins": {"annotators": [], "plugin_limits": {"x": {"memory_mib": 4096}}}}"#);
    assert_eq!(
        config.plugins.annotators,
        Some(vec![]),
        "an empty list runs no annotator"
    );
    assert_eq!(config.plugins.validators, None);
    assert_eq!(config.plugins.limits_for("x").memory_bytes, 4096 << 20);
    assert_eq!(
        config.plugins.limits_for("x").timeout,
        Duration::from_millis(50)
    );
    assert_eq!(
        error(r#"{"plugins": {"validators": ["intent-matrix", "Routing"]}}"#),
        "t.json: plugins.validators[1]: 'Routing' is not a valid plugin name: use 1 to 64 lowercase letters, digits and '-' (not first or last)"
    );
    assert_eq!(
        error(r#"{"plugins": {"sinks": ["a", "b", "a"]}}"#),
        "t.json: plugins.sinks[2]: 'a' is already listed at plugins.sinks[0]"
    );
    assert_eq!(
        error(r#"{"plugins": {"sinks": ["clickhouse-sink"]}}"#),
        "t.json: plugins.settings.clickhouse-sink: the sink 'clickhouse-sink' has no `url`, so it may reach no host: set plugins.settings.clickhouse-sink.url to where it should deliver, e.g. {\"url\": \"http://127.0.0.1:8123\"} (see docs/sinks.md)"
    );
    assert_eq!(
        error(
            r#"{"plugins": {"sinks": ["s"], "settings": {"s": {"url": "ftp://x", "allowed_hosts": []}}}}"#
        )
        .split(" (a sink may reach")
        .next(),
        Some(r#"t.json: plugins.settings.s: url: "ftp://x": only http and https are supported"#)
    );
    assert_eq!(
        error(r#"{"plugins": {"plugin_limits": {"x": {"memory_mib": 0}}}}"#),
        "t.json: plugins.plugin_limits.x.memory_mib: 0 is out of range: use 1 to 4096 MiB"
    );
    assert_eq!(
        error(r#"{"plugins": {"settings": {"x_y": {}}}}"#),
        "t.json: plugins.settings.x_y: 'x_y' is not a valid plugin name: use 1 to 64 lowercase letters, digits and '-' (not first or last)"
    );
}

#[test]
fn activity_and_upstream_ranges() {
    assert_eq!(
        error(r#"{"activity": {"durability": "fast"}}"#),
        "t.json: activity.durability: 'fast' is not a durability: use 'sync' (a record is on disk before the call returns) or 'async' (written within async_flush_ms)"
    );
    assert_eq!(
        error(r#"{"activity": {"retention": {"max_records": 0}}}"#),
        "t.json: activity.retention.max_records: 0 is out of range: use 1 or more"
    );
    assert_eq!(
        parse(r#"{"activity": {"max_argument_bytes": 0}}"#)
            .activity
            .max_argument_bytes,
        0
    );
    assert_eq!(
        parse(r#"{"activity": {"checkpoints": {"every_records": 0, "every_secs": 5}}}"#)
            .activity
            .checkpoints,
        Checkpoints {
            every_records: 0,
            every: Duration::from_secs(5),
            signing_key: None,
        }
    );
    assert_eq!(
        parse(r#"{"activity": {"checkpoints": {"signing_key": "${secret:AUDIT_KEY}"}}}"#)
            .activity
            .checkpoints
            .signing_key
            .as_deref(),
        Some("${secret:AUDIT_KEY}")
    );
    for not_a_reference in [
        r#""0707070707070707070707070707070707070707070707070707070707070707""#,
        r#""key: ${secret:AUDIT_KEY}""#,
        r#""${secret:A}${secret:B}""#,
    ] {
        let e = error(&format!(
            r#"{{"activity": {{"checkpoints": {{"signing_key": {not_a_reference}}}}}}}"#
        ));
        assert!(
            e.starts_with("t.json: activity.checkpoints.signing_key: must be one reference")
                && !e.contains("0707"),
            "{e}"
        );
    }
    assert!(
        error(r#"{"activity": {"checkpoints": {"signing_key": "${vault:X}"}}}"#)
            .contains("unknown scheme 'vault'")
    );
    assert_eq!(
        error(r#"{"activity": {"checkpoints": {"every_secs": 0}}}"#),
        "t.json: activity.checkpoints.every_secs: 0 is out of range: use 1 to 86400 seconds"
    );
    assert_eq!(
        error(r#"{"activity": {"checkpoints": {"every_record": 5}}}"#),
        "t.json: activity.checkpoints.every_record: unknown key 'every_record' (did you mean 'every_records'?); valid keys in activity.checkpoints: every_records, every_secs, signing_key"
    );
    assert_eq!(
        error(r#"{"upstream": {"reconnect_initial_ms": 60000}}"#),
        "t.json: upstream.reconnect_initial_ms: 60000 is more than upstream.reconnect_max_ms (30000, the default): the first retry delay cannot exceed the longest"
    );
    let upstream =
        parse(r#"{"upstream": {"reconnect_initial_ms": 1000, "reconnect_max_ms": 1000}}"#).upstream;
    assert_eq!(upstream.reconnect_initial, upstream.reconnect_max);
}

#[test]
fn top_level_values() {
    assert_eq!(
        parse(r#"{"listen": "[::1]:0"}"#).listen.to_string(),
        "[::1]:0"
    );
    assert_eq!(
        error(r#"{"listen": "localhost:8080"}"#),
        "t.json: listen: 'localhost:8080' is not a valid listen address: use IP:PORT, e.g. 127.0.0.1:8080 (write 127.0.0.1:8080 for localhost)"
    );
    assert!(
        error(r#"{"api_key": ""}"#).starts_with("t.json: api_key: the API key must be non-empty")
    );
    assert_eq!(
        error(r#"{"allowed_origins": ["https://a.example/"]}"#),
        "t.json: allowed_origins[0]: 'https://a.example/' is not an origin: write scheme://host or scheme://host:port with no path, e.g. https://app.example.com"
    );
    assert_eq!(
        error(r#"{"allowed_hosts": ["http://proxy.lan"]}"#),
        "t.json: allowed_hosts[0]: 'http://proxy.lan' is not a Host header value: write host or host:port with no scheme or path, e.g. proxy.lan:8080"
    );
    assert_eq!(
        error(""),
        "t.json: the file is empty: write `{}` for a config that keeps every default"
    );
    assert_eq!(
        error(r#"{"listen": "127.0.0.1:1", "listen": "127.0.0.1:2"}"#),
        "t.json: listen: the key 'listen' is given twice: keep one"
    );
}

#[test]
fn default_path_is_under_home() {
    assert_eq!(
        default_path(Some(Path::new("/home/u"))),
        Path::new("/home/u/.mcpproxy/mcp_config.json")
    );
    assert_eq!(default_path(None), Path::new(".mcpproxy/mcp_config.json"));
}

#[test]
fn load_without_a_file_gives_defaults() {
    let home = tempfile::tempdir().expect("tempdir");
    let loaded = load(None, Some(home.path())).expect("defaults");
    assert_eq!(loaded.path, None);
    assert_eq!(loaded.config, Config::default());
    assert_eq!(load(None, None).expect("defaults").path, None);
}

#[test]
fn load_reads_the_default_file_and_resolves_paths() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path().join(DEFAULT_DIR);
    fs::create_dir(&dir).expect("mkdir");
    let file = dir.join(FILE_NAME);
    fs::write(
        &file,
        r#"{"data_dir": "~/state", "plugins": {"dir": "plugins"},
            "mcpServers": [{"name": "a", "command": "x", "working_dir": "."}]}"#,
    )
    .expect("write");
    let loaded = load(None, Some(home.path())).expect("load");
    assert_eq!(loaded.path.as_deref(), Some(file.as_path()));
    let config = loaded.config;
    assert_eq!(config.data_dir, Some(home.path().join("state")));
    assert_eq!(config.plugins.dir, Some(dir.join("plugins")));
    let Transport::Stdio { working_dir, .. } = &config.servers[0].transport else {
        panic!("stdio")
    };
    assert_eq!(working_dir.as_deref(), Some(dir.join(".").as_path()));
}

#[test]
fn load_names_the_file_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.json");
    fs::write(&file, "{\n  \"listen\": 8080\n}\n").expect("write");
    let err = load(Some(&file), None).expect_err("bad type").to_string();
    assert_eq!(
        err,
        format!(
            "{}: listen: expected a string, found the number 8080",
            file.display()
        )
    );

    let missing = dir.path().join("nope.json");
    let err = load(Some(&missing), None).expect_err("missing").to_string();
    assert_eq!(
        err,
        format!(
            "{}: no such config file: create it (`{{}}` is a valid config that keeps every default) or point --config at an existing file",
            missing.display()
        )
    );

    let err = load(Some(dir.path()), None)
        .expect_err("a directory")
        .to_string();
    assert!(
        err.starts_with(&format!(
            "{}: cannot read the config file: ",
            dir.path().display()
        )),
        "{err}"
    );
}

/// `tests/fixtures/config` of the workspace.
fn fixtures() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/config"
    ))
    .to_owned()
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every `valid/*.json` parses; every `invalid/NAME.json` fails with exactly the text of
/// `invalid/NAME.err`. `MCPPROXY_BLESS=1` rewrites the `.err` files from the current output.
#[test]
fn golden_files() {
    let root = fixtures();
    let valid = json_files(&root.join("valid"));
    assert!(valid.len() >= 3, "valid fixtures: {valid:?}");
    for path in &valid {
        let text = fs::read_to_string(path).expect("read fixture");
        if let Err(e) = Config::from_json(&text, &file_name(path)) {
            panic!("{} should be valid: {e}", path.display());
        }
    }

    let bless = std::env::var_os("MCPPROXY_BLESS").is_some();
    let invalid = json_files(&root.join("invalid"));
    assert!(invalid.len() >= 14, "invalid fixtures: {invalid:?}");
    let mut failures = Vec::new();
    for path in &invalid {
        let text = fs::read_to_string(path).expect("read fixture");
        let expected_path = path.with_extension("err");
        let actual = match Config::from_json(&text, &file_name(path)) {
            Ok(_) => {
                failures.push(format!("{}: parsed, but should fail", path.display()));
                continue;
            }
            Err(e) => e.to_string(),
        };
        if bless {
            fs::write(&expected_path, format!("{actual}\n")).expect("write .err");
            continue;
        }
        let expected = fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        if expected.trim_end_matches('\n') != actual {
            failures.push(format!(
                "{}:\n  expected: {}\n  actual:   {actual}",
                path.display(),
                expected.trim_end_matches('\n')
            ));
        }
    }
    for entry in fs::read_dir(root.join("invalid")).expect("invalid dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|ext| ext == "err") && !path.with_extension("json").exists()
        {
            failures.push(format!("{}: no .json beside it", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "golden files differ:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_config_file_too_large_to_be_one_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.json");
    let file = fs::File::create(&path).unwrap();
    file.set_len(MAX_CONFIG_BYTES + 10).unwrap();
    let err = load(Some(&path), None).unwrap_err().to_string();
    assert!(err.contains("larger than 4 MiB"), "{err}");
    assert!(err.starts_with(&path.display().to_string()), "{err}");
}

#[test]
fn telemetry_is_off_unless_an_endpoint_is_given() {
    assert_eq!(parse("{}").telemetry, TelemetryConfig::default());
    assert_eq!(parse(r#"{"telemetry": {}}"#).telemetry.otlp, None);
    let config = parse(
        r#"{"telemetry": {"otlp_endpoint": "http://127.0.0.1:4318",
            "otlp_headers": {"x-api-key": "s3cret"}, "sample_ratio": 0.25,
            "export_interval_ms": 250, "service_name": "laptop"}}"#,
    );
    let otlp = config.telemetry.otlp.expect("export on");
    assert_eq!(otlp.traces_url, "http://127.0.0.1:4318/v1/traces");
    assert_eq!(otlp.sample_ratio, 0.25);
    assert_eq!(otlp.export_interval, Duration::from_millis(250));
    assert_eq!(otlp.service_name, "laptop");
    // Header values are secrets: Debug output names the header only.
    let debug = format!("{otlp:?}");
    assert!(
        debug.contains("x-api-key") && !debug.contains("s3cret"),
        "{debug}"
    );
}

#[test]
fn telemetry_mistakes_are_named() {
    assert_eq!(
        error(r#"{"telemetry": {"sample_ratio": 0.5}}"#),
        "t.json: telemetry.sample_ratio: has no effect without telemetry.otlp_endpoint (the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318): set it to export traces, or remove this key"
    );
    assert_eq!(
        error(r#"{"telemetry": {"otlp_endpoint": "127.0.0.1:4318"}}"#),
        "t.json: telemetry.otlp_endpoint: '127.0.0.1:4318' is not an http:// or https:// URL, e.g. 'http://127.0.0.1:4318'"
    );
    assert_eq!(
        error(r#"{"telemetry": {"otlp_endpoint": "http://h:4318", "sample_ratio": 2}}"#),
        "t.json: telemetry.sample_ratio: 2 is out of range: use 0.0 (no call traced) to 1.0 (every call)"
    );
    assert_eq!(
        error(r#"{"telemetry": {"otlp_endpoint": "http://h:4318", "otlp_headers": {"a b": "x"}}}"#),
        "t.json: telemetry.otlp_headers.a b: is not a valid header name: use letters, digits and - (e.g. x-api-key)"
    );
    assert!(
        error(r#"{"telemetry": {"otlp_endpoint": "http://h", "exporter": "x"}}"#)
            .contains("telemetry.exporter")
    );
}

#[test]
fn isolation_defaults_merge_per_server_and_refuse_what_is_not_built() {
    let config = parse(
        r#"{"isolation": {"network": "all", "memory_mb": 1024},
            "mcpServers": [
              {"name": "a", "command": "srv"},
              {"name": "b", "command": "srv", "isolation": {"network": "none", "write": ["/data"], "max_processes": 0}},
              {"name": "c", "command": "srv", "isolation": {"network": {"allow": ["API.github.com:443", "*.slack.com:443", "127.0.0.1:5432", "api.github.com:443"]}}}
            ]}"#,
    );
    let c = &config.server("c").unwrap().isolation;
    assert_eq!(
        c.network.describe(),
        "allow api.github.com:443, *.slack.com:443, 127.0.0.1:5432",
        "normalised, duplicates gone"
    );
    let a = &config.server("a").unwrap().isolation;
    assert_eq!(a.network, mcpproxy_sandbox::Network::All);
    assert_eq!(a.limits.memory_mb, Some(1024));
    assert!(a.enabled);
    let b = &config.server("b").unwrap().isolation;
    assert_eq!(b.network, mcpproxy_sandbox::Network::None);
    assert_eq!(
        b.limits.memory_mb,
        Some(1024),
        "the default's other keys stay"
    );
    assert_eq!(b.limits.max_processes, None, "0 is no limit");
    assert_eq!(b.write, vec![PathBuf::from("/data")]);
    assert!(
        parse(r#"{"mcpServers": [{"name": "c", "command": "x"}]}"#).servers[0]
            .isolation
            .is_default()
    );

    for (text, expected) in [
        (
            r#"{"mcpServers": [{"name": "h", "url": "http://127.0.0.1/mcp", "isolation": {}}]}"#,
            "'isolation' only applies to a server started with 'command'",
        ),
        (
            r#"{"isolation": {"image": "node:22"}}"#,
            "not supported yet",
        ),
        (
            r#"{"isolation": {"network": "loopback"}}"#,
            "granted only service by service",
        ),
        (
            r#"{"isolation": {"network": ["127.0.0.1:5432"]}}"#,
            "a list of destinations goes under \"allow\"",
        ),
        (
            r#"{"isolation": {"network": {"allow": ["api.github.com"]}}}"#,
            "network.allow[0]: 'api.github.com' has no port",
        ),
        (
            r#"{"isolation": {"network": {"allow": [443]}}}"#,
            "network.allow[0]: expected a \"HOST:PORT\" string",
        ),
        (
            r#"{"isolation": {"network": {"allow": ["*.com:443"]}}}"#,
            "top-level domain",
        ),
        (
            r#"{"isolation": {"network": {"deny": []}}}"#,
            "unknown key 'deny' in network",
        ),
        (
            r#"{"isolation": {"network": "wifi"}}"#,
            "'wifi' is not a network policy",
        ),
        (r#"{"isolation": {"memory_mb": 8}}"#, "at least 64"),
        (r#"{"isolation": {"open_files": 3}}"#, "at least 16"),
        (
            r#"{"isolation": {"env_passthrough": ["A=B"]}}"#,
            "is not an environment variable name",
        ),
        (r#"{"isolation": {"unknown": 1}}"#, "unknown"),
    ] {
        let message = error(text);
        assert!(message.contains(expected), "{text}: {message}");
    }
}

#[test]
fn isolation_paths_expand_home_and_resolve_against_the_file() {
    let config = Config::from_json_in(
        r#"{"mcpServers": [{"name": "a", "command": "x", "isolation": {"read": ["~/notes", "rel"]}}]}"#,
        "c.json",
        Path::new("/etc/mcp"),
        Some(Path::new("/home/u")),
    )
    .unwrap();
    assert_eq!(
        config.servers[0].isolation.read,
        vec![
            PathBuf::from("/home/u/notes"),
            PathBuf::from("/etc/mcp/rel")
        ]
    );
}

#[test]
fn result_guards_are_listed_like_validators() {
    assert_eq!(parse("{}").plugins.guards, None);
    assert_eq!(
        parse(r#"{"plugins": {"guards": []}}"#).plugins.guards,
        Some(Vec::new())
    );
    assert_eq!(
        parse(r#"{"plugins": {"guards": ["secret-redactor", "injection-marker"]}}"#)
            .plugins
            .guards
            .as_deref(),
        Some(&["secret-redactor".to_owned(), "injection-marker".to_owned()][..])
    );
    assert_eq!(
        error(r#"{"plugins": {"guards": ["secret-redactor", "Marker"]}}"#),
        "t.json: plugins.guards[1]: 'Marker' is not a valid plugin name: use 1 to 64 lowercase letters, digits and '-' (not first or last)"
    );
    assert_eq!(
        error(r#"{"plugins": {"guards": ["a", "a"]}}"#),
        "t.json: plugins.guards[1]: 'a' is already listed at plugins.guards[0]"
    );
}

#[test]
fn start_is_eager_unless_a_server_or_the_top_level_says_lazy() {
    let config = parse(
        r#"{"start": "lazy", "idle_stop_secs": 120, "mcpServers": [
              {"name": "a", "command": "srv"},
              {"name": "b", "command": "srv", "start": "eager"},
              {"name": "c", "command": "srv", "idle_stop_secs": 5}]}"#,
    );
    let [a, b, c] = &config.servers[..] else {
        panic!("three servers");
    };
    assert_eq!(a.start.mode, StartMode::Lazy);
    assert_eq!(a.start.idle_stop, Duration::from_secs(120));
    assert_eq!(b.start.mode, StartMode::Eager);
    assert_eq!(
        (c.start.mode, c.start.idle_stop),
        (StartMode::Lazy, Duration::from_secs(5))
    );
    let plain = parse(r#"{"mcpServers": [{"name": "a", "command": "srv"}]}"#);
    assert_eq!(plain.servers[0].start, Start::default());
    assert_eq!(plain.servers[0].start.idle_stop, DEFAULT_IDLE_STOP);
    assert!(!plain.servers[0].start.is_lazy());
}

#[test]
fn a_start_mode_or_idle_time_out_of_bounds_is_refused_with_what_is_accepted() {
    let wrong = error(r#"{"mcpServers": [{"name": "a", "command": "srv", "start": "sometimes"}]}"#);
    assert!(wrong.contains("mcpServers[0].start"), "{wrong}");
    assert!(wrong.contains("'sometimes' is not a start mode"), "{wrong}");
    assert!(wrong.contains("'lazy'"), "{wrong}");
    let zero = error(r#"{"idle_stop_secs": 0}"#);
    assert!(zero.contains("idle_stop_secs"), "{zero}");
    assert!(zero.contains("use 1 to 604800 seconds"), "{zero}");
    let typed = error(r#"{"start": true}"#);
    assert!(typed.contains("start"), "{typed}");
}

#[test]
fn approvals_read_their_rules_and_refuse_what_is_not_one() {
    use crate::{CallClass, Via};
    let config = parse(
        r#"{"approvals": {"ask": ["destructive"], "timeout_secs": 30, "servers": {
            "prod-db": {"ask": ["write", "destructive", "write"], "via": "page"},
            "notes": {"ask": [], "tools": {"purge_*": ["destructive"], "purge_all": []}}}}}"#,
    )
    .approvals;
    assert_eq!(config.timeout, Duration::from_secs(30));
    assert_eq!(
        config.needs_person("github", "delete_repo", CallClass::Destructive),
        Some(Via::Client)
    );
    assert_eq!(
        config.needs_person("prod-db", "insert", CallClass::Write),
        Some(Via::Page)
    );
    assert_eq!(
        config.needs_person("notes", "purge_old", CallClass::Destructive),
        Some(Via::Client)
    );
    // The exact name is more specific than the glob.
    assert_eq!(
        config.needs_person("notes", "purge_all", CallClass::Destructive),
        None
    );
    assert_eq!(
        config.needs_person("notes", "delete", CallClass::Destructive),
        None
    );
    assert!(!parse("{}").approvals.any());
    assert_eq!(
        error(r#"{"approvals": {"ask": ["read"]}}"#),
        "t.json: approvals.ask[0]: 'read' is not a class of call that can wait for a person: use \"write\" or \"destructive\" (reads never wait)"
    );
    assert!(
        error(r#"{"approvals": {"servers": {"db": {"via": "email"}}}}"#)
            .starts_with("t.json: approvals.servers.db.via: 'email' is not who is asked")
    );
    assert_eq!(
        error(r#"{"approvals": {"timeout_secs": 0}}"#),
        "t.json: approvals.timeout_secs: 0 is out of range: use 1 to 86400 seconds"
    );
    assert!(
        error(r#"{"approvals": {"servers": {"db": {"tools": {"": ["write"]}}}}}"#)
            .starts_with("t.json: approvals.servers.db.tools.: a tool glob is")
    );
}
