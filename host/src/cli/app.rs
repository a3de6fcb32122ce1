//! The command line as clap parses it: the global options ([`Cli`]), the commands, and the
//! exit statuses a command ends with.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit status when a command ran and found a problem (a failed check).
pub(crate) const EXIT_FAILURE: u8 = 1;
/// Exit status for bad usage or an error that stopped the command.
pub(crate) const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "mcpproxy",
    version,
    about = "An MCP proxy whose security policy runs as sandboxed WebAssembly plugins",
    propagate_version = true,
    after_help = "Colour (--color WHEN): `auto` (the default) colours status words on a terminal, \
                  unless NO_COLOR is set to anything but an empty string or TERM is `dumb`; \
                  `always` colours piped output too; `never` never does. Tables fit the \
                  terminal's width (or COLUMNS); piped output keeps whole lines."
)]
pub(crate) struct Cli {
    /// Where mcpproxy keeps its state (compiled-plugin cache, journal, API key).
    #[arg(long, global = true, env = "MCPPROXY_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// More log output (-v: debug, -vv: trace). RUST_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    /// Colour: auto, always or never (see `mcpproxy --help`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        value_name = "WHEN",
        hide_possible_values = true
    )]
    color: super::output::ColorChoice,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the proxy: MCP on http://127.0.0.1:8080/mcp (or stdio), upstreams, plugins.
    Serve(super::serve::ServeCommand),
    /// List, check and test policy plugins.
    #[command(subcommand)]
    Plugins(super::plugins::PluginsCommand),
    /// The audit trail: every call, allowed or not.
    #[command(subcommand)]
    Activity(super::activity::ActivityCommand),
    /// Print the REST API key (made on first start, kept in the data dir).
    ApiKey(super::api_key::ApiKeyCommand),
    /// Call an upstream tool: tool-read, tool-write or tool-destructive SERVER:TOOL.
    #[command(subcommand)]
    Call(super::call::CallCommand),
    /// Search and list upstream tools.
    #[command(subcommand)]
    Tools(super::tools::ToolsCommand),
    /// Upstream servers: list, add, remove, enable, disable, restart, logs, import; review and
    /// approve them (quarantine, tools changed since approval).
    #[command(subcommand)]
    Upstream(super::upstream::UpstreamCommand),
    /// Run a code_execution script (JavaScript) through the running mcpproxy.
    #[command(subcommand)]
    Code(super::code::CodeCommand),
    /// Secrets for `${secret:NAME}` in the config: set, list (names only), delete.
    #[command(subcommand)]
    Secret(super::secret::SecretCommand),
    /// Set mcpproxy up in an MCP client (cursor, claude-desktop, vscode, windsurf).
    #[command(subcommand)]
    Client(super::client::ClientCommand),
    /// Replicas sharing one state in PostgreSQL (`cluster.postgres`): status.
    #[command(subcommand)]
    Cluster(super::cluster::ClusterCommand),
    /// Check the config, the data dir, the running mcpproxy, each server's launch and the
    /// plugins, and say what to do about each problem (exit 1 when there is one).
    Doctor(super::doctor::DoctorCommand),
    /// The calls waiting for a person's approval (`approvals` in the config), and a person's
    /// answer to one.
    #[command(subcommand)]
    Approvals(super::approvals::ApprovalsCommand),
}

/// Global options every command can read.
#[derive(Debug, Clone)]
pub(crate) struct Globals {
    /// `-v` given this many times.
    pub verbose: u8,
    /// `--data-dir`, if given.
    pub data_dir_flag: Option<PathBuf>,
    /// The user's home directory, for `~` and the default paths.
    pub home: Option<PathBuf>,
}

impl Globals {
    /// `--data-dir`, else the config's `data_dir`, else `~/.mcpproxy`.
    pub(crate) fn data_dir(&self, from_config: Option<&std::path::Path>) -> PathBuf {
        self.data_dir_flag
            .clone()
            .or_else(|| from_config.map(PathBuf::from))
            .unwrap_or_else(|| {
                self.home
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("."))
                    .join(".mcpproxy")
            })
    }
}

/// Parses the command line, runs the command, and maps the result to an exit status.
pub fn run() -> ExitCode {
    // ring for TLS and JWTs before anything can build an HTTP client (reqwest has no crypto
    // provider of its own in this build and would panic).
    mcpproxy_auth::install_crypto_providers();
    let cli = Cli::parse();
    super::output::init_colour(cli.color);
    // `serve` starts the log itself once it has read the config (which may add trace
    // export to it).
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging(cli.verbose, false, None);
    }
    quiet_on_closed_stdout();
    let globals = Globals {
        verbose: cli.verbose,
        data_dir_flag: cli.data_dir,
        home: std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
    };
    let result = match cli.command {
        Command::Serve(cmd) => cmd.run(&globals),
        Command::Plugins(cmd) => cmd.run(&globals),
        Command::Activity(cmd) => cmd.run(&globals),
        Command::ApiKey(cmd) => cmd.run(&globals),
        Command::Call(cmd) => cmd.run(&globals),
        Command::Tools(cmd) => cmd.run(&globals),
        Command::Upstream(cmd) => cmd.run(&globals),
        Command::Code(cmd) => cmd.run(&globals),
        Command::Secret(cmd) => cmd.run(&globals),
        Command::Client(cmd) => cmd.run(&globals),
        Command::Cluster(cmd) => cmd.run(&globals),
        Command::Doctor(cmd) => cmd.run(&globals),
        Command::Approvals(cmd) => cmd.run(&globals),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!(
                "{} {err:#}",
                super::output::paint_err("error:", Some(super::output::Tone::Bad))
            );
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// `mcpproxy activity list | head` should end quietly, as other Unix tools do, rather than
/// print a panic when stdout's reader goes away: `println!` panics on that write, and this
/// hook turns exactly that panic into a silent exit 0 (as ripgrep does). SIGPIPE itself stays
/// ignored (Rust's default): a sink or an HTTP client writing to a socket its peer closed
/// must get an error, not kill the process, and such writes go through `writev`, which
/// cannot ask the kernel not to raise the signal.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// The log on stderr, and the export of [`mcpproxy_policy::spans`] as traces when `traces` is given.
pub(super) fn init_logging(
    verbose: u8,
    serving: bool,
    traces: Option<&mcpproxy_server::telemetry::TraceExport>,
) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    // rmcp logs every request and response, arguments included, at debug: that stays off
    // at -v and -vv (secrets in arguments are redacted in the journal, not in its lines), as
    // do the compiler's traces; RUST_LOG can still ask for them. By default rmcp says
    // nothing: its errors repeat what mcpproxy's own one line per upstream failure says
    // (`cannot connect to upstream ...`), and its warnings answer clients' unsupported
    // requests, which is not the operator's concern.
    let default = match verbose {
        0 if serving => "info,rmcp=off",
        0 => "warn,rmcp=off",
        1 => "debug,rmcp=info,cranelift_codegen=info,wasmtime=info,wasmtime_cranelift=info",
        _ => {
            "trace,rmcp=info,cranelift_codegen=info,wasmtime=info,wasmtime_cranelift=info,regalloc2=info"
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
        // The call spans are for trace export only; the log never prints them.
        .add_directive(
            format!("{}=off", mcpproxy_policy::SPAN_TARGET)
                .parse()
                .expect("a valid directive"),
        );
    // Every line passes through the masking of secrets (URL query values and user info,
    // tokens): libraries quote URLs in their errors too.
    // A starting `serve` holds its INFO lines until its banner and summary are printed
    // (`startup_log`); with -v, lines come as they happen.
    if serving && verbose == 0 {
        super::startup_log::hold();
    }
    let log = tracing_subscriber::fmt::layer()
        .with_writer(super::startup_log::StartupLog)
        .with_ansi(super::output::stderr_colour())
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(traces.map(|t| t.layer()))
        .try_init();
}
