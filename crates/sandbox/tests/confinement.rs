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
    }
}

/// Runs `script` with bash in the sandbox of `spec`.
fn run(spec: &SandboxSpec, script: &str) -> Output {
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
    drop(prepared);
    output
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

#[test]
fn the_environment_is_rebuilt_and_the_parent_cannot_be_signalled() {
    if !supported() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    // SAFETY: a test thread sets a variable no other test reads.
    unsafe { std::env::set_var("MCPPROXY_TEST_SECRET", "hunter2") };
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
        4,
        "{:?}",
        prepared.report.missing
    );
}

#[test]
fn a_group_left_by_an_mcpproxy_that_is_gone_is_swept_and_never_collides() {
    let Some(parent) = Support::get().pids_cgroup.clone() else {
        eprintln!("SKIPPED: no pids cgroup mcpproxy may write");
        return;
    };
    // A group as a killed mcpproxy (a pid no process has) leaves it.
    let abandoned = parent.join("mcpproxy-4194304-0-0-test");
    std::fs::create_dir(&abandoned).unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = run(&spec(Network::None, vec![], data.path()), "echo started");
    assert!(String::from_utf8_lossy(&out.stdout).contains("started"));
    assert!(!abandoned.exists(), "the abandoned group is still there");
}
