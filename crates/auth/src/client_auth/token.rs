//! The check of one access token: a JWT signed by one of the issuer's keys with an
//! asymmetric algorithm (RS*/PS*, ES256/ES384, EdDSA; never `none` or HS*), from the
//! configured issuer, for this proxy (`auth.audience`, else the resource URL of `/mcp`),
//! within its `exp`/`nbf` give or take [`LEEWAY_SECONDS`]. What it yields is the
//! [`Identity`] of the caller: the subject and groups from the configured claims.

use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde_json::Value;

use super::keys::Keys;
use mcpproxy_config::AuthConfig;

/// Clock skew tolerated on `exp` and `nbf`.
pub(super) const LEEWAY_SECONDS: u64 = 30;
/// The longest token looked at.
const MAX_TOKEN_BYTES: usize = 16 << 10;
/// The most groups kept from a token, and the longest subject or group name.
const MAX_GROUPS: usize = 64;
const MAX_NAME_BYTES: usize = 256;

/// Who is calling: from a valid access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub subject: String,
    pub groups: Vec<String>,
}

/// Why a token was refused (the text goes into the `401`'s body; it never repeats the
/// token).
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    #[error(
        "this endpoint needs an access token from {issuer}: send `Authorization: Bearer <token>` \
         (the resource metadata in WWW-Authenticate says where to get one)"
    )]
    Missing { issuer: String },
    #[error("the access token is refused: {0}")]
    Invalid(String),
    #[error("cannot check the access token now: {0}")]
    Unavailable(String),
}

/// Checks access tokens of one issuer.
pub struct Verifier {
    auth: AuthConfig,
    keys: Keys,
}

/// The asymmetric algorithms accepted.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl Verifier {
    pub fn new(auth: AuthConfig) -> Self {
        // Before the key fetcher's HTTP client and any token check (jsonwebtoken keeps the
        // first provider it is asked for).
        crate::install_crypto_providers();
        let keys = Keys::new(auth.issuer.clone());
        Self { auth, keys }
    }

    pub fn config(&self) -> &AuthConfig {
        &self.auth
    }

    /// The identity in `token`, if it is a valid access token for `resource`.
    pub async fn verify(&self, token: &str, resource: &str) -> Result<Identity, Rejection> {
        let invalid = |m: &str| Rejection::Invalid(m.to_owned());
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(
                "it is longer than any access token this proxy takes",
            ));
        }
        let header = decode_header(token).map_err(|_| invalid("it is not a JWT"))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Rejection::Invalid(format!(
                "it is signed with {:?}; only asymmetric algorithms (RS256, ES256, EdDSA, ...) \
                 are accepted",
                header.alg
            )));
        }
        let keys = self
            .keys
            .find(header.kid.as_deref())
            .await
            .map_err(|e| Rejection::Unavailable(e.to_string()))?;
        if keys.is_empty() {
            return Err(invalid(
                "it is signed with a key the issuer does not publish",
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.set_issuer(&[self.auth.issuer.as_str()]);
        let audience = self.auth.audience.as_deref().unwrap_or(resource);
        validation.set_audience(&[audience]);
        let mut last = None;
        for key in keys {
            if key
                .jwk
                .common
                .key_algorithm
                .is_some_and(|alg| format!("{alg:?}") != format!("{:?}", header.alg))
            {
                continue;
            }
            match decode::<Value>(token, &key.decoding, &validation) {
                Ok(data) => return self.identity(&data.claims),
                Err(e) => last = Some(e),
            }
        }
        Err(Rejection::Invalid(match last.map(|e| e.into_kind()) {
            Some(jsonwebtoken::errors::ErrorKind::ExpiredSignature) => "it has expired".into(),
            Some(jsonwebtoken::errors::ErrorKind::ImmatureSignature) => {
                "it is not valid yet (nbf)".into()
            }
            Some(jsonwebtoken::errors::ErrorKind::InvalidAudience) => {
                format!("it is not for this resource (aud must name {audience})")
            }
            Some(jsonwebtoken::errors::ErrorKind::InvalidIssuer) => {
                format!("it was not issued by {}", self.auth.issuer)
            }
            Some(jsonwebtoken::errors::ErrorKind::InvalidSignature) => {
                "its signature does not verify".into()
            }
            Some(jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(claim)) => {
                format!("it has no {claim} claim")
            }
            Some(_) | None => "it does not verify against the issuer's keys".into(),
        }))
    }

    /// Subject and groups from the configured claims.
    fn identity(&self, claims: &Value) -> Result<Identity, Rejection> {
        let subject = claim(claims, &self.auth.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= MAX_NAME_BYTES)
            .ok_or_else(|| {
                Rejection::Invalid(format!(
                    "it has no {} claim (a string of 1 to {MAX_NAME_BYTES} bytes) to name the caller",
                    self.auth.subject_claim
                ))
            })?;
        let groups = match claim(claims, &self.auth.groups_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .filter(|g| !g.is_empty() && g.len() <= MAX_NAME_BYTES)
                .take(MAX_GROUPS)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(list)) => list
                .split_whitespace()
                .filter(|g| g.len() <= MAX_NAME_BYTES)
                .take(MAX_GROUPS)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        Ok(Identity {
            subject: subject.to_owned(),
            groups,
        })
    }
}

/// A claim by name; a dotted name (`realm_access.roles`) walks into objects.
fn claim<'a>(claims: &'a Value, name: &str) -> Option<&'a Value> {
    claims.get(name).or_else(|| {
        name.split('.')
            .try_fold(claims, |value, part| value.get(part))
    })
}
