//! The sandbox on this machine's kernel, with plain programs (`bash`, `cat`): what it must
//! refuse, and what it must still allow. A part the kernel lacks is skipped with a note, unless
//! `MCPPROXY_REQUIRE_SANDBOX` is set (as in CI), which makes it a failure.

#![allow(
    unsafe_code,
    reason = "Command::pre_exec is unsafe; the setup is async-signal-safe"
)]
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mcpproxy_sandbox::{ForbiddenPath, Launch, Network, ResourceLimits, SandboxSpec, Support};

fn supported() -> bool {
    let support = Support::get();
    let complete = support.landlock_abi >= 6 && support.network_namespace && support.seccomp;
    if !complete {
        assert!(
            std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
            "the kernel lacks a sandbox feature: {support:?}"
        );
        eprintln!("SKIPPED: the kernel lacks a sandbox feature: {support:?}");
    }
    complete
}

fn spec(network: Network, write: Vec<PathBuf>, forbidden: &Path) -> SandboxSpec {
    SandboxSpec {
        network,
        read: vec![],
        write,
        env_passthrough: vec![],
        env: Default::default(),
        limits: ResourceLimits::DEFAULT,
        required: true,
        forbidden: vec![ForbiddenPath {
            what: "the data dir",
            path: forbidden.to_path_buf(),
        }],
        launcher_cache: None,
    }
}

/// Runs `script` with bash in the sandbox of `spec`.
fn run(spec: &SandboxSpec, script: &str) -> Output {
    run_keeping(spec, script).0
}

/// [`run`], keeping the prepared sandbox (its egress channel, its private directory) for the
/// caller to look at after the script ended.
fn run_keeping(spec: &SandboxSpec, script: &str) -> (Output, mcpproxy_sandbox::Prepared) {
    let args = vec!["-c".to_string(), script.to_string()];
    let prepared = mcpproxy_sandbox::prepare(
        spec,
        Launch {
            command: "/bin/bash",
            args: &args,
            working_dir: None,
            label: "test",
        },
        Support::get(),
    )
    .expect("prepare");
    let setup = prepared.setup.clone();
    let mut command = Command::new("/bin/bash");
    command
        .args(&args)
        .env_clear()
        .envs(prepared.environment.iter().cloned());
    // SAFETY: `enter` is async-signal-safe.
    unsafe {
        command.pre_exec(move || setup.enter());
    }
    let output = command.output().expect("run bash");
    (output, prepared)
}

#[test]
fn files_outside_the_grants_cannot_be_read_or_written() {
    if !supported() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE KEY").unwrap();
    let granted = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let spec = spec(
        Network::None,
        vec![granted.path().to_path_buf()],
        data.path(),
    );
    let script = format!(
        "cat {secret} && echo READ; echo x > {outside}/new && echo WROTE; echo ok > {granted}/file && echo GRANTED; echo t > \"$TMPDIR/t\" && echo TMP",
        secret = secret.display(),
        outside = outside.path().display(),
        granted = granted.path().display(),
    );
    let out = run(&spec, &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("READ"), "{stdout}");
    assert!(!stdout.contains("PRIVATE KEY"), "{stdout}");
    assert!(!stdout.contains("WROTE"), "{stdout}");
    assert!(!outside.path().join("new").exists());
    assert!(
        stdout.contains("GRANTED"),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("TMP"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(granted.path().join("file")).unwrap(),
        "ok\n"
    );
}

#[test]
fn the_network_is_cut_unless_it_is_all() {
    if !supported() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let data = tempfile::tempdir().unwrap();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
    let cut = run(&spec(Network::None, vec![], data.path()), &script);
    assert!(!String::from_utf8_lossy(&cut.stdout).contains("CONNECTED"));
    let open = run(&spec(Network::All, vec![], data.path()), &script);
    assert!(
        String::from_utf8_lossy(&open.stdout).contains("CONNECTED"),
        "{}",
        String::from_utf8_lossy(&open.stderr)
    );
}

/// `"network": {"allow": [...]}`: the server's own namespace gets a listener on its loopback
/// that mcpproxy holds (the egress proxy's), the proxy variables point at it, and nothing
/// else of the host's network is reachable.
#[test]
fn egress_hands_the_namespace_listener_to_the_parent_and_nothing_else_is_reachable() {
    if !supported() {
        return;
    }
    use std::io::Read;
    let host_service = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host_service.local_addr().unwrap().port();
    let data = tempfile::tempdir().unwrap();
    let rules = mcpproxy_sandbox::egress::EgressRules::new(vec![
        mcpproxy_sandbox::egress::EgressRule::parse(&format!("127.0.0.1:{port}")).unwrap(),
    ]);
    let spec = spec(Network::Allow(rules), vec![], data.path());
    let script = format!(
        "echo \"proxy=$HTTPS_PROXY all=$ALL_PROXY no=[$NO_PROXY]\"; \
         exec 3<>/dev/tcp/127.0.0.1/3128 && printf hello >&3 && echo PROXY; \
         exec 4<>/dev/tcp/127.0.0.1/{port} && echo DIRECT"
    );
    let (out, mut prepared) = run_keeping(&spec, &script);
    let receiver = prepared.egress.take().expect("an egress channel");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("proxy=http://127.0.0.1:3128 all=socks5h://127.0.0.1:3128 no=[]"),
        "{stdout} {stderr}"
    );
    assert!(stdout.contains("PROXY"), "{stdout} {stderr}");
    assert!(!stdout.contains("DIRECT"), "{stdout}");
    let listener = receiver
        .receive(std::time::Duration::from_secs(10))
        .expect("receive")
        .expect("a listener");
    // The connection the server made from inside its namespace waits in the backlog.
    let (mut from_server, _) = listener.accept().expect("accept");
    let mut said = String::new();
    from_server.read_to_string(&mut said).unwrap();
    assert_eq!(said, "hello");
    drop(prepared);
}

/// A server that fails before handing the listener over leaves mcpproxy with no listener,
/// not a hang.
#[test]
fn no_listener_arrives_when_the_server_never_starts() {
    if !supported() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let rules = mcpproxy_sandbox::egress::EgressRules::new(vec![]);
    let spec = spec(Network::Allow(rules), vec![], data.path());
    let mut prepared = mcpproxy_sandbox::prepare(
        &spec,
        Launch {
            command: "/bin/true",
            args: &[],
            working_dir: None,
            label: "test",
        },
        Support::get(),
    )
    .expect("prepare");
    let receiver = prepared.egress.take().expect("an egress channel");
    drop(prepared);
    let received = receiver
        .receive(std::time::Duration::from_secs(10))
        .expect("receive");
    assert!(received.is_none());
}

#[test]
fn the_environment_is_rebuilt_and_the_parent_cannot_be_signalled() {
    if !supported() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    // SAFETY: a test thread sets a variable no other test reads.
    #[allow(
        clippy::disallowed_methods,
        reason = "a test: the variable the sandbox must drop"
    )]
    unsafe {
        std::env::set_var("MCPPROXY_TEST_SECRET", "hunter2")
    };
    let parent = std::process::id();
    let out = run(
        &spec(Network::None, vec![], data.path()),
        &format!(
            "env; kill -0 {parent} && echo SIGNALLED; cat /proc/{parent}/environ && echo ENVIRON"
        ),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("hunter2"), "{stdout}");
    assert!(!stdout.contains("SIGNALLED"), "{stdout}");
    assert!(!stdout.contains("ENVIRON"), "{stdout}");
    assert!(stdout.contains("TMPDIR="), "{stdout}");
}

#[test]
fn a_grant_that_reaches_the_data_dir_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let inner = data.path().join("journal");
    let spec = spec(
        Network::None,
        vec![data.path().parent().unwrap().to_path_buf()],
        &inner,
    );
    let err = mcpproxy_sandbox::prepare(
        &spec,
        Launch {
            command: "/bin/true",
            args: &[],
            working_dir: None,
            label: "test",
        },
        Support::get(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("the data dir"), "{err}");
}

#[test]
fn a_kernel_without_the_features_refuses_a_required_sandbox_and_names_what_is_missing() {
    let data = tempfile::tempdir().unwrap();
    let launch = Launch {
        command: "/bin/true",
        args: &[],
        working_dir: None,
        label: "test",
    };
    let required = spec(Network::None, vec![], data.path());
    let err = mcpproxy_sandbox::prepare(&required, launch, &Support::none()).unwrap_err();
    let message = err.to_string();
    for part in [
        "Landlock",
        "network namespaces",
        "seccomp",
        "pids cgroup",
        "memory cgroup",
        "PID, IPC and mount namespaces",
        "required",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let mut optional = required.clone();
    optional.required = false;
    let prepared = mcpproxy_sandbox::prepare(&optional, launch, &Support::none()).unwrap();
    assert!(
        prepared.report.summary().contains("NOT ENFORCED"),
        "{}",
        prepared.report.summary()
    );
    assert_eq!(
        prepared.report.missing.len(),
        6,
        "{:?}",
        prepared.report.missing
    );
}

#[test]
fn what_an_mcpproxy_that_is_gone_left_behind_is_swept_and_never_collides() {
    let Some(parent) = Support::get().pids_cgroup.clone() else {
        assert!(
            std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
            "no pids cgroup mcpproxy may write"
        );
        eprintln!("SKIPPED: no pids cgroup mcpproxy may write");
        return;
    };
    // A group as a killed mcpproxy (a pid no process has) leaves it, with a server's process
    // that double-forked out of its process group still in it.
    let abandoned = parent.join("mcpproxy-4194304-0-0-test");
    std::fs::create_dir(&abandoned).unwrap();
    let mut survivor = Command::new("sleep").arg("300").spawn().unwrap();
    std::fs::write(abandoned.join("cgroup.procs"), survivor.id().to_string()).unwrap();
    // And its private directory.
    let left_dir = std::env::temp_dir().join("mcpproxy-sandbox-4194304-test-abcdef");
    std::fs::create_dir_all(left_dir.join("home")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = run(&spec(Network::None, vec![], data.path()), "echo started");
    assert!(String::from_utf8_lossy(&out.stdout).contains("started"));
    assert!(!abandoned.exists(), "the abandoned group is still there");
    let status = survivor.wait().unwrap();
    assert!(!status.success(), "the survivor was not killed: {status}");
    assert!(
        !left_dir.exists(),
        "the abandoned private directory is still there"
    );
}

/// Runs `code` with the system's Python (`/usr/bin/python3`, under `/usr`) in the sandbox
/// of `spec`; `None` (skipped with a note) where there is none.
fn run_python(spec: &SandboxSpec, code: &str) -> Option<Output> {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("SKIPPED: no /usr/bin/python3");
        return None;
    }
    Some(run(spec, &format!("exec /usr/bin/python3 -c '{code}'")))
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn pathname_unix_sockets_cannot_be_reached_even_in_a_granted_directory() {
    if !supported() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let granted = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let host = outside.path().join("host.sock");
    let ours = granted.path().join("granted.sock");
    let _host = std::os::unix::net::UnixListener::bind(&host).unwrap();
    let _ours = std::os::unix::net::UnixListener::bind(&ours).unwrap();
    let spec = spec(
        Network::None,
        vec![granted.path().to_path_buf()],
        data.path(),
    );
    let code = format!(
        r#"
import socket
for path in ["{host}", "{ours}"]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        print("CONNECTED", path)
    except OSError as e:
        print("DENIED", path, e)
a, b = socket.socketpair()
a.sendall(b"x")
print("PAIR", b.recv(1))
try:
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    print("DGRAM PAIR")
except OSError as e:
    print("DGRAM DENIED", e)
"#,
        host = host.display(),
        ours = ours.display()
    );
    let Some(out) = run_python(&spec, &code) else {
        return;
    };
    let out = text(&out);
    assert!(!out.contains("CONNECTED"), "{out}");
    assert!(out.contains(&format!("DENIED {}", host.display())), "{out}");
    assert!(out.contains(&format!("DENIED {}", ours.display())), "{out}");
    // A connected pair (how runtimes talk to their child processes) still works.
    assert!(out.contains("PAIR b'x'"), "{out}");
    assert!(out.contains("DGRAM DENIED"), "{out}");
}

#[test]
fn other_processes_cannot_be_named_limited_or_read() {
    if !supported() {
        return;
    }
    assert!(
        Support::get().process_namespace || std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
        "no PID namespace: {:?}",
        Support::get()
    );
    let data = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let code = format!(
        r#"
import os, resource
print("PPID", os.getppid())
print("PID", os.getpid())
def attempt(name, f):
    try:
        f()
        print("DONE", name)
    except OSError as e:
        print("DENIED", name, e)
core = resource.getrlimit(resource.RLIMIT_CORE)
attempt("prlimit self", lambda: resource.prlimit(0, resource.RLIMIT_CORE, core))
attempt("prlimit other", lambda: resource.prlimit({me}, resource.RLIMIT_CORE))
attempt("affinity other", lambda: os.sched_setaffinity({me}, {{0}}))
attempt("priority user", lambda: os.setpriority(os.PRIO_USER, 0, 0))
attempt("priority other", lambda: os.setpriority(os.PRIO_PROCESS, {me}, 0))
attempt("cmdline other", lambda: open("/proc/{me}/cmdline").read())
print("PROCS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
"#
    );
    let Some(out) = run_python(&spec(Network::None, vec![], data.path()), &code) else {
        return;
    };
    let out = text(&out);
    assert!(out.contains("DONE prlimit self"), "{out}");
    for refused in [
        "prlimit other",
        "affinity other",
        "priority user",
        "priority other",
        "cmdline other",
    ] {
        assert!(
            out.contains(&format!("DENIED {refused}")),
            "{refused}: {out}"
        );
    }
    if Support::get().process_namespace {
        // Process 1 of its own namespace: its parent is outside, and /proc lists only it.
        assert!(out.contains("PPID 0"), "{out}");
        assert!(out.contains("PID 1\n"), "{out}");
        assert!(out.contains("PROCS [1]"), "{out}");
    }
}

#[test]
#[allow(unsafe_code, reason = "SysV shared memory has no safe wrapper")]
fn the_hosts_sysv_shared_memory_is_out_of_reach() {
    if !supported() {
        return;
    }
    // A segment of the host's, under a key the server is told.
    let key = 0x6d63_0000 | (std::process::id() as i32 & 0xffff);
    // SAFETY: shmget/shmat/shmdt/shmctl on a segment this test makes and removes.
    let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
    unsafe {
        let at = libc::shmat(id, std::ptr::null(), 0);
        assert_ne!(at as isize, -1);
        std::ptr::copy_nonoverlapping(b"HOST-SECRET".as_ptr(), at.cast::<u8>(), 11);
        libc::shmdt(at);
    }
    let data = tempfile::tempdir().unwrap();
    let code = format!(
        r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget({key}, 0, 0)
if shm < 0:
    print("DENIED", ctypes.get_errno())
else:
    at = libc.shmat(shm, None, 0)
    print("READ", ctypes.string_at(at, 11))
"#
    );
    let out = run_python(&spec(Network::None, vec![], data.path()), &code);
    // SAFETY: removing the segment made above.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    let Some(out) = out else { return };
    let out = text(&out);
    assert!(!out.contains("HOST-SECRET"), "{out}");
    assert!(out.contains("DENIED"), "{out}");
}

#[test]
fn the_private_home_and_tmp_are_private_and_nothing_written_there_runs() {
    if !supported() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/lib64/ld-linux-x86-64.so.2");
    let script = format!(
        "stat -c 'MODE %n %a' \"$HOME\" \"$TMPDIR\"; echo x > \"$TMPDIR/f\"; stat -c 'FILE %a' \"$TMPDIR/f\"; \
         cp /bin/true \"$TMPDIR/t\" && chmod 700 \"$TMPDIR/t\"; \
         \"$TMPDIR/t\" && echo RAN-DIRECT; {loader} \"$TMPDIR/t\" && echo RAN-LOADER; true"
    );
    let out = run(&spec(Network::None, vec![], data.path()), &script);
    let out = text(&out);
    assert!(out.contains("FILE 600"), "{out}");
    assert_eq!(out.matches("MODE ").count(), 2, "{out}");
    for line in out.lines().filter(|l| l.starts_with("MODE ")) {
        assert!(line.ends_with(" 700"), "{line}: {out}");
    }
    assert!(!out.contains("RAN-DIRECT"), "{out}");
    if Support::get().process_namespace {
        assert!(!out.contains("RAN-LOADER"), "{out}");
    }
}

#[test]
fn every_process_a_server_leaves_behind_ends_with_it() {
    if !supported() || !Support::get().process_namespace {
        assert!(
            std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
            "no PID namespace"
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let marker = format!("417.{}", std::process::id());
    // Double-forked into a session of its own: out of the server's process group.
    let out = run(
        &spec(Network::None, vec![], data.path()),
        &format!("(setsid sleep {marker} &) ; echo LEFT"),
    );
    assert!(text(&out).contains("LEFT"), "{}", text(&out));
    let survivor = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
        })
    };
    for _ in 0..200 {
        if !survivor() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("a process the server left behind survived it");
}

#[test]
fn the_memory_limit_bounds_the_server_as_a_whole() {
    if !supported() {
        return;
    }
    if Support::get().memory_cgroup.is_none() {
        assert!(
            std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
            "no memory cgroup mcpproxy may write"
        );
        eprintln!("SKIPPED: no memory cgroup");
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut spec = spec(Network::None, vec![], data.path());
    spec.limits.memory_mb = Some(384);
    // Three processes of 200 MiB each: each under the per-process limit, not together.
    let touch = "import time; b = bytearray(200 * 1024 * 1024); time.sleep(2); print(\\\"DONE\\\")";
    let script =
        format!("for i in 1 2 3; do /usr/bin/python3 -c \"{touch}\" & done; wait; echo FINISHED");
    let out = text(&run(&spec, &script));
    assert!(out.contains("FINISHED"), "{out}");
    let done = out.lines().filter(|line| *line == "DONE").count();
    assert!(done < 3, "all three finished under a 384 MiB limit: {out}");
}

#[test]
fn the_seccomp_filter_refuses_each_dangerous_call() {
    if !supported() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    // Raw system calls with harmless arguments: each is refused before the kernel looks at
    // them (EPERM = 1; clone3's ENOSYS = 38 sends the C library back to clone).
    let code = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
calls = {"ptrace": 101, "mount": 165, "bpf": 321, "io_uring_setup": 425, "keyctl": 250,
         "unshare": 272, "setns": 308, "clone3": 435, "perf_event_open": 298,
         "userfaultfd": 323, "init_module": 175, "kexec_load": 246}
for name, number in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(number, 0, 0, 0, 0, 0)
    print("CALL", name, result, ctypes.get_errno())
"#;
    if std::env::consts::ARCH != "x86_64" {
        eprintln!("SKIPPED: the system call numbers are x86_64's");
        return;
    }
    let Some(out) = run_python(&spec(Network::None, vec![], data.path()), code) else {
        return;
    };
    let out = text(&out);
    for name in [
        "ptrace",
        "mount",
        "bpf",
        "io_uring_setup",
        "keyctl",
        "unshare",
        "setns",
        "perf_event_open",
        "userfaultfd",
        "init_module",
        "kexec_load",
    ] {
        assert!(
            out.contains(&format!("CALL {name} -1 1\n")),
            "{name}: {out}"
        );
    }
    assert!(out.contains("CALL clone3 -1 38\n"), "{out}");
}

#[test]
fn no_capabilities_small_limits_and_no_abstract_sockets_outside() {
    if !supported() {
        return;
    }
    // An abstract socket of the host's.
    let name = format!("mcpproxy-test-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    use std::os::linux::net::SocketAddrExt;
    let _listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let data = tempfile::tempdir().unwrap();
    let script = format!(
        "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; echo FILES $(ulimit -n); echo CORE $(ulimit -c); \
         /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); print(\"ABSTRACT CONNECTED\")'; true"
    );
    let out = text(&run(&spec(Network::None, vec![], data.path()), &script));
    // The bounding set is emptied when mcpproxy runs as root; otherwise the server holds no
    // capability of the host's anyway.
    let sets: &[&str] = if Support::get().root {
        &["CapEff", "CapPrm", "CapBnd", "CapAmb"]
    } else {
        &["CapEff", "CapPrm", "CapAmb"]
    };
    for cap in sets {
        let line = out
            .lines()
            .find(|l| l.starts_with(cap))
            .unwrap_or_else(|| panic!("no {cap}: {out}"));
        assert!(line.ends_with("0000000000000000"), "{line}: {out}");
    }
    assert!(out.contains("FILES 1024"), "{out}");
    assert!(out.contains("CORE 0"), "{out}");
    assert!(!out.contains("ABSTRACT CONNECTED"), "{out}");
}
