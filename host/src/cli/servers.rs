//! `mcpproxy upstream add | remove | enable | disable | restart | logs | import`: changing the
//! upstream servers. Through the data dir's owner when one runs (the change is applied at
//! once); else the config file is edited directly (validated, written atomically) and the
//! next `serve` starts with it. `restart` and `logs` need a running owner.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde_json::{Map, Value, json};

use mcpproxy_config as config;
use mcpproxy_server::manage::{Actor, Approve, Change, approve_written, change_file};
use mcpproxy_support::quote;

use super::Globals;
use super::output::{Format, print_data, print_table};
use super::remote::Remote;

#[derive(Debug, Args)]
pub(super) struct Target {
    /// The config file to change [default: ~/.mcpproxy/mcp_config.json].
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    pub(super) output: Format,
}

#[derive(Debug, Args)]
pub(super) struct AddArgs {
    /// The new server's name (letters, digits, '-' and '_').
    name: String,
    /// The URL of a streamable-HTTP server (instead of a command).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    url: Option<String>,
    /// An environment variable of a stdio server (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// A header sent to an HTTP server (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Add it disabled.
    #[arg(long)]
    disabled: bool,
    /// A path its sandbox may read (repeatable).
    #[arg(long = "read", value_name = "PATH")]
    read: Vec<String>,
    /// A path its sandbox may read and write, e.g. a filesystem server's directory
    /// (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    write: Vec<String>,
    /// Its sandbox's network: none (the default) or all.
    #[arg(long, value_name = "none|all")]
    network: Option<String>,
    /// A variable of mcpproxy's environment passed to it (repeatable).
    #[arg(long = "env-passthrough", value_name = "NAME")]
    env_passthrough: Vec<String>,
    /// Run it without a sandbox: as you, with your files, mcpproxy's environment and the
    /// network.
    #[arg(long, conflicts_with_all = ["read", "write", "network", "env_passthrough"])]
    no_sandbox: bool,
    /// Do not grant what its path arguments suggest (by default a directory among its
    /// arguments may be written and a file read, shown before it is added).
    #[arg(long)]
    no_inferred_grants: bool,
    /// Approve its calls too: without it the server starts quarantined (listed, never
    /// called) until `mcpproxy upstream approve NAME`.
    #[arg(long)]
    approve: bool,
    #[command(flatten)]
    target: Target,
    /// The command of a stdio server and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
pub(super) struct NameArgs {
    /// The server's name.
    name: String,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Args)]
pub(super) struct LogsArgs {
    /// The server's name.
    name: String,
    /// How many of the last lines (at most 500).
    #[arg(short = 'n', long, default_value_t = 50)]
    lines: usize,
    /// Keep printing new lines until Ctrl-C.
    #[arg(short, long)]
    follow: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Args)]
pub(super) struct ImportArgs {
    /// A Claude Desktop (`claude_desktop_config.json`), Cursor (`mcp.json`) or VS Code
    /// (`.vscode/mcp.json` or `settings.json`) config file.
    #[arg(long = "from", value_name = "FILE")]
    from: PathBuf,
    /// Add them (quarantined); without it, only show what would be added.
    #[arg(long)]
    yes: bool,
    /// Import an entry even when a configured server runs the same command (or URL).
    #[arg(long)]
    allow_duplicate: bool,
    /// Do not grant what each server's path arguments suggest (by default a directory among
    /// its arguments may be written and a file read, shown for each server).
    #[arg(long)]
    no_inferred_grants: bool,
    #[command(flatten)]
    target: Target,
}

/// Where changes go.
pub(super) enum Destination {
    Owner(Remote),
    File {
        path: PathBuf,
        home: Option<PathBuf>,
        data_dir: PathBuf,
    },
}

pub(super) async fn destination(globals: &Globals, target: &Target) -> Result<Destination> {
    let loaded = config::load(target.config.as_deref(), globals.home.as_deref())?;
    let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
    if let Some(remote) = Remote::find(&loaded.config, &data_dir).await? {
        return Ok(Destination::Owner(remote));
    }
    if loaded.config.cluster.postgres.is_some() {
        // The file's mcpServers are ignored in a cluster: a change there would change
        // nothing the replicas run.
        bail!(
            "this config has cluster.postgres: the servers are the cluster's, changed through a \
             running replica (start one with `mcpproxy serve`, or use the REST API of any \
             replica); the file's mcpServers are ignored"
        );
    }
    let path = loaded
        .path
        .or_else(|| {
            globals
                .home
                .as_deref()
                .map(|h| config::default_path(Some(h)))
        })
        .context("no config file: pass --config FILE")?;
    Ok(Destination::File {
        path,
        home: globals.home.clone(),
        data_dir,
    })
}

/// Makes one change, through the owner or in the file; prints what happened.
async fn change(
    globals: &Globals,
    target: &Target,
    change: Change,
    approve: Approve,
) -> Result<ExitCode> {
    let destination = destination(globals, target).await?;
    let answer = apply(&destination, change, approve).await?;
    if !print_data(&answer, target.output)? {
        match &destination {
            Destination::Owner(_) => println!("{}", answer["summary"].as_str().unwrap_or("done")),
            Destination::File { path, .. } => println!(
                "changed {} (no mcpproxy is running on this data dir: the next `mcpproxy serve` starts with it)",
                path.display()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn apply(
    destination: &Destination,
    change: Change,
    approve: Approve,
) -> Result<Value> {
    const TIMEOUT: Duration = Duration::from_secs(60);
    let query = if approve == Approve::Server {
        "?approve=true"
    } else {
        ""
    };
    match destination {
        Destination::Owner(remote) => match change {
            Change::Add { name, mut entry } => {
                entry["name"] = Value::String(name);
                remote
                    .post(&format!("/upstreams{query}"), &entry, TIMEOUT)
                    .await
            }
            Change::Remove { name } => remote.delete(&format!("/upstreams/{name}"), TIMEOUT).await,
            Change::Patch { name, patch } => {
                remote
                    .patch(&format!("/upstreams/{name}{query}"), &patch, TIMEOUT)
                    .await
            }
        },
        Destination::File {
            path,
            home,
            data_dir,
        } => {
            change_in_file(path, home.as_deref(), data_dir, change, approve)?;
            Ok(json!({"file": path}))
        }
    }
}

/// A person's change to the file while no mcpproxy runs: the file is changed, and the
/// trust store records what the person approved by writing it (the launch spec of a server
/// added or whose launch changed; its calls with `--approve`), or forgets a removed server.
fn change_in_file(
    path: &std::path::Path,
    home: Option<&std::path::Path>,
    data_dir: &std::path::Path,
    change: Change,
    approve: Approve,
) -> Result<()> {
    let before = if path.exists() {
        config::load(Some(path), home)?.config
    } else {
        config::Config::default()
    };
    // Servers already in the file at the data dir's first start are approved as written.
    let trust = mcpproxy_server::runtime::open_trust(data_dir, &before.servers)?;
    let name = change.name().to_owned();
    let removing = matches!(change, Change::Remove { .. });
    let forbidden = mcpproxy_server::runtime::forbidden_paths(data_dir, Some(path));
    let after = change_file(path, home, change, Actor::Person, &forbidden)?;
    if removing {
        trust.forget(&name)?;
        return Ok(());
    }
    if let Some(server) = after.server(&name) {
        approve_written(&trust, before.server(&name), server, approve)?;
    }
    Ok(())
}

async fn owner(globals: &Globals, target: &Target, what: &str) -> Result<Remote> {
    match destination(globals, target).await? {
        Destination::Owner(remote) => Ok(remote),
        Destination::File { .. } => bail!(
            "no mcpproxy is running on this data dir: `upstream {what}` acts on a running one (start it with `mcpproxy serve`)"
        ),
    }
}

pub(super) async fn add(globals: &Globals, args: AddArgs) -> Result<ExitCode> {
    let mut entry = Map::new();
    match (&args.url, args.command.split_first()) {
        (Some(url), None) => {
            entry.insert("url".into(), json!(url));
        }
        (None, Some((command, rest))) => {
            entry.insert("command".into(), json!(command));
            if !rest.is_empty() {
                entry.insert("args".into(), json!(rest));
            }
        }
        (None, None) => bail!(
            "give the server's command after `--` (mcpproxy upstream add {} -- npx -y @modelcontextprotocol/server-filesystem /tmp) or --url URL",
            args.name
        ),
        (Some(_), Some(_)) => bail!("give either --url or a command after `--`, not both"),
    }
    if !args.env.is_empty() {
        entry.insert(
            "env".into(),
            Value::Object(pairs(&args.env, '=', "--env KEY=VALUE")?),
        );
    }
    if !args.headers.is_empty() {
        entry.insert(
            "headers".into(),
            Value::Object(pairs(&args.headers, ':', "--header 'Name: value'")?),
        );
    }
    if args.disabled {
        entry.insert("enabled".into(), json!(false));
    }
    let mut isolation = Map::new();
    if args.no_sandbox {
        isolation.insert("enabled".into(), json!(false));
    }
    // What its path arguments suggest, proposed to the person adding it (never to an agent,
    // whose adds go through `upstream_servers`): shown here, written into the launch the
    // person approves, and listed by `upstream inspect`.
    let (mut read, mut write) = (args.read.clone(), args.write.clone());
    if !args.no_sandbox && !args.no_inferred_grants && args.url.is_none() {
        let (new_read, new_write) = inferred_grants(
            args.command.get(1..).unwrap_or_default(),
            &read,
            &write,
            &forbidden_for(globals, &args.target),
        );
        if let Some(line) = inferred_line(&args.name, &new_read, &new_write) {
            eprintln!("{line}");
        }
        write.extend(new_write.iter().map(|p| p.display().to_string()));
        read.extend(new_read.iter().map(|p| p.display().to_string()));
    }
    for (key, values) in [
        ("read", &read),
        ("write", &write),
        ("env_passthrough", &args.env_passthrough),
    ] {
        if !values.is_empty() {
            isolation.insert(key.into(), json!(values));
        }
    }
    if let Some(network) = &args.network {
        isolation.insert("network".into(), json!(network));
    }
    if !isolation.is_empty() {
        if args.url.is_some() {
            bail!(
                "the sandbox options (--read, --write, --network, --env-passthrough, --no-sandbox) apply to a server started with a command, not to --url"
            );
        }
        entry.insert("isolation".into(), Value::Object(isolation));
    }
    // A server added from the command line starts quarantined unless --approve: the person
    // typed how it starts, and reviews its tools before approving its calls.
    entry.insert("quarantined".into(), json!(!args.approve));
    let name = args.name.clone();
    let approve = if args.approve {
        Approve::Server
    } else {
        Approve::Launch
    };
    let code = change(
        globals,
        &args.target,
        Change::Add {
            name,
            entry: Value::Object(entry),
        },
        approve,
    )
    .await?;
    if args.target.output == Format::Table && !args.approve {
        eprintln!(
            "'{}' is quarantined until you approve it: `mcpproxy upstream inspect {0}`, then `mcpproxy upstream approve {0}`",
            args.name
        );
    }
    Ok(code)
}

/// The read and write grants a server's path arguments suggest (`proposed_grants`), without
/// those already `given`. Proposed only to a person (`upstream add`, `upstream import`), never
/// to an agent, whose adds go through `upstream_servers`.
///
/// A path no sandbox may reach (`forbidden`: the data dir, the config file) is never
/// proposed, which would make the add fail: it is left out, and stderr says why.
fn inferred_grants(
    args: &[String],
    given_read: &[String],
    given_write: &[String],
    forbidden: &[mcpproxy_sandbox::ForbiddenPath],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let (read, write) = mcpproxy_sandbox::proposed_grants(args, home.as_deref());
    let new = |inferred: Vec<PathBuf>, given: &[String]| -> Vec<PathBuf> {
        inferred
            .into_iter()
            .filter(|p| !given.iter().any(|g| std::path::Path::new(g) == p))
            .filter(|p| {
                match mcpproxy_sandbox::check_grants_against(std::iter::once(p), forbidden) {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!("not proposed as a grant: {e}");
                        false
                    }
                }
            })
            .collect()
    };
    (new(read, given_read), new(write, given_write))
}

/// The paths no grant may reach for the config `target` names (its data dir and file); none
/// when the config does not load (the change then fails with its error anyway).
fn forbidden_for(globals: &Globals, target: &Target) -> Vec<mcpproxy_sandbox::ForbiddenPath> {
    match config::load(target.config.as_deref(), globals.home.as_deref()) {
        Ok(loaded) => {
            let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
            let file = loaded.path.or_else(|| {
                globals
                    .home
                    .as_deref()
                    .map(|h| config::default_path(Some(h)))
            });
            mcpproxy_server::runtime::forbidden_paths(&data_dir, file.as_deref())
        }
        Err(_) => Vec::new(),
    }
}

/// What a person is told about the grants inferred for `name`; `None` when there are none.
fn inferred_line(name: &str, read: &[PathBuf], write: &[PathBuf]) -> Option<String> {
    if read.is_empty() && write.is_empty() {
        return None;
    }
    let listed = |paths: &[PathBuf]| {
        if paths.is_empty() {
            return "nothing more".to_owned();
        }
        paths
            .iter()
            .map(|p| quote(&p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "'{name}' may write {} and read {}: inferred from its arguments, part of the launch you approve (--no-inferred-grants to leave them out)",
        listed(write),
        listed(read),
    ))
}

fn pairs(items: &[String], separator: char, usage: &str) -> Result<Map<String, Value>> {
    items
        .iter()
        .map(|item| {
            let (key, value) = item
                .split_once(separator)
                .ok_or_else(|| anyhow!("'{item}' is not {usage}"))?;
            Ok((key.trim().to_owned(), json!(value.trim())))
        })
        .collect()
}

pub(super) async fn remove(globals: &Globals, args: NameArgs) -> Result<ExitCode> {
    change(
        globals,
        &args.target,
        Change::Remove { name: args.name },
        Approve::Launch,
    )
    .await
}

pub(super) async fn set_enabled(
    globals: &Globals,
    args: NameArgs,
    enabled: bool,
) -> Result<ExitCode> {
    let destination = destination(globals, &args.target).await?;
    let name = args.name.clone();
    let answer = apply(
        &destination,
        Change::Patch {
            name: args.name,
            patch: json!({"enabled": enabled}),
        },
        Approve::Launch,
    )
    .await?;
    if !print_data(&answer, args.target.output)? {
        let done = if enabled { "enabled" } else { "disabled" };
        match destination {
            Destination::Owner(_) => println!("{done} '{name}'"),
            Destination::File { path, .. } => println!(
                "{done} '{name}' in {} (no mcpproxy is running on this data dir: the next `mcpproxy serve` starts with it)",
                path.display()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn restart(globals: &Globals, args: NameArgs) -> Result<ExitCode> {
    let remote = owner(globals, &args.target, "restart").await?;
    let answer = remote
        .post(
            &format!("/upstreams/{}/restart", args.name),
            &json!({}),
            Duration::from_secs(60),
        )
        .await?;
    if !print_data(&answer, args.target.output)? {
        println!("restarted '{}'", args.name);
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn logs(globals: &Globals, args: LogsArgs) -> Result<ExitCode> {
    let remote = owner(globals, &args.target, "logs").await?;
    let path = format!("/upstreams/{}/logs", args.name);
    let fetch = |lines: usize| {
        let remote = &remote;
        let path = &path;
        async move {
            let answer = remote.get(path, &[("lines", lines.to_string())]).await?;
            let total = answer["total_lines"].as_u64().unwrap_or(0);
            let lines: Vec<Value> = answer["lines"].as_array().cloned().unwrap_or_default();
            anyhow::Ok((lines, total))
        }
    };
    let (lines, mut seen) = fetch(args.lines.clamp(1, 500)).await?;
    print_lines(&lines, args.target.output)?;
    if args.target.output == Format::Table {
        super::states::say_why_logs_end(&remote, &args.name, !lines.is_empty()).await?;
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let (lines, total) = fetch(500).await?;
        // Lines carry their number; a stack trace's left-out middle makes counting from
        // the end wrong (a proxy of an earlier version sends no numbers: counted then).
        let skip = if lines.iter().all(|l| l["seq"].as_u64().is_some()) {
            lines.partition_point(|l| l["seq"].as_u64().unwrap_or(0) <= seen)
        } else {
            let new = usize::try_from(total.saturating_sub(seen)).unwrap_or(usize::MAX);
            lines.len().saturating_sub(new)
        };
        print_lines(&lines[skip..], args.target.output)?;
        seen = total;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_lines(lines: &[Value], format: Format) -> Result<()> {
    if format == Format::Table {
        for line in lines {
            // A server's stderr is its own text: escaped, so it cannot drive the terminal.
            println!("{}", quote(line["line"].as_str().unwrap_or_default()));
        }
    } else if !lines.is_empty() {
        print_data(
            lines,
            if format == Format::Json {
                Format::Jsonl
            } else {
                format
            },
        )?;
    }
    Ok(())
}

pub(super) async fn import(globals: &Globals, args: ImportArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.from)
        .with_context(|| format!("cannot read {}", args.from.display()))?;
    let found = foreign_servers(&text).with_context(|| {
        format!(
            "{} is not a config file mcpproxy can import",
            args.from.display()
        )
    })?;
    let destination = destination(globals, &args.target).await?;
    let loaded = config::load(args.target.config.as_deref(), globals.home.as_deref())?;
    let known = super::import_check::Known::new(&loaded.config.servers, loaded.config.listen);
    let existing: Vec<String> = match &destination {
        Destination::Owner(remote) => remote
            .get("/upstreams", &[])
            .await?
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|s| s["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        Destination::File { path, .. } => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            config::document::Document::parse(&text)
                .map(|d| d.servers().into_iter().map(|(n, _)| n).collect())
                .unwrap_or_default()
        }
    };
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let mut inferred_lines = Vec::new();
    let forbidden = forbidden_for(globals, &args.target);
    for (name, mut entry) in found {
        // A stdio server's path arguments suggest grants, as for `upstream add`: written into
        // its isolation (so part of the launch approved), and shown per server.
        let mut grants = json!(null);
        if !args.no_inferred_grants
            && let Some(command_args) = entry["command"].is_string().then(|| {
                entry["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
        {
            let (read, write) = inferred_grants(&command_args, &[], &[], &forbidden);
            if let Some(line) = inferred_line(&name, &read, &write) {
                let mut isolation = Map::new();
                for (key, paths) in [("read", &read), ("write", &write)] {
                    if !paths.is_empty() {
                        isolation.insert(key.into(), json!(paths));
                    }
                }
                entry["isolation"] = Value::Object(isolation);
                grants = json!({"read": read, "write": write, "from": "its arguments"});
                inferred_lines.push((name.clone(), line));
            }
        }
        // Shown with secret-looking arguments and the URL's secrets masked.
        let what = entry["command"]
            .as_str()
            .map(|c| {
                let args: Vec<String> = entry["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                std::iter::once(c.to_owned())
                    .chain(mcpproxy_auth::masking::mask_args(&args))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .or_else(|| entry["url"].as_str().map(mcpproxy_auth::masking::mask_url))
            .unwrap_or_default();
        let outcome = if existing.contains(&name) {
            "exists: skipped".to_owned()
        } else if let Some(skip) = known.check(&entry, args.allow_duplicate) {
            skip.outcome()
        } else if !args.yes {
            "would be added (quarantined)".to_owned()
        } else {
            match apply(
                &destination,
                Change::Add {
                    name: name.clone(),
                    entry,
                },
                Approve::Launch,
            )
            .await
            {
                Ok(_) => "added (quarantined)".to_owned(),
                Err(e) => format!(
                    "not added: {}",
                    mcpproxy_auth::masking::mask_text(&format!("{e:#}"))
                ),
            }
        };
        if outcome.starts_with("skipped") || outcome.starts_with("exists") {
            // Nothing of it is added: nothing is proposed.
            inferred_lines.retain(|(n, _)| n != &name);
            grants = json!(null);
        }
        let mut result = json!({"name": name, "server": what, "outcome": outcome});
        // Only a stdio server that is added has grants proposed.
        if !grants.is_null() {
            result["proposed_grants"] = grants;
        }
        results.push(result);
        rows.push(vec![name, what, outcome]);
    }
    if !print_data(&results, args.target.output)? {
        if rows.is_empty() {
            println!("no servers in {}", args.from.display());
        } else {
            print_table(&["NAME", "SERVER", "OUTCOME"], &rows);
        }
        for (_, line) in &inferred_lines {
            eprintln!("{line}");
        }
        if !args.yes && !rows.is_empty() {
            eprintln!(
                "nothing was changed: run again with --yes to add them, quarantined until you approve each"
            );
        }
    }
    let failed = results.iter().any(|r| {
        r["outcome"]
            .as_str()
            .is_some_and(|o| o.starts_with("not added"))
    });
    Ok(if failed {
        ExitCode::from(super::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

/// The servers of a Claude Desktop, Cursor or VS Code config, as mcpproxy entries
/// (quarantined), with names made valid (`my server` becomes `my-server`).
fn foreign_servers(text: &str) -> Result<Vec<(String, Value)>> {
    let _: Value = serde_json::from_str(text).context("not JSON")?;
    // Claude Desktop and Cursor: `mcpServers`; VS Code: `servers` (mcp.json) or
    // `mcp.servers` (settings.json). Read in the file's order.
    use config::document::object_entries;
    let servers = object_entries(text, &["mcpServers"])
        .or_else(|| object_entries(text, &["servers"]))
        .or_else(|| object_entries(text, &["mcp", "servers"]))
        .context("no `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) object")?;
    let mut found = Vec::new();
    for (name, server) in &servers {
        let mut entry = Map::new();
        for key in ["command", "args", "env", "url", "headers"] {
            if let Some(value) = server.get(key) {
                entry.insert(key.to_owned(), value.clone());
            }
        }
        if let Some(dir) = server.get("cwd") {
            entry.insert("working_dir".into(), dir.clone());
        }
        if server.get("disabled") == Some(&Value::Bool(true)) {
            entry.insert("enabled".into(), json!(false));
        }
        entry.insert("quarantined".into(), json!(true));
        found.push((valid_name(name), Value::Object(entry)));
    }
    Ok(found)
}

fn valid_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "server".to_owned()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_cursor_and_vscode_shapes_are_read() {
        let claude =
            r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}}}}"#;
        let found = foreign_servers(claude).unwrap();
        assert_eq!(
            found,
            vec![(
                "fs".to_owned(),
                json!({"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}, "quarantined": true})
            )]
        );
        let vscode =
            r#"{"servers": {"my server": {"type": "http", "url": "http://h/mcp"}}, "inputs": []}"#;
        assert_eq!(
            foreign_servers(vscode).unwrap(),
            vec![(
                "my-server".to_owned(),
                json!({"url": "http://h/mcp", "quarantined": true})
            )]
        );
        assert!(foreign_servers("{}").is_err());
    }
}
