//! A `fork` while another thread is inside `dl_iterate_phdr`, made to happen every run: the child
//! must not inherit glibc's loader lock held.
//!
//! glibc holds its loader lock while `dl_iterate_phdr` calls back. A child forked meanwhile
//! inherits it held, with no thread left to release it, and its first `dl_iterate_phdr` (its
//! first sample's unwind, its first dump's build ids) waits forever. The profiler walks the
//! loaded objects under a lock that its `fork` handler takes too, so a `fork` waits for a walk in
//! progress to end. `stress_fork` meets this race by chance; here it is forced: the test binary
//! defines `dl_iterate_phdr` itself (the shim, linked into it, calls this one; it forwards to
//! glibc's), and pauses a dump's walk inside glibc's call while the main thread forks. The child
//! then walks the objects itself: it ends at once when the fork waited for the walk, and is
//! killed by its alarm when it inherited the lock held.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

type Callback =
    unsafe extern "C" fn(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int;
type Iterate = unsafe extern "C" fn(callback: Option<Callback>, data: *mut c_void) -> c_int;

/// glibc's `dl_iterate_phdr`, found with `dlsym(RTLD_NEXT)` at the first call.
static GLIBC: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Where the paused walk is: [`IDLE`], [`INSIDE`] (paused in glibc's call, its lock held), or
/// [`GO_ON`] (the main thread has forked; the walk may finish).
static WALK: AtomicU32 = AtomicU32::new(IDLE);
const IDLE: u32 = 0;
const INSIDE: u32 = 1;
const GO_ON: u32 = 2;

/// How long the paused walk waits for [`GO_ON`] before it finishes anyway. With the profiler's
/// lock the `fork` cannot happen before the walk ends, so this is what ends the pause then.
const PAUSE: Duration = Duration::from_millis(500);

thread_local! {
    /// Set on the thread whose next walk pauses.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn glibc() -> Iterate {
    let mut p = GLIBC.load(Ordering::Acquire);
    if p.is_null() {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the definition after this
        // executable's, glibc's.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dl_iterate_phdr".as_ptr()) };
        assert!(!p.is_null(), "dlsym(RTLD_NEXT, dl_iterate_phdr)");
        GLIBC.store(p, Ordering::Release);
    }
    // SAFETY: glibc's dl_iterate_phdr has this signature.
    unsafe { std::mem::transmute::<*mut c_void, Iterate>(p) }
}

/// The caller's callback and data, carried through the pausing callback.
struct Forward {
    callback: Option<Callback>,
    data: *mut c_void,
    paused: bool,
}

/// Pauses at the first object (inside glibc's call, its lock held), then hands every object on.
///
/// # Safety
/// `data` is the `Forward` that [`dl_iterate_phdr`] passed; `info` and `size` are glibc's.
unsafe extern "C" fn pause_then_forward(
    info: *mut libc::dl_phdr_info,
    size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: see the contract.
    let forward = unsafe { &mut *data.cast::<Forward>() };
    if !forward.paused {
        forward.paused = true;
        WALK.store(INSIDE, Ordering::SeqCst);
        let start = Instant::now();
        while WALK.load(Ordering::SeqCst) != GO_ON && start.elapsed() < PAUSE {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    match forward.callback {
        // SAFETY: the caller's callback with the caller's data, as glibc would call it.
        Some(callback) => unsafe { callback(info, size, forward.data) },
        None => 0,
    }
}

/// The shim's `dl_iterate_phdr`, in place of glibc's (module docs).
///
/// # Safety
/// As glibc's.
#[no_mangle]
pub unsafe extern "C" fn dl_iterate_phdr(callback: Option<Callback>, data: *mut c_void) -> c_int {
    let glibc = glibc();
    if ARMED.with(|a| a.replace(false)) {
        let mut forward = Forward {
            callback,
            data,
            paused: false,
        };
        // SAFETY: the pausing callback forwards to the caller's with the caller's data.
        return unsafe {
            glibc(
                Some(pause_then_forward),
                (&mut forward as *mut Forward).cast(),
            )
        };
    }
    // SAFETY: the caller's arguments, as glibc takes them.
    unsafe { glibc(callback, data) }
}

/// Counts the loaded objects.
///
/// # Safety
/// `data` is a `*mut usize`.
unsafe extern "C" fn count(_: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: see the contract.
    unsafe { *data.cast::<usize>() += 1 };
    0
}

fn main() {
    println!("fork_loader_lock: a fork while a dump is inside dl_iterate_phdr");
    jeprof_shim::configure("sample_rate:0,symbolize:false").unwrap();
    // The profiler's initialisation (its fork handlers among it) and one walk through this
    // file's dl_iterate_phdr, unpaused.
    jeprof_shim::dump_to(&mut std::io::sink()).unwrap();
    let mut objects = 0usize;
    // SAFETY: `count` takes a `*mut usize`, and `objects` outlives the call.
    unsafe { dl_iterate_phdr(Some(count), (&mut objects as *mut usize).cast()) };
    assert!(objects > 0, "no loaded objects");

    let dumper = std::thread::spawn(|| {
        ARMED.with(|a| a.set(true));
        // A dump names the loaded objects' build ids: one walk, which pauses.
        jeprof_shim::dump_to(&mut std::io::sink()).unwrap();
        assert!(
            !ARMED.with(|a| a.get()),
            "the dump did not walk the loaded objects"
        );
    });
    let start = Instant::now();
    while WALK.load(Ordering::SeqCst) != INSIDE {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the dump never walked the loaded objects"
        );
        std::thread::sleep(Duration::from_millis(1));
    }

    // SAFETY: the child only walks the loaded objects and leaves with _exit; the alarm ends it if
    // that walk never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm only arms a timer; its default action ends this process.
        unsafe { libc::alarm(10) };
        let mut objects = 0usize;
        // SAFETY: as above.
        unsafe { dl_iterate_phdr(Some(count), (&mut objects as *mut usize).cast()) };
        // SAFETY: ends the child without the parent's exit handlers.
        unsafe { libc::_exit(if objects > 0 { 0 } else { 1 }) };
    }
    WALK.store(GO_ON, Ordering::SeqCst);
    let mut status = 0;
    // SAFETY: waits for our own child.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    dumper.join().unwrap();
    assert!(
        !(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM),
        "the child waited 10 s for glibc's loader lock: it was forked while the dump's walk \
         held it"
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    println!("the child walked the loaded objects: the fork waited for the dump's walk");
}
