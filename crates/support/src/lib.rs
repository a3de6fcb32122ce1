//! The small helpers every crate of mcpproxy uses, and nothing else:
//!
//! - [`lock`], [`read_lock`] and [`write_lock`]: `std::sync` locks taken without panicking on
//!   poison (module `sync`). They are the only place in the workspace that calls
//!   `Mutex::lock`, `RwLock::read` or `RwLock::write` directly; `clippy.toml` refuses those
//!   calls everywhere else;
//! - [`quote`] and [`is_unprintable`]: text from outside made safe to print (module `text`);
//! - files and directories only their owner can use, 0600 and 0700 whatever the umask
//!   ([`create_private_dir`], [`open_private`], [`write_private_atomically`], ...; module
//!   `private_fs`).
//!
//! This crate is the bottom of the workspace graph: it depends on no other crate of
//! mcpproxy and on nothing outside the standard library. It knows nothing of policy, MCP,
//! WebAssembly or an async runtime.

mod private_fs;
mod sync;
mod text;

pub use private_fs::{
    DIR_MODE, FILE_MODE, create_private_dir, create_private_file, open_private,
    prepare_private_file, restrict, write_private_atomically,
};
pub use sync::{lock, read as read_lock, write as write_lock};
pub use text::{cut_to, is_unprintable, quote};
