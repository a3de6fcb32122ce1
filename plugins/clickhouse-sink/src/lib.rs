//! `clickhouse-sink`: an activity sink, a WebAssembly component of the `ndjson-sink-plugin`
//! world (it gets each record's JSON as mcpproxy stores it). It inserts each batch into a
//! ClickHouse table with one `INSERT ... FORMAT JSONEachRow` over
//! ClickHouse's HTTP interface (works with ClickHouse 18.16 and later).
//!
//! With `create_table` (the default) the table is created when an insert finds it (or its
//! database) missing, and a table made by an older version gets the columns added since
//! (`ALTER TABLE ... ADD COLUMN`) when an insert finds one missing; then the insert is sent
//! again. A normal batch costs one request.
//! Nothing is kept between calls.
//!
//! Settings are in [`settings`], the table and its rows in [`schema`], ClickHouse's answers in
//! [`remote`], the HTTP client over `wasi:http` in the `sink-support` crate (shared with
//! `http-sink`), whose `wasi:*` bindings this world's imports map to.

mod remote;
mod schema;
mod settings;

use sink_support::http;

wit_bindgen::generate!({
    path: "../../wit",
    world: "ndjson-sink-plugin",
    with: {
        "wasi:http/types@0.2.12": sink_support::bindings::wasi::http::types,
        "wasi:http/outgoing-handler@0.2.12": sink_support::bindings::wasi::http::outgoing_handler,
        "wasi:io/error@0.2.12": sink_support::bindings::wasi::io::error,
        "wasi:io/poll@0.2.12": sink_support::bindings::wasi::io::poll,
        "wasi:io/streams@0.2.12": sink_support::bindings::wasi::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": sink_support::bindings::wasi::clocks::monotonic_clock,
    },
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::ndjson_sink::{self, NdjsonBatch};
use mcpproxy::plugin::host::{self, LogLevel};
use remote::{Context, Failure, Problem};
use settings::Settings;

struct ClickHouseSink;

impl metadata::Guest for ClickHouseSink {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "clickhouse-sink".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Inserts the activity log into a ClickHouse table over HTTP".to_string(),
        }
    }
}

impl ndjson_sink::Guest for ClickHouseSink {
    fn deliver(batch: NdjsonBatch) -> Result<(), String> {
        let lines = std::str::from_utf8(&batch.lines).map_err(|e| {
            format!(
                "the batch {}..{} is not UTF-8 ({e}); mcpproxy sends UTF-8 JSON lines",
                batch.first_id, batch.last_id
            )
        })?;
        let s = settings::parse(&host::config())?;
        let mut rows = Vec::with_capacity(lines.len() * 2 + 256 * batch.records as usize);
        let mut count = 0;
        for line in lines.split('\n').filter(|l| !l.trim().is_empty()) {
            let id = schema::line_id(line);
            schema::push_row(&mut rows, id, schema::ulid_ms(id), line);
            count += 1;
        }
        if count == 0 {
            return Ok(());
        }
        let insert = schema::insert(&s.database, &s.table);
        let doing = format!(
            "inserting {count} record(s) into {}.{}",
            s.database, s.table
        );
        let Some(failure) = run(&s, &insert, &rows, &doing)? else {
            return Ok(());
        };
        if s.create_table && failure.problem == Problem::OldTable {
            add_columns(&s)?;
            return match run(&s, &insert, &rows, &doing)? {
                None => Ok(()),
                Some(f) => Err(message(&s, &f, &doing)),
            };
        }
        if !(s.create_table && failure.wants_table()) {
            return Err(message(&s, &failure, &doing));
        }
        if failure.problem == Problem::MissingDatabase {
            let doing = format!("creating database {}", s.database);
            if let Some(f) = run(&s, &schema::create_database(&s.database), &[], &doing)? {
                return Err(message(&s, &f, &doing));
            }
        }
        let doing_ddl = format!("creating table {}.{}", s.database, s.table);
        let ddl = schema::create_table(&s.database, &s.table);
        if let Some(f) = run(&s, &ddl, &[], &doing_ddl)? {
            return Err(message(&s, &f, &doing_ddl));
        }
        host::log(
            LogLevel::Info,
            &format!("created table {}.{} in ClickHouse", s.database, s.table),
        );
        match run(&s, &insert, &rows, &doing)? {
            None => Ok(()),
            Some(f) => Err(message(&s, &f, &doing)),
        }
    }
}

/// Gives a table made by an older clickhouse-sink the columns added since
/// ([`schema::ADDED_COLUMNS`]); a column that is already there is fine.
fn add_columns(s: &Settings) -> Result<(), String> {
    let doing = format!("adding the chain columns to {}.{}", s.database, s.table);
    for column in schema::ADDED_COLUMNS {
        let ddl = schema::add_column(&s.database, &s.table, *column);
        if let Some(f) = run(s, &ddl, &[], &doing)?
            && f.problem != Problem::ColumnExists
        {
            return Err(message(s, &f, &doing));
        }
    }
    host::log(
        LogLevel::Info,
        &format!(
            "added the chain columns (replica, seq, prev, hash) to {}.{} in ClickHouse",
            s.database, s.table
        ),
    );
    Ok(())
}

/// Sends one statement (`body` holds an INSERT's rows). `Ok(None)` on a 2xx answer,
/// `Ok(Some(..))` on an error answer, `Err` when there was no answer.
fn run(s: &Settings, sql: &str, body: &[u8], doing: &str) -> Result<Option<Failure>, String> {
    let mut headers = Vec::new();
    if let Some((user, password)) = &s.credentials {
        headers.push((
            "authorization".to_string(),
            remote::basic_auth(user, password),
        ));
    }
    let target = remote::statement_target(&s.target, sql);
    let response = http::send(&http::Request {
        method: "POST",
        target: &target,
        headers: &headers,
        body,
        timeouts: s.timeouts,
    })
    .map_err(|e| format!("{doing} in ClickHouse failed: {e}"))?;
    if (200..300).contains(&response.status) {
        Ok(None)
    } else {
        Ok(Some(Failure::new(response.status, &response.body)))
    }
}

fn message(s: &Settings, failure: &Failure, doing: &str) -> String {
    failure.message(
        &s.target,
        doing,
        &Context {
            database: &s.database,
            table: &s.table,
            user: s.credentials.as_ref().map(|(user, _)| user.as_str()),
            create_table: s.create_table,
        },
    )
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`ClickHouseSink`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::ClickHouseSink;

    crate::export!(ClickHouseSink with_types_in crate);
}
