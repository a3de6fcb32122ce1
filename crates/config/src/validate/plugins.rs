//! `plugins`: the plugin directory, the annotator, validator and sink lists, the shared
//! and per-plugin `limits`, each plugin's `settings`, and the hosts a sink's settings grant.

use std::time::Duration;

use super::{Context, MAX_NAME_LEN, describe};
use crate::raw::{self, RawLimits};
use crate::{PluginsConfig, Result};
use mcpproxy_policy::is_plugin_name;
use mcpproxy_policy::{Limits, mib_to_bytes};

pub(super) fn plugins_from(raw: raw::RawPlugins, ctx: &Context<'_>) -> Result<PluginsConfig> {
    let mut plugins = PluginsConfig::default();
    if let Some(dir) = raw.dir {
        plugins.dir = Some(ctx.path("plugins.dir", &dir)?);
    }
    plugins.annotators = raw
        .annotators
        .map(|names| plugin_list(names, "plugins.annotators", ctx))
        .transpose()?;
    plugins.validators = raw
        .validators
        .map(|names| plugin_list(names, "plugins.validators", ctx))
        .transpose()?;
    plugins.guards = raw
        .guards
        .map(|names| plugin_list(names, "plugins.guards", ctx))
        .transpose()?;
    if let Some(sinks) = raw.sinks {
        plugins.sinks = plugin_list(sinks, "plugins.sinks", ctx)?;
    }
    if let Some(limits) = raw.limits {
        plugins.reuse_set_for_all = limits.reuse_instance.is_some();
        plugins.limits = limits_from(limits, plugins.limits, "plugins.limits", ctx)?;
    }
    for (name, limits) in raw.plugin_limits.unwrap_or_default() {
        let mut key = String::from("plugins.plugin_limits");
        raw::push_key(&mut key, &name);
        if !is_plugin_name(&name) {
            return Err(ctx.err(&key, plugin_name_error(&name)));
        }
        if limits.timeout_ms.is_some() {
            plugins.explicit_timeouts.insert(name.clone());
        }
        if limits.reuse_instance.is_some() {
            plugins.explicit_reuse.insert(name.clone());
        }
        let limits = limits_from(limits, plugins.limits, &key, ctx)?;
        plugins.plugin_limits.insert(name, limits);
    }
    for (name, settings) in raw.settings.unwrap_or_default() {
        let mut key = String::from("plugins.settings");
        raw::push_key(&mut key, &name);
        if !is_plugin_name(&name) {
            return Err(ctx.err(&key, plugin_name_error(&name)));
        }
        if !settings.is_object() {
            return Err(ctx.err(
                &key,
                format!(
                    "expected an object (the settings the plugin '{name}' reads), found {}",
                    describe(&settings)
                ),
            ));
        }
        plugins.settings.insert(name, settings);
    }
    // A sink reaches only the hosts its settings grant: say now if they cannot be read.
    for name in &plugins.sinks {
        if let Some(problem) = plugins.sink_grant_problem(name) {
            let mut key = String::from("plugins.settings");
            raw::push_key(&mut key, name);
            return Err(ctx.err(&key, problem));
        }
    }
    Ok(plugins)
}

fn plugin_list(names: Vec<String>, key: &str, ctx: &Context<'_>) -> Result<Vec<String>> {
    for (i, name) in names.iter().enumerate() {
        let at = format!("{key}[{i}]");
        if !is_plugin_name(name) {
            return Err(ctx.err(&at, plugin_name_error(name)));
        }
        if let Some(first) = names[..i].iter().position(|n| n == name) {
            return Err(ctx.err(&at, format!("'{name}' is already listed at {key}[{first}]")));
        }
    }
    Ok(names)
}

/// `raw` over `base`: a key left out keeps the base value.
fn limits_from(raw: RawLimits, base: Limits, key: &str, ctx: &Context<'_>) -> Result<Limits> {
    let mut limits = base;
    if let Some(ms) = raw.timeout_ms {
        let ms = ctx.range(
            &format!("{key}.timeout_ms"),
            ms,
            1,
            Limits::MAX_TIMEOUT_MS,
            " milliseconds",
        )?;
        limits.timeout = Duration::from_millis(ms);
    }
    if let Some(mib) = raw.memory_mib {
        let mib = ctx.range(
            &format!("{key}.memory_mib"),
            mib,
            1,
            Limits::MAX_MEMORY_MIB,
            " MiB",
        )?;
        limits.memory_bytes = mib_to_bytes(mib);
    }
    if let Some(reuse) = raw.reuse_instance {
        limits.reuse_instance = reuse;
    }
    Ok(limits)
}

fn plugin_name_error(name: &str) -> String {
    format!(
        "'{name}' is not a valid plugin name: use 1 to {MAX_NAME_LEN} lowercase letters, digits and '-' (not first or last)"
    )
}
