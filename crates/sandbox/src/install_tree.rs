//! The server's own install tree, found from its command and the program files among its
//! arguments (`server.js`, `main.py`), so the sandbox can
//! let it read its code and nothing else of where it lives: the `node_modules` a Node.js
//! server runs from, the venv of a Python one (and the interpreter the venv was made from),
//! the prefix of an interpreter installed under a home directory (`~/.nvm`, `~/.pyenv`), or
//! the project a script argument belongs to, or the `node_modules` of an `npx --prefix DIR`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Resolves `command` as `execvp` would: a name without a slash through `path_var`.
pub(crate) fn resolve_command(
    command: &str,
    path_var: Option<&OsStr>,
    working_dir: Option<&Path>,
) -> Option<PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        let path = match working_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        };
        return path.is_file().then_some(path);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The trees the server needs to read to run: of the command (and its real path, and the
/// interpreter its `#!` line names), and of every argument that is an existing program file
/// ([`is_program_file`]).
/// `home` is never a tree itself (a script directly in it is granted alone).
pub(crate) fn install_trees(
    command: Option<&Path>,
    args: &[String],
    working_dir: Option<&Path>,
    path_var: Option<&OsStr>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(command) = command {
        files.push(command.to_path_buf());
        if let Some(interpreter) = shebang_interpreter(command, path_var) {
            files.push(interpreter);
        }
    }
    for arg in args {
        let path = Path::new(arg);
        if !is_program_file(path) {
            continue;
        }
        let path = match working_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        };
        if path.is_file() {
            files.push(path);
        }
    }
    let mut trees = Vec::new();
    // `npx --prefix DIR` and `npm exec --prefix DIR` run a package installed in DIR.
    for pair in args.windows(2) {
        if pair[0] == "--prefix" {
            let modules = Path::new(&pair[1]).join("node_modules");
            let modules = match working_dir {
                Some(dir) if modules.is_relative() => dir.join(modules),
                _ => modules,
            };
            if modules.is_dir() && !trees.contains(&modules) {
                trees.push(modules);
            }
        }
    }
    for file in files {
        let real = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
        for path in [file, real] {
            for tree in trees_of(&path, home) {
                if !trees.contains(&tree) {
                    trees.push(tree);
                }
            }
        }
    }
    trees
}

/// The grants a server's path arguments suggest, for a person adding it to approve: a
/// directory it is given (a filesystem server's root) to write, a file that is no program to
/// read. Only absolute paths that exist; never `/`, nor `home` itself (too wide to propose:
/// a person grants those by hand).
pub fn proposed_grants(args: &[String], home: Option<&Path>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut read, mut write) = (Vec::new(), Vec::new());
    for arg in args {
        let path = Path::new(arg);
        if !path.is_absolute() || path.parent().is_none() || Some(path) == home {
            continue;
        }
        let Ok(metadata) = std::fs::metadata(path) else {
            continue;
        };
        let path = path.to_path_buf();
        if metadata.is_dir() {
            if !write.contains(&path) {
                write.push(path);
            }
        } else if metadata.is_file() && !is_program_file(&path) && !read.contains(&path) {
            read.push(path);
        }
    }
    (read, write)
}

/// Whether an argument names a program an interpreter runs (`server.js`, `main.py`,
/// `app.jar`): only those are install trees. Any other file an argument names (a key, a
/// config, a data file) is the server's to be granted in the config, never found here.
fn is_program_file(path: &Path) -> bool {
    const PROGRAMS: &[&str] = &[
        "js", "mjs", "cjs", "ts", "mts", "py", "pyz", "rb", "pl", "php", "lua", "jar", "sh",
    ];
    path.extension()
        .and_then(OsStr::to_str)
        .is_some_and(|ext| PROGRAMS.contains(&ext))
}

/// The interpreter a script's `#!` line names (`/usr/bin/env node` resolved through PATH).
fn shebang_interpreter(script: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let head = head.get(..read)?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if Path::new(interpreter).file_name() == Some(OsStr::new("env")) {
        let name = words.find(|w| !w.starts_with('-'))?;
        return resolve_command(name, path_var, None);
    }
    Some(PathBuf::from(interpreter))
}

/// The trees `file` belongs to.
fn trees_of(file: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let acceptable = |dir: &Path| dir.parent().is_some() && Some(dir) != home;
    // The outermost node_modules above the file.
    if let Some(modules) = file
        .ancestors()
        .filter(|a| a.file_name() == Some(OsStr::new("node_modules")))
        .last()
    {
        return vec![modules.to_path_buf()];
    }
    // A venv, and the prefix of the interpreter it was made from.
    if let Some(venv) = file.ancestors().find(|a| a.join("pyvenv.cfg").is_file()) {
        let mut trees = vec![venv.to_path_buf()];
        if let Some(base) = venv_base_prefix(&venv.join("pyvenv.cfg"))
            && acceptable(&base)
        {
            trees.push(base);
        }
        return trees;
    }
    // A program in a prefix's bin/ (~/.nvm/versions/node/v22, ~/.pyenv/versions/3.11). In a
    // home directory only an interpreter's own layout counts: a generic prefix such as
    // `~/.local` (where pip --user, pipx and uv put launchers) holds the user's keyrings,
    // histories and data, so a launcher there is granted alone (its real path, a venv,
    // is found from the symbolic link).
    if let Some(bin) = file.parent()
        && bin.file_name() == Some(OsStr::new("bin"))
        && let Some(prefix) = bin.parent()
        && acceptable(prefix)
        && (!home.is_some_and(|home| prefix.starts_with(home)) || interpreter_layout(prefix))
    {
        return vec![prefix.to_path_buf()];
    }
    // A script in a project.
    let markers = [
        "package.json",
        "pyproject.toml",
        "setup.py",
        "Cargo.toml",
        "go.mod",
    ];
    if let Some(project) = file
        .ancestors()
        .skip(1)
        .take_while(|a| acceptable(a))
        .find(|a| markers.iter().any(|m| a.join(m).is_file()))
    {
        return vec![project.to_path_buf()];
    }
    vec![file.to_path_buf()]
}

/// Whether `prefix` is one interpreter's install as version managers lay them out:
/// `~/.pyenv/versions/3.11`, `~/.nvm/versions/node/v22`, `~/.rbenv/versions/3.3`,
/// `~/.asdf/installs/python/3.11`, `~/.local/share/mise/installs/node/22`,
/// `~/.volta/tools/image/node/22.1.0`.
fn interpreter_layout(prefix: &Path) -> bool {
    let named = |dir: Option<&Path>, names: &[&str]| {
        dir.and_then(Path::file_name)
            .and_then(OsStr::to_str)
            .is_some_and(|name| names.contains(&name))
    };
    let parent = prefix.parent();
    let grandparent = parent.and_then(Path::parent);
    named(parent, &["versions"]) || named(grandparent, &["versions", "installs", "image"])
}

/// The `home` of a `pyvenv.cfg` (the base interpreter's bin/), as its prefix.
fn venv_base_prefix(config: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config).ok()?;
    let home = text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    if home.file_name() == Some(OsStr::new("bin")) {
        home.parent().map(Path::to_path_buf)
    } else {
        Some(home)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_modules_bin_grants_the_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("node_modules/.bin");
        let pkg = dir.path().join("node_modules/@scope/server/dist");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink(pkg.join("index.js"), bin.join("server")).unwrap();
        let trees = install_trees(Some(&bin.join("server")), &[], None, None, None);
        assert!(trees.contains(&dir.path().join("node_modules")));
        assert!(!trees.contains(&dir.path().to_path_buf()));
    }

    #[test]
    fn npx_with_a_prefix_grants_its_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/.bin")).unwrap();
        let args = [
            "--prefix".to_string(),
            dir.path().display().to_string(),
            "srv".into(),
        ];
        let trees = install_trees(None, &args, None, None, None);
        assert_eq!(trees, vec![dir.path().join("node_modules")]);
    }

    #[test]
    fn a_venv_grants_the_venv_and_its_base_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("python/3.11");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        let venv = dir.path().join("project/.venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();
        std::fs::write(venv.join("bin/server"), "#!/usr/bin/python3\n").unwrap();
        let trees = install_trees(Some(&venv.join("bin/server")), &[], None, None, None);
        assert!(trees.contains(&venv), "{trees:?}");
        assert!(trees.contains(&base), "{trees:?}");
        assert!(!trees.contains(&dir.path().join("project")), "{trees:?}");
    }

    #[test]
    fn a_launcher_in_dot_local_grants_its_venv_never_dot_local() {
        let home = tempfile::tempdir().unwrap();
        let local = home.path().join(".local");
        let venv = local.join("share/pipx/venvs/mcp-server-x");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::write(venv.join("bin/mcp-server-x"), "#!/usr/bin/python3\n").unwrap();
        std::fs::create_dir_all(local.join("bin")).unwrap();
        std::fs::create_dir_all(local.join("share/keyrings")).unwrap();
        let launcher = local.join("bin/mcp-server-x");
        std::os::unix::fs::symlink(venv.join("bin/mcp-server-x"), &launcher).unwrap();
        let trees = install_trees(Some(&launcher), &[], None, None, Some(home.path()));
        assert!(trees.contains(&venv), "{trees:?}");
        assert!(
            trees.iter().all(|t| t != &local && !local.starts_with(t)),
            "{trees:?}"
        );
        // A launcher that is no link (a script pip --user wrote) is granted alone.
        let script = local.join("bin/other");
        std::fs::write(&script, "#!/usr/bin/python3\n").unwrap();
        let trees = install_trees(Some(&script), &[], None, None, Some(home.path()));
        assert!(!trees.contains(&local), "{trees:?}");
    }

    #[test]
    fn an_interpreter_of_a_version_manager_grants_its_own_prefix() {
        let home = tempfile::tempdir().unwrap();
        for prefix in [
            ".pyenv/versions/3.11.7",
            ".nvm/versions/node/v22.1.0",
            ".asdf/installs/python/3.12.1",
            ".local/share/mise/installs/node/22",
            ".volta/tools/image/node/22.1.0",
        ] {
            let prefix = home.path().join(prefix);
            std::fs::create_dir_all(prefix.join("bin")).unwrap();
            std::fs::write(prefix.join("bin/tool"), "").unwrap();
            let trees = install_trees(
                Some(&prefix.join("bin/tool")),
                &[],
                None,
                None,
                Some(home.path()),
            );
            assert_eq!(trees, vec![prefix.clone()], "{}", prefix.display());
        }
    }

    #[test]
    fn path_arguments_propose_a_directory_to_write_and_a_file_to_read() {
        let home = tempfile::tempdir().unwrap();
        let projects = home.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let notes = home.path().join("notes.txt");
        std::fs::write(&notes, "").unwrap();
        let script = home.path().join("server.js");
        std::fs::write(&script, "").unwrap();
        let args: Vec<String> = [
            "-y".into(),
            "@modelcontextprotocol/server-filesystem".into(),
            projects.display().to_string(),
            notes.display().to_string(),
            script.display().to_string(),
            home.path().display().to_string(),
            "/".into(),
            "relative/dir".into(),
            home.path().join("missing").display().to_string(),
        ]
        .into();
        let (read, write) = proposed_grants(&args, Some(home.path()));
        assert_eq!(write, vec![projects]);
        assert_eq!(read, vec![notes]);
    }

    #[test]
    fn a_script_directly_in_home_is_granted_alone() {
        let home = tempfile::tempdir().unwrap();
        let script = home.path().join("server.py");
        std::fs::write(&script, "print(1)\n").unwrap();
        std::fs::write(home.path().join("package.json"), "{}").unwrap();
        let trees = install_trees(
            None,
            &[script.display().to_string()],
            None,
            None,
            Some(home.path()),
        );
        assert_eq!(trees, vec![script]);
    }

    #[test]
    fn a_script_in_a_project_grants_the_project() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("code/server");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("pyproject.toml"), "").unwrap();
        std::fs::write(project.join("src/main.py"), "").unwrap();
        std::fs::write(project.join("src/secret"), "").unwrap();
        let trees = install_trees(
            None,
            &[
                "src/main.py".into(),
                "/nonexistent".into(),
                "src/secret".into(),
            ],
            Some(&project),
            None,
            Some(home.path()),
        );
        assert_eq!(trees, vec![project]);
    }
}
