//! Starting what the settings ask for: the one before-`main` hook, and [`configure`].
//!
//! Threads (the dump writer, the memory-limit watcher, the leak history's recorder, the OTLP pusher, the HTTP listener's)
//! are never started inside an allocation: a thread started there would be created while the
//! allocator's locks are held, the state the fork rules (`profiler::hooks`) exclude. So they are
//! started here, from the parsed settings, at two moments outside any allocation: before `main`
//! (an ELF constructor, after the profiler's initialisation has read `JEPROF_SHIM` through the
//! settings table) and after [`configure`]. Each start is idempotent and reads its own setting,
//! so starting "everything asked for" twice starts nothing twice.

use crate::api::control::ConfigError;
use crate::base::thread::Guard;
#[cfg(feature = "otlp")]
use crate::profiler::otlp_push;
use crate::profiler::{auto_dump, init, leak_history, near_limit, settings_table};

/// Applies settings in the `JEPROF_SHIM` syntax at run time, after the environment's, then starts
/// the threads they ask for.
pub(crate) fn configure(spec: &str) -> Result<(), ConfigError> {
    let result = {
        let _guard = Guard::enter();
        init::ensure_init();
        settings_table::apply(spec)
    };
    start_what_the_settings_ask();
    result
}

/// Starts every thread the settings in effect ask for and that is not running yet: the dump
/// writer (`dump_interval`, `dump_peak`), the memory-limit watcher (`dump_near_limit`), the leak
/// history's recorder (`leak_interval`, when given: at its default it waits for its first
/// reader), the OTLP pusher (`otlp_push`) and the HTTP listener (`http`, with the recorder its
/// endpoints read). Wakes those running, so they read changed settings at once. Outside any
/// allocation only.
fn start_what_the_settings_ask() {
    {
        let _guard = Guard::enter();
        auto_dump::ensure_writer();
        near_limit::ensure_watcher();
        leak_history::settings_changed();
        #[cfg(feature = "otlp")]
        otlp_push::settings_changed();
    }
    #[cfg(feature = "http")]
    crate::http::listener_for_settings();
}

/// Before `main`: initialises the profiler (which reads `JEPROF_SHIM` through the settings table,
/// unless an earlier allocation did) and starts what the parsed settings ask for.
extern "C" fn start_before_main() {
    init::ensure_init();
    start_what_the_settings_ask();
}

/// Runs [`start_before_main`] as an ELF constructor, the only one of the crate. Sound before
/// `main`: it uses only `getenv`, the profiler's own initialisation (which the first allocation
/// may run as early) and `std::thread::spawn`, none of which needs `main`'s runtime set-up on
/// Linux.
#[used]
#[link_section = ".init_array"]
static START_BEFORE_MAIN: extern "C" fn() = start_before_main;
