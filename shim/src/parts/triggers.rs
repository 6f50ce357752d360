//! The process-wide figures the sampled path keeps for automatic dumps and the peak tracker, and
//! the wake-up of the background writer.
//!
//! Only the sampled path (a sample, or the free of a sampled object) touches them, so the fast
//! path is unchanged. Every figure is a sum of sample estimates rounded to whole bytes, and a
//! live sample's record keeps what was added for it, so its free subtracts exactly that.
//!
//! The wake-up is a raw futex on [`PENDING`]: `FUTEX_WAKE` neither allocates nor takes a lock,
//! so an allocating thread may call it from inside `alloc` (re-entrancy: it cannot recurse into
//! the allocator), and it costs a system call only when a request is new.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Estimated bytes allocated since start (sum of sample weights): what `dump_interval` counts.
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
/// Estimated bytes live now (sum of live samples' weights).
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The live figure above which the peak tracker takes a new snapshot (`u64::MAX` while a
/// snapshot is being taken, so that only one thread takes it).
static PEAK_TRIGGER: AtomicU64 = AtomicU64::new(0);

/// Requests for the background writer, one bit each.
pub(crate) static PENDING: AtomicU32 = AtomicU32::new(0);
/// An interval dump is due.
pub(crate) const WANT_INTERVAL: u32 = 1;
/// A peak dump is due.
pub(crate) const WANT_PEAK: u32 = 2;

/// Estimated live bytes now.
pub(crate) fn live_bytes() -> u64 {
    // Ordering: a statistic read on its own.
    LIVE.load(Ordering::Relaxed)
}

/// Estimated bytes allocated since start.
pub(crate) fn allocated_bytes() -> u64 {
    // Ordering: a statistic read on its own.
    ALLOCATED.load(Ordering::Relaxed)
}

/// What a sample adds to the figures, from the `f32` its record keeps ([`counted`]): rounded to
/// whole bytes.
///
/// `⌊x + ½⌋` rather than `round()` (a libm call, about 24 instructions, made twice per sample):
/// the same for every non-negative `f32` (the only values it gets), because an `f32` has 24
/// significant bits, so `x + ½` is exact in an `f64`, and halves round up either way.
///
/// The truncation goes through `i64` below 2^63: one `cvttsd2si`, where a saturating `as u64`
/// costs about fifteen instructions on x86_64 (two conversions, a subtraction and selects for
/// the upper half and the clamps), twice per sample. The rest (2^63 and above, infinity, NaN)
/// takes `as u64` out of line (inlined, the compiler computes both and selects), so the result
/// is `(x + ½) as u64` for every `f32`.
#[inline]
pub(crate) fn weight_bytes(counted: f32) -> u64 {
    /// 2^63, the first value an `i64` cannot hold.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    let x = f64::from(counted) + 0.5;
    if (0.0..I64_END).contains(&x) {
        // SAFETY: 0 ≤ x < 2^63, finite: its truncation is representable in an i64.
        unsafe { x.to_int_unchecked::<i64>() as u64 }
    } else {
        saturating_u64(x)
    }
}

/// `x as u64` (saturating; NaN is 0), for [`weight_bytes`]'s values outside `[0, 2^63)`.
#[cold]
#[inline(never)]
fn saturating_u64(x: f64) -> u64 {
    x as u64
}

/// The estimated bytes of a sample as its record keeps them (an `f32`: 24 bits of precision are
/// plenty for a figure that only triggers dumps and snapshots).
pub(crate) fn counted(estimate_bytes: f64) -> f32 {
    estimate_bytes as f32
}

/// What the sampled path does after it recorded a sample of `bytes` (rounded weight): adds them
/// to both figures, requests an interval dump when the allocated figure crossed a multiple of
/// `interval` (0: none). Returns the live figure when it is above the peak tracker's trigger, so
/// the caller takes a snapshot (after [`claim_peak`]).
#[inline]
pub(crate) fn on_sample(bytes: u64, interval: u64) -> Option<u64> {
    // Ordering: a sum; nothing is published through it (the writer reads the tables under their
    // locks).
    let before = ALLOCATED.fetch_add(bytes, Ordering::Relaxed);
    if crosses_interval(before, bytes, interval) {
        request(WANT_INTERVAL);
    }
    // Ordering: as above.
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed).wrapping_add(bytes);
    // Ordering: a threshold read on its own; a stale one only moves a snapshot by one sample.
    (live > PEAK_TRIGGER.load(Ordering::Relaxed)).then_some(live)
}

/// Whether adding `bytes` to `before` reaches or passes a multiple of `interval` (0: never).
#[inline]
fn crosses_interval(before: u64, bytes: u64, interval: u64) -> bool {
    interval != 0 && before / interval != before.wrapping_add(bytes) / interval
}

/// What the free of a sample of `bytes` (rounded weight) does.
#[inline]
pub(crate) fn on_free(bytes: u64) {
    // Ordering: see `on_sample`.
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

/// Claims the right to take a peak snapshot at live figure `live`: true for one thread, which
/// must then call [`set_peak_trigger`].
pub(crate) fn claim_peak(live: u64) -> bool {
    // Ordering: the exchange only elects one thread; the snapshot itself is published by the
    // tracker's lock.
    let trigger = PEAK_TRIGGER.load(Ordering::Relaxed);
    live > trigger
        && PEAK_TRIGGER
            .compare_exchange(trigger, u64::MAX, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// Sets the live figure the next peak snapshot waits for.
pub(crate) fn set_peak_trigger(bytes: u64) {
    // Ordering: see `on_sample`.
    PEAK_TRIGGER.store(bytes, Ordering::Relaxed);
}

/// In a forked child: a snapshot the parent's other threads were taking will never finish here,
/// so a claimed trigger is released (the next sample takes a snapshot).
pub(crate) fn after_fork_child() {
    // Ordering: the child is single-threaded here.
    let _ = PEAK_TRIGGER.compare_exchange(u64::MAX, 0, Ordering::Relaxed, Ordering::Relaxed);
    // Ordering: as above.
    PENDING.store(0, Ordering::Relaxed);
}

/// Asks the background writer for `what`; wakes it when the request is new.
pub(crate) fn request(what: u32) {
    // Ordering: Release pairs with the writer's Acquire swap: it sees the request (the data it
    // reads is under the tables' locks, so nothing else needs publishing).
    if PENDING.fetch_or(what, Ordering::Release) & what == 0 {
        // SAFETY: FUTEX_WAKE on a valid, aligned u32 that lives for the whole program; the call
        // reads no other memory and neither allocates nor blocks.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                PENDING.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }
}

/// The writer's wait: returns the pending requests (clearing them), sleeping while there are
/// none.
pub(crate) fn wait_for_requests() -> u32 {
    loop {
        // Ordering: Acquire pairs with the Release in `request`.
        let pending = PENDING.swap(0, Ordering::Acquire);
        if pending != 0 {
            return pending;
        }
        // SAFETY: FUTEX_WAIT on a valid, aligned u32 that lives for the whole program; it sleeps
        // only while the word is still 0 (so a request made since the swap is not missed) and
        // returns on a wake, a signal or a spurious wake-up, all of which loop.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                PENDING.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                0u32,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        crosses_interval, request, wait_for_requests, weight_bytes, WANT_INTERVAL, WANT_PEAK,
    };

    #[test]
    fn weights_round_as_round_does_for_every_kind_of_f32() {
        let mut values = vec![0.0f32, 0.49999997, 0.5, 1.5, 2.5, 8_388_607.5, 16_777_215.0];
        values.extend([f32::MAX, f32::MIN_POSITIVE, 1e30, 4.2e9, 1.8e19]);
        // Every bit pattern's neighbourhood across the exponents, halves included.
        let mut bits = 0u32;
        while bits < 0x7f80_0000 {
            values.push(f32::from_bits(bits));
            values.push(f32::from_bits(bits) + 0.5);
            bits += 0x0000_7fff;
        }
        for x in values {
            assert_eq!(weight_bytes(x), f64::from(x).round() as u64, "{x:e}");
        }
    }

    #[test]
    fn weights_are_the_saturating_conversion_for_negative_huge_and_non_finite_f32() {
        let values = [
            -0.0f32,
            -0.4,
            -0.5,
            -0.6,
            -1.0,
            -1e30,
            f32::MIN,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
            9.223_372e18,
            9.223_373e18,
            1.844_674_4e19,
            1.844_675e19,
            f32::MAX,
        ];
        for x in values {
            assert_eq!(weight_bytes(x), (f64::from(x) + 0.5) as u64, "{x:e}");
        }
    }

    /// The futex handshake loses no request, whether it comes before the writer waits, while it
    /// sleeps, or together with another (nothing else in the unit tests uses the request word).
    #[test]
    fn every_request_wakes_the_writer_with_its_bits() {
        for round in 0..200 {
            let waiter = std::thread::spawn(wait_for_requests);
            if round % 2 == 0 {
                std::thread::yield_now();
            }
            request(WANT_INTERVAL);
            if round % 3 == 0 {
                request(WANT_PEAK);
            }
            let got = waiter.join().unwrap();
            assert_ne!(got & WANT_INTERVAL, 0, "round {round}: {got}");
            // A peak request made after the waiter took the interval one is still pending.
            let left = if round % 3 == 0 && got & WANT_PEAK == 0 {
                wait_for_requests()
            } else {
                0
            };
            assert_eq!(
                (got | left) & WANT_PEAK != 0,
                round % 3 == 0,
                "round {round}"
            );
        }
    }

    #[test]
    fn an_interval_is_crossed_once_per_multiple_reached_and_never_when_off() {
        let interval = 1000;
        let mut total = 0u64;
        let mut crossings = 0;
        // 1,000 samples of 7 bytes each: 7,000 bytes reach 7 multiples of 1,000.
        for _ in 0..1000 {
            crossings += u32::from(crosses_interval(total, 7, interval));
            total += 7;
        }
        assert_eq!(crossings, 7);
        // One sample larger than the interval is one crossing (the writer merges them anyway).
        assert!(crosses_interval(10, 5000, interval));
        assert!(!crosses_interval(1001, 998, interval));
        assert!(crosses_interval(1001, 999, interval));
        assert!(!crosses_interval(0, u64::MAX / 2, 0));
    }
}
