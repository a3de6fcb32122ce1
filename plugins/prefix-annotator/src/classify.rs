//! Safety classes and annotations for a tool, as plain Rust on plain types, free of the
//! component bindings so it can be unit-tested natively. `lib.rs` converts the WIT types to
//! these and back.
//!
//! Precedence: the server's own annotations, then `_meta.safety_class`, then the name prefix
//! table (the `PREFIXES` below; `docs/plugins.md` shows it).

use serde_json::Value;

/// A tool's safety class (the WIT `safety-class`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    ReadOnly,
    WriteCapable,
    Subprocess,
    Dangerous,
    Unknown,
}

impl Class {
    /// Reads a `_meta.safety_class` value; `_` may stand for `-` (e.g. `read_only`).
    pub(crate) fn parse(value: &str) -> Option<Class> {
        match value.replace('_', "-").as_str() {
            "read-only" => Some(Class::ReadOnly),
            "write-capable" => Some(Class::WriteCapable),
            "subprocess" => Some(Class::Subprocess),
            "dangerous" => Some(Class::Dangerous),
            "unknown" => Some(Class::Unknown),
            _ => None,
        }
    }

    /// The annotations a class implies; unset hints stay `None`.
    pub(crate) fn implied(self) -> Hints {
        match self {
            Class::ReadOnly => Hints {
                read_only: Some(true),
                ..Hints::default()
            },
            Class::WriteCapable => Hints {
                read_only: Some(false),
                destructive: Some(false),
                ..Hints::default()
            },
            Class::Dangerous => Hints {
                destructive: Some(true),
                ..Hints::default()
            },
            Class::Subprocess => Hints {
                read_only: Some(false),
                open_world: Some(true),
                ..Hints::default()
            },
            Class::Unknown => Hints::default(),
        }
    }
}

/// MCP tool annotation hints; `None` means the hint was not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

impl Hints {
    fn any_given(&self) -> bool {
        self.read_only.is_some()
            || self.destructive.is_some()
            || self.idempotent.is_some()
            || self.open_world.is_some()
    }
}

/// What an inference rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Basis {
    Server,
    Meta,
    Inferred,
}

/// The annotator's answer for one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inference {
    pub hints: Hints,
    pub class: Class,
    pub basis: Basis,
    pub why: String,
}

/// The parts of a tool the annotator reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolInfo<'a> {
    pub server: &'a str,
    pub name: &'a str,
    pub annotations: Option<Hints>,
    /// The tool's `_meta` as JSON text.
    pub meta: Option<&'a str>,
}

/// An inference, plus a warning to log when the tool's `_meta` was unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub inference: Inference,
    pub warning: Option<String>,
}

/// Name prefixes (matched on the ASCII-lowercased name) and the class each implies.
pub(crate) const PREFIXES: [(&str, Class); 21] = [
    ("read_", Class::ReadOnly),
    ("list_", Class::ReadOnly),
    ("get_", Class::ReadOnly),
    ("search_", Class::ReadOnly),
    ("find_", Class::ReadOnly),
    ("scan_", Class::ReadOnly),
    ("git_", Class::ReadOnly),
    ("update_", Class::WriteCapable),
    ("write_", Class::WriteCapable),
    ("set_", Class::WriteCapable),
    ("create_", Class::WriteCapable),
    ("edit_", Class::WriteCapable),
    ("new_", Class::WriteCapable),
    ("delete_", Class::Dangerous),
    ("remove_", Class::Dangerous),
    ("run_", Class::Subprocess),
    ("validate_", Class::Subprocess),
    ("execute_", Class::Subprocess),
    ("invoke_", Class::Subprocess),
    ("open_", Class::Subprocess),
    ("launch_", Class::Subprocess),
];

/// Infers annotations and a safety class for a tool. Always has an answer.
pub(crate) fn infer(tool: &ToolInfo<'_>) -> Outcome {
    if let Some(hints) = tool.annotations.filter(Hints::any_given) {
        let class = if hints.destructive == Some(true) {
            Class::Dangerous
        } else if hints.read_only == Some(true) {
            Class::ReadOnly
        } else {
            Class::WriteCapable
        };
        return Outcome {
            inference: Inference {
                hints,
                class,
                basis: Basis::Server,
                why: "server annotations".to_string(),
            },
            warning: None,
        };
    }

    let warning = match tool.meta.map(meta_class) {
        Some(Ok(Some((class, given)))) => {
            return Outcome {
                inference: Inference {
                    hints: class.implied(),
                    class,
                    basis: Basis::Meta,
                    why: format!("_meta.safety_class '{given}'"),
                },
                warning: None,
            };
        }
        Some(Err(problem)) => Some(format!(
            "tool '{}:{}': ignoring its _meta: {problem}; inferring from its name",
            tool.server, tool.name
        )),
        Some(Ok(None)) | None => None,
    };

    Outcome {
        inference: by_name(tool.name),
        warning,
    }
}

/// Reads `safety_class` from `_meta` JSON: `Ok(None)` when there is none, `Err` when `_meta`
/// or the value is unusable.
fn meta_class(meta: &str) -> Result<Option<(Class, String)>, String> {
    let value: Value =
        serde_json::from_str(meta).map_err(|e| format!("it is not valid JSON ({e})"))?;
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return Ok(None),
        _ => return Err("it is not a JSON object".to_string()),
    };
    match map.get("safety_class") {
        None => Ok(None),
        Some(Value::String(given)) => match Class::parse(given) {
            Some(class) => Ok(Some((class, given.clone()))),
            None => Err(format!(
                "safety_class '{given}' is not one of read-only, write-capable, subprocess, dangerous, unknown"
            )),
        },
        Some(_) => Err("safety_class is not a string".to_string()),
    }
}

/// The name prefix table.
fn by_name(name: &str) -> Inference {
    let lower = name.to_ascii_lowercase();
    let hit = PREFIXES
        .iter()
        .find(|(prefix, _)| lower.starts_with(prefix));
    match hit {
        Some(&(prefix, class)) => Inference {
            hints: class.implied(),
            class,
            basis: Basis::Inferred,
            why: format!("name prefix '{prefix}'"),
        },
        None => Inference {
            hints: Hints::default(),
            class: Class::Unknown,
            basis: Basis::Inferred,
            why: "no known name prefix".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: &'a str, annotations: Option<Hints>, meta: Option<&'a str>) -> ToolInfo<'a> {
        ToolInfo {
            server: "fs",
            name,
            annotations,
            meta,
        }
    }

    fn named(name: &str) -> Inference {
        let out = infer(&tool(name, None, None));
        assert_eq!(out.warning, None);
        out.inference
    }

    #[test]
    fn prefix_table() {
        let cases = [
            ("read_file", Class::ReadOnly, "read_"),
            ("list_dir", Class::ReadOnly, "list_"),
            ("get_issue", Class::ReadOnly, "get_"),
            ("search_code", Class::ReadOnly, "search_"),
            ("find_user", Class::ReadOnly, "find_"),
            ("scan_ports", Class::ReadOnly, "scan_"),
            ("git_status", Class::ReadOnly, "git_"),
            ("update_issue", Class::WriteCapable, "update_"),
            ("write_file", Class::WriteCapable, "write_"),
            ("set_label", Class::WriteCapable, "set_"),
            ("create_pr", Class::WriteCapable, "create_"),
            ("edit_file", Class::WriteCapable, "edit_"),
            ("new_branch", Class::WriteCapable, "new_"),
            ("delete_repo", Class::Dangerous, "delete_"),
            ("remove_file", Class::Dangerous, "remove_"),
            ("run_tests", Class::Subprocess, "run_"),
            ("validate_schema", Class::Subprocess, "validate_"),
            ("execute_sql", Class::Subprocess, "execute_"),
            ("invoke_lambda", Class::Subprocess, "invoke_"),
            ("open_browser", Class::Subprocess, "open_"),
            ("launch_app", Class::Subprocess, "launch_"),
            ("DELETE_Repo", Class::Dangerous, "delete_"),
        ];
        for (name, class, prefix) in cases {
            let got = named(name);
            assert_eq!(got.class, class, "{name}");
            assert_eq!(got.basis, Basis::Inferred, "{name}");
            assert_eq!(got.why, format!("name prefix '{prefix}'"), "{name}");
            assert_eq!(got.hints, class.implied(), "{name}");
        }
    }

    #[test]
    fn unknown_names() {
        for name in [
            "",
            "delete",
            "readme",
            "fetch_url",
            "deleted",
            "_read_x",
            "éread_",
        ] {
            let got = named(name);
            assert_eq!(got.class, Class::Unknown, "{name}");
            assert_eq!(got.hints, Hints::default(), "{name}");
            assert_eq!(got.why, "no known name prefix", "{name}");
            assert_eq!(got.basis, Basis::Inferred, "{name}");
        }
    }

    #[test]
    fn implied_annotations() {
        let h = |r, d, i, o| Hints {
            read_only: r,
            destructive: d,
            idempotent: i,
            open_world: o,
        };
        assert_eq!(Class::ReadOnly.implied(), h(Some(true), None, None, None));
        assert_eq!(
            Class::WriteCapable.implied(),
            h(Some(false), Some(false), None, None)
        );
        assert_eq!(Class::Dangerous.implied(), h(None, Some(true), None, None));
        assert_eq!(
            Class::Subprocess.implied(),
            h(Some(false), None, None, Some(true))
        );
        assert_eq!(Class::Unknown.implied(), h(None, None, None, None));
    }

    #[test]
    fn server_annotations_win() {
        let cases = [
            (Some(true), None, Class::ReadOnly),
            (None, Some(true), Class::Dangerous),
            (Some(true), Some(true), Class::Dangerous),
            (Some(false), Some(false), Class::WriteCapable),
            (Some(false), None, Class::WriteCapable),
        ];
        for (read_only, destructive, class) in cases {
            let hints = Hints {
                read_only,
                destructive,
                ..Hints::default()
            };
            let out = infer(&tool(
                "read_file",
                Some(hints),
                Some(r#"{"safety_class":"dangerous"}"#),
            ));
            assert_eq!(
                out,
                Outcome {
                    inference: Inference {
                        hints,
                        class,
                        basis: Basis::Server,
                        why: "server annotations".into(),
                    },
                    warning: None,
                }
            );
        }
        // Only an open-world hint still counts as the server speaking.
        let hints = Hints {
            open_world: Some(true),
            ..Hints::default()
        };
        let out = infer(&tool("delete_x", Some(hints), None)).inference;
        assert_eq!((out.basis, out.class), (Basis::Server, Class::WriteCapable));
        assert_eq!(out.hints, hints);
    }

    #[test]
    fn empty_server_annotations_fall_through() {
        let out = infer(&tool("delete_x", Some(Hints::default()), None)).inference;
        assert_eq!((out.basis, out.class), (Basis::Inferred, Class::Dangerous));
    }

    #[test]
    fn meta_beats_the_name() {
        for (given, class) in [
            ("read-only", Class::ReadOnly),
            ("read_only", Class::ReadOnly),
            ("write-capable", Class::WriteCapable),
            ("write_capable", Class::WriteCapable),
            ("subprocess", Class::Subprocess),
            ("dangerous", Class::Dangerous),
            ("unknown", Class::Unknown),
        ] {
            let meta = format!(r#"{{"safety_class": "{given}", "other": 1}}"#);
            let out = infer(&tool("delete_repo", None, Some(&meta)));
            assert_eq!(
                out,
                Outcome {
                    inference: Inference {
                        hints: class.implied(),
                        class,
                        basis: Basis::Meta,
                        why: format!("_meta.safety_class '{given}'"),
                    },
                    warning: None,
                },
                "{given}"
            );
        }
    }

    #[test]
    fn meta_without_a_class_is_silent() {
        for meta in ["{}", r#"{"ui": {"x": 1}}"#, "null"] {
            let out = infer(&tool("get_x", None, Some(meta)));
            assert_eq!(out.warning, None, "{meta}");
            assert_eq!(out.inference, named("get_x"), "{meta}");
        }
    }

    #[test]
    fn bad_meta_warns_and_falls_through() {
        for meta in [
            "{nope",
            "[]",
            r#""dangerous""#,
            r#"{"safety_class": "Dangerous"}"#,
            r#"{"safety_class": "destructive"}"#,
            r#"{"safety_class": 3}"#,
            r#"{"safety_class": null}"#,
        ] {
            let out = infer(&tool("delete_repo", None, Some(meta)));
            assert_eq!(out.inference, named("delete_repo"), "{meta}");
            let warning = out.warning.unwrap_or_default();
            assert!(
                warning.starts_with("tool 'fs:delete_repo'"),
                "{meta}: {warning}"
            );
        }
    }
}
