//! Debian's PostgreSQL, unmodified and preloaded, under `pgbench` with 8 clients (a server process
//! per connection, each forked from the postmaster): every transaction succeeds, no process
//! crashes, every process writes its dump at exit (`dump_on_exit` with `%p`), `jeprof-compat
//! report` reads every one, and the reports name postgres's own allocation functions (`palloc`,
//! `MemoryContext*`, `AllocSet*`: its dynamic symbol table exports them; Debian's debug symbols
//! are not at hand). postgres refuses to run as root: as root, the test runs it (and `initdb`,
//! `pgbench`) as the `postgres` user, in a temporary directory that user owns. Without the
//! programs the test says so and passes, except under CI (`CI=true`), where `.ci/run` installs
//! `postgresql`.
//!
//! x86_64 only (the host's servers; jeprof-compat is a dev-dependency there alone, so that the
//! aarch64 cross build does not compile it).
#![cfg(target_arch = "x86_64")]

mod common;
mod servers;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use servers::{find_tool, run_ok, wait_until, Phases, Server};

/// Clients, and transactions each: 8 × 1,000 = 8,000 TPC-B-like transactions over 8 connections
/// (about 6 s with the test build of the library on two loaded cores).
const CLIENTS: u32 = 8;
const TRANSACTIONS_PER_CLIENT: u32 = 1000;

/// Then transactions each over a new connection per transaction (`pgbench -C`): 8 × 5 = 40 more
/// server processes forked, run and ended, each with its dump.
const CONNECTING_TRANSACTIONS_PER_CLIENT: u32 = 5;

/// R: small, so that each backend's few hundred KiB give samples.
const SAMPLE_RATE: u64 = 8192;

/// Seconds any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// Where Debian keeps a PostgreSQL version's programs (`/usr/lib/postgresql/<major>/bin`), the
/// newest first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let e = e.ok()?;
                    let major = e.file_name().to_str()?.parse().ok()?;
                    Some((major, e.path().join("bin")))
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs.into_iter().map(|(_, d)| d).collect()
}

/// Runs programs as the user postgres accepts: this one, or `postgres` when this one is root.
struct Runner {
    ids: Option<(u32, u32)>,
}

impl Runner {
    fn command(&self, program: &Path) -> Command {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(program);
        if let Some((uid, gid)) = self.ids {
            // The standard library drops root's supplementary groups before the switch.
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Gives `path` to that user.
    fn own(&self, path: &Path) {
        if let Some((uid, gid)) = self.ids {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        }
    }
}

/// `number of <what>: N` from pgbench's summary.
fn pgbench_figure(report: &str, what: &str) -> String {
    let prefix = format!("number of {what}: ");
    report
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {what:?} in pgbench's report:\n{report}"))
        .to_string()
}

#[test]
fn postgres_preloaded_runs_pgbench_without_a_failure_and_every_process_dump_reads() {
    let dirs = debian_bin_dirs();
    let tools: Vec<(&str, Option<PathBuf>)> = ["initdb", "postgres", "pgbench"]
        .into_iter()
        .map(|t| (t, find_tool(t, &dirs)))
        .collect();
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| *t)
        .collect();
    if !servers::tools_present("postgres_server", &missing, "postgresql") {
        return;
    }
    let [initdb, postgres, pgbench] = [0, 1, 2].map(|i| tools[i].1.clone().unwrap());
    let runner = Runner {
        ids: servers::is_root().then(|| {
            servers::user_ids("postgres").expect("a `postgres` user (Debian's package adds it)")
        }),
    };
    let mut phases = Phases::new();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let (data, dumps) = (dir.join("data"), dir.join("dumps"));
    std::fs::create_dir(&dumps).unwrap();
    let library = match runner.ids {
        Some(_) => servers::library_in(dir),
        None => common::preload_library(),
    };
    for path in [dir, dumps.as_path()] {
        runner.own(path);
    }

    let mut init = runner.command(&initdb);
    init.arg("-D").arg(&data);
    init.args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]);
    run_ok(init, STEP_LIMIT);
    phases.done("initdb");

    let port = jeprof_conformance::free_port();
    let log = dir.join("postgres.log");
    let mut server = runner.command(&postgres);
    server
        .env("LD_PRELOAD", &library)
        .env(
            "JEPROF_SHIM",
            format!(
                "sample_rate:{SAMPLE_RATE},dump_on_exit:{}",
                dumps.join("postgres.%p.heap").display()
            ),
        )
        .arg("-D")
        .arg(&data)
        .arg("-k")
        .arg(dir)
        .args(["-p", &port.to_string(), "-c", "listen_addresses="])
        // What pgbench waits on is the disk, which this test is not about.
        .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut server = Server(server.spawn().expect("cannot start postgres"));
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("postgres accepting connections", STEP_LIMIT, || {
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "postgres exited:\n{}",
            server_log()
        );
        server_log().contains("ready to accept connections")
    });
    phases.done("postgres started");

    let pgbench_command = |args: &[&str]| {
        let mut command = runner.command(&pgbench);
        command
            .arg("-h")
            .arg(dir)
            .args(["-p", &port.to_string(), "-U", "postgres"])
            .args(args)
            .arg("postgres");
        command
    };
    run_ok(pgbench_command(&["-i", "-q"]), STEP_LIMIT);
    phases.done("pgbench -i");
    let (clients, transactions) = (CLIENTS.to_string(), TRANSACTIONS_PER_CLIENT.to_string());
    let report = run_ok(
        pgbench_command(&["-c", &clients, "-j", "2", "-t", &transactions]),
        STEP_LIMIT,
    );
    phases.done("pgbench");
    let total = CLIENTS * TRANSACTIONS_PER_CLIENT;
    assert_eq!(
        pgbench_figure(&report, "transactions actually processed"),
        format!("{total}/{total}"),
        "{report}"
    );
    let failed = pgbench_figure(&report, "failed transactions");
    assert!(failed.starts_with("0 "), "{report}");
    let connecting = CONNECTING_TRANSACTIONS_PER_CLIENT.to_string();
    let report = run_ok(
        pgbench_command(&["-C", "-c", &clients, "-j", "2", "-t", &connecting]),
        STEP_LIMIT,
    );
    phases.done("pgbench -C");
    let connecting_total = CLIENTS * CONNECTING_TRANSACTIONS_PER_CLIENT;
    assert_eq!(
        pgbench_figure(&report, "transactions actually processed"),
        format!("{connecting_total}/{connecting_total}"),
        "{report}"
    );
    assert!(
        pgbench_figure(&report, "failed transactions").starts_with("0 "),
        "{report}"
    );

    // A fast shutdown (SIGINT): the backends and helpers exit, then the postmaster, each
    // through exit() and its dump.
    let pid = server.0.id();
    run_ok(
        {
            let mut kill = Command::new("kill");
            kill.args(["-INT", &pid.to_string()]);
            kill
        },
        STEP_LIMIT,
    );
    let mut status = None;
    wait_until("postgres shutting down", STEP_LIMIT, || {
        status = server.0.try_wait().unwrap();
        status.is_some()
    });
    phases.done("shutdown");
    let log_text = server_log();
    assert!(
        status.unwrap().success(),
        "postgres: {status:?}\n{log_text}"
    );
    // A crashed child is logged as "... was terminated by signal N" (the logical replication
    // launcher's "exited with exit code 1" is its normal end at shutdown).
    for crash in ["terminated by signal", "PANIC"] {
        assert!(
            !log_text.contains(crash),
            "{crash:?} in the log:\n{log_text}"
        );
    }
    assert_eq!(servers::cores_in(&data), Vec::<PathBuf>::new());

    let read = servers::report_every_dump(&dumps);
    phases.done("reports");
    // The postmaster, its helpers (checkpointer, background writer, WAL writer, autovacuum
    // launcher, ...) and a backend per connection: pgbench -i's, the 8 clients', and more.
    assert!(
        read.count > (CLIENTS + connecting_total) as usize + 4,
        "{} dumps in {}",
        read.count,
        dumps.display()
    );
    assert!(
        read.names_any(&["palloc", "MemoryContext", "AllocSet"]),
        "no palloc/MemoryContext*/AllocSet* in the reports: {:?}",
        read.names
    );
    println!(
        "postgres: {total} + {connecting_total} (a connection each) transactions, {failed} \
         failed; {} dumps read, {} functions named; {:.1} s",
        read.count,
        read.names.len(),
        phases.total().as_secs_f64()
    );
}
