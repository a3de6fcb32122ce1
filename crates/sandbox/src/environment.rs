//! The server's environment: not mcpproxy's (which holds its own token and whatever keys the
//! user exported), but `PATH`, `HOME` (a private one unless the real one is granted), `LANG`,
//! `TERM`, `TMPDIR` (private), the variables the config passes through by name, and the
//! server's configured `env`.

use std::ffi::OsString;
use std::path::Path;

use crate::spec::SandboxSpec;

/// Variables always passed from mcpproxy's environment when set.
const KEPT: &[&str] = &["LANG", "TERM"];

/// Sets `name` in `env`, replacing any earlier value (the last one set wins, and appears
/// once).
pub(crate) fn set(env: &mut Vec<(OsString, OsString)>, name: &str, value: OsString) {
    env.retain(|(n, _)| n != name);
    env.push((name.into(), value));
}

/// The server's whole environment. `parent` reads mcpproxy's environment; `real_home_granted`
/// says the config grants the real home directory.
pub(crate) fn environment(
    spec: &SandboxSpec,
    private_home: &Path,
    private_tmp: &Path,
    real_home_granted: bool,
    parent: impl Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let path = parent("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    set(&mut env, "PATH", path);
    for name in KEPT {
        if let Some(value) = parent(name) {
            set(&mut env, name, value);
        }
    }
    let home = match parent("HOME") {
        Some(home) if real_home_granted => home,
        _ => private_home.as_os_str().to_owned(),
    };
    set(&mut env, "HOME", home);
    set(&mut env, "TMPDIR", private_tmp.as_os_str().to_owned());
    for name in &spec.env_passthrough {
        if let Some(value) = parent(name) {
            set(&mut env, name, value);
        }
    }
    for (name, value) in &spec.env {
        set(&mut env, name, value.into());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Network, ResourceLimits};

    fn spec() -> SandboxSpec {
        SandboxSpec {
            network: Network::None,
            read: vec![],
            write: vec![],
            env_passthrough: vec!["GITHUB_TOKEN".into()],
            env: [("DEBUG".to_string(), "1".to_string())].into(),
            limits: ResourceLimits::DEFAULT,
            required: false,
            forbidden: vec![],
            launcher_cache: None,
        }
    }

    fn parent(name: &str) -> Option<OsString> {
        match name {
            "PATH" => Some("/usr/bin".into()),
            "HOME" => Some("/home/me".into()),
            "GITHUB_TOKEN" => Some("ghp_x".into()),
            "MCPPROXY_AUTH_TOKEN" => Some("secret".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("secret".into()),
            _ => None,
        }
    }

    #[test]
    fn only_the_fixed_few_the_passthrough_and_the_config_reach_the_server() {
        let env = environment(
            &spec(),
            Path::new("/t/home"),
            Path::new("/t/tmp"),
            false,
            parent,
        );
        let names: Vec<_> = env.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "HOME", "TMPDIR", "GITHUB_TOKEN", "DEBUG"]);
        let home = env.iter().find(|(n, _)| n == "HOME").unwrap();
        assert_eq!(home.1, "/t/home");
    }

    #[test]
    fn the_real_home_when_granted() {
        let env = environment(
            &spec(),
            Path::new("/t/home"),
            Path::new("/t/tmp"),
            true,
            parent,
        );
        let home = env.iter().find(|(n, _)| n == "HOME").unwrap();
        assert_eq!(home.1, "/home/me");
    }
}
