//! Python launchers (`uvx`, `uv tool run`, `pipx run`): the package and index options of their
//! arguments, and the indexes they download from (arguments, `UV_*`/`PIP_*` variables,
//! `uv.toml`, `pip.conf`); the name and pinned version of a Python package spec.

use std::path::PathBuf;

use super::{LauncherKind, Registry, Sources, option_value, read_capped, registry};

/// PyPI's index, which every Python launcher uses when nothing else is configured.
const PYPI_INDEX: &str = "https://pypi.org/simple";
/// Where PyPI's index sends downloads.
const PYPI_FILES: &str = "files.pythonhosted.org:443";

/// Indexes a Python launcher's arguments name.
#[derive(Default)]
pub(super) struct Indexes {
    /// The index replacing PyPI (`--index-url`, `--default-index`).
    default: Option<String>,
    /// Indexes searched besides it (`--index`, `--extra-index-url`).
    extra: Vec<String>,
}

pub(super) struct PythonArgs {
    pub(super) package: String,
    pub(super) indexes: Indexes,
}

/// `uvx [options] COMMAND` / `uv tool run [options] COMMAND`: the package is `--from`'s, else
/// the command's.
pub(super) fn uv_args(args: &[String]) -> Option<PythonArgs> {
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
pub(super) fn pipx_args(args: &[String]) -> Option<PythonArgs> {
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
pub(super) fn python_registries(
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

/// `name` and the exact version of `name==1.0`, `name@1.0` or `name[extra]==1.0`.
pub(super) fn python_name_version(spec: &str) -> (&str, Option<&str>) {
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
pub(super) fn normalize_python(name: &str) -> String {
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
