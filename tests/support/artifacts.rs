//! The compiled test plugins: where the `plugin-artifacts` crate's build script put them
//! (built from source: the defaults and the test fixtures), and their bytes.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

pub(crate) use plugin_artifacts::{artifact, artifact_bytes};
