//! Who is asking: the identity of the client whose call (or answer) is being judged, and
//! the scope that makes it visible to the stages judging it.
//!
//! The proxy knows the caller (a logged-in client's subject and groups); a plugin asks for
//! it through the `host.caller` import of the WIT contract. The stage traits
//! ([`crate::Validator`], [`crate::ResultGuard`]) and [`crate::CallRequest`] stay as they
//! are, so every stage and every existing plugin keeps its shape: the proxy runs a
//! judgement inside [`with_caller`], on the thread that judges (judging is synchronous),
//! and the plugin host reads [`current_caller`] when a validator or a guard starts.

use std::cell::RefCell;
use std::sync::Arc;

/// A logged-in caller as plugins see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The access token's subject.
    pub subject: String,
    /// The caller's groups or roles, from the claims the operator configured.
    pub groups: Vec<String>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Caller>>> = const { RefCell::new(None) };
}

/// Runs `judge` with `caller` as the current caller of this thread; the previous one is
/// back when `judge` returns (or unwinds).
pub fn with_caller<R>(caller: Option<Arc<Caller>>, judge: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<Caller>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|current| *current.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|current| current.replace(caller));
    let _restore = Restore(previous);
    judge()
}

/// The caller of the judgement running on this thread, if it has one.
pub fn current_caller() -> Option<Arc<Caller>> {
    CURRENT.with(|current| current.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(subject: &str) -> Option<Arc<Caller>> {
        Some(Arc::new(Caller {
            subject: subject.to_owned(),
            groups: vec!["sre".to_owned()],
        }))
    }

    #[test]
    fn the_caller_is_seen_inside_the_scope_only() {
        assert_eq!(current_caller(), None);
        let seen = with_caller(caller("alice"), || {
            let outer = current_caller().map(|c| c.subject.clone());
            let inner = with_caller(caller("bob"), || {
                current_caller().map(|c| c.subject.clone())
            });
            (outer, inner, current_caller().map(|c| c.subject.clone()))
        });
        assert_eq!(
            seen,
            (
                Some("alice".into()),
                Some("bob".into()),
                Some("alice".into())
            )
        );
        assert_eq!(current_caller(), None);
    }

    #[test]
    fn an_unwinding_judgement_restores_the_previous_caller() {
        let unwound = std::panic::catch_unwind(|| with_caller(caller("alice"), || panic!("boom")));
        assert!(unwound.is_err());
        assert_eq!(current_caller(), None);
    }
}
