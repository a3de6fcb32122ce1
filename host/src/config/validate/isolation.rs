//! `isolation`, at the top level (the default of every stdio server) and per server (each key
//! given there wins over the default's): the sandbox a stdio server runs in.

use mcpproxy_sandbox::Network;

use super::Context;
use crate::config::Result;
use crate::config::model::Isolation;
use crate::config::raw::RawIsolation;

/// The smallest address space a server is given: less and no runtime starts.
const MIN_MEMORY_MB: u64 = 64;

/// `raw` (at `key`) applied over `base`.
pub(super) fn isolation_from(
    raw: &RawIsolation,
    base: &Isolation,
    key: &str,
    ctx: &Context<'_>,
) -> Result<Isolation> {
    let at = |field: &str| format!("{key}.{field}");
    let mut isolation = base.clone();
    if raw.image.is_some() {
        return Err(ctx.err(
            &at("image"),
            "running a server in a container image is not supported yet: no container engine could be tested with mcpproxy. Leave 'image' out to use the native sandbox (Landlock, a network namespace, seccomp)",
        ));
    }
    if let Some(enabled) = raw.enabled {
        isolation.enabled = enabled;
    }
    if let Some(required) = raw.required {
        isolation.required = required;
    }
    if let Some(network) = &raw.network {
        isolation.network = network_from(network).map_err(|why| ctx.err(&at("network"), why))?;
    }
    if let Some(read) = &raw.read {
        isolation.read = paths(read, &at("read"), ctx)?;
    }
    if let Some(write) = &raw.write {
        isolation.write = paths(write, &at("write"), ctx)?;
    }
    if let Some(names) = &raw.env_passthrough {
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(ctx.err(
                    &format!("{}[{i}]", at("env_passthrough")),
                    format!("'{name}' is not an environment variable name: it must be non-empty, without '='"),
                ));
            }
        }
        isolation.env_passthrough = names.clone();
    }
    let limit = |value: u64| (value > 0).then_some(value);
    if let Some(mb) = raw.memory_mb {
        if mb != 0 && mb < MIN_MEMORY_MB {
            return Err(ctx.err(
                &at("memory_mb"),
                format!("{mb} MiB is too little for any runtime to start: give at least {MIN_MEMORY_MB}, or 0 for no limit"),
            ));
        }
        isolation.limits.memory_mb = limit(mb);
    }
    if let Some(processes) = raw.max_processes {
        isolation.limits.max_processes = limit(processes);
    }
    if let Some(files) = raw.open_files {
        if files != 0 && files < 16 {
            return Err(ctx.err(
                &at("open_files"),
                format!("{files} open files is too few for a server to start: give at least 16, or 0 for no limit"),
            ));
        }
        isolation.limits.open_files = limit(files);
    }
    if let Some(seconds) = raw.cpu_seconds {
        isolation.limits.cpu_seconds = limit(seconds);
    }
    Ok(isolation)
}

fn network_from(value: &serde_json::Value) -> std::result::Result<Network, String> {
    match value.as_str() {
        Some("none") => Ok(Network::None),
        Some("all") => Ok(Network::All),
        Some("loopback") => Err("'loopback' is not supported yet: Landlock rules name ports, not addresses, so this version cannot let a server reach this machine's loopback and nothing else. Use \"none\" (the default: a network of its own) or \"all\" (the host's network)".to_owned()),
        Some(other) => Err(format!("'{other}' is not a network policy: use \"none\" (the default: a network of its own, nothing outside it reachable) or \"all\" (the host's network)")),
        None if value.is_array() => Err("a list of destinations is not supported yet: it needs a filtering proxy this version does not have. Use \"none\" (the default) or \"all\"".to_owned()),
        None => Err(format!("expected \"none\" or \"all\", found {}", super::describe(value))),
    }
}

fn paths(values: &[String], key: &str, ctx: &Context<'_>) -> Result<Vec<std::path::PathBuf>> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| ctx.path(&format!("{key}[{i}]"), value))
        .collect()
}
