//! A C++ program built without frame pointers (`programs/sites.cpp`), preloaded: memory from
//! `operator new`, `new[]`, `std::string`, `std::vector` and `std::make_unique` (which libstdc++
//! serves with the exported `malloc`) is estimated per function within its intervals, the dump's
//! symbol section names the functions demangled, and the real jeprof prints them with no binary.

mod common;

use std::path::PathBuf;

use common::{per_site, preloaded, read_dump, run_ok, truths};

/// The sites of `sites.cpp`, as the program prints them.
const SITES: [&str; 5] = [
    "cxxsites::Holder::make_nodes",
    "cxxsites::make_arrays",
    "cxxsites::make_strings",
    "cxxsites::make_vectors<double>",
    "cxxsites::make_and_delete",
];

/// A demangled name is the site's when it is the site's function: `<site>(` parameters follow,
/// a return type may precede (template functions').
fn is_site(name: &str, site: &str) -> bool {
    name.starts_with(&format!("{site}(")) || name.contains(&format!(" {site}("))
}

#[test]
fn cxx_sites_estimates_cover_the_truth_with_demangled_names_jeprof_prints() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("sites-cxx");
    common::compile(
        &jeprof_conformance::target_cxx_compiler(),
        &[common::program_source("sites.cpp")],
        common::PROGRAM_FLAGS,
        &program,
    );
    let mut runs = Vec::new();
    let mut last_dump = PathBuf::new();
    for seed in 1..=8 {
        let dump = dir.path().join(format!("cxx-{seed}.prof"));
        let settings = format!("sample_rate:65536,seed:{seed}");
        let output = run_ok(preloaded(
            common::program(&program),
            &format!("{settings},dump_on_exit:{}", dump.display()),
        ));
        let truths = truths(&output.stdout);
        let profile = read_dump(&dump);
        let names: Vec<&String> = profile
            .symbols
            .iter()
            .flat_map(|s| s.names.values())
            .flatten()
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with("_Z")),
            "every C++ name is demangled: {names:#?}"
        );
        runs.push(common::SiteRun {
            label: settings,
            estimates: per_site(&profile, &SITES, is_site),
            truths: SITES.iter().map(|site| truths[*site]).collect(),
        });
        last_dump = dump;
    }
    common::check_estimates(&SITES, &runs);

    // jeprof prints function names without parameters or template arguments.
    let (stdout, text) = common::jeprof_inuse_text(&last_dump);
    for site in &SITES[..4] {
        let short = site.split('<').next().unwrap_or(site);
        assert!(
            text.rows
                .iter()
                .any(|(name, (_, cum))| name.contains(short) && *cum > 0.0),
            "jeprof does not name {short}:\n{}",
            stdout
        );
    }
    assert!(
        !stdout.contains("_ZN"),
        "jeprof prints mangled names:\n{}",
        stdout
    );
}
