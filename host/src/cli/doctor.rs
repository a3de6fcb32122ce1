//! `mcpproxy doctor`: checks what mcpproxy needs before it can serve, and says for each
//! problem what to do: the config file (where a syntax error is, unknown keys), the data
//! dir, the running owner, the listen address, each server's launch (its command found,
//! grants that can work, the kernel's sandbox), and the plugins the config names but the
//! running proxy has not loaded. Exits 1 when it found a problem, 0 otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use serde_json::Value;

use mcpproxy_config::{self as config, Config, ServerConfig, Transport};

use super::Globals;
use super::output::{Format, Tone, paint, print_data};
use super::remote::Remote;

#[derive(Debug, Args)]
pub(super) struct DoctorCommand {
    /// The config file to check.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output: `table` (readable), `json` or `jsonl`.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

/// One finding: what was checked, whether it holds, and what to do when it does not.
#[derive(Debug, Serialize)]
struct Finding {
    /// `config`, `data dir`, `owner`, `listen`, `server NAME`, `plugins`, `sandbox`.
    subject: String,
    ok: bool,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Finding {
    fn ok(subject: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn problem(
        subject: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            subject: subject.into(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

impl DoctorCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let runtime = crate::cli::runtime::current_thread()?;
        let findings = runtime.block_on(examine(globals, self.config.as_deref()));
        if !print_data(&findings, self.output)? {
            print_findings(&findings);
        }
        Ok(if findings.iter().all(|f| f.ok) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

async fn examine(globals: &Globals, config_path: Option<&Path>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let shown_path = config_path.map(Path::to_path_buf).or_else(|| {
        globals
            .home
            .as_deref()
            .map(|h| config::default_path(Some(h)))
    });
    let loaded = config::load(config_path, globals.home.as_deref());
    let config_ok = loaded.is_ok();
    let config = match loaded {
        Ok(loaded) => {
            findings.push(Finding::ok(
                "config",
                match &loaded.path {
                    Some(path) => format!("{} is valid", path.display()),
                    None => "no config file: every default applies".to_owned(),
                },
            ));
            loaded.config
        }
        Err(e) => {
            findings.push(Finding::problem(
                "config",
                e.to_string(),
                format!(
                    "edit {} where the message says; a running mcpproxy keeps the config it \
                     loaded until the file is valid again",
                    shown_path
                        .as_deref()
                        .map_or_else(|| "the config file".to_owned(), |p| p.display().to_string())
                ),
            ));
            Config::default()
        }
    };
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    findings.push(check_data_dir(&data_dir));
    let owner = match Remote::find(&config, &data_dir).await {
        Ok(owner) => owner,
        Err(e) => {
            findings.push(Finding::problem(
                "owner",
                format!("{e:#}"),
                "wait for the process named to finish, or stop it",
            ));
            None
        }
    };
    let status = match &owner {
        Some(remote) => remote.get("/status", &[]).await.ok(),
        None => None,
    };
    match &status {
        Some(status) => findings.push(Finding::ok(
            "owner",
            format!(
                "mcpproxy {} runs on this data dir{}",
                status["version"].as_str().unwrap_or("?"),
                status["listening"]
                    .as_str()
                    .map(|url| format!(", serving {url}"))
                    .unwrap_or_else(|| ", serving stdio".to_owned())
            ),
        )),
        None => {
            findings.push(Finding::ok(
                "owner",
                "no mcpproxy runs on this data dir (`mcpproxy serve` starts one)",
            ));
            // A config that did not load says no address.
            if config_ok {
                findings.push(check_listen(&config));
            }
        }
    }
    let running: Vec<Value> = status
        .as_ref()
        .and_then(|s| s["upstreams"].as_array().cloned())
        .unwrap_or_default();
    let forbidden = mcpproxy_server::runtime::forbidden_paths(&data_dir, shown_path.as_deref());
    for server in &config.servers {
        let state = running.iter().find(|s| s["name"] == server.name.as_str());
        findings.extend(check_server(server, state, &forbidden));
    }
    let sandboxed: Vec<&ServerConfig> = config
        .servers
        .iter()
        .filter(|s| s.isolation.enabled && matches!(s.transport, Transport::Stdio { .. }))
        .collect();
    if !sandboxed.is_empty() {
        findings.extend(check_sandbox(&sandboxed));
    }
    if let Some(remote) = &owner {
        findings.extend(check_plugins(&config, remote).await);
    }
    findings
}

/// The data dir: there or makeable, private, writable.
fn check_data_dir(dir: &Path) -> Finding {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return Finding::ok(
            "data dir",
            format!(
                "{} does not exist yet: the first start makes it",
                dir.display()
            ),
        );
    };
    if !meta.is_dir() {
        return Finding::problem(
            "data dir",
            format!("{} is not a directory", dir.display()),
            "move it away, or give another --data-dir",
        );
    }
    // Its files are private (0600) whatever the directory's mode; a directory others may
    // write in lets them replace those files.
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Finding::problem(
            "data dir",
            format!(
                "{} has mode {mode:o}: other users may replace the journal, the approvals and the API key",
                dir.display()
            ),
            format!("chmod 700 {}", dir.display()),
        );
    }
    let probe = dir.join(".doctor-probe");
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            Finding::ok(
                "data dir",
                format!("{} is writable, by you only", dir.display()),
            )
        }
        Err(e) => Finding::problem(
            "data dir",
            format!("cannot write in {}: {e}", dir.display()),
            "give it back to your user (chown), or give another --data-dir",
        ),
    }
}

/// With no owner running: the listen address can be bound.
fn check_listen(config: &Config) -> Finding {
    match std::net::TcpListener::bind(config.listen) {
        Ok(_) => Finding::ok("listen", format!("{} is free", config.listen)),
        Err(e) => Finding::problem(
            "listen",
            format!("cannot listen on {}: {e}", config.listen),
            "stop the program that uses it, or set `listen` (or `serve --listen ADDR`) to another address",
        ),
    }
}

/// A server's launch: its command found, its grants possible; its state when an owner runs.
fn check_server(
    server: &ServerConfig,
    state: Option<&Value>,
    forbidden: &[mcpproxy_sandbox::ForbiddenPath],
) -> Vec<Finding> {
    let subject = format!("server {}", mcpproxy_support::quote(&server.name));
    let mut findings = Vec::new();
    if let Transport::Stdio { command, .. } = &server.transport {
        match find_program(command) {
            Some(path) => findings.push(Finding::ok(
                subject.clone(),
                format!(
                    "`{}` is {}",
                    mcpproxy_support::quote(command),
                    path.display()
                ),
            )),
            None => findings.push(Finding::problem(
                subject.clone(),
                format!(
                    "`{}` is not an executable file, nor found in PATH",
                    mcpproxy_support::quote(command)
                ),
                "install it, or set `command` to its full path",
            )),
        }
        let isolation = &server.isolation;
        // The check a change to the server makes before it is written.
        if let Err(mcpproxy_server::manage::Error::Unreachable { source, .. }) =
            mcpproxy_server::manage::check_grants(server, forbidden)
        {
            findings.push(Finding::problem(
                subject.clone(),
                source.to_string(),
                "change `isolation.read`/`isolation.write`",
            ));
        }
        if isolation.enabled {
            for grant in isolation.read.iter().chain(&isolation.write) {
                if !grant.exists() {
                    findings.push(Finding::problem(
                        subject.clone(),
                        format!("the granted path {} does not exist", grant.display()),
                        "create it, or remove the grant",
                    ));
                }
            }
        }
    }
    if let Some(state) = state
        && state["state"] == "error"
    {
        findings.push(Finding::problem(
            subject,
            format!(
                "the running mcpproxy could not start it: {}",
                state["detail"].as_str().unwrap_or("no detail")
            ),
            format!("`mcpproxy upstream logs {}` shows its output", server.name),
        ));
    }
    findings
}

/// `command` as the OS would run it: a path that is an executable file, or a name found in
/// `PATH`.
fn find_program(command: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let path = PathBuf::from(command);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(command))
        .find(|p| executable(p))
}

/// What the kernel's sandbox lacks for the sandboxed stdio servers.
fn check_sandbox(servers: &[&ServerConfig]) -> Vec<Finding> {
    let support = mcpproxy_sandbox::Support::get();
    let mut findings = Vec::new();
    for server in servers {
        let isolation = &server.isolation;
        // What `upstream list` shows of its sandbox, as the proxy would launch it.
        let missing =
            mcpproxy_upstream::SandboxStatus::of(isolation, &[], Vec::new(), None).missing;
        if !missing.is_empty() {
            findings.push(Finding::problem(
                format!("server {}", mcpproxy_support::quote(&server.name)),
                format!("the kernel lacks, for its sandbox: {}", missing.join("; ")),
                if isolation.required {
                    "it does not start (`isolation.required` is true): run mcpproxy where the kernel has these, or set \"required\": false"
                } else {
                    "it starts with less confinement (docs/security.md says what each part adds)"
                },
            ));
        }
    }
    if findings.is_empty() {
        findings.push(Finding::ok(
            "sandbox",
            format!(
                "the kernel has what the servers' sandboxes use (Landlock ABI {})",
                support.landlock_abi
            ),
        ));
    }
    findings
}

/// The policy plugins the config names that the running proxy does not have in force (not
/// loaded, or the config edited since and not reloaded).
async fn check_plugins(config: &Config, remote: &Remote) -> Vec<Finding> {
    let Ok(in_force) = remote.plugins_in_force().await else {
        return Vec::new();
    };
    let plugins = &config.plugins;
    let mut missing = Vec::new();
    for (key, running) in in_force {
        let named = match key {
            "annotators" => &plugins.annotators,
            "validators" => &plugins.validators,
            _ => &plugins.guards,
        };
        for name in named.iter().flatten() {
            if !running.contains(name) {
                missing.push(format!("plugins.{key} names '{name}'"));
            }
        }
    }
    if missing.is_empty() {
        return vec![Finding::ok(
            "plugins",
            "the running mcpproxy has every plugin the config names in force",
        )];
    }
    vec![Finding::problem(
        "plugins",
        format!(
            "{}, which the running mcpproxy does not have in force",
            missing.join("; ")
        ),
        "put the plugin's .wasm in plugins.dir (or `serve --plugins DIR`), then `mcpproxy plugins reload` (it reads the config's lists again)",
    )]
}

fn print_findings(findings: &[Finding]) {
    let problems = findings.iter().filter(|f| !f.ok).count();
    for f in findings {
        let mark = if f.ok {
            paint("ok     ", Some(Tone::Good))
        } else {
            paint("problem", Some(Tone::Bad))
        };
        println!("{mark}  {}: {}", f.subject, f.detail);
        if let Some(fix) = &f.fix {
            println!("         fix: {fix}");
        }
    }
    println!();
    match problems {
        0 => println!("no problems found"),
        1 => println!("1 problem found"),
        n => println!("{n} problems found"),
    }
}
