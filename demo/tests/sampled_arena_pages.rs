//! The sampled arena's memory per sampled small object is about the object's size class, whatever
//! jemalloc's page size: sampled objects share slabs, as unsampled ones do. jemalloc's own
//! profiler once gave each sampled small object a page of its own, which with 64 KiB pages made
//! heap profiling cost 16 times more memory on arm64 (jemalloc#2358).
//!
//! The test reads jemalloc's statistics of the sampled arena (found with `arenas.lookup` on a
//! sampled pointer): its active pages before and after 20,000 small sampled objects are allocated
//! and kept, against the objects' usable bytes, and prints the figures. The active pages before
//! them, the arena's fixed cost, stay within 1 MiB on any page size. It lives in this crate,
//! which needs nothing but the shim and jemalloc, so that `.ci/aarch64.sh` can build it a second
//! time with another jemalloc page at little cost: jemalloc's configure gives aarch64 Linux 64 KiB
//! pages, the script also builds it with 4 KiB (`JEMALLOC_SYS_WITH_LG_PAGE=12`).
//!
//! It runs without libtest's harness (`harness = false`): the sample rate is the process's, and
//! while it is 1 byte every thread's allocations are sampled, so the harness's main thread, which
//! books the test's thread while the test begins, once put a 5- or 8-page slab of its own into the
//! "fixed cost" in about one run in ten. Here the process has one thread.

use std::ffi::{c_void, CStr};

use tikv_jemalloc_sys as jem;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Sizes of the sampled objects: small size classes from the smallest to a few pages' worth of
/// 4 KiB (jemalloc's small classes end at 14 KiB with 4 KiB pages, 224 KiB with 64 KiB pages).
const SIZES: [usize; 5] = [8, 48, 200, 1000, 3000];
/// Objects per size: enough that the last, partly filled slab of each size class is a small part
/// of the class's memory even with 64 KiB pages.
const PER_SIZE: usize = 4000;

/// Reads a `size_t` or `unsigned` jemalloc statistic (`T` must be the type jemalloc documents).
fn read<T: Copy + Default>(name: &CStr) -> T {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `name` is NUL-terminated; jemalloc writes at most `len` bytes, the size of `value`,
    // which is the statistic's own type (the caller's contract).
    let rc = unsafe {
        jem::mallctl(
            name.as_ptr(),
            (&mut value as *mut T).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(rc, 0, "mallctl {name:?}");
    value
}

/// Refreshes jemalloc's statistics (they are snapshots taken at each `epoch` write).
fn refresh() {
    let mut epoch: u64 = 1;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: "epoch" reads and writes a uint64_t; both pointers point to one, of the size given.
    let rc = unsafe {
        jem::mallctl(
            c"epoch".as_ptr(),
            (&mut epoch as *mut u64).cast(),
            &mut len,
            (&mut epoch as *mut u64).cast(),
            len,
        )
    };
    assert_eq!(rc, 0, "mallctl epoch");
}

/// The index of the arena that holds `ptr` (`arenas.lookup`).
fn arena_of(ptr: *const u8) -> u32 {
    let mut index: u32 = 0;
    let mut len = std::mem::size_of::<u32>();
    let mut ptr = ptr as *mut c_void;
    // SAFETY: "arenas.lookup" reads a pointer to a live jemalloc allocation (ours) and writes an
    // unsigned into `index`, whose size we state.
    let rc = unsafe {
        jem::mallctl(
            c"arenas.lookup".as_ptr(),
            (&mut index as *mut u32).cast(),
            &mut len,
            (&mut ptr as *mut *mut c_void).cast(),
            std::mem::size_of::<*mut c_void>(),
        )
    };
    assert_eq!(rc, 0, "mallctl arenas.lookup");
    index
}

/// The arena's active bytes (pages of its extents in use) and the bytes jemalloc counts resident.
fn arena_bytes(arena: u32, page: usize) -> (usize, usize) {
    refresh();
    let name = |stat: &str| {
        std::ffi::CString::new(format!("stats.arenas.{arena}.{stat}")).expect("no NUL in the name")
    };
    let active_pages: usize = read(&name("pactive"));
    let resident: usize = read(&name("resident"));
    (active_pages * page, resident)
}

/// The usable size jemalloc gives an object of `size` bytes (its size class).
fn size_class(size: usize) -> usize {
    // SAFETY: nallocx only computes a size; `size` is not zero.
    unsafe { jem::nallocx(size, 0) }
}

fn main() {
    sampled_small_objects_take_their_size_class_not_a_page_each();
    println!("test sampled_small_objects_take_their_size_class_not_a_page_each ... ok");
}

/// What the arena's active pages hold, per size class: `(class, slabs, slab bytes)` for the small
/// classes with slabs and `(class, extents, bytes)` for the large ones (`stats.arenas.<i>.bins`
/// and `.lextents`), printed when the fixed cost is over its bound so that the log says which
/// class took the pages.
fn arena_breakdown(arena: u32) -> String {
    refresh();
    let mut out = String::new();
    let bins: u32 = read(c"arenas.nbins");
    for bin in 0..bins {
        let slabs: usize = read_named(&format!("stats.arenas.{arena}.bins.{bin}.curslabs"));
        if slabs > 0 {
            let class: usize = read_named(&format!("arenas.bin.{bin}.size"));
            let slab: usize = read_named(&format!("arenas.bin.{bin}.slab_size"));
            out += &format!(" small {class} B: {slabs} slab(s) of {slab} B;");
        }
    }
    let large: u32 = read(c"arenas.nlextents");
    for l in 0..large {
        let extents: usize = read_named(&format!("stats.arenas.{arena}.lextents.{l}.curlextents"));
        if extents > 0 {
            let class: usize = read_named(&format!("arenas.lextent.{l}.size"));
            out += &format!(" large {class} B: {extents};");
        }
    }
    out
}

/// [`read`] for a name built at run time.
fn read_named<T: Copy + Default>(name: &str) -> T {
    read(&std::ffi::CString::new(name).expect("no NUL in the name"))
}

fn sampled_small_objects_take_their_size_class_not_a_page_each() {
    // The list of objects is not sampled (R = 0: sampling off); every allocation after it is
    // (R = 1 byte).
    jeprof_shim::set_sample_rate(0);
    let mut objects: Vec<Vec<u8>> = Vec::with_capacity(SIZES.len() * PER_SIZE);
    jeprof_shim::set_sample_rate(1);
    let keep = std::hint::black_box(Box::new(0u64));
    let arena = arena_of(&*keep as *const u64 as *const u8);
    // Created by the profiler: jemalloc's automatic arenas come first.
    let automatic: u32 = read(c"opt.narenas");
    assert!(arena >= automatic, "arena {arena} is an automatic one");
    let page: usize = read(c"arenas.page");
    assert_ne!(
        arena_of(objects.as_ptr().cast()),
        arena,
        "the list of objects, allocated while sampling was off, was sampled"
    );
    // The arena exists and has its pinned slabs: what is active now is its fixed cost.
    let (fixed_active, fixed_resident) = arena_bytes(arena, page);
    // The fixed cost: the pinned slabs, within their budget whatever the page (jemalloc's 64 KiB
    // pages on aarch64 once made it 8.78 MB), the first sample's slab and the arena's metadata.
    if fixed_active > 1 << 20 {
        jeprof_shim::set_sample_rate(0);
        panic!(
            "the sampled arena's fixed cost is {fixed_active} B active ({fixed_resident} B \
             resident) with {page} B pages, over 1 MiB:{}",
            arena_breakdown(arena)
        );
    }

    for size in SIZES {
        for i in 0..PER_SIZE {
            objects.push(vec![i as u8; size]);
        }
    }
    let (active, resident) = arena_bytes(arena, page);
    jeprof_shim::set_sample_rate(0);
    // At R = 1 an object of n bytes is sampled with probability 1 − e^(−n): all but about one in
    // 3,000 of the 8-byte ones.
    let sampled: Vec<&Vec<u8>> = objects
        .iter()
        .filter(|o| arena_of(o.as_ptr()) == arena)
        .collect();
    assert!(
        sampled.len() * 1000 >= objects.len() * 999,
        "only {} of {} objects were sampled",
        sampled.len(),
        objects.len()
    );
    let usable: usize = sampled.iter().map(|o| size_class(o.len())).sum();

    let per_sample = (active - fixed_active) as f64 / sampled.len() as f64;
    let overhead = (active - fixed_active) as f64 / usable as f64;
    println!(
        "page {page} B: {} small sampled objects, {usable} usable bytes; sampled \
         arena active +{} B ({per_sample:.1} B per sample, {overhead:.3} x usable), resident +{} \
         B; before them: active {fixed_active} B, resident {fixed_resident} B",
        sampled.len(),
        active - fixed_active,
        resident.saturating_sub(fixed_resident),
    );
    // Slabs shared by sampled objects cost their size classes plus the last partial slab of each
    // class (a few pages per class at most: under 5% here even at 64 KiB); a page per object
    // would cost 20,000 pages, 4.7 times the usable bytes at 4 KiB and 75 times at 64 KiB.
    assert!(
        overhead <= 1.25,
        "the sampled objects take {overhead:.2} x their usable bytes"
    );
    drop(sampled);
    drop(objects);
    drop(keep);
}
