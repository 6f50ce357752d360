//! The sites and folded stacks of a profile that carries its symbol section (what the shim
//! builds in-process), charged by the workspace's one charging engine
//! ([`jeprof_dumpfmt::charge`]).
//!
//! The engine's rules are the project's own, as `jeprof-compat report` charges by default:
//! allocator frames removed (by name and by the object an address lies in, from the profile's
//! memory map), flat to the first function that is not the standard library's or the
//! allocator's, cum to each function once per stack. This module keeps no rules: it only adds up
//! what the engine kept:
//!
//! - a site is a function as the report's rows name it
//!   ([`jeprof_dumpfmt::charge::Function::row_name`]);
//! - folded stacks are `jeprof-compat report --collapsed`'s: the same functions as folded stacks
//!   name them ([`jeprof_dumpfmt::charge::Function::folded_name`]), root first, equal lines added
//!   up.
//!
//! Names are taken as the symbol section spells them (the shim writes them demangled).

use std::collections::HashMap;

use jeprof_dumpfmt::charge::{
    charge_stack, Attribution, ChargedStack, Function, NamedFrame, Objects, SkipRules,
};
use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::rss::{ByteEstimate, RssFigures, SiteRss};
use jeprof_dumpfmt::{Estimate, Profile};

use crate::model::Site;

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

/// Charges `profile`'s in-use figures (module docs), and its resident bytes the same way when it
/// carries residency figures read from the page map ([`jeprof_dumpfmt::rss`]; malformed ones
/// are left out, as the page shows what it can). Frames the symbol section does not name (or
/// all of them, without one) are named by their address.
pub fn charge(profile: &Profile) -> Charged {
    let (rules, attribution) = (SkipRules::default(), Attribution::user_code());
    let objects = Objects::from_maps_text(profile.mapped_libraries.as_deref());
    let no_names: Vec<String> = Vec::new();
    let names_of = |key: u64| -> &Vec<String> {
        profile
            .symbols
            .as_ref()
            .and_then(|s| s.names.get(&key))
            .unwrap_or(&no_names)
    };
    let rss = RssFigures::from_annotations(&profile.annotations)
        .ok()
        .flatten()
        .filter(|r| r.pagemap.is_ok());
    let rss_of: HashMap<&[u64], &SiteRss> = rss
        .iter()
        .flat_map(|r| &r.sites)
        .map(|s| (s.frames.as_slice(), s))
        .collect();
    let mut total = Estimate::default();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut sites: Vec<Site> = Vec::new();
    let mut folded: HashMap<String, f64> = HashMap::new();
    let mut frames: Vec<NamedFrame<'_>> = Vec::new();
    let mut charged = ChargedStack::default();
    for stack in &profile.stacks {
        let e = &stack.counts.inuse;
        total.add(e);
        frames.clear();
        frames.extend(stack.frames.iter().enumerate().map(|(i, &a)| {
            let key = symbol_key(i, a);
            NamedFrame {
                key,
                names: names_of(key),
                object: objects.at(key),
            }
        }));
        charge_stack(&frames, rules, &attribution, &mut charged);
        let line: Vec<String> = charged
            .functions
            .iter()
            .rev()
            .map(Function::folded_name)
            .collect();
        *folded.entry(line.join(";")).or_insert(0.0) += e.bytes;
        let Some(flat) = charged.flat() else {
            continue;
        };
        let i = site_index(&mut by_name, &mut sites, &flat.row_name());
        let s = &mut sites[i];
        s.bytes += e.bytes;
        s.bytes_variance += e.bytes_variance;
        s.objects += e.objects;
        s.objects_variance += e.objects_variance;
        if let Some(site) = rss_of.get(stack.frames.as_slice()) {
            s.resident
                .get_or_insert_with(ByteEstimate::default)
                .add(&site.resident);
        }
        let mut seen: Vec<String> = Vec::with_capacity(charged.functions.len());
        for f in charged.shown() {
            let name = f.row_name();
            if seen.contains(&name) {
                continue;
            }
            let i = site_index(&mut by_name, &mut sites, &name);
            sites[i].cum_bytes += e.bytes;
            sites[i].cum_bytes_variance += e.bytes_variance;
            seen.push(name);
        }
    }
    sites.retain(|s| s.bytes != 0.0 || s.cum_bytes != 0.0);
    if rss.is_some() {
        // A site none of whose stacks had a live sample read has none resident.
        for s in &mut sites {
            s.resident.get_or_insert_with(ByteEstimate::default);
        }
    }
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
    #[test]
    fn unnamed_frames_inside_a_jemalloc_mapping_are_charged_to_the_caller() {
        let mut p = Profile::new(512);
        // leaf first: two unnamed addresses inside Debian's stripped libjemalloc.so.2, then the
        // program.
        p.stacks = vec![stack(
            &[0x7f00_0001_0010, 0x7f00_0001_0021, 0x40_1011, 0x40_2011],
            800.0,
        )];
        let mut symbols = SymbolTable::default();
        symbols
            .names
            .insert(0x40_1010, vec!["PyList_Append".to_string()]);
        symbols.names.insert(0x40_2010, vec!["main".to_string()]);
        p.symbols = Some(symbols);
        p.mapped_libraries = Some(
            "400000-500000 r-xp 00000000 fe:00 1 /usr/bin/python3\n\
             7f0000010000-7f0000080000 r-xp 00010000 fe:00 2 \
             /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
                .to_string(),
        );
        let c = charge(&p);
        let names: Vec<(&str, f64, f64)> = c
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.bytes, s.cum_bytes))
            .collect();
        assert_eq!(
            names,
            vec![("PyList_Append", 800.0, 800.0), ("main", 0.0, 800.0)]
        );
        assert_eq!(c.folded, vec![("main;PyList_Append".to_string(), 800.0)]);
    }
}
