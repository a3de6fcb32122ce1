//! `activity`: the journal's durability, retention, delivery batching, argument size cap
//! and redacted argument keys.

use std::time::Duration;

use super::Context;
use crate::raw;
use mcpproxy_policy::journal::{Durability, Retention};

use crate::{ActivityConfig, DEFAULT_ASYNC_FLUSH, Result};

/// The longest `activity.async_flush_ms` accepted.
const MAX_ASYNC_FLUSH_MS: u64 = 60_000;
/// The longest `activity.retention.max_age_days` accepted: a century.
const MAX_AGE_DAYS: u64 = 36_500;
/// The longest `activity.retention.min_age_hours` accepted: ten years.
const MAX_MIN_AGE_HOURS: u64 = 87_600;
/// The longest `activity.retention.interval_seconds` accepted: a day.
const MAX_RETENTION_INTERVAL_SECONDS: u64 = 86_400;
/// The largest `activity.max_argument_bytes` accepted.
const MAX_ARGUMENT_BYTES: u64 = 16 << 20;

pub(super) fn activity_from(raw: raw::RawActivity, ctx: &Context<'_>) -> Result<ActivityConfig> {
    let mut activity = ActivityConfig::default();
    let flush = match raw.async_flush_ms {
        None => DEFAULT_ASYNC_FLUSH,
        Some(ms) => Duration::from_millis(ctx.range(
            "activity.async_flush_ms",
            ms,
            1,
            MAX_ASYNC_FLUSH_MS,
            " milliseconds",
        )?),
    };
    match raw.durability.as_deref() {
        None | Some("sync") => activity.durability = Durability::Sync,
        Some("async") => activity.durability = Durability::Async { flush },
        Some(other) => {
            return Err(ctx.err(
                "activity.durability",
                format!("'{other}' is not a durability: use 'sync' (a record is on disk before the call returns) or 'async' (written within async_flush_ms)"),
            ));
        }
    }
    if let Some(retention) = raw.retention {
        let mut r = Retention::default();
        if let Some(d) = retention.max_age_days {
            let d = ctx.range(
                "activity.retention.max_age_days",
                d,
                1,
                MAX_AGE_DAYS,
                " days",
            )?;
            r.max_age = Duration::from_secs(d * 24 * 60 * 60);
        }
        if let Some(h) = retention.min_age_hours {
            let h = ctx.range(
                "activity.retention.min_age_hours",
                h,
                0,
                MAX_MIN_AGE_HOURS,
                " hours",
            )?;
            r.min_age = Duration::from_secs(h * 60 * 60);
        }
        if retention.min_age_hours.is_none() {
            // The default minimum age gives way to a shorter max_age the user chose.
            r.min_age = r.min_age.min(r.max_age);
        } else if r.min_age > r.max_age {
            return Err(ctx.err(
                "activity.retention.min_age_hours",
                format!(
                    "{} hours is longer than activity.retention.max_age_days ({} days): records \
                     must be allowed to age out; lower min_age_hours to at most {} or raise \
                     max_age_days",
                    r.min_age.as_secs() / 3600,
                    r.max_age.as_secs() / 86_400,
                    r.max_age.as_secs() / 3600
                ),
            ));
        }
        if let Some(s) = retention.interval_seconds {
            let s = ctx.range(
                "activity.retention.interval_seconds",
                s,
                1,
                MAX_RETENTION_INTERVAL_SECONDS,
                " seconds",
            )?;
            r.interval = Duration::from_secs(s);
        }
        if let Some(n) = retention.max_records {
            r.max_records = ctx.at_least_one("activity.retention.max_records", n)?;
        }
        if let Some(n) = retention.max_bytes {
            r.max_bytes = ctx.at_least_one("activity.retention.max_bytes", n)?;
        }
        if let Some(n) = retention.max_undelivered_bytes {
            r.max_undelivered_bytes =
                ctx.at_least_one("activity.retention.max_undelivered_bytes", n)?;
        }
        activity.retention = r;
    }
    if let Some(delivery) = raw.delivery {
        let d = &mut activity.delivery;
        if let Some(n) = delivery.batch_records {
            let n = ctx.range("activity.delivery.batch_records", n, 1, 10_000, " records")?;
            d.batch_records = usize::try_from(n).unwrap_or(10_000);
        }
        if let Some(n) = delivery.batch_bytes {
            let n = ctx.range("activity.delivery.batch_bytes", n, 1024, 64 << 20, " bytes")?;
            d.batch_bytes = usize::try_from(n).unwrap_or(64 << 20);
        }
        if let Some(ms) = delivery.interval_ms {
            let ms = ctx.range(
                "activity.delivery.interval_ms",
                ms,
                10,
                3_600_000,
                " milliseconds",
            )?;
            d.interval = Duration::from_millis(ms);
        }
        if let Some(ms) = delivery.max_backoff_ms {
            let ms = ctx.range(
                "activity.delivery.max_backoff_ms",
                ms,
                100,
                3_600_000,
                " milliseconds",
            )?;
            d.max_backoff = Duration::from_millis(ms);
        }
    }
    if let Some(n) = raw.max_argument_bytes {
        let n = ctx.range(
            "activity.max_argument_bytes",
            n,
            0,
            MAX_ARGUMENT_BYTES,
            " bytes",
        )?;
        activity.max_argument_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(keys) = raw.redact_keys {
        for (i, k) in keys.iter().enumerate() {
            ctx.not_empty(&format!("activity.redact_keys[{i}]"), k, "the key")?;
        }
        activity.redact_keys = keys;
    }
    if let Some(checkpoints) = raw.checkpoints {
        activity.checkpoints = checkpoints_from(ctx, checkpoints)?;
    }
    Ok(activity)
}

/// `activity.checkpoints`: when the hash chain's head is signed.
fn checkpoints_from(ctx: &Context<'_>, raw: raw::RawCheckpoints) -> Result<crate::Checkpoints> {
    let mut c = crate::Checkpoints::default();
    if let Some(n) = raw.every_records {
        c.every_records = ctx.range(
            "activity.checkpoints.every_records",
            n,
            0,
            crate::MAX_CHECKPOINT_RECORDS,
            " records",
        )?;
    }
    if let Some(secs) = raw.every_secs {
        let secs = ctx.range(
            "activity.checkpoints.every_secs",
            secs,
            1,
            crate::MAX_CHECKPOINT_SECS,
            " seconds",
        )?;
        c.every = Duration::from_secs(secs);
    }
    if let Some(key) = raw.signing_key {
        c.signing_key = Some(signing_key(ctx, key)?);
    }
    Ok(c)
}

/// `activity.checkpoints.signing_key`: exactly one reference, never the key itself (the
/// config is a file an agent may read).
fn signing_key(ctx: &Context<'_>, key: String) -> Result<String> {
    const AT: &str = "activity.checkpoints.signing_key";
    let references = crate::reference::check(&key).map_err(|why| ctx.err(AT, why))?;
    let whole = references
        .first()
        .is_some_and(|r| references.len() == 1 && r.to_string() == key.trim());
    if !whole {
        return Err(ctx.err(
            AT,
            "must be one reference to where the key is kept, ${secret:NAME} (stored with \
             `openssl rand -hex 32 | mcpproxy secret set NAME`) or ${env:NAME}, never the key \
             itself: the config is a file others may read",
        ));
    }
    Ok(key.trim().to_owned())
}
