//! A real PostgreSQL server for tests, started and owned by the test that needs it.
//!
//! [`Postgres`] owns one `postgres` process listening only on 127.0.0.1 (a port the OS
//! picked free) and on a unix socket in its own temp dir, which also holds the cluster made
//! by `initdb` (`data/`) and the server's log (`postgres.log`). Trust authentication for
//! loopback: the tests connect as the `postgres` superuser without a password. `Drop` stops
//! it (a fast shutdown, then SIGKILL) and removes the dir.
//!
//! `initdb` refuses to run as root: as root (CI, the sandbox), `initdb` and `postgres` run as
//! the `postgres` user (`setpriv`), on a temp dir handed to that user.
//!
//! Without the binaries (Debian's `postgresql`: `/usr/lib/postgresql/<version>/bin`, or
//! `pg_config --bindir`), [`Postgres::start`] returns `None` and the calling test should
//! return early (skip), unless `MCPPROXY_REQUIRE_POSTGRES` is set (CI sets it): then a
//! missing server is a panic, so CI cannot go green by skipping.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set (to anything but empty or `0`) to make a missing PostgreSQL a failure, not a skip.
pub(crate) const REQUIRE_ENV: &str = "MCPPROXY_REQUIRE_POSTGRES";

/// How long a start may take before the test fails with the server's log.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// A start whose freshly picked port was taken in the meantime picks another.
const PORT_ATTEMPTS: u32 = 5;

/// A PostgreSQL server on loopback in its own temp dir; stopped on drop.
pub(crate) struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
    /// `setpriv ...` to run as the `postgres` user (when we are root).
    as_user: Option<Vec<String>>,
}

impl Postgres {
    /// Makes a fresh cluster and starts a server on it; `None` (with a note on stderr) when
    /// PostgreSQL is not installed and `MCPPROXY_REQUIRE_POSTGRES` is unset.
    pub(crate) fn start() -> Option<Self> {
        let Some(bin) = find_bin() else {
            if required() {
                panic!(
                    "{REQUIRE_ENV} is set but PostgreSQL is not installed (looked in \
                     /usr/lib/postgresql/*/bin and `pg_config --bindir`); install it, e.g. \
                     `apt-get install postgresql` (.ci/run does)"
                );
            }
            eprintln!(
                "note: PostgreSQL is not installed; skipping this PostgreSQL test \
                 (set {REQUIRE_ENV}=1 to make that a failure)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("mcpproxy-postgres-")
            .tempdir()
            .expect("create a temp dir for PostgreSQL");
        let as_user = is_root().then(|| {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("run chown");
            assert!(
                status.success(),
                "cannot hand {} to the postgres user (is there one? Debian's postgresql \
                 package makes it)",
                dir.path().display()
            );
            vec![
                "setpriv".to_owned(),
                "--reuid=postgres".to_owned(),
                "--regid=postgres".to_owned(),
                "--init-groups".to_owned(),
            ]
        });
        let mut pg = Self {
            dir,
            bin,
            port: 0,
            child: None,
            as_user,
        };
        let initdb = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.data())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            initdb.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&initdb.stdout),
            String::from_utf8_lossy(&initdb.stderr)
        );
        for _ in 0..PORT_ATTEMPTS {
            pg.port = free_port();
            if pg.launch() {
                return Some(pg);
            }
        }
        panic!(
            "PostgreSQL found no free port in {PORT_ATTEMPTS} attempts:\n{}",
            pg.log()
        );
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable`.
    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// [`Postgres::url`] for another role (made with [`Postgres::psql`]; loopback is trusted,
    /// so no password).
    pub(crate) fn url_as(&self, role: &str) -> String {
        format!(
            "postgres://{role}@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Runs `sql` with `psql` and returns its unaligned, tuples-only output; panics on
    /// failure.
    pub(crate) fn psql(&self, sql: &str) -> String {
        let out = self
            .command("psql")
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "postgres",
                "-h",
            ])
            .arg(self.dir.path())
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-d", "postgres", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql -c {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The server's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `tool` from the binaries' dir, run as the postgres user when we are root.
    fn command(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        match &self.as_user {
            Some(prefix) => {
                let mut command = Command::new(&prefix[0]);
                command.args(&prefix[1..]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// Starts the server on `self.port`; `false` when the port was taken.
    fn launch(&mut self) -> bool {
        let log_path = self.dir.path().join("postgres.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open the PostgreSQL log");
        let mark = log.metadata().map_or(0, |m| m.len()) as usize;
        let mut child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=100",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let log = self.log();
            let own = log.get(mark..).unwrap_or("");
            if own.contains("database system is ready to accept connections") {
                self.child = Some(child);
                return true;
            }
            if let Ok(Some(status)) = child.try_wait() {
                if own.contains("could not bind") || own.contains("Address already in use") {
                    return false;
                }
                panic!("postgres exited ({status}) before it was ready:\n{own}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("postgres was not ready within {READY_TIMEOUT:?}:\n{own}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server: a fast shutdown (SIGINT), SIGKILL after ten seconds.
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// The newest `/usr/lib/postgresql/<version>/bin` with `initdb` and `postgres`, else
/// `pg_config --bindir`.
fn find_bin() -> Option<PathBuf> {
    let complete = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| complete(bin))
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    complete(&bin).then_some(bin)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
