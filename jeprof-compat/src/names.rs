//! Function names: demangling, jeprof's shortening, and the allocator frames a report leaves out.

/// How function names are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameStyle {
    /// Rust names demangled without their hash and left whole (`<Vec<T> as Drop>::drop`); C++ names
    /// (recognised by their argument list) shortened as jeprof does.
    #[default]
    Clean,
    /// Every name through jeprof's `ShortFunctionName` (strips `(...)` and `<...>`), as the Perl
    /// script prints them: use it to compare with jeprof byte for byte on Rust programs.
    Jeprof,
}

/// Demangles `raw` (Rust legacy or v0, or C++) and applies `style`.
///
/// Under [`NameStyle::Clean`] a name that shortening would leave blank (a symbol that is all
/// argument list, `(void*)`) stays whole: an empty name says nothing, and a dump cannot carry one
/// (jeprof's symbol line is `0x<address>\s+(.+)`). [`NameStyle::Jeprof`] shortens as jeprof does,
/// to nothing if need be.
///
/// A dynamic symbol's version after a C++ argument list (`f(char const*)@@GLIBCXX_3.4.26`, as
/// binutils names it) is set aside, the rest cleaned, and the version put back: jeprof's
/// shortening gives `f@@GLIBCXX_3.4.26` too.
pub fn clean(raw: &str, style: NameStyle) -> String {
    if let Some(paren) = raw.rfind(")@") {
        let (head, version) = raw.split_at(paren + 1);
        return format!("{}{version}", clean(head, style));
    }
    let name = demangle(raw);
    match style {
        NameStyle::Jeprof => short_function_name(&name),
        NameStyle::Clean => jeprof_dumpfmt::frames::clean_demangled(name),
    }
}

/// Demangled form of a symbol name; names that are not mangled come back unchanged, except that a
/// trailing Rust legacy hash (`::h0123456789abcdef`) is removed.
pub fn demangle(raw: &str) -> String {
    // Fast path: nothing mangled and no hash to strip (most names in symbolized dumps).
    if !raw.starts_with("_Z")
        && !raw.starts_with("_R")
        && !raw.starts_with("__Z")
        && !raw.contains("::h")
    {
        return raw.to_string();
    }
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Some(d) = addr2line::demangle(raw, addr2line::gimli::DW_LANG_C_plus_plus) {
            return d;
        }
    }
    strip_rust_hash(raw).to_string()
}

fn strip_rust_hash(name: &str) -> &str {
    if let Some((head, hash)) = name.rsplit_once("::h") {
        if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return head;
        }
    }
    name
}

/// jeprof's `ShortFunctionName`, kept beside the skip lists in `jeprof-dumpfmt` so that the
/// shim's page names C++ functions as the reports do.
pub use jeprof_dumpfmt::frames::short_function_name;

/// The functions our reports pass over when charging flat unless told otherwise (`--hide`;
/// [`crate::attribution`]): one list for the workspace, kept in `jeprof-dumpfmt` so that the
/// shim names a leak suspect's user frame as the reports do.
pub use jeprof_dumpfmt::frames::{default_hide, DEFAULT_HIDE};

/// The allocator frames a report leaves out: one list for the workspace, kept beside the model in
/// `jeprof-dumpfmt` so that every producer (the shim's pprof, this tool's reports) removes the same.
pub use jeprof_dumpfmt::frames::{is_uninteresting, SkipRules, JEPROF_SKIP};
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_name_that_would_shorten_to_nothing_stays_whole() {
        assert_eq!(clean("(void*)", NameStyle::Clean), "(void*)");
        assert_eq!(clean("(void*)", NameStyle::Jeprof), "");
        assert_eq!(clean("f(int) const", NameStyle::Clean), "f");
    }

    #[test]
    fn short_function_name_strips_arguments_and_templates_like_jeprof() {
        assert_eq!(
            short_function_name("std::vector<int>::push_back(int const&)"),
            "std::vector::push_back"
        );
        assert_eq!(short_function_name("void foo::bar(int) const"), "foo::bar");
        assert_eq!(short_function_name("main"), "main");
        // What jeprof makes of a Rust trait impl: the reason `NameStyle::Clean` exists.
        assert_eq!(
            short_function_name(
                "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc"
            ),
            "::alloc"
        );
    }

    #[test]
    fn rust_names_demangle_without_hash() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(
            demangle("my_crate::cache::insert::h0123456789abcdef"),
            "my_crate::cache::insert"
        );
        assert_eq!(
            clean("std::vector<int>::push_back(int const&)", NameStyle::Clean),
            "std::vector::push_back"
        );
        assert_eq!(
            clean("alloc::vec::Vec<T,A>::push", NameStyle::Clean),
            "alloc::vec::Vec<T,A>::push"
        );
    }

    #[test]
    fn rust_names_with_parentheses_in_generics_stay_whole_and_distinct() {
        let call_once = "<&dyn core::ops::function::Fn<(), Output = i32> + core::marker::Sync \
             as core::ops::function::FnOnce<()>>::call_once";
        assert_eq!(clean(call_once, NameStyle::Clean), call_once);
        let catch_unwind =
            "std::panic::catch_unwind::<&dyn core::ops::function::Fn<(), Output = i32>, i32>";
        assert_eq!(clean(catch_unwind, NameStyle::Clean), catch_unwind);
        // C++ argument lists, qualified or not, are still shortened.
        assert_eq!(clean("ns::f(int) const", NameStyle::Clean), "ns::f");
        assert_eq!(clean("ns::g()", NameStyle::Clean), "ns::g");
    }
}
