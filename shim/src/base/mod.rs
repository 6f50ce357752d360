//! The bottom layer: state and primitives that import nothing of the crate.
//!
//! - [`thread`]: everything kept per thread (one cache line), and the re-entrancy guard;
//! - [`settings`]: the settings' atomics and their getters and setters;
//! - [`sync`]: the lock helper, the background threads' futex wake, cache-line padding, the
//!   thread-exit key, and the traits the loom models instantiate;
//! - [`hash`]: the tables' hasher;
//! - [`loader`]: the walk of the loaded objects and the unwinder's lock, both held off `fork`.

pub(crate) mod hash;
pub(crate) mod loader;
pub(crate) mod settings;
pub(crate) mod sync;
pub(crate) mod thread;
