//! `mcpproxy plugins reload`: asks the data dir's running owner to load its policy plugins
//! again (`POST /api/v1/plugins/reload` on its control socket). The new set is put in force
//! only once it loaded and passed a probe call; a refused set is reported and the plugins in
//! force keep judging.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};

use super::Globals;
use super::remote::Remote;

/// How long a reload may take (compiling a changed component in a debug build is slow).
const RELOAD_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, Args)]
pub(super) struct ReloadCommand {
    /// The config file [default: ~/.mcpproxy/mcp_config.json].
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ReloadCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let loaded = mcpproxy_config::load(self.config.as_deref(), globals.home.as_deref())?;
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        let runtime = crate::cli::runtime::current_thread()?;
        let data = runtime.block_on(async {
            let Some(remote) = Remote::find(&loaded.config, &data_dir).await? else {
                bail!(
                    "no mcpproxy serve runs for {}: plugins are loaded when one starts, so there is nothing to reload",
                    data_dir.display()
                );
            };
            remote
                .post("/plugins/reload", &json!({}), RELOAD_WAIT)
                .await
                .context("the plugins were not reloaded")
        })?;
        let names = |key: &str| {
            data[key]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        println!("plugins reloaded");
        println!("annotators: {}", names("annotators"));
        println!("validators: {}", names("validators"));
        println!("result guards: {}", names("guards"));
        Ok(ExitCode::SUCCESS)
    }
}
