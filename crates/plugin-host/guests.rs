//! The guest plugins of `plugins/` as the build scripts and tests see them: which of them the
//! proxy embeds, the one command that builds them from source for `wasm32-wasip2`, and the
//! digest of the sources the committed components in `plugins/prebuilt/` were built from.
//!
//! The build is reproducible: the same sources and toolchain give the same bytes wherever the
//! clone, the cargo home and the target directory are, because those paths are remapped out
//! of the panic messages and other strings the compiler keeps. That is what lets the proxy
//! embed the committed components (no nested build on a first `cargo run --release`) while a
//! test proves they are what the sources build.
//!
//! Included with `#[path]` by `crates/plugin-host/build.rs`, `tests/plugin-artifacts/build.rs`
//! and `crates/plugin-host/tests/prebuilt.rs`, so the three agree on every detail.

#![allow(
    dead_code,
    reason = "shared by two build scripts and a test: each uses a different subset"
)]

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

/// The target the guests are built for.
pub(crate) const TARGET: &str = "wasm32-wasip2";

/// The plugins embedded in the proxy (crate names, as cargo names their artifacts): the
/// default pipeline, the opt-in ones shipped with the binary, and the `code_execution`
/// runtime.
pub(crate) const EMBEDDED: &[&str] = &[
    "intent_matrix",
    "prefix_annotator",
    "clickhouse_sink",
    "http_sink",
    "safety_routing",
    "tool_scanner",
    "secret_redactor",
    "injection_marker",
    "code_runtime",
];

/// Where the committed components are, relative to the workspace root.
pub(crate) const PREBUILT_DIR: &str = "plugins/prebuilt";

/// The file in [`PREBUILT_DIR`] that names the sources' digest and each component's SHA-256.
pub(crate) const MANIFEST: &str = "MANIFEST";

/// What goes into the sources' digest besides `plugins/`: the WIT contracts the guests are
/// generated from and the pinned toolchain that compiles them.
const DIGESTED_OUTSIDE_PLUGINS: &[&str] = &["wit", "rust-toolchain.toml"];

/// The directories of `plugins/` that are not inputs of the embedded components' build (the
/// test fixtures are built in the same workspace, but into components of their own).
const NOT_SOURCES: &[&str] = &[
    "target",
    "examples",
    "fixtures",
    "prebuilt",
    "node_modules",
    "measure",
];

/// The kinds of file in `plugins/` the build reads (code, manifests, contracts, the lock
/// file, the runtime's JavaScript prelude, test cases compiled in).
const SOURCE_EXTENSIONS: &[&str] = &["rs", "toml", "lock", "wit", "js", "json"];

/// The workspace root, from a crate's manifest directory two levels below it
/// (`crates/plugin-host`, `tests/plugin-artifacts`).
pub(crate) fn workspace_root(manifest_dir: &Path) -> PathBuf {
    manifest_dir
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest_dir.to_path_buf())
}

/// Where the nested build puts its output: a target directory of its own beside the main
/// one's contents (the outer cargo holds the lock on the main one while a build script runs).
pub(crate) fn guest_target_dir(root: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("wasm-plugins")
}

/// The directory the built components land in.
pub(crate) fn artifacts_dir(target_dir: &Path) -> PathBuf {
    target_dir.join(TARGET).join("release")
}

/// For a build script: reruns it when any input of the guests' build changes (the
/// directories are scanned by cargo, so a new file counts too).
pub(crate) fn rerun_if_sources_change(root: &Path) {
    for watched in ["plugins", "wit", "rust-toolchain.toml"] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
}

/// For a build script: makes sure [`TARGET`] is installed, then builds every guest from
/// source into [`guest_target_dir`] and returns the directory of the components.
pub(crate) fn build_in_build_script(root: &Path) -> Result<PathBuf, String> {
    ensure_target_installed()?;
    build_from_source(root, &guest_target_dir(root))
}

/// Builds every guest of `plugins/` (the embedded ones and the test fixtures) in release for
/// [`TARGET`], with the paths that differ between machines remapped, and returns the
/// directory of the components. Cargo's output goes to this process's stderr.
pub(crate) fn build_from_source(root: &Path, target_dir: &Path) -> Result<PathBuf, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root.join("plugins"))
        .args([
            "build",
            "--release",
            "--workspace",
            "--locked",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        // Appended to plugins/.cargo/config.toml's flags for the target (cargo joins arrays).
        .arg("--config")
        .arg(remap_flags(root, target_dir));
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_PROFILE_RELEASE_LTO",
        "CARGO_PROFILE_RELEASE_OPT_LEVEL",
        "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
        "CARGO_PROFILE_RELEASE_STRIP",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo to build plugins/: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the plugins in plugins/ for {TARGET} failed (see the errors above)"
        ));
    }
    Ok(artifacts_dir(target_dir))
}

/// `target.wasm32-wasip2.rustflags = [...]`: the cargo home, the workspace and the target
/// directory remapped to fixed names, so no path of this machine ends up in a component.
fn remap_flags(root: &Path, target_dir: &Path) -> String {
    let mut flags = Vec::new();
    // The longest prefix first: rustc applies the last matching remapping, so the more
    // specific ones come last.
    for (from, to) in [
        (root.to_path_buf(), "/mcpproxy"),
        (cargo_home(), "/cargo"),
        (target_dir.to_path_buf(), "/target"),
    ] {
        flags.push(toml_string(&format!(
            "--remap-path-prefix={}={to}",
            from.display()
        )));
    }
    format!("target.{TARGET}.rustflags=[{}]", flags.join(", "))
}

/// Cargo's home, as cargo finds it.
fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", c as u32);
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The SHA-256 over every input of the guests' build (see [`NOT_SOURCES`],
/// [`SOURCE_EXTENSIONS`] and [`DIGESTED_OUTSIDE_PLUGINS`]), in path order: each file's path
/// relative to the root, its length and its bytes. Hex.
pub(crate) fn sources_digest(root: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    collect_sources(root, &root.join("plugins"), true, &mut files)?;
    for extra in DIGESTED_OUTSIDE_PLUGINS {
        let path = root.join(extra);
        if path.is_dir() {
            collect_sources(root, &path, false, &mut files)?;
        } else {
            files.push(relative(root, &path));
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in &files {
        let bytes = std::fs::read(root.join(file))
            .map_err(|e| format!("cannot read {}: {e}", root.join(file).display()))?;
        hasher.update(file.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex(&hasher.finalize()))
}

/// The files under `dir` that are build inputs, as `/`-separated paths relative to `root`.
/// `plugins_rules`: apply the rules of `plugins/` (skip [`NOT_SOURCES`], keep only
/// [`SOURCE_EXTENSIONS`]); otherwise every file counts.
fn collect_sources(
    root: &Path,
    dir: &Path,
    plugins_rules: bool,
    files: &mut Vec<String>,
) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if kind.is_dir() {
            let hidden = name.starts_with('.') && name != ".cargo";
            if hidden || (plugins_rules && NOT_SOURCES.contains(&name.as_str())) {
                continue;
            }
            collect_sources(root, &path, plugins_rules, files)?;
        } else if kind.is_file() {
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !plugins_rules || SOURCE_EXTENSIONS.contains(&extension) {
                files.push(relative(root, &path));
            }
        }
    }
    Ok(())
}

fn relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The SHA-256 of a file's bytes, hex.
pub(crate) fn file_sha256(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// What `plugins/prebuilt/MANIFEST` says: the digest of the sources the components were built
/// from, and each component's SHA-256.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) sources: String,
    /// `(file name, sha256)`, in [`EMBEDDED`] order.
    pub(crate) components: Vec<(String, String)>,
}

impl Manifest {
    /// Reads the manifest's text: `#` comments, a `sources <hex>` line, then one
    /// `<sha256>  <name>.wasm` line per component.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut sources = None;
        let mut components = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(digest) = line.strip_prefix("sources ") {
                sources = Some(digest.trim().to_owned());
            } else if let Some((sha, name)) = line.split_once("  ") {
                components.push((name.trim().to_owned(), sha.trim().to_owned()));
            } else {
                return Err(format!(
                    "{PREBUILT_DIR}/{MANIFEST} line {}: expected `sources <hex>` or \
                     `<sha256>  <name>.wasm`, found `{line}`",
                    n + 1
                ));
            }
        }
        let sources =
            sources.ok_or_else(|| format!("{PREBUILT_DIR}/{MANIFEST} has no `sources` line"))?;
        Ok(Self {
            sources,
            components,
        })
    }

    /// The manifest's text.
    pub(crate) fn render(&self) -> String {
        let mut text = String::from(
            "# The default plugins' components, built from source by\n\
             # `MCPPROXY_UPDATE_PREBUILT=1 cargo test -p mcpproxy-plugin-host --test prebuilt`.\n\
             # `sources` is the digest of the inputs they were built from; the proxy's build\n\
             # embeds these files only while the sources still have that digest.\n",
        );
        let _ = writeln!(text, "sources {}", self.sources);
        for (name, sha) in &self.components {
            let _ = writeln!(text, "{sha}  {name}");
        }
        text
    }

    /// Reads the manifest in `dir`.
    pub(crate) fn read(dir: &Path) -> Result<Self, String> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text)
    }
}

/// Why the committed components cannot stand in for a build from source, or `None` when they
/// can: the manifest names the digest of today's sources and every embedded component is
/// there with the SHA-256 the manifest gives.
pub(crate) fn prebuilt_unusable(root: &Path) -> Option<String> {
    let dir = root.join(PREBUILT_DIR);
    let manifest = match Manifest::read(&dir) {
        Ok(manifest) => manifest,
        Err(e) => return Some(e),
    };
    let digest = match sources_digest(root) {
        Ok(digest) => digest,
        Err(e) => return Some(e),
    };
    if manifest.sources != digest {
        return Some(format!(
            "the plugins' sources changed since {PREBUILT_DIR} was built (digest {digest}, \
             the manifest says {})",
            manifest.sources
        ));
    }
    for name in EMBEDDED {
        let file = format!("{name}.wasm");
        let Some((_, expected)) = manifest.components.iter().find(|(n, _)| *n == file) else {
            return Some(format!("{PREBUILT_DIR}/{MANIFEST} does not list {file}"));
        };
        match file_sha256(&dir.join(&file)) {
            Ok(actual) if actual == *expected => {}
            Ok(actual) => {
                return Some(format!(
                    "{PREBUILT_DIR}/{file} has SHA-256 {actual}, the manifest says {expected}"
                ));
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// Makes sure the wasm target is installed: where rustup manages the toolchain, adds it
/// (saying so on a `cargo::warning` line), since rustup installs `rust-toolchain.toml`'s
/// targets only when it installs the toolchain itself. An error says what to run otherwise.
pub(crate) fn ensure_target_installed() -> Result<(), String> {
    if target_installed() {
        return Ok(());
    }
    if let Some(outcome) = add_target_with_rustup() {
        match outcome {
            Ok(()) if target_installed() => {
                println!(
                    "cargo::warning=the {TARGET} target was missing; added it with \
                     `rustup target add {TARGET}` (the guest plugins are built for it)"
                );
                return Ok(());
            }
            Ok(()) => {}
            Err(e) => println!("cargo::warning=`rustup target add {TARGET}` failed: {e}"),
        }
    }
    Err(format!(
        "the {TARGET} target is not installed, and mcpproxy's guest plugins are built for it. \
         Run `rustup target add {TARGET}` (with rustup, the rust-toolchain.toml in the \
         repository root lists it), then build again."
    ))
}

fn target_installed() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|dir| Path::is_dir(&dir))
}

/// Runs `rustup target add` for the toolchain this build uses. `None` when rustup is not
/// what runs this toolchain (no `RUSTUP_TOOLCHAIN`, or no `rustup` on the PATH).
fn add_target_with_rustup() -> Option<Result<(), String>> {
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok()?;
    let output = Command::new("rustup")
        .args(["target", "add", "--toolchain", &toolchain, TARGET])
        .output()
        .ok()?;
    if output.status.success() {
        Some(Ok(()))
    } else {
        Some(Err(String::from_utf8_lossy(&output.stderr)
            .trim()
            .to_owned()))
    }
}
