//! Debian's nginx, unmodified and preloaded, with 2 worker processes on a loopback port, answers
//! `ab`'s 40,000 requests (a new connection each, 8 at a time) with no failed request and no
//! worker crashed; at a graceful stop (`SIGQUIT`) the master and both workers write their dumps
//! at exit (`dump_on_exit` with `%p`), `jeprof-compat report` reads every one, and the reports
//! name nginx's own allocation functions (`ngx_palloc`, `ngx_alloc`, ...: its dynamic symbol table
//! exports them; Debian's debug symbols are not at hand). As root the workers run as `nobody`,
//! as Debian's configuration has them run as an unprivileged user. Without nginx or `ab` the test
//! says so and passes, except under CI (`CI=true`), where `.ci/run` installs `nginx` and
//! `apache2-utils`.
//!
//! x86_64 only (the host's servers; jeprof-compat is a dev-dependency there alone, so that the
//! aarch64 cross build does not compile it).
#![cfg(target_arch = "x86_64")]

mod common;
mod servers;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use servers::{find_tool, run_ok, wait_until, Phases, Server};

/// Requests, and how many at a time (each on a new connection: nginx's per-connection pools and
/// per-request allocations are what runs).
const REQUESTS: u32 = 40_000;
const CONCURRENCY: u32 = 8;

/// R: small, so that the few hundred KiB each nginx process holds give samples.
const SAMPLE_RATE: u64 = 4096;

/// Seconds any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// The server's configuration: everything under `dir`, two workers, `port` on loopback, one static
/// page and the page's directory listing.
fn config(dir: &std::path::Path, port: u16) -> String {
    let d = dir.display();
    // As root the master switches its workers to an unprivileged user, as packaged nginx does.
    let user = if servers::is_root() {
        "user nobody nogroup;"
    } else {
        ""
    };
    format!(
        "{user}
daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 256; }}
http {{
    access_log off;
    default_type text/html;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {d}/www;
        location /list/ {{ autoindex on; }}
    }}
}}
"
    )
}

/// `<field>: value` from `ab`'s report.
fn ab_figure<'r>(report: &'r str, field: &str) -> &'r str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field:?} in ab's report:\n{report}"))
        .trim()
}

#[test]
fn nginx_preloaded_answers_ab_without_a_failure_and_every_process_dump_reads() {
    let nginx = find_tool("nginx", &[PathBuf::from("/usr/sbin")]);
    let ab = find_tool("ab", &[]);
    let missing: Vec<&str> = [("nginx", &nginx), ("ab", &ab)]
        .into_iter()
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| t)
        .collect();
    if !servers::tools_present("nginx_server", &missing, "nginx apache2-utils") {
        return;
    }
    let (nginx, ab) = (nginx.unwrap(), ab.unwrap());
    let mut phases = Phases::new();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let dumps = dir.join("dumps");
    for sub in ["dumps", "tmp", "www/list"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    // The workers (`nobody` under root) write their dumps here.
    servers::set_mode(dir, 0o755);
    servers::set_mode(&dumps, 0o777);
    let page = "<html><body>".to_string() + &"jeprof-shim ".repeat(100) + "</body></html>\n";
    std::fs::write(dir.join("www/index.html"), &page).unwrap();
    for i in 0..20 {
        std::fs::write(dir.join(format!("www/list/file{i}.txt")), "x").unwrap();
    }
    // Loaded by the master before its workers switch users: the build's own copy.
    let library = common::preload_library();
    let port = jeprof_conformance::free_port();
    std::fs::write(dir.join("nginx.conf"), config(dir, port)).unwrap();

    let mut server = Command::new(&nginx);
    server
        .env("LD_PRELOAD", &library)
        .env(
            "JEPROF_SHIM",
            format!(
                "sample_rate:{SAMPLE_RATE},dump_on_exit:{}",
                dumps.join("nginx.%p.heap").display()
            ),
        )
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Server(server.spawn().expect("cannot start nginx"));
    let error_log = || std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    wait_until("nginx accepting connections", STEP_LIMIT, || {
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "nginx exited:\n{}",
            error_log()
        );
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    phases.done("nginx started");

    let mut failed = Vec::new();
    for (path, requests) in [("/index.html", REQUESTS), ("/list/", REQUESTS / 10)] {
        let mut command = Command::new(&ab);
        command
            .args(["-q", "-n", &requests.to_string()])
            .args(["-c", &CONCURRENCY.to_string()])
            .arg(format!("http://127.0.0.1:{port}{path}"));
        let report = run_ok(command, STEP_LIMIT);
        assert_eq!(
            ab_figure(&report, "Complete requests"),
            requests.to_string(),
            "{report}"
        );
        failed.push(ab_figure(&report, "Failed requests").to_string());
        assert_eq!(failed.last().unwrap(), "0", "{report}");
        assert!(!report.contains("Non-2xx responses"), "{report}");
        phases.done(&format!("ab {path}"));
    }

    // A graceful stop: the workers finish, then the master; each leaves through exit().
    let pid = server.0.id();
    let mut kill = Command::new("kill");
    kill.args(["-QUIT", &pid.to_string()]);
    run_ok(kill, STEP_LIMIT);
    let mut status = None;
    wait_until("nginx stopping", STEP_LIMIT, || {
        status = server.0.try_wait().unwrap();
        status.is_some()
    });
    phases.done("stop");
    let log = error_log();
    assert!(status.unwrap().success(), "nginx: {status:?}\n{log}");
    // nginx's master logs each worker's end (notice level): "worker process N exited on signal
    // S" for a crash, "... exited with code C" else.
    assert!(!log.contains("exited on signal"), "{log}");
    let clean_exits = log
        .lines()
        .filter(|l| l.contains("worker process") && l.ends_with("exited with code 0"))
        .count();
    assert_eq!(clean_exits, 2, "{log}");
    assert_eq!(servers::cores_in(dir), Vec::<PathBuf>::new());

    let read = servers::report_every_dump(&dumps);
    phases.done("reports");
    assert_eq!(
        read.count,
        3,
        "the master and 2 workers: {}",
        dumps.display()
    );
    assert!(
        read.names_any(&[
            "ngx_palloc",
            "ngx_pnalloc",
            "ngx_pcalloc",
            "ngx_alloc",
            "ngx_calloc"
        ]),
        "no ngx_*alloc in the reports: {:?}",
        read.names
    );
    assert!(
        read.names.iter().filter(|n| n.starts_with("ngx_")).count() >= 5,
        "fewer than 5 ngx_* functions in the reports: {:?}",
        read.names
    );
    println!(
        "nginx: {} requests, {failed:?} failed; {} dumps read, {} functions named; {:.1} s",
        REQUESTS + REQUESTS / 10,
        read.count,
        read.names.len(),
        phases.total().as_secs_f64()
    );
}
