//! What an operator sees of the cluster (`mcpproxy cluster status`): the replicas that beat
//! recently (each joined replica writes its row in `mcpproxy_replicas` every
//! [`HEARTBEAT`]), the schema version, and how much shared state there is.

use std::time::Duration;

use serde::Serialize;
use tokio_postgres::Client;

use super::connect::Database;
use super::error::Result;
use super::migrate;
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::ClusterConfig;

/// How often a replica writes its heartbeat.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);

/// A replica not heard from for this many heartbeats is shown as down.
const MISSED_BEATS: u32 = 3;

/// The cluster as the database sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `host:port/dbname (user NAME)`.
    pub database: String,
    pub schema_version: i32,
    /// The schema version this mcpproxy writes.
    pub binary_schema_version: i32,
    pub replicas: Vec<Replica>,
    /// Upstream servers in the cluster's list.
    pub servers: i64,
    /// Servers whose calls a person approved.
    pub approved_servers: i64,
    pub pinned_tools: i64,
    /// `server:tool` of each held tool.
    pub held_tools: Vec<String>,
    /// Shared rate-limit buckets.
    pub buckets: i64,
}

/// One replica's heartbeat.
#[derive(Debug, Clone, Serialize)]
pub struct Replica {
    pub name: String,
    /// The mcpproxy version it runs.
    pub version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub seen_at: String,
    /// Seconds since its last heartbeat (the database's clock).
    pub seen_seconds_ago: f64,
    /// Heard from within the last few heartbeats.
    pub up: bool,
}

/// Reads the status of the cluster at `config.postgres` (nothing is written).
pub async fn status(config: &ClusterConfig, credentials: &CredentialStore) -> Result<Status> {
    let url = config.postgres.as_deref().ok_or_else(|| {
        super::Error::Url("is not set: this mcpproxy is not part of a cluster".to_owned())
    })?;
    let db = Database::from_url(url, credentials)?;
    let client = db.connect().await?;
    read(&db, &client).await
}

async fn read(db: &Database, client: &Client) -> Result<Status> {
    let failed = |e| db.failed("reading the cluster's status", &e);
    let schema_version = migrate::version(db, client).await?;
    let count = |sql: &'static str| async move {
        client
            .query_one(sql, &[])
            .await
            .and_then(|row| row.try_get::<_, i64>(0))
    };
    let down_after = (HEARTBEAT * MISSED_BEATS).as_secs_f64();
    let replicas = client
        .query(
            "SELECT name, version, \
             to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
             to_char(seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
             greatest(0, extract(epoch FROM now() - seen_at))::float8 \
             FROM mcpproxy_replicas ORDER BY name",
            &[],
        )
        .await
        .map_err(failed)?
        .iter()
        .map(|row| {
            let ago: f64 = row.try_get(4)?;
            Ok(Replica {
                name: row.try_get(0)?,
                version: row.try_get(1)?,
                started_at: row.try_get(2)?,
                seen_at: row.try_get(3)?,
                seen_seconds_ago: ago,
                up: ago <= down_after,
            })
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(failed)?;
    let held_tools = client
        .query(
            "SELECT server || ':' || tool FROM mcpproxy_trust_held ORDER BY server, tool",
            &[],
        )
        .await
        .map_err(failed)?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<Vec<String>, _>>()
        .map_err(failed)?;
    Ok(Status {
        database: db.target().to_owned(),
        schema_version,
        binary_schema_version: migrate::latest(),
        replicas,
        servers: count("SELECT count(*) FROM mcpproxy_servers")
            .await
            .map_err(failed)?,
        approved_servers: count(
            "SELECT count(*) FROM mcpproxy_trust_servers WHERE approved_at IS NOT NULL",
        )
        .await
        .map_err(failed)?,
        pinned_tools: count("SELECT count(*) FROM mcpproxy_trust_pins")
            .await
            .map_err(failed)?,
        held_tools,
        buckets: count("SELECT count(*) FROM mcpproxy_buckets")
            .await
            .map_err(failed)?,
    })
}

/// Writes this replica's heartbeat: `first` for the first one of this process (its start).
pub(crate) async fn beat(db: &Database, client: &Client, replica: &str, first: bool) -> Result<()> {
    let sql = if first {
        "INSERT INTO mcpproxy_replicas (name, version, started_at, seen_at) \
         VALUES ($1, $2, now(), now()) ON CONFLICT (name) DO UPDATE SET \
         version = EXCLUDED.version, started_at = now(), seen_at = now()"
    } else {
        "INSERT INTO mcpproxy_replicas (name, version, started_at, seen_at) \
         VALUES ($1, $2, now(), now()) ON CONFLICT (name) DO UPDATE SET seen_at = now()"
    };
    client
        .execute(sql, &[&replica, &env!("CARGO_PKG_VERSION")])
        .await
        .map_err(|e| db.failed("writing the heartbeat", &e))?;
    Ok(())
}
