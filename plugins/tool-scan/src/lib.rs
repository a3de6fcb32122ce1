//! `tool-scan`: the detectors of the tool scanner as plain Rust on plain types, free of the
//! component bindings so they can be unit-tested natively. Two plugins are built on it:
//! `tool-scanner` (the `scanner-plugin` world, over a server's tools) and `injection-marker`
//! (the `result-guard-plugin` world, over what a tool answered); each converts the WIT types
//! to these and back.
//!
//! For every tool it reads the name, the description and every string in the input schema
//! (values and keys; `$schema`, `$id` and `$ref` values excepted) and reports:
//!
//! | kind | severity | what |
//! |---|---|---|
//! | `hidden-instructions` | danger | `<IMPORTANT>`-style tags, chat-template tokens, HTML comments, and phrases that tell the model to drop its instructions, keep things from the user, read or send something first, or that speak to the model |
//! | `credential-access` | danger | key and credential files (`~/.ssh`, `id_rsa`, `.env`, `mcp.json`, ...), a secret (API key, password, ...) as the object of a verb such as read, send or include, and secret-looking schema properties whose description says to copy them from a file |
//! | `url` | info | each distinct `http(s)://` URL (reserved example domains excepted) |
//! | `email` | info | each distinct e-mail address (example domains excepted) |
//! | `encoded-data` | warning | base64 runs of 40+ characters (mixed case and digits, not plain hex), runs of 6+ `\u`/`\x` escapes; decoded when they decode to text |
//! | `invisible-unicode` | danger | zero-width characters, bidi controls, tag characters, runs of variation selectors, Hangul fillers |
//! | `cross-server-reference` | warning | `server:tool` of another server, or its bare tool name as a whole word (4+ characters, not a common word, not a tool of this server) |
//!
//! Phrases are matched on a normalised copy of the text: lowercased, whitespace runs collapsed,
//! invisible characters dropped, curly quotes and full-width ASCII folded. Details quote at
//! most [`QUOTE_CHARS`] characters of the original text, with control and invisible characters
//! shown as `\u{..}` so a terminal cannot be fooled. One finding per (tool, kind, matched
//! phrase); at most [`MAX_PER_TOOL`] per tool, most severe first, the last one saying how many
//! more there were.
//!
//! Settings (the host's `config()` JSON): `ignore_kinds`, a list of the kinds above to drop.
//! Anything wrong with it yields a single `scanner-error` finding (danger) and no scan.
//!
//! [`QUOTE_CHARS`]: finding::QUOTE_CHARS
//! [`MAX_PER_TOOL`]: finding::MAX_PER_TOOL

#![warn(missing_docs)]

mod base64;
mod collect;
mod credential;
mod cross;
mod driver;
mod escapes;
mod evidence;
mod finding;
mod hidden;
mod invisible;
mod pattern;
mod settings;
mod url_email;

pub use driver::{run, scan};
pub use finding::{Finding, SCANNER_ERROR, Severity, ToolText};
pub use settings::Settings;

#[cfg(test)]
mod tests;
