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

/// How many entries of a cache directory [`resolved_version`] looks at: a cache filled by a
/// hostile server cannot make it walk forever.
const MAX_CACHE_ENTRIES: usize = 512;

/// PyPI's index, which every Python launcher uses when nothing else is configured.
const PYPI_INDEX: &str = "https://pypi.org/simple";
/// Where PyPI's index sends downloads.
const PYPI_FILES: &str = "files.pythonhosted.org:443";
/// npm's registry when nothing else is configured.
const NPM_REGISTRY: &str = "https://registry.npmjs.org/";

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

/// What an npm or bun launcher's arguments say.
struct NpmArgs {
    package: String,
    /// `--registry URL` on the command line.
    registry: Option<String>,
}

fn npm_args(args: &[String]) -> Option<NpmArgs> {
    let (mut package, mut registry) = (None, None);
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            // `npm exec -- pkg args`: the package comes next unless --package gave it.
            if package.is_none() {
                package = args.get(i + 1).cloned();
            }
            break;
        }
        if let Some(value) = option_value(args, &mut i, &["--registry"]) {
            registry = Some(value);
        } else if let Some(value) = option_value(args, &mut i, &["--package", "-p"]) {
            package.get_or_insert(value);
        } else if matches!(arg.as_str(), "--no-install" | "--no" | "--offline") {
            // It runs only what is there already: nothing to download.
            return None;
        } else if matches!(
            arg.as_str(),
            "--prefix" | "--cache" | "--userconfig" | "--call" | "-c" | "--workspace" | "-w"
        ) {
            i += 1;
        } else if !arg.starts_with('-') {
            package.get_or_insert_with(|| arg.clone());
            break;
        }
        i += 1;
    }
    Some(NpmArgs {
        package: package.filter(|p| !p.is_empty())?,
        registry,
    })
}

/// `@scope` of `@scope/name@1.0`, if any.
fn npm_scope(package: &str) -> Option<&str> {
    let (scope, _) = package.split_once('/')?;
    (scope.len() > 1 && scope.starts_with('@')).then_some(scope)
}

/// `@scope/name` and `1.0` of `@scope/name@1.0`; the version is `None` when none is given.
fn npm_name_version(package: &str) -> (&str, Option<&str>) {
    let search_from = usize::from(package.starts_with('@'));
    match package
        .get(search_from..)
        .and_then(|rest| rest.find('@'))
        .map(|at| at + search_from)
    {
        Some(at) => (
            &package[..at],
            Some(&package[at + 1..]).filter(|v| !v.is_empty()),
        ),
        None => (package, None),
    }
}

/// The registries of an npm or bun launcher: its default registry and, for a scoped
/// package, its scope's registry.
fn npm_registries(
    kind: LauncherKind,
    args: &NpmArgs,
    sources: &Sources<'_>,
) -> (Vec<Registry>, Vec<(String, String)>) {
    let userconfig = sources
        .var("npm_config_userconfig")
        .map(|(value, _)| PathBuf::from(value))
        .or_else(|| sources.in_home(".npmrc"));
    let npmrc = userconfig
        .as_deref()
        .and_then(|path| read_capped(path).map(|text| (path.display().to_string(), text)));
    let from_npmrc = |key: &str| {
        let (path, text) = npmrc.as_ref()?;
        npmrc_value(text, key).map(|value| (value, path.clone()))
    };
    let mut candidates: Vec<(String, String)> = Vec::new();
    if let Some(registry) = &args.registry {
        candidates.push((registry.clone(), "the --registry argument".into()));
    }
    if kind == LauncherKind::Bunx {
        candidates.extend(sources.var("BUN_CONFIG_REGISTRY"));
    }
    candidates.extend(sources.var("npm_config_registry"));
    candidates.extend(from_npmrc("registry"));
    let default = candidates
        .into_iter()
        .find_map(|(url, source)| registry(&url, source).map(|r| (url, r)))
        .or_else(|| {
            registry(NPM_REGISTRY, "npm's default".into()).map(|r| (NPM_REGISTRY.to_owned(), r))
        });
    let mut registries = Vec::new();
    let mut env = Vec::new();
    if let Some((url, default)) = default {
        env.push(("npm_config_registry".to_owned(), url));
        registries.push(default);
    }
    if let Some(scope) = npm_scope(&args.package) {
        let key = format!("{scope}:registry");
        let scoped = sources
            .var(&format!("npm_config_{key}"))
            .into_iter()
            .chain(from_npmrc(&key))
            .find_map(|(url, source)| registry(&url, source).map(|r| (url, r)));
        if let Some((url, scoped)) = scoped {
            env.push((format!("npm_config_{key}"), url));
            if !registries.iter().any(|r| r.host_port == scoped.host_port) {
                registries.push(scoped);
            }
        }
    }
    if kind != LauncherKind::Bunx {
        // npm checks the registry for a newer npm at start: the same host, but a request the
        // server never needs.
        env.push(("npm_config_update_notifier".into(), "false".into()));
    }
    (registries, env)
}

/// `key`'s value in an `.npmrc` (ini: `key = value`, `#` and `;` comments, optional quotes);
/// the last one wins, as in npm.
fn npmrc_value(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|line| {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            return None;
        }
        let (k, v) = line.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| unquote(v.trim()).to_owned())
    })
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// Indexes a Python launcher's arguments name.
#[derive(Default)]
struct Indexes {
    /// The index replacing PyPI (`--index-url`, `--default-index`).
    default: Option<String>,
    /// Indexes searched besides it (`--index`, `--extra-index-url`).
    extra: Vec<String>,
}

struct PythonArgs {
    package: String,
    indexes: Indexes,
}

/// `uvx [options] COMMAND` / `uv tool run [options] COMMAND`: the package is `--from`'s, else
/// the command's.
fn uv_args(args: &[String]) -> Option<PythonArgs> {
    const VALUED: &[&str] = &[
        "--with",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--cache-dir",
        "--config-file",
        "--directory",
        "--project",
        "--color",
        "--index-strategy",
        "--keyring-provider",
        "--resolution",
        "--prerelease",
        "--exclude-newer",
        "--constraints",
        "--overrides",
        "--build-constraints",
        "--link-mode",
        "--refresh-package",
        "--reinstall-package",
        "--upgrade-package",
        "-P",
        "--no-binary-package",
        "--no-build-package",
        "--config-setting",
        "-C",
        "--env-file",
        "--find-links",
        "-f",
        "--python-platform",
    ];
    let (mut from, mut command, mut indexes) = (None, None, Indexes::default());
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            command = args.get(i + 1).cloned();
            break;
        }
        if arg == "--offline" {
            return None;
        }
        if let Some(url) = option_value(args, &mut i, &["--index-url", "--default-index", "-i"]) {
            indexes.default.get_or_insert(url);
        } else if let Some(value) = option_value(args, &mut i, &["--index"]) {
            // `--index URL` or `--index name=URL`, possibly several separated by spaces.
            indexes
                .extra
                .extend(value.split_whitespace().map(|i| index_url(i).to_owned()));
        } else if let Some(url) = option_value(args, &mut i, &["--extra-index-url"]) {
            indexes.extra.push(url);
        } else if let Some(spec) = option_value(args, &mut i, &["--from"]) {
            from = Some(spec);
        } else if VALUED.contains(&arg.as_str()) {
            i += 1;
        } else if !arg.starts_with('-') {
            command = Some(arg.clone());
            break;
        }
        i += 1;
    }
    Some(PythonArgs {
        package: from.or(command).filter(|p| !p.is_empty())?,
        indexes,
    })
}

/// `pipx run [options] APP`: the package is `--spec`'s, else the app's.
fn pipx_args(args: &[String]) -> Option<PythonArgs> {
    const VALUED: &[&str] = &["--python", "--pip-args", "--backend"];
    let (mut spec, mut app, mut indexes) = (None, None, Indexes::default());
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            app = args.get(i + 1).cloned();
            break;
        }
        if let Some(url) = option_value(args, &mut i, &["--index-url", "-i"]) {
            indexes.default.get_or_insert(url);
        } else if let Some(value) = option_value(args, &mut i, &["--spec"]) {
            spec = Some(value);
        } else if let Some(pip_args) = option_value(args, &mut i, &["--pip-args"]) {
            let words: Vec<String> = pip_args.split_whitespace().map(str::to_owned).collect();
            let mut j = 0;
            while j < words.len() {
                if let Some(url) = option_value(&words, &mut j, &["--index-url", "-i"]) {
                    indexes.default.get_or_insert(url);
                } else if let Some(url) = option_value(&words, &mut j, &["--extra-index-url"]) {
                    indexes.extra.push(url);
                }
                j += 1;
            }
        } else if VALUED.contains(&arg.as_str()) {
            i += 1;
        } else if !arg.starts_with('-') {
            app = Some(arg.clone());
            break;
        }
        i += 1;
    }
    Some(PythonArgs {
        package: spec.or(app).filter(|p| !p.is_empty())?,
        indexes,
    })
}

/// The URL of `name=URL` (uv's named index), or the value itself.
fn index_url(value: &str) -> &str {
    match value.split_once('=') {
        Some((name, url)) if !name.contains('/') && !name.contains(':') => url,
        _ => value,
    }
}

/// The indexes of a Python launcher: the default one (the first source that names one, else
/// PyPI, which also needs its file host) and every extra one.
fn python_registries(
    kind: LauncherKind,
    args: &Indexes,
    sources: &Sources<'_>,
) -> (Vec<Registry>, Vec<(String, String)>) {
    let mut defaults: Vec<(String, String)> = Vec::new();
    let mut extras: Vec<(String, String)> = Vec::new();
    if let Some(url) = &args.default {
        defaults.push((url.clone(), "the --index-url argument".into()));
    }
    extras.extend(
        args.extra
            .iter()
            .map(|url| (url.clone(), "the --index argument".to_owned())),
    );
    let config: Option<(PathBuf, String)>;
    if kind == LauncherKind::PipxRun {
        defaults.extend(sources.var("PIP_INDEX_URL"));
        if let Some((value, source)) = sources.var("PIP_EXTRA_INDEX_URL") {
            extras.extend(
                value
                    .split_whitespace()
                    .map(|u| (u.to_owned(), source.clone())),
            );
        }
        let candidates = sources
            .var("PIP_CONFIG_FILE")
            .map(|(value, _)| PathBuf::from(value))
            .into_iter()
            .chain(sources.config_home().map(|c| c.join("pip/pip.conf")))
            .chain(sources.in_home(".pip/pip.conf"));
        config = candidates
            .into_iter()
            .find_map(|path| read_capped(&path).map(|text| (path, text)));
        if let Some((path, text)) = &config {
            let (default, extra) = pip_conf_indexes(text);
            let source = path.display().to_string();
            defaults.extend(default.map(|url| (url, source.clone())));
            extras.extend(extra.into_iter().map(|url| (url, source.clone())));
        }
    } else {
        for name in ["UV_DEFAULT_INDEX", "UV_INDEX_URL"] {
            defaults.extend(sources.var(name));
        }
        for name in ["UV_INDEX", "UV_EXTRA_INDEX_URL"] {
            if let Some((value, source)) = sources.var(name) {
                extras.extend(
                    value
                        .split_whitespace()
                        .map(|u| (index_url(u).to_owned(), source.clone())),
                );
            }
        }
        // uv itself does not read PIP_INDEX_URL; a user who set it means it for every
        // installer, and the launcher is then told to use it (registry_env).
        defaults.extend(sources.var("PIP_INDEX_URL"));
        let path = sources
            .var("UV_CONFIG_FILE")
            .map(|(value, _)| PathBuf::from(value))
            .or_else(|| sources.config_home().map(|c| c.join("uv/uv.toml")));
        config = path.and_then(|path| read_capped(&path).map(|text| (path, text)));
        if let Some((path, text)) = &config {
            let (default, extra) = uv_toml_indexes(text);
            let source = path.display().to_string();
            defaults.extend(default.map(|url| (url, source.clone())));
            extras.extend(extra.into_iter().map(|url| (url, source.clone())));
        }
    }
    let default = defaults
        .into_iter()
        .find_map(|(url, source)| registry(&url, source).map(|r| (url, r)));
    let mut env = Vec::new();
    let mut registries = Vec::new();
    let default_is_pypi = match default {
        Some((url, default)) => {
            env.push((
                if kind == LauncherKind::PipxRun {
                    "PIP_INDEX_URL"
                } else {
                    "UV_DEFAULT_INDEX"
                }
                .to_owned(),
                url,
            ));
            let pypi = default.host_port == "pypi.org:443";
            registries.push(default);
            pypi
        }
        None => {
            registries.extend(registry(PYPI_INDEX, "PyPI, the default index".into()));
            true
        }
    };
    let mut extra_urls = Vec::new();
    for (url, source) in extras {
        if let Some(extra) = registry(&url, source) {
            extra_urls.push(url);
            if !registries.iter().any(|r| r.host_port == extra.host_port) {
                registries.push(extra);
            }
        }
    }
    if !extra_urls.is_empty() {
        env.push((
            if kind == LauncherKind::PipxRun {
                "PIP_EXTRA_INDEX_URL"
            } else {
                "UV_INDEX"
            }
            .to_owned(),
            extra_urls.join(" "),
        ));
    }
    if default_is_pypi && !registries.iter().any(|r| r.host_port == PYPI_FILES) {
        registries.push(Registry {
            url: format!("https://{PYPI_FILES}"),
            host_port: PYPI_FILES.to_owned(),
            source: "PyPI's file host".to_owned(),
        });
    }
    (registries, env)
}

/// A `uv.toml`'s default index (`index-url`, `default-index`, an `[[index]]` with
/// `default = true`) and extra ones (`extra-index-url`, other `[[index]]` tables). A line
/// reader for the few keys that matter, not a TOML parser: anything else is skipped.
fn uv_toml_indexes(text: &str) -> (Option<String>, Vec<String>) {
    let (mut default, mut extra) = (None, Vec::new());
    // The `[[index]]` table being read: its url and whether it is the default.
    let mut table: Option<(Option<String>, bool)> = None;
    let mut section = String::new();
    let close = |table: &mut Option<(Option<String>, bool)>,
                 default: &mut Option<String>,
                 extra: &mut Vec<String>| {
        if let Some((Some(url), is_default)) = table.take() {
            if is_default && default.is_none() {
                *default = Some(url);
            } else {
                extra.push(url);
            }
        }
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            close(&mut table, &mut default, &mut extra);
            section = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
            if line.starts_with("[[") && section == "index" {
                table = Some((None, false));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if let Some((url, is_default)) = table.as_mut() {
            match key {
                "url" => *url = toml_string(value),
                "default" => *is_default = value.starts_with("true"),
                _ => {}
            }
        } else if section.is_empty() {
            match key {
                "index-url" | "default-index" => default = default.or(toml_string(value)),
                "extra-index-url" => extra.extend(toml_strings(value)),
                _ => {}
            }
        }
    }
    close(&mut table, &mut default, &mut extra);
    (default, extra)
}

/// A TOML basic or literal string's contents.
fn toml_string(value: &str) -> Option<String> {
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = value.get(1..)?;
    rest.find(quote).map(|end| rest[..end].to_owned())
}

/// The strings of a one-line TOML array (`["a", "b"]`), or a single string.
fn toml_strings(value: &str) -> Vec<String> {
    let Some(inner) = value.strip_prefix('[') else {
        return toml_string(value).into_iter().collect();
    };
    inner
        .trim_end_matches(']')
        .split(',')
        .filter_map(|item| toml_string(item.trim()))
        .collect()
}

/// A pip.conf's `index-url` and `extra-index-url` (in `[global]` or `[install]`).
fn pip_conf_indexes(text: &str) -> (Option<String>, Vec<String>) {
    let (mut default, mut extra) = (None, Vec::new());
    let mut relevant = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            relevant = matches!(section.trim_end_matches(']').trim(), "global" | "install");
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']).filter(|_| relevant) else {
            continue;
        };
        match key.trim() {
            "index-url" | "index_url" => default = Some(value.trim().to_owned()),
            "extra-index-url" | "extra_index_url" => {
                extra.extend(value.split_whitespace().map(str::to_owned));
            }
            _ => {}
        }
    }
    (default, extra)
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

/// Where each launcher keeps what it downloads, all under `root`.
fn cache_env(kind: LauncherKind, root: &Path) -> Vec<(String, PathBuf)> {
    let pairs: &[(&str, &str)] = match kind.ecosystem() {
        // npx installs into `<cache>/_npx/<hash>`; its logs go to `<cache>/_logs`.
        Ecosystem::Npm => &[("npm_config_cache", "npm")],
        Ecosystem::Bun => &[
            ("BUN_INSTALL_CACHE_DIR", "bun/install/cache"),
            ("BUN_INSTALL", "bun"),
        ],
        // uvx keeps its environments in the cache; `uv tool install` in the tool dir.
        Ecosystem::Uv => &[
            ("UV_CACHE_DIR", "uv/cache"),
            ("UV_TOOL_DIR", "uv/tools"),
            ("UV_TOOL_BIN_DIR", "uv/bin"),
            ("UV_PYTHON_INSTALL_DIR", "uv/python"),
        ],
        // pipx run keeps its environments in `$PIPX_HOME/.cache/<hash>`.
        Ecosystem::Pipx => &[
            ("PIPX_HOME", "pipx"),
            ("PIPX_BIN_DIR", "pipx/bin"),
            ("PIPX_MAN_DIR", "pipx/man"),
            ("PIP_CACHE_DIR", "pip"),
        ],
    };
    pairs
        .iter()
        .map(|(name, dir)| ((*name).to_owned(), root.join(dir)))
        .chain(std::iter::once((
            "XDG_CACHE_HOME".to_owned(),
            root.join("xdg-cache"),
        )))
        .collect()
}

/// The version of [`LauncherPlan::package`] an earlier start put under `cache_root` (the
/// same root [`launcher_plan`] was given), read from the cache's layout; `None` when nothing
/// is cached yet. When the spec pins a version that is cached, that one; else the most
/// recently installed.
pub fn resolved_version(plan: &LauncherPlan, cache_root: &Path) -> Option<String> {
    match plan.kind.ecosystem() {
        Ecosystem::Npm => {
            let (name, pinned) = npm_name_version(&plan.package);
            // `_npx/<hash>/node_modules/<name>/package.json`, one hash per package list.
            let found = entries(&cache_root.join("npm/_npx")).filter_map(|dir| {
                let manifest = dir.join("node_modules").join(name).join("package.json");
                let version = json_top_level_string(&read_capped(&manifest)?, "version")?;
                Some((modified(&manifest), version))
            });
            pick(found, pinned)
        }
        Ecosystem::Bun => {
            let (name, pinned) = npm_name_version(&plan.package);
            // `<cache>/<name>@<version>@@@<n>` (scoped: `<cache>/@scope/<name>@...`).
            let cache = cache_root.join("bun/install/cache");
            let (dir, base) = match name.split_once('/') {
                Some((scope, base)) if name.starts_with('@') => (cache.join(scope), base),
                _ => (cache, name),
            };
            let found = entries(&dir).filter_map(|entry| {
                let file_name = entry.file_name()?.to_str()?.to_owned();
                let rest = file_name.strip_prefix(base)?.strip_prefix('@')?;
                let version = rest.split("@@@").next()?.to_owned();
                (!version.is_empty()).then(|| (modified(&entry), version))
            });
            pick(found, pinned)
        }
        Ecosystem::Uv | Ecosystem::Pipx => {
            let (name, pinned) = python_name_version(&plan.package);
            let name = normalize_python(name);
            // Environments with a `lib/python3.X/site-packages/<dist>-<version>.dist-info`:
            // uvx's in `<cache>/archive-v0/<hash>`, `uv tool install`'s in
            // `<tools>/<name>`, pipx run's in `$PIPX_HOME/.cache/<hash>`.
            let envs: Vec<PathBuf> = if plan.kind == LauncherKind::PipxRun {
                entries(&cache_root.join("pipx/.cache")).collect()
            } else {
                entries(&cache_root.join("uv/cache/archive-v0"))
                    .chain(entries(&cache_root.join("uv/tools")))
                    .collect()
            };
            let found = envs.into_iter().flat_map(|env| {
                entries(&env.join("lib"))
                    .flat_map(|lib| entries(&lib.join("site-packages")))
                    .filter_map(|info| {
                        let file_name = info.file_name()?.to_str()?;
                        let stem = file_name.strip_suffix(".dist-info")?;
                        let (dist, version) = stem.rsplit_once('-')?;
                        (normalize_python(dist) == name && !version.is_empty())
                            .then(|| (modified(&info), version.to_owned()))
                    })
                    .collect::<Vec<_>>()
            });
            pick(found, pinned)
        }
    }
}

/// The pinned version when it is among `found`, else the most recently modified one.
fn pick(
    found: impl Iterator<Item = (std::time::SystemTime, String)>,
    pinned: Option<&str>,
) -> Option<String> {
    let mut found: Vec<_> = found.collect();
    if let Some(pinned) = pinned
        && found.iter().any(|(_, v)| v == pinned)
    {
        return Some(pinned.to_owned());
    }
    found.sort();
    found.pop().map(|(_, version)| version)
}

/// `name` and the exact version of `name==1.0`, `name@1.0` or `name[extra]==1.0`.
fn python_name_version(spec: &str) -> (&str, Option<&str>) {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .unwrap_or(spec.len());
    let (name, rest) = spec.split_at(end);
    let rest = rest
        .find(['=', '@', '<', '>', '~', '!'])
        .map_or("", |at| &rest[at..]);
    let version = rest
        .strip_prefix("==")
        .or_else(|| rest.strip_prefix('@'))
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.contains([',', '*', ' ']));
    (name, version)
}

/// PEP 503's normal form: lower case, runs of `-`, `_` and `.` as one `-`.
fn normalize_python(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The first [`MAX_CACHE_ENTRIES`] entries of a directory, as paths (none when unreadable).
fn entries(dir: &Path) -> impl Iterator<Item = PathBuf> + use<> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .take(MAX_CACHE_ENTRIES)
        .flatten()
        .map(|entry| entry.path())
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
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

/// The string value of `key` in a JSON document's top-level object: a scanner that tracks
/// nesting and strings (no JSON library in this crate), `None` for anything malformed.
fn json_top_level_string(text: &str, key: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    // The last string read at depth 1 and whether a ':' followed it (so it was a key).
    let mut last_key: Option<String> = None;
    let mut after_colon = false;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                depth += 1;
                last_key = None;
            }
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' => {
                last_key = None;
                after_colon = false;
            }
            b':' if depth == 1 => after_colon = true,
            b'"' => {
                let (value, end) = json_string(bytes, i)?;
                if depth == 1 {
                    if after_colon {
                        if last_key.as_deref() == Some(key) {
                            return Some(value);
                        }
                    } else {
                        last_key = Some(value);
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The JSON string starting at `bytes[start] == '"'` (common escapes decoded) and the index
/// after its closing quote.
fn json_string(bytes: &[u8], start: usize) -> Option<(String, usize)> {
    let mut out = Vec::new();
    let mut i = start + 1;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), i + 1)),
            b'\\' => {
                let escaped = *bytes.get(i + 1)?;
                out.push(match escaped {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    other => other,
                });
                i += 2;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "launchers_tests.rs"]
mod tests;
