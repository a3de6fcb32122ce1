//! The tool search index behind `retrieve_tools`.
//!
//! This module owns an in-RAM tantivy index holding one document per
//! upstream tool (server name, tool name, description, parameter names), the
//! text analysis used to fill and query it, and BM25 ranking over it. It
//! knows nothing about MCP transports or upstream lifecycles: callers push a
//! server's whole tool list with [`ToolIndex::replace_server`] and drop it
//! with [`ToolIndex::remove_server`].
//!
//! Queries are free text from users and agents. They are never parsed as
//! query syntax: the text is run through the same analyzers as the indexed
//! fields and turned into a boolean "should" query of term queries, so no
//! input can make [`ToolIndex::search`] fail or panic.

mod analysis;
mod by_ord;
mod tool_index;

pub use tool_index::{Error, ToolDoc, ToolIndex, param_names};
