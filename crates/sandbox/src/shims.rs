//! Version managers' shims (pyenv, rbenv, nodenv, asdf, mise, volta), resolved to the real
//! program before the launch. A shim runs its manager, which reads the manager's whole root
//! (its plugins, its version files, every installed version): granting that would hand the
//! server far more than its interpreter, and not granting it fails the start. So mcpproxy asks
//! the manager, as the user and outside the sandbox, which program the shim would run
//! (`pyenv which python3`), and runs that program directly; the sandbox then grants the
//! program's own prefix (`~/.pyenv/versions/3.11.7`), as for any interpreter.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a manager may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// A shim resolved to the program it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedShim {
    /// The version manager's name (`pyenv`).
    pub manager: String,
    /// The program the shim would run.
    pub program: PathBuf,
}

/// What manager a shim at `shim` belongs to, and how to ask it: its command.
fn manager_of(shim: &Path) -> Option<(String, PathBuf)> {
    // mise's shims are links to the mise binary; volta's to `volta-shim`, beside `volta`.
    if let Ok(target) = std::fs::canonicalize(shim) {
        match target.file_name().and_then(OsStr::to_str) {
            Some("mise") => return Some(("mise".into(), target)),
            Some("volta-shim") => return Some(("volta".into(), target.with_file_name("volta"))),
            _ => {}
        }
    }
    if shim.parent()?.file_name() != Some(OsStr::new("shims")) {
        return None;
    }
    // pyenv, rbenv, nodenv: `exec "/home/u/.pyenv/libexec/pyenv" exec "$program" "$@"`;
    // asdf: `exec asdf exec "python3" "$@"` (or a path to asdf).
    let mut head = String::new();
    use std::io::Read;
    std::fs::File::open(shim)
        .ok()?
        .take(16 * 1024)
        .read_to_string(&mut head)
        .ok()?;
    if !head.starts_with("#!") {
        return None;
    }
    head.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("exec ")?;
        let (manager, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"')?,
            None => rest.split_once(' ')?,
        };
        if !after.trim_start().starts_with("exec ") {
            return None;
        }
        let name = Path::new(manager).file_name()?.to_str()?.to_owned();
        matches!(
            name.as_str(),
            "pyenv" | "rbenv" | "nodenv" | "asdf" | "mise"
        )
        .then(|| (name, PathBuf::from(manager)))
    })
}

/// Resolves `command` (an executable's path) when it is a version manager's shim: asks the
/// manager which program it would run for `working_dir`. `None` when it is no shim; an error
/// in words when it is one and the manager gives no usable answer.
pub fn resolve_shim(
    command: &Path,
    working_dir: Option<&Path>,
) -> Option<Result<ResolvedShim, String>> {
    let (manager, manager_command) = manager_of(command)?;
    let program = command.file_name()?.to_owned();
    let mut ask = Command::new(&manager_command);
    ask.arg("which")
        .arg(&program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = working_dir {
        ask.current_dir(dir);
    }
    Some(ask_manager(ask, &manager, command).map(|program| ResolvedShim { manager, program }))
}

fn ask_manager(mut ask: Command, manager: &str, shim: &Path) -> Result<PathBuf, String> {
    let shown = shim.display();
    let mut child = ask
        .spawn()
        .map_err(|e| format!("`{shown}` is a {manager} shim, and {manager} cannot be run: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < ASK_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown}` is a {manager} shim, and `{manager} which` gave no answer within {} s",
                    ASK_TIMEOUT.as_secs()
                ));
            }
        }
    };
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&output.stdout);
    let path = PathBuf::from(answer.lines().next().unwrap_or_default().trim());
    let usable = status.success()
        && path.is_absolute()
        && path.is_file()
        && path.parent().and_then(Path::file_name) != Some(OsStr::new("shims"));
    if !usable {
        let why = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`{shown}` is a {manager} shim, and `{manager} which {}` did not name a program ({}): set `command` to the interpreter's own path",
            shim.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            why.trim().chars().take(200).collect::<String>()
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pyenv_style_shim_is_asked_and_resolved() {
        let root = tempfile::tempdir().unwrap();
        let version = root.path().join("versions/3.11.7/bin");
        std::fs::create_dir_all(&version).unwrap();
        std::fs::write(version.join("python3"), "").unwrap();
        let libexec = root.path().join("libexec");
        std::fs::create_dir_all(&libexec).unwrap();
        let manager = libexec.join("pyenv");
        std::fs::write(
            &manager,
            format!(
                "#!/bin/sh\n[ \"$1\" = which ] && echo {}/$2\n",
                version.display()
            ),
        )
        .unwrap();
        let shims = root.path().join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        let shim = shims.join("python3");
        std::fs::write(
            &shim,
            format!(
                "#!/usr/bin/env bash\nset -e\nexec \"{}\" exec \"$program\" \"$@\"\n",
                manager.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        for file in [&manager, &shim] {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let resolved = resolve_shim(&shim, None).unwrap().unwrap();
        assert_eq!(resolved.manager, "pyenv");
        assert_eq!(resolved.program, version.join("python3"));
        // Not a shim: a plain program.
        assert!(resolve_shim(&version.join("python3"), None).is_none());
    }

    #[test]
    fn a_manager_that_names_no_program_is_an_error_that_says_what_to_do() {
        let root = tempfile::tempdir().unwrap();
        let shims = root.path().join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        let shim = shims.join("node");
        std::fs::write(&shim, "#!/bin/sh\nexec /bin/false exec \"node\" \"$@\"\n").unwrap();
        // `false` is no manager mcpproxy knows: not a shim.
        assert!(resolve_shim(&shim, None).is_none());
        let manager = root.path().join("nodenv");
        std::fs::write(&manager, "#!/bin/sh\nexit 1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&manager, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            &shim,
            format!(
                "#!/bin/sh\nexec \"{}\" exec \"node\" \"$@\"\n",
                manager.display()
            ),
        )
        .unwrap();
        let error = resolve_shim(&shim, None).unwrap().unwrap_err();
        assert!(error.contains("nodenv shim"), "{error}");
        assert!(error.contains("set `command`"), "{error}");
    }

    /// Each manager's shim, in the shape the manager makes it, is told apart from a plain
    /// program: rbenv's and nodenv's scripts (as pyenv's), asdf's (`exec asdf exec ...`),
    /// mise's links to the `mise` binary, volta's links to `volta-shim` (asked through the
    /// `volta` beside it).
    #[test]
    fn every_managers_shim_shape_is_recognised() {
        let root = tempfile::tempdir().unwrap();
        let shims = root.path().join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        let script = |name: &str, body: &str| {
            let path = shims.join(name);
            std::fs::write(&path, body).unwrap();
            path
        };
        let rbenv = script(
            "ruby",
            "#!/usr/bin/env bash\nexec \"/home/u/.rbenv/libexec/rbenv\" exec \"$program\" \"$@\"\n",
        );
        let nodenv = script(
            "node",
            "#!/usr/bin/env bash\nexec \"/home/u/.nodenv/libexec/nodenv\" exec \"$program\" \"$@\"\n",
        );
        let asdf = script(
            "python3",
            "#!/usr/bin/env bash\n# asdf-plugin: python 3.12.1\nexec asdf exec \"python3\" \"$@\"\n",
        );
        let not_a_shim = script("tool", "#!/bin/sh\nexec /usr/bin/env tool \"$@\"\n");
        let binary = script("binary", "\x7fELF");
        assert_eq!(
            manager_of(&rbenv),
            Some(("rbenv".into(), "/home/u/.rbenv/libexec/rbenv".into()))
        );
        assert_eq!(
            manager_of(&nodenv),
            Some(("nodenv".into(), "/home/u/.nodenv/libexec/nodenv".into()))
        );
        assert_eq!(manager_of(&asdf), Some(("asdf".into(), "asdf".into())));
        assert_eq!(manager_of(&not_a_shim), None);
        assert_eq!(manager_of(&binary), None);
        // The same script outside a `shims` directory is a plain program.
        let elsewhere = root.path().join("python3");
        std::fs::copy(&asdf, &elsewhere).unwrap();
        assert_eq!(manager_of(&elsewhere), None);

        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["mise", "volta-shim", "volta"] {
            std::fs::write(bin.join(name), "").unwrap();
        }
        let mise_shim = shims.join("python");
        std::os::unix::fs::symlink(bin.join("mise"), &mise_shim).unwrap();
        let volta_shim = root.path().join("node-volta");
        std::os::unix::fs::symlink(bin.join("volta-shim"), &volta_shim).unwrap();
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(
            manager_of(&mise_shim),
            Some(("mise".into(), canonical(&bin.join("mise"))))
        );
        assert_eq!(
            manager_of(&volta_shim),
            Some(("volta".into(), canonical(&bin).join("volta")))
        );
    }
}
