//! The schema of the shared state: migrations embedded in the binary, applied at start in one
//! transaction under an advisory lock (replicas starting together take turns, and the later
//! ones find nothing to do), each recorded in `mcpproxy_schema_versions`. A database whose
//! schema is newer than this binary is refused: an older release would misread it.

use tokio_postgres::Client;

use super::connect::Database;
use super::error::{Error, Result};

/// Every migration, in order: (version, SQL). Released ones are never edited.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_shared_state.sql")),
    (2, include_str!("migrations/0002_approvals.sql")),
];

/// The advisory lock the migrations run under (any constant the cluster agrees on:
/// "mcpproxy" in ASCII).
const LOCK_KEY: i64 = 0x6d63_7070_726f_7879;

/// The schema version this binary writes and reads.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// Brings the schema to [`latest`]; returns the versions applied now (none when another
/// replica did it first).
pub(crate) async fn migrate(db: &Database, client: &mut Client, by: &str) -> Result<Vec<i32>> {
    let failed = |e| db.failed("migrating the schema", &e);
    let tx = client.transaction().await.map_err(failed)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(failed)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS mcpproxy_schema_versions (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now(),
             applied_by text NOT NULL
         )",
    )
    .await
    .map_err(failed)?;
    let current: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM mcpproxy_schema_versions",
            &[],
        )
        .await
        .map_err(failed)?
        .get(0);
    if current > latest() {
        return Err(Error::TooNew {
            target: db.target().to_owned(),
            database: current,
            binary: latest(),
        });
    }
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO mcpproxy_schema_versions (version, applied_by) VALUES ($1, $2)",
            &[version, &by],
        )
        .await
        .map_err(failed)?;
        applied.push(*version);
    }
    tx.commit().await.map_err(failed)?;
    Ok(applied)
}

/// The schema version the database is at.
pub(crate) async fn version(db: &Database, client: &Client) -> Result<i32> {
    Ok(client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM mcpproxy_schema_versions",
            &[],
        )
        .await
        .map_err(|e| db.failed("reading the schema version", &e))?
        .get(0))
}
