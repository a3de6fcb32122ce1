//! `isolation`, at the top level (the default of every stdio server) and per server (each key
//! given there wins over the default's): the sandbox a stdio server runs in.

use mcpproxy_sandbox::Network;
use mcpproxy_sandbox::egress::{EgressRule, EgressRules};

use super::Context;
use crate::Result;
use crate::model::Isolation;
use crate::raw::RawIsolation;

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

/// The most destinations one server's allow-list may hold.
const MAX_EGRESS_RULES: usize = 256;

fn network_from(value: &serde_json::Value) -> std::result::Result<Network, String> {
    const CHOICES: &str = "use \"none\" (the default: a network of its own, nothing outside it reachable), {\"allow\": [\"api.github.com:443\", \"127.0.0.1:5432\"]} (only those destinations, through mcpproxy's egress proxy) or \"all\" (the host's network)";
    match value {
        serde_json::Value::String(word) => match word.as_str() {
            "none" => Ok(Network::None),
            "all" => Ok(Network::All),
            // Kept refused: the host's loopback is where the proxy's own port, databases and
            // other users' services live. Name the ones the server needs instead.
            "loopback" => Err(format!(
                "'loopback' is not a network policy: the host's loopback holds mcpproxy's own port and every local service, so it is granted only service by service: {{\"allow\": [\"127.0.0.1:PORT\"]}} for each one the server needs; or {CHOICES}"
            )),
            other => Err(format!("'{other}' is not a network policy: {CHOICES}")),
        },
        serde_json::Value::Object(map) => {
            if let Some(key) = map.keys().find(|k| *k != "allow") {
                return Err(format!("unknown key '{key}' in network: {CHOICES}"));
            }
            let Some(serde_json::Value::Array(entries)) = map.get("allow") else {
                return Err(format!(
                    "network.allow must be a list of \"HOST:PORT\" strings: {CHOICES}"
                ));
            };
            if entries.len() > MAX_EGRESS_RULES {
                return Err(format!(
                    "network.allow lists {} destinations, more than {MAX_EGRESS_RULES}: use \"*.domain:PORT\" or a network (\"10.0.0.0/8:443\") to cover many",
                    entries.len()
                ));
            }
            let mut rules = Vec::with_capacity(entries.len());
            for (i, entry) in entries.iter().enumerate() {
                let serde_json::Value::String(text) = entry else {
                    return Err(format!(
                        "network.allow[{i}]: expected a \"HOST:PORT\" string, found {}",
                        super::describe(entry)
                    ));
                };
                rules.push(
                    EgressRule::parse(text).map_err(|why| format!("network.allow[{i}]: {why}"))?,
                );
            }
            Ok(Network::Allow(EgressRules::new(rules)))
        }
        serde_json::Value::Array(_) => Err(format!(
            "a list of destinations goes under \"allow\": {CHOICES}"
        )),
        other => Err(format!(
            "expected a network policy, found {}: {CHOICES}",
            super::describe(other)
        )),
    }
}

fn paths(values: &[String], key: &str, ctx: &Context<'_>) -> Result<Vec<std::path::PathBuf>> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| ctx.path(&format!("{key}[{i}]"), value))
        .collect()
}
