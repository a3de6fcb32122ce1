//! Trust in upstream servers and their tools: which quarantined servers a person approved,
//! and the pinned form of every approved tool, so a tool that changes after approval (a
//! "rug pull") is held back until someone looks at it.
//!
//! - [`LaunchSpec`]: how a server starts or where it connects, reduced to the fingerprint an
//!   approval is bound to ([`Standing`]: approved, quarantined, or its launch not approved);
//! - [`TrustStore`]: the decisions, durable in `<data dir>/trust.json` (written to a
//!   temporary file, synced and renamed, so a crash leaves the old file or the new one), or
//!   shared by the replicas of a cluster ([`TrustStore::shared`]: kept in memory, each
//!   change handed to the `cluster` module's writer, the state others wrote taken back
//!   with [`TrustStore::replace`]), where a tool one replica sees change is [`HeldTool`] on
//!   all;
//! - [`pin`]: a tool's SHA-256 fingerprint over everything the policy reads about it (name,
//!   description, input and output schema, annotations with their title, `_meta`; JSON
//!   with sorted keys, so key order never counts as a change), and the pins of earlier
//!   formats compared and upgraded in their own form;
//! - [`Review`]: a listed tool set held against the pins: trusted, new, changed (with a
//!   [`ToolDiff`]);
//! - [`Finding`] and the [`ToolScanner`] trait: what a scanner plugin reports about tools,
//!   for the security analysis a reviewer reads before approving.

mod launch;
mod pin;
mod review;
mod store;

use pin::hex;

pub use launch::{LaunchSpec, LaunchView, ShownValues, parse_fingerprint};

pub use pin::{ToolDiff, fingerprint, has_outdated_pins, upgrade_pins};
pub use review::{Analysis, Error, Result, Review, ToolStanding};
pub use store::{HeldTool, PinnedTool, ServerTrust, Standing, TrustState, TrustStore, TrustWrite};
