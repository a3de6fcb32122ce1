//! The project directories where tests build what `plugins new` writes, one per language,
//! shared by every test of that language: the toolchain the project's build.sh installs there
//! (a venv, node_modules, the C tools) is prepared once and kept between runs, and a test
//! holds the directory's lock while it builds, so tests in other processes (nextest runs
//! each test in one of its own) never build into it at the same time.

use std::fs::File;
use std::path::{Path, PathBuf};

/// A language's project directory, held for one build: dropped, it is free for the next.
pub(crate) struct TemplateProject {
    pub dir: PathBuf,
    _lock: File,
}

impl TemplateProject {
    /// Waits for `lang`'s directory (`target/template-projects/LANG`), then replaces all of
    /// it but `keep` (what build.sh installs) with the project at `fresh`.
    pub(crate) fn take(lang: &str, keep: &str, fresh: &Path) -> Self {
        let root = crate::support::target_dir().join("template-projects");
        std::fs::create_dir_all(&root).unwrap();
        let lock = File::create(root.join(format!("{lang}.lock"))).unwrap();
        lock.lock().expect("lock the template project dir");
        let dir = root.join(lang);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_name() != keep {
                let path = entry.path();
                if path.is_dir() {
                    std::fs::remove_dir_all(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        }
        copy_tree(fresh, &dir);
        Self { dir, _lock: lock }
    }

    /// Runs the project's build.sh with `env` added; panics, naming the language, when it
    /// fails.
    pub(crate) fn build(&self, env: &[(&str, PathBuf)]) {
        let status = std::process::Command::new("bash")
            .arg(self.dir.join("build.sh"))
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .status()
            .expect("run build.sh");
        assert!(
            status.success(),
            "build.sh of the new project in {} failed: {status}",
            self.dir.display()
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
