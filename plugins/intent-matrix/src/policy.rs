//! The intent matrix as plain Rust on plain types, free of the component bindings so it can be
//! unit-tested natively. `lib.rs` converts the WIT types to these and back.

use serde_json::Value;

/// The maximum length of `intent.reason`, in characters.
pub(crate) const MAX_REASON_CHARS: usize = 1000;

/// The data sensitivities a caller may declare.
pub(crate) const SENSITIVITIES: [&str; 4] = ["public", "internal", "private", "unknown"];

/// What a call says it does: the variant used, or `intent.operation_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
    Destructive,
}

impl Op {
    /// The proxy tool that carries this operation type, e.g. `call_tool_read`.
    pub(crate) fn tool_name(self) -> &'static str {
        match self {
            Op::Read => "call_tool_read",
            Op::Write => "call_tool_write",
            Op::Destructive => "call_tool_destructive",
        }
    }

    /// The word a caller puts in `intent.operation_type`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Destructive => "destructive",
        }
    }
}

/// The annotation hints the matrix looks at; `None` means the hint was not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// What the caller declared, as sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Intent {
    pub operation_type: Option<Op>,
    pub data_sensitivity: Option<String>,
    pub reason: Option<String>,
}

/// One call, as far as the matrix cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    /// The variant the caller used.
    pub variant: Op,
    pub server: String,
    pub tool: String,
    /// `None` when the caller sent no intent at all.
    pub intent: Option<Intent>,
    /// The annotations in force.
    pub effective: Option<Hints>,
    /// `server`, `meta`, an annotator plugin's name, or `none`.
    pub annotation_source: String,
    pub annotation_reason: Option<String>,
}

/// The validator's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Allow,
    Warn(String),
    Reject(String),
}

/// The switches of `intent_declaration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub strict_server_validation: bool,
    pub require_operation_type: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            strict_server_validation: true,
            require_operation_type: false,
        }
    }
}

impl Settings {
    /// Reads the settings from the plugin's config JSON. Unknown keys are ignored; a value of
    /// the wrong type is an error (the caller fails closed).
    pub(crate) fn parse(json: &str) -> Result<Settings, String> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("not valid JSON ({e})"))?;
        let Value::Object(map) = value else {
            return Err(format!("expected a JSON object, got {}", kind(&value)));
        };
        let mut settings = Settings::default();
        for (key, slot) in [
            (
                "strict_server_validation",
                &mut settings.strict_server_validation,
            ),
            (
                "require_operation_type",
                &mut settings.require_operation_type,
            ),
        ] {
            match map.get(key) {
                None => {}
                Some(Value::Bool(b)) => *slot = *b,
                Some(other) => {
                    return Err(format!(
                        "'{key}' must be true or false, got {}",
                        kind(other)
                    ));
                }
            }
        }
        Ok(settings)
    }
}

/// A JSON value's type, in words, for error messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses the config and applies the matrix; invalid settings reject the call.
pub(crate) fn decide(config_json: &str, call: &Call) -> Outcome {
    match Settings::parse(config_json) {
        Ok(settings) => validate(&settings, call),
        Err(e) => Outcome::Reject(format!("intent-matrix: invalid settings: {e}")),
    }
}

/// Applies the matrix to one call. The first failing check rejects.
pub(crate) fn validate(settings: &Settings, call: &Call) -> Outcome {
    let variant = call.variant;
    let none = Intent::default();
    let intent = match &call.intent {
        Some(intent) => intent,
        None if settings.require_operation_type => {
            return Outcome::Reject(format!(
                "intent parameter is required for {}",
                variant.tool_name()
            ));
        }
        None => &none,
    };

    match intent.operation_type {
        None if settings.require_operation_type => {
            return Outcome::Reject("intent.operation_type is required".to_string());
        }
        Some(op) if op != variant => {
            return Outcome::Reject(format!(
                "Intent mismatch: tool is {} but intent declares {}",
                variant.tool_name(),
                op.word()
            ));
        }
        _ => {}
    }

    if let Some(s) = &intent.data_sensitivity
        && !SENSITIVITIES.contains(&s.as_str())
    {
        return Outcome::Reject(format!(
            "Invalid intent.data_sensitivity '{s}': must be public, internal, private, or unknown"
        ));
    }

    if let Some(reason) = &intent.reason
        && reason.chars().count() > MAX_REASON_CHARS
    {
        return Outcome::Reject(format!(
            "intent.reason exceeds maximum length of {MAX_REASON_CHARS} characters"
        ));
    }

    check_annotations(settings, call)
}

/// Step 6: the variant against the annotations in force.
fn check_annotations(settings: &Settings, call: &Call) -> Outcome {
    let hints = call.effective.unwrap_or_default();
    let destructive = hints.destructive == Some(true);
    let read_only = hints.read_only == Some(true) && !destructive;
    // Said outright: a read must not reach a tool that changes things.
    let not_read_only = hints.read_only == Some(false) && !destructive;
    let full = format!("{}:{}", call.server, call.tool);

    let mismatch = match call.variant {
        Op::Destructive => return Outcome::Allow,
        Op::Read | Op::Write if destructive => format!(
            "Tool '{full}' {}, use call_tool_destructive",
            marked(call, "destructive")
        ),
        Op::Read if not_read_only => format!(
            "Tool '{full}' {}, use call_tool_write",
            marked(call, "as not read-only")
        ),
        Op::Write if read_only => {
            return Outcome::Warn(format!(
                "Tool '{full}' {}; call_tool_read is enough",
                marked(call, "read-only")
            ));
        }
        Op::Read | Op::Write => return Outcome::Allow,
    };

    if settings.strict_server_validation {
        Outcome::Reject(mismatch)
    } else {
        Outcome::Warn(format!(
            "{mismatch} (allowed: strict_server_validation is off)"
        ))
    }
}

/// Who says the tool is `what`: `is marked destructive by server`, `is marked destructive by
/// its _meta.safety_class`, or `is inferred destructive by PLUGIN (REASON)`.
fn marked(call: &Call, what: &str) -> String {
    match call.annotation_source.as_str() {
        "server" => format!("is marked {what} by server"),
        "meta" => format!("is marked {what} by its _meta.safety_class"),
        plugin => match call.annotation_reason.as_deref() {
            Some(reason) if !reason.is_empty() => {
                format!("is inferred {what} by {plugin} ({reason})")
            }
            _ => format!("is inferred {what} by {plugin}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESTRUCTIVE: Hints = Hints {
        read_only: None,
        destructive: Some(true),
    };
    const READ_ONLY: Hints = Hints {
        read_only: Some(true),
        destructive: None,
    };
    const BOTH: Hints = Hints {
        read_only: Some(true),
        destructive: Some(true),
    };

    fn call(variant: Op, effective: Option<Hints>, source: &str) -> Call {
        Call {
            variant,
            server: "github".into(),
            tool: "delete_repo".into(),
            intent: Some(Intent {
                operation_type: Some(variant),
                ..Intent::default()
            }),
            effective,
            annotation_source: source.into(),
            annotation_reason: None,
        }
    }

    fn strict() -> Settings {
        Settings::default()
    }

    fn lax() -> Settings {
        Settings {
            strict_server_validation: false,
            ..Settings::default()
        }
    }

    fn required() -> Settings {
        Settings {
            require_operation_type: true,
            ..Settings::default()
        }
    }

    fn reject(msg: &str) -> Outcome {
        Outcome::Reject(msg.to_string())
    }

    fn warn(msg: &str) -> Outcome {
        Outcome::Warn(msg.to_string())
    }

    #[test]
    fn settings_defaults_and_overrides() {
        assert_eq!(Settings::parse("{}"), Ok(Settings::default()));
        assert_eq!(
            Settings::parse(r#"{"strict_server_validation": false, "other": 3}"#),
            Ok(lax())
        );
        assert_eq!(
            Settings::parse(r#"{"require_operation_type": true}"#),
            Ok(required())
        );
    }

    #[test]
    fn bad_settings_reject() {
        let c = call(Op::Read, None, "none");
        for (json, want) in [
            (
                "[]",
                "intent-matrix: invalid settings: expected a JSON object, got an array",
            ),
            (
                r#"{"strict_server_validation": "no"}"#,
                "intent-matrix: invalid settings: 'strict_server_validation' must be true or false, got a string",
            ),
            (
                r#"{"require_operation_type": null}"#,
                "intent-matrix: invalid settings: 'require_operation_type' must be true or false, got null",
            ),
        ] {
            assert_eq!(decide(json, &c), reject(want), "{json}");
        }
        match decide("{not json", &c) {
            Outcome::Reject(m) => {
                assert!(m.starts_with("intent-matrix: invalid settings: not valid JSON"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(decide("{}", &c), Outcome::Allow);
    }

    #[test]
    fn missing_intent() {
        let mut c = call(Op::Read, Some(DESTRUCTIVE), "server");
        c.intent = None;
        assert_eq!(
            validate(&required(), &c),
            reject("intent parameter is required for call_tool_read")
        );
        c.variant = Op::Destructive;
        assert_eq!(
            validate(&required(), &c),
            reject("intent parameter is required for call_tool_destructive")
        );
        // Without the switch, a missing intent is no declaration at all.
        c.variant = Op::Write;
        c.effective = None;
        assert_eq!(validate(&strict(), &c), Outcome::Allow);
    }

    #[test]
    fn missing_operation_type() {
        let mut c = call(Op::Write, None, "none");
        c.intent = Some(Intent::default());
        assert_eq!(
            validate(&required(), &c),
            reject("intent.operation_type is required")
        );
        assert_eq!(validate(&strict(), &c), Outcome::Allow);
    }

    #[test]
    fn intent_mismatch() {
        let mut c = call(Op::Read, Some(READ_ONLY), "server");
        c.intent = Some(Intent {
            operation_type: Some(Op::Write),
            ..Intent::default()
        });
        assert_eq!(
            validate(&strict(), &c),
            reject("Intent mismatch: tool is call_tool_read but intent declares write")
        );
        c.variant = Op::Destructive;
        c.intent = Some(Intent {
            operation_type: Some(Op::Read),
            ..Intent::default()
        });
        assert_eq!(
            validate(&lax(), &c),
            reject("Intent mismatch: tool is call_tool_destructive but intent declares read")
        );
    }

    #[test]
    fn data_sensitivity() {
        let mut c = call(Op::Read, None, "none");
        for ok in SENSITIVITIES {
            c.intent.as_mut().unwrap().data_sensitivity = Some(ok.into());
            assert_eq!(validate(&strict(), &c), Outcome::Allow, "{ok}");
        }
        for bad in ["secret", "Public", "", " private"] {
            c.intent.as_mut().unwrap().data_sensitivity = Some(bad.into());
            assert_eq!(
                validate(&strict(), &c),
                reject(&format!(
                    "Invalid intent.data_sensitivity '{bad}': must be public, internal, private, or unknown"
                ))
            );
        }
    }

    #[test]
    fn reason_length_counts_chars() {
        let mut c = call(Op::Read, None, "none");
        // 1000 two-byte characters: 2000 bytes, still allowed.
        c.intent.as_mut().unwrap().reason = Some("é".repeat(1000));
        assert_eq!(validate(&strict(), &c), Outcome::Allow);
        c.intent.as_mut().unwrap().reason = Some("x".repeat(1001));
        assert_eq!(
            validate(&strict(), &c),
            reject("intent.reason exceeds maximum length of 1000 characters")
        );
    }

    #[test]
    fn checks_run_in_order() {
        // Mismatch is reported before bad sensitivity, bad sensitivity before a long reason,
        // and a long reason before the annotation check.
        let mut c = call(Op::Read, Some(DESTRUCTIVE), "server");
        c.intent = Some(Intent {
            operation_type: Some(Op::Write),
            data_sensitivity: Some("secret".into()),
            reason: Some("x".repeat(2000)),
        });
        assert!(
            matches!(validate(&strict(), &c), Outcome::Reject(m) if m.starts_with("Intent mismatch"))
        );
        c.intent.as_mut().unwrap().operation_type = None;
        assert!(
            matches!(validate(&strict(), &c), Outcome::Reject(m) if m.starts_with("Invalid intent.data_sensitivity"))
        );
        c.intent.as_mut().unwrap().data_sensitivity = None;
        assert!(
            matches!(validate(&strict(), &c), Outcome::Reject(m) if m.starts_with("intent.reason"))
        );
        c.intent.as_mut().unwrap().reason = None;
        assert!(
            matches!(validate(&strict(), &c), Outcome::Reject(m) if m.starts_with("Tool 'github:delete_repo'"))
        );
    }

    #[test]
    fn the_matrix() {
        let server_destructive =
            "Tool 'github:delete_repo' is marked destructive by server, use call_tool_destructive";
        let server_read_only =
            "Tool 'github:delete_repo' is marked read-only by server; call_tool_read is enough";
        let cases: [(Op, Option<Hints>, Outcome); 12] = [
            (Op::Read, Some(READ_ONLY), Outcome::Allow),
            (Op::Read, Some(DESTRUCTIVE), reject(server_destructive)),
            (Op::Read, Some(BOTH), reject(server_destructive)),
            (Op::Read, None, Outcome::Allow),
            (Op::Write, Some(READ_ONLY), warn(server_read_only)),
            (Op::Write, Some(DESTRUCTIVE), reject(server_destructive)),
            (Op::Write, Some(BOTH), reject(server_destructive)),
            (Op::Write, None, Outcome::Allow),
            (Op::Write, Some(Hints::default()), Outcome::Allow),
            (Op::Destructive, Some(READ_ONLY), Outcome::Allow),
            (Op::Destructive, Some(DESTRUCTIVE), Outcome::Allow),
            (Op::Destructive, None, Outcome::Allow),
        ];
        for (variant, hints, want) in cases {
            let c = call(variant, hints, "server");
            assert_eq!(validate(&strict(), &c), want, "{variant:?} {hints:?}");
            // The same with no intent at all.
            let mut bare = c.clone();
            bare.intent = None;
            assert_eq!(
                validate(&strict(), &bare),
                want,
                "{variant:?} {hints:?} bare"
            );
        }
    }

    #[test]
    fn a_tool_marked_not_read_only_is_refused_on_read_only() {
        let write = Hints {
            read_only: Some(false),
            destructive: Some(false),
        };
        let not_read_only = Hints {
            read_only: Some(false),
            destructive: None,
        };
        let message =
            "Tool 'github:delete_repo' is marked as not read-only by server, use call_tool_write";
        for hints in [write, not_read_only] {
            assert_eq!(
                validate(&strict(), &call(Op::Read, Some(hints), "server")),
                reject(message)
            );
            assert_eq!(
                validate(&lax(), &call(Op::Read, Some(hints), "server")),
                warn(&format!(
                    "{message} (allowed: strict_server_validation is off)"
                ))
            );
            for variant in [Op::Write, Op::Destructive] {
                assert_eq!(
                    validate(&strict(), &call(variant, Some(hints), "server")),
                    Outcome::Allow
                );
            }
        }
        let mut inferred = call(Op::Read, Some(write), "prefix-annotator");
        inferred.annotation_reason = Some("name prefix 'create_'".into());
        assert_eq!(
            validate(&strict(), &inferred),
            reject(
                "Tool 'github:delete_repo' is inferred as not read-only by prefix-annotator (name prefix 'create_'), use call_tool_write"
            )
        );
    }

    #[test]
    fn mismatch_names_the_source() {
        let mut c = call(Op::Read, Some(DESTRUCTIVE), "meta");
        assert_eq!(
            validate(&strict(), &c),
            reject(
                "Tool 'github:delete_repo' is marked destructive by its _meta.safety_class, use call_tool_destructive"
            )
        );
        c.annotation_source = "prefix-annotator".into();
        assert_eq!(
            validate(&strict(), &c),
            reject(
                "Tool 'github:delete_repo' is inferred destructive by prefix-annotator, use call_tool_destructive"
            )
        );
        c.annotation_reason = Some("name prefix 'delete_'".into());
        assert_eq!(
            validate(&strict(), &c),
            reject(
                "Tool 'github:delete_repo' is inferred destructive by prefix-annotator (name prefix 'delete_'), use call_tool_destructive"
            )
        );
        c.variant = Op::Write;
        c.intent = None;
        c.effective = Some(READ_ONLY);
        assert_eq!(
            validate(&strict(), &c),
            warn(
                "Tool 'github:delete_repo' is inferred read-only by prefix-annotator (name prefix 'delete_'); call_tool_read is enough"
            )
        );
        c.annotation_source = "meta".into();
        assert_eq!(
            validate(&strict(), &c),
            warn(
                "Tool 'github:delete_repo' is marked read-only by its _meta.safety_class; call_tool_read is enough"
            )
        );
    }

    #[test]
    fn lax_mode_warns_instead() {
        let c = call(Op::Write, Some(DESTRUCTIVE), "server");
        assert_eq!(
            validate(&lax(), &c),
            warn(
                "Tool 'github:delete_repo' is marked destructive by server, use call_tool_destructive (allowed: strict_server_validation is off)"
            )
        );
        // Lax mode does not relax the intent checks.
        let mut c = call(Op::Read, None, "none");
        c.intent.as_mut().unwrap().operation_type = Some(Op::Destructive);
        assert!(matches!(validate(&lax(), &c), Outcome::Reject(_)));
    }
}
