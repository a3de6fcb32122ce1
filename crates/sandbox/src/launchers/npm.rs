//! npm and bun launchers (`npx`, `npm exec`, `bunx`, `bun x`): the package and `--registry` of
//! their arguments, and the registries they download from (`--registry`, `npm_config_registry`,
//! `.npmrc` files, scoped registries).

use std::path::PathBuf;

use super::{LauncherKind, Registry, Sources, option_value, read_capped, registry};

/// npm's registry when nothing else is configured.
const NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// What an npm or bun launcher's arguments say.
pub(super) struct NpmArgs {
    pub(super) package: String,
    /// `--registry URL` on the command line.
    registry: Option<String>,
}

pub(super) fn npm_args(args: &[String]) -> Option<NpmArgs> {
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
pub(super) fn npm_name_version(package: &str) -> (&str, Option<&str>) {
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
pub(super) fn npm_registries(
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
