//! Files and directories only their owner can use: everything mcpproxy keeps in its data dir
//! (the activity journal and its write-ahead log, `trust.json`, `api_key`, the compiled
//! plugin cache, `mcp_config.json` when mcpproxy creates it). Files are created 0600 and
//! directories 0700 whatever the umask; a file that already exists with more than its
//! owner's access is narrowed when mcpproxy opens or replaces it. A directory that already
//! exists (a data dir the user made) is left as it is.
//!
//! A leaf: it imports nothing of the crate.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every file mcpproxy creates in its data dir.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory mcpproxy creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents, each 0700. Directories that exist stay as they
/// are.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
}

/// Opens `path` with `options`; a file it creates is 0600 from the start, and an existing
/// file readable or writable by anyone else is narrowed to its owner's bits.
pub fn open_private(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let file = options.mode(FILE_MODE).open(path)?;
    restrict(&file)?;
    Ok(file)
}

/// Creates (or truncates) `path` for writing, 0600.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    open_private(
        OpenOptions::new().write(true).create(true).truncate(true),
        path,
    )
}

/// Makes sure `path` exists and is private before another library opens it itself (redb
/// creates its database file with the process umask): created empty with 0600 if missing,
/// narrowed if it exists. Its content is not touched.
pub fn prepare_private_file(path: &Path) -> io::Result<()> {
    open_private(OpenOptions::new().read(true).write(true).create(true), path).map(drop)
}

/// Narrows an open file to its owner's bits (`0644` becomes `0600`) when group or others
/// have any access.
pub fn restrict(file: &File) -> io::Result<()> {
    let mode = file.metadata()?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Replaces `path` with `bytes` so that no reader sees half a file and no one else can read
/// it: written to `<path>.tmp` (0600), synced, renamed over `path`, the directory synced.
/// The directory is created (0700) if missing.
pub fn write_private_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    create_private_dir(dir)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = std::path::PathBuf::from(temporary);
    let written = (|| {
        let mut file = create_private_file(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Set in the copy of this test binary that creates the files under umask 0.
    const CHILD_ENV: &str = "MCPPROXY_PRIVATE_FS_UMASK_ZERO_DIR";

    #[test]
    fn created_files_and_dirs_are_private_whatever_the_umask() {
        if let Ok(root) = std::env::var(CHILD_ENV) {
            // The child: umask 0, so any mode left to the default would show as 0666/0777.
            // SAFETY: umask only sets this process's file mode creation mask.
            #[allow(unsafe_code, reason = "libc has no safe wrapper for umask")]
            unsafe {
                libc::umask(0)
            };
            let root = Path::new(&root);
            create_private_dir(&root.join("a/b")).unwrap();
            create_private_file(&root.join("a/b/f")).unwrap();
            prepare_private_file(&root.join("db")).unwrap();
            write_private_atomically(&root.join("c/x.json"), b"{}").unwrap();
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "private_fs::tests::created_files_and_dirs_are_private_whatever_the_umask",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "the child under umask 0 failed: {status}");
        let root = dir.path();
        for made in ["a", "a/b", "c"] {
            assert_eq!(mode(&root.join(made)), 0o700, "{made}");
        }
        for made in ["a/b/f", "db", "c/x.json"] {
            assert_eq!(mode(&root.join(made)), 0o600, "{made}");
        }
        assert!(!root.join("c/x.json.tmp").exists());
        // The existing directory is left as it was.
        assert_eq!(mode(root), 0o755);
    }

    #[test]
    fn an_existing_file_open_to_others_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("activity.redb");
        std::fs::write(&path, b"data").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o666)).unwrap();
        prepare_private_file(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"data", "content kept");
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        write_private_atomically(&path, b"new").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        // A stale temporary file left open to others is narrowed before it is written.
        let tmp = dir.path().join("activity.redb.tmp");
        std::fs::write(&tmp, b"old").unwrap();
        std::fs::set_permissions(&tmp, Permissions::from_mode(0o666)).unwrap();
        let file = create_private_file(&tmp).unwrap();
        assert_eq!(mode(&tmp), 0o600);
        drop(file);
    }
}
