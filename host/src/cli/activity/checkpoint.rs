//! `mcpproxy activity checkpoint [--push URL]`: signs the journal's hash chain head now (if
//! records were chained since the last checkpoint) and prints the last checkpoint with the
//! public key, one JSON line, as `GET /api/v1/activity/checkpoint` answers it; with
//! `--push`, POSTs that line to a witness, from a timer on the proxy's machine.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::cli::Globals;

use super::store::{Source, Store, open};

/// Longest a witness may take to take a checkpoint.
const PUSH_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Args)]
pub(in crate::cli) struct CheckpointCommand {
    #[command(flatten)]
    source: Source,
    /// POST the checkpoint (the printed JSON, `Content-Type: application/json`) to this
    /// witness URL; exits 1 when the witness does not answer 2xx.
    #[arg(long, value_name = "URL")]
    push: Option<String>,
    /// A header for the push, `NAME: VALUE` (repeatable), e.g. the witness's credentials.
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "push")]
    headers: Vec<String>,
}

impl CheckpointCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let headers = self
            .headers
            .iter()
            .map(|h| match h.split_once(':') {
                Some((name, value)) if !name.trim().is_empty() => {
                    Ok((name.trim().to_owned(), value.trim().to_owned()))
                }
                _ => {
                    bail!("--header '{h}' is not 'NAME: VALUE', e.g. 'Authorization: Bearer TOKEN'")
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let data: Value = match open(&self.source, globals).await? {
            Store::Remote(remote) => remote.get("/activity/checkpoint", &[]).await?,
            Store::Local(journal) => {
                let key = journal.public_key();
                let checkpoint = tokio::task::spawn_blocking(move || journal.latest_checkpoint())
                    .await
                    .context("the checkpoint task failed")??;
                json!({ "checkpoint": checkpoint, "key": key })
            }
        };
        println!("{data}");
        let Some(url) = self.push else {
            return Ok(ExitCode::SUCCESS);
        };
        if data["checkpoint"].is_null() {
            eprintln!("no record is chained yet: nothing to push");
            return Ok(ExitCode::SUCCESS);
        }
        let mut request = reqwest::Client::new()
            .post(&url)
            .json(&data)
            .timeout(PUSH_TIMEOUT);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot push the checkpoint to {url}: is the witness up?"))?;
        let status = response.status();
        if !status.is_success() {
            eprintln!("the witness at {url} answered {status}: the checkpoint was not taken");
            return Ok(ExitCode::from(1));
        }
        Ok(ExitCode::SUCCESS)
    }
}
