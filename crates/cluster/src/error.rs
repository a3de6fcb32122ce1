//! What can go wrong with the shared state. Every message names the database by host, port
//! and name, never by its URL (which may hold a password), and says what to do.

/// Why the shared state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cluster.postgres: {0}")]
    Url(String),
    #[error(
        "cluster.postgres asks for TLS (sslmode=require), which this build does not speak: \
         reach PostgreSQL over loopback or a private network with sslmode=disable (or \
         through a TLS tunnel such as stunnel or a sidecar), see docs/configuration.md"
    )]
    TlsUnsupported,
    #[error(
        "cannot connect to PostgreSQL at {target}: {reason}; check cluster.postgres (host, \
         port, database, user, password) and that the server runs and accepts this replica"
    )]
    Connect { target: String, reason: String },
    #[error("PostgreSQL at {target} failed while {doing}: {reason}")]
    Query {
        target: String,
        doing: &'static str,
        reason: String,
        /// The connection broke or the server is going away: the same statement may work
        /// on a new connection.
        transient: bool,
    },
    #[error(
        "the shared state in PostgreSQL at {target} is at schema version {database}, newer \
         than this mcpproxy knows ({binary}): a newer release migrated it. Run that release \
         (or newer) on every replica; an older one would misread the state"
    )]
    TooNew {
        target: String,
        database: i32,
        binary: i32,
    },
    #[error("shared rate limit: {0}")]
    #[allow(
        dead_code,
        reason = "made by `Cluster::take`, which the limits module calls once wired"
    )]
    Bucket(String),
    #[error("the shared state in PostgreSQL at {target} holds an unreadable {what}: {reason}")]
    Corrupt {
        target: String,
        what: String,
        reason: String,
    },
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether trying again on a new connection may work (the connection broke, the server
    /// restarted or was unreachable), rather than the database refusing the statement.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Connect { .. } => true,
            Error::Query { transient, .. } => *transient,
            _ => false,
        }
    }
}

/// Whether `error` is the connection's rather than the statement's: closed, an I/O error,
/// or a server going away (SQLSTATE classes 08 connection exception, 57 operator
/// intervention, 53 insufficient resources).
pub(crate) fn is_transient(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    error.as_db_error().is_none_or(|db| {
        let code = db.code().code();
        ["08", "57", "53"]
            .iter()
            .any(|class| code.starts_with(class))
    })
}

/// A PostgreSQL error's text: the server's own message (and detail) when it sent one.
pub(crate) fn reason(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => {
            let mut text = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(": ");
                text.push_str(detail);
            }
            mcpproxy_support::quote(&text)
        }
        None => {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            mcpproxy_support::quote(&text)
        }
    }
}
