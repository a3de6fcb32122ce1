//! `cluster`: several replicas of the proxy behind one load balancer. Each part is optional:
//! a PostgreSQL database holds the state they share (approvals, pins, held tools, upstream
//! servers, shared rate limits), a sink plugin's store is read back as the cluster's
//! journal, and the replica's name is what a load balancer keys sticky sessions on.

/// The validated `cluster` object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The PostgreSQL connection URL of the shared state (`postgres://` or `postgresql://`,
    /// `${env:NAME}`/`${secret:NAME}` references allowed, resolved at start). `None`: the
    /// state stays in this replica's data dir.
    pub postgres: Option<String>,
    /// This replica's name: sent to clients in the `Mcpproxy-Replica` header and cookie so a
    /// load balancer can keep a session on the replica that holds it. `None`: no sticky hint.
    pub replica: Option<String>,
    /// The sink plugin (listed in `plugins.sinks`) whose store is the cluster's journal:
    /// `activity --cluster` and the REST API read the shared audit trail from it.
    pub journal: Option<String>,
}

impl ClusterConfig {
    /// The longest replica name.
    pub const MAX_REPLICA_LEN: usize = 63;
}
