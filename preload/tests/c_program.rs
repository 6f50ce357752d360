//! A C program built without frame pointers (`programs/sites.c`), preloaded: the malloc family
//! keeps its C semantics on the sampled and the unsampled path; each allocation site's estimate
//! (sites on the main thread, on a `pthread_create` thread, in a `dlopen`ed library; calloc,
//! realloc, the aligned functions) covers the truth the program measured with
//! `malloc_usable_size`; the real jeprof reads the dump with no binary and names the sites; the
//! `.eh_frame` unwinder returns libgcc's stacks, and `auto` picks it. On aarch64 the program also
//! signs its return addresses (`common::PROGRAM_FLAGS`); a cross-built run starts it under the
//! test's own runner (`.ci/aarch64.sh`: `qemu-aarch64 -cpu max`, `common::program`).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::{per_site, preloaded, read_dump, run_ok, site_of, stack_names, truths};

/// The sites of `sites.c`, with the live bytes they keep (measured by the program).
const SITES: [&str; 8] = [
    "site_small",
    "site_freed",
    "site_calloc",
    "site_realloc",
    "site_aligned",
    "site_huge",
    "site_thread",
    "site_dlopened",
];

/// A small R: every site gets tens to hundreds of samples.
const PERIOD: u64 = 65_536;

/// The test programs, built into a folder of the test's own.
struct Programs {
    dir: tempfile::TempDir,
    sites: PathBuf,
    library: PathBuf,
}

/// Builds `sites` and `libdlsite.so`.
fn programs() -> Programs {
    let dir = tempfile::tempdir().unwrap();
    let sites = dir.path().join("sites");
    let mut flags = common::PROGRAM_FLAGS.to_vec();
    flags.extend(["-pthread", "-ldl"]);
    let cc = jeprof_conformance::target_c_compiler();
    common::compile(&cc, &[common::program_source("sites.c")], &flags, &sites);
    let library = dir.path().join("libdlsite.so");
    let mut flags = common::PROGRAM_FLAGS.to_vec();
    flags.extend(["-shared", "-fPIC"]);
    common::compile(&cc, &[common::program_source("dlsite.c")], &flags, &library);
    Programs {
        dir,
        sites,
        library,
    }
}

/// Runs `sites sites <library>` preloaded with `settings`, dumping at exit into `dir`; returns
/// the dump and the truths the program printed.
fn run_sites(
    programs: &Programs,
    settings: &str,
) -> (
    jeprof_dumpfmt::Profile,
    std::collections::BTreeMap<String, f64>,
    PathBuf,
) {
    let dump = programs
        .dir
        .path()
        .join(format!("sites-{}.prof", settings.replace([',', ':'], "_")));
    let mut command = common::program(&programs.sites);
    command.arg("sites").arg(&programs.library);
    let settings = format!("{settings},dump_on_exit:{}", dump.display());
    let output = run_ok(preloaded(command, &settings));
    let truths = truths(&output.stdout);
    assert_eq!(truths.len(), SITES.len(), "the program printed every truth");
    (read_dump(&dump), truths, dump)
}

#[test]
fn malloc_family_keeps_c_semantics_sampled_and_unsampled() {
    let programs = programs();
    // R = 1 samples every allocation; 0 samples none; the default samples a few.
    for settings in ["sample_rate:1", "sample_rate:0", ""] {
        let mut command = common::program(&programs.sites);
        command.arg("semantics");
        let output = run_ok(preloaded(command, settings));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("semantics: ok"),
            "with {settings:?}"
        );
    }
}

#[test]
fn c_sites_estimates_cover_the_truth_and_jeprof_names_them() {
    let programs = programs();
    let mut runs = Vec::new();
    let mut last_dump = PathBuf::new();
    for seed in 1..=8 {
        let settings = format!("sample_rate:{PERIOD},seed:{seed}");
        let (profile, truths, dump) = run_sites(&programs, &settings);
        assert_eq!(profile.sample_period, PERIOD);
        runs.push(common::SiteRun {
            label: settings,
            estimates: per_site(&profile, &SITES, |name, site| name == site),
            truths: SITES.iter().map(|site| truths[*site]).collect(),
        });
        last_dump = dump;
    }
    common::check_estimates(&SITES, &runs);

    // The real jeprof, given no binary, reads the names from the dump's symbol section.
    let (stdout, text) = common::jeprof_inuse_text(&last_dump);
    for site in SITES.iter().filter(|s| **s != "site_freed") {
        let (_, cum) = text
            .rows
            .get(*site)
            .unwrap_or_else(|| panic!("jeprof does not name {site}:\n{stdout}"));
        assert!(*cum > 0.0, "{site}: {stdout}");
    }
}

#[test]
fn a_preloaded_programs_dump_carries_the_figures_of_the_jemalloc_that_holds_its_heap() {
    use jeprof_dumpfmt::allocator::AllocatorFigures;
    let programs = programs();
    let (profile, _, _) = run_sites(&programs, &format!("sample_rate:{PERIOD},seed:1"));
    let figures = AllocatorFigures::from_annotations(&profile.annotations)
        .unwrap_or_else(|e| panic!("{e}: {:?}", profile.annotations));
    // The program's every block is the library's jemalloc's: its figures are the program's.
    let j = figures
        .jemalloc
        .unwrap_or_else(|| panic!("allocator: other: {:?}", profile.annotations));
    // jemalloc's documented relations (mapped has no order with resident).
    assert!(j.allocated <= j.active, "{j:?}");
    assert!(j.active <= j.resident, "{j:?}");
    assert!(j.active <= j.mapped, "{j:?}");
    // What jemalloc holds for the program (besides the profiler's own) is at least what the
    // profile estimates, within its interval: it also counts blocks in thread caches.
    let (lo, _) = profile.totals().inuse.bytes_interval_95();
    let program = j.allocated.saturating_sub(figures.profiler);
    assert!(program as f64 >= lo, "{program} below {lo}: {j:?}");
    assert!(figures.profiler > 0 && figures.rss_anon.is_some());
}

/// The functions the program calls to allocate.
const ALLOCATORS: [&str; 5] = [
    "malloc",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
];

/// The distinct stacks of the sites' samples: per frame, its names (inlined functions first).
fn site_stacks(profile: &jeprof_dumpfmt::Profile) -> BTreeSet<Vec<Vec<String>>> {
    profile
        .stacks
        .iter()
        .filter(|s| site_of(profile, &s.frames, &SITES, |name, site| name == site).is_some())
        .map(|s| stack_names(profile, &s.frames))
        .collect()
}

#[test]
fn eh_frame_and_auto_unwinders_return_libgcc_stacks_without_frame_pointers() {
    let programs = programs();
    let settings = |unwinder: &str| format!("sample_rate:{PERIOD},seed:3,unwinder:{unwinder}");
    let (by_libgcc, _, _) = run_sites(&programs, &settings("backtrace"));
    let expected = site_stacks(&by_libgcc);
    assert!(
        expected.len() >= SITES.len() - 1,
        "every live site has a stack: {expected:#?}"
    );
    for stack in &expected {
        // Stacks start at the exported allocation function the site called (jeprof's and our
        // reports drop such frames by name).
        let leaf = stack.first().and_then(|names| names.last());
        assert!(
            leaf.is_some_and(|name| ALLOCATORS.contains(&name.as_str())),
            "{stack:?}"
        );
        // ... and go past the program's entry function of the thread (`main`, `thread_main`)
        // into the C library's start-up (`__libc_start_call_main`, `start_thread`: named only
        // where glibc's debug symbols are installed, as libc6-dbg does on x86_64 but nothing
        // does for arm64 here).
        let entry = stack
            .iter()
            .position(|names| names.iter().any(|n| n == "main" || n == "thread_main"));
        assert!(
            entry.is_some_and(|entry| entry + 1 < stack.len()),
            "the stack reaches the thread's entry and beyond: {stack:?}"
        );
    }
    for unwinder in ["eh_frame", "auto"] {
        let (profile, _, _) = run_sites(&programs, &settings(unwinder));
        assert_eq!(
            site_stacks(&profile),
            expected,
            "unwinder:{unwinder} ({:?}) against libgcc's",
            common::annotation(&profile, "shim_unwinder")
        );
        // The program has no frame pointers: auto must pick the `.eh_frame` unwinder (not the
        // frame-pointer walker, and not libgcc's, which it takes only where the `.eh_frame`
        // unwinder does not exist or disagrees with libgcc in its probe).
        assert_eq!(
            common::annotation(&profile, "shim_unwinder"),
            Some("eh_frame"),
            "unwinder:{unwinder}"
        );
    }
}
