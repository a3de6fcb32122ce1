//! What `mcpproxy upstream import` leaves out of another client's config, and why: an entry
//! that runs mcpproxy itself (the entry the README has you add to Claude Desktop or Cursor;
//! importing it would make mcpproxy its own upstream), and an entry that starts the same
//! command, or connects to the same URL, as a server already configured.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use mcpproxy_config::{ServerConfig, Transport};

/// Why an entry is not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Skip {
    /// It runs or connects to mcpproxy; the text says how it was told.
    Itself(String),
    /// It starts the same command (or connects to the same URL) as this configured server.
    Duplicate(String),
}

impl Skip {
    /// The outcome column's text.
    pub(super) fn outcome(&self) -> String {
        match self {
            Self::Itself(why) => format!("skipped: this is mcpproxy itself ({why})"),
            Self::Duplicate(existing) => format!(
                "skipped: same command as '{existing}'; use --allow-duplicate to import it anyway"
            ),
        }
    }
}

/// How a server starts, compared between entries.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Launch {
    Command(Vec<String>),
    Url(String),
}

/// What an imported entry is compared with: the servers configured now and the address
/// this proxy listens on.
pub(super) struct Known {
    servers: Vec<(String, Launch)>,
    listen: SocketAddr,
    /// This binary, resolved, to recognise it under another name or path.
    exe: Option<PathBuf>,
}

impl Known {
    pub(super) fn new(servers: &[ServerConfig], listen: SocketAddr) -> Self {
        Self {
            servers: servers
                .iter()
                .map(|s| {
                    let launch = match &s.transport {
                        Transport::Stdio { command, args, .. } => Launch::Command(
                            std::iter::once(command.clone())
                                .chain(args.iter().cloned())
                                .collect(),
                        ),
                        Transport::Http { url, .. } => Launch::Url(normal_url(url)),
                    };
                    (s.name.clone(), launch)
                })
                .collect(),
            listen,
            exe: std::env::current_exe()
                .ok()
                .and_then(|p| std::fs::canonicalize(p).ok()),
        }
    }

    /// Whether `entry` (an mcpproxy server entry made from the other client's) is skipped;
    /// a duplicate only unless `allow_duplicate`.
    pub(super) fn check(&self, entry: &Value, allow_duplicate: bool) -> Option<Skip> {
        let launch = launch_of(entry)?;
        if let Some(why) = self.is_itself(&launch) {
            return Some(Skip::Itself(why));
        }
        if allow_duplicate {
            return None;
        }
        self.servers
            .iter()
            .find(|(_, known)| *known == launch)
            .map(|(name, _)| Skip::Duplicate(name.clone()))
    }

    fn is_itself(&self, launch: &Launch) -> Option<String> {
        match launch {
            Launch::Command(words) => {
                let (command, args) = words.split_first()?;
                if is_mcpproxy_name(command) {
                    return Some(format!("its command is {command}"));
                }
                if let Some(exe) = &self.exe
                    && resolve(command).is_some_and(|p| &p == exe)
                {
                    return Some(format!("{command} is this mcpproxy binary"));
                }
                // `npx mcpproxy serve --stdio`, `env X=1 /opt/bin/mcpproxy serve`: mcpproxy
                // named among the arguments, with `serve`.
                if args.iter().any(|a| is_mcpproxy_name(a)) && args.iter().any(|a| a == "serve") {
                    return Some("it runs `mcpproxy serve`".to_owned());
                }
                None
            }
            Launch::Url(url) => {
                let uri: http::Uri = url.parse().ok()?;
                let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
                let port = uri
                    .port_u16()
                    .unwrap_or(if uri.scheme_str() == Some("https") {
                        443
                    } else {
                        80
                    });
                let local = |h: &str| {
                    matches!(h, "localhost" | "127.0.0.1" | "::1" | "0.0.0.0" | "::")
                        || h.parse::<std::net::IpAddr>()
                            .is_ok_and(|ip| ip.is_loopback())
                };
                let listen_ip = self.listen.ip();
                let same_host = (local(host)
                    && (listen_ip.is_loopback() || listen_ip.is_unspecified()))
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip == listen_ip);
                (same_host && port == self.listen.port())
                    .then(|| format!("{url} is where this mcpproxy listens"))
            }
        }
    }
}

fn launch_of(entry: &Value) -> Option<Launch> {
    if let Some(command) = entry["command"].as_str() {
        let args = entry["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned);
        return Some(Launch::Command(
            std::iter::once(command.to_owned()).chain(args).collect(),
        ));
    }
    entry["url"].as_str().map(|u| Launch::Url(normal_url(u)))
}

/// A URL compared without a trailing slash.
fn normal_url(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

/// `mcpproxy`, `/usr/local/bin/mcpproxy`, `mcpproxy.exe`.
fn is_mcpproxy_name(word: &str) -> bool {
    let name = Path::new(word)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(word);
    name == "mcpproxy" || name == "mcpproxy.exe"
}

/// `command` as the file it runs: itself when it is a path, else looked up on `PATH`.
fn resolve(command: &str) -> Option<PathBuf> {
    let path = Path::new(command);
    if path.components().count() > 1 {
        return std::fs::canonicalize(path).ok();
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known() -> Known {
        Known {
            servers: vec![(
                "fs".to_owned(),
                Launch::Command(vec!["npx".into(), "-y".into(), "server-fs".into()]),
            )],
            listen: "127.0.0.1:8080".parse().unwrap(),
            exe: None,
        }
    }

    #[test]
    fn mcpproxy_itself_is_recognised() {
        let k = known();
        for entry in [
            json!({"command": "mcpproxy", "args": ["serve", "--stdio"]}),
            json!({"command": "/usr/local/bin/mcpproxy", "args": ["serve", "--stdio"]}),
            json!({"command": "npx", "args": ["-y", "mcpproxy", "serve", "--stdio"]}),
            json!({"url": "http://127.0.0.1:8080/mcp"}),
            json!({"url": "http://localhost:8080/mcp/"}),
        ] {
            assert!(
                matches!(k.check(&entry, true), Some(Skip::Itself(_))),
                "{entry}"
            );
        }
        assert_eq!(
            k.check(&json!({"url": "http://127.0.0.1:9090/mcp"}), false),
            None
        );
        assert_eq!(
            k.check(&json!({"command": "uvx", "args": ["notes"]}), false),
            None
        );
    }

    #[test]
    fn the_same_command_as_a_configured_server_is_flagged() {
        let k = known();
        let entry = json!({"command": "npx", "args": ["-y", "server-fs"], "env": {"A": "1"}});
        assert_eq!(
            k.check(&entry, false),
            Some(Skip::Duplicate("fs".to_owned()))
        );
        assert_eq!(k.check(&entry, true), None);
        assert!(
            Skip::Duplicate("fs".into())
                .outcome()
                .contains("same command as 'fs'; use --allow-duplicate")
        );
    }
}
