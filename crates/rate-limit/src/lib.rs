//! Rate limits as token buckets: a bucket's arithmetic under a config
//! [`Limit`](mcpproxy_config::Limit) (a rate and a burst), the [`BucketStore`] that keeps
//! buckets by key and takes tokens from them, the stable [`key`] format, and the in-memory
//! store of a single proxy on a [`Clock`] (the system's, or a test's). A leaf: it knows
//! nothing of the proxy; the proxy's `limits` decides which buckets a call draws from, and a
//! cluster keeps its buckets in PostgreSQL behind the same trait.

mod bucket;
pub mod key;
mod memory;
mod store;
#[cfg(test)]
mod tests;

pub use bucket::Bucket;
pub use memory::{Clock, MemoryBuckets};
pub use store::StoreError;
pub use store::{BucketStore, Take, TakeFuture};
