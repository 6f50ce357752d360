//! Initialisation, once per process at first use: `JEPROF_SHIM` (read through the settings
//! table), the thread-exit key, the fork and exit hooks. Starting threads is not done here: it
//! must happen outside any allocation (`crate::startup`, before `main` and after `configure`).

use std::sync::atomic::{AtomicU8, Ordering};

use super::hooks;
use super::settings_table;
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
    settings_table::read_environment();
    thread_totals::create_exit_key();
    hooks::install();
    // Ordering: Release pairs with the Acquire load in `ensure_init`.
    INIT_STATE.store(INIT_DONE, Ordering::Release);
}
