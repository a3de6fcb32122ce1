//! Plain words for why an HTTP upstream could not be reached.
//!
//! rmcp reports a failed connection as a chain of wrapped errors (its transport, reqwest,
//! hyper, an I/O error, rustls), and its own text names Rust types. This module walks the
//! chain to the cause that says what happened — refused, unresolvable, timed out, a TLS
//! failure — and turns it into a sentence that names the URL and what to check.

use std::error::Error;
use std::io;

use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The causes of `err`, outermost first. An `io::Error` wrapping another error is followed
/// into it (`io::Error::source` skips the wrapped error itself).
fn causes<'a>(err: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    let mut chain = Vec::new();
    let mut next = Some(err);
    while let Some(cause) = next {
        if chain.len() == 32 {
            break;
        }
        chain.push(cause);
        next = match cause.downcast_ref::<io::Error>() {
            Some(io_err) => match io_err.get_ref() {
                Some(inner) => Some(inner as &(dyn Error + 'static)),
                None => cause.source(),
            },
            None => cause.source(),
        };
    }
    chain
}

/// What the streamable-HTTP client reports: rmcp's error around reqwest's.
type ClientError = StreamableHttpError<reqwest::Error>;

/// A sentence for why initializing the upstream at `url` failed, from the error its
/// transport reported.
pub(crate) fn describe_http_failure(url: &str, err: &(dyn Error + 'static)) -> String {
    let Some(client) = err.downcast_ref::<ClientError>() else {
        return describe_cause(url, err)
            .unwrap_or_else(|| format!("MCP initialize with {url} failed: {err}"));
    };
    match client {
        StreamableHttpError::Client(request) => describe_cause(url, request).unwrap_or_else(|| {
            let innermost = causes(request).last().map(ToString::to_string);
            format!(
                "could not reach {url}: {}",
                innermost.unwrap_or_else(|| request.to_string())
            )
        }),
        StreamableHttpError::UnexpectedContentType(content_type) => format!(
            "{url} answered, but not as an MCP server (content type {}); is this the server's \
             MCP endpoint (often ending in /mcp)?",
            content_type.as_deref().unwrap_or("none")
        ),
        StreamableHttpError::HttpStatus(status) => format!(
            "{url} answered HTTP {}; check the server's log",
            status.status
        ),
        other => format!("MCP initialize with {url} failed: {other}"),
    }
}

/// A sentence for the cause in the chain of `err` a user can act on, if there is one.
fn describe_cause(url: &str, err: &(dyn Error + 'static)) -> Option<String> {
    let chain = causes(err);
    // The innermost recognisable cause wins: it is the most specific.
    for cause in chain.iter().rev() {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(match tls {
                rustls::Error::InvalidCertificate(why) => format!(
                    "the TLS certificate of {url} was not accepted ({why:?}); it must be valid \
                     for that host and signed by an authority this machine trusts"
                ),
                other => format!(
                    "the TLS handshake with {url} failed ({other}); does the server speak \
                     https on that port?"
                ),
            });
        }
        if let Some(io_err) = cause.downcast_ref::<io::Error>() {
            // A wrapper (`Other`, or a message like the resolver's) matches no kind below;
            // its text is the wrapped error's.
            let text = io_err.to_string();
            if text.starts_with("failed to lookup address information") {
                return Some(format!(
                    "the host of {url} could not be resolved ({text}); check the host name"
                ));
            }
            match io_err.kind() {
                io::ErrorKind::ConnectionRefused => {
                    return Some(format!(
                        "{url} refused the connection; is the server running and listening \
                         on that port?"
                    ));
                }
                io::ErrorKind::TimedOut => {
                    return Some(format!(
                        "connecting to {url} timed out; is the host reachable?"
                    ));
                }
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                    return Some(format!(
                        "{url} closed the connection ({text}); check the server's log"
                    ));
                }
                io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
                    return Some(format!(
                        "{url} is unreachable from this machine ({text}); check the address \
                         and network"
                    ));
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a source, as reqwest and hyper wrap their causes.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn Error + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    fn wrap(inner: impl Error + Send + Sync + 'static) -> Wrapped {
        Wrapped(
            "error sending request",
            Box::new(Wrapped("client error (Connect)", Box::new(inner))),
        )
    }

    const URL: &str = "https://mcp.example.com/mcp";

    #[test]
    fn a_refused_connection_says_so() {
        let err = wrap(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(
            describe_cause(URL, &err).as_deref(),
            Some(
                "https://mcp.example.com/mcp refused the connection; is the server running and \
                 listening on that port?"
            )
        );
    }

    #[test]
    fn a_tls_failure_inside_nested_io_errors_is_found() {
        // hyper-util: io::Error(Other, io::Error(InvalidData, rustls::Error)).
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        );
        let err = wrap(io::Error::other(tls));
        let text = describe_cause(URL, &err).unwrap_or_default();
        assert!(
            text.starts_with("the TLS handshake with https://mcp.example.com/mcp failed"),
            "{text}"
        );
        assert!(text.contains("https on that port"), "{text}");
    }

    #[test]
    fn a_rejected_certificate_says_what_to_check() {
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let text = describe_cause(URL, &wrap(tls)).unwrap_or_default();
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains("signed by an authority"), "{text}");
    }

    #[test]
    fn an_unresolvable_host_and_a_timeout_are_named() {
        let dns =
            io::Error::other("failed to lookup address information: Name or service not known");
        // `io::Error::other` wraps a message: the walk goes into it and reads its text.
        let text = describe_cause(URL, &wrap(dns)).unwrap_or_default();
        assert!(text.starts_with("the host of"), "{text}");
        assert!(text.contains("Name or service not known"), "{text}");
        let slow = wrap(io::Error::from(io::ErrorKind::TimedOut));
        assert!(
            describe_cause(URL, &slow)
                .unwrap_or_default()
                .contains("timed out")
        );
    }

    #[test]
    fn an_unknown_cause_leaves_the_generic_text() {
        let err = wrap(io::Error::from(io::ErrorKind::InvalidInput));
        assert_eq!(describe_cause(URL, &err), None);
        let plain = Wrapped(
            "unexpected server response: 404",
            Box::new(io::Error::other("x")),
        );
        assert_eq!(describe_cause(URL, &plain), None);
    }
}
