//! Secrets kept out of everything mcpproxy shows: the log, the CLI, the REST API (and the
//! page that renders it), the `upstream_servers` tool, activity records and metrics.
//!
//! A launch spec holds secrets in three places: an upstream's URL (user info, query values,
//! the fragment), its arguments (`--token VALUE`, `API_KEY=VALUE`, a bare `ghp_...`), and
//! free text that quotes either (connection errors). This module owns how each is masked:
//! [`mask_url`], [`mask_args`] and [`mask_text`] (in `mask`); a JSON value's strings (a call's
//! arguments in a record) as free text, [`mask_json`]. Every hidden value is shown
//! as [`MASK`](mask::MASK).
//!
//! What looks secret:
//! - a *name* (a flag, `KEY=`, a query key, a header) containing `password`, `passwd`,
//!   `passphrase`, `token`, `secret`, `apikey`, `authorization`, `cookie`, `privatekey`,
//!   `credential` or `accesskey`, or ending in `key` or `auth` (compared without case, `-`
//!   or `_`); names of things that are not the secret itself (`--token-file`,
//!   `--max-tokens`, `--no-auth`) are not;
//! - a *value* with a known token prefix ([`TOKEN_PREFIXES`](recognise::TOKEN_PREFIXES):
//!   OpenAI/Anthropic `sk-`, Stripe `sk_live_`, GitHub `ghp_`, GitLab `glpat-`, Slack
//!   `xoxb-`, ...), an AWS access key id (`AKIA`/`ASIA` and 16 upper-case letters or
//!   digits), a JWT (`eyJ...` in three base64url segments), or a long random-looking string
//!   ([`is_high_entropy`](recognise::is_high_entropy)).
//!
//! How it is recognised is `recognise`'s.
//!
//! This module imports nothing of the crate: it sits below everything that shows a spec.

mod mask;
mod recognise;

pub use mask::{
    MASK, MaskingWriter, mask_args, mask_json, mask_text, mask_text_with_url, mask_url,
};
