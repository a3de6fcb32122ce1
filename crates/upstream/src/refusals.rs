//! What a sandboxed server was refused, read from what it said (its stderr: Node's
//! `EACCES: permission denied, open '/path'`, Python's `PermissionError: [Errno 13]
//! Permission denied: '/path'`, a shell's `/path: Permission denied`) and from its egress
//! proxy's refusals, turned into the `isolation` keys that would allow it: for the start
//! error, `upstream logs` and `upstream inspect`. A suggestion is never applied: a person
//! adds it (and approves the changed launch).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use mcpproxy_egress::EgressStats;
use mcpproxy_sandbox::ForbiddenPath;
use serde_json::{Value, json};

/// The most paths or hosts one suggestion names.
const MAX_ITEMS: usize = 8;
/// The longest path taken from a line.
const MAX_PATH: usize = 1024;

/// What the sandbox refused and the `isolation` keys that would allow it.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refusals {
    /// Paths to read, to write, and destinations, as found.
    pub read: Vec<String>,
    pub write: Vec<String>,
    pub hosts: Vec<String>,
    /// Paths refused that no grant can allow (mcpproxy's data dir, its config file).
    pub forbidden: Vec<String>,
}

impl Refusals {
    /// Reads `lines` (the server's recent stderr, oldest first) and its egress refusals.
    pub fn find<'a>(
        lines: impl IntoIterator<Item = &'a str>,
        egress: Option<&EgressStats>,
        forbidden: &[ForbiddenPath],
    ) -> Self {
        let mut read = BTreeSet::new();
        let mut write = BTreeSet::new();
        for line in lines {
            if let Some((path, writes)) = refused_path(line) {
                if writes {
                    write.insert(path);
                } else {
                    read.insert(path);
                }
            }
        }
        let mut refusals = Refusals::default();
        for (set, list) in [(read, &mut refusals.read), (write, &mut refusals.write)] {
            for path in set {
                let reaches_forbidden = forbidden
                    .iter()
                    .any(|f| Path::new(&path).starts_with(&f.path) || f.path.starts_with(&path));
                if reaches_forbidden {
                    refusals.forbidden.push(path);
                } else if list.len() < MAX_ITEMS {
                    list.push(path);
                }
            }
        }
        if let Some(egress) = egress {
            for refused in &egress.recent_refusals {
                let listed = refusals.hosts.contains(&refused.destination);
                if refused.why.contains("allow-list") && !listed && refusals.hosts.len() < MAX_ITEMS
                {
                    refusals.hosts.push(refused.destination.clone());
                }
            }
        }
        refusals
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
            && self.write.is_empty()
            && self.hosts.is_empty()
            && self.forbidden.is_empty()
    }

    /// The `isolation` keys that would allow what was refused (to merge into the server's
    /// own), or `None` when nothing can be allowed.
    pub fn isolation(&self) -> Option<Value> {
        let mut isolation = serde_json::Map::new();
        if !self.read.is_empty() {
            isolation.insert("read".into(), json!(self.read));
        }
        if !self.write.is_empty() {
            isolation.insert("write".into(), json!(self.write));
        }
        if !self.hosts.is_empty() {
            isolation.insert("network".into(), json!({"allow": self.hosts}));
        }
        (!isolation.is_empty()).then_some(Value::Object(isolation))
    }

    /// One sentence: what was refused and what to add.
    pub fn describe(&self) -> String {
        let mut refused: Vec<String> = Vec::new();
        refused.extend(self.read.iter().map(|p| format!("reading {p}")));
        refused.extend(self.write.iter().map(|p| format!("writing {p}")));
        refused.extend(self.hosts.iter().map(|h| format!("connecting to {h}")));
        let mut text = String::new();
        if !refused.is_empty() {
            text = format!("its sandbox refused {}", refused.join(", "));
            if let Some(isolation) = self.isolation() {
                text.push_str(&format!(
                    "; to allow it, add to the server's \"isolation\" (a person approves the changed launch): {isolation}"
                ));
            }
        }
        if !self.forbidden.is_empty() {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!(
                "it was refused {}, which lies in mcpproxy's data dir or config file: no grant allows that",
                self.forbidden.join(", ")
            ));
        }
        text
    }
}

/// The path a line says was refused, and whether the refused operation writes. `None` when
/// the line reports no refusal (or a path mcpproxy cannot use: relative, too long, odd).
pub(super) fn refused_path(line: &str) -> Option<(String, bool)> {
    // Node.js: "EACCES: permission denied, open '/x'", "EPERM: operation not permitted, mkdir '/x'".
    for marker in [
        "EACCES: permission denied, ",
        "EPERM: operation not permitted, ",
    ] {
        if let Some(at) = line.find(marker) {
            let rest = &line[at + marker.len()..];
            let (operation, rest) = rest.split_once(' ')?;
            let path = quoted(rest)?;
            let writes = matches!(
                operation,
                "mkdir"
                    | "rmdir"
                    | "rename"
                    | "unlink"
                    | "symlink"
                    | "link"
                    | "copyfile"
                    | "chmod"
                    | "chown"
                    | "utime"
                    | "futime"
                    | "write"
                    | "cp"
                    | "rm"
            );
            // Making an entry needs the directory it goes in.
            let path = if matches!(
                operation,
                "mkdir" | "rename" | "symlink" | "link" | "copyfile"
            ) {
                parent_of(&path)
            } else {
                path
            };
            return usable(path).map(|p| (p, writes));
        }
    }
    // Python: "PermissionError: [Errno 13] Permission denied: '/x'".
    for marker in ["Permission denied: ", "Operation not permitted: "] {
        if let Some(at) = line.find(marker) {
            return usable(quoted(&line[at + marker.len()..])?).map(|p| (p, false));
        }
    }
    // A shell or a C program: "bash: /x: Permission denied", "cat: /x: Permission denied".
    if let Some(before) = line.strip_suffix(": Permission denied") {
        let path = before.rsplit(": ").next()?.trim();
        return usable(path.to_owned()).map(|p| (p, false));
    }
    None
}

/// The text between the first pair of single or double quotes.
fn quoted(text: &str) -> Option<String> {
    let text = text.trim_start();
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &text[1..];
    let end = inner.find(quote)?;
    Some(inner[..end].to_owned())
}

fn parent_of(path: &str) -> String {
    Path::new(path)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| path.to_owned(), |p| p.display().to_string())
}

/// `path` if it is absolute, short and printable; the root never.
fn usable(path: String) -> Option<String> {
    let ok = path.starts_with('/')
        && path != "/"
        && path.len() <= MAX_PATH
        && !path.chars().any(char::is_control)
        && !PathBuf::from(&path)
            .components()
            .any(|c| c == std::path::Component::ParentDir);
    ok.then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_read_from_what_node_python_and_shells_say() {
        let lines = [
            "Error: EACCES: permission denied, open '/home/u/notes/a.md'",
            "Error: EACCES: permission denied, mkdir '/home/u/out/new'",
            "PermissionError: [Errno 13] Permission denied: '/srv/data.csv'",
            "bash: /opt/tool/run.sh: Permission denied",
            "Error: EPERM: operation not permitted, unlink '/home/u/out/old.txt'",
            "nothing to see here",
            "EACCES: permission denied, open 'relative/path'",
            "EACCES: permission denied, open '/home/u/../../etc/shadow'",
        ];
        let refusals = Refusals::find(lines, None, &[]);
        assert_eq!(
            refusals.read,
            ["/home/u/notes/a.md", "/opt/tool/run.sh", "/srv/data.csv"]
        );
        assert_eq!(refusals.write, ["/home/u/out", "/home/u/out/old.txt"]);
        assert_eq!(
            refusals.isolation().unwrap(),
            json!({"read": ["/home/u/notes/a.md", "/opt/tool/run.sh", "/srv/data.csv"],
                   "write": ["/home/u/out", "/home/u/out/old.txt"]})
        );
        assert!(refusals.describe().contains("reading /srv/data.csv"));
    }

    #[test]
    fn egress_refusals_become_allow_rules_and_the_data_dir_is_never_suggested() {
        let egress = EgressStats {
            recent_refusals: vec![
                mcpproxy_egress::Refused {
                    destination: "api.example.com:443".into(),
                    why: "api.example.com:443 is not in the server's egress allow-list".into(),
                },
                mcpproxy_egress::Refused {
                    destination: "down.example.com:443".into(),
                    why: "connecting to 1.2.3.4:443 failed".into(),
                },
            ],
            ..EgressStats::default()
        };
        let forbidden = [ForbiddenPath {
            what: "the data dir",
            path: "/home/u/.mcpproxy".into(),
        }];
        let refusals = Refusals::find(
            ["Error: EACCES: permission denied, open '/home/u/.mcpproxy/trust.json'"],
            Some(&egress),
            &forbidden,
        );
        assert_eq!(refusals.hosts, ["api.example.com:443"]);
        assert!(refusals.read.is_empty());
        assert_eq!(refusals.forbidden, ["/home/u/.mcpproxy/trust.json"]);
        assert_eq!(
            refusals.isolation().unwrap(),
            json!({"network": {"allow": ["api.example.com:443"]}})
        );
        assert!(refusals.describe().contains("no grant allows that"));
    }

    #[test]
    fn hostile_lines_give_nothing_odd() {
        let long = format!("EACCES: permission denied, open '/{}'", "a".repeat(5000));
        let lines = [
            long.as_str(),
            "EACCES: permission denied, open '/x\u{1b}[31m'",
            "EACCES: permission denied, open '/'",
            "EACCES: permission denied, open",
            "Permission denied: '",
            ": Permission denied",
        ];
        assert!(Refusals::find(lines, None, &[]).is_empty());
    }
}
