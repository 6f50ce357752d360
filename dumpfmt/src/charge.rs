//! The charging engine: which frames of a stack are the allocator's, which function gets a
//! stack's *flat* figure, and what is hidden. Every view that charges stacks to code calls it:
//! `jeprof-compat`'s text report, diff, folded stacks, pprof, export and leaks, the page the shim
//! serves (`jeprof-page`), and this crate's [`pprof`](crate::pprof). The lists it matches names
//! against (jeprof's skip list, the default `--hide` list, name shortening) are in
//! [`frames`].
//!
//! ## The rules, in order
//! 1. **Allocator frames** ([`allocator_frames`]). Each frame is classed ([`classify`]) from its
//!    outer function's name and the object its address is in ([`Object`], from the dump's
//!    memory map: [`Objects`]):
//!    - a name on jeprof's skip list, or with [`SkipRules::rust_allocator_frames`] one of Rust's
//!      allocation shims ([`frames::is_uninteresting`]): an allocator frame;
//!    - with [`SkipRules::allocator_objects`], a frame inside the allocator's own object (the
//!      jemalloc library `libjemalloc*`, a preloaded `libtcmalloc*` or `libmimalloc*`, the preload
//!      library `libjeprof_preload.so`): an allocator frame whatever it is named. Debian's
//!      `libjemalloc.so.2` is stripped: its internal frames have no name, or the nearest export's
//!      (`malloc_usable_size`), so the name alone cannot tell;
//!    - with [`SkipRules::allocator_objects`], a frame inside libc (`libc.so*`, `libc-*.so`,
//!      musl's `ld-musl-*`): an allocator frame when its name is the malloc family
//!      ([`is_libc_malloc_family`]: `malloc`, `__libc_malloc`, `_int_malloc`, `sysmalloc`,
//!      `tcache_*`, ...); when nothing names it, an allocator frame only at the leaf side
//!      ([`FrameClass::AllocatorAtLeaf`]: every frame between it and the leaf is an allocator
//!      frame). glibc's malloc internals are static functions, unnamed in a stripped libc, and a
//!      sample is taken inside an allocation, so an unnamed libc run at the leaf is malloc's own
//!      path; an unnamed libc frame further up is libc calling the program (`qsort`'s
//!      comparison, `__libc_start_call_main`) and stays.
//!
//!    Walking from the leaf, everything up to and including the *last* allocator frame is
//!    dropped (jeprof's `RemoveUninterestingFrames`). Then, at each remaining address, the
//!    allocator functions Rust inlined into the caller are left out, innermost first, never the
//!    outer function ([`inlined_allocator_names`]).
//! 2. **Functions**: each address becomes its functions, innermost first, all but the outer one
//!    inlined; an address above [`LAST_USER_ADDRESS`] becomes none (jeprof's `TranslateStack`).
//!    Names are shown cleaned ([`frames::clean_demangled`]: a C++ name shortened as jeprof
//!    shortens it, a Rust name whole), an inlined one suffixed ` (inline)` in a report's rows and
//!    `[inline]` in folded stacks ([`row_name`], [`folded_name`], [`Function::row_name`]).
//! 3. **Flat and what is shown** ([`Attribution::cut`]): `show_from` drops the functions toward
//!    the root of its outermost match; flat goes to the first function from the leaf that `hide`
//!    does not match ([`Attribution::user_code`]: Rust's standard library and the allocator,
//!    [`frames::DEFAULT_HIDE`]), to the leaf's when all match. An unnamed address is never hidden.
//!
//! ## Which output follows which rule
//! jeprof-compatible output (`jeprof-compat report --jeprof_names --keep_alloc_frames`, the
//! goldens, the conformance tests) is jeprof's: [`SkipRules::JEPROF`] (names only, jeprof's list)
//! and [`Attribution::default`] (flat at the leaf). The project's own views (the default report,
//! `leaks`, the page, pprof, OTLP, export) use [`SkipRules::default`] (Rust's shims and the
//! allocator's objects too) and [`Attribution::user_code`].
//!
//! ## Callers
//! The engine works on one stack at a time through closures over frame indexes
//! ([`allocator_frames`], [`Attribution::cut`]), so a caller that names each distinct address once
//! in flat arrays (the text report's `Translator`) classes each address once and calls it per
//! stack without allocating; [`charge_stack`] does all three steps over a slice of named frames
//! for callers that hold names per stack (the page the shim serves).

use std::sync::OnceLock;

use regex::Regex;

use crate::frames::{self, clean_demangled, has_argument_list, is_uninteresting};
use crate::maps::Mapping;

pub use crate::frames::SkipRules;

/// The highest address a report names: jeprof's `TranslateStack` drops the frames above it
/// (kernel addresses).
pub const LAST_USER_ADDRESS: u64 = 0x7fff_ffff_ffff_ffff;

/// The object a frame's address lies in, as far as charging cares (rule 1 of the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Object {
    /// The program, a library, or an address no mapping covers.
    #[default]
    Other,
    /// The allocator's own object: jemalloc, a preloaded tcmalloc or mimalloc, the preload
    /// library.
    Allocator,
    /// The C library, whose malloc family is the allocator when no other is preloaded.
    Libc,
}

/// The [`Object`] a mapped file is, by its file name (`path`'s last component).
pub fn object_of(path: &str) -> Object {
    let name = path.rsplit('/').next().unwrap_or(path);
    let allocator = ["libjemalloc", "libtcmalloc", "libmimalloc"]
        .iter()
        .any(|prefix| name.starts_with(prefix) && name.contains(".so"))
        || name.starts_with("libjeprof_preload.so");
    let libc = name.starts_with("libc.so")
        || (name.starts_with("libc-") && name.ends_with(".so"))
        || name.starts_with("ld-musl-");
    if allocator {
        Object::Allocator
    } else if libc {
        Object::Libc
    } else {
        Object::Other
    }
}

/// The executable mappings of a memory map that are not [`Object::Other`], sorted, for
/// [`Objects::at`]: a few entries for any process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Objects {
    /// `(start, end, object)`, sorted by start, not overlapping.
    ranges: Vec<(u64, u64, Object)>,
}

impl Objects {
    /// The allocator and libc mappings of `maps` (sorted by start, as
    /// [`crate::maps::parse_maps`] returns them).
    pub fn from_mappings(maps: &[Mapping]) -> Objects {
        let ranges = maps
            .iter()
            .filter(|m| m.executable)
            .filter_map(|m| match object_of(&m.path) {
                Object::Other => None,
                object => Some((m.start, m.end, object)),
            })
            .collect();
        Objects { ranges }
    }

    /// [`Objects::from_mappings`] of a dump's `MAPPED_LIBRARIES:` text, none without one.
    pub fn from_maps_text(text: Option<&str>) -> Objects {
        text.map_or_else(Objects::default, |t| {
            Objects::from_mappings(&crate::maps::parse_maps(t))
        })
    }

    /// The object `address` lies in.
    pub fn at(&self, address: u64) -> Object {
        let i = self.ranges.partition_point(|r| r.0 <= address);
        match i.checked_sub(1).map(|i| self.ranges[i]) {
            Some((_, end, object)) if address < end => object,
            _ => Object::Other,
        }
    }

    /// Whether no mapping is the allocator's or libc's (every frame is [`Object::Other`]).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// What rule 1 makes of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClass {
    /// Code that asked for memory (the program, a library).
    Program,
    /// An allocator frame: it and every frame on its leaf side are dropped.
    Allocator,
    /// An unnamed libc frame: an allocator frame when every frame between it and the leaf is one.
    AllocatorAtLeaf,
}

/// Whether `function` (a name inside libc) is the malloc family: the entry points and glibc's
/// internals (`__libc_malloc`, `_int_malloc`, `__GI___libc_free`, `sysmalloc`, `tcache_init`,
/// `_mid_memalign`, `arena_get2`, `malloc_consolidate`, ...).
pub fn is_libc_malloc_family(function: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(__GI_)?_*(libc_|int_)?(malloc|calloc|realloc|reallocarray|free|cfree|memalign",
            r"|aligned_alloc|posix_memalign|valloc|pvalloc)(_[0-9A-Za-z_]+)?$",
            r"|^(sysmalloc|_mid_memalign|arena_get2|new_heap|grow_heap|tcache_[0-9A-Za-z_]+)$"
        ))
        .expect("static regex")
    })
    .is_match(function)
}

/// Rule 1 for one frame: `function` is its outer function's name (`None` when nothing names
/// it; a name that only says where the frame is, `0x…` or `object+0x…`, counts as none), `object`
/// the object its address lies in.
pub fn classify(function: Option<&str>, object: Object, rules: SkipRules) -> FrameClass {
    if function.is_some_and(|f| is_uninteresting(f, rules)) {
        return FrameClass::Allocator;
    }
    if !rules.allocator_objects {
        return FrameClass::Program;
    }
    match (object, function.filter(|f| !is_place(f))) {
        (Object::Allocator, _) => FrameClass::Allocator,
        (Object::Libc, Some(f)) if is_libc_malloc_family(f) => FrameClass::Allocator,
        (Object::Libc, None) => FrameClass::AllocatorAtLeaf,
        _ => FrameClass::Program,
    }
}

/// Whether `name` only says where a frame is (`0x00007f…`, `libc.so.6+0x2a1b0`): how a frame
/// nothing names is shown, which rule 1 treats as unnamed.
fn is_place(name: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    match name.rsplit_once("+0x").or_else(|| name.split_once("0x")) {
        Some((before, digits)) => hex(digits) && !before.contains(' '),
        // jeprof's bare form: the 16 digits without `0x`.
        None => name.len() == 16 && hex(name),
    }
}

/// How many frames (from the leaf) of a stack of `len` are the allocator's, given each frame's
/// [`FrameClass`] by index (leaf first): the stack's charged frames are `frames[n..]`. That is
/// one past the last allocator frame, a [`FrameClass::AllocatorAtLeaf`] counting as one only
/// when every frame before it is dropped.
pub fn allocator_frames(len: usize, mut class_of: impl FnMut(usize) -> FrameClass) -> usize {
    let mut start = 0;
    for i in 0..len {
        match class_of(i) {
            FrameClass::Allocator => start = i + 1,
            // Every frame between it and the leaf is dropped so far.
            FrameClass::AllocatorAtLeaf if start == i => start = i + 1,
            _ => {}
        }
    }
    start
}

/// [`allocator_frames`] by names alone (every frame [`Object::Other`]): `function_of(i)` names
/// frame `i`'s outer function, `None` for a frame nothing names (which jeprof never drops).
pub fn interesting_start<'a>(
    len: usize,
    mut function_of: impl FnMut(usize) -> Option<&'a str>,
    rules: SkipRules,
) -> usize {
    allocator_frames(len, |i| classify(function_of(i), Object::Other, rules))
}

/// How many of an address's innermost names (innermost first, as named, not empty) are
/// allocator functions Rust inlined into its caller: left out, never the outer one. None unless
/// [`SkipRules::rust_allocator_frames`] (jeprof keeps them).
pub fn inlined_allocator_names<S: AsRef<str>>(names: &[S], rules: SkipRules) -> usize {
    if !rules.rust_allocator_frames {
        return 0;
    }
    names
        .iter()
        .take(names.len().saturating_sub(1))
        .take_while(|n| is_uninteresting(n.as_ref(), rules))
        .count()
}

/// How a view charges a stack's figure (rule 3 of the module docs). The default charges it as
/// jeprof does: no function hidden, the whole stack shown.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    /// Functions passed over, from the leaf, when charging flat.
    pub hide: Option<Regex>,
    /// Functions toward the root of the outermost match are dropped.
    pub show_from: Option<Regex>,
}

/// Where an [`Attribution`] cuts a stack of functions (innermost first): functions
/// `flat..shown` carry the figure, the first of them as flat; `0..flat` are hidden leaf-side
/// functions (cum only, in the text report) and `shown..` are dropped by `show_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Index of the function charged with flat (equal to `shown` when nothing is shown).
    pub flat: usize,
    /// One past the last function kept.
    pub shown: usize,
}

impl Attribution {
    /// The attribution of the project's own views: [`frames::DEFAULT_HIDE`], nothing dropped
    /// from the root.
    pub fn user_code() -> Attribution {
        Attribution {
            hide: Some(frames::default_hide()),
            show_from: None,
        }
    }

    /// Whether this attribution changes nothing (jeprof's own charging).
    pub fn is_jeprof(&self) -> bool {
        self.hide.is_none() && self.show_from.is_none()
    }

    /// Whether `function` (as a report names it, ` (inline)` or not) is passed over.
    pub fn hides(&self, function: &str) -> bool {
        self.hide
            .as_ref()
            .is_some_and(|re| re.is_match(bare(function)))
    }

    /// Whether `function` is where `show_from` starts a stack.
    pub fn shows_from(&self, function: &str) -> bool {
        self.show_from
            .as_ref()
            .is_some_and(|re| re.is_match(bare(function)))
    }

    /// Where the attribution cuts a stack of `len` functions, innermost first, given which of them
    /// `hidden` and which `show_from` matches (by index).
    pub fn cut(
        &self,
        len: usize,
        hidden: impl Fn(usize) -> bool,
        starts: impl Fn(usize) -> bool,
    ) -> Cut {
        let shown = if self.show_from.is_some() {
            // The outermost match, kept with everything it called.
            (0..len).rev().find(|&i| starts(i)).map_or(0, |i| i + 1)
        } else {
            len
        };
        let flat = if self.hide.is_some() {
            // Nothing of the program's own (`None`): charged as jeprof charges it, at 0.
            (0..shown).find(|&i| !hidden(i)).unwrap_or_default()
        } else {
            0
        };
        Cut { flat, shown }
    }
}

/// A function name without the text report's ` (inline)` suffix.
fn bare(function: &str) -> &str {
    function.strip_suffix(INLINE_SUFFIX).unwrap_or(function)
}

/// One frame of a stack as its caller names it, for [`charge_stack`].
#[derive(Debug, Clone, Copy)]
pub struct NamedFrame<'n> {
    /// The lookup key (the leaf's address, callers' minus one).
    pub key: u64,
    /// Its functions as named (not cleaned), innermost first; empty when nothing names it.
    pub names: &'n [String],
    /// The object the address lies in.
    pub object: Object,
}

/// The suffix of an inlined function's name in a report's rows (jeprof's `TranslateStack`).
pub const INLINE_SUFFIX: &str = " (inline)";

/// The suffix of an inlined function's name in folded stacks (jeprof's `--collapsed`).
pub const FOLDED_INLINE_SUFFIX: &str = "[inline]";

/// `name` as a report's row names it: suffixed [`INLINE_SUFFIX`] when `inlined`.
pub fn row_name(name: &str, inlined: bool) -> String {
    if inlined {
        format!("{name}{INLINE_SUFFIX}")
    } else {
        name.to_string()
    }
}

/// `name` as one function of a folded stack: `;` (which separates functions there) written `:`,
/// suffixed [`FOLDED_INLINE_SUFFIX`] when `inlined`.
pub fn folded_name(name: &str, inlined: bool) -> String {
    let name = name.replace(';', ":");
    if inlined {
        name + FOLDED_INLINE_SUFFIX
    } else {
        name
    }
}

/// One function of a charged stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function<'n> {
    /// Index of its frame in the slice given to [`charge_stack`].
    pub frame: usize,
    /// Its frame's lookup key.
    pub key: u64,
    /// Its name as given (`None` for an address nothing names).
    pub name: Option<&'n str>,
    /// Whether it is inlined into the next (not its address's outer function).
    pub inlined: bool,
}

impl Function<'_> {
    /// As a report's row names it: cleaned ([`clean_demangled`]) and [`row_name`]; an address
    /// nothing names as `0x` and its 16 hex digits.
    pub fn row_name(&self) -> String {
        match self.name {
            Some(name) => row_name(&clean_demangled(name.to_string()), self.inlined),
            None => format!("0x{:016x}", self.key),
        }
    }

    /// As folded stacks name it: the full name, [`folded_name`]; an address nothing names as in
    /// [`Function::row_name`].
    pub fn folded_name(&self) -> String {
        match self.name {
            Some(name) => folded_name(name, self.inlined),
            None => format!("0x{:016x}", self.key),
        }
    }
}

/// A stack charged by [`charge_stack`], its buffers reused from stack to stack.
#[derive(Debug, Clone, Default)]
pub struct ChargedStack<'n> {
    /// The stack's functions after rules 1 and 2, innermost first.
    pub functions: Vec<Function<'n>>,
    /// Where rule 3 cuts `functions`.
    pub cut: Option<Cut>,
}

impl<'n> ChargedStack<'n> {
    /// The function charged with flat, if any is shown.
    pub fn flat(&self) -> Option<&Function<'n>> {
        let cut = self.cut?;
        (cut.flat < cut.shown)
            .then(|| self.functions.get(cut.flat))
            .flatten()
    }

    /// The functions shown (carrying cum), innermost first.
    pub fn shown(&self) -> &[Function<'n>] {
        let shown = self.cut.map_or(0, |c| c.shown);
        &self.functions[..shown.min(self.functions.len())]
    }
}

/// The three rules of the module docs over one stack of named frames (leaf first), into `out`.
/// `hide` and `show_from` match names cleaned ([`clean_demangled`]) and without ` (inline)`; an
/// unnamed address matches neither.
pub fn charge_stack<'n>(
    frames: &[NamedFrame<'n>],
    rules: SkipRules,
    attribution: &Attribution,
    out: &mut ChargedStack<'n>,
) {
    out.functions.clear();
    let start = allocator_frames(frames.len(), |i| {
        classify(
            frames[i].names.last().map(String::as_str),
            frames[i].object,
            rules,
        )
    });
    for (i, frame) in frames.iter().enumerate().skip(start) {
        if frame.key > LAST_USER_ADDRESS {
            continue;
        }
        if frame.names.is_empty() {
            out.functions.push(Function {
                frame: i,
                key: frame.key,
                name: None,
                inlined: false,
            });
            continue;
        }
        let last = frame.names.len() - 1;
        let first = inlined_allocator_names(frame.names, rules);
        for (j, name) in frame.names.iter().enumerate().skip(first) {
            if !name.is_empty() {
                out.functions.push(Function {
                    frame: i,
                    key: frame.key,
                    name: Some(name),
                    inlined: j < last,
                });
            }
        }
    }
    let matches = |re: &dyn Fn(&str) -> bool, i: usize| {
        out.functions[i].name.is_some_and(|n| {
            if has_argument_list(n) {
                re(&clean_demangled(n.to_string()))
            } else {
                re(n)
            }
        })
    };
    let cut = attribution.cut(
        out.functions.len(),
        |i| matches(&|n| attribution.hides(n), i),
        |i| matches(&|n| attribution.shows_from(n), i),
    );
    out.cut = Some(cut);
}

#[cfg(test)]
mod tests;
