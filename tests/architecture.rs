//! The workspace's layers, read from its sources: which crate may depend on which, what the
//! crates below the proxy must not depend on, and which top-level module of the proxy may
//! use which.
//!
//! - Crates, from the bottom up ([`CRATES`]): a crate depends only on crates below it (in
//!   any dependency table, dev-dependencies included).
//! - What each crate below the proxy must not depend on directly ([`FORBIDDEN`]: no
//!   WebAssembly runtime outside the plugin host, no MCP library, HTTP server or HTTP client
//!   where they have no job, no async runtime in the helpers, the vocabulary, the config or
//!   the sandbox; dev-dependencies are left out: what a crate's tests use is not what its
//!   users get).
//! - No file under `crates/` but those of [`MCP_CRATES`] mentions `rmcp`: only the crates
//!   that speak MCP know it.
//! - The table of crate dependencies in docs/architecture.md is the manifests' graph.
//! - The proxy's top-level modules are in layers ([`MODULE_LAYERS`]): a module uses
//!   (`crate::NAME`, in a `use` or in a path) only modules of lower layers and its own
//!   submodules; modules of one layer do not use each other. Comments, doc comments and
//!   string literals are not read. A module that is in no layer fails too, as does a layer
//!   entry that names no module.
//! - Every `.rs` file of the workspace (the guest plugins of `plugins/` included; `target/`,
//!   `node_modules/` and hidden directories left out) starts with a `//!` header saying what
//!   it owns.
//! - `unsafe` code (the keyword, outside comments and literals) appears only in the files of
//!   [`UNSAFE_ALLOWED`], and each of those still has some.
//! - No source file of a crate (`crates/*/src`, `host/src`) has more than [`MAX_FILE_LINES`]
//!   lines of non-test code, and no function there more than [`MAX_FN_LINES`] lines from its
//!   `fn` to its closing brace. Test code is exempt: items under `#[cfg(test)]` (a `mod tests`
//!   block, a test-only function) and the files such a module declaration names.
//!
//! Each checker is also run on small broken inputs (the `*_are_*` tests at the end), so a
//! rule that could never fail would show.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The workspace's crates from the bottom of the graph up, with their directories: a crate
/// may depend only on crates before it.
const CRATES: [(&str, &str); 15] = [
    ("mcpproxy-support", "crates/support"),
    ("mcpproxy-sandbox", "crates/sandbox"),
    ("mcpproxy-policy", "crates/policy"),
    ("mcpproxy-config", "crates/config"),
    ("mcpproxy-rate-limit", "crates/rate-limit"),
    ("mcpproxy-auth", "crates/auth"),
    ("mcpproxy-egress", "crates/egress"),
    ("mcpproxy-trust", "crates/trust"),
    ("mcpproxy-activity", "crates/activity"),
    ("mcpproxy-cluster", "crates/cluster"),
    ("mcpproxy-upstream", "crates/upstream"),
    ("mcpproxy-plugin-host", "crates/plugin-host"),
    ("mcpproxy-plugin-kit", "crates/plugin-kit"),
    ("mcpproxy-server", "crates/server"),
    ("mcpproxy", "host"),
];

/// What a crate below the proxy must not depend on directly (a trailing `*` matches any
/// suffix): no WebAssembly runtime and no MCP, HTTP server or HTTP client below the plugin
/// host, and no async runtime in the helpers, the policy vocabulary or the sandbox.
const FORBIDDEN: [(&str, &[&str]); 11] = [
    (
        "mcpproxy-support",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "reqwest",
            "tokio",
        ],
    ),
    (
        "mcpproxy-sandbox",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "reqwest",
            "tokio",
        ],
    ),
    (
        "mcpproxy-policy",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "reqwest",
            "tokio",
        ],
    ),
    (
        "mcpproxy-config",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "reqwest",
            "tokio",
        ],
    ),
    (
        "mcpproxy-auth",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "mcpproxy-activity",
        ],
    ),
    (
        "mcpproxy-trust",
        &["wasmtime", "wasmtime-wasi*", "rmcp", "axum", "reqwest"],
    ),
    (
        "mcpproxy-upstream",
        &["wasmtime", "wasmtime-wasi*", "axum", "mcpproxy-plugin-host"],
    ),
    (
        "mcpproxy-rate-limit",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "reqwest",
            "tokio",
        ],
    ),
    (
        "mcpproxy-cluster",
        &[
            "wasmtime",
            "wasmtime-wasi*",
            "rmcp",
            "axum",
            "mcpproxy-plugin-host",
        ],
    ),
    (
        "mcpproxy-activity",
        &["wasmtime", "wasmtime-wasi*", "rmcp", "axum", "reqwest"],
    ),
    (
        "mcpproxy-egress",
        &["wasmtime", "wasmtime-wasi*", "rmcp", "axum", "reqwest"],
    ),
];

/// The files that may contain `unsafe` code, relative to the workspace root. Each use allows
/// `unsafe_code` where it stands and says why it is sound; a new one joins this list in the
/// same change, so that adding `unsafe` is a decision someone reviews.
const UNSAFE_ALLOWED: &[&str] = &[
    // The sandbox: the steps between fork and exec, and killing a cgroup's leftovers.
    "crates/sandbox/src/child.rs",
    "crates/sandbox/src/resources.rs",
    "crates/sandbox/benches/startup.rs",
    "crates/sandbox/tests/confinement.rs",
    // libc calls without a safe wrapper: umask (a test), setpriority, mallopt/malloc_trim/madvise,
    // getrlimit/setrlimit, ioctl and localtime_r, prctl before exec.
    "crates/support/src/private_fs.rs",
    "crates/activity/src/journal/writer/thread.rs",
    "crates/plugin-host/src/memory.rs",
    "crates/plugin-host/benches/script.rs",
    "crates/server/src/listener.rs",
    "host/src/cli/output.rs",
    "crates/upstream/src/child.rs",
    // wasmtime's `Component::deserialize` of our own compile cache.
    "crates/plugin-host/src/engine.rs",
    // The integration tests' constructor (`#[unsafe(link_section = ".init_array")]`) that
    // installs ring as the crypto provider before any test runs.
    "tests/tests.rs",
    // Tests and fixtures: signals to children, rlimits, System V memory, the environment.
    "tests/fixture-server/src/hostile.rs",
    "tests/journal_failclosed.rs",
    "tests/mcp_conformance.rs",
    "tests/mcp_relay_bounds.rs",
    "tests/serve_listener.rs",
    "tests/serve_observability.rs",
    "tests/support/mcp.rs",
    "tests/upstream_sandbox.rs",
    "tests/upstream_secrets.rs",
];

/// The top-level modules of the running proxy's crate (`crates/server/src`), by layer from the
/// bottom up. A module may use modules of lower layers (and its own submodules), never one
/// of its own layer or above.
///
/// | Layer | Modules | What they are |
/// |---|---|---|
/// | 0 | `idle`, `listener`, `metrics`, `watch` | leaves: memory given back when quiet, the TCP listener, counters, a directory's changes |
/// | 1 | `telemetry`, `scoping` | trace export; what a logged-in caller sees |
/// | 2 | `control` | one owner per data dir |
/// | 3 | `proxy` | resolve, judge, call, record |
/// | 4 | `manage`, `runtime` | changes to the servers while running; the running proxy built from a config |
/// | 5 | `api`, `mcp`, `web` | the front ends: REST, MCP, the page |
/// | 6 | `serve` | the one entry point: owns the data dir or fronts its owner, serves the parts |
const MODULE_LAYERS: [&[&str]; 7] = [
    &["idle", "listener", "metrics", "watch"],
    &["telemetry", "scoping"],
    &["control"],
    &["proxy"],
    &["manage", "runtime"],
    &["api", "mcp", "web"],
    &["serve"],
];

/// Where the layered modules are: the running proxy's crate.
const SERVER_SRC: &str = "crates/server/src";

/// The workspace root (the proxy crate's manifest is in `host/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is inside the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Fails with every violation found, one per line.
#[track_caller]
fn assert_none(violations: &[String], what: &str) {
    assert!(violations.is_empty(), "{what}:\n{}", violations.join("\n"));
}

#[test]
fn crates_depend_only_on_crates_below_them() {
    let manifests: Vec<(String, String)> = CRATES
        .iter()
        .map(|(_, dir)| {
            let path = format!("{dir}/Cargo.toml");
            let text = read(&workspace().join(&path));
            (path, text)
        })
        .collect();
    let manifests: Vec<(&str, &str)> = manifests
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let names: Vec<&str> = CRATES.iter().map(|(name, _)| *name).collect();
    assert_none(
        &order_violations(&names, &manifests),
        "crates depend on crates above them",
    );
}

/// Each crate's workspace dependencies (`[dependencies]` and target-specific ones; not
/// dev-dependencies), by crate name.
type CrateGraph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn the_documented_crate_graph_is_the_manifests() {
    let names: BTreeSet<&str> = CRATES.iter().map(|(name, _)| *name).collect();
    let mut manifests = CrateGraph::new();
    for (name, dir) in CRATES {
        let manifest = Manifest::parse(&read(&workspace().join(dir).join("Cargo.toml")));
        let dependencies = manifest
            .dependencies
            .iter()
            .filter(|d| !d.is_dev() && names.contains(d.name.as_str()))
            .map(|d| d.name.clone())
            .collect();
        manifests.insert(name.to_owned(), dependencies);
    }
    let doc = read(&workspace().join("docs/architecture.md"));
    let documented = documented_graph(&doc).unwrap_or_else(|why| panic!("{why}"));
    assert_none(
        &graph_differences(&documented, &manifests),
        "docs/architecture.md's table of crate dependencies differs from the manifests",
    );
}

/// The table between `<!-- crate-dependencies -->` and `<!-- /crate-dependencies -->`:
/// rows of `` | `crate` | `dependency`, `dependency` | `` (`—` for none).
fn documented_graph(doc: &str) -> Result<CrateGraph, String> {
    let start = doc
        .find("<!-- crate-dependencies -->")
        .ok_or("docs/architecture.md has no <!-- crate-dependencies --> table")?;
    let end = doc[start..]
        .find("<!-- /crate-dependencies -->")
        .ok_or("the crate-dependencies table of docs/architecture.md is not closed")?;
    let mut graph = CrateGraph::new();
    for row in doc[start..start + end].lines() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let [_, name, dependencies, _] = cells[..] else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue; // the header and its rule
        };
        let dependencies = dependencies
            .split(',')
            .map(|d| d.trim().trim_matches('`'))
            .filter(|d| !d.is_empty() && *d != "—")
            .map(str::to_owned)
            .collect();
        graph.insert(name.to_owned(), dependencies);
    }
    Ok(graph)
}

/// What the documented graph gets wrong, each said as what to change in the docs.
fn graph_differences(documented: &CrateGraph, manifests: &CrateGraph) -> Vec<String> {
    let mut differences = Vec::new();
    for (name, actual) in manifests {
        let Some(said) = documented.get(name) else {
            differences.push(format!("docs/architecture.md: no row for {name}"));
            continue;
        };
        for missing in actual.difference(said) {
            differences.push(format!(
                "docs/architecture.md: {name} depends on {missing}, which its row leaves out"
            ));
        }
        for extra in said.difference(actual) {
            differences.push(format!(
                "docs/architecture.md: {name}'s row names {extra}, which its manifest does not"
            ));
        }
    }
    for name in documented.keys().filter(|n| !manifests.contains_key(*n)) {
        differences.push(format!(
            "docs/architecture.md: a row for {name}, which is not a crate of CRATES"
        ));
    }
    differences
}

#[test]
fn differences_between_the_documented_graph_and_the_manifests_are_found() {
    let doc = "x\n<!-- crate-dependencies -->\n| crate | depends on |\n|---|---|\n\
               | `a` | — |\n| `b` | `a`, `c` |\n| `old` | — |\n<!-- /crate-dependencies -->\n";
    let documented = documented_graph(doc).unwrap();
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(documented["b"], set(&["a", "c"]));
    let manifests: CrateGraph = [
        ("a".to_owned(), set(&[])),
        ("b".to_owned(), set(&["a", "d"])),
        ("e".to_owned(), set(&["a"])),
    ]
    .into_iter()
    .collect();
    let differences = graph_differences(&documented, &manifests);
    assert_eq!(differences.len(), 4, "{differences:#?}");
    assert!(differences[0].contains("b depends on d"));
    assert!(differences[1].contains("b's row names c"));
    assert!(differences[2].contains("no row for e"));
    assert!(differences[3].contains("a row for old"));
    assert!(documented_graph("no table").is_err());
}

/// Where the manifests (path and text, in the order of `order`) break the rule that a crate
/// depends only on the crates before it in `order`.
fn order_violations(order: &[&str], manifests: &[(&str, &str)]) -> Vec<String> {
    let mut violations = Vec::new();
    for (position, (name, (path, text))) in order.iter().zip(manifests).enumerate() {
        let manifest = Manifest::parse(text);
        if manifest.package.as_deref() != Some(*name) {
            violations.push(format!(
                "{path} is not the crate {name}: update CRATES in tests/architecture.rs"
            ));
            continue;
        }
        for dep in &manifest.dependencies {
            if let Some(at) = order.iter().position(|c| *c == dep.name)
                && at >= position
            {
                violations.push(format!(
                    "{path}:{}: {name} depends on {} in [{}], a crate {} it \
                     (rule: a crate depends only on crates below it: {})",
                    dep.line,
                    dep.name,
                    dep.table,
                    if at == position {
                        "no lower than"
                    } else {
                        "above"
                    },
                    order.join(" < "),
                ));
            }
        }
    }
    violations
}

#[test]
fn every_source_file_starts_with_a_module_header() {
    let violations: Vec<String> = rust_sources()
        .into_iter()
        .filter(|file| !starts_with_header(&read(file)))
        .map(|file| {
            format!(
                "{}:1: no `//!` header (rule: every source file opens with a `//!` comment \
                 saying what it owns)",
                relative(&file)
            )
        })
        .collect();
    assert_none(&violations, "source files without a `//!` header");
}

#[test]
fn unsafe_code_is_only_in_the_allowed_files() {
    let mut violations = Vec::new();
    let mut seen = Vec::new();
    for file in rust_sources() {
        let path = relative(&file);
        let lines = unsafe_lines(&read(&file));
        let allowed = UNSAFE_ALLOWED.contains(&path.as_str());
        if allowed && !lines.is_empty() {
            seen.push(path.clone());
        }
        if !allowed && let Some(line) = lines.first() {
            violations.push(format!(
                "{path}:{line}: `unsafe` outside the allowlist (rule: `unsafe` only in the \
                 files of UNSAFE_ALLOWED, tests/architecture.rs; add it there with its reason \
                 if it must stay)"
            ));
        }
    }
    for path in UNSAFE_ALLOWED {
        if !seen.iter().any(|s| s == path) {
            violations.push(format!(
                "tests/architecture.rs: UNSAFE_ALLOWED names {path}, which has no `unsafe` \
                 code (any more): take it off the list"
            ));
        }
    }
    assert_none(&violations, "unsafe code where it is not allowed");
}

/// Every `.rs` file of the workspace, `target/`, `node_modules/` and hidden directories left
/// out. The guest plugins (`plugins/`, a workspace of their own) are in: they follow the same
/// conventions.
fn rust_sources() -> Vec<PathBuf> {
    files_under(&workspace())
        .into_iter()
        .filter(|file| file.extension().is_some_and(|e| e == "rs"))
        .collect()
}

/// Whether `source` opens (after blank lines) with a `//!` comment.
fn starts_with_header(source: &str) -> bool {
    source.trim_start().starts_with("//!")
}

/// The lines on which the keyword `unsafe` appears in code (not in comments, strings or a
/// longer name such as `unsafe_code`).
fn unsafe_lines(source: &str) -> Vec<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut lines = Vec::new();
    for (n, line) in code_only(source).lines().enumerate() {
        let found = line.match_indices("unsafe").any(|(at, word)| {
            let before = line[..at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        });
        if found {
            lines.push(n + 1);
        }
    }
    lines
}

/// The most lines of non-test code a source file may hold: past it, a file holds more than
/// one job, and each job becomes a module of its own.
const MAX_FILE_LINES: usize = 800;

/// The most lines a function may span, from its `fn` line to its closing brace: past it, a
/// function does more than one job, and each step becomes a function of its own.
const MAX_FN_LINES: usize = 150;

#[test]
fn no_source_file_or_function_is_too_long() {
    let files = sized_sources();
    let declarations: Vec<(PathBuf, Vec<(bool, PathBuf)>)> = files
        .iter()
        .map(|file| (file.clone(), module_files(file, &read(file))))
        .collect();
    let tests = test_files(&declarations);
    let mut violations = Vec::new();
    for file in files.iter().filter(|file| !tests.contains(*file)) {
        let path = relative(file);
        let code: Vec<char> = code_only(&read(file)).chars().collect();
        let exempt = test_spans(&code);
        let lines = non_test_lines(&code, &exempt);
        if lines > MAX_FILE_LINES {
            violations.push(format!(
                "{path}: {lines} lines of non-test code, over the limit of {MAX_FILE_LINES} \
                 (rule: a file holds one job; split it by job into modules of their own, \
                 moving the code, and put its tests in a sibling tests.rs)"
            ));
        }
        for function in function_spans(&code, &exempt) {
            if function.lines > MAX_FN_LINES {
                violations.push(format!(
                    "{path}:{}: fn `{}` is {} lines, over the limit of {MAX_FN_LINES} (rule: a \
                     function does one job; split it by job into functions named for their \
                     steps, and turn a long table of cases into data)",
                    function.line, function.name, function.lines
                ));
            }
        }
    }
    assert_none(
        &violations,
        &format!(
            "source files over {MAX_FILE_LINES} lines or functions over {MAX_FN_LINES} \
             (test code exempt)"
        ),
    );
}

/// The files the size rule reads: every `.rs` file under `crates/*/src` and `host/src`.
fn sized_sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut dirs = vec![root.join("host/src")];
    let crates = std::fs::read_dir(root.join("crates"))
        .unwrap_or_else(|e| panic!("cannot list crates/: {e}"));
    for entry in crates {
        let src = entry.expect("a directory entry").path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    dirs.iter()
        .flat_map(|dir| files_under(dir))
        .filter(|file| file.extension().is_some_and(|e| e == "rs"))
        .collect()
}

/// The files that are test code, given each file's module declarations (whether under
/// `#[cfg(test)]`, and the file declared): those a `#[cfg(test)]` declaration names, and
/// those a test file declares in turn.
fn test_files(declarations: &[(PathBuf, Vec<(bool, PathBuf)>)]) -> BTreeSet<PathBuf> {
    let mut tests = BTreeSet::new();
    loop {
        let before = tests.len();
        for (file, modules) in declarations {
            let in_test = tests.contains(file);
            for (gated, target) in modules {
                if *gated || in_test {
                    tests.insert(target.clone());
                }
            }
        }
        if tests.len() == before {
            return tests;
        }
    }
}

/// The files `source` (the file `file`) declares as modules (`mod name;`), each with whether
/// the declaration is under `#[cfg(test)]`: `name.rs` (or `name/mod.rs`) beside a `lib.rs`,
/// `main.rs` or `mod.rs`, in `stem/` beside any other file, or the `#[path = "..."]` given,
/// relative to the declaring file's directory.
fn module_files(file: &Path, source: &str) -> Vec<(bool, PathBuf)> {
    let raw: Vec<char> = source.chars().collect();
    let code: Vec<char> = code_only(source).chars().collect();
    let dir = file.parent().unwrap_or(Path::new(""));
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let base = if ["lib", "main", "mod"].contains(&stem) {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let mut modules = Vec::new();
    for at in keyword_positions(&code, "mod") {
        let (name, after) = name_after(&code, at + "mod".len());
        if name.is_empty() || code.get(after) != Some(&';') {
            continue; // an inline module, or `mod` in some other place
        }
        let (_, attributes) = attributes_before(&code, at);
        let gated = attributes.iter().any(|a| is_cfg_test(&code[a.clone()]));
        let path = attributes.iter().find_map(|a| {
            let text: String = code[a.clone()]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            text.starts_with("#[path=").then(|| {
                let value: String = raw[a.clone()].iter().collect();
                value.split('"').nth(1).unwrap_or_default().to_owned()
            })
        });
        let target = match path {
            Some(path) => dir.join(path),
            None if base.join(&name).join("mod.rs").is_file() => base.join(&name).join("mod.rs"),
            None => base.join(format!("{name}.rs")),
        };
        modules.push((gated, target));
    }
    modules
}

/// Where the keyword `word` starts in `code` (not part of a longer name).
fn keyword_positions(code: &[char], word: &str) -> Vec<usize> {
    let word: Vec<char> = word.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    (0..code.len())
        .filter(|&i| {
            code[i..].starts_with(&word)
                && !(i > 0 && is_ident(code[i - 1]))
                && !code.get(i + word.len()).is_some_and(|&c| is_ident(c))
        })
        .collect()
}

/// The name after whitespace at `from` (empty if there is none) and where the next
/// non-blank character after it is.
fn name_after(code: &[char], from: usize) -> (String, usize) {
    let skip_space = |mut i: usize| {
        while i < code.len() && code[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let start = skip_space(from);
    let name: String = code[start.min(code.len())..]
        .iter()
        .take_while(|c| c.is_alphanumeric() || **c == '_')
        .collect();
    (name.clone(), skip_space(start + name.len()))
}

/// The outer attributes (`#[...]`) of the item whose keyword (`fn`, `mod`) is at `at`, read
/// backwards over its qualifiers (`pub`, `pub(crate)`, `async`, `const`, `unsafe`,
/// `extern`): where the first of them starts, and each one's range.
fn attributes_before(code: &[char], at: usize) -> (usize, Vec<std::ops::Range<usize>>) {
    const QUALIFIERS: [&str; 6] = ["pub", "async", "const", "unsafe", "extern", "default"];
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let back_over_space = |mut i: usize| {
        while i > 0 && code[i - 1].is_whitespace() {
            i -= 1;
        }
        i
    };
    // Where the group closed just before `end` (by `]` or `)`) opens.
    let group_start = |end: usize, open: char, close: char| {
        let mut depth = 0;
        for j in (0..end).rev() {
            if code[j] == close {
                depth += 1;
            } else if code[j] == open {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
        }
        None
    };
    let mut start = at;
    let mut attributes = Vec::new();
    let mut i = back_over_space(at);
    while i > 0 {
        let c = code[i - 1];
        if c == ']' {
            let Some(open) = group_start(i, '[', ']') else {
                break;
            };
            let hash = back_over_space(open);
            if hash == 0 || code[hash - 1] != '#' {
                break; // an array, not an attribute
            }
            attributes.push(hash - 1..i);
            start = hash - 1;
        } else if c == ')' {
            // The `(crate)` of `pub(crate)`.
            let Some(open) = group_start(i, '(', ')') else {
                break;
            };
            let word_end = back_over_space(open);
            if !code[..word_end].ends_with(&['p', 'u', 'b']) {
                break;
            }
            start = word_end - 3;
        } else if is_ident(c) {
            let word_start = (0..i)
                .rev()
                .take_while(|&k| is_ident(code[k]))
                .last()
                .unwrap_or(i);
            let word: String = code[word_start..i].iter().collect();
            if !QUALIFIERS.contains(&word.as_str()) {
                break;
            }
            start = word_start;
        } else {
            break;
        }
        i = back_over_space(start);
    }
    attributes.reverse();
    (start, attributes)
}

/// Whether the attribute `#[...]` is `#[cfg(test)]`.
fn is_cfg_test(attribute: &[char]) -> bool {
    let text: String = attribute.iter().filter(|c| !c.is_whitespace()).collect();
    text == "#[cfg(test)]"
}

/// Where the item whose name ends just before `from` ends: at its `;` (no body), or at the
/// brace closing its body, whichever comes first outside parentheses and brackets; with
/// whether it has a body.
fn item_end(code: &[char], from: usize) -> Option<(usize, bool)> {
    let mut depth = 0i32;
    let mut i = from;
    while i < code.len() {
        match code[i] {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ';' if depth == 0 => return Some((i, false)),
            '{' if depth == 0 => {
                let mut braces = 0;
                for (j, &c) in code.iter().enumerate().skip(i) {
                    if c == '{' {
                        braces += 1;
                    } else if c == '}' {
                        braces -= 1;
                        if braces == 0 {
                            return Some((j, true));
                        }
                    }
                }
                return None;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The ranges of `code` that are test code: each module or function under `#[cfg(test)]`,
/// from its first attribute to its end.
fn test_spans(code: &[char]) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let keywords = ["mod", "fn"].into_iter().flat_map(|word| {
        keyword_positions(code, word)
            .into_iter()
            .map(move |at| (at, word))
    });
    for (at, word) in keywords {
        let (start, attributes) = attributes_before(code, at);
        if !attributes.iter().any(|a| is_cfg_test(&code[a.clone()])) {
            continue;
        }
        let (name, after) = name_after(code, at + word.len());
        if let (false, Some((end, _))) = (name.is_empty(), item_end(code, after)) {
            spans.push(start..end + 1);
        }
    }
    spans
}

/// The line (from 1) of each position of `code`.
fn line_numbers(code: &[char]) -> Vec<usize> {
    let mut line = 1;
    code.iter()
        .map(|&c| {
            let this = line;
            if c == '\n' {
                line += 1;
            }
            this
        })
        .collect()
}

/// How many lines of `code` have no part in the test spans.
fn non_test_lines(code: &[char], exempt: &[std::ops::Range<usize>]) -> usize {
    let line_of = line_numbers(code);
    let total = code.iter().collect::<String>().lines().count();
    let mut test_lines = BTreeSet::new();
    for span in exempt {
        if let (Some(&first), Some(&last)) = (line_of.get(span.start), line_of.get(span.end - 1)) {
            test_lines.extend(first..=last);
        }
    }
    total - test_lines.len()
}

/// A function with a body, outside test code: its name, the line of its `fn` and how many
/// lines it spans to its closing brace.
#[derive(Debug, PartialEq)]
struct FunctionSpan {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `code` outside the `exempt` spans, in order. Closures and
/// nested functions count in the function they are written in (a nested function is also
/// measured on its own); `fn(...)` pointer types and bodiless declarations are no functions.
fn function_spans(code: &[char], exempt: &[std::ops::Range<usize>]) -> Vec<FunctionSpan> {
    let line_of = line_numbers(code);
    let mut functions = Vec::new();
    for at in keyword_positions(code, "fn") {
        if exempt.iter().any(|span| span.contains(&at)) {
            continue;
        }
        let (name, after) = name_after(code, at + "fn".len());
        if name.is_empty() {
            continue; // a function pointer type
        }
        let Some((end, true)) = item_end(code, after) else {
            continue;
        };
        functions.push(FunctionSpan {
            name,
            line: line_of[at],
            lines: line_of[end] - line_of[at] + 1,
        });
    }
    functions
}

#[test]
fn policy_and_activity_depend_on_no_runtime_and_no_mcp() {
    let mut violations = Vec::new();
    for (name, forbidden) in FORBIDDEN {
        let (_, dir) = CRATES
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .expect("every crate of FORBIDDEN is in CRATES");
        let path = format!("{dir}/Cargo.toml");
        let manifest = Manifest::parse(&read(&workspace().join(&path)));
        for dep in manifest.dependencies.iter().filter(|d| !d.is_dev()) {
            if forbidden.iter().any(|f| matches_name(f, &dep.name)) {
                violations.push(format!(
                    "{path}:{}: {name} depends on {} in [{}] (rule: {name} depends on none of {})",
                    dep.line,
                    dep.name,
                    dep.table,
                    forbidden.join(", ")
                ));
            }
        }
    }
    assert_none(
        &violations,
        "crates below the proxy depend on what they must not",
    );
}

/// The crates under `crates/` that speak MCP (and so may name rmcp): the client side (the
/// upstream sessions) and the server side (the endpoint clients talk to).
const MCP_CRATES: [&str; 2] = ["crates/upstream", "crates/server"];

#[test]
fn nothing_below_the_proxy_mentions_rmcp() {
    let mut violations = Vec::new();
    let speaks_mcp = |file: &Path| {
        MCP_CRATES
            .iter()
            .any(|dir| file.starts_with(workspace().join(dir)))
    };
    for file in files_under(&workspace().join("crates")) {
        if speaks_mcp(&file) {
            continue;
        }
        let Ok(text) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&text);
        for (n, line) in text.lines().enumerate() {
            if line.to_ascii_lowercase().contains("rmcp") {
                violations.push(format!(
                    "{}:{}: mentions rmcp (rule: only the crates that speak MCP know it): {}",
                    relative(&file),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert_none(&violations, "files under crates/ mention rmcp");
}

#[test]
fn proxy_modules_use_only_modules_of_lower_layers() {
    let src = workspace().join(SERVER_SRC);
    let layer_of = layer_index();
    let declared = declared_modules(&read(&src.join("lib.rs")));
    let mut violations = Vec::new();
    for module in &declared {
        if !layer_of.contains_key(module.as_str()) {
            violations.push(format!(
                "{SERVER_SRC}/lib.rs: module `{module}` is in no layer \
                 (rule: every top-level module has a layer in MODULE_LAYERS, tests/architecture.rs)"
            ));
        }
    }
    for module in layer_of.keys() {
        if !declared.iter().any(|m| m == module) {
            violations.push(format!(
                "tests/architecture.rs: MODULE_LAYERS names `{module}`, which {SERVER_SRC}/lib.rs \
                 does not declare"
            ));
        }
    }
    let root_names = root_reexports(&read(&src.join("lib.rs")));

    for file in files_under(&src) {
        if file.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = file.strip_prefix(&src).expect("under the server's sources");
        let Some(module) = top_module(rel) else {
            continue; // lib.rs: the crate root
        };
        let Some(&from) = layer_of.get(module.as_str()) else {
            continue; // reported above
        };
        for (line, name) in crate_references(&read(&file)) {
            let used = root_names.get(&name).cloned().unwrap_or(name);
            if used == module {
                continue;
            }
            let Some(&to) = layer_of.get(used.as_str()) else {
                continue; // not a module: an item of the crate root
            };
            if to >= from {
                violations.push(format!(
                    "{SERVER_SRC}/{}:{line}: `{module}` (layer {from}) uses `{used}` (layer {to}) \
                     (rule: a module uses only modules of lower layers{})",
                    rel.display(),
                    if to == from {
                        "; modules of one layer do not use each other"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    assert_none(
        &violations,
        &format!(
            "modules of the proxy use modules of their own layer or above (layers, bottom up: {})",
            layers_text()
        ),
    );
}

#[test]
fn references_are_read_from_code_only() {
    let source = r##"
//! Uses `crate::cli` in a doc comment.
use crate::{config::{self, Config}, secrets,
    trust::Store};
/* crate::web in a block /* nested */ comment */
fn f<'a>(x: &'a str) -> char {
    let _ = "crate::api in a string";
    let _ = r#"crate::mcp in a "raw" string"#;
    let _ = crate :: proxy::split_name(x);
    let _ = $crate::manage;
    ('{', '\'', '"').0
}
pub(crate) fn g() { crate::index::search() }
"##;
    assert_eq!(
        crate_references(source),
        [
            (3, "config".to_owned()),
            (3, "secrets".to_owned()),
            (4, "trust".to_owned()),
            (9, "proxy".to_owned()),
            (13, "index".to_owned()),
        ]
    );
}

/// Each top-level module's layer.
fn layer_index() -> BTreeMap<&'static str, usize> {
    let mut layer_of = BTreeMap::new();
    for (layer, modules) in MODULE_LAYERS.iter().enumerate() {
        for module in *modules {
            assert!(
                layer_of.insert(*module, layer).is_none(),
                "`{module}` is in two layers of MODULE_LAYERS"
            );
        }
    }
    layer_of
}

/// The layers as one line: `0: access, index, ... < 1: config < ...`.
fn layers_text() -> String {
    let mut text = String::new();
    for (layer, modules) in MODULE_LAYERS.iter().enumerate() {
        if layer > 0 {
            text.push_str(" < ");
        }
        let _ = write!(text, "{layer}: {}", modules.join(", "));
    }
    text
}

/// The top-level module a file of `host/src` belongs to (`api/routes.rs` → `api`,
/// `secrets.rs` → `secrets`); `None` for the crate roots.
fn top_module(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        file if rel.components().count() == 1 => file.strip_suffix(".rs").map(str::to_owned),
        dir => Some(dir.to_owned()),
    }
}

/// The modules `lib.rs` declares (`mod NAME;`, any visibility).
fn declared_modules(lib: &str) -> Vec<String> {
    let code = code_only(lib);
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub ")
                .or_else(|| line.strip_prefix("pub(crate) "))
                .unwrap_or(line);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|name| name.trim().to_owned())
        })
        .collect()
}

/// Names the crate root re-exports from a module (`pub use config::Config;` makes
/// `crate::Config` a use of `config`).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let code = code_only(lib);
    let mut names = BTreeMap::new();
    for statement in code.split(';') {
        // `pub use PATH` or `pub(crate) use PATH`, after any attributes.
        let Some(at) = statement.find("use ") else {
            continue;
        };
        let before = statement[..at].trim_end();
        if !(before.ends_with("pub") || before.ends_with("pub(crate)")) {
            continue;
        }
        let path = statement[at + "use ".len()..].trim();
        let path = path.strip_prefix("crate::").unwrap_or(path);
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() && name != "self" && name != "*" {
                names.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    names
}

/// Every `crate::NAME` in `source` outside comments and literals, with its line: for a
/// group (`crate::{a::X, b}`), each name at its top level.
fn crate_references(source: &str) -> Vec<(usize, String)> {
    let code: Vec<char> = code_only(source).chars().collect();
    let line_at = |i: usize| code[..i].iter().filter(|&&c| c == '\n').count() + 1;
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let skip_space = |mut i: usize| {
        while i < code.len() && code[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let ident_at =
        |i: usize| -> String { code[i..].iter().take_while(|&&c| is_ident(c)).collect() };
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let starts_word = i == 0 || !(is_ident(code[i - 1]) || code[i - 1] == '$');
        if !(starts_word && ident_at(i) == "crate") {
            i += 1;
            continue;
        }
        let mut j = skip_space(i + "crate".len());
        if !(code.get(j) == Some(&':') && code.get(j + 1) == Some(&':')) {
            i = j;
            continue;
        }
        j = skip_space(j + 2);
        if code.get(j) == Some(&'{') {
            // A group: the first name of each comma-separated item at depth 1.
            let mut depth = 1;
            let mut item_start = true;
            j += 1;
            while j < code.len() && depth > 0 {
                let c = code[j];
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if depth == 1 && item_start && is_ident(c) => {
                        let name = ident_at(j);
                        j += name.len();
                        item_start = false;
                        if name != "self" {
                            found.push((line_at(j), name));
                        }
                        continue;
                    }
                    _ => {}
                }
                j += 1;
            }
        } else {
            let name = ident_at(j);
            if !name.is_empty() {
                found.push((line_at(j), name));
            }
        }
        i = j.max(i + 1);
    }
    found
}

/// `source` with comments (doc comments included), string, byte-string and char literals
/// blanked out; line breaks are kept, so positions keep their line.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, part: &[char]| {
        for &c in part {
            out.push(if c == '\n' { '\n' } else { ' ' });
        }
    };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let after_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            blank(&mut out, &chars[i..end]);
            i = end;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut j = i;
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &chars[i..j.min(chars.len())]);
            i = j.min(chars.len());
        } else if let Some(end) = (!after_ident).then(|| raw_string_end(&chars, i)).flatten() {
            blank(&mut out, &chars[i..end]);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            blank(&mut out, &chars[i..end]);
            i = end;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1f}'); otherwise a lifetime or label.
            let end = if next == Some('\\') {
                // The character after the backslash is escaped, whatever it is.
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|p| i + 3 + p + 1)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, &chars[i..end]);
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where the raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i` ends, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// Every file under `dir`, recursively, in name order (`target/`, `node_modules/` and hidden
/// entries left out).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// `path` relative to the workspace root, for messages.
fn relative(path: &Path) -> String {
    let root = workspace();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether the dependency `name` matches `pattern` (`wasmtime-wasi*`: any suffix).
fn matches_name(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// What the layer checks need of a `Cargo.toml`: the package's name and every dependency
/// (by its package name, renames resolved), with its table and line.
struct Manifest {
    package: Option<String>,
    dependencies: Vec<Dependency>,
}

struct Dependency {
    name: String,
    /// `dependencies`, `dev-dependencies`, `target.'cfg(unix)'.build-dependencies`, ...
    table: String,
    line: usize,
}

impl Dependency {
    fn is_dev(&self) -> bool {
        self.table.ends_with("dev-dependencies")
    }
}

impl Manifest {
    /// Reads the forms a manifest names dependencies in: `name = "1"`, `name = { ... }`,
    /// `name.workspace = true` under a dependency table, and `[dependencies.name]`; a
    /// `package = "..."` key renames.
    fn parse(text: &str) -> Self {
        let mut package = None;
        let mut dependencies: Vec<Dependency> = Vec::new();
        let mut table = String::new();
        // Under `[dependencies.name]`: the index of that dependency.
        let mut dotted: Option<usize> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = strip_toml_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let header = header.trim();
                dotted = None;
                table = header.to_owned();
                if let Some((deps, name)) = split_dependency_header(header) {
                    table = deps.to_owned();
                    dependencies.push(Dependency {
                        name: unquote(name).to_owned(),
                        table: deps.to_owned(),
                        line: n + 1,
                    });
                    dotted = Some(dependencies.len() - 1);
                }
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue; // a continuation line of a multi-line array
            };
            let key = key.trim();
            if table == "package" && key == "name" {
                package = Some(unquote(value.trim()).to_owned());
            }
            if let Some(index) = dotted {
                if key == "package" {
                    dependencies[index].name = unquote(value.trim()).to_owned();
                }
                continue;
            }
            if !is_dependency_table(&table) {
                continue;
            }
            let name = unquote(key.split('.').next().unwrap_or(key).trim());
            if !name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
            {
                continue;
            }
            let renamed = package_key(value).unwrap_or(name);
            dependencies.push(Dependency {
                name: renamed.to_owned(),
                table: table.clone(),
                line: n + 1,
            });
        }
        Self {
            package,
            dependencies,
        }
    }
}

fn is_dependency_table(table: &str) -> bool {
    table == "dependencies"
        || table == "dev-dependencies"
        || table == "build-dependencies"
        || (table.starts_with("target.")
            && (table.ends_with(".dependencies")
                || table.ends_with(".dev-dependencies")
                || table.ends_with(".build-dependencies")))
}

/// `dependencies.wasmtime` → (`dependencies`, `wasmtime`).
fn split_dependency_header(header: &str) -> Option<(&str, &str)> {
    for deps in ["dev-dependencies.", "build-dependencies.", "dependencies."] {
        if let Some(at) = header.find(deps) {
            let table = &header[..at + deps.len() - 1];
            if is_dependency_table(table) {
                return Some((table, &header[at + deps.len()..]));
            }
        }
    }
    None
}

/// The `package = "..."` of an inline table, if it has one.
fn package_key(value: &str) -> Option<&str> {
    let at = value.find("package")?;
    let rest = value[at + "package".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start().strip_prefix('"')?;
    rest.split('"').next()
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('"').trim_matches('\'')
}

/// A line of TOML without its comment (a `#` outside a string).
fn strip_toml_comment(line: &str) -> &str {
    let mut in_string = None;
    for (i, c) in line.char_indices() {
        match (c, in_string) {
            ('"' | '\'', None) => in_string = Some(c),
            (c, Some(open)) if c == open => in_string = None,
            ('#', None) => return &line[..i],
            _ => {}
        }
    }
    line
}

#[test]
fn manifests_are_read_in_every_form_that_names_a_dependency() {
    let manifest = Manifest::parse(
        r#"
[package]
name = "example" # a comment
[dependencies]
mcpproxy-policy.workspace = true
serde = { version = "1", features = [
    "derive",
] }
web = { package = "axum", version = "0.8" }
[target.'cfg(unix)'.dependencies]
libc = "0.2"
[dev-dependencies]
tempfile = "3"
[dependencies.rt]
package = "tokio"
version = "1"
"#,
    );
    assert_eq!(manifest.package.as_deref(), Some("example"));
    let found: Vec<(&str, &str, usize)> = manifest
        .dependencies
        .iter()
        .map(|d| (d.name.as_str(), d.table.as_str(), d.line))
        .collect();
    assert_eq!(
        found,
        [
            ("mcpproxy-policy", "dependencies", 5),
            ("serde", "dependencies", 6),
            ("axum", "dependencies", 9),
            ("libc", "target.'cfg(unix)'.dependencies", 11),
            ("tempfile", "dev-dependencies", 13),
            ("tokio", "dependencies", 14),
        ]
    );
}

#[test]
fn crate_order_violations_are_found() {
    let support = "[package]\nname = \"support\"\n[dependencies]\nserde = \"1\"\n";
    let policy = "[package]\nname = \"policy\"\n[dependencies]\nsupport.workspace = true\n";
    assert!(order_violations(&["support", "policy"], &[("s", support), ("p", policy)]).is_empty());
    // The helpers reaching up into the vocabulary.
    let upward = "[package]\nname = \"support\"\n[dev-dependencies]\npolicy = \"1\"\n";
    let found = order_violations(&["support", "policy"], &[("s", upward), ("p", policy)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .starts_with("s:4: support depends on policy in [dev-dependencies], a crate above it")
    );
    // A crate that depends on itself, and a manifest that is not the crate named.
    let found = order_violations(&["policy", "other"], &[("p", policy), ("o", support)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("is not the crate other"), "{found:?}");
}

#[test]
fn module_headers_are_recognised() {
    assert!(starts_with_header("//! What this owns.\nuse std::io;\n"));
    assert!(starts_with_header("\n//! After a blank line.\n"));
    assert!(!starts_with_header("use std::io;\n//! Too late.\n"));
    assert!(!starts_with_header("/// An item's doc.\nfn f() {}\n"));
    assert!(!starts_with_header("// A plain comment.\n"));
    assert!(!starts_with_header(
        "#![allow(dead_code)]\n//! After an attribute.\n"
    ));
    assert!(!starts_with_header(""));
}

#[test]
fn unsafe_keywords_are_found_in_code_only() {
    let source = r##"//! Says unsafe in a doc comment.
#[allow(unsafe_code, reason = "unsafe in a string")]
fn f() -> i32 {
    // unsafe in a comment
    let _ = r#"unsafe in a raw string"#;
    let not_unsafe_name = 1;
    unsafe { g() }
}
unsafe fn g() -> i32 { 0 }
impl Send for X {} unsafe impl Sync for X {}
"##;
    assert_eq!(unsafe_lines(source), [7, 9, 10]);
    assert!(unsafe_lines("fn f() { let unsafe_code = 1; }").is_empty());
}

#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let source = r##"//! Says fn fake() { in a doc comment.
fn short() {}
/// fn doc() { in a doc comment.
pub(crate) async fn long(x: [u8; 2]) -> impl Fn() -> usize {
    let _ = "} a brace in a string {";
    let _ = r#"}} in a "raw" string"#;
    // } in a comment
    /* } in a /* nested */
       block comment */
    let _ = ('}', '{', '\'', x);
    let g = |y: usize| {
        let h = move || { y + 1 };
        h()
    };
    fn inner(f: fn(u8) -> u8) -> u8 {
        f(1)
    }
    move || g(inner(|b| b) as usize)
}
trait Declared {
    fn declared(&self) -> [u8; 3];
}
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    fn helper() {
        let _ = 1;
    }
}
impl X {
    #[cfg(test)]
    pub(crate) fn test_only(&self) {
        let _ = 2;
    }
    const fn after() -> u8 {
        3
    }
}
"##;
    let code: Vec<char> = code_only(source).chars().collect();
    let exempt = test_spans(&code);
    let measured: Vec<(String, usize, usize)> = function_spans(&code, &exempt)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect();
    assert_eq!(
        measured,
        [
            ("short".to_owned(), 2, 1),
            ("long".to_owned(), 4, 16),
            ("inner".to_owned(), 15, 3),
            ("after".to_owned(), 35, 3),
        ]
    );
    // 38 lines, of which the test module (23-29) and the test-only function (31-34) are exempt.
    assert_eq!(non_test_lines(&code, &exempt), 38 - 7 - 4);
}

#[test]
fn test_modules_and_the_files_they_declare_are_test_code() {
    let lib = Path::new("src/lib.rs");
    let launchers = Path::new("src/launchers.rs");
    let tests = Path::new("src/tests.rs");
    let declared = |file: &Path, source: &str| (file.to_path_buf(), module_files(file, source));
    let declarations = [
        declared(
            lib,
            "//! x\npub(crate) mod launchers;\nmod inline {}\n#[cfg(test)]\nmod tests;\n",
        ),
        declared(
            launchers,
            "//! x\nmod child;\n#[cfg(test)]\n/// Its tests.\n#[path = \"launchers_tests.rs\"]\n\
             pub(crate) mod tests;\n",
        ),
        declared(tests, "//! x\nmod fixtures;\n"),
    ];
    let files = |names: &[&str]| -> Vec<PathBuf> { names.iter().map(PathBuf::from).collect() };
    let gated = |declared: &[(bool, PathBuf)]| -> Vec<bool> {
        declared.iter().map(|(gated, _)| *gated).collect()
    };
    let targets = |declared: &[(bool, PathBuf)]| -> Vec<PathBuf> {
        declared.iter().map(|(_, path)| path.clone()).collect()
    };
    assert_eq!(
        targets(&declarations[0].1),
        files(&["src/launchers.rs", "src/tests.rs"])
    );
    assert_eq!(gated(&declarations[0].1), [false, true]);
    assert_eq!(
        targets(&declarations[1].1),
        files(&["src/launchers/child.rs", "src/launchers_tests.rs"])
    );
    assert_eq!(gated(&declarations[1].1), [false, true]);
    assert_eq!(
        test_files(&declarations).into_iter().collect::<Vec<_>>(),
        files(&[
            "src/launchers_tests.rs",
            "src/tests/fixtures.rs",
            "src/tests.rs"
        ])
    );
}
