//! What `mcpproxy plugins wit` and `mcpproxy plugins new` write: the WIT contract embedded
//! in the binary (so authors do not need this repository), and starter projects in Rust,
//! Python and JavaScript for a validator, an annotator or a result guard, each with a build
//! script, a README with the three commands (build, check, load) and, for a validator or a
//! result guard, `cases.json` for `plugins check --cases`.

use std::path::{Path, PathBuf};

use mcpproxy_policy::is_plugin_name;

use mcpproxy_plugin_host::PluginKind;

/// `wit/`, as this binary was built against: (path under `wit/`, text).
pub const WIT: &[(&str, &str)] = &[
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("validator.wit", include_str!("../../../wit/validator.wit")),
    ("annotator.wit", include_str!("../../../wit/annotator.wit")),
    ("scanner.wit", include_str!("../../../wit/scanner.wit")),
    ("sink.wit", include_str!("../../../wit/sink.wit")),
    (
        "result-guard.wit",
        include_str!("../../../wit/result-guard.wit"),
    ),
    (
        "deps/cli/cli.wit",
        include_str!("../../../wit/deps/cli/cli.wit"),
    ),
    (
        "deps/clocks/clocks.wit",
        include_str!("../../../wit/deps/clocks/clocks.wit"),
    ),
    (
        "deps/filesystem/filesystem.wit",
        include_str!("../../../wit/deps/filesystem/filesystem.wit"),
    ),
    (
        "deps/http/http.wit",
        include_str!("../../../wit/deps/http/http.wit"),
    ),
    (
        "deps/io/io.wit",
        include_str!("../../../wit/deps/io/io.wit"),
    ),
    (
        "deps/random/random.wit",
        include_str!("../../../wit/deps/random/random.wit"),
    ),
    (
        "deps/sockets/sockets.wit",
        include_str!("../../../wit/deps/sockets/sockets.wit"),
    ),
];

/// Why a project or the contract could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "'{0}' is not a plugin name: use lowercase letters, digits and '-', starting with a \
         letter (at most 64 characters), e.g. 'no-secrets'"
    )]
    BadName(String),
    #[error("{0} already exists and is not empty: choose another name or directory")]
    NotEmpty(PathBuf),
    #[error("`plugins new` makes validators, annotators and result guards, not {0} plugins")]
    Kind(PluginKind),
    #[error(
        "the C template is a validator; write {0} plugins in Rust, Python or JavaScript \
         (`--lang rust`), or start from the validator and its generated header"
    )]
    CKind(PluginKind),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The languages `plugins new` writes projects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
    /// C, bound with `wit-bindgen c` (validators only).
    C,
}

impl Lang {
    fn display(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Python => "Python",
            Self::Js => "JavaScript",
            Self::C => "C",
        }
    }
}

/// Writes `wit/` into `dir` (created if missing); returns the files written.
pub fn write_wit(dir: &Path) -> Result<Vec<PathBuf>, TemplateError> {
    WIT.iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            write(&path, text)?;
            Ok(path)
        })
        .collect()
}

/// Writes a new plugin project named `name` into `dir` (which must not exist or be empty);
/// returns the files written.
pub fn new_project(
    dir: &Path,
    name: &str,
    lang: Lang,
    kind: PluginKind,
) -> Result<Vec<PathBuf>, TemplateError> {
    if !is_plugin_name(name) {
        return Err(TemplateError::BadName(name.to_owned()));
    }
    let world = match kind {
        PluginKind::Validator => "validator-plugin",
        PluginKind::Annotator => "annotator-plugin",
        PluginKind::ResultGuard => "result-guard-plugin",
        other => return Err(TemplateError::Kind(other)),
    };
    if lang == Lang::C && kind != PluginKind::Validator {
        return Err(TemplateError::CKind(kind));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(TemplateError::NotEmpty(dir.to_owned()));
    }
    let validator = kind == PluginKind::Validator;
    let file = name.replace('-', "_");
    let guard = kind == PluginKind::ResultGuard;
    let source = template_source(lang, kind);
    let source_path = match lang {
        Lang::Rust => "src/lib.rs".to_owned(),
        Lang::Python => format!("src/{file}.py"),
        Lang::Js => "src/plugin.js".to_owned(),
        Lang::C => "src/plugin.c".to_owned(),
    };
    let files = project_files(lang, kind, source_path.clone(), source);
    let config = example_config(name, kind);
    let vars = [
        ("{{name}}", name.to_owned()),
        ("{{file}}", file.clone()),
        ("{{world}}", world.to_owned()),
        // The world's name as `wit-bindgen c` names its files and types.
        ("{{world_c}}", world.replace('-', "_")),
        ("{{kind}}", kind.as_str().to_owned()),
        ("{{lang}}", lang.display().to_owned()),
        ("{{source}}", source_path),
        (
            "{{check_args}}",
            if validator || guard {
                " --cases cases.json"
            } else {
                ""
            }
            .to_owned(),
        ),
        ("{{config}}", config),
        (
            "{{cases_note}}",
            if validator {
                "`cases.json` holds calls and the verdict each must get; add your own. "
            } else if guard {
                "`cases.json` holds results and the answer each must get; add your own. "
            } else {
                ""
            }
            .to_owned(),
        ),
    ];
    let mut written = write_wit(&dir.join("wit"))?;
    for (path, text) in files {
        let text = vars
            .iter()
            .fold(text.to_owned(), |acc, (key, value)| acc.replace(key, value));
        let path = dir.join(path);
        write(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

/// The plugin's source file as the template has it, for `lang` and `kind`.
fn template_source(lang: Lang, kind: PluginKind) -> &'static str {
    match (lang, kind) {
        (Lang::Rust, PluginKind::Validator) => include_str!("../templates/rust/validator.rs"),
        (Lang::Rust, PluginKind::ResultGuard) => include_str!("../templates/rust/guard.rs"),
        (Lang::Rust, _) => include_str!("../templates/rust/annotator.rs"),
        (Lang::Python, PluginKind::Validator) => include_str!("../templates/python/validator.py"),
        (Lang::Python, PluginKind::ResultGuard) => include_str!("../templates/python/guard.py"),
        (Lang::Python, _) => include_str!("../templates/python/annotator.py"),
        (Lang::Js, PluginKind::Validator) => include_str!("../templates/js/validator.js"),
        (Lang::Js, PluginKind::ResultGuard) => include_str!("../templates/js/guard.js"),
        (Lang::Js, _) => include_str!("../templates/js/annotator.js"),
        (Lang::C, _) => include_str!("../templates/c/validator.c"),
    }
}

/// The project's files (path and template text): the source at `source_path`, the README,
/// the language's build files and `.gitignore`, and the example cases of a validator or a
/// result guard.
fn project_files(
    lang: Lang,
    kind: PluginKind,
    source_path: String,
    source: &'static str,
) -> Vec<(String, &'static str)> {
    let validator = kind == PluginKind::Validator;
    let guard = kind == PluginKind::ResultGuard;
    let mut files: Vec<(String, &str)> = vec![
        (source_path, source),
        (
            "README.md".to_owned(),
            include_str!("../templates/README.md"),
        ),
    ];
    match lang {
        Lang::Rust => {
            files.push((
                "Cargo.toml".to_owned(),
                include_str!("../templates/rust/Cargo.toml"),
            ));
            files.push((
                "build.sh".to_owned(),
                include_str!("../templates/rust/build.sh"),
            ));
            files.push((".gitignore".to_owned(), "/target\n*.wasm\n"));
        }
        Lang::Python => {
            files.push((
                "build.sh".to_owned(),
                include_str!("../templates/python/build.sh"),
            ));
            files.push((
                "requirements.txt".to_owned(),
                include_str!("../templates/python/requirements.txt"),
            ));
            files.push((".gitignore".to_owned(), ".venv/\n*.wasm\n"));
        }
        Lang::Js => {
            files.push((
                "build.sh".to_owned(),
                include_str!("../templates/js/build.sh"),
            ));
            files.push((
                "package.json".to_owned(),
                include_str!("../templates/js/package.json"),
            ));
            // Every package pinned, as `npm ci` installs it: the same build on every machine.
            files.push((
                "package-lock.json".to_owned(),
                include_str!("../templates/js/package-lock.json"),
            ));
            files.push((".gitignore".to_owned(), "node_modules/\n*.wasm\n"));
        }
        Lang::C => {
            files.push((
                "build.sh".to_owned(),
                include_str!("../templates/c/build.sh"),
            ));
            files.push((".gitignore".to_owned(), "gen/\n.c-tools/\n*.wasm\n"));
        }
    }
    if validator {
        files.push((
            "cases.json".to_owned(),
            include_str!("../templates/cases.json"),
        ));
    }
    if guard {
        files.push((
            "cases.json".to_owned(),
            include_str!("../templates/guard-cases.json"),
        ));
    }
    files
}

/// The config snippet the README shows: the plugin in the proxy's `plugins`, with example
/// settings for a validator or a guard.
fn example_config(name: &str, kind: PluginKind) -> String {
    let validator = kind == PluginKind::Validator;
    let guard = kind == PluginKind::ResultGuard;
    const DIR: &str = "\"dir\": \"~/.mcpproxy/plugins\"";
    if guard {
        format!(
            "{{\n  \"plugins\": {{\n    {DIR},\n    \"guards\": [\"secret-redactor\", \"{name}\"],\n    \
             \"settings\": {{ \"{name}\": {{ \"marker_words\": [\"CONFIDENTIAL\"] }} }}\n  }}\n}}"
        )
    } else if validator {
        format!(
            "{{\n  \"plugins\": {{\n    {DIR},\n    \"validators\": [\"intent-matrix\", \"{name}\"],\n    \
             \"settings\": {{ \"{name}\": {{ \"blocked_tools\": [\"github:delete_repo\"] }} }}\n  }}\n}}"
        )
    } else {
        format!(
            "{{\n  \"plugins\": {{ {DIR}, \"annotators\": [\"{name}\", \"prefix-annotator\"] }}\n}}"
        )
    }
}

fn write(path: &Path, text: &str) -> Result<(), TemplateError> {
    let err = |source| TemplateError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the plugin contract, and nothing of `wit/code/` (the internal package
    /// of the `code_execution` runtime, which plugin authors do not build against).
    #[test]
    fn every_wit_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let internal = root.join("code");
        assert!(
            internal.join("code.wit").is_file(),
            "{}",
            internal.display()
        );
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path == internal {
                    continue;
                }
                if path.is_dir() {
                    stack.push(path);
                } else {
                    on_disk.push(path.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = WIT.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        let contract: String = WIT.iter().map(|(_, text)| *text).collect();
        assert!(contract.contains("package mcpproxy:plugin@0.1.1;"));
        assert!(
            !contract.contains("mcpproxy:code"),
            "the code runtime's WIT is embedded"
        );
    }

    #[test]
    fn every_template_fills_every_placeholder() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::C] {
            for kind in [
                PluginKind::Validator,
                PluginKind::Annotator,
                PluginKind::ResultGuard,
            ] {
                if lang == Lang::C && kind != PluginKind::Validator {
                    continue;
                }
                let dir = tempfile::tempdir().unwrap();
                let files = new_project(dir.path(), "my-policy", lang, kind).unwrap();
                for path in files
                    .iter()
                    .filter(|p| !p.starts_with(dir.path().join("wit")))
                {
                    let text = std::fs::read_to_string(path).unwrap();
                    assert!(!text.contains("{{"), "{lang:?} {kind}: {}", path.display());
                }
                let again = new_project(dir.path(), "my-policy", lang, kind).unwrap_err();
                assert!(matches!(again, TemplateError::NotEmpty(_)), "{again}");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            new_project(dir.path(), "My_Policy", Lang::Rust, PluginKind::Validator),
            Err(TemplateError::BadName(_))
        ));
    }

    /// The C template binds the world it names: its header and functions are the ones
    /// `wit-bindgen c` generates for `validator-plugin` (tests/cli_plugins.rs builds it).
    #[test]
    fn the_c_template_binds_the_validator_world() {
        let dir = tempfile::tempdir().unwrap();
        let files = new_project(dir.path(), "no-deletes", Lang::C, PluginKind::Validator).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        for expected in [
            "src/plugin.c",
            "build.sh",
            "cases.json",
            "README.md",
            "wit/worlds.wit",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
        }
        let source = std::fs::read_to_string(dir.path().join("src/plugin.c")).unwrap();
        assert!(source.contains("#include \"validator_plugin.h\""));
        // The package is mcpproxy:plugin, its interfaces metadata, validator and host.
        let worlds = std::fs::read_to_string(dir.path().join("wit/worlds.wit")).unwrap();
        assert!(worlds.starts_with("package mcpproxy:plugin@"));
        assert!(worlds.contains("world validator-plugin {"));
        for (function, wit) in [
            (
                "exports_mcpproxy_plugin_metadata_info",
                "info: func() -> plugin-info;",
            ),
            (
                "exports_mcpproxy_plugin_validator_validate",
                "validate: func(request: call-request) -> verdict;",
            ),
            ("mcpproxy_plugin_host_config", "config: func() -> string;"),
        ] {
            assert!(source.contains(function), "{function}");
            let wit_text: String = WIT.iter().map(|(_, text)| *text).collect();
            assert!(wit_text.contains(wit), "{wit}");
        }
        let build = std::fs::read_to_string(dir.path().join("build.sh")).unwrap();
        assert!(build.contains("c wit --world validator-plugin --out-dir gen"));
        assert!(build.contains("gen/validator_plugin.c gen/validator_plugin_component_type.o"));
        assert!(build.contains("-o no_deletes.wasm"));
        assert!(matches!(
            new_project(
                dir.path().join("x").as_path(),
                "x",
                Lang::C,
                PluginKind::Annotator
            ),
            Err(TemplateError::CKind(PluginKind::Annotator))
        ));
    }
}
