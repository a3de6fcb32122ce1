//! A real OAuth authorization server for tests of clients that log in: oidc-provider
//! (`tests/oauth/issuer.mjs`, run with the Node 22 of `tests/conformance`) issuing JWT
//! access tokens by the client_credentials grant to `alice` (groups `sre`, `dev`) and `bob`
//! (group `dev`), for any resource named. Killed on drop.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::node::oauth_dir;

/// The authorization server.
pub(crate) struct Issuer {
    child: Child,
    pub(crate) url: String,
}

impl Issuer {
    pub(crate) fn start(node: &Path) -> Self {
        let mut child = Command::new(node)
            .arg(oauth_dir().join("issuer.mjs"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tests/oauth/issuer.mjs");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the issuer's URL");
        // Keep reading what it prints: a closed pipe would end it at its next line.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let printed: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the issuer printed {line:?}: {e}"));
        Self {
            child,
            url: printed["issuer"].as_str().expect("issuer").to_owned(),
        }
    }

    /// An access token for `client` with `resource` as its audience.
    pub(crate) async fn token(&self, client: &str, resource: &str) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/token", self.url))
            .basic_auth(client, Some(format!("{client}-secret-0123456789")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&scope=mcp%3Atools&resource={}",
                form_encode(resource)
            ))
            .send()
            .await
            .expect("reach the issuer")
            .json()
            .await
            .expect("a JSON answer");
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {answer}"))
            .to_owned()
    }

    pub(crate) async fn control(&self, method: reqwest::Method, path: &str) -> Value {
        reqwest::Client::new()
            .request(method, format!("{}{path}", self.url))
            .send()
            .await
            .expect("reach the issuer")
            .json()
            .await
            .expect("a JSON answer")
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A form value, percent-encoded.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
