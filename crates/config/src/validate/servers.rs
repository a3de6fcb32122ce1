//! `mcpServers`: each server's name, transport (`command` or `url`), its `args`, `env`,
//! `working_dir` or `headers`, and its own `tool_call_timeout_ms`.

use std::collections::BTreeMap;

use super::isolation::isolation_from;
use super::{Context, MAX_NAME_LEN, tool_call_timeout};
use crate::model::{Isolation, OAuthConfig};
use crate::raw::{self, RawServer, RawServers};
use crate::{Result, ServerConfig, Transport};

/// One entry of `mcpServers` with the key path it was found at.
struct Entry {
    key: String,
    /// The name from the map form's key.
    map_name: Option<String>,
    raw: RawServer,
}

pub(super) fn servers_from(
    servers: RawServers,
    isolation: &Isolation,
    start: &crate::Start,
    ctx: &Context<'_>,
) -> Result<Vec<ServerConfig>> {
    let entries: Vec<Entry> = match servers {
        RawServers::List(list) => list
            .into_iter()
            .enumerate()
            .map(|(i, raw)| Entry {
                key: format!("mcpServers[{i}]"),
                map_name: None,
                raw,
            })
            .collect(),
        RawServers::Map(map) => map
            .into_iter()
            .map(|(name, raw)| {
                let mut key = String::from("mcpServers");
                raw::push_key(&mut key, &name);
                Entry {
                    key,
                    map_name: Some(name),
                    raw,
                }
            })
            .collect(),
    };
    // Name -> key path of the first server with it.
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut servers = Vec::with_capacity(entries.len());
    for entry in entries {
        let server = server_from(
            entry.raw,
            entry.map_name.as_deref(),
            &entry.key,
            isolation,
            start,
            ctx,
        )?;
        if let Some(first) = seen.get(&server.name) {
            return Err(if entry.map_name.is_some() {
                ctx.err(
                    &entry.key,
                    format!(
                        "the server '{}' is defined twice: server names must be unique",
                        server.name
                    ),
                )
            } else {
                ctx.err(
                    &format!("{}.name", entry.key),
                    format!(
                        "'{}' is also the name of {first}: server names must be unique",
                        server.name
                    ),
                )
            });
        }
        seen.insert(server.name.clone(), entry.key);
        servers.push(server);
    }
    Ok(servers)
}

fn server_from(
    mut raw: RawServer,
    map_name: Option<&str>,
    key: &str,
    default_isolation: &Isolation,
    default_start: &crate::Start,
    ctx: &Context<'_>,
) -> Result<ServerConfig> {
    let at = |field: &str| format!("{key}.{field}");
    let name = server_name(raw.name.take(), map_name, key, ctx)?;

    let protocol = protocol_from(raw.protocol.as_deref(), key, ctx)?;

    let (transport, oauth) = match (raw.command.take(), raw.url.take()) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(
                key,
                "both 'command' and 'url' are given: use 'command' to start a local server (stdio) or 'url' to reach a remote one (HTTP), not both",
            ));
        }
        (None, None) => {
            return Err(ctx.err(
                key,
                match protocol {
                    Some(Protocol::Stdio) => "missing key 'command': a stdio server is started with a command",
                    Some(Protocol::Http) => "missing key 'url': an HTTP server is reached at a URL",
                    None => "missing key 'command' or 'url': give 'command' to start a local server (stdio) or 'url' to reach a remote one (HTTP)",
                },
            ));
        }
        (Some(command), None) => (
            stdio_transport(command, &mut raw, protocol, key, ctx)?,
            OAuthConfig::default(),
        ),
        (None, Some(url)) => http_transport(url, &mut raw, protocol, key, ctx)?,
    };

    let tool_call_timeout = match raw.tool_call_timeout_ms {
        Some(ms) => Some(tool_call_timeout(ctx, &at("tool_call_timeout_ms"), ms)?),
        None => None,
    };
    let isolation = match &raw.isolation {
        Some(own) => isolation_from(own, default_isolation, &at("isolation"), ctx)?,
        None => default_isolation.clone(),
    };
    let start = super::start::start_from(
        raw.start.as_deref(),
        raw.idle_stop_secs,
        default_start,
        &format!("{key}."),
        ctx,
    )?;
    Ok(ServerConfig {
        name,
        transport,
        enabled: raw.enabled.unwrap_or(true),
        quarantined: raw.quarantined.unwrap_or(false),
        auto_approve_tool_changes: raw.auto_approve_tool_changes.unwrap_or(false),
        tool_call_timeout,
        start,
        isolation,
        oauth,
    })
}

/// The server's name: its key in the map form (where a `name` must agree), else its `name`.
fn server_name(
    raw_name: Option<String>,
    map_name: Option<&str>,
    key: &str,
    ctx: &Context<'_>,
) -> Result<String> {
    let at = |field: &str| format!("{key}.{field}");
    let name = match (map_name, raw_name) {
        (Some(map_name), Some(name)) if name != map_name => {
            return Err(ctx.err(
                &at("name"),
                format!("'{name}' differs from the server's key '{map_name}': drop 'name' or make the two the same"),
            ));
        }
        (Some(map_name), _) => {
            check_server_name(map_name).map_err(|why| ctx.err(key, why))?;
            map_name.to_owned()
        }
        (None, Some(name)) => {
            check_server_name(&name).map_err(|why| ctx.err(&at("name"), why))?;
            name
        }
        (None, None) => {
            return Err(ctx.err(
                key,
                "missing key 'name': every server needs one (it is the 'server' in 'server:tool')",
            ));
        }
    };
    Ok(name)
}

/// The transport `protocol` names, if any (`None`: inferred from `command` or `url`).
fn protocol_from(protocol: Option<&str>, key: &str, ctx: &Context<'_>) -> Result<Option<Protocol>> {
    let at = |field: &str| format!("{key}.{field}");
    let protocol = match protocol {
        None => None,
        Some("stdio") => Some(Protocol::Stdio),
        Some("http" | "streamable-http") => Some(Protocol::Http),
        Some("sse") => {
            return Err(ctx.err(
                &at("protocol"),
                "'sse' is not supported (the SSE transport is deprecated): use 'streamable-http', or leave 'protocol' out",
            ));
        }
        Some(other) => {
            return Err(ctx.err(
                &at("protocol"),
                format!("'{other}' is not a protocol: use 'stdio', 'http' or 'streamable-http', or leave it out to infer it from 'command' or 'url'"),
            ));
        }
    };
    Ok(protocol)
}

/// A server started with `command`: its `args`, `env` and `working_dir`, and none of the keys
/// of a server reached by URL.
fn stdio_transport(
    command: String,
    raw: &mut RawServer,
    protocol: Option<Protocol>,
    key: &str,
    ctx: &Context<'_>,
) -> Result<Transport> {
    let at = |field: &str| format!("{key}.{field}");
    if protocol == Some(Protocol::Http) {
        return Err(ctx.err(
            &at("protocol"),
            format!(
                "'{}' needs 'url', but this server has 'command'",
                raw.protocol.clone().unwrap_or_default()
            ),
        ));
    }
    if raw.headers.is_some() {
        return Err(ctx.err(
            &at("headers"),
            "'headers' only applies to a server reached by 'url'; this one has 'command'",
        ));
    }
    if raw.oauth.is_some() {
        return Err(ctx.err(
            &at("oauth"),
            "'oauth' only applies to a server reached by 'url'; this one has 'command' (give it credentials through 'env')",
        ));
    }
    ctx.not_empty(&at("command"), &command, "the command")?;
    let env = raw.env.take().unwrap_or_default();
    for (name, value) in &env {
        let mut env_key = at("env");
        raw::push_key(&mut env_key, name);
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(ctx.err(
                &env_key,
                format!("'{name}' is not an environment variable name: it must be non-empty, without '='"),
            ));
        }
        if value.contains('\0') {
            return Err(ctx.err(&env_key, "the value contains a NUL character"));
        }
        crate::reference::check(value).map_err(|why| ctx.err(&env_key, why))?;
    }
    let working_dir = match raw.working_dir.take() {
        Some(dir) => Some(ctx.path(&at("working_dir"), &dir)?),
        None => None,
    };
    Ok(Transport::Stdio {
        command,
        args: raw.args.take().unwrap_or_default(),
        env,
        working_dir,
    })
}

/// A server reached at `url`: its `headers` and `oauth`, and none of the keys of a server
/// started with a command.
fn http_transport(
    url: String,
    raw: &mut RawServer,
    protocol: Option<Protocol>,
    key: &str,
    ctx: &Context<'_>,
) -> Result<(Transport, OAuthConfig)> {
    let at = |field: &str| format!("{key}.{field}");
    let mut oauth = OAuthConfig::default();
    if protocol == Some(Protocol::Stdio) {
        return Err(ctx.err(
            &at("protocol"),
            "'stdio' needs 'command', but this server has 'url'",
        ));
    }
    for (field, given) in [
        ("args", raw.args.is_some()),
        ("env", raw.env.is_some()),
        ("working_dir", raw.working_dir.is_some()),
    ] {
        if given {
            return Err(ctx.err(
                &at(field),
                format!(
                    "'{field}' only applies to a server started with 'command'; this one has 'url'"
                ),
            ));
        }
    }
    if raw.isolation.is_some() {
        return Err(ctx.err(
            &at("isolation"),
            "'isolation' only applies to a server started with 'command'; this one has 'url' and runs elsewhere",
        ));
    }
    check_url(&url).map_err(|why| ctx.err(&at("url"), why))?;
    if let Some(raw_oauth) = &raw.oauth {
        oauth = super::oauth::oauth_from(raw_oauth, &at("oauth"), ctx)?;
    }
    crate::reference::check_url(&url).map_err(|why| ctx.err(&at("url"), why))?;
    let headers = raw.headers.take().unwrap_or_default();
    for (name, value) in &headers {
        let mut header_key = at("headers");
        raw::push_key(&mut header_key, name);
        if !is_header_name(name) {
            return Err(ctx.err(
                &header_key,
                format!("'{name}' is not an HTTP header name: use letters, digits and '-'"),
            ));
        }
        if value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
            return Err(ctx.err(
                &header_key,
                "the value contains a line break or NUL character",
            ));
        }
        crate::reference::check(value).map_err(|why| ctx.err(&header_key, why))?;
    }
    Ok((Transport::Http { url, headers }, oauth))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Stdio,
    Http,
}

/// `[A-Za-z0-9_-]{1,64}`.
pub(super) fn check_server_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the server name is empty: use letters, digits, '-' and '_'".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "'{name}' is not a valid server name: use at most {MAX_NAME_LEN} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "'{name}' is not a valid server name: use letters, digits, '-' and '_' (no ':' — it separates server and tool)"
        ));
    }
    Ok(())
}

/// An `http://` or `https://` URL with a host.
pub(super) fn check_url(url: &str) -> std::result::Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        let hint = if url.contains("://") {
            String::new()
        } else {
            format!(", e.g. 'http://{url}'")
        };
        return Err(format!("'{url}' is not an http:// or https:// URL{hint}"));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "'{url}' is not a valid URL: it needs a host and no spaces, e.g. http://127.0.0.1:3000/mcp"
        ));
    }
    Ok(())
}

/// An HTTP token (RFC 9110 section 5.6.2).
pub(super) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names() {
        assert!(check_server_name("github").is_ok());
        assert!(check_server_name("My_Server-2").is_ok());
        assert!(check_server_name(&"a".repeat(64)).is_ok());
        assert!(check_server_name(&"a".repeat(65)).is_err());
        assert!(check_server_name("").is_err());
        assert!(check_server_name("a:b").is_err());
        assert!(check_server_name("git hub").is_err());
        assert!(check_server_name("é").is_err());
    }

    #[test]
    fn urls() {
        assert!(check_url("http://127.0.0.1:3000/mcp").is_ok());
        assert!(check_url("HTTPS://example.com").is_ok());
        assert_eq!(
            check_url("localhost:3000/mcp").unwrap_err(),
            "'localhost:3000/mcp' is not an http:// or https:// URL, e.g. 'http://localhost:3000/mcp'"
        );
        assert!(check_url("ws://x").is_err());
        assert!(check_url("http:///mcp").is_err());
        assert!(check_url("http://a b/").is_err());
    }

    #[test]
    fn header_names() {
        assert!(is_header_name("Authorization"));
        assert!(is_header_name("X-Api-Key"));
        assert!(!is_header_name("Bad Header"));
        assert!(!is_header_name("a:b"));
        assert!(!is_header_name(""));
    }
}
