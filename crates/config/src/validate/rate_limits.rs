//! `rate_limits`: token buckets per logged-in caller (`identity`), per tool (`tools`, keyed
//! `server:tool`) and per upstream server (`upstreams`). Each limit is `{"rate": N, "per":
//! "second"|"minute"|"hour", "burst": B}`; `per` defaults to `second`, `burst` to the rate
//! (rounded up, at least 1).

use std::collections::BTreeMap;

use super::Context;
use super::servers::check_server_name;
use crate::raw::{RawRate, RawRateLimits};
use crate::{Limit, Per};
use crate::{RateLimitsConfig, Result};

/// The highest rate and burst accepted.
const MAX_RATE: f64 = 1_000_000.0;
/// The most limits in `tools` or `upstreams`.
const MAX_ENTRIES: usize = 10_000;

pub(super) fn rate_limits_from(raw: RawRateLimits, ctx: &Context<'_>) -> Result<RateLimitsConfig> {
    let identity = match raw.identity {
        Some(rate) => Some(limit_from(rate, "rate_limits.identity", ctx)?),
        None => None,
    };
    let mut tools = BTreeMap::new();
    for (name, rate) in entries(raw.tools, "rate_limits.tools", ctx)? {
        let key = format!("rate_limits.tools.{name}");
        let Some((server, tool)) = name.split_once(':') else {
            return Err(ctx.err(
                &key,
                format!(
                    "'{}' is not server:tool: key a tool's limit by its server and name, e.g. \
                     \"github:create_issue\" (a whole server's limit goes in rate_limits.upstreams)",
                    mcpproxy_support::quote(&name)
                ),
            ));
        };
        check_server_name(server).map_err(|why| ctx.err(&key, why))?;
        if tool.is_empty() || tool.len() > 256 || tool.chars().any(char::is_control) {
            return Err(ctx.err(
                &key,
                "the tool name is empty, longer than 256 characters or holds control characters",
            ));
        }
        tools.insert(
            (server.to_owned(), tool.to_owned()),
            limit_from(rate, &key, ctx)?,
        );
    }
    let mut upstreams = BTreeMap::new();
    for (server, rate) in entries(raw.upstreams, "rate_limits.upstreams", ctx)? {
        let key = format!("rate_limits.upstreams.{server}");
        check_server_name(&server).map_err(|why| ctx.err(&key, why))?;
        let limit = limit_from(rate, &key, ctx)?;
        upstreams.insert(server, limit);
    }
    Ok(RateLimitsConfig {
        identity,
        tools,
        upstreams,
    })
}

fn entries(
    raw: Option<BTreeMap<String, RawRate>>,
    key: &str,
    ctx: &Context<'_>,
) -> Result<BTreeMap<String, RawRate>> {
    let map = raw.unwrap_or_default();
    if map.len() > MAX_ENTRIES {
        return Err(ctx.err(
            key,
            format!("{} limits: use at most {MAX_ENTRIES}", map.len()),
        ));
    }
    Ok(map)
}

fn limit_from(raw: RawRate, key: &str, ctx: &Context<'_>) -> Result<Limit> {
    let Some(rate) = raw.rate else {
        return Err(ctx.err(
            &format!("{key}.rate"),
            "missing: give how many calls the bucket refills per `per`, e.g. {\"rate\": 60, \
             \"per\": \"minute\"}",
        ));
    };
    if !rate.is_finite() || rate <= 0.0 || rate > MAX_RATE {
        return Err(ctx.err(
            &format!("{key}.rate"),
            format!("{rate} is out of range: use a number above 0 and at most {MAX_RATE}"),
        ));
    }
    let per = match raw.per.as_deref() {
        None | Some("second") => Per::Second,
        Some("minute") => Per::Minute,
        Some("hour") => Per::Hour,
        Some(other) => {
            return Err(ctx.err(
                &format!("{key}.per"),
                format!(
                    "'{}' is not a unit: use \"second\", \"minute\" or \"hour\"",
                    mcpproxy_support::quote(other)
                ),
            ));
        }
    };
    let burst = match raw.burst {
        Some(burst) => ctx.range(&format!("{key}.burst"), burst, 1, MAX_RATE as u64, " calls")?,
        None => rate.ceil().max(1.0) as u64,
    };
    Ok(Limit {
        rate,
        per,
        burst: u32::try_from(burst).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use crate::{Config, ScopeRule};
    use crate::{Limit, Per};

    #[test]
    fn limits_and_scopes_are_read_with_their_defaults() {
        let config = Config::from_json(
            r#"{
              "scopes": [{"groups": ["contractors"], "hide_tools": ["github:delete_repo"],
                          "only_servers": ["github", "docs"]}],
              "rate_limits": {
                "identity": {"rate": 2.5, "per": "minute"},
                "tools": {"github:create_issue": {"rate": 1, "per": "hour", "burst": 3}},
                "upstreams": {"docs": {"rate": 10}}
              }
            }"#,
            "t.json",
        )
        .expect("a valid config");
        assert_eq!(
            config.scopes,
            [ScopeRule {
                groups: vec!["contractors".into()],
                hide_tools: vec![("github".into(), "delete_repo".into())],
                only_servers: Some(vec!["github".into(), "docs".into()]),
                ..ScopeRule::default()
            }]
        );
        let limits = &config.rate_limits;
        // The burst defaults to the rate, rounded up; `per` to a second.
        assert_eq!(
            limits.identity,
            Some(Limit {
                rate: 2.5,
                per: Per::Minute,
                burst: 3
            })
        );
        assert_eq!(
            limits.tools[&("github".to_owned(), "create_issue".to_owned())],
            Limit {
                rate: 1.0,
                per: Per::Hour,
                burst: 3
            }
        );
        assert_eq!(
            limits.upstreams["docs"],
            Limit {
                rate: 10.0,
                per: Per::Second,
                burst: 10
            }
        );
    }
}
