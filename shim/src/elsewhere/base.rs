//! The bottom layer off Linux: the settings' defaults (Linux's own module, which is plain atomics
//! and constants) and the lock helper.

// Only the defaults, `symbolize` and the service name are read here.
#[allow(dead_code)]
#[path = "../base/settings.rs"]
pub(crate) mod settings;

pub(crate) mod sync {
    //! The lock helper.

    use std::sync::{Mutex, MutexGuard};

    /// Locks a mutex, ignoring poison, as on Linux.
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}
