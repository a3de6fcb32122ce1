//! Locks that outlive a panic: the upstream's maps and slots are replaced whole, never left
//! half-written, so a lock poisoned by a panic elsewhere is taken as it is. One place to
//! change if the workspace gets a helper of its own.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Reads `lock`, poisoned or not.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `lock`, poisoned or not.
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, RwLock};

    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_gives_its_value() {
        let map = Arc::new(RwLock::new(vec![1]));
        let slot = Arc::new(Mutex::new(Some(2)));
        let (held_map, held_slot) = (map.clone(), slot.clone());
        let panicked = std::thread::spawn(move || {
            let _map = held_map.write().unwrap();
            let _slot = held_slot.lock().unwrap();
            panic!("poisons both");
        })
        .join();
        assert!(panicked.is_err());
        assert!(map.is_poisoned() && slot.is_poisoned());
        assert_eq!(*read(&map), [1]);
        write(&map).push(3);
        assert_eq!(*read(&map), [1, 3]);
        assert_eq!(lock(&slot).take(), Some(2));
    }
}
