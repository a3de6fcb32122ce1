//! The process's one crypto library: `ring`, for TLS (rustls: reqwest's clients, the MCP
//! library's HTTP transports and OAuth, the OTLP exporter) and for the JWTs of clients that
//! log in (jsonwebtoken).
//!
//! Neither library picks `ring` by itself: reqwest is built without a provider of its own
//! (`rustls-no-provider`; its default, aws-lc-rs, was a second crypto library of ~2 MB in
//! the binary, docs/benchmarks.md) and panics when it builds a client before one is
//! installed, and jsonwebtoken has no `ring` backend (module `jwt` is one). So every path
//! that builds an HTTP client or checks a token calls [`install_crypto_providers`] first;
//! the binary calls it at the top of `main`.

mod jwt;

/// Makes `ring` the process's provider for rustls and for jsonwebtoken, once. Cheap after
/// the first call. A provider installed earlier by an embedding program is kept (both
/// libraries refuse to replace one, and that refusal is ignored).
pub fn install_crypto_providers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = jwt::PROVIDER.install_default();
    });
}

#[cfg(test)]
mod tests;
