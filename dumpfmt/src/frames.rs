//! The name lists of the charging engine ([`crate::charge`]): jeprof's allocator skip list and
//! Rust's allocation shims ([`is_uninteresting`]), the functions the project's own views pass
//! over when charging flat ([`DEFAULT_HIDE`]), and jeprof's name shortening
//! ([`short_function_name`], [`clean_demangled`]). Which frames a stack drops, and which function
//! gets flat, is the engine's.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;

/// Which frames [`is_uninteresting`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkipRules {
    /// Also remove Rust's allocation shims (`__rust_alloc`, `alloc::alloc::*`, `GlobalAlloc` impls,
    /// tikv-jemallocator's `_rjem_` entry points, `jeprof_shim::*`), which jeprof keeps.
    pub rust_allocator_frames: bool,
    /// Also remove frames inside the allocator's own objects and libc's malloc family, whatever
    /// they are named ([`crate::charge`], rule 1), which jeprof keeps.
    pub allocator_objects: bool,
}

impl SkipRules {
    /// jeprof's rule: its skip list, by name only.
    pub const JEPROF: SkipRules = SkipRules {
        rust_allocator_frames: false,
        allocator_objects: false,
    };
}

impl Default for SkipRules {
    /// The project's own views' rule: jeprof's list, Rust's shims, the allocator's objects.
    fn default() -> SkipRules {
        SkipRules {
            rust_allocator_frames: true,
            allocator_objects: true,
        }
    }
}

/// jeprof's allocator skip list for heap profiles (`RemoveUninterestingFrames` in `bin/jeprof.in`,
/// jemalloc 5.3.1, `@JEMALLOC_PREFIX@` empty as in our build of jeprof): walking a stack from the
/// leaf, a frame whose outer short function name (cut at its first space) is in this list, or is
/// one of them with a leading `_` (Mach-O), is dropped with every frame inside it. jeprof also drops
/// names matching `TCMalloc|^tcmalloc::`; [`is_uninteresting`] applies both rules.
///
/// The single copy in the workspace: `jeprof-fixtures` states its expected per-function figures
/// with it too.
pub const JEPROF_SKIP: &[&str] = &[
    "calloc",
    "cfree",
    "malloc",
    "je_malloc_default",
    "newImpl",
    "void* newImpl",
    "fallbackNewImpl",
    "void* fallbackNewImpl",
    "fallback_impl",
    "void* fallback_impl",
    "imalloc",
    "int imalloc",
    "imalloc_body",
    "int imalloc_body",
    "prof_alloc_prep",
    "prof_tctx_t *prof_alloc_prep",
    "prof_backtrace_impl",
    "void prof_backtrace_impl",
    "je_prof_backtrace",
    "void je_prof_backtrace",
    "je_prof_tctx_create",
    "prof_tctx_t* prof_tctx_create",
    "free",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "pvalloc",
    "valloc",
    "realloc",
    "mallocx",
    "irallocx_prof",
    "void *irallocx_prof",
    "rallocx",
    "do_rallocx",
    "ixallocx_prof",
    "size_t ixallocx_prof",
    "xallocx",
    "dallocx",
    "sdallocx",
    "sdallocx_noflags",
    "tc_calloc",
    "tc_cfree",
    "tc_malloc",
    "tc_free",
    "tc_memalign",
    "tc_posix_memalign",
    "tc_pvalloc",
    "tc_valloc",
    "tc_realloc",
    "tc_new",
    "tc_delete",
    "tc_newarray",
    "tc_deletearray",
    "tc_new_nothrow",
    "tc_newarray_nothrow",
    "do_malloc",
    "::do_malloc",
    "::do_malloc_or_cpp_alloc",
    "DoSampledAllocation",
    "simple_alloc::allocate",
    "__malloc_alloc_template::allocate",
    "__builtin_delete",
    "__builtin_new",
    "__builtin_vec_delete",
    "__builtin_vec_new",
    "operator new",
    "operator new[]",
    "malloc_zone_malloc",
    "malloc_zone_calloc",
    "malloc_zone_valloc",
    "malloc_zone_realloc",
    "malloc_zone_memalign",
    "malloc_zone_free",
    "__start_google_malloc",
    "__stop_google_malloc",
    "__start_malloc_hook",
    "__stop_malloc_hook",
];

fn jeprof_skip_set() -> &'static HashSet<String> {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| {
        let mut set = HashSet::new();
        for name in JEPROF_SKIP {
            set.insert(name.to_string());
            // Mach-O adds a `_` to every symbol.
            set.insert(format!("_{name}"));
        }
        set
    })
}

fn rust_skip_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(__rust_(alloc|alloc_zeroed|realloc|dealloc)|__rustc::\w+|__rdl_\w+|__rg_\w+|_rjem_\w+",
            r"|alloc::alloc::.*|std::alloc::.*|jeprof_shim::.*|tikv_jemallocator::.*",
            r"|<.* as core::alloc::global::GlobalAlloc>::\w+",
            r"|<.* as core::alloc::Allocator>::\w+|<alloc::alloc::Global>::\w+)$"
        ))
        .expect("static regex")
    })
}

/// Whether jeprof (and, with `rules.rust_allocator_frames`, this tool) treats `function` (the
/// outermost function at a frame's address) as allocator-internal. jeprof cuts the name at its first
/// space before looking it up, and also matches `TCMalloc|^tcmalloc::`.
pub fn is_uninteresting(function: &str, rules: SkipRules) -> bool {
    let short = function.split(' ').next().unwrap_or(function);
    if jeprof_skip_set().contains(short)
        || short.contains("TCMalloc")
        || short.starts_with("tcmalloc::")
    {
        return true;
    }
    rules.rust_allocator_frames && rust_skip_regex().is_match(function)
}

/// Whether a demangled name ends in a C++ argument list (`f(int) const`). A Rust name can hold
/// parentheses too, inside its generics (`<&dyn Fn<(), Output = i32> as FnOnce<()>>::call_once`),
/// but never at its end: shortening those would cut them down to `::call_once`, one name for
/// many functions.
pub fn has_argument_list(name: &str) -> bool {
    let mut tail = name.trim_end();
    for qualifier in ["&&", "&", "volatile", "const"] {
        tail = tail.strip_suffix(qualifier).unwrap_or(tail).trim_end();
    }
    tail.ends_with(')')
}

/// jeprof's `ShortFunctionName`: argument lists and template arguments removed (innermost first,
/// repeatedly), then a leading return type. jeprof's Perl `\w` (no `use utf8`) is ASCII, hence
/// `[0-9A-Za-z_]`.
pub fn short_function_name(full: &str) -> String {
    static RES: OnceLock<[Regex; 3]> = OnceLock::new();
    let [args, templates, leading] = RES.get_or_init(|| {
        [
            Regex::new(r"\([^()]*\)(\s*const)?").expect("static regex"),
            Regex::new(r"<[^<>]*>").expect("static regex"),
            Regex::new(r"^.*\s+([0-9A-Za-z_]+::)").expect("static regex"),
        ]
    });
    let mut name = full.to_string();
    for re in [args, templates] {
        loop {
            let next = re.replace_all(&name, "").into_owned();
            if next == name {
                break;
            }
            name = next;
        }
    }
    leading.replace(&name, "$1").into_owned()
}

/// A demangled name as our reports show it (`jeprof-compat`'s clean style): a C++ name, known by
/// its argument list, shortened as jeprof shortens it ([`short_function_name`]), unless that
/// leaves nothing (a symbol that is all argument list, `(void*)`, stays whole); any other name
/// (Rust's, whose parentheses sit inside generics) whole.
pub fn clean_demangled(name: String) -> String {
    if !has_argument_list(&name) {
        return name;
    }
    let short = short_function_name(&name);
    if short.trim().is_empty() {
        name
    } else {
        short
    }
}

/// The functions our reports pass over when charging flat, unless told otherwise (`--hide`;
/// jeprof-compat's `attribution`): Rust's standard library (`core`, `alloc`, `hashbrown`, which `std`'s
/// `HashMap` is, and `std`'s own modules), its impls for primitive and generic types
/// (`<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem`, `<T as
/// alloc::string::ToString>::to_string`), and the allocator (Rust's shims, tikv-jemallocator's
/// entry points, this profiler). A trait impl for the program's own type (`<my_app::Node as
/// core::clone::Clone>::clone`) is the program's and stays. One regex each; a report matches
/// them against function names as it shows them (demangled, without hash).
///
/// `std::` is matched by module (`std::rt::`, `std::sys::`, ...) because C++'s standard library
/// is `std::` too (`std::vector::push_back`) and a C++ program's report stays jeprof's; Rust
/// symbols name where code is defined, so `Vec` is `alloc::vec::Vec`, never `std::vec::Vec`.
/// A limit: `std::thread::` is both languages', and is hidden in C++ programs too.
pub const DEFAULT_HIDE: &[&str] = &[
    // A standard library path, also as the self type of an impl, behind references, pointers,
    // `dyn` or a slice (`<&dyn core::ops::function::Fn<()> as core::ops::function::FnOnce<()>>`).
    r"^<?(&(mut )?|\*(const|mut) |dyn |\[)*(core|alloc|hashbrown)::",
    concat!(
        r"^<?(&(mut )?|\*(const|mut) |dyn |\[)*std::(alloc|backtrace|collections|env|error|ffi",
        r"|fs|io|net|os|panic|panicking|path|process|rt|sync|sys|sys_common|thread|time)::"
    ),
    // A standard library trait implemented for a type with no path: a primitive, a generic
    // parameter, a slice or reference of one (`<[T] as alloc::slice::hack::ConvertVec>`).
    r"^<[^:<>]* as (core|alloc|hashbrown|std)::",
    // The allocator: Rust's shims, tikv-jemallocator's `_rjem_` entry points, the profilers.
    r"^(__rust_|__rustc::|__rdl_|__rg_|_rjem_)",
    r"^<?(jeprof_shim|tikv_jemallocator)::",
];

/// [`DEFAULT_HIDE`] as one regex.
pub fn default_hide() -> Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(&DEFAULT_HIDE.join("|")).expect("static regex"))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_frames_are_recognised() {
        let rust = SkipRules::default();
        let plain = SkipRules::JEPROF;
        for f in [
            "malloc",
            "je_prof_backtrace",
            "_malloc",
            "prof_backtrace_impl",
            "tcmalloc::x",
        ] {
            assert!(is_uninteresting(f, plain), "{f}");
        }
        for f in [
            "__rust_alloc",
            "alloc::alloc::exchange_malloc",
            "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc",
            "_rjem_malloc",
        ] {
            assert!(is_uninteresting(f, rust), "{f}");
            assert!(!is_uninteresting(f, plain), "{f}");
        }
        assert!(!is_uninteresting("main", rust));
        assert!(!is_uninteresting("alloc::vec::Vec<T>::push", rust));
    }

    #[test]
    fn default_hide_list_hides_the_standard_library_and_not_the_programs_impls() {
        let hide = default_hide();
        for f in [
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "hashbrown::raw::RawTable<T,A>::reserve_rehash",
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "<alloc::alloc::Global>::alloc_impl",
            "<T as alloc::string::ToString>::to_string",
            "<[T] as alloc::slice::hack::ConvertVec>::to_vec",
            "<&dyn core::ops::function::Fn<(), Output = i32> as core::ops::function::FnOnce<()>>::call_once",
            "std::collections::hash::map::HashMap<K,V,S>::insert",
            "core::ops::function::FnOnce::call_once",
            "__rustc::__rust_alloc",
            "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc",
        ] {
            assert!(hide.is_match(f), "{f} not hidden");
        }
        for f in [
            "my_app::cache::Cache::insert",
            "<my_app::Node as core::clone::Clone>::clone",
            "demo::main",
            "main",
            "allocator_api2::alloc",
            // C++'s standard library, shortened as jeprof shortens it.
            "std::vector::push_back",
            "std::basic_string::_M_create",
        ] {
            assert!(!hide.is_match(f), "{f} hidden");
        }
        // A limit, documented: the self type decides, so the program's trait implemented on a
        // standard type is hidden with the standard library.
        assert!(hide.is_match("<alloc::vec::Vec<T> as my_app::Pool>::take"));
    }
}
