//! Package launchers (`npx -y`, `npm exec`, `uvx`, `uv tool run`, `pipx run`, `bunx`):
//! recognised from a stdio server's command line, with what they need to start in a sandbox —
//! the registry hosts they download from (read from the same places the launcher reads:
//! its arguments, the server's environment, mcpproxy's environment, the user's config files),
//! cache directories under one root that outlives a start, and the variables that make the
//! launcher inside the sandbox use exactly the registry found here (its private home hides
//! `~/.npmrc` and `~/.config/uv`). [`resolved_version`] reads back which version a start put
//! into that cache.
//!
//! Pure logic: nothing here starts a process or opens a socket. Config files are untrusted
//! input: at most [`MAX_CONFIG_BYTES`] of each is read, and anything that does not parse is
//! ignored.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How much of a config file or a package manifest is read: far more than any real
/// `.npmrc`, `uv.toml`, `pip.conf` or `package.json` of a server, little enough that a
/// hostile one cannot make mcpproxy hold much.
pub const MAX_CONFIG_BYTES: u64 = 64 * 1024;

mod cache;
mod npm;
mod python;

use cache::cache_env;
pub use cache::resolved_version;
use npm::{npm_args, npm_registries};
use python::{pipx_args, python_registries, uv_args};

/// Which launcher a server's command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LauncherKind {
    /// `npx`.
    Npx,
    /// `npm exec` and `npm x`.
    NpmExec,
    /// `uvx`.
    Uvx,
    /// `uv tool run`.
    UvToolRun,
    /// `pipx run`.
    PipxRun,
    /// `bunx` and `bun x`.
    Bunx,
}

impl LauncherKind {
    /// The launcher as a person types it (`npx`, `npm exec`, `uv tool run`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Npx => "npx",
            Self::NpmExec => "npm exec",
            Self::Uvx => "uvx",
            Self::UvToolRun => "uv tool run",
            Self::PipxRun => "pipx run",
            Self::Bunx => "bunx",
        }
    }

    fn ecosystem(self) -> Ecosystem {
        match self {
            Self::Npx | Self::NpmExec => Ecosystem::Npm,
            Self::Bunx => Ecosystem::Bun,
            Self::Uvx | Self::UvToolRun => Ecosystem::Uv,
            Self::PipxRun => Ecosystem::Pipx,
        }
    }
}

impl std::fmt::Display for LauncherKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ecosystem {
    Npm,
    Bun,
    Uv,
    Pipx,
}

/// A registry (or package index) a launcher downloads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// Its URL as configured, without any `user:password@` (shown at approval).
    pub url: String,
    /// The `host:port` it connects to (`registry.npmjs.org:443`, `127.0.0.1:4873`,
    /// `[::1]:8080`): what an egress allowlist needs.
    pub host_port: String,
    /// Where it came from (`npm_config_registry in the server's env`, `/home/u/.npmrc`,
    /// `npm's default`), for the person approving it.
    pub source: String,
}

/// What a server started through a package launcher needs from its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherPlan {
    /// The launcher.
    pub kind: LauncherKind,
    /// The package spec as given (`@modelcontextprotocol/server-everything@2026.8.31`,
    /// `mcp-server-time==1.0`).
    pub package: String,
    /// Every registry host the launcher will contact, the default one first; no host twice.
    pub registries: Vec<Registry>,
    /// Variables that put every cache and tool directory of the launcher under the cache
    /// root (the same paths at every start, so a second start finds the first's download).
    pub cache_env: Vec<(String, PathBuf)>,
    /// Variables that make the launcher inside the sandbox use exactly [`Self::registries`]
    /// (the files it would read them from are outside the sandbox), and keep it from
    /// contacting anything else (npm's update check). The registry URLs here keep any
    /// credentials they were configured with: set them, do not show them.
    pub registry_env: Vec<(String, String)>,
    /// Variables for a start whose package is already in the cache ([`resolved_version`] is
    /// `Some`): the launcher runs the cached version without asking the registry, so what
    /// runs is the version approved at the first start, and a registry that is down (or not
    /// allowed any more) does not stop it. Without them npx retries a dead registry for about
    /// a minute and uvx fails.
    pub offline_env: Vec<(String, String)>,
}

/// Where the launcher takes its values from: the server's env, then mcpproxy's.
struct Sources<'a> {
    server_env: &'a BTreeMap<String, String>,
    parent_env: &'a dyn Fn(&str) -> Option<OsString>,
    home: Option<&'a Path>,
}

impl Sources<'_> {
    /// A variable of the server's env (`name` in any case), else of mcpproxy's (as written,
    /// then upper and lower case), with where it was found.
    fn var(&self, name: &str) -> Option<(String, String)> {
        if let Some((key, value)) = self
            .server_env
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
        {
            return Some((value.clone(), format!("{key} in the server's env")));
        }
        let mut spellings = vec![
            name.to_owned(),
            name.to_ascii_uppercase(),
            name.to_ascii_lowercase(),
        ];
        spellings.dedup();
        spellings.into_iter().find_map(|key| {
            let value = (self.parent_env)(&key)?.into_string().ok()?;
            Some((value, format!("{key} in mcpproxy's env")))
        })
    }

    /// A path under the user's home (`~/.npmrc`).
    fn in_home(&self, relative: &str) -> Option<PathBuf> {
        self.home.map(|home| home.join(relative))
    }

    /// `$XDG_CONFIG_HOME` (absolute only, as the spec asks), else `~/.config`.
    fn config_home(&self) -> Option<PathBuf> {
        self.var("XDG_CONFIG_HOME")
            .map(|(value, _)| PathBuf::from(value))
            .filter(|path| path.is_absolute())
            .or_else(|| self.in_home(".config"))
    }
}

/// The launcher a server runs, the package it runs and what it needs; `None` when `command`
/// is no launcher, or runs only what is installed already (`npx --no-install`, `npx --no`,
/// `--offline`).
///
/// `server_env` is the server's configured `env`; `parent_env` reads mcpproxy's own
/// environment; `home` is the user's home (for `~/.npmrc`, `~/.config/uv/uv.toml`, pip.conf);
/// `cache_root` the directory the launcher's caches go under.
pub fn launcher_plan(
    command: &str,
    args: &[String],
    server_env: &BTreeMap<String, String>,
    parent_env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<&Path>,
    cache_root: &Path,
) -> Option<LauncherPlan> {
    let (kind, rest) = recognise(command, args)?;
    let sources = Sources {
        server_env,
        parent_env,
        home,
    };
    let (package, registries, registry_env) = match kind.ecosystem() {
        Ecosystem::Npm | Ecosystem::Bun => {
            let parsed = npm_args(rest)?;
            let (registries, env) = npm_registries(kind, &parsed, &sources);
            (parsed.package, registries, env)
        }
        Ecosystem::Uv => {
            let parsed = uv_args(rest)?;
            let (registries, env) = python_registries(kind, &parsed.indexes, &sources);
            (parsed.package, registries, env)
        }
        Ecosystem::Pipx => {
            let parsed = pipx_args(rest)?;
            let (registries, env) = python_registries(kind, &parsed.indexes, &sources);
            (parsed.package, registries, env)
        }
    };
    Some(LauncherPlan {
        kind,
        package,
        registries,
        cache_env: cache_env(kind, cache_root),
        registry_env,
        offline_env: offline_env(kind),
    })
}

/// The launcher `command args` runs and the arguments after the launcher's own words
/// (`npm exec`, `uv tool run`).
/// The package launcher `command` with `args` runs (`npx`, `npm exec`, `uvx`, `uv tool run`,
/// `pipx run`, `bunx`), if any: such a server may download itself before it speaks.
pub fn launcher_kind(command: &str, args: &[String]) -> Option<LauncherKind> {
    recognise(command, args).map(|(kind, _)| kind)
}

fn recognise<'a>(command: &str, args: &'a [String]) -> Option<(LauncherKind, &'a [String])> {
    let name = Path::new(command).file_name()?.to_str()?;
    // `npx.cmd`-style suffixes never occur on Linux; a versioned name (`npx-20`) is no
    // launcher we know the flags of.
    match name {
        "npx" => Some((LauncherKind::Npx, args)),
        "uvx" => Some((LauncherKind::Uvx, args)),
        "bunx" => Some((LauncherKind::Bunx, args)),
        "npm" => {
            let at = first_word(args, &[])?;
            matches!(args[at].as_str(), "exec" | "x").then(|| {
                (
                    LauncherKind::NpmExec,
                    args.get(at + 1..).unwrap_or_default(),
                )
            })
        }
        "bun" => {
            let at = first_word(args, &[])?;
            (args[at] == "x").then(|| (LauncherKind::Bunx, args.get(at + 1..).unwrap_or_default()))
        }
        "uv" => {
            // `uv [global options] tool run ...`; global options that take a value.
            const VALUED: &[&str] = &[
                "--cache-dir",
                "--directory",
                "--project",
                "--config-file",
                "--color",
                "--python",
                "-p",
            ];
            let at = first_word(args, VALUED)?;
            if args[at] != "tool" {
                return None;
            }
            let next = at + 1 + first_word(args.get(at + 1..)?, VALUED)?;
            (args[next] == "run").then(|| {
                (
                    LauncherKind::UvToolRun,
                    args.get(next + 1..).unwrap_or_default(),
                )
            })
        }
        "pipx" => {
            let at = first_word(args, &[])?;
            (args[at] == "run").then(|| {
                (
                    LauncherKind::PipxRun,
                    args.get(at + 1..).unwrap_or_default(),
                )
            })
        }
        _ => None,
    }
}

/// The index of the first argument that is no option (skipping the values of `valued`
/// options given as a separate word).
fn first_word(args: &[String], valued: &[&str]) -> Option<usize> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if !arg.starts_with('-') {
            return Some(i);
        }
        if arg == "--" {
            return (i + 1 < args.len()).then_some(i + 1);
        }
        i += if valued.contains(&arg.as_str()) { 2 } else { 1 };
    }
    None
}

/// An option's value: `--opt=VALUE` or `--opt VALUE` (advancing `i` past the value).
fn option_value(args: &[String], i: &mut usize, names: &[&str]) -> Option<String> {
    let arg = args.get(*i)?;
    for name in names {
        if arg == name {
            *i += 1;
            return args.get(*i).cloned();
        }
        if let Some(value) = arg.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            return Some(value.to_owned());
        }
    }
    None
}

/// A registry from a configured URL: `None` for anything that is not `http(s)://host[:port]`.
fn registry(url: &str, source: String) -> Option<Registry> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    // user:password@ is never shown nor part of the host.
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (addr, after) = v6.split_once(']')?;
        addr.parse::<std::net::Ipv6Addr>().ok()?;
        (format!("[{addr}]"), after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (host_port.to_owned(), None),
        }
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => default_port,
    };
    let valid = !host.is_empty()
        && host.len() <= 253
        && (host.starts_with('[')
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'));
    if !valid {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let shown_port = if authority.ends_with(&format!(":{port}")) {
        format!(":{port}")
    } else {
        String::new()
    };
    Some(Registry {
        url: format!("{scheme}://{host}{shown_port}{path}"),
        host_port: format!("{host}:{port}"),
        source,
    })
}

/// What makes each launcher run from its cache (measured here: npm 11, uv 0.13).
fn offline_env(kind: LauncherKind) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match kind.ecosystem() {
        // Cached metadata is used however old; the registry only when something is missing.
        Ecosystem::Npm => &[("npm_config_prefer_offline", "true")],
        Ecosystem::Uv => &[("UV_OFFLINE", "1")],
        // pipx run reuses its cached environment (for 14 days) without the index already.
        Ecosystem::Pipx => &[],
        Ecosystem::Bun => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// At most [`MAX_CONFIG_BYTES`] of a regular file, as text (invalid UTF-8 replaced).
fn read_capped(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
#[path = "launchers_tests.rs"]
mod tests;
