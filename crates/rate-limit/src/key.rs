//! The keys buckets are kept under. The format is stable: a shared store keeps buckets
//! under these keys for every replica, so two versions of the proxy must agree on them.
//!
//! - `identity:<subject>`: every call of one logged-in caller;
//! - `tool:<server>:<tool>`: every call of one tool, by anyone;
//! - `upstream:<server>`: every call to one upstream server, by anyone.
//!
//! Server names cannot hold `:` (the config refuses it); a subject or a tool name may, and
//! is the last part of its key, so keys never collide.

pub fn identity(subject: &str) -> String {
    format!("identity:{subject}")
}

pub fn tool(server: &str, tool: &str) -> String {
    format!("tool:{server}:{tool}")
}

pub fn upstream(server: &str) -> String {
    format!("upstream:{server}")
}
