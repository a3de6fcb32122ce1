//! Where the cluster's journal is: the table the ClickHouse sink named by `cluster.journal`
//! inserts into, read from that sink's own settings (`plugins.settings.<sink>`: `url`,
//! `database`, `table`, `user`, `password`, `timeout_ms`) with the sink's defaults, so the
//! reader reads exactly where the replicas write.

use std::time::Duration;

use serde_json::{Map, Value};

use super::Error;
use mcpproxy_auth::masking::mask_url;
use mcpproxy_config::Config;

/// The only sink whose store is read back.
pub(super) const CLICKHOUSE_SINK: &str = "clickhouse-sink";
/// The sink's defaults (plugins/clickhouse-sink/src/settings.rs).
const DEFAULT_URL: &str = "http://127.0.0.1:8123";
const DEFAULT_DATABASE: &str = "default";
const DEFAULT_TABLE: &str = "mcpproxy_activity";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// The cluster journal's table and how to reach it. `Debug` leaves the password out.
#[derive(Clone)]
pub(super) struct Target {
    /// The sink's name (for messages naming its settings).
    pub(super) sink: String,
    /// ClickHouse's HTTP interface; statements are POSTed to it.
    pub(super) url: reqwest::Url,
    /// The URL as messages show it (secrets masked).
    pub(super) shown: String,
    /// A checked identifier.
    pub(super) database: String,
    /// A checked identifier.
    pub(super) table: String,
    /// `(user, password)` for HTTP Basic authentication.
    pub(super) credentials: Option<(String, String)>,
    /// Each request's limit.
    pub(super) timeout: Duration,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("sink", &self.sink)
            .field("url", &self.shown)
            .field("database", &self.database)
            .field("table", &self.table)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The table of the sink `cluster.journal` names.
    pub(super) fn from_config(config: &Config) -> Result<Self, Error> {
        let Some(sink) = config.cluster.journal.clone() else {
            return Err(Error::NotConfigured);
        };
        if sink != CLICKHOUSE_SINK {
            return Err(Error::NotReadable(mcpproxy_support::quote(&sink)));
        }
        let settings = match config.plugins.settings_for(&sink) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Self::from_settings(sink, &settings)
    }

    fn from_settings(sink: String, settings: &Map<String, Value>) -> Result<Self, Error> {
        let problem = |key: &'static str, problem: String| Error::Settings {
            sink: sink.clone(),
            key,
            problem,
        };
        let text = |key: &'static str| -> Result<Option<String>, Error> {
            match settings.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
                Some(_) => Err(problem(key, "must be a string".to_owned())),
            }
        };
        let written = text("url")?.unwrap_or_else(|| DEFAULT_URL.to_owned());
        let url = reqwest::Url::parse(&written).map_err(|e| {
            problem(
                "url",
                format!(
                    "{} is not a URL ({e}); give ClickHouse's HTTP interface, e.g. {DEFAULT_URL}",
                    mcpproxy_support::quote(&mask_url(&written))
                ),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(problem(
                "url",
                format!(
                    "{} is not an http(s) URL; give ClickHouse's HTTP interface, e.g. {DEFAULT_URL}",
                    mcpproxy_support::quote(&mask_url(&written))
                ),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(problem(
                "url",
                "holds a user or password: put them in the user and password settings".to_owned(),
            ));
        }
        let database = identifier(&problem, "database", text("database")?, DEFAULT_DATABASE)?;
        let table = identifier(&problem, "table", text("table")?, DEFAULT_TABLE)?;
        // The password is kept as written (the sink does not trim it either).
        let password = match settings.get("password") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(problem("password", "must be a string".to_owned())),
        };
        let credentials = match (text("user")?, password) {
            (None, None) => None,
            (Some(user), password) => Some((user, password.unwrap_or_default())),
            (None, Some(password)) => Some(("default".to_owned(), password)),
        };
        let timeout = match settings.get("timeout_ms") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT,
            Some(v) => match v.as_u64() {
                Some(ms) if ms > 0 => Duration::from_millis(ms).min(MAX_TIMEOUT),
                _ => {
                    return Err(problem(
                        "timeout_ms",
                        "must be a whole number of milliseconds above 0".to_owned(),
                    ));
                }
            },
        };
        Ok(Self {
            shown: mask_url(url.as_str()),
            sink,
            url,
            database,
            table,
            credentials,
            timeout,
        })
    }
}

/// A database or table name as the sink accepts it: up to 128 letters, digits and `_`, not
/// starting with a digit.
fn identifier(
    problem: &impl Fn(&'static str, String) -> Error,
    key: &'static str,
    value: Option<String>,
    default: &str,
) -> Result<String, Error> {
    let Some(name) = value else {
        return Ok(default.to_owned());
    };
    if super::sql::is_identifier(&name) {
        Ok(name)
    } else {
        Err(problem(
            key,
            format!(
                "{} is not a plain ClickHouse name: use up to 128 letters, digits and \
                 underscores, not starting with a digit (e.g. {default})",
                mcpproxy_support::quote(&name)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(settings: Value) -> Result<Target, Error> {
        let Value::Object(map) = settings else {
            panic!("an object")
        };
        Target::from_settings(CLICKHOUSE_SINK.to_owned(), &map)
    }

    #[test]
    fn the_sinks_settings_and_defaults_say_where_the_table_is() {
        let t = target(json!({})).unwrap();
        assert_eq!(t.url.as_str(), "http://127.0.0.1:8123/");
        assert_eq!(
            (t.database.as_str(), t.table.as_str()),
            ("default", "mcpproxy_activity")
        );
        assert!(t.credentials.is_none());
        let t = target(json!({
            "url": "https://ch.internal:8443/ch?x=1", "database": "audit", "table": "t_1",
            "user": "reader", "password": "pa'ss", "timeout_ms": 5000
        }))
        .unwrap();
        assert_eq!(t.credentials, Some(("reader".into(), "pa'ss".into())));
        assert_eq!(t.timeout, Duration::from_secs(5));
        let shown = format!("{t:?}");
        assert!(!shown.contains("pa'ss"), "{shown}");
        assert_eq!(
            target(json!({"password": "p"})).unwrap().credentials,
            Some(("default".into(), "p".into()))
        );
    }

    #[test]
    fn bad_settings_say_which_and_never_echo_a_password() {
        for (settings, want) in [
            (
                json!({"url": "ftp://x"}),
                "plugins.settings.clickhouse-sink.url:",
            ),
            (
                json!({"url": "http://u:secret@h:8123"}),
                "holds a user or password",
            ),
            (
                json!({"table": "a`; DROP"}),
                "plugins.settings.clickhouse-sink.table:",
            ),
            (json!({"database": "1x"}), "not a plain ClickHouse name"),
            (json!({"password": 7}), "password: must be a string"),
            (json!({"timeout_ms": -1}), "timeout_ms"),
        ] {
            let e = target(settings.clone()).unwrap_err().to_string();
            assert!(e.contains(want), "{settings}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
