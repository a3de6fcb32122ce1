//! The warm instances of a plugin that reuses them (`reuse_instance`): taken by a call,
//! returned after a call that ended normally, dropped after a fault.

use std::sync::Mutex;

use wasmtime::Store;

use super::host::PluginCtx;

/// Idle warm instances kept per plugin when it reuses instances.
pub(crate) const MAX_WARM_INSTANCES: usize = 4;

/// The warm instances of a plugin that reuses them: each call takes one (or instantiates a
/// new one when none is idle, so concurrent calls never wait for each other), and puts it
/// back after a call that returned normally, up to [`MAX_WARM_INSTANCES`]. An instance
/// whose call faulted is dropped: after a trap an instance refuses further calls, and its
/// state is suspect anyway.
pub(super) struct WarmPool<B> {
    idle: Mutex<Vec<Warm<B>>>,
}

/// One live instance: its store (memory, limiter, context) and its export bindings.
pub(super) struct Warm<B> {
    pub(super) store: Store<PluginCtx>,
    pub(super) bindings: B,
}

impl<B> WarmPool<B> {
    pub(super) fn new() -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Warm<B>>> {
        mcpproxy_support::lock(&self.idle)
    }

    pub(super) fn take(&self) -> Option<Warm<B>> {
        self.idle().pop()
    }

    pub(super) fn put(&self, warm: Warm<B>) {
        let mut idle = self.idle();
        if idle.len() < MAX_WARM_INSTANCES {
            idle.push(warm);
        }
    }

    pub(super) fn clear(&mut self) {
        self.idle
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}
