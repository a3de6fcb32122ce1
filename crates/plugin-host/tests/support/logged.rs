//! What a plugin's call writes to the proxy's log, captured per thread for tests: one
//! `tracing` subscriber, installed as the global default once, hands each event's message to
//! the capture running on the thread that logged it (plugins run on the thread that calls
//! them). A global subscriber, not `with_default`: a scoped one races with callsites that
//! other tests' threads register meanwhile, and an event can then go unseen. Included with
//! `#[path]` by the crate's unit tests (`host.rs`) and its `tests/wasi_sandbox.rs`.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// The messages logged on this thread since its capture began; `None` outside one.
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runs `run` and returns its value with the messages of the events it logged, in order.
pub(crate) fn capture<T>(run: impl FnOnce() -> T) -> (T, Vec<String>) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Fails only when another global subscriber is set, which nothing in these tests does.
        tracing::subscriber::set_global_default(PerThread)
            .expect("no other global subscriber in these tests");
    });
    CAPTURED.with(|captured| *captured.borrow_mut() = Some(Vec::new()));
    let value = run();
    let lines = CAPTURED.with(|captured| captured.borrow_mut().take());
    (value, lines.unwrap_or_default())
}

/// The subscriber that hands each event to its thread's capture.
struct PerThread;

impl tracing::Subscriber for PerThread {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        CAPTURED.with(|captured| {
            if let Some(lines) = captured.borrow_mut().as_mut() {
                let mut message = Message(String::new());
                event.record(&mut message);
                lines.push(message.0);
            }
        });
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// The `message` field of an event.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}
