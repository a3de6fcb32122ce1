//! Trust decisions in PostgreSQL: the whole state read in one snapshot ([`load`]), and each
//! change a replica makes written as one transaction that also notifies every replica
//! (`NOTIFY mcpproxy_trust`, delivered at commit) ([`write`], run by [`run_writer`]).
//!
//! A change is written as the rows it changes: the server's approval only when the approval
//! changed, each pin and held tool that was added, changed or removed. Two replicas changing
//! different parts of one server (one pinning a tool, the other approving the server) do not
//! overwrite each other.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc};
use tokio_postgres::{Client, GenericClient, IsolationLevel};

use super::connect::Database;
use super::error::{Error, Result};
use mcpproxy_trust::{HeldTool, PinnedTool, ServerTrust, TrustState, TrustStore, TrustWrite};

/// The channel trust changes are announced on; the payload is the server's name.
pub(crate) const CHANNEL: &str = "mcpproxy_trust";

/// The longest wait between two attempts to reach the database again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Every trust decision, read in one consistent snapshot.
pub(crate) async fn load(db: &Database, client: &mut Client) -> Result<TrustState> {
    let failed = |e| db.failed("reading the trust decisions", &e);
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(failed)?;
    let mut state = TrustState {
        launch_binding: tx
            .query_opt(
                "SELECT value FROM mcpproxy_meta WHERE key = 'launch_binding'",
                &[],
            )
            .await
            .map_err(failed)?
            .is_some(),
        servers: BTreeMap::new(),
    };
    for row in tx
        .query(
            "SELECT server, approved_at, approved_by, launch FROM mcpproxy_trust_servers",
            &[],
        )
        .await
        .map_err(failed)?
    {
        let server: String = row.try_get(0).map_err(failed)?;
        let launch: Option<serde_json::Value> = row.try_get(3).map_err(failed)?;
        let trust = ServerTrust {
            approved_at: row.try_get(1).map_err(failed)?,
            approved_by: row.try_get(2).map_err(failed)?,
            launch: launch
                .map(|v| decode(db, &format!("launch of {server}"), v))
                .transpose()?,
            tools: BTreeMap::new(),
            held: BTreeMap::new(),
        };
        state.servers.insert(server, trust);
    }
    for (server, tool, pin) in per_tool::<PinnedTool, _>(
        db,
        &tx,
        "SELECT server, tool, pin FROM mcpproxy_trust_pins",
        "pin of",
    )
    .await?
    {
        state
            .servers
            .entry(server)
            .or_default()
            .tools
            .insert(tool, pin);
    }
    for (server, tool, held) in per_tool::<HeldTool, _>(
        db,
        &tx,
        "SELECT server, tool, held FROM mcpproxy_trust_held",
        "held tool",
    )
    .await?
    {
        state
            .servers
            .entry(server)
            .or_default()
            .held
            .insert(tool, held);
    }
    tx.commit().await.map_err(failed)?;
    Ok(state)
}

/// The rows of `query` (`server, tool, JSON`), each JSON decoded as a `T`; `what` names the
/// value in the error about a row that does not decode (e.g. `pin of` `github:search`).
async fn per_tool<T: DeserializeOwned, C: GenericClient>(
    db: &Database,
    client: &C,
    query: &str,
    what: &str,
) -> Result<Vec<(String, String, T)>> {
    let failed = |e| db.failed("reading the trust decisions", &e);
    let mut decoded = Vec::new();
    for row in client.query(query, &[]).await.map_err(failed)? {
        let (server, tool): (String, String) = (
            row.try_get(0).map_err(failed)?,
            row.try_get(1).map_err(failed)?,
        );
        let value = decode(
            db,
            &format!("{what} {server}:{tool}"),
            row.try_get(2).map_err(failed)?,
        )?;
        decoded.push((server, tool, value));
    }
    Ok(decoded)
}

fn decode<T: DeserializeOwned>(db: &Database, what: &str, value: serde_json::Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Corrupt {
        target: db.target().to_owned(),
        what: mcpproxy_support::quote(what),
        reason: e.to_string(),
    })
}

fn encode<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// Writes one change in one transaction, with its notification.
pub(crate) async fn write(
    db: &Database,
    client: &mut Client,
    change: &TrustWrite,
    by: &str,
) -> Result<()> {
    let failed = |e| db.failed("writing a trust decision", &e);
    let tx = client.transaction().await.map_err(failed)?;
    let announced = match change {
        TrustWrite::Binding => {
            tx.execute(
                "INSERT INTO mcpproxy_meta (key, value) VALUES ('launch_binding', 'true') \
                 ON CONFLICT (key) DO NOTHING",
                &[],
            )
            .await
            .map_err(failed)?;
            String::new()
        }
        TrustWrite::Server {
            name, after: None, ..
        } => {
            tx.execute(
                "DELETE FROM mcpproxy_trust_servers WHERE server = $1",
                &[name],
            )
            .await
            .map_err(failed)?;
            name.clone()
        }
        TrustWrite::Server {
            name,
            before,
            after: Some(after),
        } => {
            write_server(&tx, name, before.as_deref(), after, by)
                .await
                .map_err(failed)?;
            name.clone()
        }
    };
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &announced])
        .await
        .map_err(failed)?;
    tx.commit().await.map_err(failed)
}

async fn write_server(
    tx: &impl GenericClient,
    name: &str,
    before: Option<&ServerTrust>,
    after: &ServerTrust,
    by: &str,
) -> Result<(), tokio_postgres::Error> {
    let approval = |s: &ServerTrust| {
        (
            s.approved_at.clone(),
            s.approved_by.clone(),
            s.launch.clone(),
        )
    };
    let launch = after.launch.as_ref().map(encode);
    if before.map(approval) != Some(approval(after)) {
        tx.execute(
            "INSERT INTO mcpproxy_trust_servers (server, approved_at, approved_by, launch, updated_by) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (server) DO UPDATE SET approved_at = EXCLUDED.approved_at, \
             approved_by = EXCLUDED.approved_by, launch = EXCLUDED.launch, \
             updated_at = now(), updated_by = EXCLUDED.updated_by",
            &[&name, &after.approved_at, &after.approved_by, &launch, &by],
        )
        .await?;
    } else {
        // The approval is as it was: only make sure the row the pins hang on exists.
        tx.execute(
            "INSERT INTO mcpproxy_trust_servers (server, approved_at, approved_by, launch, updated_by) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (server) DO NOTHING",
            &[&name, &after.approved_at, &after.approved_by, &launch, &by],
        )
        .await?;
    }
    let empty = ServerTrust::default();
    let before = before.unwrap_or(&empty);
    write_tools(tx, &PINS, name, &before.tools, &after.tools).await?;
    write_tools(tx, &HELD, name, &before.held, &after.held).await?;
    Ok(())
}

/// One per-tool table of a server's trust: the statements that set and drop a row.
struct ToolTable {
    upsert: &'static str,
    delete: &'static str,
}

/// `mcpproxy_trust_pins`: the pinned form of each approved tool.
const PINS: ToolTable = ToolTable {
    upsert: "INSERT INTO mcpproxy_trust_pins (server, tool, pin) VALUES ($1, $2, $3) \
             ON CONFLICT (server, tool) DO UPDATE SET pin = EXCLUDED.pin",
    delete: "DELETE FROM mcpproxy_trust_pins WHERE server = $1 AND tool = $2",
};

/// `mcpproxy_trust_held`: the tools held because a replica saw them change.
const HELD: ToolTable = ToolTable {
    upsert: "INSERT INTO mcpproxy_trust_held (server, tool, held) VALUES ($1, $2, $3) \
             ON CONFLICT (server, tool) DO UPDATE SET held = EXCLUDED.held",
    delete: "DELETE FROM mcpproxy_trust_held WHERE server = $1 AND tool = $2",
};

/// Writes the rows of `table` for server `name` that `after` changed from `before`: each
/// new or changed tool set, each tool gone dropped; rows nobody changed are not touched, so
/// two replicas changing different tools of one server both keep their change.
async fn write_tools<T: Serialize + PartialEq>(
    tx: &impl GenericClient,
    table: &ToolTable,
    name: &str,
    before: &BTreeMap<String, T>,
    after: &BTreeMap<String, T>,
) -> Result<(), tokio_postgres::Error> {
    for (tool, value) in after {
        if before.get(tool) != Some(value) {
            tx.execute(table.upsert, &[&name, tool, &encode(value)])
                .await?;
        }
    }
    for tool in before.keys().filter(|t| !after.contains_key(*t)) {
        tx.execute(table.delete, &[&name, tool]).await?;
    }
    Ok(())
}

/// Writes the store's changes in order until the store is gone. While the database cannot
/// be reached a change waits (and the store keeps the state of this replica); a change the
/// database refuses is given up with an error, and `reload` asks for the state as the
/// database has it.
pub(crate) async fn run_writer(
    db: Database,
    trust: Weak<TrustStore>,
    mut writes: mpsc::UnboundedReceiver<TrustWrite>,
    reload: Arc<Notify>,
    by: String,
) {
    let mut client: Option<Client> = None;
    while let Some(change) = writes.recv().await {
        let mut backoff = Duration::from_millis(100);
        loop {
            let connected = match client.take() {
                Some(c) if !c.is_closed() => Ok(c),
                _ => db.connect().await,
            };
            let mut connected = match connected {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("a trust decision waits for the shared state: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            let outcome = write(&db, &mut connected, &change, &by).await;
            let broken = connected.is_closed();
            if !broken {
                client = Some(connected);
            }
            match outcome {
                Ok(()) => break,
                Err(e) if broken || e.is_transient() => {
                    tracing::warn!("a trust decision waits for the shared state: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => {
                    tracing::error!("a trust decision was not shared with the other replicas: {e}");
                    reload.notify_one();
                    break;
                }
            }
        }
        match trust.upgrade() {
            Some(trust) => trust.written(),
            None => return,
        }
    }
}
