//! End-to-end: the sandbox every stdio server runs in by default, against a hostile server
//! of our own (`mcp-hostile`) that at start-up, and again in a tool, tries to read a planted
//! `~/.ssh/id_rsa` and the data dir's `trust.json`, write `~/.bashrc` and the config file,
//! read the proxy's environment (its own and through `/proc`), signal the proxy, make a user
//! namespace, connect to a
//! loopback port this test listens on, start 400 processes and reserve 4 GiB, open an MCP
//! session on mcpproxy's control socket and reach another service's pathname socket, list
//! the host's sockets through `/proc`, name the proxy and read its command line, set the
//! rlimits of the proxy and of another process (`prlimit`, which can kill them), read a
//! SysV shared memory segment of the host's, and spread 2.4 GB over three processes. Under the
//! default sandbox each attempt fails and the proxy keeps serving; the same server with
//! `"isolation": {"enabled": false}` succeeds at each, which shows the test is real.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Client, Proxy, call, config_with, connect, fixture_bin, is_error, text};
use crate::support::sandbox_supported;

const SECRET_ENV: &str = "MCPPROXY_TEST_SANDBOX_SECRET";

fn hostile_bin() -> PathBuf {
    fixture_bin().with_file_name("mcp-hostile")
}

struct Planted {
    _home: tempfile::TempDir,
    ssh_key: PathBuf,
    bashrc: PathBuf,
    listener: TcpListener,
    /// A pathname socket of another service of the host's (a database's, another proxy's),
    /// which answers every connection with a line.
    host_socket: PathBuf,
    /// A SysV shared memory segment of the host's, holding `HOST-SHM-SECRET`.
    shm: SharedMemory,
}

/// A SysV shared memory segment this test makes, removed when dropped.
struct SharedMemory {
    key: i32,
    id: i32,
}

impl SharedMemory {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
        let key = 0x6d70_0000
            | ((std::process::id() as i32 & 0xfff) << 4)
            | (NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & 0xf);
        // SAFETY: a segment of this test's own, written within its 4096 bytes.
        unsafe {
            let id = libc::shmget(key, 4096, libc::IPC_CREAT | 0o600);
            assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
            let at = libc::shmat(id, std::ptr::null(), 0);
            assert_ne!(at as isize, -1, "shmat");
            let secret = c"HOST-SHM-SECRET".to_bytes_with_nul();
            std::ptr::copy_nonoverlapping(secret.as_ptr(), at.cast::<u8>(), secret.len());
            libc::shmdt(at);
            SharedMemory { key, id }
        }
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: removing the segment made in `new`.
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

fn plant() -> Planted {
    let home = tempfile::tempdir().unwrap();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    let ssh_key = ssh.join("id_rsa");
    std::fs::write(&ssh_key, "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n").unwrap();
    let bashrc = home.path().join(".bashrc");
    std::fs::write(&bashrc, "# the user's own\n").unwrap();
    let host_socket = home.path().join("service.sock");
    let service = std::os::unix::net::UnixListener::bind(&host_socket).unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        use std::io::Write;
        for stream in service.incoming().flatten() {
            // Reads the request line, then answers (closing before the request is read
            // would make the client's write fail instead).
            let mut request = String::new();
            let _ = std::io::BufReader::new(&stream).read_line(&mut request);
            let mut stream = stream;
            let _ = stream.write_all(b"hello from a host service\n");
        }
    });
    Planted {
        _home: home,
        ssh_key,
        bashrc,
        listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        host_socket,
        shm: SharedMemory::new(),
    }
}

/// The hostile server aimed at `planted` and at the proxy's own files in `data_dir`.
fn hostile(planted: &Planted, data_dir: &Path, isolation: Option<Value>) -> Value {
    let port = planted.listener.local_addr().unwrap().port();
    let mut server = json!({
        "name": "hostile",
        "command": hostile_bin(),
        "args": [
            "--read", planted.ssh_key,
            "--read", data_dir.join("trust.json"),
            "--write", planted.bashrc,
            "--write", data_dir.join("mcp_config.json"),
            "--connect", format!("127.0.0.1:{port}"),
            "--forks", "400",
            "--allocate-mb", "4096",
            "--unix", data_dir.join("mcpproxy.sock"),
            "--unix", planted.host_socket,
            "--prlimit-pid", std::process::id().to_string(),
            "--shm-key", planted.shm.key.to_string(),
            // Three processes of 800 MiB: each under the default 2 GiB, not together.
            "--fan-out", "3",
            "--fan-out-mb", "800",
        ],
    });
    // `{}` is the default sandbox, written out so the test helpers grant nothing.
    server["isolation"] = isolation.unwrap_or_else(|| json!({}));
    server
}

async fn report(client: &Client, tool: &str) -> BTreeMap<String, String> {
    let result = call(
        client,
        "call_tool_read",
        json!({"name": format!("hostile:{tool}")}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    serde_json::from_str(&text(&result)).unwrap_or_else(|e| panic!("{e}: {}", text(&result)))
}

fn start(planted: &Planted, isolation: Option<Value>) -> Proxy {
    let data_dir = tempfile::tempdir().unwrap();
    let config = config_with(vec![hostile(planted, data_dir.path(), isolation)]);
    let home = planted
        .ssh_key
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    // A variable of the proxy's environment a server must not see.
    let secret = tempfile::NamedTempFile::new().unwrap();
    Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[("HOME", home.as_path()), (SECRET_ENV, secret.path())])
        .start()
}

fn denied(report: &BTreeMap<String, String>, key: &str, why: &str) {
    let outcome = report
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {report:?}"));
    assert!(
        outcome.starts_with("denied: ") && outcome.contains(why),
        "{key}: expected a denial saying {why:?}, got {outcome:?}"
    );
}

fn allowed(report: &BTreeMap<String, String>, key: &str) {
    let outcome = report
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {report:?}"));
    assert!(
        outcome.starts_with("ok: "),
        "{key}: expected ok, got {outcome:?}"
    );
}

/// What the server tries against the proxy, the host's other processes and its sockets.
fn process_keys(planted: &Planted, data_dir: &Path) -> [String; 9] {
    [
        format!("unix {}", data_dir.join("mcpproxy.sock").display()),
        format!("unix {}", planted.host_socket.display()),
        "list the host's unix sockets".to_owned(),
        "name the parent".to_owned(),
        "read the parent's command line".to_owned(),
        "prlimit the parent".to_owned(),
        format!("prlimit {}", std::process::id()),
        format!("shm {}", planted.shm.key),
        "memory fan-out".to_owned(),
    ]
}

fn keys(planted: &Planted, data_dir: &Path) -> [String; 5] {
    let port = planted.listener.local_addr().unwrap().port();
    [
        format!("read {}", planted.ssh_key.display()),
        format!("read {}", data_dir.join("trust.json").display()),
        format!("write {}", planted.bashrc.display()),
        format!("write {}", data_dir.join("mcp_config.json").display()),
        format!("connect 127.0.0.1:{port}"),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_server_is_contained_by_the_default_sandbox() {
    if !sandbox_supported() {
        return;
    }
    let planted = plant();
    let proxy = start(&planted, None);
    let data_dir = proxy.data_dir.path().to_path_buf();
    let client = connect(&proxy.url).await;
    let [ssh, trust, bashrc, config, connect_key] = keys(&planted, &data_dir);
    for tool in ["startup_report", "probe"] {
        let report = report(&client, tool).await;
        // Shown when the test fails: every attempt's outcome, not only the first wrong one.
        eprintln!("{tool}: {report:#?}");
        denied(&report, &ssh, "Permission denied");
        denied(&report, &trust, "Permission denied");
        denied(&report, &bashrc, "Permission denied");
        denied(&report, &config, "Permission denied");
        let connected = &report[&connect_key];
        assert!(connected.starts_with("denied: "), "{tool}: {connected}");
        // Refused by Landlock, or (in a PID namespace of its own) the proxy cannot be named.
        denied(&report, "read the parent's environment", "");
        denied(&report, "signal the parent", "");
        denied(&report, "make a user namespace", "Operation not permitted");
        denied(&report, "fork", "started");
        denied(&report, "allocate", "memory allocation");
        let env = &report["environment"];
        assert!(!env.contains(SECRET_ENV), "{tool}: {env}");
        assert!(env.contains("TMPDIR"), "{tool}: {env}");
        for key in process_keys(&planted, &data_dir) {
            let outcome = report
                .get(&key)
                .unwrap_or_else(|| panic!("{tool}: no {key:?} in {report:?}"));
            assert!(outcome.starts_with("denied: "), "{tool}: {key}: {outcome}");
        }
        assert!(
            !report.values().any(|v| v.contains("HOST-SHM-SECRET")),
            "{report:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&planted.bashrc).unwrap(),
        "# the user's own\n"
    );
    let config_text = std::fs::read_to_string(data_dir.join("mcp_config.json")).unwrap();
    assert!(!config_text.contains("hostile server"), "{config_text}");

    // The proxy keeps serving, and says what the sandbox is.
    let tools = call(&client, "retrieve_tools", json!({"query": "probe"}))
        .await
        .unwrap();
    assert!(!is_error(&tools), "{}", text(&tools));
    let list = TestCommand::new(&data_dir)
        .args(["upstream", "list"])
        .output();
    list.assert_code(0);
    assert!(
        list.stdout().contains("on (network none"),
        "{}",
        list.stdout()
    );
    // What the sandbox granted without the config naming it is shown: here the project the
    // server's binary was built in.
    assert!(list.stdout().contains("(inferred)"), "{}", list.stdout());
    // And in the security analysis (`upstream inspect`, REST).
    let analysis: Value = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/upstreams/hostile/analysis",
            proxy.base()
        ))
        .header("X-API-Key", proxy.api_key())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let inferred = &analysis["data"]["inferred_read"];
    assert!(
        inferred.as_array().is_some_and(|reads| !reads.is_empty()),
        "{analysis}"
    );
    let logs = TestCommand::new(&data_dir)
        .args(["upstream", "logs", "hostile"])
        .output();
    logs.assert_code(0);
    assert!(
        logs.stdout().contains("sandbox: network none"),
        "{}",
        logs.stdout()
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_server_without_its_sandbox_reaches_everything() {
    let planted = plant();
    let proxy = start(&planted, Some(json!({"enabled": false})));
    let data_dir = proxy.data_dir.path().to_path_buf();
    let client = connect(&proxy.url).await;
    let [ssh, trust, bashrc, config, connect_key] = keys(&planted, &data_dir);
    let report = report(&client, "startup_report").await;
    for key in [
        &ssh,
        &trust,
        &bashrc,
        &config,
        &connect_key,
        "read the parent's environment",
        "signal the parent",
        "make a user namespace",
        "fork",
        "allocate",
    ] {
        allowed(&report, key);
    }
    assert!(report["environment"].contains(SECRET_ENV), "{report:?}");
    // The control socket is bound once the proxy serves: asked again, after start-up.
    let report = self::report(&client, "probe").await;
    for key in process_keys(&planted, &data_dir) {
        allowed(&report, &key);
    }
    assert!(
        report[&format!("shm {}", planted.shm.key)].contains("HOST-SHM-SECRET"),
        "{report:?}"
    );
    assert!(
        std::fs::read_to_string(&planted.bashrc)
            .unwrap()
            .contains("hostile server")
    );
    let list = TestCommand::new(&data_dir)
        .args(["upstream", "list"])
        .output();
    assert!(list.stdout().contains("OFF"), "{}", list.stdout());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_memory_server_and_a_pypi_server_work_in_the_default_sandbox() {
    if !sandbox_supported() || !crate::support::mcp::npm_bin_installed("mcp-server-memory") {
        return;
    }
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let time_server = python.with_file_name("mcp-server-time");
    assert!(
        time_server.exists(),
        "{} missing: pip install -r tests/python/requirements.txt",
        time_server.display()
    );
    // The memory server keeps its file beside its code unless told otherwise: here, in the
    // one directory its sandbox may write.
    let memory = tempfile::tempdir().unwrap();
    let memory_file = memory.path().join("memory.jsonl");
    let config = config_with(vec![
        json!({
            "name": "mem",
            "command": crate::support::mcp::npm_dir().join("node_modules/.bin/mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": memory_file},
            "isolation": {"write": [memory.path()]},
        }),
        json!({
            "name": "time",
            "command": time_server,
            "args": ["--local-timezone", "UTC"],
            "isolation": {},
        }),
    ]);
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let created = call(
        &client,
        "call_tool_write",
        json!({"name": "mem:create_entities", "args": {"entities": [
            {"name": "sandbox", "entityType": "test", "observations": ["kept in a granted directory"]}
        ]}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&created), "{}", text(&created));
    let graph = call(
        &client,
        "call_tool_read",
        json!({"name": "mem:read_graph", "args": {}}),
    )
    .await
    .unwrap();
    assert!(
        text(&graph).contains("kept in a granted directory"),
        "{}",
        text(&graph)
    );
    assert!(
        std::fs::read_to_string(&memory_file)
            .unwrap()
            .contains("kept in a granted directory")
    );
    let now = call(
        &client,
        "call_tool_read",
        json!({"name": "time:get_current_time", "args": {"timezone": "UTC"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&now), "{}", text(&now));
    assert!(text(&now).contains("UTC"), "{}", text(&now));
    client.cancel().await.unwrap();
}

/// `pip install --user`, pipx and `uv tool` put their launchers in `~/.local/bin`, beside
/// the user's keyrings and shell history in `~/.local/share`. A server launched from there
/// is granted its own program, never `~/.local` as if it were an install tree.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_launched_from_local_bin_reads_nothing_else_under_local() {
    if !sandbox_supported() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".local/bin");
    let share = home.path().join(".local/share");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(share.join("keyrings")).unwrap();
    let keyring = share.join("keyrings/login.keyring");
    std::fs::write(&keyring, "planted keyring").unwrap();
    let history = share.join("history");
    std::fs::write(&history, "planted shell history").unwrap();
    let program = bin.join("mcp-hostile");
    std::fs::copy(hostile_bin(), &program).unwrap();
    let config = config_with(vec![json!({
        "name": "hostile",
        "command": program,
        "args": ["--read", keyring, "--read", history, "--read", program],
        "isolation": {},
    })]);
    let data_dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[("HOME", home.path())])
        .start();
    let client = connect(&proxy.url).await;
    let report = report(&client, "probe").await;
    denied(
        &report,
        &format!("read {}", keyring.display()),
        "Permission denied",
    );
    denied(
        &report,
        &format!("read {}", history.display()),
        "Permission denied",
    );
    // The program itself stays readable: the grant is the launcher, not nothing.
    allowed(&report, &format!("read {}", program.display()));
}

/// The control socket's own check, whatever the seccomp filter does: a process in a PID
/// namespace of its own (as every sandboxed server is) that reaches the socket gets no
/// session; the user's own process gets one.
#[tokio::test(flavor = "multi_thread")]
async fn the_control_socket_refuses_a_process_of_another_pid_namespace() {
    if !sandbox_supported() {
        return;
    }
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("SKIPPED: no /usr/bin/python3");
        return;
    }
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let socket = proxy.data_dir.path().join("mcpproxy.sock");
    let session = format!(
        r#"
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect("{}")
data = b""
try:
    s.sendall(b'{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}\n')
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError as e:
    print("CLOSED", e)
print("ANSWER", data.decode().strip() or "NONE")
"#,
        socket.display()
    );
    let run = |namespaced: bool| {
        let mut command = if namespaced {
            let mut command = std::process::Command::new("unshare");
            // As root a PID namespace needs nothing more; otherwise a user namespace first.
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                command.args(["--user", "--map-root-user"]);
            }
            command.args(["--pid", "--fork"]).arg(python);
            command
        } else {
            std::process::Command::new(python)
        };
        let out = command.args(["-c", &session]).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let own = run(false);
    assert!(own.contains("ANSWER {"), "{own}");
    let other = run(true);
    assert!(other.contains("ANSWER NONE"), "{other}");
    // Said in the proxy's log (wait_for_line fails the test when the line never comes).
    proxy
        .proc
        .wait_for_line(std::time::Duration::from_secs(30), |line| {
            line.contains("a sandboxed server may not use mcpproxy's control socket")
        });
}

/// A JSON-RPC MCP server in plain Python (standard library only): one tool, `where`, that
/// answers with the interpreter's prefix.
const STDLIB_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stdlib", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "where", "description": "The interpreter's prefix.",
                             "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "prefix " + sys.prefix}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// `python3` through a version manager's shim, laid out as pyenv lays them out: the shim runs
/// `ROOT/libexec/pyenv exec python3`, which the sandbox does not grant; mcpproxy asks the
/// manager which program the shim runs (`pyenv which python3`), runs that, and the sandbox
/// grants that interpreter's prefix, not the manager's root.
#[tokio::test(flavor = "multi_thread")]
async fn python3_through_a_pyenv_style_shim_starts_sandboxed() {
    if !sandbox_supported() {
        return;
    }
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let base = std::process::Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = PathBuf::from(String::from_utf8_lossy(&base.stdout).trim());
    assert!(base.join("bin/python3").exists(), "{}", base.display());
    // A pyenv root of the test's own: one version (the real interpreter), the manager, a shim.
    let root = tempfile::tempdir().unwrap();
    let versions = root.path().join("versions");
    std::fs::create_dir_all(&versions).unwrap();
    std::os::unix::fs::symlink(&base, versions.join("3.11.7")).unwrap();
    for dir in ["libexec", "shims", "plugins"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    // Something of the manager's that no server should read.
    std::fs::write(root.path().join("plugins/token"), "manager-secret").unwrap();
    let manager = root.path().join("libexec/pyenv");
    std::fs::write(
        &manager,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  which) echo {versions}/3.11.7/bin/$2 ;;\n  exec) shift; shift; exec {versions}/3.11.7/bin/python3 \"$@\" ;;\nesac\n",
            versions = versions.display()
        ),
    )
    .unwrap();
    let shim = root.path().join("shims/python3");
    std::fs::write(
        &shim,
        format!(
            "#!/usr/bin/env bash\nset -e\nprogram=\"${{0##*/}}\"\nexec \"{}\" exec \"$program\" \"$@\"\n",
            manager.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    for file in [&manager, &shim] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let project = tempfile::tempdir().unwrap();
    let script = project.path().join("server.py");
    std::fs::write(&script, STDLIB_SERVER).unwrap();
    let config = config_with(vec![json!({
        "name": "py",
        "command": shim,
        "args": [script],
        "isolation": {},
    })]);
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let answer = call(&client, "call_tool_read", json!({"name": "py:where"}))
        .await
        .unwrap();
    assert!(!is_error(&answer), "{}", text(&answer));
    assert!(text(&answer).contains("prefix"), "{}", text(&answer));
    let logs = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "logs", "py"])
        .output();
    assert!(
        logs.stdout().contains("is a pyenv shim: runs"),
        "{}",
        logs.stdout()
    );
    // The interpreter's own prefix is granted, the manager's root is not.
    let list = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "list"])
        .output();
    let root_shown = root.path().display().to_string();
    assert!(
        !list.stdout().contains(&format!("{root_shown},"))
            && !list.stdout().contains(&format!("{root_shown} ")),
        "{}",
        list.stdout()
    );
    client.cancel().await.unwrap();
}

/// A person adds the official filesystem server with its directory as an argument: the
/// sandbox's write grant for that directory is proposed (shown, and part of the launch), so
/// the server can write there at once; with `--no-inferred-grants` it cannot.
#[tokio::test(flavor = "multi_thread")]
async fn a_persons_add_grants_the_directory_a_filesystem_server_is_given() {
    if !sandbox_supported() || !crate::support::mcp::npm_bin_installed("mcp-server-filesystem") {
        return;
    }
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let server = crate::support::mcp::npm_dir().join("node_modules/.bin/mcp-server-filesystem");
    let granted = tempfile::tempdir().unwrap();
    let refused = tempfile::tempdir().unwrap();
    let config = proxy.data_dir.path().join("mcp_config.json");
    for (name, dir, extra) in [
        ("files", granted.path(), None),
        ("bare", refused.path(), Some("--no-inferred-grants")),
    ] {
        let mut args = vec![
            "upstream".to_owned(),
            "add".to_owned(),
            name.to_owned(),
            "--approve".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
        ];
        args.extend(extra.map(str::to_owned));
        args.extend(["--".to_owned(), server.display().to_string()]);
        args.push(dir.display().to_string());
        let out = TestCommand::new(proxy.data_dir.path()).args(&args).output();
        out.assert_code(0);
        let proposed = format!("may write {}", dir.display());
        assert_eq!(
            out.stderr().contains(&proposed),
            extra.is_none(),
            "{name}: {}",
            out.stderr()
        );
    }
    let client = connect(&proxy.url).await;
    let write = |dir: &Path| json!({"name": "", "args": {"path": dir.join("note.txt"), "content": "written"}});
    let mut into_granted = write(granted.path());
    into_granted["name"] = json!("files:write_file");
    let mut into_refused = write(refused.path());
    into_refused["name"] = json!("bare:write_file");
    crate::support::mcp::call_until_ok(
        &client,
        "the granted server writes",
        "call_tool_destructive",
        into_granted,
        std::time::Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(granted.path().join("note.txt")).unwrap(),
        "written"
    );
    let result = call(&client, "call_tool_destructive", into_refused)
        .await
        .unwrap();
    // Refused by its sandbox (the server itself allows the directory it was given).
    assert!(
        is_error(&result) && text(&result).to_lowercase().contains("denied"),
        "{}",
        text(&result)
    );
    assert!(!refused.path().join("note.txt").exists());
    client.cancel().await.unwrap();
}
