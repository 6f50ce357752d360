//! Every dump names the build id of each loaded object (`# build_id: <hex> <path>` lines, which
//! jeprof skips), under the path its memory map gives the object: what lets
//! `jeprof-compat symbolize --debug-dir` name a `symbolize:false` dump's frames later.

use jeprof_shim::jeprof_dumpfmt::{build_ids, maps, read};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<std::alloc::System> =
    jeprof_shim::Profiled::new(std::alloc::System);

#[test]
fn a_dump_carries_the_programs_build_id_under_its_mapped_path() {
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8; 512]).collect();
    let mut text = Vec::new();
    jeprof_shim::dump_to(&mut text).unwrap();
    drop(blocks);
    let profile = read::parse(&text).unwrap();
    assert!(
        profile.symbols.is_none(),
        "symbolize:false writes no symbols"
    );
    let ids = build_ids::from_annotations(&profile.annotations);
    let mapped = maps::parse_maps(profile.mapped_libraries.as_deref().unwrap());
    for id in &ids {
        assert!(
            mapped.iter().any(|m| m.path == id.path),
            "{} is not a file of the dump's memory map",
            id.path
        );
    }
    // readelf (binutils, which jeprof needs anyway) reads the program's id from the file.
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let out = std::process::Command::new("readelf")
        .arg("-n")
        .arg(&exe)
        .output()
        .expect("readelf runs");
    let notes = String::from_utf8_lossy(&out.stdout);
    let program = ids
        .iter()
        .find(|b| std::path::Path::new(&b.path) == exe)
        .unwrap_or_else(|| panic!("no build id for {}: {ids:?}", exe.display()));
    assert!(
        notes.contains(&format!("Build ID: {}", program.id)),
        "{} not in {notes}",
        program.id
    );
}
