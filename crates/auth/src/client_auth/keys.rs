//! The issuer's signing keys: its metadata (RFC 8414 `oauth-authorization-server`, else
//! OpenID `openid-configuration`) names the `jwks_uri`; the key set is fetched once and
//! kept, and fetched again when a token names a key id it does not hold (the issuer
//! rotated its keys), at most once per [`REFETCH_INTERVAL`] so forged key ids cannot make
//! the proxy hammer the issuer.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use mcpproxy_support::{read_lock, write_lock};
use serde::Deserialize;
use tokio::sync::Mutex;

/// The least time between two fetches of the key set.
pub(super) const REFETCH_INTERVAL: Duration = Duration::from_secs(5);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest metadata or key set document read.
const MAX_DOCUMENT_BYTES: usize = 256 << 10;

/// Why the keys could not be had.
#[derive(Debug, thiserror::Error)]
pub(super) enum KeysError {
    #[error("cannot reach the issuer's {what} at {url}: {reason}")]
    Fetch {
        what: &'static str,
        url: String,
        reason: String,
    },
    #[error(
        "the issuer's metadata names issuer {found}, not the configured auth.issuer {expected}"
    )]
    IssuerMismatch { expected: String, found: String },
}

/// One key of the set, ready to check signatures.
#[derive(Clone)]
pub(super) struct Key {
    pub jwk: Jwk,
    pub decoding: Arc<DecodingKey>,
}

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Key>,
    /// Keys without a `kid`, tried in turn for a token without one.
    unnamed: Vec<Key>,
}

#[derive(Default)]
struct Fetching {
    jwks_uri: Option<String>,
    fetched: Option<Instant>,
    /// Why the last fetch failed, while it is the latest word.
    failed: Option<String>,
}

/// The key cache of one issuer. Lookups read the cache under a short lock; fetches take
/// their own lock, so a slow issuer delays only the tokens that wait for new keys.
pub(super) struct Keys {
    issuer: String,
    client: reqwest::Client,
    cache: RwLock<Cache>,
    fetching: Mutex<Fetching>,
}

#[derive(Deserialize)]
struct Metadata {
    issuer: Option<String>,
    jwks_uri: Option<String>,
}

impl Keys {
    pub(super) fn new(issuer: String) -> Self {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            issuer,
            client,
            cache: RwLock::new(Cache::default()),
            fetching: Mutex::new(Fetching::default()),
        }
    }

    fn lookup(&self, kid: Option<&str>) -> Vec<Key> {
        let cache = read_lock(&self.cache);
        match kid {
            Some(kid) => cache.keys.get(kid).cloned().into_iter().collect(),
            None => cache.unnamed.clone(),
        }
    }

    /// The key with id `kid` (or the keys without an id when the token names none),
    /// fetching the set when it is not known yet or `kid` is new. An empty list: the issuer
    /// does not publish such a key (as of the last fetch).
    pub(super) async fn find(&self, kid: Option<&str>) -> Result<Vec<Key>, KeysError> {
        let found = self.lookup(kid);
        if !found.is_empty() {
            return Ok(found);
        }
        let mut fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        let found = self.lookup(kid);
        if !found.is_empty() {
            return Ok(found);
        }
        let due = fetching
            .fetched
            .is_none_or(|at| at.elapsed() >= REFETCH_INTERVAL);
        if !due {
            return match &fetching.failed {
                Some(reason) => Err(KeysError::Fetch {
                    what: "keys",
                    url: self.issuer.clone(),
                    reason: format!("{reason} (tried again within {REFETCH_INTERVAL:?})"),
                }),
                None => Ok(Vec::new()),
            };
        }
        fetching.fetched = Some(Instant::now());
        match self.fetch(&mut fetching).await {
            Ok(cache) => {
                fetching.failed = None;
                *write_lock(&self.cache) = cache;
                Ok(self.lookup(kid))
            }
            Err(e) => {
                fetching.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// The key set, read afresh (the metadata only the first time).
    async fn fetch(&self, fetching: &mut Fetching) -> Result<Cache, KeysError> {
        let jwks_uri = match &fetching.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                fetching.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet = self.get_json("key set (jwks_uri)", &jwks_uri).await?;
        let mut cache = Cache::default();
        for jwk in set.keys {
            let Ok(decoding) = DecodingKey::from_jwk(&jwk) else {
                // A key of a kind this proxy cannot use (e.g. a symmetric one): skipped.
                continue;
            };
            let key = Key {
                decoding: Arc::new(decoding),
                jwk: jwk.clone(),
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    cache.keys.insert(kid.clone(), key);
                }
                None => cache.unnamed.push(key),
            }
        }
        Ok(cache)
    }

    /// The `jwks_uri` from the issuer's metadata.
    async fn discover(&self) -> Result<String, KeysError> {
        let issuer = self.issuer.trim_end_matches('/');
        let (origin, path) = match issuer.find("://").map(|i| i + 3) {
            Some(start) => match issuer[start..].find('/') {
                Some(slash) => issuer.split_at(start + slash),
                None => (issuer, ""),
            },
            None => (issuer, ""),
        };
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut last = None;
        for url in candidates {
            match self.get_json::<Metadata>("metadata", &url).await {
                Ok(metadata) => {
                    if let Some(found) = &metadata.issuer
                        && found.trim_end_matches('/') != issuer
                    {
                        return Err(KeysError::IssuerMismatch {
                            expected: self.issuer.clone(),
                            found: mcpproxy_support::quote(found),
                        });
                    }
                    if let Some(uri) = metadata.jwks_uri {
                        return Ok(uri);
                    }
                    last = Some(KeysError::Fetch {
                        what: "metadata",
                        url,
                        reason: "it names no jwks_uri".into(),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(KeysError::Fetch {
            what: "metadata",
            url: issuer.into(),
            reason: "no metadata document".into(),
        }))
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        what: &'static str,
        url: &str,
    ) -> Result<T, KeysError> {
        let fail = |reason: String| KeysError::Fetch {
            what,
            url: url.to_owned(),
            reason,
        };
        let response = self
            .client
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status())));
        }
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(fail(format!(
                    "the document is larger than {} KiB",
                    MAX_DOCUMENT_BYTES >> 10
                )));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| fail(format!("not the JSON expected: {e}")))
    }
}
