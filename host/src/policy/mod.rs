//! The call pipeline and its vocabulary: what a call, a tool and a verdict are, the
//! [`Annotator`] and [`Validator`] stages, and the [`Pipeline`] that combines them into one
//! [`Evaluation`].
//!
//! This is the bottom of the module graph: it imports nothing else of the crate. The plugin
//! host implements the stage traits for WebAssembly components; the activity record and the
//! call report are built from the types here.

mod memo;
mod pipeline;
mod stage;
mod types;

pub use pipeline::{Evaluation, Judgement, Outcome, Pipeline, Warning};
pub use stage::{Annotator, Fault, FaultKind, Validator};
pub use types::*;
