//! `mcpproxy api-key`: print the REST API key, making it if there is none yet.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use mcpproxy_config as config;
use mcpproxy_server::api::key;

use super::Globals;

#[derive(Debug, Args)]
pub(super) struct ApiKeyCommand {
    /// The config file (its `api_key` wins over the stored key).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ApiKeyCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let loaded = config::load(self.config.as_deref(), globals.home.as_deref())?;
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        println!(
            "{}",
            key::load_or_create(&data_dir, loaded.config.api_key.as_deref())?
        );
        Ok(ExitCode::SUCCESS)
    }
}
