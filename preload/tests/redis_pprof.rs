//! What pprof readers call the program, for Debian's `redis-server` preloaded: `/usr/bin/redis-server`
//! is a link to `redis-check-rdb`, and the first library a stack reaches may be libcrypto, yet
//! `go tool pprof -top` says `File: redis-server`, and the program's own mapping is the first one
//! (pprof, Parca and Pyroscope take the first for the program) with the program's build id, in
//! the listener's `/debug/pprof/heap` and in `jeprof-compat`'s `pprof` and `otlp` output from the
//! dump at exit; the `program` label is `redis-server`. Without redis (or `go`) the test says so
//! and passes, except under CI (`CI=true`).
//!
//! x86_64 only (the host's redis; jeprof-compat is a dev-dependency there alone).
#![cfg(target_arch = "x86_64")]

#[path = "../../shim/tests/common/http.rs"]
mod client;
mod common;
mod servers;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use jeprof_dumpfmt::pprof::PbProfile;
use servers::{find_tool, run_ok, wait_until, Server};

/// Seconds any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// The first mapping's file and build id, and the `program=` and `build_id=` comments.
fn described(pb: &PbProfile) -> (String, String, Option<String>, Option<String>) {
    let text = |i: i64| pb.string_table[i as usize].clone();
    let first = pb.mapping.first().expect("a mapping");
    let comment = |key: &str| {
        pb.comment
            .iter()
            .find_map(|&c| text(c).strip_prefix(&format!("{key}=")).map(String::from))
    };
    (
        text(first.filename),
        text(first.build_id),
        comment("program"),
        comment("build_id"),
    )
}

/// `go tool pprof -top`'s `File:` line for the profile at `source` (a file or a URL).
fn pprof_file_line(go: &Path, source: &str, scratch: &Path) -> String {
    let mut command = Command::new(go);
    command
        .args(["tool", "pprof", "-top", source])
        .env("PPROF_TMPDIR", scratch)
        .env("HOME", scratch);
    let top = run_ok(command, STEP_LIMIT);
    top.lines()
        .find(|l| l.starts_with("File: "))
        .unwrap_or_else(|| panic!("no File: line:\n{top}"))
        .to_string()
}

#[test]
fn pprof_of_a_preloaded_server_names_the_program_not_its_first_library() {
    let tools = ["redis-server", "redis-cli"].map(|t| find_tool(t, &[]));
    let missing: Vec<&str> = ["redis-server", "redis-cli"]
        .into_iter()
        .zip(&tools)
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| t)
        .collect();
    if !servers::tools_present("redis_pprof", &missing, "redis-server redis-tools") {
        return;
    }
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    // The name it is started by, found on PATH as a shell finds it.
    let started_as = tools[0].clone().unwrap();
    let mapped = std::fs::canonicalize(&started_as).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (port, http_port) = (
        jeprof_conformance::free_port(),
        jeprof_conformance::free_port(),
    );
    let dump = dir.path().join("redis.heap");
    let mut command = common::preloaded(
        Command::new("redis-server"),
        &format!(
            "sample_rate:4096,dump_on_exit:{},http:127.0.0.1:{http_port}",
            dump.display()
        ),
    );
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Server(command.spawn().expect("cannot start redis-server"));
    wait_until("redis-server accepting connections", STEP_LIMIT, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    // The listener's profile.
    let addr: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
    let heap = client::get(addr, "/debug/pprof/heap").expect("the http listener answers");
    assert_eq!(heap.status, 200, "{}", heap.text());
    let pb = jeprof_dumpfmt::pprof::read_gz(&heap.body).expect("a gzipped profile");
    let (file, build_id, program, program_build_id) = described(&pb);
    if mapped != started_as {
        assert_eq!(
            file,
            started_as.display().to_string(),
            "the started-as path"
        );
    }
    assert_eq!(program.as_deref(), Some("redis-server"));
    assert!(!build_id.is_empty(), "the first mapping has no build id");
    assert_eq!(
        Some(&build_id),
        program_build_id.as_ref(),
        "not the program's"
    );
    // From the saved profile, and from the URL (where pprof also posts the frames nothing named
    // to the listener's /debug/pprof/symbol, and stops if that fails).
    let served = dir.path().join("served.pb.gz");
    std::fs::write(&served, &heap.body).unwrap();
    let url = format!("http://127.0.0.1:{http_port}/debug/pprof/heap");
    for source in [served.to_str().unwrap(), &url] {
        assert_eq!(
            pprof_file_line(&go, source, dir.path()),
            "File: redis-server"
        );
    }

    let mut shutdown = Command::new("redis-cli");
    shutdown.args(["-p", &port.to_string(), "SHUTDOWN", "NOSAVE"]);
    let _ = servers::run_bounded(shutdown, STEP_LIMIT);
    wait_until("redis-server exiting", STEP_LIMIT, || {
        server.0.try_wait().unwrap().is_some()
    });

    // jeprof-compat's pprof and OTLP output from the dump at exit.
    let paths = [dump.clone()];
    let symbolize = jeprof_compat::SymbolizeOptions::default();
    let policy = jeprof_compat::ReadPolicy::default();
    let options = jeprof_compat::pprof::PprofOptions::default();
    let pb = jeprof_compat::pprof::build_files(&paths, &symbolize, &options, &policy).unwrap();
    let (dump_file, dump_build_id, _, _) = described(&pb);
    assert_eq!((&dump_file, &dump_build_id), (&file, &build_id));
    let written = dir.path().join("redis.pb.gz");
    let mut out = std::fs::File::create(&written).unwrap();
    jeprof_compat::pprof::write_gz(&pb, &mut out).unwrap();
    assert_eq!(
        pprof_file_line(&go, written.to_str().unwrap(), dir.path()),
        "File: redis-server"
    );
    let request = jeprof_compat::otlp::build_files(&paths, &symbolize, &options, &policy).unwrap();
    let d = request.dictionary.as_ref().expect("a dictionary");
    // Index 0 is the zero value every OTLP table starts with.
    let first = &d.mapping_table[1];
    assert_eq!(d.string_table[first.filename_strindex as usize], file);
}
