//! The parts of a login that do not need a server: where tokens are kept and for which URL,
//! what a login asks for, and when a login is refused as a loop.

use rmcp::transport::auth::{CredentialStore as _, StoredCredentials};

use std::sync::Arc;

use super::OAuthError;
use super::challenge::{Challenge, ChallengeSlot};
use super::login::{LoginTarget, Logins, request_for};
use super::vault::{TokenVault, forget, forget_refused, has_login};
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::OAuthConfig;

fn credentials(scopes: &[&str]) -> StoredCredentials {
    let token = serde_json::from_value(serde_json::json!({
        "access_token": "at-123456789", "token_type": "bearer", "expires_in": 3600,
        "refresh_token": "rt-123456789"
    }))
    .expect("a token response");
    StoredCredentials::new(
        "client".into(),
        Some(token),
        scopes.iter().map(|s| (*s).to_owned()).collect(),
        Some(0),
    )
}

#[tokio::test]
async fn tokens_are_bound_to_the_url_they_were_issued_for_and_forgotten_on_logout() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open_file(dir.path());
    let vault = TokenVault::new(store.clone(), "gh", "https://mcp.example.com/mcp");
    vault.save(credentials(&["read"])).await.unwrap();
    assert!(has_login(&store, "gh", "https://mcp.example.com/mcp"));
    assert!(!has_login(
        &store,
        "gh",
        "https://elsewhere.example.com/mcp"
    ));
    assert!(!has_login(&store, "other", "https://mcp.example.com/mcp"));
    let elsewhere = TokenVault::new(store.clone(), "gh", "https://elsewhere.example.com/mcp");
    assert!(elsewhere.load().await.unwrap().is_none());
    // A second vault reads what the first saved; the config file never holds it.
    let again = TokenVault::new(store.clone(), "gh", "https://mcp.example.com/mcp");
    let loaded = again.load().await.unwrap().expect("stored");
    assert_eq!(loaded.granted_scopes, ["read"]);
    assert!(forget(&store, "gh").unwrap());
    assert!(!has_login(&store, "gh", "https://mcp.example.com/mcp"));
    assert!(!forget(&store, "gh").unwrap());
}

fn target<'a>(oauth: &'a OAuthConfig, challenge: Option<&'a Challenge>) -> LoginTarget<'a> {
    LoginTarget {
        server: "gh",
        binding: "https://mcp.example.com/mcp",
        url: "https://mcp.example.com/mcp",
        oauth,
        client_secret: Some("s3cret"),
        challenge,
    }
}

fn step_up(scope: &str) -> Challenge {
    Challenge::of::<std::io::Error>(
        &rmcp::transport::streamable_http_client::StreamableHttpError::InsufficientScope(
            rmcp::transport::streamable_http_client::InsufficientScopeError::new(
                format!(r#"Bearer error="insufficient_scope", scope="{scope}""#),
                Some(scope.to_owned()),
            ),
        ),
    )
    .expect("a challenge")
}

#[test]
fn a_login_asks_for_the_configured_scopes_else_the_union_on_step_up_else_the_servers_choice() {
    let none = OAuthConfig::default();
    let first = request_for(&target(&none, None), "http://127.0.0.1:1/callback", &[]);
    assert!(first.scopes.is_empty());
    assert!(
        first.use_initial_scopes,
        "the challenge, else scopes_supported"
    );
    assert_eq!(first.client_id, None, "no client: register");

    let more = step_up("files:write admin");
    let granted = vec!["files:read".to_owned(), "files:write".to_owned()];
    let step = request_for(
        &target(&none, Some(&more)),
        "http://127.0.0.1:1/callback",
        &granted,
    );
    assert_eq!(step.scopes, ["files:read", "files:write", "admin"]);

    let configured = OAuthConfig {
        client_id: Some("pre".into()),
        client_secret: Some("${secret:X}".into()),
        client_metadata_url: Some("https://example.com/c.json".into()),
        scopes: vec!["only".into()],
        ..OAuthConfig::default()
    };
    let fixed = request_for(
        &target(&configured, Some(&more)),
        "http://127.0.0.1:1/callback",
        &granted,
    );
    assert_eq!(fixed.scopes, ["only"]);
    assert_eq!(fixed.client_id.as_deref(), Some("pre"));
    assert_eq!(
        fixed.client_secret.as_deref(),
        Some("s3cret"),
        "the resolved secret"
    );
    assert_eq!(
        fixed.client_metadata_url.as_deref(),
        Some("https://example.com/c.json")
    );
}

#[tokio::test]
async fn a_server_that_keeps_asking_for_granted_scopes_is_refused_after_two_logins() {
    let logins = Logins::default();
    let none = OAuthConfig::default();
    let again = step_up("admin");
    let granted = vec!["admin".to_owned()];
    for _ in 0..2 {
        logins
            .count_step_up(&target(&none, Some(&again)), &granted)
            .await
            .expect("a repeated step-up is allowed twice");
    }
    let refused = logins
        .count_step_up(&target(&none, Some(&again)), &granted)
        .await
        .expect_err("the third is a loop");
    assert!(matches!(refused, OAuthError::StepUpLoop { logins: 3, .. }));
    assert!(refused.to_string().contains("mcpproxy upstream logout gh"));
    // A scope not granted before is a real step-up; it starts the count again.
    let new = step_up("billing");
    logins
        .count_step_up(&target(&none, Some(&new)), &granted)
        .await
        .unwrap();
    logins
        .count_step_up(&target(&none, Some(&again)), &granted)
        .await
        .unwrap();
    // So does a logout.
    logins.reset("gh").await;
    for _ in 0..2 {
        logins
            .count_step_up(&target(&none, Some(&again)), &granted)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_refused_login_is_forgotten_unless_a_new_one_replaced_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open_file(dir.path());
    let url = "https://mcp.example.com/mcp";
    let slot = Arc::new(ChallengeSlot::default());
    let vault = TokenVault::new(store.clone(), "gh", url).reporting_to(slot.clone());
    let refused = credentials(&["read"]);
    vault.save(refused.clone()).await.unwrap();

    // invalid_grant at a refresh (rmcp's hook): a login made since is kept...
    let mut replaced = credentials(&["read"]);
    replaced.token_received_at = Some(99);
    TokenVault::new(store.clone(), "gh", url)
        .save(replaced)
        .await
        .unwrap();
    vault.on_refresh_token_rejected(&refused).await.unwrap();
    assert!(has_login(&store, "gh", url), "a newer login is kept");
    let told = slot.get().expect("the slot is told");
    assert_eq!(told.refused.map(|r| r.error), Some("invalid_grant"));

    // ...the refused one is forgotten.
    let vault = TokenVault::new(store.clone(), "gh", url);
    vault.save(refused.clone()).await.unwrap();
    vault.on_refresh_token_rejected(&refused).await.unwrap();
    assert!(!has_login(&store, "gh", url));
    assert!(vault.load().await.unwrap().is_none());

    // invalid_client (seen by the session's client): only the refused client's record goes.
    vault.save(credentials(&["read"])).await.unwrap();
    assert!(!forget_refused(&store, "gh", "another-client").unwrap());
    assert!(has_login(&store, "gh", url));
    assert!(forget_refused(&store, "gh", "client").unwrap());
    assert!(!has_login(&store, "gh", url));
    assert!(!forget_refused(&store, "gh", "client").unwrap());
}

#[test]
fn a_login_after_a_refusal_alone_discovers_from_the_url() {
    let none = OAuthConfig::default();
    let refusal = Challenge {
        refused: super::challenge::Refusal::named("invalid_client", "c1"),
        ..Challenge::default()
    };
    let request = request_for(
        &target(&none, Some(&refusal)),
        "http://127.0.0.1:1/callback",
        &[],
    );
    assert_eq!(request.challenge, None, "no header to seed discovery with");
    assert_eq!(request.client_id, None, "a new registration");
    let challenged = step_up("admin");
    let request = request_for(
        &target(&none, Some(&challenged)),
        "http://127.0.0.1:1/callback",
        &[],
    );
    assert!(request.challenge.is_some());
}
