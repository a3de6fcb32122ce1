//! Conformance suites for `mcpproxy plugins check --suite NAME`.
//!
//! `matrix` runs every row of the documented intent matrix (docs/plugins.md), with
//! `strict_server_validation` and `require_operation_type` on and off, against a validator;
//! `prefix` runs the name-prefix table and the precedence rules (docs/plugins.md)
//! against an annotator. The tables here are expectations only: the logic under test is
//! the compiled component.

use std::fmt;

use serde::Serialize;
use serde_json::json;

use mcpproxy_policy::{
    AnnotationSource, Annotations, CallRequest, DATA_SENSITIVITIES, Decision, EffectiveAnnotations,
    InferenceBasis, Intent, OperationType, SafetyClass, Tool, Verdict,
};

use mcpproxy_plugin_host::{Plugin, PluginKind};

/// The suites `plugins check` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// The documented intent matrix (validators).
    Matrix,
    /// The name-prefix table and precedence rules (annotators).
    Prefix,
}

impl Suite {
    pub const ALL: [Suite; 2] = [Self::Matrix, Self::Prefix];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Matrix => "matrix",
            Self::Prefix => "prefix",
        }
    }

    /// The plugin kind the suite applies to.
    pub fn kind(self) -> PluginKind {
        match self {
            Self::Matrix => PluginKind::Validator,
            Self::Prefix => PluginKind::Annotator,
        }
    }
}

impl std::str::FromStr for Suite {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|suite| suite.name() == s)
            .ok_or_else(|| {
                format!("unknown suite '{s}': use matrix (validators) or prefix (annotators)")
            })
    }
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub passed: bool,
    pub expected: String,
    pub got: String,
}

/// Runs a suite against a plugin of the suite's kind.
pub fn run(suite: Suite, plugin: &Plugin) -> Vec<CaseResult> {
    match suite {
        Suite::Matrix => matrix_cases()
            .into_iter()
            .map(|case| case.run(plugin))
            .collect(),
        Suite::Prefix => prefix_cases()
            .into_iter()
            .map(|case| case.run(plugin))
            .collect(),
    }
}

/// What a validator's message must be.
#[derive(Debug, Clone)]
pub enum Text {
    /// Word for word (the documented texts).
    Exact(String),
    /// Contains each of these pieces (texts the docs describe but do not fix).
    Contains(Vec<String>),
}

impl Text {
    fn matches(&self, message: &str) -> bool {
        match self {
            Self::Exact(text) => message == text,
            Self::Contains(pieces) => pieces.iter().all(|p| message.contains(p.as_str())),
        }
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(text) => write!(f, "{text:?}"),
            Self::Contains(pieces) => write!(f, "text containing {pieces:?}"),
        }
    }
}

/// The verdict a matrix case expects.
#[derive(Debug, Clone)]
pub enum Expect {
    Allow,
    Warn(Text),
    Reject(Text),
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allow => f.write_str("allow"),
            Self::Warn(text) => write!(f, "warn with {text}"),
            Self::Reject(text) => write!(f, "reject with {text}"),
        }
    }
}

/// One row of the matrix suite.
#[derive(Debug, Clone)]
pub struct MatrixCase {
    pub name: String,
    pub settings: serde_json::Value,
    pub request: CallRequest,
    /// Who asks during the case (`host.caller()`); `None`: no one logged in.
    pub caller: Option<mcpproxy_policy::Caller>,
    pub expect: Expect,
}

impl MatrixCase {
    pub fn run(&self, plugin: &Plugin) -> CaseResult {
        let caller = self.caller.clone().map(std::sync::Arc::new);
        let got = mcpproxy_policy::with_caller(caller, || {
            plugin.validate_with_settings(&self.request, &self.settings.to_string())
        });
        let passed = match (&self.expect, &got) {
            (Expect::Allow, Ok(Verdict::Allow)) => true,
            (Expect::Warn(text), Ok(Verdict::Warn(m))) => text.matches(m),
            (Expect::Reject(text), Ok(Verdict::Reject(m))) => text.matches(m),
            _ => false,
        };
        CaseResult {
            name: self.name.clone(),
            passed,
            expected: self.expect.to_string(),
            got: match got {
                Ok(Verdict::Allow) => "allow".to_owned(),
                Ok(Verdict::Warn(m)) => format!("warn with {m:?}"),
                Ok(Verdict::Reject(m)) => format!("reject with {m:?}"),
                Err(fault) => format!("fault: {fault}"),
            },
        }
    }

    pub fn decision(&self) -> Decision {
        match self.expect {
            Expect::Allow => Decision::Allow,
            Expect::Warn(_) => Decision::Warn,
            Expect::Reject(_) => Decision::Reject,
        }
    }
}

/// Effective annotations a case runs with.
#[derive(Debug, Clone, Copy)]
enum Ann {
    ReadOnly,
    Destructive,
    Both,
    /// `readOnlyHint: false` said outright, not destructive: a write tool.
    NotReadOnly,
    None,
}

impl Ann {
    fn label(self) -> &'static str {
        match self {
            Self::ReadOnly => "readOnlyHint=true",
            Self::Destructive => "destructiveHint=true",
            Self::Both => "both hints true",
            Self::NotReadOnly => "readOnlyHint=false, destructiveHint=false",
            Self::None => "no annotation",
        }
    }

    fn annotations(self) -> Option<Annotations> {
        let (read_only_hint, destructive_hint) = match self {
            Self::ReadOnly => (Some(true), None),
            Self::Destructive => (None, Some(true)),
            Self::Both => (Some(true), Some(true)),
            Self::NotReadOnly => (Some(false), Some(false)),
            Self::None => return None,
        };
        Some(Annotations {
            read_only_hint,
            destructive_hint,
            ..Default::default()
        })
    }

    fn tool_name(self) -> &'static str {
        match self {
            Self::ReadOnly => "list_repos",
            Self::Destructive | Self::Both => "delete_repo",
            Self::NotReadOnly => "create_repo",
            Self::None => "sync_repo",
        }
    }
}

fn request(
    variant: OperationType,
    intent: Option<Intent>,
    ann: Ann,
    source: AnnotationSource,
) -> CallRequest {
    let annotations = ann.annotations();
    let safety_class = match ann {
        Ann::ReadOnly => SafetyClass::ReadOnly,
        Ann::Destructive | Ann::Both => SafetyClass::Dangerous,
        Ann::NotReadOnly => SafetyClass::WriteCapable,
        Ann::None => SafetyClass::Unknown,
    };
    let reason = match &source {
        AnnotationSource::Plugin(_) => Some("name prefix 'delete_'".to_owned()),
        _ => None,
    };
    CallRequest {
        variant,
        tool: Tool {
            server: "github".into(),
            name: ann.tool_name().into(),
            description: String::new(),
            input_schema: json!({"type": "object"}).into(),
            annotations: matches!(source, AnnotationSource::Server)
                .then_some(annotations)
                .flatten(),
            meta: None,
            ..Default::default()
        },
        intent,
        effective: EffectiveAnnotations {
            source: if annotations.is_some() {
                source
            } else {
                AnnotationSource::None
            },
            annotations,
            reason,
            safety_class,
        },
        args: json!({"repo": "test-repo"}),
    }
}

fn op_intent(op: OperationType) -> Option<Intent> {
    Some(Intent {
        operation_type: Some(op),
        ..Default::default()
    })
}

fn exact(text: impl Into<String>) -> Text {
    Text::Exact(text.into())
}

fn server_mismatch(tool: &str) -> String {
    format!("Tool 'github:{tool}' is marked destructive by server, use call_tool_destructive")
}

fn not_read_only(tool: &str) -> String {
    format!("Tool 'github:{tool}' is marked as not read-only by server, use call_tool_write")
}

/// Every case of the `matrix` suite.
pub fn matrix_cases() -> Vec<MatrixCase> {
    let mut rows = MatrixRows::default();
    documented_rows(&mut rows);
    intent_mismatch_rows(&mut rows);
    lenient_rows(&mut rows);
    required_intent_rows(&mut rows);
    intent_field_rows(&mut rows);
    inferred_rows(&mut rows);
    rows.cases
}

/// The matrix suite's cases as they are added, each group of rows by its own function.
#[derive(Default)]
struct MatrixRows {
    cases: Vec<MatrixCase>,
}

impl MatrixRows {
    fn add(
        &mut self,
        name: String,
        settings: &serde_json::Value,
        request: CallRequest,
        expect: Expect,
    ) {
        self.cases.push(MatrixCase {
            name,
            settings: settings.clone(),
            request,
            caller: None,
            expect,
        })
    }
}

/// The intent matrix's default settings.
fn strict() -> serde_json::Value {
    json!({})
}

/// `strict_server_validation` off.
fn lenient() -> serde_json::Value {
    json!({"strict_server_validation": false})
}

/// `require_operation_type` on.
fn require() -> serde_json::Value {
    json!({"require_operation_type": true})
}

/// The documented rows, with `intent.operation_type` matching and absent.
fn documented_rows(rows: &mut MatrixRows) {
    use OperationType::{Destructive, Read, Write};
    for (declared, label) in [(true, "declared"), (false, "absent")] {
        for ann in [
            Ann::ReadOnly,
            Ann::Destructive,
            Ann::Both,
            Ann::NotReadOnly,
            Ann::None,
        ] {
            for variant in [Read, Write, Destructive] {
                let intent = declared.then(|| op_intent(variant)).flatten();
                let expect = match (variant, ann) {
                    (Destructive, _) => Expect::Allow,
                    (_, Ann::Destructive | Ann::Both) => {
                        Expect::Reject(exact(server_mismatch(ann.tool_name())))
                    }
                    (Read, Ann::NotReadOnly) => {
                        Expect::Reject(exact(not_read_only(ann.tool_name())))
                    }
                    (Write, Ann::ReadOnly) => Expect::Warn(Text::Contains(vec![
                        "github:list_repos".into(),
                        "read-only".into(),
                    ])),
                    _ => Expect::Allow,
                };
                rows.add(
                    format!(
                        "{} / operation_type {label} / {}",
                        variant.tool_name(),
                        ann.label()
                    ),
                    &strict(),
                    request(variant, intent, ann, AnnotationSource::Server),
                    expect,
                );
            }
        }
    }
}

/// Any other declared type is an intent mismatch, whatever the annotations and settings.
fn intent_mismatch_rows(rows: &mut MatrixRows) {
    use OperationType::{Destructive, Read, Write};
    for variant in [Read, Write, Destructive] {
        for declared in [Read, Write, Destructive] {
            if declared == variant {
                continue;
            }
            for (settings, mode) in [(&strict(), "strict"), (&lenient(), "lenient")] {
                rows.add(
                    format!(
                        "{} / intent declares {declared} / {mode}",
                        variant.tool_name()
                    ),
                    settings,
                    request(
                        variant,
                        op_intent(declared),
                        Ann::ReadOnly,
                        AnnotationSource::Server,
                    ),
                    Expect::Reject(exact(format!(
                        "Intent mismatch: tool is {} but intent declares {declared}",
                        variant.tool_name()
                    ))),
                );
            }
        }
    }
}

/// `strict_server_validation` off: server mismatches warn and pass.
fn lenient_rows(rows: &mut MatrixRows) {
    use OperationType::{Read, Write};
    for variant in [Read, Write] {
        rows.add(
            format!(
                "{} / destructiveHint=true / strict_server_validation off",
                variant.tool_name()
            ),
            &lenient(),
            request(variant, None, Ann::Destructive, AnnotationSource::Server),
            Expect::Warn(Text::Contains(vec![server_mismatch("delete_repo")])),
        );
    }
    rows.add(
        "call_tool_read / readOnlyHint=false / strict_server_validation off".into(),
        &lenient(),
        request(Read, None, Ann::NotReadOnly, AnnotationSource::Server),
        Expect::Warn(Text::Contains(vec![not_read_only("create_repo")])),
    );
}

/// `require_operation_type` (the two-key mode).
fn required_intent_rows(rows: &mut MatrixRows) {
    use OperationType::{Destructive, Read, Write};
    for variant in [Read, Write, Destructive] {
        rows.add(
            format!(
                "{} / no intent / require_operation_type on",
                variant.tool_name()
            ),
            &require(),
            request(variant, None, Ann::None, AnnotationSource::Server),
            Expect::Reject(exact(format!(
                "intent parameter is required for {}",
                variant.tool_name()
            ))),
        );
    }
    rows.add(
        "call_tool_read / intent without operation_type / require_operation_type on".into(),
        &require(),
        request(
            Read,
            Some(Intent::default()),
            Ann::None,
            AnnotationSource::Server,
        ),
        Expect::Reject(exact("intent.operation_type is required")),
    );
    rows.add(
        "call_tool_read / intent read / require_operation_type on".into(),
        &require(),
        request(
            Read,
            op_intent(Read),
            Ann::ReadOnly,
            AnnotationSource::Server,
        ),
        Expect::Allow,
    );
    rows.add(
        "call_tool_write / intent without operation_type / require_operation_type off".into(),
        &strict(),
        request(
            Write,
            Some(Intent::default()),
            Ann::None,
            AnnotationSource::Server,
        ),
        Expect::Allow,
    );
}

/// `data_sensitivity` and `reason`.
fn intent_field_rows(rows: &mut MatrixRows) {
    use OperationType::{Destructive, Read, Write};
    for sensitivity in DATA_SENSITIVITIES {
        let intent = Intent {
            data_sensitivity: Some(sensitivity.into()),
            ..Default::default()
        };
        rows.add(
            format!("call_tool_read / data_sensitivity {sensitivity}"),
            &strict(),
            request(Read, Some(intent), Ann::ReadOnly, AnnotationSource::Server),
            Expect::Allow,
        );
    }
    let secret = Intent {
        data_sensitivity: Some("secret".into()),
        ..Default::default()
    };
    rows.add(
        "call_tool_destructive / data_sensitivity secret".into(),
        &strict(),
        request(Destructive, Some(secret), Ann::Destructive, AnnotationSource::Server),
        Expect::Reject(exact(
            "Invalid intent.data_sensitivity 'secret': must be public, internal, private, or unknown",
        )),
    );
    for (len, ch, expect_ok) in [(1000, 'a', true), (1000, 'é', true), (1001, 'a', false)] {
        let intent = Intent {
            reason: Some(std::iter::repeat_n(ch, len).collect()),
            ..Default::default()
        };
        rows.add(
            format!("call_tool_write / reason of {len} '{ch}' characters"),
            &strict(),
            request(Write, Some(intent), Ann::None, AnnotationSource::Server),
            if expect_ok {
                Expect::Allow
            } else {
                Expect::Reject(exact(
                    "intent.reason exceeds maximum length of 1000 characters",
                ))
            },
        );
    }
}

/// An inferred destructive mark says so, and why.
fn inferred_rows(rows: &mut MatrixRows) {
    use OperationType::{Read, Write};
    for variant in [Read, Write] {
        rows.add(
            format!(
                "{} / destructive inferred by an annotator",
                variant.tool_name()
            ),
            &strict(),
            request(
                variant,
                None,
                Ann::Destructive,
                AnnotationSource::Plugin("prefix-annotator".into()),
            ),
            Expect::Reject(Text::Contains(vec![
                "github:delete_repo".into(),
                "prefix-annotator".into(),
                "name prefix 'delete_'".into(),
                "call_tool_destructive".into(),
            ])),
        );
    }
}

/// One case of the `prefix` suite.
#[derive(Debug, Clone)]
pub struct PrefixCase {
    pub name: String,
    pub tool: Tool,
    pub class: SafetyClass,
    pub basis: InferenceBasis,
    pub annotations: Annotations,
}

impl PrefixCase {
    pub fn run(&self, plugin: &Plugin) -> CaseResult {
        let got = plugin.infer(&self.tool);
        let passed = matches!(&got, Ok(Some(i))
            if i.safety_class == self.class && i.basis == self.basis && i.annotations == self.annotations);
        CaseResult {
            name: self.name.clone(),
            passed,
            expected: format!(
                "{} ({:?}) with {}",
                self.class,
                self.basis,
                json!(self.annotations)
            ),
            got: match got {
                Ok(Some(i)) => format!(
                    "{} ({:?}) with {}: {}",
                    i.safety_class,
                    i.basis,
                    json!(i.annotations),
                    i.why
                ),
                Ok(None) => "no inference".to_owned(),
                Err(fault) => format!("fault: {fault}"),
            },
        }
    }
}

/// The annotations each safety class implies (docs/plugins.md).
pub fn implied_annotations(class: SafetyClass) -> Annotations {
    let (read_only_hint, destructive_hint, open_world_hint) = match class {
        SafetyClass::ReadOnly => (Some(true), None, None),
        SafetyClass::WriteCapable => (Some(false), Some(false), None),
        SafetyClass::Dangerous => (None, Some(true), None),
        SafetyClass::Subprocess => (Some(false), None, Some(true)),
        SafetyClass::Unknown => (None, None, None),
    };
    Annotations {
        read_only_hint,
        destructive_hint,
        open_world_hint,
        idempotent_hint: None,
    }
}

/// The name-prefix table (docs/plugins.md).
pub const PREFIXES: &[(&str, SafetyClass)] = &[
    ("read_", SafetyClass::ReadOnly),
    ("list_", SafetyClass::ReadOnly),
    ("get_", SafetyClass::ReadOnly),
    ("search_", SafetyClass::ReadOnly),
    ("find_", SafetyClass::ReadOnly),
    ("scan_", SafetyClass::ReadOnly),
    ("git_", SafetyClass::ReadOnly),
    ("update_", SafetyClass::WriteCapable),
    ("write_", SafetyClass::WriteCapable),
    ("set_", SafetyClass::WriteCapable),
    ("create_", SafetyClass::WriteCapable),
    ("edit_", SafetyClass::WriteCapable),
    ("new_", SafetyClass::WriteCapable),
    ("delete_", SafetyClass::Dangerous),
    ("remove_", SafetyClass::Dangerous),
    ("run_", SafetyClass::Subprocess),
    ("validate_", SafetyClass::Subprocess),
    ("execute_", SafetyClass::Subprocess),
    ("invoke_", SafetyClass::Subprocess),
    ("open_", SafetyClass::Subprocess),
    ("launch_", SafetyClass::Subprocess),
];

fn tool(name: &str, annotations: Option<Annotations>, meta: Option<serde_json::Value>) -> Tool {
    Tool {
        server: "fixture".into(),
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object"}).into(),
        annotations,
        meta,
        ..Default::default()
    }
}

/// Every case of the `prefix` suite.
pub fn prefix_cases() -> Vec<PrefixCase> {
    let mut cases: Vec<PrefixCase> = PREFIXES
        .iter()
        .map(|&(prefix, class)| PrefixCase {
            name: format!("name prefix {prefix} is {class}"),
            tool: tool(&format!("{prefix}thing"), None, None),
            class,
            basis: InferenceBasis::Inferred,
            annotations: implied_annotations(class),
        })
        .collect();
    for name in ["mystery_tool", "deleteall", "status"] {
        cases.push(PrefixCase {
            name: format!("{name} has no known prefix: unknown"),
            tool: tool(name, None, None),
            class: SafetyClass::Unknown,
            basis: InferenceBasis::Inferred,
            annotations: Annotations::default(),
        });
    }
    for class in SafetyClass::ALL {
        cases.push(PrefixCase {
            name: format!("_meta.safety_class {class} beats the name"),
            tool: tool(
                "delete_thing",
                None,
                Some(json!({"safety_class": class.as_str()})),
            ),
            class,
            basis: InferenceBasis::Meta,
            annotations: implied_annotations(class),
        });
    }
    cases.push(PrefixCase {
        name: "an invalid _meta.safety_class falls back to the name".into(),
        tool: tool(
            "list_things",
            None,
            Some(json!({"safety_class": "harmless"})),
        ),
        class: SafetyClass::ReadOnly,
        basis: InferenceBasis::Inferred,
        annotations: implied_annotations(SafetyClass::ReadOnly),
    });
    let server_read_only = Annotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    cases.push(PrefixCase {
        name: "server annotations beat _meta and the name".into(),
        tool: tool(
            "delete_thing",
            Some(server_read_only),
            Some(json!({"safety_class": "dangerous"})),
        ),
        class: SafetyClass::ReadOnly,
        basis: InferenceBasis::Server,
        annotations: server_read_only,
    });
    let server_destructive = Annotations {
        destructive_hint: Some(true),
        read_only_hint: Some(false),
        ..Default::default()
    };
    cases.push(PrefixCase {
        name: "server destructiveHint on a list_ name is dangerous".into(),
        tool: tool("list_and_purge", Some(server_destructive), None),
        class: SafetyClass::Dangerous,
        basis: InferenceBasis::Server,
        annotations: server_destructive,
    });
    let server_plain = Annotations {
        idempotent_hint: Some(true),
        ..Default::default()
    };
    cases.push(PrefixCase {
        name: "server annotations without read/destructive hints are write-capable".into(),
        tool: tool("read_and_fix", Some(server_plain), None),
        class: SafetyClass::WriteCapable,
        basis: InferenceBasis::Server,
        annotations: server_plain,
    });
    cases
}
