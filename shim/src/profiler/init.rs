//! Initialisation, once per process at first use: `JEPROF_SHIM`, the thread-exit key, the fork
//! and exit hooks.

use std::sync::atomic::{AtomicU8, Ordering};

use super::auto_dump;
use super::control::{self, ConfigError};
use super::hooks;
use super::leak_history;
#[cfg(feature = "otlp")]
use super::otlp_push;
use crate::base::thread::Guard;
use crate::parts::thread_totals;

static INIT_STATE: AtomicU8 = AtomicU8::new(0);
const INIT_RUNNING: u8 = 1;
const INIT_DONE: u8 = 2;

/// Reads the environment and installs the fork and exit hooks, once per process, at first use.
#[inline]
pub(crate) fn ensure_init() {
    // Ordering: Acquire pairs with the Release store of INIT_DONE in `init`: a thread that sees
    // DONE sees the configuration it applied.
    if INIT_STATE.load(Ordering::Acquire) != INIT_DONE {
        init();
    }
}

#[cold]
fn init() {
    // Ordering: the compare-exchange only elects the initialising thread; what it publishes is
    // published by the Release store below. Others go on with the defaults meanwhile.
    if INIT_STATE
        .compare_exchange(0, INIT_RUNNING, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let _guard = Guard::enter();
    // A use of the constructor's static from code that is always linked: an object file of the
    // crate's archive that nothing referenced would not be linked in, constructor and all.
    std::hint::black_box(&START_WRITER_BEFORE_MAIN);
    control::apply_environment();
    thread_totals::create_exit_key();
    hooks::install();
    // Ordering: Release pairs with the Acquire load in `ensure_init`.
    INIT_STATE.store(INIT_DONE, Ordering::Release);
}

/// Applies settings in the `JEPROF_SHIM` syntax at run time ([`crate::configure`]), after the
/// environment's.
pub(crate) fn configure(spec: &str) -> Result<(), ConfigError> {
    let _guard = Guard::enter();
    ensure_init();
    let result = control::apply(spec);
    // Outside any allocation: the place to start the threads a new setting may ask for.
    auto_dump::ensure_writer();
    leak_history::settings_changed();
    #[cfg(feature = "otlp")]
    otlp_push::settings_changed();
    result
}

/// Before `main`, when `JEPROF_SHIM` asks for automatic dumps: reads it and starts the writer
/// thread, which must not be started inside the allocation that would otherwise read the
/// environment first. Other settings are still read at first use.
extern "C" fn start_writer_if_the_environment_asks() {
    // SAFETY: the name is a NUL-terminated C string; getenv returns NULL or a pointer into the
    // environment, valid while nothing calls setenv (nothing else runs this early).
    let raw = unsafe { libc::getenv(c"JEPROF_SHIM".as_ptr()) };
    if raw.is_null() {
        return;
    }
    // SAFETY: non-null getenv results are NUL-terminated strings.
    let value = unsafe { std::ffi::CStr::from_ptr(raw) }.to_bytes();
    let asks = |key: &[u8]| value.windows(key.len()).any(|w| w == key);
    if asks(b"dump_interval") || asks(b"dump_peak") {
        ensure_init();
        let _guard = Guard::enter();
        auto_dump::ensure_writer();
    }
}

/// Before `main`: starts the leak history's recorder, on by default (`leak_interval`), and the
/// OTLP pusher when `otlp_push` asks for it, which must not be started inside an allocation
/// either. Reads `JEPROF_SHIM` first, so that `leak_interval:0` there starts nothing.
extern "C" fn start_threads_before_main() {
    start_writer_if_the_environment_asks();
    ensure_init();
    let _guard = Guard::enter();
    leak_history::ensure_recorder();
    #[cfg(feature = "otlp")]
    otlp_push::ensure_pusher();
}

/// Runs [`start_threads_before_main`] as an ELF constructor. Sound before `main`: it uses only
/// `getenv`, the profiler's own initialisation (which the first allocation may run as early) and
/// `std::thread::spawn`, none of which needs `main`'s runtime set-up on Linux.
#[used]
#[link_section = ".init_array"]
static START_WRITER_BEFORE_MAIN: extern "C" fn() = start_threads_before_main;
