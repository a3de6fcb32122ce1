//! `mcpproxy activity list`, `show`, `export`, `stats`, `watch`, `sinks`, `repair`, `verify`,
//! `key` and `checkpoint`: the audit trail and its delivery to sinks, read from the running server's REST
//! API when one is up, else from the journal file; `repair` saves the readable records of a
//! damaged journal file (offline only); `verify` walks its hash chain.
//!
//! - [`command`]: the subcommands and their dispatch (and the quiet redb panic hook);
//! - [`store`]: where records come from, the server or the journal file;
//! - [`filter`]: the filters `list`, `export`, `stats` and `watch` share;
//! - [`record`]: a record as the commands read it, once, from the server's JSON or the journal;
//! - [`render`]: the labels every record view uses (intent, status, reason);
//! - one module per subcommand: [`list`], [`show`], [`export`], [`stats`], [`watch`],
//!   [`sinks`], [`repair`], [`verify`] (`verify` and `key`: the hash chain), [`checkpoint`]
//!   (the head signed now, pushed to a witness); [`tree`], a
//!   `code_execution`'s inner calls under it in `show`.

mod checkpoint;
mod command;
mod export;
mod filter;
mod list;
mod record;
mod render;
mod repair;
mod show;
mod sinks;
mod stats;
mod store;
mod tree;
mod verify;
mod watch;

pub(super) use command::ActivityCommand;
