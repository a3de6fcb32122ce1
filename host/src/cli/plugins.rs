//! `mcpproxy plugins list`, `plugins check` (with a suite or the author's own cases),
//! `plugins wit` and `plugins new`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::json;

use mcpproxy_activity::{ActivityRecord, RecordType, SinkBatch, Source, Status};
use mcpproxy_plugin_host::Bytes;
use mcpproxy_plugin_host::{Plugin, PluginKind, PluginSet, PluginSettings, PluginSource};
use mcpproxy_plugin_host::{embedded_component, embedded_names};
use mcpproxy_plugin_kit::suite::{self, Suite};
use mcpproxy_plugin_kit::{cases, template};
use mcpproxy_policy::Limits;
use mcpproxy_policy::{
    AnnotationSource, Annotations, CallRequest, EffectiveAnnotations, OperationType, Outcome,
    SafetyClass, Tool, Verdict,
};
use mcpproxy_server::runtime::plugin_engine;

use super::output::{Format, Tone, paint, print_data, print_table};
use super::{EXIT_FAILURE, Globals};

#[derive(Debug, Subcommand)]
pub(super) enum PluginsCommand {
    /// Show the plugins that would load: the embedded defaults and those in --plugins DIR.
    List(ListCommand),
    /// Load a plugin file, say which world it implements, call it once under the limits,
    /// and optionally run a conformance suite against it.
    Check(CheckCommand),
    /// Write the plugin contract (`wit/`, as this binary was built against) into DIR.
    Wit(WitCommand),
    /// Start a plugin project: source, build script, README (build, check, load) and wit/.
    New(NewCommand),
    /// Load the running owner's policy plugins again (embedded and --plugins DIR), put in
    /// force only if the new set loads and passes a probe call.
    Reload(super::plugins_reload::ReloadCommand),
}

impl PluginsCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        match self {
            Self::List(cmd) => cmd.run(globals),
            Self::Check(cmd) => cmd.run(globals),
            Self::Wit(cmd) => cmd.run(),
            Self::New(cmd) => cmd.run(),
            Self::Reload(cmd) => cmd.run(globals),
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct WitCommand {
    /// Where to write the contract (created if missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

impl WitCommand {
    fn run(self) -> Result<ExitCode> {
        let files = template::write_wit(&self.dir)?;
        println!(
            "wrote {} files of mcpproxy:plugin@0.1.1 (and the WASI 0.2 packages it uses) to {}",
            files.len(),
            self.dir.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LangArg {
    Rust,
    Python,
    Js,
    /// C (validators only), bound with `wit-bindgen c`.
    C,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum NewKind {
    Validator,
    Annotator,
    /// A result guard (`result-guard-plugin`): sees what upstreams return.
    ResultGuard,
}

#[derive(Debug, Args)]
pub(super) struct NewCommand {
    /// The plugin's name (lowercase letters, digits and '-'), also its directory's.
    #[arg(value_name = "NAME")]
    name: String,

    /// The language of the project.
    #[arg(long, value_enum)]
    lang: LangArg,

    /// What the plugin is.
    #[arg(long, value_enum, default_value = "validator")]
    kind: NewKind,

    /// Where to write it [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl NewCommand {
    fn run(self) -> Result<ExitCode> {
        let dir = self.dir.unwrap_or_else(|| PathBuf::from(&self.name));
        let lang = match self.lang {
            LangArg::Rust => template::Lang::Rust,
            LangArg::Python => template::Lang::Python,
            LangArg::Js => template::Lang::Js,
            LangArg::C => template::Lang::C,
        };
        let kind = match self.kind {
            NewKind::Validator => PluginKind::Validator,
            NewKind::Annotator => PluginKind::Annotator,
            NewKind::ResultGuard => PluginKind::ResultGuard,
        };
        template::new_project(&dir, &self.name, lang, kind)?;
        println!(
            "wrote the {kind} '{}' to {}; see its README.md: bash build.sh, then \
             mcpproxy plugins check",
            self.name,
            dir.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Debug, Args)]
pub(super) struct ListCommand {
    /// A directory of *.wasm plugins, loaded after (and replacing) the embedded ones
    /// [default: the config's `plugins.dir`].
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,

    /// The config file (its `plugins.dir` and `data_dir` are used, as `serve` would).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl ListCommand {
    fn run(self, globals: &Globals) -> Result<ExitCode> {
        let config = mcpproxy_config::load(self.config.as_deref(), globals.home.as_deref())?.config;
        let data_dir = globals.data_dir(config.data_dir.as_deref());
        let dir = self.plugins.or(config.plugins.dir.clone());
        let engine = plugin_engine(&data_dir, Limits::default().memory_bytes)?;
        let set = PluginSet::load(&engine, dir.as_deref(), &|_, _| PluginSettings::default())?;
        let in_force = running_plugins(&config, &data_dir)?;
        let mut first_scanner = true;
        let listed: Vec<Listed> = set
            .plugins()
            .iter()
            .map(|p| {
                let info = p.info().clone();
                let active = active(
                    &info,
                    &config.plugins,
                    in_force.as_ref(),
                    &mut first_scanner,
                );
                Listed { info, active }
            })
            .collect();
        if !print_data(&listed, self.output)? {
            let rows: Vec<Vec<String>> = listed
                .iter()
                .map(|l| {
                    let i = &l.info;
                    vec![
                        i.name.clone(),
                        i.kind.to_string(),
                        i.version.clone(),
                        i.source.to_string(),
                        Bytes(i.size_bytes).to_string(),
                        l.active.to_owned(),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "KIND", "VERSION", "SOURCE", "SIZE", "ACTIVE"],
                &rows,
            );
            eprintln!(
                "ACTIVE: {}",
                if in_force.is_some() {
                    "the policy plugins the running mcpproxy has in force (`mcpproxy plugins reload` after a change); sinks and the scanner as its config names them"
                } else {
                    "as `mcpproxy serve` would pick them from the config (no mcpproxy runs on this data dir)"
                }
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// A plugin as `plugins list` shows it: what it is, and whether it judges calls.
#[derive(serde::Serialize)]
struct Listed {
    #[serde(flatten)]
    info: mcpproxy_plugin_host::PluginInfo,
    /// `yes`; `no`; `opt-in` (an embedded plugin the config does not name).
    active: &'static str,
}

/// The names of the policy plugins the data dir's running owner has in force (annotators,
/// validators, result guards), or `None` when none runs.
fn running_plugins(
    config: &mcpproxy_config::Config,
    data_dir: &std::path::Path,
) -> Result<Option<Vec<String>>> {
    let runtime = crate::cli::runtime::current_thread()?;
    runtime.block_on(async {
        let Some(remote) = super::remote::Remote::find(config, data_dir).await? else {
            return Ok(None);
        };
        let in_force = remote.plugins_in_force().await?;
        Ok(Some(
            in_force.into_iter().flat_map(|(_, names)| names).collect(),
        ))
    })
}

/// Whether `info` judges calls: as the running owner has it in force (a policy plugin), else
/// as `serve` picks it from the config (a list names it, or, with no list, it is not opt-in;
/// a sink when `plugins.sinks` names it; the first scanner).
fn active(
    info: &mcpproxy_plugin_host::PluginInfo,
    picks: &mcpproxy_config::PluginsConfig,
    in_force: Option<&Vec<String>>,
    first_scanner: &mut bool,
) -> &'static str {
    let yes_no = |on: bool| {
        if on {
            "yes"
        } else if info.opt_in {
            "opt-in"
        } else {
            "no"
        }
    };
    let listed = |list: &Option<Vec<String>>| match list {
        Some(names) => names.contains(&info.name),
        None => !info.opt_in,
    };
    match info.kind {
        PluginKind::Annotator | PluginKind::Validator | PluginKind::ResultGuard
            if in_force.is_some() =>
        {
            yes_no(in_force.is_some_and(|names| names.contains(&info.name)))
        }
        PluginKind::Annotator => yes_no(listed(&picks.annotators)),
        PluginKind::Validator => yes_no(listed(&picks.validators)),
        PluginKind::ResultGuard => yes_no(listed(&picks.guards)),
        PluginKind::Sink => yes_no(picks.sinks.contains(&info.name)),
        PluginKind::Scanner => yes_no(std::mem::take(first_scanner)),
    }
}

#[derive(Debug, Args)]
pub(super) struct CheckCommand {
    /// The plugin component to check, or the name of an embedded plugin
    /// (`intent-matrix`; `mcpproxy plugins list` names them).
    #[arg(value_name = "FILE.wasm|NAME")]
    file: PathBuf,

    /// Run a conformance suite: `matrix` for validators, `prefix` for annotators. For a
    /// plugin that replaces a default one.
    #[arg(long, value_name = "SUITE")]
    suite: Option<Suite>,

    /// Run your own cases against a validator (a JSON array of calls and the verdict each
    /// must get) or a result guard (results and the answer each must get); see
    /// docs/plugins.md, "Testing a plugin".
    #[arg(long, value_name = "CASES.json")]
    cases: Option<PathBuf>,

    /// The deadline per call, in milliseconds [default: 50; 30000 for a sink, 5000 for a
    /// scanner].
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,

    /// The memory cap per instance, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = Limits::DEFAULT_MEMORY_BYTES >> 20)]
    memory_mib: usize,

    /// The plugin's settings (what its `config()` import returns), as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    settings: String,

    /// For a sink: deliver two sample records (server `mcpproxy-check`) to the remote its
    /// settings name. A real write: the records land in that store.
    #[arg(long)]
    deliver: bool,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl CheckCommand {
    fn run(self, globals: &Globals) -> Result<ExitCode> {
        let settings: serde_json::Value = serde_json::from_str(&self.settings)
            .with_context(|| format!("--settings is not valid JSON: {}", self.settings))?;
        if !settings.is_object() {
            bail!(
                "--settings must be a JSON object, like '{{\"strict_server_validation\": false}}'"
            );
        }
        let mut limits = Limits {
            timeout: self
                .timeout_ms
                .map_or(Limits::DEFAULT_TIMEOUT, Duration::from_millis),
            memory_bytes: self.memory_mib.saturating_mul(1 << 20),
            ..Limits::default()
        };
        let engine = plugin_engine(&globals.data_dir(None), limits.memory_bytes)?;
        let embedded = (!self.file.exists())
            .then(|| self.file.to_str().and_then(embedded_component))
            .flatten();
        let (bytes, source) = match embedded {
            Some(bytes) => (bytes, PluginSource::Embedded),
            None => (
                std::fs::read(&self.file).with_context(|| {
                    format!(
                        "cannot read {} (give a plugin's .wasm file or the name of an embedded \
                         plugin: {})",
                        self.file.display(),
                        embedded_names().join(", ")
                    )
                })?,
                PluginSource::File(self.file.clone()),
            ),
        };
        let mut plugin = Plugin::load(&engine, &bytes, source, limits)?;
        let is_sink = plugin.kind() == PluginKind::Sink;
        if self.deliver && !is_sink {
            bail!(
                "--deliver is for sink plugins, and {} is {} plugin",
                self.file.display(),
                plugin.kind().with_article()
            );
        }
        if self.timeout_ms.is_none() {
            limits.timeout = plugin.kind().default_timeout();
        }
        let default_settings = settings.clone();
        plugin.configure(&PluginSettings {
            limits,
            settings,
            reuse_chosen: true,
        });
        let info = plugin.info().clone();
        let plugin = std::sync::Arc::new(plugin);

        let smoke = if self.deliver {
            deliver_samples(plugin.clone())
        } else {
            smoke_call(&plugin)
        };
        let suite_results = match self.suite {
            Some(suite) if suite.kind() != info.kind => bail!(
                "the {} suite is for {} plugins, and {} is {} plugin",
                suite.name(),
                suite.kind(),
                self.file.display(),
                info.kind.with_article()
            ),
            Some(suite) => Some(suite::run(suite, &plugin)),
            None => None,
        };
        let suite_results = match &self.cases {
            Some(path) if info.kind == PluginKind::ResultGuard => {
                let cases = mcpproxy_plugin_kit::guard_cases::load(path)?;
                let mut results = suite_results.unwrap_or_default();
                results.extend(cases.iter().map(|c| c.run(&plugin, &default_settings)));
                Some(results)
            }
            Some(_) if info.kind != PluginKind::Validator => bail!(
                "--cases is for validator and result-guard plugins, and {} is {} plugin",
                self.file.display(),
                info.kind.with_article()
            ),
            Some(path) => {
                let mut results = suite_results.unwrap_or_default();
                let cases = cases::load(path)?;
                results.extend(cases::run(&engine, &plugin, cases, &default_settings)?);
                Some(results)
            }
            None => suite_results,
        };
        let failed = suite_results.iter().flatten().filter(|r| !r.passed).count();
        let ok = smoke.is_ok() && failed == 0;

        match self.output {
            Format::Json | Format::Jsonl | Format::Yaml => {
                let report = json!({
                    "plugin": info,
                    "limits": limits,
                    "call": match &smoke { Ok(s) => json!({"ok": true, "result": s}),
                                            Err(e) => json!({"ok": false, "error": e}) },
                    "suite": suite_results,
                    "passed": ok,
                });
                print_data(&report, self.output)?;
            }
            Format::Table => {
                println!(
                    "{}: {} plugin '{}' {} — {}",
                    self.file.display(),
                    info.kind,
                    info.name,
                    info.version,
                    info.description
                );
                println!(
                    "limits: {} ms deadline, {} memory",
                    limits.timeout.as_millis(),
                    Bytes(limits.memory_bytes)
                );
                match &smoke {
                    Ok(result) => println!("call: {} ({result})", paint("ok", Some(Tone::Good))),
                    Err(e) => println!("call: {}: {e}", paint("FAILED", Some(Tone::Bad))),
                }
                if let Some(results) = &suite_results {
                    for r in results {
                        if r.passed {
                            println!("{}  {}", paint("PASS", Some(Tone::Good)), r.name);
                        } else {
                            println!(
                                "{}  {}\n      expected {}\n      got      {}",
                                paint("FAIL", Some(Tone::Bad)),
                                r.name,
                                r.expected,
                                r.got
                            );
                        }
                    }
                    println!("{} passed, {} failed", results.len() - failed, failed);
                }
            }
        }
        Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_FAILURE)
        })
    }
}

/// One call with a simple input, to show the plugin runs under the limits.
fn smoke_call(plugin: &Plugin) -> Result<String, String> {
    let tool = Tool {
        server: "example".into(),
        name: "list_items".into(),
        description: "List the items".into(),
        input_schema: json!({"type": "object"}).into(),
        annotations: Some(Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        }),
        meta: None,
        ..Default::default()
    };
    match plugin.kind() {
        PluginKind::Validator => {
            let request = CallRequest {
                variant: OperationType::Read,
                effective: EffectiveAnnotations {
                    annotations: tool.annotations,
                    source: AnnotationSource::Server,
                    reason: None,
                    safety_class: SafetyClass::ReadOnly,
                },
                tool,
                intent: None,
                args: json!({}),
            };
            match plugin.validate(&request) {
                Ok(Verdict::Allow) => Ok("call_tool_read of example:list_items: allow".into()),
                Ok(Verdict::Warn(m)) => {
                    Ok(format!("call_tool_read of example:list_items: warn: {m}"))
                }
                Ok(Verdict::Reject(m)) => {
                    Ok(format!("call_tool_read of example:list_items: reject: {m}"))
                }
                Err(fault) => Err(fault.to_string()),
            }
        }
        PluginKind::Annotator => match plugin.infer(&tool) {
            Ok(Some(i)) => Ok(format!(
                "example:list_items is {} ({})",
                i.safety_class, i.why
            )),
            Ok(None) => Ok("example:list_items: no inference".into()),
            Err(fault) => Err(fault.to_string()),
        },
        PluginKind::Scanner => match plugin.scan(std::slice::from_ref(&tool), &[]) {
            Ok(findings) => Ok(format!(
                "example:list_items: {} finding{}",
                findings.len(),
                if findings.len() == 1 { "" } else { "s" }
            )),
            Err(fault) => Err(fault.to_string()),
        },
        PluginKind::ResultGuard => mcpproxy_plugin_kit::guard_cases::smoke(plugin),
        PluginKind::Sink => Ok(match granted(plugin) {
            Some(hosts) => format!(
                "sink loaded ({}); it may reach {hosts}; pass --deliver to send two sample \
                 records there",
                plugin.world()
            ),
            None => format!(
                "sink loaded ({}); its settings have no `url`, so it may reach no host: pass \
                 --settings '{{\"url\": \"http://...\"}}' and --deliver to send two sample \
                 records",
                plugin.world()
            ),
        }),
    }
}

/// The hosts a sink may reach, for people; `None` if it may reach none.
fn granted(plugin: &Plugin) -> Option<String> {
    let hosts = plugin.granted_hosts().unwrap_or_default();
    (!hosts.is_empty()).then(|| hosts.join(", "))
}

/// Delivers two sample records (a read that succeeded, a delete the policy blocked) through
/// a sink, for real, as `serve` would: on a blocking thread of a tokio runtime, which
/// `wasi:http` needs for its I/O.
fn deliver_samples(plugin: std::sync::Arc<Plugin>) -> Result<String, String> {
    let records = sample_records();
    let ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    let batch =
        SinkBatch::of(&records).map_err(|e| format!("cannot encode the sample records: {e}"))?;
    let hosts = granted(&plugin).unwrap_or_else(|| "no host".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the I/O runtime: {e}"))?;
    let started = std::time::Instant::now();
    let delivery = runtime.spawn_blocking(move || plugin.deliver(&batch));
    let outcome = runtime
        .block_on(delivery)
        .map_err(|e| format!("the delivery thread failed: {e}"))?;
    let took = started.elapsed().as_millis();
    match outcome {
        Ok(Ok(())) => Ok(format!(
            "delivered 2 sample records to {hosts} in {took} ms (ids {})",
            ids.join(", ")
        )),
        Ok(Err(reason)) => Err(format!("the sink did not store the batch: {reason}")),
        Err(fault) => Err(fault.to_string()),
    }
}

/// What `--deliver` sends: two records as the journal would hold them, marked as coming
/// from this check (server `mcpproxy-check`, source `cli`).
fn sample_records() -> Vec<ActivityRecord> {
    let sample = |tool: &str, class: SafetyClass, hints: Annotations, status: Status| {
        let mut rec =
            ActivityRecord::new(RecordType::ToolCall, Source::Cli, "mcpproxy-check", tool);
        rec.tool_variant = Some(OperationType::Read);
        rec.annotation_source = AnnotationSource::Server;
        rec.safety_class = class;
        rec.annotations = Some(hints);
        rec.arguments = Some(json!({"check": "mcpproxy plugins check --deliver"}));
        rec.status = status;
        rec
    };
    let mut read = sample(
        "list_items",
        SafetyClass::ReadOnly,
        Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        },
        Status::Success,
    );
    read.response_bytes = 42;
    read.duration_ms = 3;
    let mut blocked = sample(
        "delete_item",
        SafetyClass::Dangerous,
        Annotations {
            destructive_hint: Some(true),
            ..Default::default()
        },
        Status::Blocked,
    );
    blocked.verdict = Outcome::rejected(
        "intent-matrix",
        "a sample rejection from mcpproxy plugins check".into(),
        Vec::new(),
    );
    vec![read, blocked]
}
