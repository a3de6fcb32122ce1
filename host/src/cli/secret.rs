//! `mcpproxy secret set|list|delete`: the values `${secret:NAME}` in `mcp_config.json`
//! refers to, kept in the credential store (the OS keyring, or a 0600 file in the data dir).
//! No command ever prints a value.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use zeroize::Zeroizing;

use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::{self as config, reference};

use super::Globals;

/// The longest value read from stdin, in bytes.
const MAX_VALUE_BYTES: u64 = 256 * 1024;

#[derive(Debug, Subcommand)]
pub(super) enum SecretCommand {
    /// Store a secret: the value is read from stdin when it is not a terminal, else asked
    /// for without echo. A config value `${secret:NAME}` then resolves to it.
    Set(NameArgs),
    /// The stored secrets' names and where they are kept (never their values).
    List(ConfigArgs),
    /// Forget a stored secret.
    Delete(NameArgs),
}

#[derive(Debug, Args)]
pub(super) struct ConfigArgs {
    /// The config file (for its `data_dir`).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct NameArgs {
    /// The secret's name, as in `${secret:NAME}`.
    name: String,
    #[command(flatten)]
    config: ConfigArgs,
}

impl SecretCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        match self {
            SecretCommand::Set(args) => {
                let (store, key) = args.open(globals)?;
                let value = read_value(&args.name)?;
                store.set(&key, &value)?;
                println!(
                    "stored secret {} ({}); servers whose config says ${{secret:{0}}} use it \
                     from their next start (`mcpproxy upstream restart SERVER`)",
                    args.name,
                    store.backend()
                );
                Ok(ExitCode::SUCCESS)
            }
            SecretCommand::List(args) => {
                let store = open(globals, &args)?;
                let prefix = reference::Reference::store_key("");
                let names = store.keys(&prefix)?;
                println!("backend: {}", store.backend());
                if names.is_empty() {
                    println!("no secrets stored; add one with `mcpproxy secret set NAME`");
                }
                for name in names {
                    println!("{}", name.strip_prefix(&prefix).unwrap_or(&name));
                }
                Ok(ExitCode::SUCCESS)
            }
            SecretCommand::Delete(args) => {
                let (store, key) = args.open(globals)?;
                if store.delete(&key)? {
                    println!("deleted secret {} ({})", args.name, store.backend());
                    Ok(ExitCode::SUCCESS)
                } else {
                    eprintln!(
                        "no secret {} is stored ({}); `mcpproxy secret list` shows the names",
                        args.name,
                        store.backend()
                    );
                    Ok(ExitCode::from(super::EXIT_FAILURE))
                }
            }
        }
    }
}

impl NameArgs {
    /// The store, and the key of this secret (its name checked).
    fn open(&self, globals: &Globals) -> Result<(CredentialStore, String)> {
        reference::check_secret_name(&self.name).map_err(anyhow::Error::msg)?;
        Ok((
            open(globals, &self.config)?,
            reference::Reference::store_key(&self.name),
        ))
    }
}

/// The credential store of the data dir (`--data-dir`, else the config's, else the default).
fn open(globals: &Globals, args: &ConfigArgs) -> Result<CredentialStore> {
    let loaded = config::load(args.config.as_deref(), globals.home.as_deref())?;
    let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
    Ok(CredentialStore::open(&data_dir)?)
}

/// The value: all of stdin (one trailing line break dropped) when it is not a terminal, else
/// asked for without echo.
fn read_value(name: &str) -> Result<Zeroizing<String>> {
    let stdin = std::io::stdin();
    let value = if stdin.is_terminal() {
        Zeroizing::new(
            rpassword::prompt_password(format!("value of secret {name} (not shown): "))
                .context("cannot read the value from the terminal")?,
        )
    } else {
        let mut bytes = Zeroizing::new(Vec::new());
        stdin
            .lock()
            .take(MAX_VALUE_BYTES + 1)
            .read_to_end(&mut bytes)
            .context("cannot read the value from stdin")?;
        if bytes.len() as u64 > MAX_VALUE_BYTES {
            bail!(
                "the value on stdin is over {MAX_VALUE_BYTES} bytes; a secret is a token or a password"
            );
        }
        let Ok(text) = std::str::from_utf8(&bytes) else {
            bail!("the value on stdin is not UTF-8 text");
        };
        let text = text
            .strip_suffix('\n')
            .map_or(text, |t| t.strip_suffix('\r').unwrap_or(t));
        Zeroizing::new(text.to_owned())
    };
    if value.is_empty() {
        bail!(
            "the value of secret {name} is empty; nothing was stored (pipe it in: \
             `printf %s \"$TOKEN\" | mcpproxy secret set {name}`)"
        );
    }
    if value.contains('\0') {
        bail!(
            "the value of secret {name} has a NUL character, which no header or environment \
             variable can carry; nothing was stored"
        );
    }
    Ok(value)
}
