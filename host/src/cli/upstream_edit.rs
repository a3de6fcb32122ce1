//! `mcpproxy upstream edit NAME ...`: a person's change to one server's launch (command and
//! arguments, environment, sandbox grants and network, URL and headers), made without
//! removing it (which forgets its approvals) or editing the file by hand (which the running
//! proxy takes as someone else's edit, not started until approved). The change is shown
//! first, line by line as `upstream inspect` shows a launch change (values a person approves
//! included, secret-looking ones masked); it is then made as a person's change, which
//! approves the launch it writes.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Map, Value, json};

use mcpproxy_config::{self as config, ServerConfig};
use mcpproxy_server::manage::{Approve, Change};
use mcpproxy_trust::LaunchSpec;

use super::Globals;
use super::output::print_data;
use super::servers::{Destination, Target, apply, destination};

#[derive(Debug, Args)]
pub(super) struct EditArgs {
    /// The server's name.
    name: String,
    /// Set an environment variable (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Remove an environment variable (repeatable).
    #[arg(long = "unset-env", value_name = "KEY")]
    unset_env: Vec<String>,
    /// Grant its sandbox a path to read (repeatable).
    #[arg(long = "read", value_name = "PATH")]
    read: Vec<String>,
    /// Grant its sandbox a path to read and write (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    write: Vec<String>,
    /// Take a path out of its sandbox's grants, read or write (repeatable).
    #[arg(long = "revoke", value_name = "PATH")]
    revoke: Vec<String>,
    /// Its sandbox's network: none or all.
    #[arg(long, value_name = "none|all")]
    network: Option<String>,
    /// The URL of an HTTP server.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Set a header sent to an HTTP server (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Make the change without asking (the question is asked in a terminal only).
    #[arg(short, long)]
    yes: bool,
    #[command(flatten)]
    target: Target,
    /// A new command and its arguments, after `--`: they replace the old ones whole.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub(super) async fn edit(globals: &Globals, args: EditArgs) -> Result<ExitCode> {
    let loaded = config::load(args.target.config.as_deref(), globals.home.as_deref())?;
    let path = loaded
        .path
        .clone()
        .context("no config file: pass --config FILE")?;
    let before = loaded
        .config
        .server(&args.name)
        .cloned()
        .with_context(|| loaded.config.unknown_server(&args.name))?;
    let entry = entry_of(&path, &args.name)?;
    let patch = patch_of(&args, &entry)?;
    if patch.is_empty() {
        bail!(
            "nothing to change: give what to change (--env, --unset-env, --read, --write, --revoke, --network, --url, --header, or `-- COMMAND ARGS...`)"
        );
    }
    let after = preview(&path, globals.home.as_deref(), &args.name, &patch)?;
    let lines = LaunchSpec::of(&before).view.diff(&LaunchSpec::of(&after));
    if lines.is_empty() {
        println!(
            "'{}' starts as it did: nothing of its launch changes",
            args.name
        );
    } else {
        println!("'{}' will start changed:", args.name);
        for line in &lines {
            println!("  {line}");
        }
    }
    if !args.yes && std::io::stdin().is_terminal() && !confirm()? {
        println!("nothing changed");
        return Ok(ExitCode::SUCCESS);
    }
    let destination = destination(globals, &args.target).await?;
    let answer = apply(
        &destination,
        Change::Patch {
            name: args.name.clone(),
            patch: Value::Object(patch),
        },
        Approve::Launch,
    )
    .await?;
    if !print_data(&answer, args.target.output)? {
        match destination {
            Destination::Owner(_) => println!(
                "changed '{}' and approved its launch as shown: {}",
                args.name,
                answer["summary"].as_str().unwrap_or("done")
            ),
            Destination::File { path, .. } => println!(
                "changed '{}' in {} and approved its launch as shown (no mcpproxy is running on this data dir: the next `mcpproxy serve` starts with it)",
                args.name,
                path.display()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks on the terminal; `true` for yes.
fn confirm() -> Result<bool> {
    use std::io::Write;
    print!("make this change and approve the launch? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// The server's entry as the file writes it (references such as `${secret:NAME}` kept).
fn entry_of(path: &Path, name: &str) -> Result<Map<String, Value>> {
    let text = config::read_bounded(path)?;
    let file: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let found = match &file["mcpServers"] {
        Value::Array(servers) => servers.iter().find(|s| s["name"] == name).cloned(),
        Value::Object(servers) => servers.get(name).cloned(),
        _ => None,
    };
    match found {
        Some(Value::Object(entry)) => Ok(entry),
        _ => bail!("no upstream server named '{name}' in {}", path.display()),
    }
}

/// The keys `args` change, as a merge patch of the entry: the sandbox's lists whole (what the
/// entry grants, with the grants added and revoked), the variables and headers one by one.
fn patch_of(args: &EditArgs, entry: &Map<String, Value>) -> Result<Map<String, Value>> {
    let mut patch = Map::new();
    if let Some((command, rest)) = args.command.split_first() {
        patch.insert("command".into(), json!(command));
        patch.insert("args".into(), json!(rest));
    }
    // A merge patch (RFC 7386, as the config's editor applies it): the variables and headers
    // named are set, a `null` removes one, the others stay.
    if !args.env.is_empty() || !args.unset_env.is_empty() {
        let mut env = Map::new();
        for pair in &args.env {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("--env {pair}: write KEY=VALUE"))?;
            env.insert(key.to_owned(), json!(value));
        }
        for key in &args.unset_env {
            if entry["env"].get(key).is_none() {
                bail!("--unset-env {key}: the server has no variable {key}");
            }
            env.insert(key.clone(), Value::Null);
        }
        patch.insert("env".into(), Value::Object(env));
    }
    if let Some(url) = &args.url {
        patch.insert("url".into(), json!(url));
    }
    if !args.headers.is_empty() {
        let mut headers = Map::new();
        for header in &args.headers {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("--header {header}: write 'NAME: VALUE'"))?;
            headers.insert(name.trim().to_owned(), json!(value.trim()));
        }
        patch.insert("headers".into(), Value::Object(headers));
    }
    let grants = !args.read.is_empty() || !args.write.is_empty() || !args.revoke.is_empty();
    if grants || args.network.is_some() {
        let mut isolation = entry
            .get("isolation")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (key, added) in [("read", &args.read), ("write", &args.write)] {
            let mut paths: Vec<Value> = isolation
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for path in added {
                if !paths.iter().any(|p| p == path.as_str()) {
                    paths.push(json!(path));
                }
            }
            paths.retain(|p| !args.revoke.iter().any(|r| p == r.as_str()));
            isolation.insert(key.into(), Value::Array(paths));
        }
        for revoked in &args.revoke {
            let granted = [&args.read, &args.write]
                .iter()
                .any(|added| added.contains(revoked))
                || ["read", "write"].iter().any(|key| {
                    entry["isolation"][key]
                        .as_array()
                        .is_some_and(|paths| paths.iter().any(|p| p == revoked.as_str()))
                });
            if !granted {
                bail!("--revoke {revoked}: the server's sandbox grants no such path");
            }
        }
        if let Some(network) = &args.network {
            isolation.insert("network".into(), json!(network));
        }
        patch.insert("isolation".into(), Value::Object(isolation));
    }
    Ok(patch)
}

/// The server as it would be after `patch`: the file's text patched in memory and validated
/// whole (nothing written).
fn preview(
    path: &Path,
    home: Option<&Path>,
    name: &str,
    patch: &Map<String, Value>,
) -> Result<ServerConfig> {
    let text = config::read_bounded(path)?;
    let mut document = config::document::Document::parse(&text)?;
    document.patch_server(name, &Value::Object(patch.clone()))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let config =
        config::Config::from_json_in(&document.to_text(), &path.display().to_string(), &dir, home)
            .map_err(|e| anyhow::anyhow!("the change would make the config invalid: {e}"))?;
    config
        .server(name)
        .cloned()
        .with_context(|| format!("'{name}' is gone after the change"))
}
