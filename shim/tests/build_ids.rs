//! Every dump names the build id of each loaded object (`# build_id: <hex> <path>` lines, which
//! jeprof skips), under the path its memory map gives the object: what lets
//! `jeprof-compat symbolize --debug-dir` name a `symbolize:false` dump's frames later, from the
//! program's debug information split off into a `.build-id` directory.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use jeprof_compat::named_dump::add_symbols;
use jeprof_compat::symbolize::SymbolizeOptions;
use jeprof_shim::jeprof_dumpfmt::{build_ids, maps, read, Profile};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<std::alloc::System> =
    jeprof_shim::Profiled::new(std::alloc::System);

/// The allocations whose stacks the dump holds, under a name of their own.
#[inline(never)]
fn allocate_blocks() -> Vec<Vec<u8>> {
    (0..1024).map(|i| vec![i as u8; 512]).collect()
}

/// One `symbolize:false` dump of this process, read back.
fn dump() -> &'static Profile {
    static DUMP: OnceLock<Profile> = OnceLock::new();
    DUMP.get_or_init(|| {
        jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
        let blocks = allocate_blocks();
        let mut text = Vec::new();
        jeprof_shim::dump_to(&mut text).unwrap();
        drop(blocks);
        read::parse(&text).unwrap()
    })
}

/// This test program's build id, as the dump gives it.
fn program_build_id(profile: &Profile) -> String {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let ids = build_ids::from_annotations(&profile.annotations);
    ids.iter()
        .find(|b| Path::new(&b.path) == exe)
        .unwrap_or_else(|| panic!("no build id for {}: {ids:?}", exe.display()))
        .id
        .clone()
}

#[test]
fn a_dump_carries_the_programs_build_id_under_its_mapped_path() {
    let profile = dump();
    assert!(
        profile.symbols.is_none(),
        "symbolize:false writes no symbols"
    );
    let mapped = maps::parse_maps(profile.mapped_libraries.as_deref().unwrap());
    for id in build_ids::from_annotations(&profile.annotations) {
        assert!(
            mapped.iter().any(|m| m.path == id.path),
            "{} is not a file of the dump's memory map",
            id.path
        );
    }
    // readelf (binutils, which jeprof needs anyway) reads the program's id from the file.
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let out = Command::new("readelf")
        .arg("-n")
        .arg(&exe)
        .output()
        .expect("readelf runs");
    let notes = String::from_utf8_lossy(&out.stdout);
    let id = program_build_id(profile);
    assert!(
        notes.contains(&format!("Build ID: {id}")),
        "{id} not in {notes}"
    );
}

#[test]
fn a_symbolize_false_dump_is_named_later_from_the_programs_split_debug_file() {
    let id = program_build_id(dump());
    let dir = tempfile::tempdir().unwrap();
    let debug = dir
        .path()
        .join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let out = Command::new(jeprof_conformance::target_binutil("objcopy"))
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(&debug)
        .output()
        .expect("objcopy runs (binutils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let named = |options: &SymbolizeOptions| {
        let mut profile = dump().clone();
        add_symbols(&mut profile, options);
        profile.symbols.unwrap()
    };
    let found = |symbols: &jeprof_shim::jeprof_dumpfmt::SymbolTable| {
        symbols
            .names
            .iter()
            .find(|(_, names)| {
                names
                    .iter()
                    .any(|n| n.starts_with("build_ids::allocate_blocks"))
            })
            .map(|(key, _)| *key)
    };
    // Without the debug file nothing names the program's own frames (it is not a library).
    assert_eq!(found(&named(&SymbolizeOptions::default())), None);
    let symbols = named(&SymbolizeOptions {
        debug_dirs: vec![dir.path().to_path_buf()],
        ..SymbolizeOptions::default()
    });
    let key = found(&symbols).unwrap_or_else(|| panic!("allocate_blocks not named: {symbols:?}"));
    // The DWARF line program came with it: the function's frame is in this file.
    let lines = &symbols.lines[&key];
    assert!(
        lines
            .iter()
            .flatten()
            .any(|l| l.file.ends_with("tests/build_ids.rs")),
        "{lines:?}"
    );
}
