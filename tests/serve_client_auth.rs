//! Clients that log in: `mcpproxy serve` with `auth` is an OAuth protected resource of a real
//! authorization server (oidc-provider, `tests/oauth/issuer.mjs`, run with the Node 22 of
//! `tests/conformance`) that issues JWT access tokens to two clients, `alice` and `bob`, by
//! the client_credentials grant. Without a token `/mcp` answers 401 with the challenge that
//! names the protected resource metadata, which is served; tokens for another audience,
//! expired or tampered with are refused; each client's good token works and its calls'
//! records name it (REST and `mcpproxy activity show`); `alg: none` and HS256 are refused,
//! HS256/384/512 tokens keyed with the issuer's public key in any form too, and so are
//! tokens naming another issuer and tokens whose `nbf` is past the leeway;
//! the static `http.auth_token` still passes, without an identity; a key rotation at the
//! issuer is followed; with the issuer gone, a token of an unknown key gets 503.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::issuer::Issuer;
use crate::support::mcp::{Proxy, call, config_with, stdio_fixture, text};
use crate::support::poll::until;

/// `http.auth_token`: passes without an identity.
const STATIC_TOKEN: &str = "a-static-token-0123456789abcdef";

/// `initialize` to `/mcp` with `token` (if any): the status and `WWW-Authenticate`.
async fn initialize(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "login-test", "version": "1"}}
            })
            .to_string(),
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("reach /mcp");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.status().as_u16(), challenge)
}

/// Calls the fixture's `get_status` as the holder of `token`.
async fn call_as(url: &str, token: &str) -> Result<String, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    let client = ().serve(transport).await.map_err(|e| e.to_string())?;
    let result = call(&client, "call_tool_read", json!({"name": "fx:get_status"})).await?;
    let _ = client.cancel().await;
    Ok(text(&result))
}

/// `token` with its payload's `sub` changed and the signature kept.
fn tampered(token: &str) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let mut payload: Value = serde_json::from_slice(&b64_decode(parts[1])).expect("JSON payload");
    payload["sub"] = json!("root");
    format!(
        "{}.{}.{}",
        parts[0],
        b64_encode(payload.to_string().as_bytes()),
        parts[2]
    )
}

/// `token`'s payload under another header and signature.
fn with_header(token: &str, header: &Value, signature: &str) -> String {
    let payload = token.split('.').nth(1).expect("payload");
    format!(
        "{}.{payload}.{signature}",
        b64_encode(header.to_string().as_bytes())
    )
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding (a JWT's segments).
fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(B64[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

fn b64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut bits, mut n) = (0u32, 0u32);
    for c in text.bytes() {
        let v = B64
            .iter()
            .position(|b| *b == c)
            .expect("a base64url character");
        n = n << 6 | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits & 0xff) as u8);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_log_in_with_access_tokens_of_a_real_authorization_server() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["auth"] = json!({"issuer": issuer.url});
    // The static token of single-user setups keeps working beside the logins.
    config["http"] = json!({"auth_token": STATIC_TOKEN});
    let proxy = Proxy::builder(&config).start();
    let resource = proxy.url.clone();
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", proxy.base());

    // No token: 401, and the challenge names the metadata, which names the issuer.
    let (status, challenge) = initialize(&resource, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    for url in [
        metadata_url.clone(),
        format!("{}/.well-known/oauth-protected-resource", proxy.base()),
    ] {
        let document: Value = reqwest::get(&url)
            .await
            .expect("GET the metadata")
            .json()
            .await
            .expect("JSON metadata");
        assert_eq!(document["resource"], resource.as_str(), "{document}");
        assert_eq!(document["authorization_servers"], json!([issuer.url]));
    }
    let direct = format!("{}/mcp/servers/fx", proxy.base());
    assert_eq!(initialize(&direct, None).await.0, 401);

    // Refused: another audience, expired, tampered with, not a JWT.
    let invalid = format!("{}, error=\"invalid_token\"", challenge);
    let other = issuer.token("alice", "http://127.0.0.1:9/other").await;
    let expired = issuer
        .control(
            reqwest::Method::GET,
            &format!("/test/expired?client=alice&aud={resource}"),
        )
        .await["access_token"]
        .as_str()
        .expect("token")
        .to_owned();
    let alice = issuer.token("alice", &resource).await;
    for (what, token) in [
        ("another audience", other),
        ("expired", expired),
        ("tampered", tampered(&alice)),
        (
            "alg none",
            with_header(&alice, &json!({"alg": "none", "typ": "at+jwt"}), ""),
        ),
        (
            "HS256 signed",
            with_header(
                &alice,
                &json!({"alg": "HS256", "typ": "at+jwt"}),
                "c2lnbmVk",
            ),
        ),
        ("not a JWT", "not-a-token-at-all".to_owned()),
    ] {
        let (status, challenge) = initialize(&resource, Some(&token)).await;
        assert_eq!(status, 401, "{what}");
        assert_eq!(challenge, invalid, "{what}");
    }

    // Good tokens: each client calls, and each record names its subject and groups.
    let bob = issuer.token("bob", &resource).await;
    call_as(&resource, &alice).await.expect("alice calls");
    call_as(&resource, &bob).await.expect("bob calls");
    call_as(&resource, STATIC_TOKEN)
        .await
        .expect("the static token calls");
    let found = proxy.finished_records("tool_call", 3).await;
    assert_eq!(
        found.iter().filter(|r| r.get("identity").is_none()).count(),
        1,
        "the static token's call has no identity: {found:?}"
    );
    let by = |subject: &str| {
        found
            .iter()
            .find(|r| r["identity"]["subject"] == subject)
            .cloned()
            .unwrap_or_else(|| panic!("no record names {subject}: {found:?}"))
    };
    assert_eq!(by("alice")["identity"]["groups"], json!(["sre", "dev"]));
    assert_eq!(by("bob")["identity"]["groups"], json!(["dev"]));
    let id = by("alice")["id"].as_str().expect("id").to_owned();
    let show = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "show", &id, "--config"])
        .arg_path(&proxy.cli_config(log.path()))
        .output();
    show.assert_code(0);
    assert!(
        show.stdout()
            .contains("Identity:    alice (groups: sre, dev)"),
        "{}",
        show.stdout()
    );

    // The issuer rotates its key: a token signed with the new one is taken (the key set is
    // fetched again; at most once every few seconds, so the first tries may be refused).
    let rotated = issuer.control(reqwest::Method::POST, "/test/rotate").await;
    let kid = rotated["kid"].as_str().expect("kid").to_owned();
    let fresh = issuer.token("bob", &resource).await;
    let header: Value =
        serde_json::from_slice(&b64_decode(fresh.split('.').next().expect("header")))
            .expect("JSON header");
    assert_eq!(header["kid"], kid.as_str(), "the new key signs");
    until(
        "a token of the rotated key is accepted",
        Duration::from_secs(30),
        || async { call_as(&resource, &fresh).await.map(drop) },
    )
    .await;
    // The old key is still published, so alice's earlier token still works.
    call_as(&resource, &alice).await.expect("alice calls again");

    // The issuer goes away: a token naming a key the proxy does not hold cannot be checked,
    // and is refused with 503 (never let through).
    drop(issuer);
    let unknown = with_header(
        &alice,
        &json!({"alg": "RS256", "typ": "at+jwt", "kid": "not-published"}),
        alice.rsplit('.').next().expect("signature"),
    );
    until(
        "the issuer's absence is reported",
        Duration::from_secs(30),
        || async {
            let (status, _) = initialize(&resource, Some(&unknown)).await;
            if status == 503 {
                return Ok(());
            }
            assert_eq!(status, 401, "a token of an unknown key is refused");
            Err(format!("{status}"))
        },
    )
    .await;
    call_as(&resource, &alice)
        .await
        .expect("tokens of known keys still work while the issuer is away");
}

/// The public half of the issuer's current key in every form a verifier that took HS256
/// might use as the HMAC secret: the PEMs and DERs (SPKI and PKCS#1), the JWK and the key
/// set as served, and the modulus.
async fn public_key_forms(issuer: &Issuer) -> (String, Vec<(String, Vec<u8>)>) {
    let public = issuer.control(reqwest::Method::GET, "/test/public").await;
    let kid = public["kid"].as_str().expect("kid").to_owned();
    let text = |k: &str| {
        public[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k}"))
            .to_owned()
    };
    let metadata: Value = reqwest::get(format!("{}/.well-known/openid-configuration", issuer.url))
        .await
        .expect("the issuer's metadata")
        .json()
        .await
        .expect("JSON metadata");
    let jwks_uri = metadata["jwks_uri"].as_str().expect("jwks_uri");
    let served = reqwest::get(jwks_uri)
        .await
        .expect("the key set")
        .bytes()
        .await
        .expect("the key set's bytes")
        .to_vec();
    let key_set: Value = serde_json::from_slice(&served).expect("a JSON key set");
    let served_jwk = key_set["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["kid"] == kid.as_str()))
        .expect("the current key is published")
        .clone();
    let mut forms = vec![
        ("SPKI PEM".to_owned(), text("spki_pem").into_bytes()),
        (
            "SPKI PEM, trimmed".to_owned(),
            text("spki_pem").trim().as_bytes().to_vec(),
        ),
        ("PKCS#1 PEM".to_owned(), text("pkcs1_pem").into_bytes()),
        (
            "PKCS#1 PEM, trimmed".to_owned(),
            text("pkcs1_pem").trim().as_bytes().to_vec(),
        ),
        ("SPKI DER".to_owned(), b64_decode(&text("spki_der"))),
        ("PKCS#1 DER".to_owned(), b64_decode(&text("pkcs1_der"))),
        ("the key set as served".to_owned(), served),
        (
            "the JWK as published".to_owned(),
            served_jwk.to_string().into_bytes(),
        ),
        (
            "the public JWK".to_owned(),
            public["jwk"].to_string().into_bytes(),
        ),
        (
            "the modulus".to_owned(),
            b64_decode(public["jwk"]["n"].as_str().expect("n")),
        ),
        (
            "the modulus in base64url".to_owned(),
            public["jwk"]["n"].as_str().expect("n").as_bytes().to_vec(),
        ),
    ];
    forms.push(("the key id".to_owned(), kid.clone().into_bytes()));
    (kid, forms)
}

/// A token's claims that would pass: this issuer, this resource, not expired.
fn good_claims(issuer: &str, resource: &str) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    json!({
        "iss": issuer, "sub": "alice", "client_id": "alice", "aud": resource,
        "scope": "mcp:tools", "groups": ["sre", "dev"], "iat": now, "exp": now + 600,
    })
}

/// The "key confusion" forgery: an HMAC token (HS256/384/512) whose secret is the issuer's
/// public key, in any form a verifier might hold it, with and without the key's id, is
/// refused; so is a token of the issuer's key naming another issuer, and one whose `nbf` is
/// past the 30 s leeway; one whose `nbf` is within it is taken.
#[tokio::test(flavor = "multi_thread")]
async fn forged_hmac_tokens_other_issuers_and_future_tokens_are_refused() {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["auth"] = json!({"issuer": issuer.url});
    let proxy = Proxy::builder(&config).start();
    let resource = proxy.url.clone();
    let sign = async |query: &str| {
        issuer
            .control(
                reqwest::Method::GET,
                &format!("/test/sign?client=alice&aud={resource}{query}"),
            )
            .await["access_token"]
            .as_str()
            .expect("token")
            .to_owned()
    };

    // The control: a token signed by the issuer's key the same way is taken.
    let good = sign("").await;
    assert_eq!(initialize(&resource, Some(&good)).await.0, 200);
    call_as(&resource, &good).await.expect("a good token calls");

    let (kid, forms) = public_key_forms(&issuer).await;
    let claims = good_claims(&issuer.url, &resource);
    for algorithm in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        for (form, secret) in &forms {
            for with_kid in [true, false] {
                let mut header = Header::new(algorithm);
                header.typ = Some("at+jwt".to_owned());
                header.kid = with_kid.then(|| kid.clone());
                let forged = encode(&header, &claims, &EncodingKey::from_secret(secret))
                    .expect("sign the forgery");
                let (status, challenge) = initialize(&resource, Some(&forged)).await;
                let what = format!("{algorithm:?} keyed with {form} (kid: {with_kid})");
                assert_eq!(status, 401, "{what} was taken");
                assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
                assert!(
                    call_as(&resource, &forged).await.is_err(),
                    "{what} called a tool"
                );
            }
        }
    }

    // Signed by the issuer's own key, but naming another issuer.
    let other_issuer = sign("&iss=http://127.0.0.1:9/not-the-issuer").await;
    assert_eq!(initialize(&resource, Some(&other_issuer)).await.0, 401);
    assert!(call_as(&resource, &other_issuer).await.is_err());

    // Not valid for two more minutes: refused; valid in 10 s (within 30 s): taken.
    let later = sign("&nbf=120").await;
    assert_eq!(initialize(&resource, Some(&later)).await.0, 401);
    assert!(call_as(&resource, &later).await.is_err());
    let soon = sign("&nbf=10").await;
    assert_eq!(initialize(&resource, Some(&soon)).await.0, 200);
    call_as(&resource, &soon)
        .await
        .expect("a token valid within the leeway calls");
}
