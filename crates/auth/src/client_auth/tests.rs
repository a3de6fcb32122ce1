//! The challenge and the metadata document, from a config and a request's headers.

use http::{HeaderMap, HeaderValue};

use super::{challenge, document, resource_url};
use mcpproxy_config::AuthConfig;

fn auth(resource: Option<&str>) -> AuthConfig {
    AuthConfig {
        issuer: "https://login.example.com".into(),
        audience: None,
        resource: resource.map(str::to_owned),
        subject_claim: "sub".into(),
        groups_claim: "groups".into(),
    }
}

fn host(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::HOST, HeaderValue::from_str(value).unwrap());
    headers
}

#[test]
fn the_resource_is_the_configured_url_or_this_host() {
    assert_eq!(
        resource_url(&auth(None), &host("127.0.0.1:8080")),
        "http://127.0.0.1:8080/mcp"
    );
    assert_eq!(
        resource_url(
            &auth(Some("https://mcp.example.com/mcp")),
            &host("10.0.0.1:80")
        ),
        "https://mcp.example.com/mcp"
    );
    // A Host that is no host name does not reach the challenge.
    assert_eq!(
        resource_url(&auth(None), &host("evil\"x")),
        "http://127.0.0.1/mcp"
    );
}

#[test]
fn the_challenge_names_the_metadata_and_an_invalid_token() {
    let headers = host("localhost:9");
    assert_eq!(
        challenge(&auth(None), &headers, false),
        "Bearer resource_metadata=\"http://localhost:9/.well-known/oauth-protected-resource/mcp\""
    );
    assert_eq!(
        challenge(&auth(Some("https://mcp.example.com/mcp")), &headers, true),
        "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", \
         error=\"invalid_token\""
    );
}

#[test]
fn the_document_names_the_issuer_and_the_resource() {
    let document = document(&auth(None), &host("127.0.0.1:1"));
    assert_eq!(document["resource"], "http://127.0.0.1:1/mcp");
    assert_eq!(
        document["authorization_servers"],
        serde_json::json!(["https://login.example.com"])
    );
}
