//! The engine's proof: unit cases for each rule, and properties over generated stacks.

use proptest::prelude::*;

use super::*;
use crate::maps::parse_maps;

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// The charged functions of `frames` as `(name, inlined)`, and the flat one's index.
fn charged(frames: &[NamedFrame<'_>], rules: SkipRules) -> (Vec<(String, bool)>, Option<usize>) {
    let mut out = ChargedStack::default();
    charge_stack(frames, rules, &Attribution::user_code(), &mut out);
    let functions = out
        .shown()
        .iter()
        .map(|f| {
            let name = match f.name {
                Some(n) => n.to_string(),
                None => f.row_name(),
            };
            (name, f.inlined)
        })
        .collect();
    let flat = out.cut.filter(|c| c.flat < c.shown).map(|c| c.flat);
    (functions, flat)
}

#[test]
fn everything_up_to_the_last_allocator_frame_is_dropped() {
    let names = [
        Some("malloc"),
        Some("user_fn"),
        Some("__rust_alloc"),
        None,
        Some("main"),
    ];
    let start = interesting_start(names.len(), |i| names[i], SkipRules::default());
    assert_eq!(
        start, 3,
        "the last allocator frame from the leaf is __rust_alloc"
    );
    let plain = SkipRules::JEPROF;
    assert_eq!(interesting_start(names.len(), |i| names[i], plain), 1);
    assert_eq!(interesting_start(0, |i| names[i], plain), 0);
}

#[test]
fn allocator_objects_are_known_by_file_name() {
    for path in [
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        "/usr/lib/libtcmalloc_minimal.so.4.5.9",
        "/opt/lib/libmimalloc.so.2.1",
        "/tmp/target/release/libjeprof_preload.so",
    ] {
        assert_eq!(object_of(path), Object::Allocator, "{path}");
    }
    for path in [
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/libc-2.31.so",
        "/lib/ld-musl-x86_64.so.1",
    ] {
        assert_eq!(object_of(path), Object::Libc, "{path}");
    }
    for path in [
        "/usr/bin/python3.11",
        "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
        "/usr/lib/x86_64-linux-gnu/libcap.so.2",
        "/home/u/libjemalloc_notes.txt",
        "[vdso]",
        "",
    ] {
        assert_eq!(object_of(path), Object::Other, "{path}");
    }
}

#[test]
fn objects_are_looked_up_by_address_in_executable_mappings_only() {
    let maps = parse_maps(
        "400000-401000 r-xp 00000000 fe:00 1 /usr/bin/prog\n\
         7f0000000000-7f0000010000 r--p 00000000 fe:00 2 /usr/lib/libjemalloc.so.2\n\
         7f0000010000-7f0000080000 r-xp 00010000 fe:00 2 /usr/lib/libjemalloc.so.2\n\
         7f1000000000-7f1000100000 r-xp 00000000 fe:00 3 /usr/lib/libc.so.6\n",
    );
    let objects = Objects::from_mappings(&maps);
    assert_eq!(objects.at(0x400100), Object::Other);
    assert_eq!(objects.at(0x7f0000000100), Object::Other, "not executable");
    assert_eq!(objects.at(0x7f0000010000), Object::Allocator);
    assert_eq!(objects.at(0x7f000007ffff), Object::Allocator);
    assert_eq!(
        objects.at(0x7f0000080000),
        Object::Other,
        "one past the end"
    );
    assert_eq!(objects.at(0x7f1000000010), Object::Libc);
    assert_eq!(
        Objects::from_maps_text(None).at(0x7f0000010000),
        Object::Other
    );
}

#[test]
fn unnamed_frames_in_a_stripped_jemalloc_are_dropped_and_the_caller_charged() {
    // Debian's libjemalloc.so.2: its internals have no names (or jeprof's nearest export).
    let (none, usable) = (names(&[]), names(&["malloc_usable_size"]));
    let (user, main) = (names(&["PyList_Append"]), names(&["main"]));
    let frames = [
        NamedFrame {
            key: 0x7f00_0001_0010,
            names: &none,
            object: Object::Allocator,
        },
        NamedFrame {
            key: 0x7f00_0001_0020,
            names: &usable,
            object: Object::Allocator,
        },
        NamedFrame {
            key: 0x7f00_0001_0030,
            names: &none,
            object: Object::Allocator,
        },
        NamedFrame {
            key: 0x401000,
            names: &user,
            object: Object::Other,
        },
        NamedFrame {
            key: 0x402000,
            names: &main,
            object: Object::Other,
        },
    ];
    let (functions, flat) = charged(&frames, SkipRules::default());
    assert_eq!(
        functions,
        vec![
            ("PyList_Append".to_string(), false),
            ("main".to_string(), false)
        ]
    );
    assert_eq!(flat, Some(0));
    // jeprof's rule keeps them: flat lands on the first jemalloc address.
    let (functions, _) = charged(&frames, SkipRules::JEPROF);
    assert_eq!(functions.len(), 5);
    assert_eq!(functions[0].0, "0x00007f0000010010");
}

#[test]
fn unnamed_libc_frames_are_the_allocator_only_at_the_leaf() {
    let none = names(&[]);
    let (int_malloc, cmp, main) = (names(&["_int_malloc"]), names(&["cmp"]), names(&["main"]));
    let frame = |key, names, object| NamedFrame { key, names, object };
    let stack = [
        frame(0x7f10_0000_0010, &none, Object::Libc),
        frame(0x7f10_0000_0020, &int_malloc, Object::Libc),
        frame(0x7f10_0000_0030, &none, Object::Libc),
        frame(0x401000, &cmp, Object::Other),
        // qsort, unnamed, calling the program's comparison: libc above a program frame stays.
        frame(0x7f10_0000_0040, &none, Object::Libc),
        frame(0x402000, &main, Object::Other),
    ];
    let (functions, flat) = charged(&stack, SkipRules::default());
    let shown: Vec<&str> = functions.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(shown, ["cmp", "0x00007f1000000040", "main"]);
    assert_eq!(flat, Some(0));
    // A named libc function that is not the malloc family is the program's caller, not the
    // allocator's.
    let strdup = names(&["strdup"]);
    let stack = [
        frame(0x7f10_0000_0020, &int_malloc, Object::Libc),
        frame(0x7f10_0000_0050, &strdup, Object::Libc),
        frame(0x402000, &main, Object::Other),
    ];
    let (functions, _) = charged(&stack, SkipRules::default());
    assert_eq!(functions[0].0, "strdup");
}

#[test]
fn a_libc_frame_named_only_by_its_place_is_unnamed() {
    let rules = SkipRules::default();
    for place in [
        "libc.so.6+0x2a1b0",
        "0x00007f1000000040",
        "00007f1000000040",
    ] {
        assert_eq!(
            classify(Some(place), Object::Libc, rules),
            FrameClass::AllocatorAtLeaf,
            "{place}"
        );
    }
    for name in ["qsort", "cafe", "__libc_start_call_main"] {
        assert_eq!(
            classify(Some(name), Object::Libc, rules),
            FrameClass::Program,
            "{name}"
        );
    }
}

#[test]
fn libc_malloc_family_names_glibcs_entry_points_and_internals() {
    for f in [
        "malloc",
        "__libc_malloc",
        "__GI___libc_free",
        "_int_malloc",
        "_int_realloc",
        "sysmalloc",
        "tcache_init",
        "_mid_memalign",
        "malloc_consolidate",
        "__libc_calloc",
    ] {
        assert!(is_libc_malloc_family(f), "{f}");
    }
    for f in [
        "strdup",
        "qsort",
        "freeaddrinfo",
        "__libc_start_call_main",
        "fopen",
    ] {
        assert!(!is_libc_malloc_family(f), "{f}");
    }
}

#[test]
fn inlined_rust_allocator_names_are_left_out_but_never_the_outer_function() {
    let frame = names(&[
        "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc",
        "__rustc::__rust_alloc",
        "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
        "my_app::fill",
    ]);
    assert_eq!(inlined_allocator_names(&frame, SkipRules::default()), 2);
    assert_eq!(inlined_allocator_names(&frame, SkipRules::JEPROF), 0);
    assert_eq!(
        inlined_allocator_names(&names(&["__rust_alloc"]), SkipRules::default()),
        0
    );
}

#[test]
fn flat_moves_past_standard_library_frames_to_the_programs_own() {
    let stack = [
        "alloc::raw_vec::RawVecInner<A>::try_allocate_in (inline)",
        "alloc::vec::Vec<T,A>::push",
        "my_app::cache::Cache::insert",
        "my_app::main",
        "std::rt::lang_start_internal",
    ];
    let cut_of = |a: &Attribution| a.cut(stack.len(), |i| a.hides(stack[i]), |_| false);
    assert_eq!(cut_of(&Attribution::user_code()), Cut { flat: 2, shown: 5 });
    assert_eq!(cut_of(&Attribution::default()), Cut { flat: 0, shown: 5 });
    // Only hidden functions: charged as jeprof charges it.
    let std_only = [
        "hashbrown::raw::RawTable<T,A>::reserve_rehash",
        "std::thread::spawn",
    ];
    let a = Attribution::user_code();
    assert_eq!(
        a.cut(2, |i| a.hides(std_only[i]), |_| false),
        Cut { flat: 0, shown: 2 }
    );
}

#[test]
fn show_from_keeps_the_outermost_match_and_its_callees_like_pprof() {
    // pprof's example: frames [A, B, C, B] from the root; show_from B keeps [B, C, B].
    let stack = ["B", "C", "B", "A"];
    let show = |re: &str| Attribution {
        hide: None,
        show_from: Some(Regex::new(re).unwrap()),
    };
    let cut_of = |a: &Attribution| a.cut(stack.len(), |_| false, |i| a.shows_from(stack[i]));
    assert_eq!(cut_of(&show("^B$")), Cut { flat: 0, shown: 3 });
    assert_eq!(cut_of(&show("^C$")), Cut { flat: 0, shown: 2 });
    assert_eq!(cut_of(&show("^A$")), Cut { flat: 0, shown: 4 });
    assert_eq!(cut_of(&show("^D$")), Cut { flat: 0, shown: 0 });
}

/// A generated frame: an index into [`POOL`] (or none), and its object.
fn frame_strategy() -> impl Strategy<Value = (Option<usize>, Object)> {
    (
        proptest::option::of(0..POOL.len()),
        prop_oneof![
            4 => Just(Object::Other),
            2 => Just(Object::Allocator),
            1 => Just(Object::Libc),
        ],
    )
}

/// Names a generated stack draws from: allocator names, standard library names, libc's, the
/// program's.
const POOL: &[&[&str]] = &[
    &["malloc"],
    &["__rust_alloc"],
    &["_int_malloc"],
    &["malloc_usable_size"],
    &["alloc::raw_vec::RawVecInner<A>::grow", "app::push"],
    &["__rustc::__rust_alloc", "app::fill"],
    &["hashbrown::raw::RawTable<T,A>::reserve_rehash"],
    &["app::cache::insert"],
    &["std::vector<int>::push_back(int const&)"],
    &["strdup"],
    &["main"],
];

fn build(spec: &[(Option<usize>, Object)], pool: &[Vec<String>]) -> Vec<(u64, usize, Object)> {
    spec.iter()
        .enumerate()
        .map(|(i, &(n, object))| {
            (
                0x1000 + i as u64 * 0x10,
                n.unwrap_or(pool.len() - 1),
                object,
            )
        })
        .collect()
}

proptest! {
    /// With jeprof's rules, objects change nothing, and the cut is jeprof's: one past the last
    /// frame whose outer function is on its list.
    #[test]
    fn jeprof_rules_ignore_objects_and_cut_at_the_last_listed_name(
        spec in proptest::collection::vec(frame_strategy(), 0..12)
    ) {
        let pool: Vec<Vec<String>> = POOL.iter().map(|n| names(n)).chain([Vec::new()]).collect();
        let frames = build(&spec, &pool);
        let named = |objects: bool| -> Vec<NamedFrame<'_>> {
            frames.iter().map(|&(key, n, object)| NamedFrame {
                key,
                names: &pool[n],
                object: if objects { object } else { Object::Other },
            }).collect()
        };
        let rules = SkipRules::JEPROF;
        prop_assert_eq!(charged(&named(true), rules), charged(&named(false), rules));
        let want = frames
            .iter()
            .rposition(|&(_, n, _)| pool[n].last().is_some_and(|f| is_uninteresting(f, rules)))
            .map_or(0, |i| i + 1);
        let got = allocator_frames(frames.len(), |i| {
            classify(pool[frames[i].1].last().map(String::as_str), frames[i].2, rules)
        });
        prop_assert_eq!(got, want);
    }

    /// Unnamed frames inside the allocator's object, added at the leaf of any stack, change
    /// nothing the project's views charge: flat and every shown function stay.
    #[test]
    fn unnamed_allocator_object_frames_at_the_leaf_change_nothing(
        spec in proptest::collection::vec(frame_strategy(), 0..12),
        extra in 1usize..4,
    ) {
        let pool: Vec<Vec<String>> = POOL.iter().map(|n| names(n)).chain([Vec::new()]).collect();
        let frames = build(&spec, &pool);
        let named: Vec<NamedFrame<'_>> = frames.iter().map(|&(key, n, object)| NamedFrame {
            key, names: &pool[n], object,
        }).collect();
        let mut grown: Vec<NamedFrame<'_>> = (0..extra).map(|i| NamedFrame {
            key: 0x7f00_0000_0000 + i as u64,
            names: &pool[pool.len() - 1],
            object: Object::Allocator,
        }).collect();
        grown.extend(named.iter().copied());
        let rules = SkipRules::default();
        prop_assert_eq!(charged(&grown, rules), charged(&named, rules));
    }

    /// Under the project's rules no shown function is an allocator frame's, and flat is the first
    /// shown function `hide` passes (or the leaf's when it passes none).
    #[test]
    fn no_allocator_frame_is_charged_and_flat_is_the_first_unhidden(
        spec in proptest::collection::vec(frame_strategy(), 0..12)
    ) {
        let pool: Vec<Vec<String>> = POOL.iter().map(|n| names(n)).chain([Vec::new()]).collect();
        let frames = build(&spec, &pool);
        let named: Vec<NamedFrame<'_>> = frames.iter().map(|&(key, n, object)| NamedFrame {
            key, names: &pool[n], object,
        }).collect();
        let rules = SkipRules::default();
        let mut out = ChargedStack::default();
        let attribution = Attribution::user_code();
        charge_stack(&named, rules, &attribution, &mut out);
        for f in out.shown() {
            let frame = named[f.frame];
            let class = classify(frame.names.last().map(String::as_str), frame.object, rules);
            prop_assert_ne!(class, FrameClass::Allocator);
            prop_assert!(f.name.is_none_or(|n| !f.inlined || !is_uninteresting(n, rules)));
        }
        let shown = out.shown();
        let hidden = |f: &Function<'_>| f.name.is_some_and(|n| {
            attribution.hides(&clean_demangled(n.to_string()))
        });
        match out.flat() {
            None => prop_assert!(shown.is_empty()),
            Some(flat) => {
                let want = shown.iter().position(|f| !hidden(f)).unwrap_or(0);
                prop_assert_eq!(flat, &shown[want]);
            }
        }
    }
}
