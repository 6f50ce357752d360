//! A child forked while another thread interns scope labels and samples in scopes can enter
//! scopes, allocate in them and report them: the fork handlers hold the scope labels' lock across
//! `fork`, and per-scope figures take no lock a child could inherit held.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const FORKS: usize = 40;

/// Waits for `pid` for at most `limit`; its exit status, or `None` if it is still running (then
/// killed).
fn wait_for(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child, with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -1
            });
        }
        if Instant::now() > deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_child_forked_while_scopes_are_busy_can_use_them() {
    jeprof_shim::configure("symbolize:false").unwrap();
    jeprof_shim::set_sample_rate(4096);
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // New labels (interning under the labels' lock), and samples in them.
                let scope = jeprof_shim::Scope::new(&format!("busy-{}", i % 1000));
                let kept = jeprof_shim::scope_sync(scope, || vec![vec![0u8; 2048]; 16]);
                drop(kept);
                let _ = jeprof_shim::scopes();
                i += 1;
            }
        })
    };
    for n in 0..FORKS {
        std::thread::sleep(Duration::from_millis(3));
        // SAFETY: the child only calls async-signal-unsafe code that the profiler's fork handlers
        // make safe (its own locks, jemalloc's) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = std::panic::catch_unwind(|| {
                let held =
                    jeprof_shim::scope_sync(&*format!("child-{n}"), || vec![vec![1u8; 4096]; 64]);
                let seen = jeprof_shim::scopes()
                    .iter()
                    .any(|s| s.label.starts_with("child-"));
                drop(held);
                seen
            });
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
        }
        assert_eq!(
            wait_for(pid, Duration::from_secs(20)),
            Some(0),
            "child {n} deadlocked (killed) or failed"
        );
    }
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
}
