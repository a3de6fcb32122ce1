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

pub(crate) fn check_length(path: &Path) -> Result<(), Error> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::PathTooLong {
            path: path.to_owned(),
            len,
        });
    }
    Ok(())
}
