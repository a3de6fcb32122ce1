//! Locks that outlive a panic. A `std::sync` lock is poisoned when a thread panics while
//! holding it; every lock in mcpproxy guards plain data that each critical section leaves
//! consistent at every step (maps, counters, queues), so a panic elsewhere must not turn into
//! a second panic, or a refused call, for everyone who takes the lock afterwards. These take
//! the lock and recover the guard from a poisoned one.
//!
//! The only module of the workspace allowed the bare calls (`clippy.toml`'s
//! `disallowed-methods`): everywhere else goes through these three.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, recovering from poison.
#[allow(clippy::disallowed_methods, reason = "the poison-free wrapper itself")]
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `lock`, recovering from poison.
#[allow(clippy::disallowed_methods, reason = "the poison-free wrapper itself")]
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `lock`, recovering from poison.
#[allow(clippy::disallowed_methods, reason = "the poison-free wrapper itself")]
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "poisons the locks by hand")]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _g = m.lock().unwrap();
            let _w = r.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 2);
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 3);
    }
}
