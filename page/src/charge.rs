//! The sites and folded stacks of a profile that carries its symbol section (what the shim
//! builds in-process), charged as `jeprof-compat report` charges them by default:
//!
//! 1. the allocator's frames are removed: walking from the leaf, everything up to and including
//!    the last frame whose outer function is the allocator's
//!    ([`jeprof_dumpfmt::frames::interesting_start`]), then at each address the allocator
//!    functions Rust inlined into it (never its outer function);
//! 2. each address becomes its functions, innermost first, all but the outer one suffixed
//!    ` (inline)`; an address above `0x7fffffffffffffff` becomes none, one nothing names becomes
//!    `0x` and its 16 hex digits;
//! 3. flat goes to the first function from the leaf that
//!    [`jeprof_dumpfmt::frames::default_hide`] does not match (the standard library and the
//!    allocator), or to the leaf's when all match; cum to each function once per stack.
//!
//! Folded stacks are `jeprof-compat report --collapsed`'s: the same functions, root first,
//! inlined ones suffixed `[inline]`, `;` in a name written `:`, equal lines added up.
//!
//! Names are taken as the symbol section spells them (the shim writes them demangled), a C++
//! name shortened as the report shortens it ([`jeprof_dumpfmt::frames::clean_demangled`]).

use std::collections::HashMap;

use jeprof_dumpfmt::frames::{
    clean_demangled, default_hide, interesting_start, is_uninteresting, SkipRules,
};
use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::{Estimate, Profile};

use crate::model::Site;

/// The highest address a report names (jeprof drops the frames above it).
const LAST_USER_ADDRESS: u64 = 0x7fff_ffff_ffff_ffff;

/// A profile's in-use figures charged to sites, with its folded stacks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charged {
    /// Every stack's in-use figures added up.
    pub total: Estimate,
    /// Sites with a figure, largest flat bytes first, then by name.
    pub sites: Vec<Site>,
    /// Folded stacks with their live bytes, sorted by line.
    pub folded: Vec<(String, f64)>,
}

/// Charges `profile`'s in-use figures (module docs). Frames the symbol section does not name
/// (or all of them, without one) are named by their address.
pub fn charge(profile: &Profile) -> Charged {
    let hide = default_hide();
    let skip = SkipRules::default();
    let names_of = |key: u64| -> Option<&Vec<String>> {
        profile
            .symbols
            .as_ref()
            .and_then(|s| s.names.get(&key))
            .filter(|n| !n.is_empty())
    };
    let mut total = Estimate::default();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut sites: Vec<Site> = Vec::new();
    let mut folded: HashMap<String, f64> = HashMap::new();
    let mut functions: Vec<String> = Vec::new();
    let mut folded_names: Vec<String> = Vec::new();
    for stack in &profile.stacks {
        let e = &stack.counts.inuse;
        total.add(e);
        let keys: Vec<u64> = stack
            .frames
            .iter()
            .enumerate()
            .map(|(i, &a)| symbol_key(i, a))
            .collect();
        let start = interesting_start(
            keys.len(),
            |i| names_of(keys[i]).and_then(|n| n.last()).map(String::as_str),
            skip,
        );
        functions.clear();
        folded_names.clear();
        for &key in &keys[start..] {
            if key > LAST_USER_ADDRESS {
                continue;
            }
            let Some(names) = names_of(key) else {
                functions.push(format!("0x{key:016x}"));
                folded_names.push(format!("0x{key:016x}"));
                continue;
            };
            let mut first = 0;
            while names.len() - first > 1 && is_uninteresting(&names[first], skip) {
                first += 1;
            }
            let last = names.len() - 1;
            for (j, name) in names.iter().enumerate().skip(first) {
                if name.is_empty() {
                    continue;
                }
                // Folded stacks keep the full names (the report's `--collapsed` does).
                let full = name.replace(';', ":");
                let name = clean_demangled(name.clone());
                if j < last {
                    functions.push(format!("{name} (inline)"));
                    folded_names.push(format!("{full}[inline]"));
                } else {
                    functions.push(name);
                    folded_names.push(full);
                }
            }
        }
        let line: Vec<&str> = folded_names.iter().rev().map(String::as_str).collect();
        *folded.entry(line.join(";")).or_insert(0.0) += e.bytes;
        if functions.is_empty() {
            continue;
        }
        let bare = |f: &str| f.strip_suffix(" (inline)").unwrap_or(f).to_string();
        let flat = functions
            .iter()
            .position(|f| !hide.is_match(&bare(f)))
            .unwrap_or(0);
        let i = site_index(&mut by_name, &mut sites, &functions[flat]);
        let s = &mut sites[i];
        s.bytes += e.bytes;
        s.bytes_variance += e.bytes_variance;
        s.objects += e.objects;
        s.objects_variance += e.objects_variance;
        let mut seen: Vec<&str> = Vec::with_capacity(functions.len());
        for f in &functions {
            if seen.contains(&f.as_str()) {
                continue;
            }
            seen.push(f);
            let i = site_index(&mut by_name, &mut sites, f);
            sites[i].cum_bytes += e.bytes;
            sites[i].cum_bytes_variance += e.bytes_variance;
        }
    }
    sites.retain(|s| s.bytes != 0.0 || s.cum_bytes != 0.0);
    sort_sites(&mut sites);
    let mut folded: Vec<(String, f64)> = folded.into_iter().collect();
    folded.sort_by(|a, b| a.0.cmp(&b.0));
    Charged {
        total,
        sites,
        folded,
    }
}

/// The index in `sites` of the site named `name`, added on first sight.
fn site_index(by_name: &mut HashMap<String, usize>, sites: &mut Vec<Site>, name: &str) -> usize {
    *by_name.entry(name.to_string()).or_insert_with(|| {
        sites.push(Site {
            name: name.to_string(),
            ..Site::default()
        });
        sites.len() - 1
    })
}

/// The report's order: flat bytes descending, then name.
pub fn sort_sites(sites: &mut [Site]) {
    sites.sort_by(|a, b| {
        b.bytes
            .partial_cmp(&a.bytes)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use jeprof_dumpfmt::{Counts, Stack, SymbolTable};

    fn stack(frames: &[u64], bytes: f64) -> Stack {
        Stack {
            frames: frames.to_vec(),
            counts: Counts {
                inuse: Estimate {
                    objects: bytes / 64.0,
                    bytes,
                    objects_variance: 1.0,
                    bytes_variance: 100.0,
                },
                accum: Estimate::default(),
            },
            threads: Vec::new(),
        }
    }

    #[test]
    fn flat_goes_past_the_allocator_and_the_standard_library_to_the_program() {
        let mut p = Profile::new(512);
        // leaf first: the allocator, a standard-library frame with an inlined shim, the program.
        p.stacks = vec![
            stack(&[0x10, 0x20, 0x30, 0x40], 1000.0),
            stack(&[0x10, 0x40], 500.0),
        ];
        let mut symbols = SymbolTable::default();
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        symbols.names.insert(0x10, names(&["malloc"]));
        symbols.names.insert(
            0x1f,
            names(&["__rust_alloc", "alloc::raw_vec::RawVec<T>::grow"]),
        );
        symbols.names.insert(0x2f, names(&["app::cache::insert"]));
        symbols.names.insert(0x3f, names(&["app::main"]));
        p.symbols = Some(symbols);
        let c = charge(&p);
        assert_eq!(c.total.bytes, 1500.0);
        let names: Vec<(&str, f64, f64)> = c
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.bytes, s.cum_bytes))
            .collect();
        assert_eq!(
            names,
            vec![
                ("app::cache::insert", 1000.0, 1000.0),
                ("app::main", 500.0, 1500.0),
                ("alloc::raw_vec::RawVec<T>::grow", 0.0, 1000.0),
            ]
        );
        assert_eq!(
            c.folded,
            vec![
                ("app::main".to_string(), 500.0),
                (
                    "app::main;app::cache::insert;alloc::raw_vec::RawVec<T>::grow".to_string(),
                    1000.0
                ),
            ]
        );
    }
}
