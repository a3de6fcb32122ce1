//! Telling a sandboxed process apart from the user's own: for the sockets mcpproxy serves
//! (its control socket), which must refuse a server it started, whatever the server did to
//! reach them.

/// Why the process `pid` (as the kernel gave it for a socket's peer, `SO_PEERCRED`) counts as
/// sandboxed, or `None` when it is one of the user's own processes. A process is sandboxed
/// when it lives in another PID namespace than this one (every server with a PID namespace
/// of its own, and anything it starts), when it is in one of the cgroups a sandbox makes, or
/// when it cannot be looked at (gone, or a pid this namespace cannot see): fail closed.
pub fn sandboxed_peer(pid: i32) -> Option<String> {
    let Ok(pid) = u32::try_from(pid) else {
        return Some(format!(
            "the peer's pid {pid} is not a process of this namespace"
        ));
    };
    if pid == 0 {
        return Some("the peer is a process of another PID namespace".to_owned());
    }
    let namespace = |of: &str| std::fs::read_link(format!("/proc/{of}/ns/pid")).ok();
    match (namespace("self"), namespace(&pid.to_string())) {
        (Some(ours), Some(theirs)) if ours != theirs => {
            return Some(format!("process {pid} runs in a PID namespace of its own"));
        }
        (Some(_), Some(_)) => {}
        _ => return Some(format!("process {pid} cannot be looked at")),
    }
    let Ok(groups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return Some(format!("process {pid} cannot be looked at"));
    };
    let in_sandbox_group = groups.lines().any(|line| {
        line.rsplit(':')
            .next()
            .is_some_and(|path| path.split('/').any(|part| part.starts_with("mcpproxy-")))
    });
    in_sandbox_group.then(|| format!("process {pid} is in a sandboxed server's cgroup"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_not_sandboxed_and_no_process_is_refused_unseen() {
        let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        // A test may itself run in a sandbox group only if something went badly wrong.
        assert_eq!(super::sandboxed_peer(me), None);
        assert!(super::sandboxed_peer(0).is_some());
        assert!(super::sandboxed_peer(-1).is_some());
        // A pid no process has (above the kernel's maximum).
        assert!(super::sandboxed_peer(4_194_305).is_some());
    }
}
