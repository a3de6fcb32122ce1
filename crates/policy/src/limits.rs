//! Resource limits of one plugin call, and their defaults: the vocabulary the config fills
//! in and the plugin host enforces. Depends on nothing else in the crate.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits that apply to each call into a plugin (config: `plugins.limits` and
/// `plugins.plugin_limits.<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `timeout_ms`: wall-clock budget for instantiating the plugin and running one call.
    #[serde(with = "duration_ms", rename = "timeout_ms")]
    pub timeout: Duration,
    /// `memory_mib`, in bytes: the most linear memory one instance may hold.
    pub memory_bytes: usize,
    /// `reuse_instance`: keep warm instances between calls instead of a fresh one per call
    /// (default false; the embedded stateless plugins reuse unless the config chooses). Worth it for heavy guests (JavaScript), whose instantiation costs
    /// about a millisecond. The trade-off: the plugin's memory, globals included, persists
    /// from one call to a later one, and idle instances keep their memory. An instance that
    /// faults is thrown away; the deadline is re-armed for every call. Sinks ignore it.
    #[serde(default)]
    pub reuse_instance: bool,
}

impl Limits {
    /// The default deadline of one validator or annotator call: policy runs on every call.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
    /// The default deadline of one sink delivery, HTTP waits included: a remote store may be
    /// slow, and a sink is not on any call's path.
    pub const DEFAULT_SINK_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default deadline of one scan: a scanner reads a whole server's tools, and runs only
    /// for a review or a held call, never on the path of a call that goes through.
    pub const DEFAULT_SCANNER_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default linear-memory cap of one instance.
    pub const DEFAULT_MEMORY_BYTES: usize = 32 << 20;
    /// The longest deadline accepted (`timeout_ms`): a validator runs on every call, so a
    /// minute is already far more than any honest plugin needs.
    pub const MAX_TIMEOUT_MS: u64 = 60_000;
    /// The largest memory cap accepted (`memory_mib`): 4 GiB, all a 32-bit wasm memory holds.
    pub const MAX_MEMORY_MIB: u64 = 4096;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            reuse_instance: false,
        }
    }
}

/// `mib` MiB in bytes, saturating.
pub fn mib_to_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}
