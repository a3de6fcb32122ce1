//! The committed components of `plugins/prebuilt/` are what the sources build: each embedded
//! plugin's bytes equal a build from source (the `plugin-artifacts` crate's, with the command
//! the proxy's build script would use), and the manifest names today's sources' digest and
//! each file's SHA-256. With `MCPPROXY_UPDATE_PREBUILT=1` the test rewrites them instead.
//!
//! Also the rules the digest follows (what counts as a source), on a small tree of its own.

use std::path::{Path, PathBuf};

#[path = "../guests.rs"]
mod guests;

use guests::{EMBEDDED, MANIFEST, Manifest, PREBUILT_DIR};

/// Set to `1` to rewrite `plugins/prebuilt/` from the build from source.
const UPDATE: &str = "MCPPROXY_UPDATE_PREBUILT";

const REFRESH: &str = "refresh them with `MCPPROXY_UPDATE_PREBUILT=1 cargo test -p mcpproxy-plugin-host --test prebuilt`";

fn root() -> PathBuf {
    guests::workspace_root(Path::new(env!("CARGO_MANIFEST_DIR")))
}

#[test]
fn committed_components_are_what_the_sources_build() {
    let root = root();
    let dir = root.join(PREBUILT_DIR);
    let digest = guests::sources_digest(&root).expect("the sources are readable");
    if std::env::var(UPDATE).is_ok_and(|v| v == "1") {
        rewrite(&dir, &digest);
        return;
    }
    let manifest = Manifest::read(&dir).unwrap_or_else(|e| panic!("{e}; {REFRESH}"));
    let mut wrong = Vec::new();
    if manifest.sources != digest {
        wrong.push(format!(
            "the sources' digest is {digest}, the manifest says {} (a plugin's source, \
             plugins/Cargo.lock, wit/ or the toolchain changed)",
            manifest.sources
        ));
    }
    for name in EMBEDDED {
        let file = format!("{name}.wasm");
        let built = plugin_artifacts::artifact_bytes(name);
        match std::fs::read(dir.join(&file)) {
            Ok(committed) if committed == built => {}
            Ok(committed) => wrong.push(format!(
                "{PREBUILT_DIR}/{file} ({} bytes) differs from the build from source ({} bytes, {})",
                committed.len(),
                built.len(),
                plugin_artifacts::artifact(name).display()
            )),
            Err(e) => wrong.push(format!("cannot read {PREBUILT_DIR}/{file}: {e}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "the committed plugin components are not what the sources build:\n- {}\n{REFRESH}",
        wrong.join("\n- ")
    );
    assert_eq!(
        guests::prebuilt_unusable(&root),
        None,
        "the proxy's build script would not use the committed components"
    );
}

/// Writes the components of the build from source and their manifest into `dir`.
fn rewrite(dir: &Path, digest: &str) {
    std::fs::create_dir_all(dir).expect("create plugins/prebuilt");
    let mut components = Vec::new();
    for name in EMBEDDED {
        let file = format!("{name}.wasm");
        let bytes = plugin_artifacts::artifact_bytes(name);
        std::fs::write(dir.join(&file), &bytes).expect("write a component");
        let sha = guests::file_sha256(&dir.join(&file)).expect("read it back");
        components.push((file, sha));
    }
    let manifest = Manifest {
        sources: digest.to_owned(),
        components,
    };
    std::fs::write(dir.join(MANIFEST), manifest.render()).expect("write the manifest");
    eprintln!("rewrote {} from the build from source", dir.display());
}

#[test]
fn the_prebuilt_directory_holds_the_embedded_components_and_nothing_else() {
    let dir = root().join(PREBUILT_DIR);
    let manifest = Manifest::read(&dir).unwrap_or_else(|e| panic!("{e}; {REFRESH}"));
    let listed: Vec<&str> = manifest
        .components
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    let expected: Vec<String> = EMBEDDED.iter().map(|n| format!("{n}.wasm")).collect();
    assert_eq!(
        listed, expected,
        "the manifest lists the embedded components, in order"
    );
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .expect("list plugins/prebuilt")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    let mut wanted = expected;
    wanted.push(MANIFEST.to_owned());
    wanted.sort();
    assert_eq!(
        present, wanted,
        "plugins/prebuilt holds only what the build embeds"
    );
}

#[test]
fn the_manifest_reads_back_what_it_renders_and_names_a_bad_line() {
    let manifest = Manifest {
        sources: "ab".repeat(32),
        components: vec![("a.wasm".into(), "cd".repeat(32))],
    };
    assert_eq!(Manifest::parse(&manifest.render()), Ok(manifest));

    let error = Manifest::parse("sources 00\nnot a line\n").unwrap_err();
    assert!(error.contains("line 2"), "{error}");
    assert!(error.contains("`not a line`"), "{error}");
    let error = Manifest::parse("# only a comment\n").unwrap_err();
    assert!(error.contains("no `sources` line"), "{error}");
}

/// A tree shaped like the workspace: `plugins/` with a plugin, `wit/`, the toolchain file.
fn small_tree() -> tempfile::TempDir {
    let tree = tempfile::tempdir().expect("temp dir");
    let root = tree.path();
    for (file, text) in [
        ("plugins/Cargo.toml", "[workspace]\n"),
        ("plugins/Cargo.lock", "# lock\n"),
        ("plugins/gate/src/lib.rs", "//! a gate\n"),
        ("wit/world.wit", "package a:b;\n"),
        ("rust-toolchain.toml", "[toolchain]\n"),
    ] {
        write(root, file, text);
    }
    tree
}

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
    std::fs::write(path, text).expect("write");
}

#[test]
fn the_digest_follows_the_sources_and_nothing_else() {
    let tree = small_tree();
    let root = tree.path();
    let digest = || guests::sources_digest(root).expect("digest");
    let before = digest();
    assert_eq!(before.len(), 64, "hex SHA-256");

    // Not inputs of the embedded components: build output, test fixtures, examples, docs,
    // the committed components themselves, editors' hidden directories.
    for (file, text) in [
        ("plugins/target/release/x.rs", "junk"),
        ("plugins/fixtures/trap/src/lib.rs", "//! a fixture"),
        ("plugins/examples/js/app.js", "x"),
        ("plugins/README.md", "docs"),
        ("plugins/prebuilt/gate.wasm", "bytes"),
        ("plugins/.idea/workspace.rs", "x"),
    ] {
        write(root, file, text);
        assert_eq!(digest(), before, "{file} is not a source");
    }

    // Inputs: code, manifests, the lock file, the contracts, the toolchain, cargo's config.
    let mut seen = vec![before];
    for (file, text) in [
        ("plugins/gate/src/lib.rs", "//! a gate, changed\n"),
        ("plugins/gate/src/prelude.js", "let x;"),
        ("plugins/Cargo.lock", "# lock 2\n"),
        ("plugins/.cargo/config.toml", "[build]\n"),
        ("wit/world.wit", "package a:c;\n"),
        ("rust-toolchain.toml", "[toolchain]\nchannel = \"1.95.0\"\n"),
    ] {
        write(root, file, text);
        let now = digest();
        assert!(
            !seen.contains(&now),
            "{file} is a source: the digest must change"
        );
        seen.push(now);
    }

    // A file moved to another name is another tree.
    let moved = digest();
    std::fs::rename(
        root.join("plugins/gate/src/prelude.js"),
        root.join("plugins/gate/src/prelude2.js"),
    )
    .expect("rename");
    assert_ne!(digest(), moved, "a renamed source changes the digest");
}

#[test]
fn committed_components_are_unusable_when_the_tree_says_otherwise() {
    let tree = small_tree();
    let root = tree.path();
    let reason = guests::prebuilt_unusable(root).expect("no manifest");
    assert!(reason.contains(MANIFEST), "{reason}");

    let digest = guests::sources_digest(root).expect("digest");
    let dir = root.join(PREBUILT_DIR);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut components = Vec::new();
    for name in EMBEDDED {
        let file = format!("{name}.wasm");
        std::fs::write(dir.join(&file), name.as_bytes()).expect("write");
        components.push((
            file.clone(),
            guests::file_sha256(&dir.join(&file)).expect("sha"),
        ));
    }
    let manifest = Manifest {
        sources: digest,
        components,
    };
    std::fs::write(dir.join(MANIFEST), manifest.render()).expect("manifest");
    assert_eq!(
        guests::prebuilt_unusable(root),
        None,
        "a matching tree is usable"
    );

    std::fs::write(dir.join("intent_matrix.wasm"), b"tampered").expect("write");
    let reason = guests::prebuilt_unusable(root).expect("a changed component");
    assert!(
        reason.contains("intent_matrix.wasm has SHA-256"),
        "{reason}"
    );
    std::fs::write(dir.join("intent_matrix.wasm"), b"intent_matrix").expect("write");

    write(root, "plugins/gate/src/lib.rs", "//! edited\n");
    let reason = guests::prebuilt_unusable(root).expect("changed sources");
    assert!(reason.contains("sources changed"), "{reason}");
}
