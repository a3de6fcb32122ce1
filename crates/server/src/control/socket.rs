//! Where a data dir's control socket lives (`<data_dir>/mcpproxy.sock`) and the check that
//! its path fits a Unix socket address.

use std::io;
use std::path::{Path, PathBuf};

/// The control socket's file name in the data dir.
pub const SOCKET_FILE: &str = "mcpproxy.sock";

/// The longest path a Unix socket address takes on Linux (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The control socket of a data dir.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE)
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
pub async fn connect(data_dir: &Path) -> Option<tokio::net::UnixStream> {
    tokio::net::UnixStream::connect(socket_path(data_dir))
        .await
        .ok()
}

/// How long [`answers`] waits for the owner's answer.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether a live owner answers on the socket (`GET /healthz`). Unlike [`connect`], this
/// tells a running owner from a listening socket nobody accepts on (a process that died
/// whose socket a child of it still holds for a moment).
pub async fn answers(data_dir: &Path) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(mut stream) = connect(data_dir).await else {
        return false;
    };
    let asked = async {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await?;
        Ok::<_, io::Error>(head.starts_with(b"HTTP/1.1 200"))
    };
    matches!(tokio::time::timeout(ANSWER_WAIT, asked).await, Ok(Ok(true)))
}

pub fn check_length(path: &Path) -> Result<(), Error> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::PathTooLong {
            path: path.to_owned(),
            len,
        });
    }
    Ok(())
}
