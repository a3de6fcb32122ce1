//! Unit tests of the launcher plans: every launcher, every place a registry comes from, the
//! cache layouts, and hostile config files.

use super::cache::json_top_level_string;
use super::npm::npm_name_version;
use super::python::python_name_version;
use super::*;

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn no_parent(_: &str) -> Option<OsString> {
    None
}

/// A plan with no env, no parent env and an empty home.
fn plan_in(home: &Path, command: &str, words: &[&str]) -> Option<LauncherPlan> {
    launcher_plan(
        command,
        &args(words),
        &BTreeMap::new(),
        &no_parent,
        Some(home),
        Path::new("/cache"),
    )
}

fn hosts(plan: &LauncherPlan) -> Vec<&str> {
    plan.registries
        .iter()
        .map(|r| r.host_port.as_str())
        .collect()
}

fn env_value<'a>(plan: &'a LauncherPlan, name: &str) -> Option<&'a str> {
    plan.registry_env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn every_launcher_is_recognised_with_its_package() {
    let home = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str], LauncherKind, &str)] = &[
        (
            "npx",
            &[
                "-y",
                "@modelcontextprotocol/server-everything@2026.8.31",
                "stdio",
            ],
            LauncherKind::Npx,
            "@modelcontextprotocol/server-everything@2026.8.31",
        ),
        (
            "/usr/bin/npx",
            &["--yes", "--package=pkg-a@1", "bin-a"],
            LauncherKind::Npx,
            "pkg-a@1",
        ),
        (
            "npm",
            &["exec", "-y", "pkg-b"],
            LauncherKind::NpmExec,
            "pkg-b",
        ),
        (
            "npm",
            &["x", "--", "pkg-c", "--flag"],
            LauncherKind::NpmExec,
            "pkg-c",
        ),
        (
            "uvx",
            &["mcp-server-time"],
            LauncherKind::Uvx,
            "mcp-server-time",
        ),
        (
            "uvx",
            &[
                "--python",
                "3.12",
                "--from",
                "mcp-server-time==1.0",
                "mcp-server-time",
            ],
            LauncherKind::Uvx,
            "mcp-server-time==1.0",
        ),
        (
            "/home/u/.local/bin/uv",
            &["--quiet", "tool", "run", "mcp-server-fetch@2.0"],
            LauncherKind::UvToolRun,
            "mcp-server-fetch@2.0",
        ),
        ("pipx", &["run", "mcp-x"], LauncherKind::PipxRun, "mcp-x"),
        (
            "pipx",
            &["run", "--spec", "mcp-y==3", "y"],
            LauncherKind::PipxRun,
            "mcp-y==3",
        ),
        ("bunx", &["@scope/srv"], LauncherKind::Bunx, "@scope/srv"),
        ("bun", &["x", "srv@1"], LauncherKind::Bunx, "srv@1"),
    ];
    for (command, words, kind, package) in cases {
        let plan = plan_in(home.path(), command, words)
            .unwrap_or_else(|| panic!("{command} {words:?} not recognised"));
        assert_eq!(plan.kind, *kind, "{command} {words:?}");
        assert_eq!(plan.package, *package, "{command} {words:?}");
    }
}

#[test]
fn other_commands_and_launchers_that_download_nothing_are_no_plan() {
    let home = tempfile::tempdir().unwrap();
    for (command, words) in [
        ("node", &["server.js"][..]),
        ("python3", &["-m", "mcp_server_time"]),
        ("npm", &["install", "x"]),
        ("npm", &[]),
        ("uv", &["run", "x"]),
        ("uv", &["tool", "install", "x"]),
        ("pipx", &["install", "x"]),
        ("bun", &["run", "x"]),
        ("npx", &[]),
        ("npx", &["-y"]),
        ("npx", &["--prefix", "/opt/servers", "--no-install", "srv"]),
        ("uvx", &["--offline", "x"]),
        ("npx-wrapper", &["-y", "x"]),
        ("", &["x"]),
    ] {
        assert_eq!(
            plan_in(home.path(), command, words),
            None,
            "{command} {words:?}"
        );
    }
}

#[test]
fn npm_uses_its_default_registry_when_nothing_is_configured() {
    let home = tempfile::tempdir().unwrap();
    let plan = plan_in(home.path(), "npx", &["-y", "srv"]).unwrap();
    assert_eq!(
        plan.registries,
        vec![Registry {
            url: "https://registry.npmjs.org/".into(),
            host_port: "registry.npmjs.org:443".into(),
            source: "npm's default".into(),
        }]
    );
    assert_eq!(
        env_value(&plan, "npm_config_registry"),
        Some("https://registry.npmjs.org/")
    );
    assert_eq!(
        env_value(&plan, "npm_config_update_notifier"),
        Some("false")
    );
}

#[test]
fn npm_registry_sources_in_order() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".npmrc"),
        "# a comment\nregistry = \"https://npm.example.com:8443/repo/\"\n",
    )
    .unwrap();
    let parent = |name: &str| {
        (name == "NPM_CONFIG_REGISTRY").then(|| OsString::from("http://127.0.0.1:4873/"))
    };
    let server = env(&[("Npm_Config_Registry", "http://localhost:9999")]);
    let words = args(&["-y", "srv"]);
    let plan_with = |server: &BTreeMap<String, String>,
                     parent: &dyn Fn(&str) -> Option<OsString>,
                     words: &[String]| {
        launcher_plan(
            "npx",
            words,
            server,
            parent,
            Some(home.path()),
            Path::new("/c"),
        )
        .unwrap()
    };

    // The --registry argument beats everything.
    let with_arg = args(&["--registry=http://10.0.0.1:1234", "-y", "srv"]);
    let plan = plan_with(&server, &parent, &with_arg);
    assert_eq!(hosts(&plan), ["10.0.0.1:1234"]);
    assert_eq!(plan.registries[0].source, "the --registry argument");

    // Then the server's env (any case).
    let plan = plan_with(&server, &parent, &words);
    assert_eq!(hosts(&plan), ["localhost:9999"]);
    assert_eq!(
        plan.registries[0].source,
        "Npm_Config_Registry in the server's env"
    );

    // Then mcpproxy's env.
    let plan = plan_with(&BTreeMap::new(), &parent, &words);
    assert_eq!(hosts(&plan), ["127.0.0.1:4873"]);
    assert_eq!(
        plan.registries[0].source,
        "NPM_CONFIG_REGISTRY in mcpproxy's env"
    );
    assert_eq!(
        env_value(&plan, "npm_config_registry"),
        Some("http://127.0.0.1:4873/")
    );

    // Then ~/.npmrc.
    let plan = plan_with(&BTreeMap::new(), &no_parent, &words);
    assert_eq!(hosts(&plan), ["npm.example.com:8443"]);
    assert_eq!(
        plan.registries[0].source,
        home.path().join(".npmrc").display().to_string()
    );
    assert_eq!(plan.registries[0].url, "https://npm.example.com:8443/repo/");

    // npm_config_userconfig names another file.
    let other = home.path().join("other.npmrc");
    std::fs::write(&other, "registry=http://[::1]:4873/\n").unwrap();
    let server = env(&[("npm_config_userconfig", other.to_str().unwrap())]);
    let plan = plan_with(&server, &no_parent, &words);
    assert_eq!(hosts(&plan), ["[::1]:4873"]);
}

#[test]
fn a_scoped_package_adds_its_scopes_registry() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".npmrc"),
        "@corp:registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=secret\n",
    )
    .unwrap();
    let plan = plan_in(home.path(), "npx", &["-y", "@corp/server@1.2.3"]).unwrap();
    assert_eq!(
        hosts(&plan),
        ["registry.npmjs.org:443", "npm.corp.example:443"]
    );
    assert_eq!(
        env_value(&plan, "npm_config_@corp:registry"),
        Some("https://npm.corp.example/")
    );
    // Another scope's registry is not this package's.
    let plan = plan_in(home.path(), "npx", &["-y", "@other/server"]).unwrap();
    assert_eq!(hosts(&plan), ["registry.npmjs.org:443"]);
    // A scope's registry from the server's env.
    let plan = launcher_plan(
        "npx",
        &args(&["-y", "@corp/server"]),
        &env(&[("npm_config_@corp:registry", "http://127.0.0.1:5000")]),
        &no_parent,
        Some(home.path()),
        Path::new("/c"),
    )
    .unwrap();
    assert_eq!(hosts(&plan), ["registry.npmjs.org:443", "127.0.0.1:5000"]);
}

#[test]
fn bunx_reads_bun_config_registry_first() {
    let home = tempfile::tempdir().unwrap();
    let plan = launcher_plan(
        "bunx",
        &args(&["srv"]),
        &env(&[
            ("BUN_CONFIG_REGISTRY", "http://127.0.0.1:7000"),
            ("npm_config_registry", "http://127.0.0.1:8000"),
        ]),
        &no_parent,
        Some(home.path()),
        Path::new("/c"),
    )
    .unwrap();
    assert_eq!(hosts(&plan), ["127.0.0.1:7000"]);
    assert_eq!(env_value(&plan, "npm_config_update_notifier"), None);
}

#[test]
fn uv_defaults_to_pypi_and_its_file_host() {
    let home = tempfile::tempdir().unwrap();
    let plan = plan_in(home.path(), "uvx", &["mcp-server-time"]).unwrap();
    assert_eq!(hosts(&plan), ["pypi.org:443", "files.pythonhosted.org:443"]);
    assert_eq!(plan.registries[0].url, "https://pypi.org/simple");
    assert!(plan.registry_env.is_empty(), "{:?}", plan.registry_env);
}

#[test]
fn uv_index_sources_in_order() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/uv");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("uv.toml"),
        "[pip]\nindex-url = \"https://ignored.example/simple\"\n\n\
         [[index]]\nname = \"extra\"\nurl = \"https://extra.example/simple\"\n\n\
         [[index]]\nname = \"corp\"\nurl = \"https://pypi.corp.example/simple\"\ndefault = true\n",
    )
    .unwrap();
    let run =
        |words: &[&str], server: &[(&str, &str)], parent: &dyn Fn(&str) -> Option<OsString>| {
            launcher_plan(
                "uvx",
                &args(words),
                &env(server),
                parent,
                Some(home.path()),
                Path::new("/c"),
            )
            .unwrap()
        };
    // Arguments first.
    let plan = run(
        &["--index-url", "http://127.0.0.1:3141/simple/", "pkg"],
        &[("UV_DEFAULT_INDEX", "http://127.0.0.1:1/simple")],
        &no_parent,
    );
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:3141");
    assert_eq!(plan.registries[0].source, "the --index-url argument");
    assert_eq!(
        env_value(&plan, "UV_DEFAULT_INDEX"),
        Some("http://127.0.0.1:3141/simple/")
    );
    let plan = run(
        &["--default-index=http://127.0.0.1:3142/simple", "pkg"],
        &[],
        &no_parent,
    );
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:3142");
    // Then the server's env, then mcpproxy's.
    let plan = run(
        &["pkg"],
        &[("UV_INDEX_URL", "http://127.0.0.1:3143/simple")],
        &no_parent,
    );
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:3143");
    assert_eq!(
        plan.registries[0].source,
        "UV_INDEX_URL in the server's env"
    );
    let parent =
        |name: &str| (name == "PIP_INDEX_URL").then(|| OsString::from("http://127.0.0.1:3144/"));
    let plan = run(&["pkg"], &[], &parent);
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:3144");
    assert_eq!(plan.registries[0].source, "PIP_INDEX_URL in mcpproxy's env");
    // Then uv.toml: the default [[index]] replaces PyPI, the other is searched too; the
    // [pip] section is not uv tool's.
    let plan = run(&["pkg"], &[], &no_parent);
    assert_eq!(hosts(&plan), ["pypi.corp.example:443", "extra.example:443"]);
    assert_eq!(
        plan.registries[0].source,
        config.join("uv.toml").display().to_string()
    );
    assert_eq!(
        env_value(&plan, "UV_INDEX"),
        Some("https://extra.example/simple")
    );
    // An extra index keeps PyPI as the default.
    std::fs::remove_file(config.join("uv.toml")).unwrap();
    let plan = run(
        &["--index", "mine=http://127.0.0.1:3145/simple", "pkg"],
        &[],
        &no_parent,
    );
    assert_eq!(
        hosts(&plan),
        [
            "pypi.org:443",
            "127.0.0.1:3145",
            "files.pythonhosted.org:443"
        ]
    );
    // A top-level index-url in uv.toml.
    std::fs::write(
        config.join("uv.toml"),
        "index-url = 'http://127.0.0.1:3146/simple'\n",
    )
    .unwrap();
    let plan = run(&["pkg"], &[], &no_parent);
    assert_eq!(hosts(&plan), ["127.0.0.1:3146"]);
    // XDG_CONFIG_HOME moves it.
    let xdg = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(xdg.path().join("uv")).unwrap();
    std::fs::write(
        xdg.path().join("uv/uv.toml"),
        "index-url = \"http://127.0.0.1:3147/\"\n",
    )
    .unwrap();
    let xdg_path = xdg.path().to_owned();
    let parent = move |name: &str| (name == "XDG_CONFIG_HOME").then(|| xdg_path.clone().into());
    let plan = run(&["pkg"], &[], &parent);
    assert_eq!(hosts(&plan), ["127.0.0.1:3147"]);
}

#[test]
fn pipx_index_sources_in_order() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".pip")).unwrap();
    std::fs::write(
        home.path().join(".pip/pip.conf"),
        "[global]\nindex-url = https://mirror.example/simple\nextra-index-url = http://127.0.0.1:9/x\n",
    )
    .unwrap();
    let run = |words: &[&str], server: &[(&str, &str)]| {
        launcher_plan(
            "pipx",
            &args(words),
            &env(server),
            &no_parent,
            Some(home.path()),
            Path::new("/c"),
        )
        .unwrap()
    };
    let plan = run(
        &["run", "--index-url", "http://127.0.0.1:1/simple", "app"],
        &[],
    );
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:1");
    let plan = run(
        &[
            "run",
            "--pip-args=--no-cache-dir --index-url http://127.0.0.1:2/simple",
            "app",
        ],
        &[],
    );
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:2");
    assert_eq!(
        env_value(&plan, "PIP_INDEX_URL"),
        Some("http://127.0.0.1:2/simple")
    );
    let plan = run(&["run", "app"], &[("PIP_INDEX_URL", "http://127.0.0.1:3/")]);
    assert_eq!(plan.registries[0].host_port, "127.0.0.1:3");
    let plan = run(&["run", "app"], &[]);
    assert_eq!(hosts(&plan), ["mirror.example:443", "127.0.0.1:9"]);
    // ~/.config/pip/pip.conf comes before ~/.pip/pip.conf.
    std::fs::create_dir_all(home.path().join(".config/pip")).unwrap();
    std::fs::write(
        home.path().join(".config/pip/pip.conf"),
        "[install]\nindex-url = http://127.0.0.1:4/simple\n",
    )
    .unwrap();
    let plan = run(&["run", "app"], &[]);
    assert_eq!(hosts(&plan), ["127.0.0.1:4"]);
    // Nothing configured: PyPI and its file host.
    let empty = tempfile::tempdir().unwrap();
    let plan = plan_in(empty.path(), "pipx", &["run", "app"]).unwrap();
    assert_eq!(hosts(&plan), ["pypi.org:443", "files.pythonhosted.org:443"]);
}

#[test]
fn urls_become_host_and_port() {
    let cases = [
        (
            "https://registry.npmjs.org/",
            Some("registry.npmjs.org:443"),
        ),
        ("http://Example.COM/simple", Some("example.com:80")),
        ("http://127.0.0.1:4873", Some("127.0.0.1:4873")),
        ("https://[::1]:8443/x", Some("[::1]:8443")),
        ("https://[::1]/x", Some("[::1]:443")),
        (
            "https://user:pass@host.example:444/x",
            Some("host.example:444"),
        ),
        ("ftp://host/", None),
        ("file:///srv/index", None),
        ("https://", None),
        ("https://host:0/", None),
        ("https://host:99999/", None),
        ("https://[nope]/", None),
        ("https://host name/", None),
        ("not a url", None),
    ];
    for (url, want) in cases {
        let got = registry(url, String::new()).map(|r| r.host_port);
        assert_eq!(got.as_deref(), want, "{url}");
    }
    // Credentials are never shown.
    let shown = registry("https://user:pass@host.example:444/x", String::new()).unwrap();
    assert_eq!(shown.url, "https://host.example:444/x");
}

#[test]
fn caches_are_under_the_root() {
    let home = tempfile::tempdir().unwrap();
    let root = Path::new("/data/launchers/srv");
    for (command, words, must_have) in [
        ("npx", &["-y", "x"][..], "npm_config_cache"),
        ("uvx", &["x"], "UV_CACHE_DIR"),
        ("uvx", &["x"], "UV_TOOL_DIR"),
        ("uvx", &["x"], "UV_PYTHON_INSTALL_DIR"),
        ("pipx", &["run", "x"], "PIPX_HOME"),
        ("bunx", &["x"], "BUN_INSTALL_CACHE_DIR"),
    ] {
        let plan = launcher_plan(
            command,
            &args(words),
            &BTreeMap::new(),
            &no_parent,
            Some(home.path()),
            root,
        )
        .unwrap();
        assert!(
            plan.cache_env.iter().any(|(k, _)| k == must_have),
            "{command}: {:?}",
            plan.cache_env
        );
        assert!(
            plan.cache_env.iter().any(|(k, _)| k == "XDG_CACHE_HOME"),
            "{command}"
        );
        for (name, path) in &plan.cache_env {
            assert!(
                path.starts_with(root),
                "{command}: {name}={}",
                path.display()
            );
        }
    }
}

#[test]
fn hostile_configs_never_panic_and_are_capped() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/uv");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(home.path().join(".config/pip")).unwrap();
    let garbage: Vec<u8> = (0..70_000u32).map(|i| (i * 7919 % 256) as u8).collect();
    for text in [
        garbage.clone(),
        b"registry=\nregistry===\n@:registry=http://x\n[[[[\n\"\"\"".to_vec(),
        b"[[index]]\nurl = \"\nurl = '\ndefault = true\n[[index]\nindex-url = [\"a\", 'b'\n"
            .to_vec(),
        "registry=https://\u{1F600}.example/\nindex-url = \"https://\u{1F600}\"\n".into(),
        // A valid line past the cap is never read.
        [
            vec![b'#'; 70_000],
            b"\nregistry=http://127.0.0.1:1/\n".to_vec(),
        ]
        .concat(),
    ] {
        std::fs::write(home.path().join(".npmrc"), &text).unwrap();
        std::fs::write(config.join("uv.toml"), &text).unwrap();
        std::fs::write(home.path().join(".config/pip/pip.conf"), &text).unwrap();
        for (command, words) in [
            ("npx", &["-y", "@s/x"][..]),
            ("uvx", &["x"]),
            ("pipx", &["run", "x"]),
            ("bunx", &["x"]),
        ] {
            let plan = plan_in(home.path(), command, words).unwrap();
            assert!(!plan.registries.is_empty());
            assert!(
                !hosts(&plan).contains(&"127.0.0.1:1"),
                "read past the cap: {:?}",
                plan.registries
            );
        }
    }
    // A directory, a FIFO-like non-file or a missing file where a config should be.
    std::fs::remove_file(home.path().join(".npmrc")).unwrap();
    std::fs::create_dir(home.path().join(".npmrc")).unwrap();
    assert!(plan_in(home.path(), "npx", &["-y", "x"]).is_some());
    // Hostile arguments.
    for words in [
        &["-y", "@"][..],
        &["@/"],
        &["--registry"],
        &["--registry=", "x"],
        &["--package"],
        &["-p=", "x"],
        &["--", ""],
        &["\u{0}\u{FFFF}"],
    ] {
        let _ = plan_in(home.path(), "npx", words);
        let _ = plan_in(home.path(), "uvx", words);
        let _ = plan_in(home.path(), "bunx", words);
        let mut pipx = vec!["run"];
        pipx.extend_from_slice(words);
        let _ = plan_in(home.path(), "pipx", &pipx);
    }
    for spec in ["@", "@@", "@s/", "x@", "==", "[", "a[b]==", "\u{1F600}@1"] {
        let _ = npm_name_version(spec);
        let _ = python_name_version(spec);
    }
}

/// A fake plan for `resolved_version`.
fn plan_for(command: &str, words: &[&str], root: &Path) -> LauncherPlan {
    let home = tempfile::tempdir().unwrap();
    launcher_plan(
        command,
        &args(words),
        &BTreeMap::new(),
        &no_parent,
        Some(home.path()),
        root,
    )
    .unwrap()
}

#[test]
fn npx_resolved_version_is_read_from_its_cache() {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_for("npx", &["-y", "@s/srv@2.0.0"], root.path());
    assert_eq!(resolved_version(&plan, root.path()), None);
    for (hash, version) in [("aaaa", "1.0.0"), ("bbbb", "2.0.0")] {
        let dir = root
            .path()
            .join("npm/_npx")
            .join(hash)
            .join("node_modules/@s/srv");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("package.json"),
            format!(
                r#"{{"name": "@s/srv", "engines": {{"version": "9"}}, "deps": ["version"], "version": "{version}"}}"#
            ),
        )
        .unwrap();
    }
    // The packages' files without the directory's own package.json: an install cut short,
    // which npx cannot run offline.
    assert_eq!(resolved_version(&plan, root.path()), None);
    for hash in ["aaaa", "bbbb"] {
        let dir = root.path().join("npm/_npx").join(hash);
        std::fs::write(dir.join("package.json"), r#"{"dependencies": {}}"#).unwrap();
    }
    assert_eq!(
        resolved_version(&plan, root.path()).as_deref(),
        Some("2.0.0")
    );
    // Unpinned: whichever was installed last.
    let unpinned = plan_for("npx", &["-y", "@s/srv"], root.path());
    let newest = root
        .path()
        .join("npm/_npx/aaaa/node_modules/@s/srv/package.json");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&newest)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(
        resolved_version(&unpinned, root.path()).as_deref(),
        Some("1.0.0")
    );
}

#[test]
fn uv_and_pipx_resolved_versions_are_read_from_dist_info() {
    let root = tempfile::tempdir().unwrap();
    let uv = plan_for(
        "uvx",
        &["--from", "Mcp.Server_Time==1.2", "mcp-server-time"],
        root.path(),
    );
    assert_eq!(resolved_version(&uv, root.path()), None);
    let site = root
        .path()
        .join("uv/cache/archive-v0/h1/lib/python3.11/site-packages");
    std::fs::create_dir_all(site.join("mcp_server_time-1.2.dist-info")).unwrap();
    std::fs::create_dir_all(site.join("other_pkg-9.9.dist-info")).unwrap();
    assert_eq!(resolved_version(&uv, root.path()).as_deref(), Some("1.2"));

    let pipx = plan_for("pipx", &["run", "mcp-x"], root.path());
    assert_eq!(resolved_version(&pipx, root.path()), None);
    let site = root
        .path()
        .join("pipx/.cache/abc/lib/python3.12/site-packages");
    std::fs::create_dir_all(site.join("mcp_x-0.3.1.dist-info")).unwrap();
    assert_eq!(
        resolved_version(&pipx, root.path()).as_deref(),
        Some("0.3.1")
    );
}

#[test]
fn bunx_resolved_version_is_read_from_its_cache_dir_names() {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_for("bunx", &["@s/srv@3.1.0"], root.path());
    assert_eq!(resolved_version(&plan, root.path()), None);
    let cache = root.path().join("bun/install/cache/@s");
    std::fs::create_dir_all(cache.join("srv@3.1.0@@@1")).unwrap();
    std::fs::create_dir_all(cache.join("srv-other@4.0.0@@@1")).unwrap();
    assert_eq!(
        resolved_version(&plan, root.path()).as_deref(),
        Some("3.1.0")
    );
}

#[test]
fn the_json_scanner_reads_only_top_level_strings() {
    assert_eq!(
        json_top_level_string(r#"{"a": {"version": "x"}, "version": "1.\"2"}"#, "version")
            .as_deref(),
        Some("1.\"2")
    );
    assert_eq!(
        json_top_level_string(r#"{"a": "version", "b": 1}"#, "version"),
        None
    );
    assert_eq!(json_top_level_string(r#"{"version": 1}"#, "version"), None);
    for broken in ["", "{", "}", "{\"version\": \"1", "]]]", "{\"a\":\"\\"] {
        assert_eq!(json_top_level_string(broken, "version"), None, "{broken}");
    }
}
