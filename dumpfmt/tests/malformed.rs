//! Every malformed dump in `fixtures/malformed/` gives exactly the error recorded next to it
//! (`<name>.err`: `read_file`'s message for the path `fixtures/malformed/<name>.heap`), and never a
//! panic.

use std::path::Path;

#[test]
fn every_malformed_fixture_gives_exactly_the_recorded_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/malformed");
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "heap"))
        .collect();
    entries.sort();
    for path in entries {
        let stem = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        let recorded = std::fs::read_to_string(path.with_extension("err"))
            .unwrap_or_else(|e| panic!("{stem}.err: {e}"));
        let recorded = recorded.strip_suffix('\n').unwrap_or(&recorded);
        let expected = recorded.replace(
            &format!("fixtures/malformed/{stem}.heap"),
            &path.display().to_string(),
        );
        match jeprof_dumpfmt::read::read_file(&path) {
            Ok(_) => problems.push(format!("{stem}: read without error")),
            Err(e) if e.to_string() == expected => {}
            Err(e) => problems.push(format!("{stem}:\n  got:      {e}\n  recorded: {expected}")),
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} malformed fixtures");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn parse_reports_the_line_number_without_a_file() {
    let err = jeprof_dumpfmt::read::parse(b"heap_v2/8\n@ 0x1\n  t*: 1: 0 [0: 0]\n")
        .expect_err("objects without bytes");
    assert!(err.to_string().starts_with("line 3: expected "), "{err}");
}
