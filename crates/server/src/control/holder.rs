//! Which process holds a file open: for the message of a process that cannot open the
//! journal because another one has it. Reads `/proc/*/fd` (Linux); elsewhere, or for
//! processes of other users, it finds nothing and the message says so.

use std::path::Path;

/// A process that has the file open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command line, arguments joined by spaces, secret-looking ones masked
    /// ([`mcpproxy_auth::masking::mask_args`]), control characters escaped, cut to 200 characters
    /// (`mcpproxy serve --stdio`).
    pub command: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} (`{}`)", self.pid, self.command)
    }
}

/// The file every `serve` keeps open while it runs, owner or front-end, from its first
/// moment (before it loads its plugins or opens the journal, which takes seconds on a cold
/// start): a command that finds it open in an mcpproxy process knows a server is on its way
/// and waits for its control socket, instead of acting on the data dir itself meanwhile.
pub fn serve_marker(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("serve.marker")
}

/// Opens [`serve_marker`] (making the data dir, private, if it is not there yet); the
/// marker holds while the file stays open.
pub fn mark_serving(data_dir: &Path) -> std::io::Result<std::fs::File> {
    mcpproxy_support::create_private_dir(data_dir)?;
    mcpproxy_support::open_private(
        std::fs::OpenOptions::new().create(true).append(true),
        &serve_marker(data_dir),
    )
}

/// The first process other than this one with `file` open, if one can be seen.
pub fn find(file: &Path) -> Option<Holder> {
    let target = std::fs::canonicalize(file).ok()?;
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue; // another user's process, or gone
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|link| link == target));
        if holds {
            return Some(Holder {
                pid,
                command: command_line(&entry.path()),
            });
        }
    }
    None
}

fn command_line(proc_dir: &Path) -> String {
    let raw = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    // Another process's command line may carry a token (`--api-key ...`): masked.
    let joined = mcpproxy_auth::masking::mask_args(&parts).join(" ");
    let mut shown = mcpproxy_support::quote(&joined);
    if shown.chars().count() > 200 {
        shown = shown.chars().take(199).collect::<String>() + "…";
    }
    if shown.is_empty() {
        "?".to_owned()
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_child_that_holds_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("held");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(find(&file), None, "nobody holds it yet");
        // A child that opens the file on stdin and waits.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open(&file).unwrap())
            .spawn()
            .unwrap();
        // `spawn` returns once the child's exec has begun, but the kernel fills in its
        // command line a moment later (and another test's child, forked but not yet
        // exec'd, may hold the descriptor for an instant): look again until the
        // finished child is seen, for at most 10 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let holder = loop {
            let holder = find(&file);
            let settled = holder
                .as_ref()
                .is_some_and(|h| h.pid == child.id() && h.command != "?");
            if settled || std::time::Instant::now() > deadline {
                break holder;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let holder = holder.expect("the child holds it");
        assert_eq!(holder.pid, child.id());
        assert_eq!(holder.command, "sleep 30");
    }
}
