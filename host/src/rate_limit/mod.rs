//! Rate limits as token buckets: the [`Limit`] of a bucket (a rate and a burst), the
//! [`BucketStore`] that keeps buckets by key and takes tokens from them, the stable
//! [`key`] format, and the in-memory store of a single proxy. A leaf: it knows neither the
//! config nor the proxy; `proxy::limits` decides which buckets a call draws from.

mod bucket;
pub(crate) mod key;
mod memory;
mod store;
#[cfg(test)]
mod tests;

pub(crate) use bucket::Bucket;
#[cfg(test)]
pub(crate) use memory::Clock;
pub(crate) use memory::MemoryBuckets;
pub(crate) use store::StoreError;
pub(crate) use store::{BucketStore, Take, TakeFuture};
