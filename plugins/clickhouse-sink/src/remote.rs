//! Talking to ClickHouse's HTTP interface: where a statement goes, how the user is sent, and
//! what an error answer means (with a hint the operator can act on).

use crate::http::Target;

/// How much of an error body goes into a message.
const EXCERPT_BYTES: usize = 600;

/// The request target for `sql`: the url setting's path with `query=<sql>` added to its
/// query string.
pub(crate) fn statement_target(base: &Target, sql: &str) -> Target {
    let sep = if base.path_and_query.contains('?') {
        '&'
    } else {
        '?'
    };
    Target {
        path_and_query: format!("{}{sep}query={}", base.path_and_query, percent_encode(sql)),
        ..base.clone()
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `authorization` header value for HTTP Basic auth.
pub(crate) fn basic_auth(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What an error answer is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Code 60, UNKNOWN_TABLE.
    MissingTable,
    /// Code 81, UNKNOWN_DATABASE.
    MissingDatabase,
    /// Unknown user, wrong or missing password.
    Credentials,
    /// Read-only user or no grant.
    Permission,
    /// The rows do not fit the table's columns.
    Columns,
    /// The table lacks a column this version writes (code 117, "Unknown field"): it was
    /// made by an older clickhouse-sink, before [`ADDED_COLUMNS`](crate::schema::ADDED_COLUMNS).
    OldTable,
    /// Code 44: the column to add is there already.
    ColumnExists,
    /// Limits, memory, too many parts: passes by itself.
    Busy,
    /// The answer is not ClickHouse's.
    NotClickHouse,
    Other,
}

/// A non-2xx answer from ClickHouse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub status: u16,
    /// ClickHouse's error code (`Code: NN`), if the body has one.
    pub code: Option<u32>,
    pub problem: Problem,
    /// The body, on one line and cut short.
    pub text: String,
}

impl Failure {
    /// Reads an error answer: `status` and (the start of) its body.
    pub(crate) fn new(status: u16, body: &[u8]) -> Failure {
        let text = crate::http::excerpt(body, EXCERPT_BYTES);
        let code = error_code(&text);
        let problem = match code {
            Some(60) => Problem::MissingTable,
            Some(81) => Problem::MissingDatabase,
            // UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, IP_ADDRESS_NOT_ALLOWED,
            // AUTHENTICATION_FAILED
            Some(192..=195) | Some(516) => Problem::Credentials,
            // READONLY, ACCESS_DENIED, DATABASE_ACCESS_DENIED
            Some(164) | Some(497) | Some(291) => Problem::Permission,
            Some(117) if unknown_field(&text).is_some_and(is_added_column) => Problem::OldTable,
            Some(44) => Problem::ColumnExists,
            // NO_SUCH_COLUMN_IN_TABLE, CANNOT_PARSE_*, TYPE_MISMATCH, INCORRECT_DATA,
            // THERE_IS_NO_COLUMN
            Some(16) | Some(26) | Some(27) | Some(53) | Some(117) | Some(8) => Problem::Columns,
            // TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED, TOO_MANY_PARTS, TIMEOUT_EXCEEDED,
            // QUOTA_EXPIRED (QUOTA_EXCEEDED)
            Some(202) | Some(241) | Some(252) | Some(159) | Some(201) => Problem::Busy,
            Some(_) => Problem::Other,
            None if status == 401 || status == 403 => Problem::Credentials,
            None if matches!(status, 502..=504) => Problem::Busy,
            None => Problem::NotClickHouse,
        };
        Failure {
            status,
            code,
            problem,
            text,
        }
    }

    /// Whether creating the database and table (then inserting again) can fix this.
    pub(crate) fn wants_table(&self) -> bool {
        matches!(
            self.problem,
            Problem::MissingTable | Problem::MissingDatabase
        )
    }

    /// The sentence for `deliver`'s error. `doing` says what was attempted (e.g. "inserting
    /// 1000 records into default.t").
    pub(crate) fn message(&self, target: &Target, doing: &str, ctx: &Context) -> String {
        let db = ctx.database;
        let table = ctx.table;
        let hint = match self.problem {
            Problem::MissingTable if ctx.create_table => {
                format!(
                    "the table was just created, yet {db}.{table} is still missing; check the server"
                )
            }
            Problem::MissingTable => {
                format!("set create_table: true or create {db}.{table} with clickhouse-sink's DDL")
            }
            Problem::MissingDatabase if ctx.create_table => {
                format!("could not create database {db}; create it (CREATE DATABASE {db})")
            }
            Problem::MissingDatabase => format!(
                "create it (CREATE DATABASE {db}), or set create_table: true, or point the \
                 database setting at an existing one"
            ),
            Problem::Credentials => "check the user and password settings".to_string(),
            Problem::Permission => format!(
                "the ClickHouse user {} may not do this: grant it INSERT on {db}.{table} (and \
                 CREATE for create_table), or use another user",
                ctx.user.unwrap_or("default")
            ),
            Problem::OldTable if ctx.create_table => format!(
                "{db}.{table} lacks the chain columns and adding them failed; add them by hand: \
                 {}",
                added_columns_ddl(db, table)
            ),
            Problem::OldTable => format!(
                "{db}.{table} was made by an older clickhouse-sink and lacks the columns this \
                 one writes; add them ({}) or set create_table: true, which adds them",
                added_columns_ddl(db, table)
            ),
            Problem::ColumnExists => "see ClickHouse's message".to_string(),
            Problem::Columns => format!(
                "the columns of {db}.{table} do not match what clickhouse-sink writes; rename or \
                 drop that table (create_table makes a new one) or set table to a new name"
            ),
            Problem::Busy => "ClickHouse is overloaded or over a limit; the batch will be \
                              retried"
                .to_string(),
            Problem::NotClickHouse => "is url the address of ClickHouse's HTTP interface \
                                       (port 8123 by default, 8443 with TLS)?"
                .to_string(),
            Problem::Other => "see ClickHouse's message".to_string(),
        };
        format!(
            "ClickHouse at {} answered {} when {doing}: {} — {hint}",
            target.origin(),
            self.status,
            self.text
        )
    }
}

/// The statements that give an older table the columns this version writes, joined by `; `.
fn added_columns_ddl(database: &str, table: &str) -> String {
    crate::schema::ADDED_COLUMNS
        .iter()
        .map(|column| crate::schema::add_column(database, table, *column))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the message needs to know about the settings.
pub(crate) struct Context<'a> {
    pub database: &'a str,
    pub table: &'a str,
    pub user: Option<&'a str>,
    pub create_table: bool,
}

/// The field ClickHouse names in "Unknown field found while parsing JSONEachRow format:
/// NAME: (at row 1)".
fn unknown_field(text: &str) -> Option<&str> {
    const SAID: &str = "Unknown field found while parsing JSONEachRow format: ";
    let rest = &text[text.find(SAID)? + SAID.len()..];
    rest.split(':').next().map(str::trim)
}

/// Whether `name` is one of the columns added after the table's first version.
fn is_added_column(name: &str) -> bool {
    crate::schema::ADDED_COLUMNS.iter().any(|(n, _)| *n == name)
}

/// `Code: 60, e.displayText() = ...` (18.x) or `Code: 60. DB::Exception: ...` (later).
fn error_code(text: &str) -> Option<u32> {
    let at = text.find("Code: ")?;
    let digits: String = text[at + 6..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("url", "http://127.0.0.1:8123").unwrap()
    }

    fn ctx(create_table: bool) -> Context<'static> {
        Context {
            database: "default",
            table: "x",
            user: None,
            create_table,
        }
    }

    #[test]
    fn statements_go_in_the_query_string() {
        let t = statement_target(&target(), "INSERT INTO `default`.`t` FORMAT JSONEachRow");
        assert_eq!(
            t.url(),
            "http://127.0.0.1:8123/?query=INSERT%20INTO%20%60default%60.%60t%60%20FORMAT%20JSONEachRow"
        );
        let base = Target::parse("url", "http://h/ch?database=x").unwrap();
        assert_eq!(
            statement_target(&base, "SELECT 1").path_and_query,
            "/ch?database=x&query=SELECT%201"
        );
        assert_eq!(percent_encode("é(a)\n"), "%C3%A9%28a%29%0A");
    }

    #[test]
    fn basic_auth_is_base64() {
        assert_eq!(
            basic_auth("sinker", "s3cret pass"),
            "Basic c2lua2VyOnMzY3JldCBwYXNz"
        );
        assert_eq!(basic_auth("a", ""), "Basic YTo=");
        assert_eq!(basic_auth("ab", ""), "Basic YWI6");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn reads_clickhouse_18_errors() {
        // As ClickHouse 18.16.1 answers.
        let body = b"Code: 60, e.displayText() = DB::Exception: Table default.x doesn't exist., \
                     e.what() = DB::Exception\n";
        let f = Failure::new(404, body);
        assert_eq!((f.code, f.problem), (Some(60), Problem::MissingTable));
        assert!(f.wants_table());
        assert_eq!(
            f.message(&target(), "inserting 3 records into default.x", &ctx(false)),
            "ClickHouse at http://127.0.0.1:8123 answered 404 when inserting 3 records into \
             default.x: Code: 60, e.displayText() = DB::Exception: Table default.x doesn't \
             exist., e.what() = DB::Exception — set create_table: true or create default.x \
             with clickhouse-sink's DDL"
        );
        let f = Failure::new(
            404,
            b"Code: 81, e.displayText() = DB::Exception: Database nodb doesn't exist",
        );
        assert_eq!(f.problem, Problem::MissingDatabase);
        assert!(f.wants_table());
        let f = Failure::new(
            401,
            b"Code: 193, e.displayText() = DB::Exception: Wrong password for user sinker",
        );
        assert_eq!(f.problem, Problem::Credentials);
        assert!(!f.wants_table());
        assert!(
            f.message(&target(), "x", &ctx(true))
                .ends_with("check the user and password settings")
        );
        let f = Failure::new(
            500,
            b"Code: 164, e.displayText() = DB::Exception: Cannot insert into table in readonly mode",
        );
        assert_eq!(f.problem, Problem::Permission);
        let f = Failure::new(
            500,
            b"Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing \
              JSONEachRow format: dry_run: (at row 1)\n, e.what() = DB::Exception\n",
        );
        assert_eq!(f.problem, Problem::Columns);
        assert!(
            f.message(&target(), "x", &ctx(true))
                .contains("do not match")
        );
        // A table from before the chain columns: the sink adds them (or says how).
        let f = Failure::new(
            500,
            b"Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing \
              JSONEachRow format: seq: (at row 1)\n, e.what() = DB::Exception\n",
        );
        assert_eq!(f.problem, Problem::OldTable);
        let message = f.message(&target(), "x", &ctx(false));
        assert!(
            message.ends_with(
                "add them (ALTER TABLE `default`.`x` ADD COLUMN `replica` String; ALTER TABLE \
                 `default`.`x` ADD COLUMN `seq` UInt64; ALTER TABLE `default`.`x` ADD COLUMN `prev` \
                 String; ALTER TABLE `default`.`x` ADD COLUMN `hash` String) or set create_table: \
                 true, which adds them"
            ),
            "{message}"
        );
        let f = Failure::new(
            500,
            b"Code: 44, e.displayText() = DB::Exception: Cannot add column seq: column with \
              this name already exists, e.what() = DB::Exception",
        );
        assert_eq!(f.problem, Problem::ColumnExists);
    }

    #[test]
    fn reads_later_errors_and_foreign_answers() {
        let f = Failure::new(
            404,
            b"Code: 60. DB::Exception: Table default.x does not exist. (UNKNOWN_TABLE) (version 24.3.1.1)",
        );
        assert_eq!((f.code, f.problem), (Some(60), Problem::MissingTable));
        let f = Failure::new(404, b"<html>Not Found</html>");
        assert_eq!((f.code, f.problem), (None, Problem::NotClickHouse));
        assert!(f.message(&target(), "x", &ctx(true)).contains("port 8123"));
        assert_eq!(Failure::new(503, b"").problem, Problem::Busy);
        assert_eq!(Failure::new(503, b"").text, "(empty body)");
    }
}
