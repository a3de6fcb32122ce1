//! The npm tools end-to-end tests run with Node 22: the MCP conformance suite
//! (`tests/conformance`, which also ships the Node 22 binary) and the OAuth servers
//! (`tests/oauth`: oidc-provider and the TypeScript SDK). Each check says how to install a
//! missing one and skips its test, unless the environment variable CI sets for it requires
//! it, in which case a missing tool fails the test.

use std::path::{Path, PathBuf};

/// `tests/conformance`: the suite and the Node 22 it needs.
pub(crate) fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance")
}

/// `tests/oauth`: the OAuth test servers and the scripted browser.
pub(crate) fn oauth_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/oauth")
}

/// The Node 22 of `tests/conformance`.
pub(crate) fn node22() -> PathBuf {
    conformance_dir().join("node_modules/.bin/node")
}

/// Whether the conformance suite and its Node 22 are installed; with
/// `MCPPROXY_REQUIRE_NODE22` set (CI) their absence is a failure.
pub(crate) fn conformance_installed() -> bool {
    let cli =
        conformance_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if node22().exists() && cli.exists() {
        return true;
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_NODE22").is_none(),
        "{} is missing: CI must run `npm ci --prefix tests/conformance`",
        cli.display()
    );
    eprintln!(
        "SKIPPED: the MCP conformance suite is not installed; run `npm ci --prefix tests/conformance` to run this test"
    );
    false
}

/// Node 22 when it and the OAuth test servers are installed; with `MCPPROXY_REQUIRE_OAUTH`
/// set (CI) their absence is a failure.
pub(crate) fn oauth_node() -> Option<PathBuf> {
    if node22().exists() && oauth_dir().join("node_modules/oidc-provider").exists() {
        return Some(node22());
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_OAUTH").is_none(),
        "the OAuth test servers are not installed: CI must run `npm ci --prefix tests/conformance` and `npm ci --prefix tests/oauth`"
    );
    eprintln!(
        "SKIPPED: run `npm ci --prefix tests/conformance` and `npm ci --prefix tests/oauth` to run this test"
    );
    None
}
