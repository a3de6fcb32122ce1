//! The connection URL (its `${env:}`/`${secret:}` references resolved), the name a message
//! gives the database (`host:port/dbname`, never the password), and connections to it.

use std::str::FromStr;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Notification};

use super::error::{Error, Result, is_transient, reason};
use mcpproxy_auth::credentials::{CredentialStore, references};

/// How long a connection attempt may take unless the URL says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the shared state lives.
#[derive(Clone)]
pub(crate) struct Database {
    config: Config,
    /// `host:port/dbname (user NAME)`, for messages.
    target: String,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.target)
    }
}

impl Database {
    /// Parses `url` after resolving its references from the environment and `credentials`.
    /// No message quotes the URL: it may hold a password.
    pub(crate) fn from_url(url: &str, credentials: &CredentialStore) -> Result<Self> {
        let resolved = references::resolve(url, credentials).map_err(Error::Url)?;
        let resolved = resolved.expose();
        let mut config = Config::from_str(resolved).map_err(|e| {
            Error::Url(format!(
                "not a valid PostgreSQL URL ({}); e.g. postgres://mcpproxy@127.0.0.1:5432/mcpproxy?sslmode=disable",
                scrub(&e.to_string(), resolved)
            ))
        })?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(Error::TlsUnsupported);
        }
        if config.get_hosts().is_empty() {
            return Err(Error::Url(
                "names no host: e.g. postgres://mcpproxy@127.0.0.1:5432/mcpproxy".to_owned(),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("mcpproxy");
        let target = target(&config);
        Ok(Self { config, target })
    }

    /// `host:port/dbname (user NAME)`.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// A new connection; its driver runs on its own task until the client is dropped or
    /// the connection breaks ([`Client::is_closed`]).
    pub(crate) async fn connect(&self) -> Result<Client> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| self.refused(&e))?;
        let target = self.target.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection to PostgreSQL at {target} ended: {}", reason(&e));
            }
        });
        Ok(client)
    }

    /// A new connection whose notifications (LISTEN) arrive on the receiver, which ends
    /// when the connection does.
    pub(crate) async fn connect_listening(
        &self,
    ) -> Result<(Client, mpsc::UnboundedReceiver<Notification>)> {
        let (client, mut connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| self.refused(&e))?;
        #[allow(
            clippy::disallowed_methods,
            reason = "this task also drives the client the receiver's owner queries through, so \
                      waiting here for room could deadlock; the queue holds one notification \
                      per change another replica announced, and the owner drains it whole"
        )]
        let (tx, rx) = mpsc::unbounded_channel();
        let target = self.target.clone();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(
                            "the listening connection to PostgreSQL at {target} broke: {}",
                            reason(&e)
                        );
                        return;
                    }
                }
            }
        });
        Ok((client, rx))
    }

    fn refused(&self, error: &tokio_postgres::Error) -> Error {
        Error::Connect {
            target: self.target.clone(),
            reason: reason(error),
        }
    }

    /// The error of a statement that failed while `doing` something.
    pub(crate) fn failed(&self, doing: &'static str, error: &tokio_postgres::Error) -> Error {
        Error::Query {
            target: self.target.clone(),
            doing,
            reason: reason(error),
            transient: is_transient(error),
        }
    }
}

/// `host:port/dbname (user NAME)` of a parsed URL (the first host; the others in brackets).
fn target(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(at, host)| {
            let port = config
                .get_ports()
                .get(at)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{}:{port}", mcpproxy_support::quote(name)),
                Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect();
    format!(
        "{}/{} (user {})",
        hosts.join(","),
        mcpproxy_support::quote(
            config
                .get_dbname()
                .or(config.get_user())
                .unwrap_or("postgres")
        ),
        mcpproxy_support::quote(config.get_user().unwrap_or("(none)"))
    )
}

/// `message` with the URL's password (anything between the user's ':' and '@') masked.
fn scrub(message: &str, url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let userinfo = rest.split(['/', '?']).next().unwrap_or("");
    match userinfo
        .rsplit_once('@')
        .and_then(|(user, _)| user.split_once(':'))
    {
        Some((_, password)) if !password.is_empty() => {
            message.replace(password, mcpproxy_auth::masking::MASK)
        }
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_host_port_and_database_never_the_password() {
        let store = CredentialStore::open_file(std::path::Path::new("/nonexistent"));
        let db = Database::from_url("postgres://me:hunter2@127.0.0.1:6543/state", &store).unwrap();
        assert_eq!(db.target(), "127.0.0.1:6543/state (user me)");
        assert!(!format!("{db:?}").contains("hunter2"));
        let err = Database::from_url("postgres://me:hunter2@127.0.0.1:notaport/x", &store)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("not a valid PostgreSQL URL"), "{err}");
        let err = Database::from_url("postgres://h/x?sslmode=require", &store)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sslmode=require"), "{err}");
        let err = Database::from_url("${env:MCPPROXY_TEST_SURELY_UNSET_PG}", &store)
            .unwrap_err()
            .to_string();
        assert!(err.contains("MCPPROXY_TEST_SURELY_UNSET_PG"), "{err}");
    }

    #[tokio::test]
    async fn a_refused_connection_names_host_and_port() {
        let store = CredentialStore::open_file(std::path::Path::new("/nonexistent"));
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db = Database::from_url(
            &format!("postgres://me:hunter2@127.0.0.1:{port}/state?sslmode=disable"),
            &store,
        )
        .unwrap();
        let err = db.connect().await.unwrap_err().to_string();
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
