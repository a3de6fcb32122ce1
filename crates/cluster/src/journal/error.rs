//! What reading the cluster's journal can fail with; every message says what to check. The
//! URL in a message is masked (`secrets::mask_url`), and no message carries the credentials.

/// An error of the cluster journal's reader.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `cluster.journal` in the config.
    #[error(
        "no cluster journal is configured: set \"cluster\": {{\"journal\": \"clickhouse-sink\"}} \
         in the config, with clickhouse-sink in plugins.sinks and its url in \
         plugins.settings.clickhouse-sink (see docs/sinks.md#the-cluster-journal)"
    )]
    NotConfigured,
    /// `cluster.journal` names a sink whose store cannot be read back.
    #[error(
        "the cluster journal '{0}' cannot be read back: only the ClickHouse sink's table can \
         (set cluster.journal to clickhouse-sink; see docs/sinks.md#the-cluster-journal)"
    )]
    NotReadable(String),
    /// The sink's settings do not say where its table is.
    #[error("plugins.settings.{sink}.{key}: {problem}")]
    Settings {
        sink: String,
        key: &'static str,
        problem: String,
    },
    /// ClickHouse did not finish answering within the sink's `timeout_ms`.
    #[error(
        "the cluster journal at {url} did not finish answering within {ms} ms \
         (plugins.settings.{sink}.timeout_ms): narrow the query (--since, --server, --type) or \
         raise timeout_ms"
    )]
    TimedOut { url: String, sink: String, ms: u128 },
    /// No answer from ClickHouse.
    #[error(
        "the cluster journal at {url} did not answer ({reason}); check that ClickHouse runs and \
         that plugins.settings.{sink}.url names its HTTP interface (port 8123 by default)"
    )]
    Unreachable {
        url: String,
        sink: String,
        reason: String,
    },
    /// ClickHouse answered with an error.
    #[error("the cluster journal at {url} answered {status}: {message}; {hint}")]
    Answered {
        url: String,
        status: u16,
        message: String,
        hint: String,
    },
    /// An answer past the byte cap of one read.
    #[error(
        "the cluster journal at {url} sent more than {max_bytes} bytes for one read; check that \
         plugins.settings.{sink}.url names ClickHouse's HTTP interface"
    )]
    TooLarge {
        url: String,
        sink: String,
        max_bytes: usize,
    },
    /// An answer that is not what was asked for.
    #[error(
        "the cluster journal at {url} sent an answer that is not rows of the journal's table \
         ({reason}); check that plugins.settings.{sink}.url names ClickHouse's HTTP interface"
    )]
    Unreadable {
        url: String,
        sink: String,
        reason: String,
    },
    /// A query that would read more records than one query may.
    #[error(
        "the cluster journal holds more than {max} matching records for this query; narrow it \
         (--since/--until, --server, --type; start_time/end_time in the REST API)"
    )]
    TooMany { max: usize },
}
