//! The proxy core that the MCP server, the REST API and the CLI share: resolve a
//! `server:tool`, judge the call with the policy pipeline, send it upstream; and search the
//! tool index with each hit's effective annotations and `call_with` advice.

mod approvals;
mod catalog;
mod code;
mod direct;
mod egress;
mod forwarded;
mod guard;
mod limits;
mod listen;
mod record;
mod report;
mod request;
mod review;
mod scoped;
mod service;
mod skills;
mod tasks;
mod upstream_call;
mod withheld;

pub use approvals::{Answer, AnswerError, Approvals, PendingApproval};
pub use catalog::{CatalogError, Scope, SubscriptionMethod};
pub use code::{CodeExecutor, CodeReport, parse_code_request};
pub use limits::{Limited, RATE_LIMITED_CODE, RateLimits};
pub use record::ActivitySettings;
pub use report::{CallReport, Ending};
pub use request::CallInput;
pub use request::{parse_call, split_name};
use service::Judged;
pub use service::{CallContext, CallOutcome, Proxy, RetrievedTool};
pub use tasks::shown_task_id;
pub use withheld::Withheld;
