//! Outbound network grants: the hosts a sink plugin may reach, read from its settings.
//!
//! A grant is the authority (`host:port`) of the sink's `url` setting plus each entry of
//! its `allowed_hosts` (a `host:port` or a URL). The config check reports entries that
//! cannot be read; the plugin host enforces the grant on every outbound request. This
//! module depends on nothing else in the crate, so both can use it.

use std::collections::BTreeSet;

use http::uri::{Scheme, Uri};

/// The hosts one sink may reach, as lowercase `host:port` authorities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    authorities: BTreeSet<String>,
}

impl Grant {
    /// The grant in a sink's settings: `url`'s authority plus every `allowed_hosts` entry.
    /// Entries that cannot be read are returned as errors for the config check to report.
    pub fn from_settings(settings: &serde_json::Value) -> (Self, Vec<String>) {
        let mut grant = Self::default();
        let mut problems = Vec::new();
        if let Some(url) = settings.get("url") {
            match url.as_str().map(authority_of) {
                Some(Ok(authority)) => {
                    grant.authorities.insert(authority);
                }
                Some(Err(e)) => problems.push(format!("url: {e}")),
                None => {
                    problems.push("url: must be a string such as \"http://127.0.0.1:8123\"".into())
                }
            }
        }
        match settings.get("allowed_hosts") {
            None => {}
            Some(serde_json::Value::Array(hosts)) => {
                for (i, host) in hosts.iter().enumerate() {
                    match host.as_str().map(authority_of) {
                        Some(Ok(authority)) => {
                            grant.authorities.insert(authority);
                        }
                        Some(Err(e)) => problems.push(format!("allowed_hosts[{i}]: {e}")),
                        None => problems.push(format!("allowed_hosts[{i}]: must be a string")),
                    }
                }
            }
            Some(_) => problems
                .push("allowed_hosts: must be a list such as [\"siem.example.com:443\"]".into()),
        }
        (grant, problems)
    }

    pub fn allows(&self, authority: &str) -> bool {
        self.authorities.contains(authority)
    }

    pub fn authorities(&self) -> impl Iterator<Item = &str> {
        self.authorities.iter().map(String::as_str)
    }
}

/// `host:port` of a URL (`http://h:1/x`) or of a bare `host:port`/`host`, lowercased, with
/// the scheme's default port filled in (80 for http and bare hosts, 443 for https).
pub fn authority_of(text: &str) -> Result<String, String> {
    let text = text.trim();
    let uri: Uri = text
        .parse()
        .map_err(|_| format!("{text:?} is not a URL or host:port"))?;
    let scheme = uri.scheme().cloned();
    if let Some(s) = &scheme
        && *s != Scheme::HTTP
        && *s != Scheme::HTTPS
    {
        return Err(format!("{text:?}: only http and https are supported"));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{text:?} names no host"))?;
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return Err(format!("{text:?} names no host"));
    }
    let port = authority.port_u16().unwrap_or(match scheme {
        Some(s) if s == Scheme::HTTPS => 443,
        _ => 80,
    });
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn authorities_get_default_ports_and_lowercase() {
        assert_eq!(
            authority_of("http://127.0.0.1:8123").unwrap(),
            "127.0.0.1:8123"
        );
        assert_eq!(
            authority_of("https://SIEM.example.com/x?y").unwrap(),
            "siem.example.com:443"
        );
        assert_eq!(authority_of("http://h/").unwrap(), "h:80");
        assert_eq!(authority_of("h:9000").unwrap(), "h:9000");
        assert_eq!(authority_of("[::1]:8123").unwrap(), "[::1]:8123");
        assert!(
            authority_of("ftp://h")
                .unwrap_err()
                .contains("only http and https")
        );
        assert!(authority_of("not a url").is_err());
    }

    #[test]
    fn grant_comes_from_url_and_allowed_hosts() {
        let (grant, problems) = Grant::from_settings(&json!({
            "url": "http://127.0.0.1:8123",
            "allowed_hosts": ["https://backup.example.com", "10.0.0.1:9000"],
        }));
        assert!(problems.is_empty(), "{problems:?}");
        assert!(grant.allows("127.0.0.1:8123"));
        assert!(grant.allows("backup.example.com:443"));
        assert!(grant.allows("10.0.0.1:9000"));
        assert!(!grant.allows("127.0.0.1:8124"));
        assert!(!grant.allows("evil.example.com:443"));

        let (grant, problems) = Grant::from_settings(&json!({"url": 5, "allowed_hosts": "x"}));
        assert_eq!(grant, Grant::default());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            Grant::from_settings(&json!({}))
                .0
                .authorities()
                .next()
                .is_none()
        );
    }
}
