//! Egress by host: the destinations a server in its own network namespace may reach through
//! mcpproxy's egress proxy (`"network": {"allow": ["api.github.com:443", "*.slack.com:443",
//! "127.0.0.1:5432", "10.0.0.0/8:443"]}`), and the rule that keeps an allowed *name* from
//! reaching this machine or its private network (DNS rebinding): a name's address is used
//! only when it is public, or when the address itself is allowed.
//!
//! This module only decides; the proxy that listens, resolves and connects lives in mcpproxy.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where, inside the server's network namespace, the egress proxy listens. The namespace is
/// the server's own and empty, so the port is always free when the sandbox binds it.
pub const PROXY_ADDRESS: &str = "127.0.0.1:3128";
/// [`PROXY_ADDRESS`]'s port.
pub const PROXY_PORT: u16 = 3128;

/// The longest host name a rule or a request may carry (DNS's limit).
const MAX_HOST: usize = 253;

/// One allowed destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EgressRule {
    /// One host name (lower case, no trailing dot) and port.
    Host { host: String, port: u16 },
    /// Every name under a domain (`*.slack.com` matches `a.slack.com` and `a.b.slack.com`,
    /// not `slack.com`), and port. `suffix` is `slack.com`.
    Subdomains { suffix: String, port: u16 },
    /// An address, or a network of addresses, and port.
    Network { network: IpNetwork, port: u16 },
}

impl EgressRule {
    /// Parses `host:port`, `*.domain:port`, `1.2.3.4:port`, `[::1]:port`, `10.0.0.0/8:port`
    /// or `[fd00::/8]:port`. The error says what is wrong and what a rule looks like.
    pub fn parse(text: &str) -> Result<Self, String> {
        const SHAPE: &str = "a rule is HOST:PORT (\"api.github.com:443\"), *.DOMAIN:PORT (\"*.slack.com:443\"), an address (\"127.0.0.1:5432\", \"[::1]:8080\") or a network (\"10.0.0.0/8:443\") and a port";
        let text = text.trim();
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("'{text}' opens '[' without closing it: {SHAPE}"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| format!("'{text}' has no port: {SHAPE}"))?;
            (inside, port)
        } else {
            let (host, port) = text
                .rsplit_once(':')
                .ok_or_else(|| format!("'{text}' has no port: {SHAPE}"))?;
            if host.contains(':') {
                return Err(format!(
                    "'{text}': an IPv6 address goes in brackets (\"[::1]:443\")"
                ));
            }
            (host, port)
        };
        let port: u16 = match port.parse() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(format!(
                    "'{text}': '{port}' is not a port (1 to 65535; every rule names one, there is no \"any port\")"
                ));
            }
        };
        if host.is_empty() {
            return Err(format!("'{text}' has no host: {SHAPE}"));
        }
        if host.contains('/') {
            let network = IpNetwork::parse(host).map_err(|why| format!("'{text}': {why}"))?;
            return Ok(Self::Network { network, port });
        }
        if let Ok(address) = host.parse::<IpAddr>() {
            return Ok(Self::Network {
                network: IpNetwork::single(address),
                port,
            });
        }
        if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = host_name(suffix).map_err(|why| format!("'{text}': {why}"))?;
            if !suffix.contains('.') {
                return Err(format!(
                    "'{text}' allows every name under a top-level domain: name a domain you trust (\"*.example.com:443\")"
                ));
            }
            return Ok(Self::Subdomains { suffix, port });
        }
        let host = host_name(host).map_err(|why| format!("'{text}': {why}"))?;
        Ok(Self::Host { host, port })
    }

    /// The port the rule allows.
    pub fn port(&self) -> u16 {
        match self {
            Self::Host { port, .. }
            | Self::Subdomains { port, .. }
            | Self::Network { port, .. } => *port,
        }
    }
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host { host, port } => write!(f, "{host}:{port}"),
            Self::Subdomains { suffix, port } => write!(f, "*.{suffix}:{port}"),
            Self::Network { network, port } => match network.address {
                IpAddr::V6(_) => write!(f, "[{network}]:{port}"),
                IpAddr::V4(_) => write!(f, "{network}:{port}"),
            },
        }
    }
}

/// A host name checked and put in the form rules compare: lower case, no trailing dot,
/// letters, digits, `-`, `_` and dots only, no empty label, at most 253 bytes.
pub fn host_name(host: &str) -> Result<String, String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > MAX_HOST {
        return Err("a host name has 1 to 253 characters".to_owned());
    }
    if host
        .split('.')
        .any(|label| label.is_empty() || label.len() > 63)
    {
        return Err(format!(
            "'{}' is not a host name (a label is empty or longer than 63 characters)",
            host.escape_default()
        ));
    }
    if let Some(bad) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "'{}' is not a host name: '{}' is not allowed in one (write an internationalised name in its xn-- form)",
            host.escape_default(),
            bad.escape_default()
        ));
    }
    Ok(host.to_ascii_lowercase())
}

/// An address and a prefix length (`10.0.0.0/8`; a single address is `/32` or `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNetwork {
    address: IpAddr,
    prefix: u8,
}

impl IpNetwork {
    fn single(address: IpAddr) -> Self {
        let prefix = if address.is_ipv4() { 32 } else { 128 };
        Self { address, prefix }
    }

    fn parse(text: &str) -> Result<Self, String> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not a network"))?;
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("'{address}' is not an IP address"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("'/{prefix}' is not a prefix length (0 to {max})"))?;
        if prefix == 0 {
            return Err(
                "a /0 network is every address: use \"network\": \"all\" if that is what you mean"
                    .to_owned(),
            );
        }
        let network = Self { address, prefix };
        if network.masked() != address {
            return Err(format!(
                "'{text}' has bits set past its prefix: write {}/{prefix}",
                network.masked()
            ));
        }
        Ok(network)
    }

    fn masked(&self) -> IpAddr {
        match self.address {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }

    /// Whether `address` lies in the network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        let candidate = Self {
            address,
            prefix: self.prefix,
        };
        address.is_ipv4() == self.address.is_ipv4() && candidate.masked() == self.address
    }
}

impl fmt::Display for IpNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let single = (self.address.is_ipv4() && self.prefix == 32) || self.prefix == 128;
        if single {
            write!(f, "{}", self.address)
        } else {
            write!(f, "{}/{}", self.address, self.prefix)
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) as the IPv4 address it is.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `address` is this machine, its link or a private network: what an allowed *name*
/// may not resolve to unless the address itself is allowed. Loopback, unspecified,
/// link-local, private (RFC 1918, unique local), carrier-grade NAT, benchmarking,
/// multicast and broadcast, and the IPv6 forms that embed such an IPv4 address.
pub fn is_internal(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(a) => {
            let [first, second, ..] = a.octets();
            a.is_loopback()
                || a.is_unspecified()
                || a.is_private()
                || a.is_link_local()
                || a.is_multicast()
                || a.is_broadcast()
                || first == 0
                || (first == 100 && (64..128).contains(&second)) // carrier-grade NAT
                || (first == 198 && (second == 18 || second == 19)) // benchmarking
                || first >= 240 // reserved
        }
        IpAddr::V6(a) => {
            let segments = a.segments();
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (segments[0] & 0xfe00) == 0xfc00 // unique local
                || (segments[0] & 0xffc0) == 0xfe80 // link-local
                || (segments[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                // NAT64 and 6to4 embed an IPv4 address: judge that one.
                || (segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
                    && is_internal(IpAddr::V4(Ipv4Addr::new(
                        (segments[6] >> 8) as u8,
                        segments[6] as u8,
                        (segments[7] >> 8) as u8,
                        segments[7] as u8,
                    ))))
                || (segments[0] == 0x2002
                    && is_internal(IpAddr::V4(Ipv4Addr::new(
                        (segments[1] >> 8) as u8,
                        segments[1] as u8,
                        (segments[2] >> 8) as u8,
                        segments[2] as u8,
                    ))))
        }
    }
}

/// A server's allowed destinations.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EgressRules(Vec<EgressRule>);

/// Whether a destination may be reached, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Resolve the name and connect to the first address [`EgressRules::address_allowed`]
    /// accepts.
    ResolveName,
    /// Connect to this address.
    ConnectAddress(IpAddr),
    /// Refused, with why (for the server's error and the record).
    Refused(String),
}

impl EgressRules {
    pub fn new(rules: Vec<EgressRule>) -> Self {
        let mut unique: Vec<EgressRule> = Vec::with_capacity(rules.len());
        for rule in rules {
            if !unique.contains(&rule) {
                unique.push(rule);
            }
        }
        Self(unique)
    }

    pub fn rules(&self) -> &[EgressRule] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `rule` unless it is there already.
    pub fn push(&mut self, rule: EgressRule) {
        if !self.0.contains(&rule) {
            self.0.push(rule);
        }
    }

    /// What to do with a request for `host` (a name or an address literal, as the server
    /// sent it) and `port`.
    pub fn decide(&self, host: &str, port: u16) -> Decision {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(address) = bare.parse::<IpAddr>() {
            return if self.address_listed(address, port) {
                Decision::ConnectAddress(address)
            } else {
                Decision::Refused(format!(
                    "{} is not in the server's egress allow-list",
                    destination(bare, port)
                ))
            };
        }
        let name = match host_name(bare) {
            Ok(name) => name,
            Err(why) => return Decision::Refused(why),
        };
        let allowed = self.0.iter().any(|rule| match rule {
            EgressRule::Host { host, port: p } => *p == port && *host == name,
            EgressRule::Subdomains { suffix, port: p } => {
                *p == port
                    && name.len() > suffix.len() + 1
                    && name.ends_with(suffix.as_str())
                    && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
            }
            EgressRule::Network { .. } => false,
        });
        if allowed {
            Decision::ResolveName
        } else {
            Decision::Refused(format!(
                "{name}:{port} is not in the server's egress allow-list"
            ))
        }
    }

    /// Whether an allowed name may connect to `address`: a public address, or one the
    /// rules list themselves (with this port).
    pub fn address_allowed(&self, address: IpAddr, port: u16) -> bool {
        !is_internal(address) || self.address_listed(address, port)
    }

    fn address_listed(&self, address: IpAddr, port: u16) -> bool {
        self.0.iter().any(|rule| match rule {
            EgressRule::Network { network, port: p } => *p == port && network.contains(address),
            _ => false,
        })
    }
}

impl fmt::Display for EgressRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rule) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rule}")?;
        }
        Ok(())
    }
}

/// `host:port`, with an IPv6 address in brackets.
pub fn destination(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> EgressRules {
        EgressRules::new(list.iter().map(|r| EgressRule::parse(r).unwrap()).collect())
    }

    #[test]
    fn rules_parse_and_print_back() {
        for text in [
            "api.github.com:443",
            "*.slack.com:443",
            "127.0.0.1:5432",
            "[::1]:8080",
            "10.0.0.0/8:443",
            "[fd00::/8]:53",
        ] {
            assert_eq!(EgressRule::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            EgressRule::parse("API.GitHub.com.:443")
                .unwrap()
                .to_string(),
            "api.github.com:443"
        );
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, says) in [
            ("api.github.com", "has no port"),
            ("api.github.com:0", "not a port"),
            ("api.github.com:99999", "not a port"),
            ("api.github.com:*", "not a port"),
            (":443", "has no host"),
            ("*.com:443", "top-level domain"),
            ("*:443", "not a host name"),
            ("::1:443", "in brackets"),
            ("[::1:443", "without closing"),
            ("10.0.0.1/8:443", "bits set past its prefix"),
            ("10.0.0.0/33:443", "prefix length"),
            ("0.0.0.0/0:443", "every address"),
            ("exa mple.com:443", "not a host name"),
            ("a..b:443", "label is empty"),
            ("\u{202e}evil.com:443", "not a host name"),
        ] {
            let error = EgressRule::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn names_match_exactly_or_under_a_suffix_and_only_on_their_port() {
        let rules = rules(&["api.github.com:443", "*.slack.com:443"]);
        assert_eq!(rules.decide("api.github.com", 443), Decision::ResolveName);
        assert_eq!(rules.decide("API.GITHUB.COM.", 443), Decision::ResolveName);
        assert_eq!(rules.decide("files.slack.com", 443), Decision::ResolveName);
        assert_eq!(rules.decide("a.b.slack.com", 443), Decision::ResolveName);
        for (host, port) in [
            ("api.github.com", 80),
            ("github.com", 443),
            ("slack.com", 443),
            ("evilslack.com", 443),
            ("slack.com.evil.org", 443),
            ("api.github.com.evil.org", 443),
        ] {
            assert!(
                matches!(rules.decide(host, port), Decision::Refused(_)),
                "{host}:{port}"
            );
        }
    }

    #[test]
    fn address_literals_need_an_address_rule() {
        let rules = rules(&[
            "127.0.0.1:5432",
            "10.0.0.0/8:443",
            "[::1]:8080",
            "db.lan:5432",
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            rules.decide("127.0.0.1", 5432),
            Decision::ConnectAddress(ip("127.0.0.1"))
        );
        assert_eq!(
            rules.decide("10.9.8.7", 443),
            Decision::ConnectAddress(ip("10.9.8.7"))
        );
        assert_eq!(
            rules.decide("[::1]", 8080),
            Decision::ConnectAddress(ip("::1"))
        );
        assert_eq!(
            rules.decide("::ffff:127.0.0.1", 5432),
            Decision::ConnectAddress(ip("::ffff:127.0.0.1"))
        );
        for (host, port) in [("127.0.0.1", 5433), ("127.0.0.2", 5432), ("11.0.0.1", 443)] {
            assert!(
                matches!(rules.decide(host, port), Decision::Refused(_)),
                "{host}:{port}"
            );
        }
    }

    #[test]
    fn an_allowed_name_reaches_only_public_addresses_or_listed_ones() {
        let rules = rules(&["db.lan:5432", "127.0.0.1:5432", "api.example.com:443"]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(rules.address_allowed(ip("93.184.216.34"), 443));
        assert!(rules.address_allowed(ip("127.0.0.1"), 5432));
        for internal in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.1.1.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd12::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
        ] {
            assert!(is_internal(ip(internal)), "{internal}");
            assert!(!rules.address_allowed(ip(internal), 443), "{internal}");
        }
        for public in ["93.184.216.34", "2606:2800:220:1::1", "64:ff9b::5db8:d822"] {
            assert!(!is_internal(ip(public)), "{public}");
        }
    }

    #[test]
    fn hostile_hosts_are_refused_not_matched() {
        let rules = rules(&["*.example.com:443"]);
        for host in [
            "",
            "a.example.com\0.evil",
            "a.example.com/.evil",
            "a.example.com:443@evil",
            &"a.".repeat(200),
            "a.example.com\r\nHost: evil",
        ] {
            assert!(
                matches!(rules.decide(host, 443), Decision::Refused(_)),
                "{host:?}"
            );
        }
    }
}
