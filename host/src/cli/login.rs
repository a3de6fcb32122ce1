//! `mcpproxy upstream login NAME` and `upstream logout NAME`: log in to an HTTP server that
//! asks for an OAuth login, and forget its tokens.
//!
//! `login` listens on a loopback redirect URI of its own (`http://127.0.0.1:PORT/callback`),
//! asks the running mcpproxy (or, when none runs, one built here for that server) to start
//! the login, opens the authorization URL in a browser (`$BROWSER`, else the desktop's
//! opener, else it only prints it; `--no-browser` prints it), waits for the browser to come
//! back, and hands the redirect to the same mcpproxy, which checks it, exchanges the code
//! and keeps the tokens. A running mcpproxy reconnects the server at once: no restart.

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use mcpproxy_config as config;
use mcpproxy_server::runtime::Runtime;
use mcpproxy_upstream::State;

use super::Globals;
use super::remote::Remote;

/// The path of the redirect URI `login` listens on.
const CALLBACK_PATH: &str = "/callback";

/// The most of a browser's request read (its request line is all that matters).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

#[derive(Debug, Args)]
pub(super) struct LoginArgs {
    /// The server's name in mcp_config.json.
    name: String,
    /// Print the authorization URL instead of opening a browser.
    #[arg(long)]
    no_browser: bool,
    /// How long to wait for the browser to come back, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    timeout: u64,
    /// The config file.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct LogoutArgs {
    /// The server's name in mcp_config.json.
    name: String,
    /// The config file.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Where the login runs: the data dir's running mcpproxy, or one built here.
enum Owner {
    Remote(Remote),
    Local(Box<Runtime>),
}

impl Owner {
    async fn open(
        globals: &Globals,
        config_flag: Option<&std::path::Path>,
        name: &str,
    ) -> Result<(Self, config::ServerConfig)> {
        let loaded = config::load(config_flag, globals.home.as_deref())?;
        let config = loaded.config;
        let Some(server) = config.server(name).cloned() else {
            bail!("{}", config.unknown_server(name));
        };
        let data_dir = globals.data_dir(config.data_dir.as_deref());
        if let Some(remote) = Remote::find(&config, &data_dir).await? {
            return Ok((Self::Remote(remote), server));
        }
        let runtime =
            Runtime::build_for_one(config, &data_dir, loaded.path.as_deref(), Some(name)).await?;
        Ok((Self::Local(Box::new(runtime)), server))
    }

    async fn begin(&self, name: &str, redirect_uri: &str) -> Result<String> {
        match self {
            Self::Remote(remote) => {
                let answer = remote
                    .post(
                        &format!("/upstreams/{name}/login"),
                        &json!({ "redirect_uri": redirect_uri }),
                        Duration::from_secs(60),
                    )
                    .await?;
                answer
                    .get("authorization_url")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow!("the server's answer has no authorization_url"))
            }
            Self::Local(runtime) => Ok(runtime
                .proxy
                .upstreams()
                .begin_login(name, redirect_uri)
                .await?),
        }
    }

    async fn finish(&self, name: &str, redirect: &str) -> Result<()> {
        match self {
            Self::Remote(remote) => {
                remote
                    .post(
                        &format!("/upstreams/{name}/login/callback"),
                        &json!({ "redirect": redirect }),
                        Duration::from_secs(60),
                    )
                    .await?;
                Ok(())
            }
            Self::Local(runtime) => Ok(runtime
                .proxy
                .upstreams()
                .finish_login(name, redirect)
                .await?),
        }
    }

    async fn logout(&self, name: &str) -> Result<bool> {
        match self {
            Self::Remote(remote) => {
                let answer = remote
                    .delete(&format!("/upstreams/{name}/login"), Duration::from_secs(30))
                    .await?;
                Ok(answer
                    .get("forgot")
                    .and_then(Value::as_bool)
                    .unwrap_or(false))
            }
            Self::Local(runtime) => Ok(runtime.proxy.upstreams().logout(name).await?),
        }
    }

    /// The server's state once the new login has had a moment to take (a running mcpproxy
    /// reconnects it).
    async fn settled_state(&self, name: &str) -> Option<String> {
        match self {
            Self::Remote(remote) => {
                for _ in 0..50 {
                    let list = remote.get("/upstreams", &[]).await.ok()?;
                    let state = list
                        .as_array()?
                        .iter()
                        .find(|s| s["name"] == name)
                        .and_then(|s| {
                            serde_json::from_value::<mcpproxy_upstream::ServerStatus>(s.clone())
                                .ok()
                        })?;
                    if !matches!(
                        state.state,
                        State::Connecting | State::Disconnected | State::Authenticating
                    ) {
                        return Some(state.state.to_string());
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                None
            }
            Self::Local(_) => None,
        }
    }

    async fn close(self) {
        if let Self::Local(runtime) = self {
            runtime.shutdown().await;
        }
    }
}

pub(super) async fn login(globals: &Globals, args: LoginArgs) -> Result<ExitCode> {
    let (owner, server) = Owner::open(globals, args.config.as_deref(), &args.name).await?;
    let result = login_with(&owner, &server, &args).await;
    let state = match &result {
        Ok(()) => owner.settled_state(&args.name).await,
        Err(_) => None,
    };
    owner.close().await;
    result?;
    match state {
        Some(state) => println!("logged in to '{}' (now {state})", args.name),
        None => println!(
            "logged in to '{}'; the tokens are stored for the next `mcpproxy serve`",
            args.name
        ),
    }
    Ok(ExitCode::SUCCESS)
}

async fn login_with(owner: &Owner, server: &config::ServerConfig, args: &LoginArgs) -> Result<()> {
    let port = server.oauth.redirect_port.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{port} for the login's redirect"))?;
    let port = listener.local_addr()?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let url = owner.begin(&args.name, &redirect_uri).await?;
    let parsed = reqwest::Url::parse(&url).context("the authorization URL is not a URL")?;
    if !matches!(parsed.scheme(), "https" | "http") {
        bail!(
            "the authorization server gave a {} URL to open; only http and https are opened",
            mcpproxy_support::quote(parsed.scheme())
        );
    }
    eprintln!(
        "To log in to '{}', open this address in a browser:\n\n  {url}\n",
        args.name
    );
    if !args.no_browser {
        match open_browser(&url) {
            Ok(how) => eprintln!("(opened with {how}; waiting for the browser to come back)"),
            Err(why) => eprintln!("({why}; open it yourself)"),
        }
    }
    let redirect = tokio::time::timeout(
        Duration::from_secs(args.timeout),
        wait_for_redirect(&listener, port),
    )
    .await
    .map_err(|_| {
        anyhow!(
            "the browser did not come back to {redirect_uri} within {} s; run `mcpproxy upstream login {}` again (--timeout SECONDS waits longer)",
            args.timeout,
            args.name
        )
    })??;
    owner.finish(&args.name, &redirect).await
}

/// Opens `url` with `$BROWSER` (its first entry; `%s` stands for the URL), else the
/// desktop's opener; how, or why not. The URL is passed as one argument, never through a
/// shell.
fn open_browser(url: &str) -> Result<String, String> {
    let (program, mut arguments): (String, Vec<String>) = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => {
            let first = browser.split(':').next().unwrap_or_default();
            let mut words = first.split_whitespace().map(str::to_owned);
            let program = words.next().ok_or("BROWSER is empty")?;
            (program, words.collect())
        }
        _ if cfg!(target_os = "macos") => ("open".to_owned(), Vec::new()),
        _ if std::env::var_os("DISPLAY").is_some()
            || std::env::var_os("WAYLAND_DISPLAY").is_some() =>
        {
            ("xdg-open".to_owned(), Vec::new())
        }
        _ => return Err("no browser: BROWSER is not set and there is no desktop".to_owned()),
    };
    if arguments.iter().any(|a| a.contains("%s")) {
        for a in &mut arguments {
            *a = a.replace("%s", url);
        }
    } else {
        arguments.push(url.to_owned());
    }
    let mut child = std::process::Command::new(&program)
        .args(&arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    std::thread::spawn(move || child.wait());
    Ok(program)
}

/// Waits for the browser's request to the callback path; the whole redirect URL. Other
/// requests (a favicon) get a 404 and the wait goes on.
async fn wait_for_redirect(listener: &TcpListener, port: u16) -> Result<String> {
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut request = Vec::new();
        let mut buf = [0u8; 2048];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(0)) | Err(_) => break,
                Ok(Ok(n)) => request.extend_from_slice(&buf[..n]),
                Ok(Err(_)) => break,
            }
        }
        let text = String::from_utf8_lossy(&request);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default()
            .to_owned();
        if target.split('?').next() != Some(CALLBACK_PATH) {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let body = "<!doctype html><meta charset=utf-8><title>mcpproxy</title><p>mcpproxy has the login. You can close this tab and go back to the terminal.</p>";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return Ok(format!("http://127.0.0.1:{port}{target}"));
    }
}

pub(super) async fn logout(globals: &Globals, args: LogoutArgs) -> Result<ExitCode> {
    let (owner, _) = Owner::open(globals, args.config.as_deref(), &args.name).await?;
    let result = owner.logout(&args.name).await;
    owner.close().await;
    if result? {
        println!(
            "forgot the tokens of '{}'; it asks for a login again when it next needs one",
            args.name
        );
    } else {
        println!("'{}' had no stored login", args.name);
    }
    Ok(ExitCode::SUCCESS)
}
