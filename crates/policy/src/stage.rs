//! The two kinds of stage the pipeline runs, as traits: an [`Annotator`] says what an
//! unannotated tool does, a [`Validator`] judges a call. The plugin host implements them
//! for WebAssembly components; tests implement them in memory.

use super::types::{CallRequest, Inference, Tool, Verdict};

/// Infers annotations and a safety class for a tool.
pub trait Annotator: Send + Sync {
    /// The name records and messages use for this stage.
    fn name(&self) -> &str;
    /// `Ok(None)` when it has nothing to say about the tool.
    fn infer(&self, tool: &Tool) -> Result<Option<Inference>, Fault>;
    /// Whether it answers in microseconds, always: cheap enough to run on the thread that
    /// serves the call instead of handing it to a blocking thread (see [`Pipeline::is_quick`]).
    ///
    /// [`Pipeline::is_quick`]: super::Pipeline::is_quick
    fn is_quick(&self) -> bool {
        false
    }
    /// Whether its answer depends on nothing but the tool (and settings fixed for its life):
    /// the same tool always gets the same inference, so the pipeline may remember it instead
    /// of asking again (see [`Pipeline::annotate`]).
    ///
    /// [`Pipeline::annotate`]: super::Pipeline::annotate
    fn is_pure(&self) -> bool {
        false
    }
}

/// Decides whether a call may go through.
pub trait Validator: Send + Sync {
    /// The name records and messages use for this stage.
    fn name(&self) -> &str;
    fn validate(&self, request: &CallRequest) -> Result<Verdict, Fault>;
    /// As [`Annotator::is_quick`].
    fn is_quick(&self) -> bool {
        false
    }
}

/// A stage that failed to answer (a plugin that trapped, overran its deadline or its
/// memory): the pipeline rejects the call, naming the stage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Fault {
    /// The stage's name.
    pub stage: String,
    /// What happened, as a full sentence fragment, e.g. `validator plugin 'x' trapped: ...`.
    pub detail: String,
    pub kind: FaultKind,
}

/// What kind of failure a [`Fault`] is (a metric label, and the wording of the rejection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The stage ran past its deadline.
    Deadline,
    /// The stage went over its memory cap.
    Memory,
    /// The stage trapped (crashed).
    Trap,
    /// The stage could not be started.
    Start,
    /// The stage could not run at all because the proxy is overloaded (no fault of the
    /// stage): the call is refused all the same, with a message that says so.
    Overloaded,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deadline => "deadline",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::Start => "start",
            Self::Overloaded => "overloaded",
        }
    }
}
