//! Stop points that measure what each part of the sampled path costs, compiled in only with the
//! `cost-breakdown` feature (a normal build folds every check here to `false`).
//!
//! With `JEPROF_SHIM_STOP_AFTER=expiry|capture|arena`, a sample goes only that far: after the
//! countdown expiry and redraw (the allocation then goes to the inner allocator as if unsampled),
//! after the stack capture (likewise), or after the object comes from the sampled arena (it is
//! freed there, but never recorded). The churn bench runs each as a mode of its own, so the cost
//! of every part is a difference of paired ratios, measured end to end: timers inside the path
//! (`rdtsc` with `lfence`) serialise it and put cold-miss costs in the wrong part.

/// A part of the sampled path, in the order it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Expiry,
    Capture,
    Arena,
}

/// True when samples stop right after `part` (only ever with the `cost-breakdown` feature).
#[inline(always)]
pub(crate) fn stops_after(part: Part) -> bool {
    #[cfg(feature = "cost-breakdown")]
    {
        imp::stop_after() == Some(part)
    }
    #[cfg(not(feature = "cost-breakdown"))]
    {
        let _ = part;
        false
    }
}

#[cfg(feature = "cost-breakdown")]
mod imp {
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::Part;

    const UNREAD: u8 = u8::MAX;
    static STOP: AtomicU8 = AtomicU8::new(UNREAD);

    /// The stop point named by `JEPROF_SHIM_STOP_AFTER`, read once (with `getenv`: no allocation,
    /// no lock, usable on the allocation path).
    pub(super) fn stop_after() -> Option<Part> {
        // Ordering: a setting read once per process; a racing first read reads the same value.
        let mut code = STOP.load(Ordering::Relaxed);
        if code == UNREAD {
            // SAFETY: getenv with a NUL-terminated name; the result is NULL or a NUL-terminated
            // string that nothing here modifies.
            let value = unsafe {
                let p = libc::getenv(c"JEPROF_SHIM_STOP_AFTER".as_ptr());
                (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_bytes())
            };
            code = match value {
                Some(b"expiry") => 1,
                Some(b"capture") => 2,
                Some(b"arena") => 3,
                _ => 0,
            };
            // Ordering: as above.
            STOP.store(code, Ordering::Relaxed);
        }
        match code {
            1 => Some(Part::Expiry),
            2 => Some(Part::Capture),
            3 => Some(Part::Arena),
            _ => None,
        }
    }
}
