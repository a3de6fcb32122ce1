//! The HTTP front-end: when the data dir's owner serves stdio only (an IDE started it), a
//! `serve` on a loopback address forwards each TCP connection to the owner's control
//! socket, byte for byte, so the owner answers `/mcp`, `/api/v1` and the page as if it
//! listened there itself.

use std::path::PathBuf;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Forwards connections from `listener` to the owner of `data_dir` until `shutdown`.
pub(crate) async fn serve(listener: TcpListener, data_dir: PathBuf, shutdown: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((mut client, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let data_dir = data_dir.clone();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let _ = client.set_nodelay(true);
            match super::connect(&data_dir).await {
                Some(mut owner) => {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut owner) => {}
                        _ = stop.cancelled() => {}
                    }
                }
                None => refuse(client, &data_dir).await,
            }
        });
    }
    connections.close();
    connections.wait().await;
}

/// A 503 that says why: the owner this front-end forwards to is gone.
async fn refuse(mut client: TcpStream, data_dir: &std::path::Path) {
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":-32000,\"message\":\"mcpproxy is not running for {}: this front-end forwards to the process that owns it, which stopped. Start `mcpproxy serve` there again.\"}}}}",
        data_dir
            .display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}
