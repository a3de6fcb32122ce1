//! `rate_limits` on calls: which buckets a call draws from, in order (the caller's,
//! `identity:<subject>`, for a logged-in caller; the upstream's, `upstream:<server>`; the
//! tool's, `tool:<server>:<tool>`), and the refusal when one is empty: which limit, and
//! when to retry. The buckets live in a [`BucketStore`] (in memory by default, shared by
//! replicas when a shared store is given).
//!
//! A call takes a token from each bucket in turn and stops at the first empty one; tokens
//! already taken from the buckets before it are spent (a refused call still counted against
//! its caller).

use std::sync::Arc;
use std::time::Duration;

use super::{CallContext, Proxy};
use mcpproxy_config::Limit;
use mcpproxy_config::RateLimitsConfig;

use mcpproxy_rate_limit::{BucketStore, MemoryBuckets, key};

/// The JSON-RPC error code of a call refused by a rate limit (the server-error range).
pub const RATE_LIMITED_CODE: i32 = -32029;

/// The limits in force and where their buckets are.
pub struct RateLimits {
    config: RateLimitsConfig,
    store: Arc<dyn BucketStore>,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self::new(
            RateLimitsConfig::default(),
            Arc::new(MemoryBuckets::default()),
        )
    }
}

/// A call refused by a rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// The config key of the limit, e.g. `rate_limits.tools.prod-db:drop_table`.
    pub limit: String,
    /// The bucket's key (see `mcpproxy_rate_limit::key`).
    pub key: String,
    /// Whole seconds until the bucket holds a token again (at least 1).
    pub retry_after: u64,
    /// What the caller reads.
    pub message: String,
}

impl RateLimits {
    pub fn new(config: RateLimitsConfig, store: Arc<dyn BucketStore>) -> Self {
        Self { config, store }
    }

    /// Takes a token for one call of `server:tool` by `subject` (`None`: not logged in)
    /// from every bucket the call draws from; `Err` names the first empty one.
    pub async fn take(
        &self,
        subject: Option<&str>,
        server: &str,
        tool: &str,
    ) -> Result<(), Limited> {
        // Allocates only for the buckets a call draws from: with no limit configured (the
        // default) a call costs two empty-map checks.
        let mut buckets: Vec<(String, String, &Limit)> = Vec::new();
        if let (Some(subject), Some(limit)) = (subject, &self.config.identity) {
            buckets.push((
                "rate_limits.identity".to_owned(),
                key::identity(subject),
                limit,
            ));
        }
        if let Some(limit) = self.config.upstreams.get(server) {
            buckets.push((
                format!("rate_limits.upstreams.{server}"),
                key::upstream(server),
                limit,
            ));
        }
        if let Some(limit) = (!self.config.tools.is_empty())
            .then(|| self.config.tools.get(&(server.to_owned(), tool.to_owned())))
            .flatten()
        {
            buckets.push((
                format!("rate_limits.tools.{server}:{tool}"),
                key::tool(server, tool),
                limit,
            ));
        }
        for (name, key, limit) in buckets {
            let refused = |retry: Duration, why: String| {
                let retry_after = retry.as_secs_f64().ceil().max(1.0) as u64;
                Limited {
                    message: format!(
                        "Rate limit {name} ({limit}) reached: {why}; retry after {retry_after} s"
                    ),
                    limit: name.clone(),
                    key: key.clone(),
                    retry_after,
                }
            };
            match self.store.take(&key, limit).await {
                Ok(take) if take.allowed => {}
                Ok(take) => {
                    return Err(refused(
                        take.retry_after,
                        "the call was not sent".to_owned(),
                    ));
                }
                // A limit that cannot be checked is not waived.
                Err(e) => {
                    return Err(refused(
                        Duration::from_secs(1),
                        format!("{e}, so the call was not sent"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Proxy {
    /// Puts `limits` in force.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.limits = Arc::new(limits);
        self
    }

    /// Takes the tokens of a call by the caller of `context`.
    pub(super) async fn take_tokens(
        &self,
        context: &CallContext,
        server: &str,
        tool: &str,
    ) -> Result<(), Limited> {
        let subject = context.identity.as_ref().map(|i| i.subject.as_str());
        self.limits.take(subject, server, tool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpproxy_config::Per;
    use mcpproxy_rate_limit::Clock;

    struct Frozen;

    impl Clock for Frozen {
        fn now(&self) -> Duration {
            Duration::ZERO
        }
    }

    fn limits() -> RateLimits {
        let one = |per| Limit {
            rate: 1.0,
            per,
            burst: 1,
        };
        let mut config = RateLimitsConfig {
            identity: Some(Limit {
                rate: 2.0,
                per: Per::Minute,
                burst: 2,
            }),
            ..RateLimitsConfig::default()
        };
        config.upstreams.insert("db".into(), one(Per::Second));
        config
            .tools
            .insert(("docs".into(), "drop".into()), one(Per::Hour));
        RateLimits::new(
            config,
            Arc::new(MemoryBuckets::with_clock(Arc::new(Frozen))),
        )
    }

    #[tokio::test]
    async fn each_limit_counts_its_own_calls_and_names_itself_when_it_refuses() {
        let limits = limits();
        limits
            .take(None, "db", "q")
            .await
            .expect("the upstream's first");
        let upstream = limits.take(None, "db", "q").await.unwrap_err();
        assert_eq!(
            (
                upstream.limit.as_str(),
                upstream.key.as_str(),
                upstream.retry_after
            ),
            ("rate_limits.upstreams.db", "upstream:db", 1)
        );
        assert_eq!(
            upstream.message,
            "Rate limit rate_limits.upstreams.db (1 per second, burst 1) reached: the call \
             was not sent; retry after 1 s"
        );
        limits
            .take(None, "docs", "drop")
            .await
            .expect("the tool's first");
        let tool = limits.take(None, "docs", "drop").await.unwrap_err();
        assert_eq!(
            (tool.key.as_str(), tool.retry_after),
            ("tool:docs:drop", 3600)
        );
        // Calls of other tools, and callers without a login, draw from no identity bucket.
        for _ in 0..5 {
            limits.take(None, "docs", "read").await.expect("unlimited");
        }
        limits.take(Some("alice"), "docs", "read").await.expect("1");
        limits.take(Some("alice"), "docs", "read").await.expect("2");
        let alice = limits
            .take(Some("alice"), "docs", "read")
            .await
            .unwrap_err();
        assert_eq!(
            (alice.key.as_str(), alice.retry_after),
            ("identity:alice", 30)
        );
        limits
            .take(Some("bob"), "docs", "read")
            .await
            .expect("bob's own bucket");
    }
}
