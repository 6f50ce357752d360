//! Labels (`# label <key> <value>` lines): written before the first stack, read back in order
//! with their values verbatim, and a bad label is an error naming it (on writing) or its line (on
//! reading), never silently changed or dropped.

use jeprof_dumpfmt::read::{parse, read_stacks_with, ReadOptions};
use jeprof_dumpfmt::{Error, Estimate, Profile, Stack, WriteOptions};

fn labelled(labels: &[(&str, &str)]) -> Profile {
    let mut profile = Profile::new(524_288);
    let mut stack = Stack {
        frames: vec![0x401234, 0x401500],
        ..Stack::default()
    };
    stack
        .counts
        .inuse
        .add(&Estimate::of_sample(1_048_576.0, 524_288.0));
    profile.stacks.push(stack);
    profile.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    profile
}

fn malformed(text: &str) -> (usize, String) {
    match parse(text.as_bytes()) {
        Err(Error::Malformed {
            line_number,
            expected,
            ..
        }) => (line_number, expected),
        other => panic!("expected a malformed-line error, got {other:?} for {text:?}"),
    }
}

#[test]
fn labels_come_back_in_order_with_values_verbatim() {
    let labels = [
        ("program", "kv-store"),
        ("time", "2026-11-24T08:30:00Z"),
        ("Zone.a_b-9", "  spaces at both ends, # and : inside  "),
        ("empty", ""),
        ("unicode", "naïve — ünïcödé"),
        ("build_id", "0123456789abcdef"),
    ];
    let profile = labelled(&labels);
    let text = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
    // Before the first stack, each on a line of its own.
    let first_stack = text.find("\n@ ").expect("a stack");
    for (k, v) in labels {
        let line = format!("\n# label {k} {v}\n");
        let at = text
            .find(&line)
            .unwrap_or_else(|| panic!("{line:?} in\n{text}"));
        assert!(at < first_stack, "{k} after the first stack");
    }
    let back = parse(text.as_bytes()).unwrap();
    assert_eq!(back.labels, profile.labels);
    // A streaming reader has every label with the first stack.
    let mut seen = Vec::new();
    read_stacks_with(text.as_bytes(), &ReadOptions::default(), |so_far, _| {
        seen.push(so_far.labels.clone())
    })
    .unwrap();
    assert_eq!(seen, std::slice::from_ref(&profile.labels));
}

#[test]
fn a_dump_without_label_lines_has_no_labels_and_writes_none() {
    let text = "heap_v2/524288\n  t*: 1: 524288 [0: 0]\n# note: a plain annotation\n\
                @ 0x1\n  t*: 1: 524288 [0: 0]\nMAPPED_LIBRARIES:\n";
    let profile = parse(text.as_bytes()).unwrap();
    assert!(profile.labels.is_empty());
    let written = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
    assert!(!written.contains("# label"), "{written}");
}

#[test]
fn writing_a_bad_label_fails_naming_it_and_writes_nothing() {
    for (key, value, why) in [
        ("bad key", "v", "only ASCII letters"),
        ("", "v", "must not be empty"),
        ("k", "two\nlines", "line break"),
        ("k", "carriage\rreturn", "line break"),
    ] {
        let profile = labelled(&[(key, value)]);
        let mut out = Vec::new();
        let err = jeprof_dumpfmt::write::write(&profile, &mut out, &WriteOptions::default())
            .expect_err("a bad label");
        let err = err.to_string();
        assert!(
            err.contains(why) && err.contains(&format!("{key:?}")),
            "{err}"
        );
        assert!(out.is_empty(), "wrote {} bytes", out.len());
    }
    let repeated = labelled(&[("k", "1"), ("k", "2")]);
    let err = jeprof_dumpfmt::write::to_string(&repeated, &WriteOptions::default())
        .expect_err("a repeated key");
    assert!(err.to_string().contains("unique"), "{err}");
}

#[test]
fn a_bad_label_line_is_an_error_naming_its_line() {
    let head = "heap_v2/524288\n  t*: 1: 524288 [0: 0]\n";
    let tail = "@ 0x1\n  t*: 1: 524288 [0: 0]\nMAPPED_LIBRARIES:\n";
    for (labels, line, want) in [
        ("# label bad/key v\n", 3, "only ASCII letters"),
        ("# label \n", 3, "must not be empty"),
        (
            "# label k 1\n# label k 2\n",
            4,
            "each label key once (`k` is repeated)",
        ),
        ("# label k a\rb\n", 3, "line break"),
    ] {
        let (at, expected) = malformed(&format!("{head}{labels}{tail}"));
        assert_eq!(at, line, "{labels:?}: {expected}");
        assert!(expected.contains(want), "{labels:?}: {expected}");
    }
    // After a stack: a streaming reader could not hand it over with the stacks before it.
    let (at, expected) = malformed(&format!(
        "{head}@ 0x1\n  t*: 1: 524288 [0: 0]\n# label k v\nMAPPED_LIBRARIES:\n"
    ));
    assert_eq!(at, 5);
    assert!(expected.contains("before the first"), "{expected}");
    let (at, _) = malformed(&format!(
        "{head}@ 0x1\n# label k v\n  t*: 1: 524288 [0: 0]\n"
    ));
    assert_eq!(at, 4);
}

#[test]
fn a_dump_cut_inside_or_after_a_label_line_is_known_to_be_cut() {
    let profile = labelled(&[("program", "kv-store"), ("time", "2026-11-24T08:30:00Z")]);
    let text = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
    let start = text.find("# label time").unwrap();
    let end = start + text[start..].find('\n').unwrap() + 1;
    for cut in start + 3..=end {
        match parse(&text.as_bytes()[..cut]) {
            Err(Error::Truncated { .. }) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn a_label_line_is_known_by_its_word_however_the_comment_is_spaced() {
    // The shape the fuzzer found: `#label …` (no blank after `#`) used to read as an annotation
    // whose key began `label `, and written back as `# label …: …` it read as a label.
    let text =
        "heap_v2/524288\n  t*: 2: 1048576 [0: 0]\n#label program kv-s# x 08:01 /usr/bin/kv\n\
                #\tlabel host a\n@ 0x401234\n  t*: 2: 1048576 [0: 0]\n\nMAPPED_LIBRARIES:\n";
    let profile = parse(text.as_bytes()).unwrap();
    assert_eq!(
        profile.labels,
        [
            (
                "program".to_string(),
                "kv-s# x 08:01 /usr/bin/kv".to_string()
            ),
            ("host".to_string(), "a".to_string()),
        ]
    );
    assert!(profile.annotations.is_empty(), "{:?}", profile.annotations);
    let written = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
    assert_eq!(parse(written.as_bytes()).unwrap().labels, profile.labels);
}

#[test]
fn an_annotation_whose_key_starts_like_another_comment_reads_back_as_an_annotation() {
    let mut profile = labelled(&[]);
    for key in [
        "label program",
        " var 1 2",
        "scope\ttask",
        "labels",
        "variance",
    ] {
        profile
            .annotations
            .push((key.to_string(), "value".to_string()));
    }
    let written = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
    let back = parse(written.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert!(back.labels.is_empty(), "{:?}\n{written}", back.labels);
    let keys: Vec<&str> = back.annotations.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "label_program",
            "var_1 2",
            "scope_task",
            "labels",
            "variance"
        ]
    );
}
