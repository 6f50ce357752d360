//! The churn's self-check passes with the children cargo built, and fails when a child fails or
//! prints nothing: what lets CI rely on it to notice a bench that no longer runs.

use std::path::PathBuf;

use jeprof_bench::modes::Binaries;
use jeprof_bench::self_check;

fn built() -> Binaries {
    Binaries {
        plain: PathBuf::from(env!("CARGO_BIN_EXE_churn-plain")),
        shim: PathBuf::from(env!("CARGO_BIN_EXE_churn-shim")),
    }
}

#[test]
fn self_check_passes_with_the_built_children() {
    if let Err((report, problems)) = self_check::run(&built()) {
        panic!("{report}\nproblems:\n{}", problems.join("\n"));
    }
}

#[test]
fn self_check_fails_when_a_child_prints_nothing() {
    let binaries = Binaries {
        shim: PathBuf::from("/bin/true"),
        ..built()
    };
    let (_, problems) = self_check::run(&binaries).expect_err("a silent shim child passed");
    assert!(
        problems.iter().any(|p| p.contains("printed no cpu_ns")),
        "{problems:#?}"
    );
    assert!(problems.iter().any(|p| p.starts_with("sample cost, fp")));
    assert!(problems.iter().any(|p| p.starts_with("dump")));
}

#[test]
fn self_check_fails_when_a_child_exits_with_an_error() {
    let binaries = Binaries {
        plain: PathBuf::from("/bin/false"),
        ..built()
    };
    let (_, problems) = self_check::run(&binaries).expect_err("a failing plain child passed");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("jemalloc, round 0") && p.contains("exit status: 1")),
        "{problems:#?}"
    );
}
