//! What a person approves about how a server runs: its launch spec (command, arguments,
//! environment, working dir for a stdio server; URL and headers for an HTTP one), reduced to
//! a SHA-256 fingerprint, and a view of it that can be stored and shown without its secrets.
//!
//! An approval is bound to the fingerprint: any change to how the server starts or where it
//! connects (by an agent, the CLI, the REST API or a hand edit of the config, while running
//! or between runs) makes the approval stale, and the server waits for a person again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use mcpproxy_config::{Isolation, LaunchPart, ServerConfig, StdioLaunch, Transport};

/// The launch spec of a server as it can be stored and shown: secret values replaced by
/// digests (so a change is still seen) and masked in the text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchView {
    /// `stdio` or `http`.
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The arguments with secret-looking values masked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// SHA-256 of the arguments as they are (a change to a masked one is still seen).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub args_sha256: String,
    /// Each environment variable's name and a digest of its value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// The URL with its user info and query values masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url_sha256: String,
    /// Each header's name and a digest of its value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The sandbox of a stdio server when it is not the default one ([`isolation_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// A sandboxed server started through a package launcher (`npx -y`, `uvx`): the
    /// package and the registries its sandbox lets it reach ([`launcher_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
}

/// A server's launch spec: what an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    /// SHA-256 (hex) over the whole spec, values included.
    pub sha256: String,
    pub view: LaunchView,
    /// The environment's and the headers' values as a reviewer sees them: as they are, or
    /// masked when they look like secrets ([`shown_value`]). Never stored: an approval keeps
    /// digests only ([`LaunchView`]), and a diff shows the values of the launch under review.
    pub shown: ShownValues,
}

/// The values of a launch a person approves, as [`LaunchView::diff`] shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShownValues {
    pub env: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
}

/// A value of variable or header `name` as a reviewer sees it: quoted, or `***` when it
/// (or its name) looks like a secret, saying so.
fn shown_value(name: &str, value: &str) -> String {
    let assignment = format!("{name}={value}");
    if mcpproxy_auth::masking::mask_text(&assignment) == assignment {
        format!("\"{}\"", mcpproxy_support::quote(value))
    } else {
        format!(
            "{} (masked: it looks like a secret)",
            mcpproxy_auth::masking::MASK
        )
    }
}

fn shown_values(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .iter()
        .map(|(name, value)| (name.clone(), shown_value(name, value)))
        .collect()
}

impl LaunchSpec {
    /// The launch spec of `server` as configured.
    pub fn of(server: &ServerConfig) -> Self {
        let mut whole = Sha256::new();
        let mut part = |label: &str, value: &str| {
            // Length-prefixed, so no two specs hash the same text.
            whole.update((label.len() as u64).to_le_bytes());
            whole.update(label.as_bytes());
            whole.update((value.len() as u64).to_le_bytes());
            whole.update(value.as_bytes());
        };
        let mut shown = ShownValues::default();
        let view = match &server.transport {
            Transport::Stdio {
                command,
                args,
                env,
                working_dir,
            } => {
                let launch = StdioLaunch {
                    command,
                    args,
                    env,
                    working_dir: working_dir.as_deref(),
                };
                part("transport", "stdio");
                for launch_part in launch.parts() {
                    match launch_part {
                        LaunchPart::Command(command) => part("command", command),
                        LaunchPart::Arg(arg) => part("arg", arg),
                        LaunchPart::Env { name, value } => {
                            part("env", name);
                            part("=", value);
                        }
                        LaunchPart::WorkingDir(dir) => {
                            part("working_dir", &dir.display().to_string())
                        }
                    }
                }
                let working_dir = working_dir.as_ref().map(|d| d.display().to_string());
                // Only a sandbox other than the default is part of the spec, so approvals
                // given before sandboxes existed still hold for the default one.
                let isolation =
                    (!server.isolation.is_default()).then(|| isolation_text(&server.isolation));
                if let Some(text) = &isolation {
                    part("isolation", text);
                }
                let launcher = server
                    .isolation
                    .enabled
                    .then(|| launcher_text(command, args, env))
                    .flatten();
                if let Some(text) = &launcher {
                    part("launcher", text);
                }
                shown.env = shown_values(env);
                LaunchView {
                    transport: "stdio".into(),
                    command: Some(command.clone()),
                    args: mcpproxy_auth::masking::mask_args(args),
                    args_sha256: digest_all(args.iter().map(String::as_str)),
                    env: digests(env),
                    working_dir,
                    isolation,
                    launcher,
                    ..LaunchView::default()
                }
            }
            Transport::Http { url, headers } => {
                part("transport", "http");
                part("url", url);
                for (name, value) in headers {
                    part("header", name);
                    part("=", value);
                }
                shown.headers = shown_values(headers);
                LaunchView {
                    transport: "http".into(),
                    url: Some(mcpproxy_auth::masking::mask_url(url)),
                    url_sha256: digest_all([url.as_str()]),
                    headers: digests(headers),
                    ..LaunchView::default()
                }
            }
        };
        Self {
            sha256: super::hex(&whole.finalize()),
            view,
            shown,
        }
    }
}

/// How many hex digits of a launch's SHA-256 its fingerprint shows.
pub(crate) const FINGERPRINT_DIGITS: usize = 16;

impl LaunchSpec {
    /// The launch's fingerprint as a person reads and types it: the first
    /// [`FINGERPRINT_DIGITS`] hex digits of its SHA-256.
    pub fn fingerprint(&self) -> &str {
        self.sha256
            .get(..FINGERPRINT_DIGITS)
            .unwrap_or(&self.sha256)
    }

    /// Whether `fingerprint` (checked with [`parse_fingerprint`]) names this launch: a prefix
    /// of its SHA-256 at least [`FINGERPRINT_DIGITS`] long.
    pub fn has_fingerprint(&self, fingerprint: &str) -> bool {
        fingerprint.len() >= FINGERPRINT_DIGITS && self.sha256.starts_with(fingerprint)
    }
}

/// A fingerprint as given by a person or a client: trimmed and lowercased, or why it is not
/// one (the text says where to find the right one).
pub fn parse_fingerprint(server: &str, given: &str) -> Result<String, String> {
    let text = given.trim().to_ascii_lowercase();
    if (FINGERPRINT_DIGITS..=64).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Ok(text);
    }
    Err(format!(
        "'{}' is not a launch fingerprint: it is the {FINGERPRINT_DIGITS} hex digits `mcpproxy upstream inspect {server}` shows after 'Fingerprint:' (launch_fingerprint in GET /api/v1/upstreams/{server}/analysis)",
        mcpproxy_support::quote(&given.chars().take(80).collect::<String>())
    ))
}

impl LaunchView {
    /// What changed from `self` (approved) to `now`, one line per difference, with the
    /// values now approved shown (an added or changed variable or header reads with its new
    /// value: a person must see what they approve), secrets never (masked, and said so).
    pub fn diff(&self, now_spec: &LaunchSpec) -> Vec<String> {
        let now = &now_spec.view;
        let q = |s: &str| mcpproxy_support::quote(s);
        let mut lines = Vec::new();
        if self.transport != now.transport {
            lines.push(format!(
                "transport was {}, now {}",
                self.transport, now.transport
            ));
        }
        if self.command != now.command {
            lines.push(format!(
                "command was {}, now {}",
                shown(self.command.as_deref()),
                shown(now.command.as_deref())
            ));
        }
        if self.args_sha256 != now.args_sha256 {
            if self.args == now.args {
                lines.push("args: a hidden (secret-looking) value changed".to_owned());
            } else {
                lines.push(format!(
                    "args were {}, now {}",
                    q(&format!("{:?}", self.args)),
                    q(&format!("{:?}", now.args))
                ));
            }
        }
        map_diff("env", &self.env, &now.env, &now_spec.shown.env, &mut lines);
        if self.working_dir != now.working_dir {
            lines.push(format!(
                "working_dir was {}, now {}",
                shown(self.working_dir.as_deref()),
                shown(now.working_dir.as_deref())
            ));
        }
        if self.url_sha256 != now.url_sha256 {
            if self.url == now.url {
                lines.push("url: a hidden value (user info or query) changed".to_owned());
            } else {
                lines.push(format!(
                    "url was {}, now {}",
                    shown(self.url.as_deref()),
                    shown(now.url.as_deref())
                ));
            }
        }
        map_diff(
            "header",
            &self.headers,
            &now.headers,
            &now_spec.shown.headers,
            &mut lines,
        );
        if self.isolation != now.isolation {
            let shown = |text: &Option<String>| {
                text.as_deref()
                    .map_or_else(|| "the default sandbox".to_owned(), mcpproxy_support::quote)
            };
            lines.push(format!(
                "isolation was {}, now {}",
                shown(&self.isolation),
                shown(&now.isolation)
            ));
        }
        if self.launcher != now.launcher {
            let shown = |text: &Option<String>| {
                text.as_deref()
                    .map_or_else(|| "none".to_owned(), mcpproxy_support::quote)
            };
            lines.push(format!(
                "launcher was {}, now {}",
                shown(&self.launcher),
                shown(&now.launcher)
            ));
        }
        lines
    }

    /// One line for a person: `stdio: npx -y server ...` or `http: https://host/mcp`.
    pub fn summary(&self) -> String {
        let mut text = match (&self.command, &self.url) {
            (Some(command), _) => {
                let mut line = mcpproxy_support::quote(command);
                for arg in &self.args {
                    line.push(' ');
                    line.push_str(&mcpproxy_support::quote(arg));
                }
                format!("stdio: {line}")
            }
            (None, Some(url)) => format!("http: {}", mcpproxy_support::quote(url)),
            (None, None) => self.transport.clone(),
        };
        if !self.env.is_empty() {
            text.push_str(&format!(
                " (env: {})",
                self.env
                    .keys()
                    .map(|k| mcpproxy_support::quote(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if self.transport == "stdio" {
            text.push_str(&match self.isolation.as_deref() {
                None => " (sandbox: default)".to_owned(),
                Some("off") => {
                    " (sandbox: OFF: it runs as you, with your files, your environment and the network)"
                        .to_owned()
                }
                Some(settings) => format!(" (sandbox: {})", mcpproxy_support::quote(settings)),
            });
        }
        if let Some(launcher) = &self.launcher {
            text.push_str(&format!(
                " (launcher: {})",
                mcpproxy_support::quote(launcher)
            ));
        }
        if !self.headers.is_empty() {
            text.push_str(&format!(
                " (headers: {})",
                self.headers
                    .keys()
                    .map(|k| mcpproxy_support::quote(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        text
    }
}

/// What a package launcher will fetch and from where, as its sandbox will let it
/// (`npx runs @scope/server@1.2.0 from https://registry.npmjs.org/ (npm's default)`); `None`
/// when `command` is no launcher. The registries come from the server's `env`, mcpproxy's
/// environment and the user's npm, uv or pip settings, so a registry changed there changes
/// the launch and needs a new approval.
pub(crate) fn launcher_text(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Option<String> {
    let parent = |name: &str| std::env::var_os(name);
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let plan = mcpproxy_sandbox::launcher_plan(
        command,
        args,
        env,
        &parent,
        home.as_deref(),
        std::path::Path::new("/nonexistent"),
    )?;
    Some(format!(
        "{} runs {} from {}",
        plan.kind.as_str(),
        plan.package,
        plan.registries
            .iter()
            .map(|r| format!("{} ({})", r.url, r.source))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The sandbox settings in one canonical line: what the fingerprint hashes and a reviewer
/// reads (`off`, or `network none; read /a; write /b; memory 2048 MiB; ...`).
pub(crate) fn isolation_text(isolation: &Isolation) -> String {
    if !isolation.enabled {
        return "off".to_owned();
    }
    let paths = |paths: &[std::path::PathBuf]| {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let limit =
        |value: Option<u64>| value.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
    let limits = &isolation.limits;
    format!(
        "network {}; read [{}]; write [{}]; env_passthrough [{}]; memory_mb {}; max_processes {}; open_files {}; cpu_seconds {}; required {}",
        isolation.network.describe(),
        paths(&isolation.read),
        paths(&isolation.write),
        isolation.env_passthrough.join(", "),
        limit(limits.memory_mb),
        limit(limits.max_processes),
        limit(limits.open_files),
        limit(limits.cpu_seconds),
        isolation.required
    )
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(
        || "none".to_owned(),
        |v| format!("\"{}\"", mcpproxy_support::quote(v)),
    )
}

/// The differences of two digest maps, each added or changed one with its value now
/// (`shown`: [`shown_value`]; the value approved before is not known, only its digest).
fn map_diff(
    what: &str,
    was: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
    shown: &BTreeMap<String, String>,
    lines: &mut Vec<String>,
) {
    let value = |name: &str| shown.get(name).map_or("(not known)", String::as_str);
    for (name, digest) in now {
        match was.get(name) {
            None => lines.push(format!(
                "{what} {} added: {}",
                mcpproxy_support::quote(name),
                value(name)
            )),
            Some(old) if old != digest => {
                lines.push(format!(
                    "{what} {} value changed, now {}",
                    mcpproxy_support::quote(name),
                    value(name)
                ));
            }
            Some(_) => {}
        }
    }
    for name in was.keys().filter(|name| !now.contains_key(*name)) {
        lines.push(format!("{what} {} removed", mcpproxy_support::quote(name)));
    }
}

/// Each value's digest, by name: enough to see a change, not to learn the value.
fn digests(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .iter()
        .map(|(name, value)| (name.clone(), digest_all([value.as_str()])))
        .collect()
}

/// The first 16 hex digits of the SHA-256 over `parts` (length-prefixed).
fn digest_all<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    let mut text = super::hex(&hash.finalize());
    text.truncate(16);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &str, args: &[&str], env: &[(&str, &str)]) -> ServerConfig {
        ServerConfig {
            name: "good".into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                env: env
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                working_dir: None,
            },
            enabled: true,
            quarantined: false,
            auto_approve_tool_changes: false,
            tool_call_timeout: None,
            start: Default::default(),
            isolation: Isolation::default(),
            oauth: Default::default(),
        }
    }

    #[test]
    fn a_sandbox_other_than_the_default_is_part_of_the_launch() {
        let default = stdio("srv", &[], &[]);
        let mut off = default.clone();
        off.isolation.enabled = false;
        let mut open = default.clone();
        open.isolation.network = mcpproxy_sandbox::Network::All;
        let mut wider = default.clone();
        wider.isolation.write = vec!["/home/me".into()];
        let base = LaunchSpec::of(&default);
        assert_eq!(
            base.view.isolation, None,
            "the default sandbox is not hashed"
        );
        for other in [&off, &open, &wider] {
            let spec = LaunchSpec::of(other);
            assert_ne!(spec.sha256, base.sha256, "{other:?}");
            let diff = base.view.diff(&spec).join("\n");
            assert!(
                diff.starts_with("isolation was the default sandbox, now "),
                "{diff}"
            );
        }
        assert_eq!(LaunchSpec::of(&off).view.isolation.as_deref(), Some("off"));
        assert!(
            LaunchSpec::of(&wider)
                .view
                .isolation
                .unwrap()
                .contains("write [/home/me]")
        );
    }

    #[test]
    fn every_part_of_the_launch_changes_the_fingerprint_and_the_rest_does_not() {
        let base = LaunchSpec::of(&stdio("npx", &["-y", "srv"], &[("TOKEN", "a")]));
        for other in [
            stdio("python3", &["-y", "srv"], &[("TOKEN", "a")]),
            stdio("npx", &["-y", "evil"], &[("TOKEN", "a")]),
            stdio("npx", &["-y", "srv"], &[("TOKEN", "b")]),
            stdio(
                "npx",
                &["-y", "srv"],
                &[("TOKEN", "a"), ("LD_PRELOAD", "x")],
            ),
            stdio("npx", &["-ysrv"], &[("TOKEN", "a")]),
        ] {
            assert_ne!(LaunchSpec::of(&other).sha256, base.sha256, "{other:?}");
        }
        let mut same = stdio("npx", &["-y", "srv"], &[("TOKEN", "a")]);
        same.quarantined = true;
        same.enabled = false;
        same.tool_call_timeout = Some(std::time::Duration::from_secs(3));
        assert_eq!(LaunchSpec::of(&same).sha256, base.sha256);
    }

    #[test]
    fn the_diff_names_what_changed_without_showing_secret_values() {
        let was_spec = LaunchSpec::of(&stdio("npx", &["srv"], &[("TOKEN", "old-secret")]));
        let was = was_spec.view.clone();
        let now = LaunchSpec::of(&stdio(
            "python3",
            &["evil.py"],
            &[
                ("TOKEN", "new-secret"),
                ("EXTRA", "1"),
                ("NODE_OPTIONS", "--require ./evil.js"),
            ],
        ));
        let lines = was.diff(&now);
        let text = lines.join("\n");
        assert!(
            text.contains("command was \"npx\", now \"python3\""),
            "{text}"
        );
        assert!(text.contains("evil.py"), "{text}");
        assert!(
            text.contains("env TOKEN value changed, now *** (masked: it looks like a secret)"),
            "{text}"
        );
        assert!(text.contains("env EXTRA added: \"1\""), "{text}");
        // What a person approves is shown: the value that makes node load a file.
        assert!(
            text.contains("env NODE_OPTIONS added: \"--require ./evil.js\""),
            "{text}"
        );
        assert!(!text.contains("new-secret"), "{text}");
        assert!(was.diff(&was_spec).is_empty());
    }

    #[test]
    fn a_fingerprint_names_one_launch_and_a_malformed_one_is_refused() {
        let spec = LaunchSpec::of(&stdio("npx", &["-y", "srv"], &[]));
        let other = LaunchSpec::of(&stdio("sh", &["-c", "evil"], &[]));
        assert_eq!(spec.fingerprint().len(), FINGERPRINT_DIGITS);
        assert!(spec.has_fingerprint(spec.fingerprint()));
        assert!(spec.has_fingerprint(&spec.sha256));
        assert!(!other.has_fingerprint(spec.fingerprint()));
        // A shorter prefix is not enough to name a launch.
        assert!(!spec.has_fingerprint(&spec.sha256[..8]));
        let upper = spec.fingerprint().to_ascii_uppercase();
        assert_eq!(
            parse_fingerprint("s", &format!(" {upper} ")).as_deref(),
            Ok(spec.fingerprint())
        );
        for bad in [
            "",
            "abc",
            "zzzzzzzzzzzzzzzz",
            "0123456789abcdeg",
            "0123456789abcd ef",
            &"a".repeat(65),
        ] {
            let refusal = parse_fingerprint("s", bad).unwrap_err();
            assert!(refusal.contains("mcpproxy upstream inspect s"), "{refusal}");
        }
    }

    #[test]
    fn a_url_change_behind_a_mask_is_still_seen() {
        let http = |url: &str| ServerConfig {
            transport: Transport::Http {
                url: url.into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer t".into())]),
            },
            ..stdio("x", &[], &[])
        };
        let a = LaunchSpec::of(&http("https://127.0.0.1/mcp?token=one"));
        let b = LaunchSpec::of(&http("https://127.0.0.1/mcp?token=two"));
        assert_ne!(a.sha256, b.sha256);
        let text = a.view.diff(&b).join("\n");
        assert!(text.contains("url: a hidden value"), "{text}");
        assert!(!text.contains("one") && !text.contains("two"), "{text}");
        assert!(!format!("{:?}", a.view).contains("Bearer"));
    }

    /// Approvals are bound to these hashes: the same launch must hash the same in every
    /// version, or every approval a person gave goes stale at an upgrade. The values are the
    /// ones the code before the shared launch walk (`StdioLaunch::parts`) computed.
    #[test]
    fn a_launchs_hash_is_the_same_in_every_version() {
        let mut server = stdio(
            "npx",
            &["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
            &[("TOKEN", "${secret:TOKEN}"), ("A", "1")],
        );
        if let Transport::Stdio { working_dir, .. } = &mut server.transport {
            *working_dir = Some(std::path::PathBuf::from("/work"));
        }
        assert_eq!(
            LaunchSpec::of(&server).sha256,
            "7e81b3f041230f27766300217e4710f2ab351efb2031f0e33efb8a20a09428c7"
        );
        server.transport = Transport::Http {
            url: "https://api.example.com/mcp?key=${secret:K}".into(),
            headers: BTreeMap::from([("Authorization".to_owned(), "Bearer x".to_owned())]),
        };
        assert_eq!(
            LaunchSpec::of(&server).sha256,
            "076a7e7924cf77f70845520d9c1b8fa0eba569a95a8daa3681efe2cd7cf75427"
        );
    }
}
