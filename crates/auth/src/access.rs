//! Who may talk to the listener: the loopback rule for `Host` and `Origin` headers
//! (DNS-rebinding protection, as the MCP spec asks), shared by `/mcp` and `/api/v1`.
//!
//! A request passes when its `Host` is a loopback name (`localhost`, `127.0.0.1`, `[::1]`,
//! with or without a numeric port) or one of the configured `allowed_hosts`, and its
//! `Origin`, if any, is an http(s) origin on such a host or one of `allowed_origins`
//! (`scheme://host:*` allows any port).
//!
//! Also the bearer token of `/mcp` ([`check_bearer`]) and the constant-time comparison of
//! secrets ([`secret_matches`]) the API key shares. Depends on nothing else in the crate.

use http::HeaderMap;
use subtle::ConstantTimeEq;

/// The loopback host names, as `Host` carries them.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// What the operator allows besides loopback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Extra `Host` values besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin` values besides loopback origins.
    pub allowed_origins: Vec<String>,
}

impl Access {
    /// `Ok` when the request's `Host` and `Origin` headers are allowed; otherwise what is
    /// wrong and how to allow it.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        for name in ["host", "origin"] {
            if headers.get_all(name).iter().count() > 1 {
                return Err(format!(
                    "the request has more than one {name} header; send exactly one"
                ));
            }
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(host) = header("host")
            && !host_allowed(host, &self.allowed_hosts)
        {
            return Err(format!(
                "Host '{host}' is not allowed; add it to allowed_hosts in mcp_config.json"
            ));
        }
        if let Some(origin) = header("origin")
            && !origin_allowed(origin, &self.allowed_origins)
        {
            return Err(format!(
                "Origin '{origin}' is not allowed; add it to allowed_origins in mcp_config.json"
            ));
        }
        Ok(())
    }
}

/// Whether a `Host` value is a loopback name (any numeric port) or listed in `extra`.
pub fn host_allowed(host: &str, extra: &[String]) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    };
    LOOPBACK_HOSTS.contains(&name)
        || extra
            .iter()
            .any(|allowed| allowed == host || allowed == name)
}

/// Whether an `Origin` is http(s) on a loopback host, or listed in `extra` (an entry
/// ending in `:*` allows any port).
pub fn origin_allowed(origin: &str, extra: &[String]) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    rest.is_some_and(|authority| host_allowed(authority, &[]))
        || extra.iter().any(|allowed| {
            allowed == origin
                || allowed.strip_suffix(":*").is_some_and(|prefix| {
                    origin == prefix || origin.starts_with(&format!("{prefix}:"))
                })
        })
}

/// Constant-time equality of two secrets (the time taken does not tell how much matched).
pub fn secret_matches(expected: &str, given: &str) -> bool {
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

/// `Ok` when the request carries `Authorization: Bearer <expected>` (exactly one such
/// header); otherwise what is wrong and how to fix it.
pub fn check_bearer(expected: &str, headers: &HeaderMap) -> Result<(), String> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(
            "this endpoint needs a bearer token: send `Authorization: Bearer <token>` with the \
             token set in http.auth_token (or MCPPROXY_AUTH_TOKEN) where mcpproxy runs"
                .into(),
        );
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .ok_or("the Authorization header must be `Bearer <token>`")?;
    if secret_matches(expected, token) {
        Ok(())
    } else {
        Err("the bearer token is wrong; use the http.auth_token of this mcpproxy".into())
    }
}

/// The loopback origins as `scheme://host:*` patterns (any port), the form the MCP
/// server's own origin check takes.
pub fn loopback_origin_patterns() -> Vec<String> {
    ["http", "https"]
        .into_iter()
        .flat_map(|scheme| {
            LOOPBACK_HOSTS
                .into_iter()
                .map(move |host| format!("{scheme}://{host}:*"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins_pass_others_need_configuring() {
        assert!(host_allowed("127.0.0.1:8080", &[]));
        assert!(host_allowed("localhost", &[]));
        assert!(host_allowed("[::1]:8080", &[]));
        assert!(!host_allowed("evil.example", &[]));
        assert!(!host_allowed("evil.example:8080", &[]));
        assert!(host_allowed("proxy.lan:8080", &["proxy.lan:8080".into()]));
        assert!(origin_allowed("http://localhost:3000", &[]));
        assert!(!origin_allowed("http://evil.example", &[]));
        assert!(!origin_allowed("null", &[]));
        assert!(origin_allowed(
            "https://app.example.com",
            &["https://app.example.com".into()]
        ));
        assert!(origin_allowed(
            "https://app.example.com:444",
            &["https://app.example.com:*".into()]
        ));
    }

    #[test]
    fn lookalike_hosts_are_refused() {
        for host in [
            "LOCALHOST",
            "evil.com@localhost",
            "localhost:abc",
            "localhost.evil",
        ] {
            assert!(!host_allowed(host, &[]), "{host}");
        }
    }

    #[test]
    fn check_names_the_header_and_the_fix() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "localhost:8080".parse().unwrap());
        assert_eq!(Access::default().check(&headers), Ok(()));
        headers.insert("origin", "http://evil.example".parse().unwrap());
        assert_eq!(
            Access::default().check(&headers),
            Err("Origin 'http://evil.example' is not allowed; add it to allowed_origins in mcp_config.json".into())
        );
    }

    #[test]
    fn duplicate_host_or_origin_headers_are_refused() {
        let mut headers = HeaderMap::new();
        headers.append("host", "localhost".parse().unwrap());
        headers.append("host", "evil.example".parse().unwrap());
        let err = Access::default().check(&headers).unwrap_err();
        assert!(err.contains("more than one host header"), "{err}");
    }

    #[test]
    fn bearer_token_must_match_exactly_once() {
        let token = "0123456789abcdef0123";
        let mut headers = HeaderMap::new();
        assert!(
            check_bearer(token, &headers)
                .unwrap_err()
                .contains("needs a bearer token")
        );
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        assert_eq!(check_bearer(token, &headers), Ok(()));
        headers.insert("authorization", format!("bearer {token}").parse().unwrap());
        assert_eq!(check_bearer(token, &headers), Ok(()));
        headers.insert(
            "authorization",
            "Bearer 0123456789abcdef0124".parse().unwrap(),
        );
        assert!(check_bearer(token, &headers).unwrap_err().contains("wrong"));
        headers.insert("authorization", format!("Basic {token}").parse().unwrap());
        assert!(
            check_bearer(token, &headers)
                .unwrap_err()
                .contains("Bearer <token>")
        );
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        headers.append("authorization", "Bearer other".parse().unwrap());
        assert!(check_bearer(token, &headers).is_err());
    }

    #[test]
    fn origin_patterns_cover_every_loopback_origin() {
        let patterns = loopback_origin_patterns();
        assert_eq!(patterns.len(), 6);
        assert!(patterns.contains(&"https://[::1]:*".to_owned()));
    }
}
