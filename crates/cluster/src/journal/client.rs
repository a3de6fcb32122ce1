//! One statement over ClickHouse's HTTP interface: POSTed as the body, HTTP Basic
//! credentials in a header (never in the URL, never logged), no redirects, no proxy from the
//! environment, a deadline per request. ClickHouse itself is asked to stay read-only
//! (`readonly=2`). A read ([`Client::run`]) is refused past [`MAX_ROWS`] rows or
//! [`MAX_BYTES`] bytes, and buffered (`wait_end_of_query`, so an error part-way is an error
//! status, not a 200 with the error appended); the answer is read up to [`MAX_BYTES`] too.
//! A stream ([`Client::stream`]) is refused past the rows its caller allows and read a line at
//! a time, each line at most [`MAX_LINE`] bytes, so memory stays flat however long it is; an
//! error ClickHouse appends part-way is recognised and reported as such.

use std::time::Duration;

use super::Error;
use super::target::Target;

/// The most rows one statement may return.
pub(super) const MAX_ROWS: usize = 1000;
/// The most bytes one answer may hold (records are bounded, a thousand of them are not).
pub(super) const MAX_BYTES: usize = 64 << 20;
/// The longest line of a stream (one row: a record is bounded well below it).
pub(super) const MAX_LINE: usize = 16 << 20;
/// The longest shown part of ClickHouse's error text.
const MAX_ERROR_CHARS: usize = 400;

/// A client for one target.
pub(super) struct Client {
    http: reqwest::Client,
    target: Target,
}

impl Client {
    pub(super) fn new(target: Target) -> Result<Self, Error> {
        mcpproxy_auth::install_crypto_providers();
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

    /// Sends `sql` with ClickHouse's limits: `max_rows` rows, `max_bytes` bytes (0: none),
    /// the whole result buffered first when `buffered`. An error status is an error. Past the
    /// limits a buffered answer is an error (`throw`); a streamed one just ends (`break`,
    /// with more than `max_rows` rows), since ClickHouse may cut the connection mid-stream
    /// right after an error, before the client has read it: the reader counts the rows.
    async fn send(
        &self,
        sql: &str,
        max_rows: usize,
        max_bytes: usize,
        buffered: bool,
    ) -> Result<reqwest::Response, Error> {
        let t = &self.target;
        let seconds = t.timeout.as_secs().max(1).to_string();
        let mut request = self
            .http
            .post(t.url.clone())
            .query(&[
                ("readonly", "2"),
                ("wait_end_of_query", if buffered { "1" } else { "0" }),
                ("max_result_rows", &max_rows.to_string()),
                ("max_result_bytes", &max_bytes.to_string()),
                (
                    "result_overflow_mode",
                    if buffered { "throw" } else { "break" },
                ),
                ("max_execution_time", &seconds),
            ])
            .body(sql.to_owned());
        if let Some((user, password)) = &t.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let mut response = request.send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(e))? {
            let room = MAX_BYTES.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room <= chunk.len() {
                break;
            }
        }
        Err(self.answered(status.as_u16(), &String::from_utf8_lossy(&body)))
    }

    fn unreachable(&self, e: reqwest::Error) -> Error {
        // A read cut by the client's own deadline is no sign that ClickHouse is down.
        if e.is_timeout() {
            return Error::TimedOut {
                url: self.target.shown.clone(),
                sink: self.target.sink.clone(),
                ms: self.target.timeout.as_millis(),
            };
        }
        Error::Unreachable {
            url: self.target.shown.clone(),
            sink: self.target.sink.clone(),
            // Without the URL: it is in the message already, masked.
            reason: e.without_url().to_string(),
        }
    }

    /// ClickHouse's error answer as an error saying what to check.
    fn answered(&self, status: u16, text: &str) -> Error {
        if matches!(code(text), Some(396)) {
            return Error::TooMany {
                max: super::reader::MAX_SCAN,
            };
        }
        Error::Answered {
            url: self.target.shown.clone(),
            status,
            message: shown_error(text),
            hint: hint(text, &self.target),
        }
    }

    /// Runs `sql` (at most [`MAX_ROWS`] rows) and returns the answer's text.
    pub(super) async fn run(&self, sql: &str) -> Result<String, Error> {
        let mut response = self.send(sql, MAX_ROWS, MAX_BYTES, true).await?;
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(e))? {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(Error::TooLarge {
                    url: self.target.shown.clone(),
                    sink: self.target.sink.clone(),
                    max_bytes: MAX_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Runs `sql` and calls `line` with each line of the answer as it arrives; an answer of
    /// more than `max_rows` rows is [`Error::TooMany`]. An error ClickHouse appends part-way
    /// is a line that is no row: the caller hands it to [`Client::bad_line`].
    pub(super) async fn stream(
        &self,
        sql: &str,
        max_rows: usize,
        mut line: impl FnMut(&str) -> Result<(), Error>,
    ) -> Result<(), Error> {
        // ClickHouse stops past `max_rows + 1` rows without an error (`break`), so that one
        // row more than allowed says "too many" however the stream ends.
        let mut response = self.send(sql, max_rows.saturating_add(1), 0, false).await?;
        let mut pending: Vec<u8> = Vec::new();
        let mut rows = 0usize;
        let mut each = |bytes: &[u8]| -> Result<(), Error> {
            let text = String::from_utf8_lossy(bytes);
            if text.trim().is_empty() {
                return Ok(());
            }
            rows += 1;
            if rows > max_rows {
                return Err(Error::TooMany { max: max_rows });
            }
            line(&text)
        };
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                // ClickHouse may close the connection right after the error it appends
                // part-way, before the stream's proper end: the error, not the cut, is the
                // answer.
                Err(e) => {
                    return Err(match appended_error_in(&pending) {
                        Some(error) => self.answered(200, &error),
                        None => self.unreachable(e),
                    });
                }
            };
            pending.extend_from_slice(&chunk);
            let mut start = 0;
            while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
                each(&pending[start..start + end])?;
                start += end + 1;
            }
            pending.drain(..start);
            if pending.len() > MAX_LINE {
                return Err(Error::TooLarge {
                    url: self.target.shown.clone(),
                    sink: self.target.sink.clone(),
                    max_bytes: MAX_LINE,
                });
            }
        }
        each(&pending)
    }
}

impl Client {
    /// The error for a line of an answer that is not a row (`reason`: why it was not): the
    /// error ClickHouse appended part-way, if it is one, else an unreadable answer.
    pub(super) fn bad_line(&self, line: &str, reason: String) -> Error {
        match appended_error(line) {
            Some(at) => self.answered(200, &line[at..]),
            None => Error::Unreadable {
                url: self.target.shown.clone(),
                sink: self.target.sink.clone(),
                reason,
            },
        }
    }
}

/// Where an error ClickHouse appended to a streamed answer starts in `line`, if it holds one
/// (`Code: 396, e.displayText() = DB::Exception: ...`, after the rows sent before it).
fn appended_error(line: &str) -> Option<usize> {
    let at = line.find("Code: ")?;
    let rest = &line[at..];
    (code(rest).is_some() && rest.contains("Exception")).then_some(at)
}

/// The error ClickHouse appended to a stream cut short, if the unfinished last line of what
/// arrived (`pending`) holds one.
fn appended_error_in(pending: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(pending);
    appended_error(&text).map(|at| text[at..].to_owned())
}

/// ClickHouse's error text, cut and escaped (it may quote what the statement held).
fn shown_error(text: &str) -> String {
    let text = text.trim();
    let cut: String = text.chars().take(MAX_ERROR_CHARS).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", mcpproxy_support::quote(&cut))
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
    fn an_error_appended_to_a_stream_is_found_after_the_rows() {
        let line = r#"{"id":"01","record":"{}"}Code: 396, e.displayText() = DB::Exception: Limit"#;
        assert_eq!(appended_error(line), Some(25));
        assert_eq!(appended_error(r#"{"id":"01","record":"{}"}"#), None);
    }

    #[test]
    fn an_error_in_the_unfinished_line_of_a_cut_stream_is_found() {
        let pending = br#"{"id":"07","record":"{}"}Code: 396, e.displayText() = DB::Exception: Limit for result exceeded"#;
        assert_eq!(
            appended_error_in(pending).as_deref(),
            Some("Code: 396, e.displayText() = DB::Exception: Limit for result exceeded")
        );
        assert_eq!(appended_error_in(br#"{"id":"07","rec"#), None);
        assert_eq!(appended_error_in(b""), None);
    }

    #[test]
    fn an_error_text_is_cut_and_escaped() {
        let shown = shown_error(&format!("Code: 62, bad\n{}", "x".repeat(1000)));
        assert!(shown.ends_with('…'), "{shown}");
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.chars().count() < MAX_ERROR_CHARS + 20);
    }
}
