//! One owner per data dir, many front-ends.
//!
//! The process that holds the activity journal (redb lets one process open it) is the
//! data dir's **owner**. It also listens on the control socket `<data_dir>/mcpproxy.sock`, a
//! Unix socket of mode 0600: the file's permissions are the authentication, so only the user
//! who owns the data dir can reach it. On that socket the owner answers
//!
//! - HTTP/1.1: the same routes as its TCP listener (`/mcp`, `/api/v1`, `/metrics`, `/`),
//!   which the CLI uses to list activity, call tools and manage upstreams; and
//! - newline-delimited JSON-RPC: an MCP session exactly as on stdio, which a front-end
//!   `serve --stdio` forwards its IDE's session to. The first byte tells them apart (`{`
//!   starts JSON-RPC; HTTP starts with a method name).
//!
//! Every other mcpproxy process on the data dir is a front-end: [`bridge`] carries an IDE's
//! stdio session to the owner (and back to a new owner after the owner restarts), [`relay`]
//! forwards TCP connections when the owner serves stdio only. [`owner`] binds and serves the
//! socket. [`holder`] names the process that holds a data dir, for the message of a
//! second would-be owner.

pub(crate) mod bridge;
pub(crate) mod holder;
pub(crate) mod owner;
pub(crate) mod relay;

use std::io;
use std::path::{Path, PathBuf};

/// The control socket's file name in the data dir.
pub(crate) const SOCKET_FILE: &str = "mcpproxy.sock";

/// The longest path a Unix socket address takes on Linux (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The control socket of a data dir.
pub(crate) fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE)
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(
        "the control socket path {} is {len} bytes, more than the {MAX_SOCKET_PATH} a Unix socket takes: use a shorter --data-dir",
        path.display()
    )]
    PathTooLong { path: PathBuf, len: usize },
    #[error("cannot listen on the control socket {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
}

/// The owner's socket, connected; `None` when no owner answers (no socket file, or one left
/// by an owner that died).
pub(crate) async fn connect(data_dir: &Path) -> Option<tokio::net::UnixStream> {
    tokio::net::UnixStream::connect(socket_path(data_dir))
        .await
        .ok()
}

fn check_length(path: &Path) -> Result<(), Error> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::PathTooLong {
            path: path.to_owned(),
            len,
        });
    }
    Ok(())
}
