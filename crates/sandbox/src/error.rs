//! Why a sandbox could not be prepared.

/// An error preparing a sandbox; each says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Landlock rules could not be built: {0}")]
    Landlock(String),
    #[error("the seccomp filter could not be built: {0}")]
    Seccomp(String),
    #[error("the process-count cgroup could not be made: {0}")]
    Cgroup(String),
    #[error("the sandbox's private directory could not be made: {0}")]
    PrivateDir(std::io::Error),
    #[error(
        "the kernel lacks {missing}, and `isolation.required` is true: the server is not started. Set \"required\": false to start it with what the kernel has, or run mcpproxy where the kernel has it"
    )]
    Unsupported { missing: String },
    #[error(
        "`{grant}` is granted to the server but contains or lies in {what} `{forbidden}`, which a server may never reach: grant a directory beside it instead"
    )]
    Forbidden {
        grant: String,
        what: &'static str,
        forbidden: String,
    },
    #[error("{0}")]
    Shim(String),
    #[error("the channel for the egress proxy's listener could not be made: {0}")]
    EgressChannel(std::io::Error),
    #[error("the sandbox is only available on Linux")]
    NotLinux,
}
