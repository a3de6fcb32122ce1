//! This replica's link to the shared state ([`Cluster`]): joining (connect, migrate, load the
//! trust decisions), the writer of this replica's trust changes, and the listening
//! connection through which the other replicas' changes arrive.
//!
//! The listener holds one connection that does `LISTEN` on the cluster's channels. A
//! notification on `mcpproxy_trust` reloads the trust decisions (one snapshot) and hands them
//! to the store ([`TrustStore::replace`]), whose subscribers apply them as a local decision
//! would be applied. When the connection breaks it is made again, with a growing pause, and
//! everything is reloaded: notifications sent meanwhile are lost. A notification on
//! `mcpproxy_servers` wakes whoever waits in [`Cluster::servers_changed`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::connect::Database;
use super::error::{Error, Result};
use super::{approvals, migrate, servers, status, trust_sync};
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::ClusterConfig;
use mcpproxy_trust::TrustStore;

/// How many announced answers a slow listener may fall behind by (then it reads the rows).
const APPROVAL_ANSWERS: usize = 256;

/// The longest pause between two attempts to listen again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// This replica's link to the shared state.
pub struct Cluster {
    pub(super) db: Database,
    /// This replica's name (`cluster.replica`, else `replica-<pid>@<host>`).
    pub(super) replica: String,
    trust: Arc<TrustStore>,
    /// Asks the listener to reload the trust decisions (a write the database refused).
    reload: Arc<Notify>,
    /// One connection for single statements, made again when it breaks.
    pub(super) statements: tokio::sync::Mutex<Option<Arc<Client>>>,
    /// Woken when the cluster's servers may have changed.
    servers_changed: Notify,
    /// The ids of approvals answered through any replica (`NOTIFY mcpproxy_approvals`).
    pub(super) approvals_answered: tokio::sync::broadcast::Sender<String>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("db", &self.db)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects to `config.postgres`, brings its schema up to date, loads the trust
    /// decisions and starts this replica's writer and listener (until `shutdown`).
    pub async fn join(
        config: &ClusterConfig,
        credentials: &CredentialStore,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>> {
        let url = config
            .postgres
            .as_deref()
            .ok_or_else(|| Error::Url("is not set".to_owned()))?;
        let db = Database::from_url(url, credentials)?;
        let replica = config.replica.clone().unwrap_or_else(default_replica);
        let mut client = db.connect().await?;
        let applied = migrate::migrate(&db, &mut client, &replica).await?;
        if let Some(version) = applied.last() {
            tracing::info!(
                "the shared state at {} is now at schema version {version}",
                db.target()
            );
        }
        let state = trust_sync::load(&db, &mut client).await?;
        relax_commits(&db, &client).await?;
        let (trust, writes) = TrustStore::shared(state);
        let trust = Arc::new(trust);
        let reload = Arc::new(Notify::new());
        tokio::spawn(trust_sync::run_writer(
            db.clone(),
            Arc::downgrade(&trust),
            writes,
            reload.clone(),
            replica.clone(),
        ));
        let cluster = Arc::new(Self {
            db,
            replica,
            trust,
            reload,
            statements: tokio::sync::Mutex::new(Some(Arc::new(client))),
            servers_changed: Notify::new(),
            approvals_answered: tokio::sync::broadcast::channel(APPROVAL_ANSWERS).0,
        });
        tokio::spawn(listen(Arc::downgrade(&cluster), shutdown.clone()));
        tokio::spawn(heartbeat(Arc::downgrade(&cluster), shutdown));
        tracing::info!(
            "replica {} shares its state through PostgreSQL at {}",
            cluster.replica,
            cluster.db.target()
        );
        Ok(cluster)
    }

    /// Passes an answered approval's id on to whoever waits (nobody may: that is fine).
    fn announce_answer(&self, note: &tokio_postgres::Notification) {
        if note.channel() == approvals::CHANNEL {
            let _ = self.approvals_answered.send(note.payload().to_owned());
        }
    }

    /// The trust decisions the replicas share.
    pub fn trust(&self) -> &Arc<TrustStore> {
        &self.trust
    }

    /// Waits until the cluster's servers may have changed (another replica's change, or
    /// the listening connection made again).
    pub async fn servers_changed(&self) {
        self.servers_changed.notified().await;
    }

    /// The connection for single statements, made again if it broke.
    pub(super) async fn client(&self) -> Result<Arc<Client>> {
        let mut slot = self.statements.lock().await;
        if let Some(client) = slot.as_ref()
            && !client.is_closed()
        {
            return Ok(client.clone());
        }
        let client = self.db.connect().await?;
        relax_commits(&self.db, &client).await?;
        let client = Arc::new(client);
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Reads the trust decisions and hands them to the store; `false` when the store has
    /// changes of its own still on their way (read again once they are written).
    async fn reload_trust(&self, client: &mut Client) -> bool {
        // Taken before reading: a change this replica sends meanwhile, or one still on its
        // way as the read begins, may be missing from what is read (even once written), and
        // the state read must not replace it here.
        let Some(mark) = self.trust.read_mark() else {
            return false;
        };
        match trust_sync::load(&self.db, client).await {
            Ok(state) => self.trust.replace_since(state, Some(mark)),
            Err(e) => {
                tracing::error!("cannot read the trust decisions other replicas made: {e}");
                true
            }
        }
    }
}

/// The connection for single statements (rate-limit takes, heartbeats, reads) does not wait
/// for its commits to reach the disk: a crash of the database may forget the last few takes
/// and beats, never a trust decision or a server change (those use other connections).
async fn relax_commits(db: &Database, client: &Client) -> Result<()> {
    client
        .batch_execute("SET synchronous_commit = off")
        .await
        .map_err(|e| db.failed("setting up the connection", &e))
}

/// `replica-<pid>@<host name>`, for a replica `cluster.replica` does not name.
fn default_replica() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    mcpproxy_support::quote(&format!("replica-{}@{host}", std::process::id()))
}

/// Writes this replica's heartbeat every [`status::HEARTBEAT`] until `shutdown`.
async fn heartbeat(cluster: std::sync::Weak<Cluster>, shutdown: CancellationToken) {
    let mut first = true;
    let mut ticks = tokio::time::interval(status::HEARTBEAT);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(link) = cluster.upgrade() else {
            return;
        };
        let beat = match link.client().await {
            Ok(client) => status::beat(&link.db, &client, &link.replica, first).await,
            Err(e) => Err(e),
        };
        match beat {
            Ok(()) => first = false,
            Err(e) => tracing::warn!("{e}"),
        }
    }
}

/// Listens for the other replicas' changes until `shutdown` (or until the cluster is gone).
async fn listen(cluster: std::sync::Weak<Cluster>, shutdown: CancellationToken) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let Some(link) = cluster.upgrade() else {
            return;
        };
        let listening = match link.db.connect_listening().await {
            Ok((client, notes)) => match client
                .batch_execute(&format!(
                    "LISTEN {}; LISTEN {}; LISTEN {}",
                    trust_sync::CHANNEL,
                    servers::CHANNEL,
                    approvals::CHANNEL
                ))
                .await
            {
                Ok(()) => Some((client, notes)),
                Err(e) => {
                    tracing::warn!("{}", link.db.failed("listening", &e));
                    None
                }
            },
            Err(e) => {
                tracing::warn!("cannot hear the other replicas' changes: {e}");
                None
            }
        };
        let Some((mut client, mut notes)) = listening else {
            drop(link);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        };
        backoff = Duration::from_millis(200);
        // Whatever was announced while nobody listened: read it all.
        let mut stale = !link.reload_trust(&mut client).await;
        link.servers_changed.notify_one();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                note = notes.recv() => {
                    let Some(note) = note else { break };
                    let mut trust = note.channel() == trust_sync::CHANNEL;
                    let mut servers = note.channel() == servers::CHANNEL;
                    link.announce_answer(&note);
                    while let Ok(more) = notes.try_recv() {
                        trust |= more.channel() == trust_sync::CHANNEL;
                        servers |= more.channel() == servers::CHANNEL;
                        link.announce_answer(&more);
                    }
                    if trust {
                        stale = !link.reload_trust(&mut client).await;
                    }
                    if servers {
                        link.servers_changed.notify_one();
                    }
                }
                () = link.trust.settled(), if stale => {
                    stale = !link.reload_trust(&mut client).await;
                }
                () = link.reload.notified() => {
                    stale = !link.reload_trust(&mut client).await;
                }
            }
        }
        tracing::warn!(
            "lost the listening connection to PostgreSQL at {}; connecting again",
            link.db.target()
        );
    }
}
