//! The launchers' caches: where each keeps what it downloads (all under one root that outlives
//! a start), and which version of a package an earlier start put there, read from the cache's
//! layout (`package.json`, bun's directory names, `*.dist-info`).

use std::path::{Path, PathBuf};

use super::npm::npm_name_version;
use super::python::{normalize_python, python_name_version};
use super::{Ecosystem, LauncherKind, LauncherPlan, read_capped};

/// How many entries of a cache directory [`resolved_version`] looks at: a cache filled by a
/// hostile server cannot make it walk forever.
const MAX_CACHE_ENTRIES: usize = 512;

/// Where each launcher keeps what it downloads, all under `root`.
pub(super) fn cache_env(kind: LauncherKind, root: &Path) -> Vec<(String, PathBuf)> {
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
                // npx saves the directory's own package.json once the install is done: an
                // install cut short has the package's files but not it, and npx run offline
                // from there fails (ENOENT), so such a directory is no cache.
                if !dir.join("package.json").is_file() {
                    return None;
                }
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

/// The string value of `key` in a JSON document's top-level object: a scanner that tracks
/// nesting and strings (no JSON library in this crate), `None` for anything malformed.
pub(super) fn json_top_level_string(text: &str, key: &str) -> Option<String> {
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
