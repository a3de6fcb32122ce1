//! The filters `list`, `export`, `stats` and `watch` share (`--server`, `--status`,
//! `--since`, ...): parsed once, on the command line, into the journal's [`Filter`], and
//! written back as the REST API's query parameters when a server answers.

use anyhow::{Result, bail};
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};

use mcpproxy_activity::{Filter, RecordType, Status, format_timestamp, now_ms, parse_timestamp};

/// The filters `list`, `export` and `stats` share.
#[derive(Debug, Clone, Args)]
pub(super) struct FilterArgs {
    /// Only calls with this operation type.
    #[arg(long, value_parser = ["read", "write", "destructive"])]
    intent_type: Option<String>,
    /// Only calls to this upstream server.
    #[arg(long)]
    server: Option<String>,
    /// Only calls of this tool (its name on the server).
    #[arg(long)]
    tool: Option<String>,
    /// Only records with this status.
    #[arg(long, value_parser = one_of(&Filter::STATUSES, Status::as_str))]
    status: Option<Status>,
    /// Only records of this type.
    #[arg(long = "type", value_parser = one_of(&RecordType::ALL, RecordType::as_str))]
    record_type: Option<RecordType>,
    /// Only records of this MCP session.
    #[arg(long)]
    session: Option<String>,
    /// Only records at or after this time: a duration ago (`30m`, `1h`, `7d`) or an RFC 3339
    /// time (`2026-11-22T04:10:00Z`).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only records at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only records written by this replica of a cluster (its `cluster.replica`).
    #[arg(long, value_name = "NAME")]
    replica: Option<String>,
    /// Only calls that waited for a person's approval (`any`), or those it ended so for.
    #[arg(long, value_name = "DECISION", value_parser = PossibleValuesParser::new(Filter::APPROVALS))]
    approval: Option<String>,
}

/// A value parser for one of `values`, each written as `name` gives it: the same help and
/// the same error as a plain list of the words, and the value itself for the command.
fn one_of<T: Copy + Send + Sync + 'static>(
    values: &'static [T],
    name: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(values.iter().map(|value| name(*value))).try_map(move |word| {
        values
            .iter()
            .copied()
            .find(|value| name(*value) == word)
            .ok_or("not one of the possible values")
    })
}

impl FilterArgs {
    /// The journal filter, with --since and --until resolved against now.
    pub(super) fn filter(&self) -> Result<Filter> {
        let time = |flag: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| parse_time_arg(v).map_err(|e| anyhow::anyhow!("--{flag} '{v}': {e}")))
                .transpose()
        };
        let filter = Filter {
            intent_type: self.intent_type.clone(),
            server: self.server.clone(),
            tool: self.tool.clone(),
            status: self.status,
            record_type: self.record_type,
            session: self.session.clone(),
            start_ms: time("since", &self.since)?,
            end_ms: time("until", &self.until)?,
            replica: self.replica.clone(),
            approval: self.approval.clone(),
        };
        if let (Some(start), Some(end)) = (filter.start_ms, filter.end_ms)
            && start > end
        {
            bail!("--since is after --until");
        }
        Ok(filter)
    }

    /// The same filter as REST query parameters.
    pub(super) fn query(&self) -> Result<Vec<(&'static str, String)>> {
        let filter = self.filter()?;
        let mut query = Vec::new();
        for (key, value) in [
            ("intent_type", filter.intent_type.as_deref()),
            ("server", filter.server.as_deref()),
            ("tool", filter.tool.as_deref()),
            ("status", filter.status.map(Status::as_str)),
            ("type", filter.record_type.map(RecordType::as_str)),
            ("session", filter.session.as_deref()),
            ("replica", filter.replica.as_deref()),
            ("approval", filter.approval.as_deref()),
        ] {
            if let Some(v) = value {
                query.push((key, v.to_owned()));
            }
        }
        if let Some(ms) = filter.start_ms {
            query.push(("start_time", format_timestamp(ms)));
        }
        if let Some(ms) = filter.end_ms {
            query.push(("end_time", format_timestamp(ms)));
        }
        Ok(query)
    }
}

/// A time given on the command line: a duration ago (`90s`, `30m`, `1h`, `7d`, `2w`) or an
/// RFC 3339 timestamp; unix milliseconds.
pub(super) fn parse_time_arg(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let unit_ms: Option<u64> = match text.chars().last() {
        Some('s') => Some(1_000),
        Some('m') => Some(60_000),
        Some('h') => Some(3_600_000),
        Some('d') => Some(86_400_000),
        Some('w') => Some(7 * 86_400_000),
        _ => None,
    };
    // `get`: the last character may take more than one byte (`1é`).
    let digits = text.get(..text.len().saturating_sub(1)).unwrap_or("");
    if let Some(unit) = unit_ms
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("'{digits}' is too large"))?;
        return Ok(now_ms().saturating_sub(n.saturating_mul(unit)));
    }
    parse_timestamp(text).map_err(|e| format!("{e}; or a duration ago: 90s, 30m, 1h, 7d, 2w"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_a_duration_ago_or_a_timestamp() {
        let hour_ago = now_ms() - 3_600_000;
        let parsed = parse_time_arg("1h").unwrap();
        assert!(parsed >= hour_ago && parsed < hour_ago + 60_000, "{parsed}");
        assert_eq!(
            parse_time_arg("2026-11-22T04:10:00Z"),
            Ok(parse_timestamp("2026-11-22T04:10:00Z").unwrap())
        );
        assert!(parse_time_arg("99999999999999999999d").is_err());
        // A last character of more than one byte is an error, not a panic.
        assert!(parse_time_arg("1\u{e9}").is_err());
    }
}
