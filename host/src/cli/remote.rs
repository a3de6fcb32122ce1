//! Talking to a running `mcpproxy serve` through its REST API, for commands that work both
//! with and without a server (they read the journal file directly when none is up). The
//! data dir's owner is asked on its control socket (`<data_dir>/mcpproxy.sock`, whether it
//! serves HTTP or stdio); without one, a server on the config's `listen` address.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use serde_json::Value;

use mcpproxy_config::Config;
use mcpproxy_server::api::key;

/// A running server's REST API.
pub(super) struct Remote {
    base: String,
    key: String,
    http: reqwest::Client,
}

/// The config a command works with, or the data dir's running owner when the config file
/// does not load.
pub(super) enum Reading {
    Config(Box<mcpproxy_config::Loaded>),
    /// The file is broken (a typo), but the owner serves on with the config it loaded, and
    /// answers: a note on stderr said what is wrong with the file.
    Owner(Remote),
}

impl Reading {
    /// Loads the config; when that fails and an owner runs on the data dir (`--data-dir`,
    /// `MCPPROXY_DATA_DIR` or `~/.mcpproxy`: a broken file cannot say another), the owner.
    /// A typo in the file does not lock a person out of `upstream list` or `activity list`
    /// while the proxy itself serves on; with no owner, the file's error as always.
    pub(super) async fn load(globals: &super::Globals, config: Option<&Path>) -> Result<Self> {
        let error = match mcpproxy_config::load(config, globals.home.as_deref()) {
            Ok(loaded) => return Ok(Self::Config(Box::new(loaded))),
            Err(error) => error,
        };
        let data_dir = globals.data_dir(None);
        if let Ok(Some(remote)) = Remote::find(&Config::default(), &data_dir).await {
            super::output::print_note(&format!(
                "{error}\nthe running mcpproxy answers with the config it loaded before; fix the file (`mcpproxy doctor` checks it)"
            ));
            return Ok(Self::Owner(remote));
        }
        Err(error.into())
    }
}

/// How long a command waits for a process that holds the data dir's journal to answer on
/// its control socket (an owner still starting, or a one-shot command finishing).
const HOLDER_WAIT: Duration = Duration::from_secs(30);
/// How often it looks meanwhile.
const HOLDER_POLL: Duration = Duration::from_millis(100);

impl Remote {
    /// The data dir's running owner, or the server at the config's `listen` address, if one
    /// answers there. A server that answers but refuses our key is an error, not "no server".
    ///
    /// While another mcpproxy process holds the data dir's journal, or its serve marker,
    /// without answering yet (a `serve` still starting: its socket and key come last; or a
    /// one-shot command), this waits for it, up to [`HOLDER_WAIT`]: the owner then takes the request, or the data dir is free
    /// once the command ends. A command never acts on the data dir beside a starting owner
    /// (an `upstream add` that wrote the file then was taken as a hand edit).
    pub(super) async fn find(config: &Config, data_dir: &Path) -> Result<Option<Self>> {
        let journal = mcpproxy_server::runtime::journal_path(data_dir);
        let deadline = tokio::time::Instant::now() + HOLDER_WAIT;
        loop {
            if let Some(remote) = Self::find_now(config, data_dir).await? {
                return Ok(Some(remote));
            }
            // Only an mcpproxy process is waited for (another program holding the file
            // is named by the error of the command's own attempt).
            let held = |file: &Path| {
                mcpproxy_server::control::holder::find(file)
                    .filter(|holder| is_mcpproxy(&holder.command))
            };
            let Some(holder) = held(&journal)
                .or_else(|| held(&mcpproxy_server::control::holder::serve_marker(data_dir)))
            else {
                return Ok(None);
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(anyhow!(
                    "the data dir {} is in use by {holder}, which did not answer on its control socket {} within {} s: wait for it to finish or stop it, and try again",
                    data_dir.display(),
                    mcpproxy_server::control::socket_path(data_dir).display(),
                    HOLDER_WAIT.as_secs()
                ));
            }
            tokio::time::sleep(HOLDER_POLL).await;
        }
    }

    /// [`Remote::find`] without waiting.
    async fn find_now(config: &Config, data_dir: &Path) -> Result<Option<Self>> {
        let Some(key) = key::load_existing(data_dir, config.api_key.as_deref()) else {
            return Ok(None);
        };
        if mcpproxy_server::control::connect(data_dir).await.is_some() {
            let socket = mcpproxy_server::control::socket_path(data_dir);
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .unix_socket(socket.clone())
                .build()
                .context("cannot make an HTTP client")?;
            let remote = Self {
                base: "http://localhost/api/v1".to_owned(),
                key,
                http,
            };
            return match remote.get("/status", &[]).await {
                Ok(_) => Ok(Some(remote)),
                Err(e) => Err(e.context(format!(
                    "the mcpproxy that owns {} answers on {} but not as expected",
                    data_dir.display(),
                    socket.display()
                ))),
            };
        }
        let mut addr = config.listen;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_millis(500))
            .build()
            .context("cannot make an HTTP client")?;
        let remote = Self {
            base: format!("http://{addr}/api/v1"),
            key,
            http,
        };
        let response = match remote
            .http
            .get(format!("{}/status", remote.base))
            .header("X-API-Key", &remote.key)
            .send()
            .await
        {
            Ok(response) => response,
            // Nothing listens there: work without a server.
            Err(_) => return Ok(None),
        };
        match response.status().as_u16() {
            200 => Ok(Some(remote)),
            401 => Err(anyhow!(
                "a server answers on {addr} but refuses the API key from {}; pass the same --data-dir (or --config with api_key) the server uses",
                data_dir.display()
            )),
            other => Err(anyhow!(
                "the server on {addr} answered {other} to /api/v1/status; is it an mcpproxy?"
            )),
        }
    }

    /// The names of the policy plugins the owner has in force (`GET /plugins`, whose entries
    /// are `name version`), by list: `annotators`, `validators`, `guards`.
    pub(super) async fn plugins_in_force(&self) -> Result<Vec<(&'static str, Vec<String>)>> {
        let in_force = self.get("/plugins", &[]).await?;
        Ok(["annotators", "validators", "guards"]
            .into_iter()
            .map(|key| {
                let names = in_force[key]
                    .as_array()
                    .map(|entries| {
                        entries
                            .iter()
                            .filter_map(|n| n.as_str()?.split(' ').next().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                (key, names)
            })
            .collect())
    }

    /// GETs a path and returns the envelope's `data`, or the API's error message.
    pub(super) async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value> {
        let request = self.http.get(format!("{}{path}", self.base)).query(query);
        self.send(request).await
    }

    /// GETs a path that answers with a stream rather than the JSON envelope (an export);
    /// an error answer becomes the API's error message. The 30 s limit of the other
    /// requests does not apply: a stream takes as long as it takes.
    pub(super) async fn get_stream(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<reqwest::Response> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .query(query)
            .header("X-API-Key", &self.key)
            .timeout(Duration::from_secs(24 * 3600))
            .send()
            .await
            .with_context(|| format!("cannot reach mcpproxy at {}", self.base))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        Err(anyhow!(
            "{}",
            body["error"]
                .as_str()
                .map_or_else(|| format!("mcpproxy answered {status}"), str::to_owned)
        ))
    }

    /// POSTs a JSON body; like [`Remote::get`].
    pub(super) async fn post(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .timeout(timeout);
        self.send(request).await
    }

    /// PATCHes a JSON body; like [`Remote::get`].
    pub(super) async fn patch(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value> {
        let request = self
            .http
            .patch(format!("{}{path}", self.base))
            .json(body)
            .timeout(timeout);
        self.send(request).await
    }

    /// DELETEs; like [`Remote::get`].
    pub(super) async fn delete(&self, path: &str, timeout: Duration) -> Result<Value> {
        let request = self
            .http
            .delete(format!("{}{path}", self.base))
            .timeout(timeout);
        self.send(request).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = request
            .header("X-API-Key", &self.key)
            .send()
            .await
            .with_context(|| format!("cannot reach mcpproxy at {}", self.base))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .with_context(|| format!("mcpproxy answered {status} without a JSON body"))?;
        if body["success"] == Value::Bool(true) {
            Ok(body["data"].clone())
        } else {
            Err(anyhow!(
                "{}",
                body["error"].as_str().unwrap_or("the request failed")
            ))
        }
    }
}

/// Whether a command line (as [`mcpproxy_server::control::holder::Holder`] shows it) runs
/// an `mcpproxy` binary.
fn is_mcpproxy(command: &str) -> bool {
    command
        .split(' ')
        .next()
        .and_then(|program| Path::new(program).file_name())
        .is_some_and(|name| name == "mcpproxy")
}
