//! The plugin author's kit, which `mcpproxy plugins` serves: conformance suites for a
//! validator or an annotator (`suite`: the intent matrix and the name-prefix table), an
//! author's own cases (`cases`, and `guard_cases` for result guards), and the starting points
//! (`template`: `plugins wit` writes the WIT contract, `plugins new` a project in Rust, C,
//! JavaScript or Python).
//!
//! It runs components through `mcpproxy-plugin-host` like any caller of the runtime, and
//! the runtime knows nothing of it: the proxy that serves calls never loads this code's
//! expectations, and an author's tools change without touching what judges calls.

pub mod cases;
pub mod guard_cases;
pub mod suite;
pub mod template;
