//! The `${env:NAME}` and `${secret:NAME}` references of a server's transport, resolved when
//! the server is started: header values, stdio `env` values and URL query values. The
//! resolved transport lives only as long as the connection attempt needs it; the config,
//! statuses, records and the launch fingerprint keep the reference text. A missing value is
//! an error that names the reference and the fix, for this server only.

use mcpproxy_auth::credentials::{CredentialStore, Secret};
use mcpproxy_config::reference::{self, Reference};
use mcpproxy_config::{StdioLaunch, Transport};

/// A transport with its references replaced, and the values put in (to scrub them from any
/// message about the attempt).
pub(super) struct Resolved {
    pub(super) transport: Transport,
    values: Vec<Secret>,
}

impl Resolved {
    /// `message` with every resolved value (of four characters or more) masked.
    pub(super) fn scrub(&self, message: String) -> String {
        let mut message = message;
        for value in &self.values {
            let value = value.expose();
            if value.chars().count() >= 4 {
                message = message.replace(value, mcpproxy_auth::masking::MASK);
            }
        }
        message
    }
}

/// The value of one reference, from mcpproxy's environment or `credentials`; each value
/// found is also put in `values`.
fn look_up(
    reference: &Reference,
    credentials: &CredentialStore,
    values: &mut Vec<Secret>,
) -> Result<Option<String>, String> {
    let found = mcpproxy_auth::credentials::references::look_up(reference, credentials)?;
    let value = found.as_ref().map(|secret| secret.expose().to_owned());
    values.extend(found);
    Ok(value)
}

/// `transport` with its references resolved from mcpproxy's environment and `credentials`.
pub(super) fn resolve(
    transport: &Transport,
    credentials: &CredentialStore,
) -> Result<Resolved, String> {
    let mut values = Vec::new();
    let mut lookup = |r: &Reference| look_up(r, credentials, &mut values);
    let plain = |value: &str| value.to_owned();
    let transport = match transport {
        Transport::Stdio {
            command,
            args,
            env,
            working_dir,
        } => {
            let launch = StdioLaunch {
                command,
                args,
                env,
                working_dir: working_dir.as_deref(),
            };
            launch.map_env(|name, value| {
                if !reference::has_reference(value) {
                    return Ok(value.to_owned());
                }
                reference::resolve(value, &mut lookup, &plain)
                    .map_err(|e| format!("env '{name}': {e}"))
            })?
        }
        Transport::Http { url, headers } => {
            let mut resolved = headers.clone();
            for (name, value) in resolved.iter_mut() {
                if reference::has_reference(value) {
                    *value = reference::resolve(value, &mut lookup, &plain)
                        .map_err(|e| format!("header '{name}': {e}"))?;
                }
            }
            let url = match url.split_once('?') {
                Some((base, query)) if reference::has_reference(query) => {
                    let query =
                        reference::resolve(query, &mut lookup, &reference::encode_query_value)
                            .map_err(|e| format!("url query: {e}"))?;
                    format!("{base}?{query}")
                }
                _ => url.clone(),
            };
            Transport::Http {
                url,
                headers: resolved,
            }
        }
    };
    Ok(Resolved { transport, values })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn headers_env_and_query_values_are_resolved_and_scrubbed_from_messages() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open_file(dir.path());
        store
            .set(&Reference::store_key("API_KEY"), "k&y v4lue")
            .unwrap();
        let http = Transport::Http {
            url: "https://h.example/mcp?key=${secret:API_KEY}&plain=1".to_owned(),
            headers: BTreeMap::from([(
                "Authorization".to_owned(),
                "Bearer ${secret:API_KEY}".to_owned(),
            )]),
        };
        let resolved = resolve(&http, &store).unwrap();
        let Transport::Http { url, headers } = &resolved.transport else {
            panic!("not HTTP");
        };
        assert_eq!(url, "https://h.example/mcp?key=k%26y%20v4lue&plain=1");
        assert_eq!(headers["Authorization"], "Bearer k&y v4lue");
        assert_eq!(
            resolved.scrub("refused: Bearer k&y v4lue".to_owned()),
            "refused: Bearer ***"
        );

        let stdio = Transport::Stdio {
            command: "srv".to_owned(),
            args: Vec::new(),
            env: BTreeMap::from([("TOKEN".to_owned(), "${secret:MISSING}".to_owned())]),
            working_dir: None,
        };
        let error = resolve(&stdio, &store).err().unwrap();
        assert_eq!(
            error,
            "env 'TOKEN': ${secret:MISSING}: no secret named 'MISSING' is stored: run \
             `mcpproxy secret set MISSING`"
        );
    }
}
