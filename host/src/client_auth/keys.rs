//! The issuer's signing keys: its metadata (RFC 8414 `oauth-authorization-server`, else
//! OpenID `openid-configuration`) names the `jwks_uri`; the key set is fetched once and
//! kept, and fetched again when a token names a key id it does not hold (the issuer
//! rotated its keys), at most once per [`REFETCH_INTERVAL`] so forged key ids cannot make
//! the proxy hammer the issuer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use serde::Deserialize;
use tokio::sync::Mutex;

/// The least time between two fetches of the key set.
pub(crate) const REFETCH_INTERVAL: Duration = Duration::from_secs(5);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest metadata or key set document read.
const MAX_DOCUMENT_BYTES: usize = 256 << 10;

/// Why the keys could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeysError {
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
pub(crate) struct Key {
    pub jwk: Jwk,
    pub decoding: Arc<DecodingKey>,
}

#[derive(Default)]
struct Cache {
    jwks_uri: Option<String>,
    keys: HashMap<String, Key>,
    /// Keys without a `kid`, tried in turn for a token without one.
    unnamed: Vec<Key>,
    fetched: Option<Instant>,
}

/// The key cache of one issuer.
pub(crate) struct Keys {
    issuer: String,
    client: reqwest::Client,
    cache: Mutex<Cache>,
}

#[derive(Deserialize)]
struct Metadata {
    issuer: Option<String>,
    jwks_uri: Option<String>,
}

impl Keys {
    pub(crate) fn new(issuer: String) -> Self {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            issuer,
            client,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The key with id `kid` (or the keys without an id when the token names none),
    /// fetching the set when it is not known yet or `kid` is new.
    pub(crate) async fn find(&self, kid: Option<&str>) -> Result<Vec<Key>, KeysError> {
        let mut cache = self.cache.lock().await;
        let lookup = |cache: &Cache| match kid {
            Some(kid) => cache.keys.get(kid).cloned().into_iter().collect::<Vec<_>>(),
            None => cache.unnamed.clone(),
        };
        let found = lookup(&cache);
        if !found.is_empty() {
            return Ok(found);
        }
        let due = cache
            .fetched
            .is_none_or(|at| at.elapsed() >= REFETCH_INTERVAL);
        if !due {
            return Ok(Vec::new());
        }
        cache.fetched = Some(Instant::now());
        let jwks_uri = match &cache.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                cache.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet = self.get_json("key set (jwks_uri)", &jwks_uri).await?;
        cache.keys.clear();
        cache.unnamed.clear();
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
        Ok(lookup(&cache))
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
                            found: mcpproxy_policy::quote(found),
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
