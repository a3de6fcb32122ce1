//! A config value's `${env:NAME}` and `${secret:NAME}` references resolved: from mcpproxy's
//! environment and from the credential store. The error names the reference and the fix,
//! never a value.

use mcpproxy_config::reference::{self, Reference};

use super::{CredentialStore, Secret};

/// The value of one reference: mcpproxy's environment for `${env:NAME}`, `credentials` for
/// `${secret:NAME}`; `Ok(None)` when it is not set.
pub fn look_up(
    reference: &Reference,
    credentials: &CredentialStore,
) -> Result<Option<Secret>, String> {
    match reference {
        Reference::Env(name) => match std::env::var(name) {
            Ok(value) => Ok(Some(Secret::new(value))),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err("its value is not valid UTF-8".to_owned())
            }
        },
        Reference::Secret(name) => credentials
            .get(&Reference::store_key(name))
            .map_err(|e| e.to_string()),
    }
}

/// `value` with each of its references replaced by what [`look_up`] finds (a value without
/// one is returned as it is).
pub fn resolve(value: &str, credentials: &CredentialStore) -> Result<Secret, String> {
    if !reference::has_reference(value) {
        return Ok(Secret::new(value.to_owned()));
    }
    let mut lookup = |r: &Reference| {
        look_up(r, credentials).map(|found| found.map(|secret| secret.expose().to_owned()))
    };
    reference::resolve(value, &mut lookup, &|v: &str| v.to_owned())
        .map(Secret::new)
        .map_err(|e| e.to_string())
}
