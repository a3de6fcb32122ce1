//! A real HAProxy (Debian's `haproxy`) in front of `mcpproxy serve` replicas, started and
//! owned by the test that needs it.
//!
//! [`HaProxy`] writes a config into a private temp dir and runs `haproxy -db` (foreground,
//! our direct child) listening only on 127.0.0.1 at a free port; `Drop` kills it. The
//! backend is the one docs/deploy-team.md shows: round robin over the replicas, a
//! `/healthz` check every 500 ms, sessions kept on their replica by the `Mcp-Session-Id` the
//! replica answered with (a stick table) or by the `mcpproxy_replica` cookie it set, and a
//! request that cannot reach a dead replica sent to another one (`option redispatch`).
//!
//! Without `haproxy` installed, [`HaProxy::start`] returns `None` and the calling test
//! should return early (skip), unless `MCPPROXY_REQUIRE_HAPROXY` is set (CI sets it): then a
//! missing balancer is a panic, so CI cannot go green by skipping.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Set (to anything but empty or `0`) to make a missing HAProxy a failure, not a skip.
pub(crate) const REQUIRE_ENV: &str = "MCPPROXY_REQUIRE_HAPROXY";

/// How long HAProxy may take to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// One replica behind the balancer: its `cluster.replica` name and where it listens.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    pub name: String,
    pub addr: SocketAddr,
}

/// A running HAProxy; killed on drop.
pub(crate) struct HaProxy {
    child: Child,
    _dir: tempfile::TempDir,
    port: u16,
}

impl HaProxy {
    /// Starts HAProxy in front of `backends`; `None` (with a note) when it is not installed
    /// and `MCPPROXY_REQUIRE_HAPROXY` is unset.
    pub(crate) fn start(backends: &[Backend]) -> Option<Self> {
        let Some(binary) = find_haproxy() else {
            if required() {
                panic!(
                    "{REQUIRE_ENV} is set but haproxy is not installed; install it, e.g. \
                     `apt-get install haproxy`"
                );
            }
            eprintln!("skipped: haproxy is not installed (apt-get install haproxy)");
            return None;
        };
        let dir = tempfile::tempdir().expect("haproxy temp dir");
        let port = free_port();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(&config, config_text(port, backends)).expect("write haproxy.cfg");
        let check = Command::new(&binary)
            .args(["-c", "-q", "-f"])
            .arg(&config)
            .output()
            .expect("run haproxy -c");
        assert!(
            check.status.success(),
            "haproxy refused its config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(&binary)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let proxy = Self {
            child,
            _dir: dir,
            port,
        };
        let what = format!("haproxy listens on {port}");
        crate::support::poll::until_blocking(&what, READY_TIMEOUT, || {
            let connected = TcpStream::connect(("127.0.0.1", port));
            connected.map(drop).map_err(|e| e.to_string())
        });
        Some(proxy)
    }

    /// The balanced `/mcp`.
    pub(crate) fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config docs/deploy-team.md shows, for `backends` behind 127.0.0.1:`port`.
pub(crate) fn config_text(port: u16, backends: &[Backend]) -> String {
    let mut text = format!(
        "global
  maxconn 4096

defaults
  mode http
  timeout connect 2s
  # A health check may take 5 s (the default is its 500 ms interval): a replica slowed by a
  # loaded machine is not marked down, while a stopped one still fails its checks at once
  # (connection refused) and is out after two of them.
  timeout check 5s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch

frontend mcp
  bind 127.0.0.1:{port}
  default_backend replicas

backend replicas
  balance roundrobin
  option httpchk
  http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
  http-check expect status 200
  cookie mcpproxy_replica
  stick-table type string len 128 size 100k expire 30m
  stick on req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
"
    );
    for backend in backends {
        let _ = writeln!(
            text,
            "  server {name} {addr} check inter 500ms fall 2 rise 1 cookie {name}",
            name = backend.name,
            addr = backend.addr
        );
    }
    text
}

fn find_haproxy() -> Option<PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/local/sbin/haproxy",
        "/usr/bin/haproxy",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A port free on 127.0.0.1 now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
