//! Calls that wait for a person, shared by the replicas (`approvals` in a cluster): each
//! waiting call has a row in `mcpproxy_approvals`, put there by the replica where the call
//! waits and taken away when the wait ends. Any replica lists the rows and answers one; an
//! answer is one conditional `UPDATE` (the first answer wins, a second finds the row
//! answered) and a `NOTIFY mcpproxy_approvals` with the approval's id, delivered at commit,
//! which wakes the replica that holds the call ([`Cluster::approval_answers`]).
//!
//! What a row shows (`pending`) is the waiting replica's own JSON, read back as it was
//! written: this crate stores it, the replica that lists it reads it.
//!
//! The questions asked of 2026-07-28 clients through `input_required` are shared too
//! (`mcpproxy_approval_questions`): the client's retry, which carries the answer, may reach
//! any replica, and the one it reaches takes the question (once).

use std::time::Duration;

use tokio::sync::broadcast;

use super::error::Result;
use super::replica::Cluster;

/// The channel answers are announced on; the payload is the approval's id.
pub(crate) const CHANNEL: &str = "mcpproxy_approvals";

/// How long a row stays after its call stopped waiting without taking it away (a replica
/// that died meanwhile): then the next row put in removes it.
const FORGOTTEN_AFTER_SECS: f64 = 3600.0;

/// The longest approval id, in bytes (a replica's ids are 26 characters).
const MAX_ID_BYTES: usize = 128;

/// A person's answer to a shared approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedAnswer {
    pub approve: bool,
    /// Who answered (`cli`, `rest`, `page`) and through which replica.
    pub by: String,
    pub reason: Option<String>,
}

impl Cluster {
    /// Puts the call waiting on `id` among the cluster's pending approvals, shown as
    /// `pending`, until `expires_in` from now; clears rows left by replicas that died.
    pub async fn share_approval(
        &self,
        id: &str,
        pending: &serde_json::Value,
        expires_in: Duration,
    ) -> Result<()> {
        let client = self.client().await?;
        let failed = |e| self.db.failed("sharing a pending approval", &e);
        client
            .execute(
                "DELETE FROM mcpproxy_approvals
                 WHERE expires_at < now() - make_interval(secs => $1::float8)",
                &[&FORGOTTEN_AFTER_SECS],
            )
            .await
            .map_err(failed)?;
        client
            .execute(
                "INSERT INTO mcpproxy_approvals (id, replica, pending, expires_at)
                 VALUES ($1, $2, $3, now() + make_interval(secs => $4::float8))
                 ON CONFLICT (id) DO NOTHING",
                &[&id, &self.replica, pending, &expires_in.as_secs_f64()],
            )
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// Takes the row of `id` away: its call no longer waits.
    pub async fn withdraw_approval(&self, id: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute("DELETE FROM mcpproxy_approvals WHERE id = $1", &[&id])
            .await
            .map_err(|e| self.db.failed("withdrawing a pending approval", &e))?;
        Ok(())
    }

    /// The calls that wait across the cluster, unanswered and not expired, oldest first:
    /// each as its replica showed it.
    pub async fn pending_approvals(&self) -> Result<Vec<serde_json::Value>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT pending FROM mcpproxy_approvals
                 WHERE decision IS NULL AND expires_at > now()
                 ORDER BY pending->>'asked_at', id",
                &[],
            )
            .await
            .map_err(|e| self.db.failed("listing the pending approvals", &e))?;
        Ok(rows
            .iter()
            .filter_map(|row| row.try_get::<_, serde_json::Value>(0).ok())
            .collect())
    }

    /// Answers the call waiting on `id`, wherever it waits: `true` when this answer is the
    /// one taken, `false` when no call waits on `id` (answered already, expired, gone).
    pub async fn answer_approval(&self, id: &str, answer: &SharedAnswer) -> Result<bool> {
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Ok(false);
        }
        // A connection of its own, whose commit waits for the disk: the statements
        // connection's commits do not (`relax_commits`), and an answer is a person's decision.
        let mut client = self.db.connect().await?;
        let failed = |e| self.db.failed("answering a pending approval", &e);
        let tx = client.transaction().await.map_err(failed)?;
        let decision = if answer.approve { "approved" } else { "denied" };
        let by = format!("{}@{}", answer.by, self.replica);
        let taken = tx
            .execute(
                "UPDATE mcpproxy_approvals
                 SET decision = $2, decided_by = $3, reason = $4, decided_at = now()
                 WHERE id = $1 AND decision IS NULL AND expires_at > now()",
                &[&id, &decision, &by, &answer.reason],
            )
            .await
            .map_err(failed)?;
        if taken == 0 {
            return Ok(false);
        }
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &id])
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(true)
    }

    /// The answer given to `id` through any replica, once there is one.
    pub async fn approval_answer(&self, id: &str) -> Result<Option<SharedAnswer>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT decision, decided_by, reason FROM mcpproxy_approvals
                 WHERE id = $1 AND decision IS NOT NULL",
                &[&id],
            )
            .await
            .map_err(|e| self.db.failed("reading an approval's answer", &e))?;
        Ok(row.map(|row| SharedAnswer {
            approve: row.try_get::<_, String>(0).is_ok_and(|d| d == "approved"),
            by: row.try_get(1).unwrap_or_default(),
            reason: row.try_get(2).unwrap_or_default(),
        }))
    }

    /// Keeps the question `id` asked of a 2026-07-28 client (what binds it to its call)
    /// until `expires_in` from now, for whichever replica its retry reaches; clears the
    /// questions that expired.
    pub async fn share_question(
        &self,
        id: &str,
        question: &serde_json::Value,
        expires_in: Duration,
    ) -> Result<()> {
        let client = self.client().await?;
        let failed = |e| self.db.failed("sharing an approval question", &e);
        client
            .execute(
                "DELETE FROM mcpproxy_approval_questions WHERE expires_at < now()",
                &[],
            )
            .await
            .map_err(failed)?;
        client
            .execute(
                "INSERT INTO mcpproxy_approval_questions (id, question, expires_at)
                 VALUES ($1, $2, now() + make_interval(secs => $3::float8))
                 ON CONFLICT (id) DO NOTHING",
                &[&id, question, &expires_in.as_secs_f64()],
            )
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// Takes the question `id` (once: a second take finds nothing), unless it expired.
    pub async fn take_question(&self, id: &str) -> Result<Option<serde_json::Value>> {
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Ok(None);
        }
        let client = self.client().await?;
        let row = client
            .query_opt(
                "DELETE FROM mcpproxy_approval_questions WHERE id = $1
                 RETURNING question, expires_at > now()",
                &[&id],
            )
            .await
            .map_err(|e| self.db.failed("taking an approval question", &e))?;
        Ok(row.and_then(|row| {
            let live = row.try_get::<_, bool>(1).unwrap_or(false);
            row.try_get::<_, serde_json::Value>(0).ok().filter(|_| live)
        }))
    }

    /// The ids of approvals answered through any replica, as they are announced. An answer
    /// announced while the listening connection was down is not heard: whoever waits also
    /// asks [`Cluster::approval_answer`] now and then.
    pub fn approval_answers(&self) -> broadcast::Receiver<String> {
        self.approvals_answered.subscribe()
    }
}
