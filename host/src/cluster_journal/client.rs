//! One statement over ClickHouse's HTTP interface: POSTed as the body, HTTP Basic
//! credentials in a header (never in the URL, never logged), no redirects, no proxy from the
//! environment, a deadline per request. ClickHouse itself is asked to stay read-only
//! (`readonly=2`), to refuse a result over [`MAX_ROWS`] rows or [`MAX_BYTES`] bytes and to
//! buffer the result (`wait_end_of_query`, so an error part-way is an error status, not a
//! 200 with the error appended); the answer is read up to [`MAX_BYTES`] too.

use std::time::Duration;

use super::Error;
use super::target::Target;

/// The most rows one statement may return.
pub(super) const MAX_ROWS: usize = 1000;
/// The most bytes one answer may hold (records are bounded, a thousand of them are not).
pub(super) const MAX_BYTES: usize = 64 << 20;
/// The longest shown part of ClickHouse's error text.
const MAX_ERROR_CHARS: usize = 400;

/// A client for one target.
pub(super) struct Client {
    http: reqwest::Client,
    target: Target,
}

impl Client {
    pub(super) fn new(target: Target) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(target.timeout.min(Duration::from_secs(5)))
            .timeout(target.timeout)
            .build()
            .map_err(|e| Error::Unreachable {
                url: target.shown.clone(),
                sink: target.sink.clone(),
                reason: format!("cannot build an HTTP client: {e}"),
            })?;
        Ok(Self { http, target })
    }

    pub(super) fn target(&self) -> &Target {
        &self.target
    }

    /// Runs `sql` and returns the answer's text.
    pub(super) async fn run(&self, sql: &str) -> Result<String, Error> {
        let t = &self.target;
        let seconds = t.timeout.as_secs().max(1).to_string();
        let mut request = self
            .http
            .post(t.url.clone())
            .query(&[
                ("readonly", "2"),
                ("wait_end_of_query", "1"),
                ("max_result_rows", &MAX_ROWS.to_string()),
                ("max_result_bytes", &MAX_BYTES.to_string()),
                ("result_overflow_mode", "throw"),
                ("max_execution_time", &seconds),
            ])
            .body(sql.to_owned());
        if let Some((user, password)) = &t.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let unreachable = |e: reqwest::Error| Error::Unreachable {
            url: t.shown.clone(),
            sink: t.sink.clone(),
            // Without the URL: it is in the message already, masked.
            reason: e.without_url().to_string(),
        };
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(Error::TooLarge {
                    url: t.shown.clone(),
                    sink: t.sink.clone(),
                    max_bytes: MAX_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if status.is_success() {
            return Ok(text);
        }
        Err(Error::Answered {
            url: t.shown.clone(),
            status: status.as_u16(),
            message: shown_error(&text),
            hint: hint(&text, t),
        })
    }
}

/// ClickHouse's error text, cut and escaped (it may quote what the statement held).
fn shown_error(text: &str) -> String {
    let text = text.trim();
    let cut: String = text.chars().take(MAX_ERROR_CHARS).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", mcpproxy_policy::quote(&cut))
}

/// The ClickHouse error code an answer starts with (`Code: 60, ...` from 18.x, `Code: 60.
/// ...` from later ones).
fn code(text: &str) -> Option<u32> {
    let rest = text.trim_start().strip_prefix("Code: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What to check for an error answer.
fn hint(text: &str, t: &Target) -> String {
    let sink = &t.sink;
    match code(text) {
        Some(60) => format!(
            "check plugins.settings.{sink}.database and .table (the table {}.{} does not exist \
             yet: the sink creates it with the first records a replica delivers)",
            t.database, t.table
        ),
        Some(81) => format!(
            "check plugins.settings.{sink}.database (the database {} does not exist yet: the \
             sink creates it with the first records a replica delivers)",
            t.database
        ),
        Some(192 | 193 | 516) => format!(
            "check plugins.settings.{sink}.user and .password (the replicas' sink uses them too)"
        ),
        Some(16 | 47) => format!(
            "check that plugins.settings.{sink}.table is a table the sink created (a column is \
             missing)"
        ),
        Some(164) => format!(
            "the user of plugins.settings.{sink} may not change settings (readonly=1); give it \
             readonly=2 or 0"
        ),
        Some(159 | 396) => "narrow the query (--since/--until, --server, --type)".to_owned(),
        _ => format!(
            "check that plugins.settings.{sink}.url names ClickHouse's HTTP interface and that \
             ClickHouse is 18.16 or later"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_of_old_and_new_servers_are_read() {
        assert_eq!(
            code("Code: 60, e.displayText() = DB::Exception: Table"),
            Some(60)
        );
        assert_eq!(
            code("Code: 516. DB::Exception: default: Authentication failed"),
            Some(516)
        );
        assert_eq!(code("<html>bad gateway</html>"), None);
    }

    #[test]
    fn an_error_text_is_cut_and_escaped() {
        let shown = shown_error(&format!("Code: 62, bad\n{}", "x".repeat(1000)));
        assert!(shown.ends_with('…'), "{shown}");
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.chars().count() < MAX_ERROR_CHARS + 20);
    }
}
