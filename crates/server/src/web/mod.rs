//! The page at `/`: upstream servers with their state and approval buttons, a chart of the
//! last hour's calls by variant and status, the live activity feed with filters, and one
//! record's detail. A static page (HTML, one script, one style sheet, embedded in the
//! binary; no CDN) that reads everything through the REST API with the key the user enters
//! once, so the page itself holds no data and needs no key to load.
//!
//! Served with a Content-Security-Policy that allows only this origin's script, style and
//! API (no inline script, no framing), and behind the same Host/Origin rule as `/mcp` and
//! `/api/v1`. The script sets record text with `textContent` only.

mod page;

pub use page::router;
