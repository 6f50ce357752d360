//! The crate on systems other than Linux: the same public items, over a pass-through allocator.
//!
//! The profiler needs Linux: its sampled arena is a jemalloc arena in an address range of its own,
//! stacks are read through `dl_iterate_phdr` and `pthread_getattr_np`, dumps carry
//! `/proc/self/maps`, and its background threads sleep on futexes. Elsewhere `lib.rs` takes the
//! modules it calls (`base`, `parts`, `profiler`, `exact`, `http`, `startup`) from here instead, so its code,
//! and so every public signature, is the same on every target. These modules hold only the
//! functions whose bodies differ: the public types are the crate's one set ([`crate::api`]), and
//! the handles' methods are given here as `impl` blocks on them. What they do here:
//!
//! - [`crate::Profiled`] and [`crate::ExactScopes`] forward every call to the inner allocator: the
//!   sampling countdown never expires, no pointer is in a sampled range;
//! - every call that produces a profile or starts something fails with an error that says so
//!   ([`unsupported`]): `dump*` with [`jeprof_dumpfmt::Error::Unsupported`], `configure` and
//!   `set_service` with a [`crate::ConfigError`], `leak_suspects` with
//!   [`crate::LeakHistoryError::Unsupported`], `scope_report` and `http::serve`
//!   with an [`std::io::ErrorKind::Unsupported`] error, `http::handle` with a 501 response;
//! - the rest are documented no-ops: the setters change nothing, snapshots are empty profiles,
//!   figures are zero, scopes are [`crate::Scope::NONE`].
//!
//! jemalloc is not a dependency here (its C build is Linux-only in `Cargo.toml`).

pub(crate) mod base;
pub(crate) mod exact;
#[cfg(feature = "http")]
pub mod http;
pub(crate) mod parts;
pub(crate) mod profiler;

pub(crate) mod startup {
    //! Nothing starts before `main`; settings are refused.

    use crate::api::control::ConfigError;
    use crate::elsewhere::unsupported;

    /// Refuses `spec` as a whole: no setting has an effect here.
    pub(crate) fn configure(spec: &str) -> Result<(), ConfigError> {
        Err(ConfigError {
            problems: vec![format!("`{spec}`: {}", unsupported("configure"))],
        })
    }
}

/// The message of every refusal: what was asked (`call`, a crate function's name) and why it
/// cannot be done here.
pub(crate) fn unsupported(call: &str) -> String {
    format!(
        "jeprof_shim::{call} is not supported on {}: heap profiling needs Linux (a jemalloc \
         arena for the samples, dl_iterate_phdr, /proc/self/maps); here the allocator only \
         forwards to the one it wraps and takes no samples",
        std::env::consts::OS
    )
}
