//! The cluster's upstream servers in PostgreSQL (`mcpproxy_servers`): every replica runs the
//! same `mcpServers`, whatever its own config file says.
//!
//! Seeding: the first replica that ever joins the cluster writes its file's `mcpServers` to
//! the table (once: `servers_seeded` in `mcpproxy_meta`, under an advisory lock). From then
//! on the table is the list: a replica's file keeps its other settings, its `mcpServers` are
//! ignored (with a warning when they differ), so an agent that writes a replica's local file
//! cannot change the team's servers. Changes go through a replica's management API
//! (`upstream add/remove/enable/disable`, REST, the `upstream_servers` tool): the change is
//! made to the cluster's list, validated with the replica's file as a whole config exactly as
//! a file edit is, and written in one transaction that notifies every replica
//! (`NOTIFY mcpproxy_servers`); each applies it as it applies a hand edit of its file.

use std::path::Path;

use serde_json::Value;

use super::error::{Error, Result};
use super::replica::Cluster;
use mcpproxy_config::document::{Document, EditError};
use mcpproxy_config::{self as config, Config};

/// The channel server changes are announced on; the payload is the server's name.
pub(crate) const CHANNEL: &str = "mcpproxy_servers";

/// The advisory lock of the seeding ("mcpproxy" + 1).
const SEED_LOCK_KEY: i64 = 0x6d63_7070_726f_787a;

/// Why a change to the cluster's servers was not made.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("{0}")]
    Edit(#[from] EditError),
    /// The change would make the config invalid.
    #[error("{0}")]
    Invalid(config::Error),
    /// The replica's file (with the cluster's servers) is not a valid config.
    #[error("{0}")]
    Read(config::Error),
    /// `management.read_only`.
    #[error("server management is read-only")]
    ReadOnly,
    #[error("{0}")]
    Shared(#[from] Error),
}

/// The config a replica runs: its file (`path`; absent: every default) with the cluster's
/// servers, validated as a whole. Also returns whether the file's own `mcpServers` differ
/// from the cluster's (they are ignored).
pub fn config_with_servers(
    path: Option<&Path>,
    home: Option<&Path>,
    servers: &[(String, Value)],
) -> std::result::Result<(Config, bool), config::Error> {
    let text = file_text(path)?;
    let file_servers = Document::parse(&text)
        .map(|d| d.servers())
        .unwrap_or_default();
    let differs = file_servers
        .iter()
        .map(|(name, entry)| (name.clone(), without_name(entry)))
        .collect::<Vec<_>>()
        != servers;
    let text = with_servers(&text, servers);
    Ok((validate(path, home, &text)?, differs))
}

/// The file's text, empty when there is no file.
fn file_text(path: Option<&Path>) -> std::result::Result<String, config::Error> {
    match path {
        Some(path) if path.exists() => config::read_bounded(path),
        _ => Ok(String::new()),
    }
}

/// `text` (a config, or empty) with `mcpServers` replaced by `servers` (a list).
fn with_servers(text: &str, servers: &[(String, Value)]) -> String {
    let mut root: Value =
        serde_json::from_str(text).unwrap_or_else(|_| Value::Object(Default::default()));
    if !root.is_object() {
        root = Value::Object(Default::default());
    }
    let list: Vec<Value> = servers
        .iter()
        .map(|(name, entry)| {
            let mut fields = serde_json::Map::new();
            fields.insert("name".to_owned(), Value::String(name.clone()));
            if let Some(entry) = entry.as_object() {
                for (key, value) in entry {
                    if key != "name" {
                        fields.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(fields)
        })
        .collect();
    root["mcpServers"] = Value::Array(list);
    root.to_string()
}

fn without_name(entry: &Value) -> Value {
    let mut entry = entry.clone();
    if let Some(fields) = entry.as_object_mut() {
        fields.remove("name");
    }
    entry
}

fn validate(
    path: Option<&Path>,
    home: Option<&Path>,
    text: &str,
) -> std::result::Result<Config, config::Error> {
    let dir = path.and_then(Path::parent).unwrap_or(Path::new(""));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let origin = path.map_or_else(
        || "the cluster's mcpServers".to_owned(),
        |p| format!("{} with the cluster's mcpServers", p.display()),
    );
    Config::from_json_in(text, &origin, &dir, home)
}

impl Cluster {
    /// The cluster's servers, `(name, entry)` in the order they were added.
    pub async fn servers(&self) -> Result<Vec<(String, Value)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, entry FROM mcpproxy_servers ORDER BY position",
                &[],
            )
            .await
            .map_err(|e| self.db.failed("reading the servers", &e))?;
        rows.iter()
            .map(|row| {
                let name: String = row
                    .try_get(0)
                    .map_err(|e| self.db.failed("reading the servers", &e))?;
                let entry: Value = row
                    .try_get(1)
                    .map_err(|e| self.db.failed("reading the servers", &e))?;
                Ok((name, entry))
            })
            .collect()
    }

    /// The servers at this replica's start: the first replica ever seeds the table with
    /// `seed` (its file's servers); every later one reads what the table holds.
    pub async fn servers_at_start(&self, seed: &[(String, Value)]) -> Result<Vec<(String, Value)>> {
        let mut client = self.db.connect().await?;
        let failed = |e| self.db.failed("seeding the servers", &e);
        let tx = client.transaction().await.map_err(failed)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SEED_LOCK_KEY])
            .await
            .map_err(failed)?;
        let seeded = tx
            .query_opt(
                "SELECT value FROM mcpproxy_meta WHERE key = 'servers_seeded'",
                &[],
            )
            .await
            .map_err(failed)?
            .is_some();
        if !seeded {
            for (name, entry) in seed {
                tx.execute(
                    "INSERT INTO mcpproxy_servers (name, entry, updated_by) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO NOTHING",
                    &[name, &without_name(entry), &self.replica],
                )
                .await
                .map_err(failed)?;
            }
            tx.execute(
                "INSERT INTO mcpproxy_meta (key, value) VALUES ('servers_seeded', $1)",
                &[&self.replica],
            )
            .await
            .map_err(failed)?;
            tracing::info!(
                "the cluster's servers are seeded from this replica's config file ({} servers)",
                seed.len()
            );
        }
        tx.commit().await.map_err(failed)?;
        self.servers().await
    }

    /// Makes a change to the cluster's servers: `edit` applied to this replica's file with
    /// the cluster's servers, the result validated as a whole config, and the one server
    /// it changed (`name`) written in one transaction with its notification. Returns the
    /// config as changed.
    pub async fn change_server(
        &self,
        path: Option<&Path>,
        home: Option<&Path>,
        name: &str,
        edit: impl FnOnce(&mut Document) -> std::result::Result<(), EditError>,
    ) -> std::result::Result<Config, ChangeError> {
        let servers = self.servers().await?;
        let text = with_servers(&file_text(path).map_err(ChangeError::Read)?, &servers);
        validate(path, home, &text).map_err(ChangeError::Read)?;
        let mut document = Document::parse(&text)?;
        edit(&mut document)?;
        let text = document.to_text();
        let config = validate(path, home, &text).map_err(ChangeError::Invalid)?;
        if config.management.read_only {
            return Err(ChangeError::ReadOnly);
        }
        let before = servers.iter().any(|(n, _)| n == name);
        let after = document
            .servers()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, entry)| without_name(&entry));
        let mut client = self.db.connect().await?;
        let failed = |e| self.db.failed("changing the servers", &e);
        let tx = client.transaction().await.map_err(failed)?;
        let rows = match (&after, before) {
            (Some(entry), false) => {
                tx.execute(
                    "INSERT INTO mcpproxy_servers (name, entry, updated_by) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO NOTHING",
                    &[&name, entry, &self.replica],
                )
                .await
            }
            (Some(entry), true) => {
                tx.execute(
                    "UPDATE mcpproxy_servers SET entry = $2, updated_at = now(), updated_by = $3 \
                     WHERE name = $1",
                    &[&name, entry, &self.replica],
                )
                .await
            }
            (None, _) => {
                tx.execute("DELETE FROM mcpproxy_servers WHERE name = $1", &[&name])
                    .await
            }
        }
        .map_err(failed)?;
        if rows != 1 {
            // Another replica changed the same server meanwhile: nothing is written.
            return Err(ChangeError::Edit(if before {
                EditError::NoSuchServer(name.to_owned())
            } else {
                EditError::Exists(name.to_owned())
            }));
        }
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &name])
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_servers_replace_the_files_and_keep_its_other_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp_config.json");
        std::fs::write(
            &path,
            r#"{"listen": "127.0.0.1:9999", "mcpServers": {"local": {"command": "evil"}}}"#,
        )
        .unwrap();
        let servers = vec![(
            "team".to_owned(),
            serde_json::json!({"url": "http://127.0.0.1:1/mcp"}),
        )];
        let (config, differs) = config_with_servers(Some(&path), None, &servers).unwrap();
        assert!(differs);
        assert_eq!(config.listen.port(), 9999);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["team"]);
        let (_, differs) = config_with_servers(None, None, &servers).unwrap();
        assert!(differs);
        let (config, differs) = config_with_servers(None, None, &[]).unwrap();
        assert!(!differs);
        assert!(config.servers.is_empty());
    }
}
