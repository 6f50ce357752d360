//! Scope lines (`# scope …`, [`jeprof_dumpfmt::scopes`]) through the writer and the reader: they
//! come back with their figures, and they are comments, so a dump is the same without them.

use jeprof_dumpfmt::scopes::{scope_profile, scope_totals};
use jeprof_dumpfmt::{Counts, Estimate, Profile, ScopeStack, Stack, WriteOptions};

fn scoped(scope: &str, frames: &[u64], bytes: f64) -> ScopeStack {
    ScopeStack {
        scope: scope.into(),
        frames: frames.to_vec(),
        inuse: Estimate {
            objects: 1.0,
            bytes,
            objects_variance: 0.5,
            bytes_variance: bytes,
        },
    }
}

#[test]
fn scope_lines_survive_a_write_and_read_and_stay_comments() {
    let mut p = Profile::new(4096);
    for (frames, bytes) in [(vec![0x10u64, 0x20], 8192.0), (vec![0x30], 4096.0)] {
        p.stacks.push(Stack {
            frames,
            counts: Counts {
                inuse: Estimate {
                    objects: 2.0,
                    bytes,
                    objects_variance: 1.0,
                    bytes_variance: 1e6,
                },
                accum: Estimate::default(),
            },
            threads: Vec::new(),
        });
    }
    p.scopes = vec![
        scoped("query 1", &[0x10, 0x20], 6000.0),
        scoped("query 2", &[0x10, 0x20], 2192.0),
        scoped("query 1", &[0x30], 4096.0),
    ];
    let text = jeprof_dumpfmt::write::to_string(&p, &WriteOptions::default()).unwrap();
    assert_eq!(text.matches("\n  # scope ").count(), 3, "{text}");
    let back = jeprof_dumpfmt::read::parse(text.as_bytes()).unwrap();
    assert_eq!(back.scopes.len(), 3);
    let totals = scope_totals(&back);
    assert!((totals["query 1"].bytes - 10096.0).abs() < 1e-6);
    assert!((totals["query 2"].bytes - 2192.0).abs() < 1e-6);
    // Without the scope lines the dump is the same one: they are comments.
    let mut plain = p.clone();
    plain.scopes.clear();
    let plain_text = jeprof_dumpfmt::write::to_string(&plain, &WriteOptions::default()).unwrap();
    let stripped: String = text
        .lines()
        .filter(|l| !l.starts_with("  # scope "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(stripped, plain_text);
}

#[test]
fn a_scope_profile_holds_only_that_scopes_stacks_and_totals_sum_per_label() {
    let mut p = Profile::new(512);
    p.scopes = vec![
        scoped("a", &[1, 2], 100.0),
        scoped("b", &[1, 2], 50.0),
        scoped("a", &[3], 10.0),
    ];
    let a = scope_profile(&p, "a");
    assert_eq!(a.stacks.len(), 2);
    assert_eq!(a.totals().inuse.bytes, 110.0);
    assert_eq!(a.totals().accum.bytes, 0.0);
    let totals = scope_totals(&p);
    assert_eq!(totals["a"].bytes, 110.0);
    assert_eq!(totals["b"].bytes, 50.0);
    assert!(scope_profile(&p, "c").stacks.is_empty());
}
