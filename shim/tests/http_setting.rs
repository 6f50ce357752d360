//! `JEPROF_SHIM=http:<ip:port>` starts the listener before `main` (the program calls nothing), with
//! `service:<name>` on every pprof sample; `http:localhost:<port>` is resolved and served;
//! `configure("http:...")` starts one at run time; a bad address is refused with the reason; a
//! port in use is shown in `stats().http_listener` and on stderr with what to do. One child
//! process per environment.

#[path = "common/http.rs"]
mod client;

use std::net::SocketAddr;
use std::time::Duration;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The child started with `JEPROF_SHIM=service:checkout,http:127.0.0.1:<port>`.
fn child_from_environment(port: u16) {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(
        jeprof_shim::stats().http_listener,
        jeprof_shim::ListenerState::Serving(addr)
    );
    let heap = client::get(addr, "/debug/pprof/heap").expect("served without a call");
    assert_eq!(heap.status, 200);
    let pb = jeprof_shim::jeprof_dumpfmt::pprof::read_gz(&heap.body).expect("pprof");
    let service = pb.string_table.iter().position(|s| s == "service");
    let checkout = pb.string_table.iter().position(|s| s == "checkout");
    assert!(
        service.is_some() && checkout.is_some(),
        "{:?}",
        pb.string_table
    );
    assert!(
        pb.sample.iter().all(|s| s
            .label
            .iter()
            .any(|l| Some(l.key as usize) == service && Some(l.str as usize) == checkout)),
        "a sample without service=checkout"
    );
}

/// The child started with `JEPROF_SHIM=http:localhost:<port>`: the host name is resolved.
fn child_from_host_name(port: u16) {
    let jeprof_shim::ListenerState::Serving(addr) = jeprof_shim::stats().http_listener else {
        panic!("not serving: {:?}", jeprof_shim::stats().http_listener);
    };
    assert!(addr.ip().is_loopback() && addr.port() == port, "{addr}");
    assert_eq!(client::get(addr, "/pprof/cmdline").unwrap().status, 200);
}

/// The child started with `JEPROF_SHIM=http:127.0.0.1:<port>` on a port another process holds.
fn child_port_in_use() {
    assert_eq!(
        jeprof_shim::stats().http_listener,
        jeprof_shim::ListenerState::Failed(std::io::ErrorKind::AddrInUse)
    );
}

/// The child started with no setting: `configure` starts the listener, and refuses a bad address.
fn child_configures(port: u16) {
    let err = jeprof_shim::configure("http:localhost").unwrap_err();
    assert!(
        err.to_string()
            .contains("`localhost` names no port (e.g. 127.0.0.1:6060 or localhost:6060)"),
        "{err}"
    );
    jeprof_shim::configure(&format!("http:127.0.0.1:{port}")).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(client::get(addr, "/pprof/cmdline").unwrap().status, 200);
    // Asking again for the same address starts nothing new (binding twice would fail).
    jeprof_shim::configure(&format!("http:127.0.0.1:{port}")).unwrap();
    assert_eq!(client::get(addr, "/pprof/symbol").unwrap().status, 200);
}

fn run_child(mode: &str, port: u16, env: Option<String>) -> std::process::Output {
    let mut cmd = jeprof_conformance::target_command(std::env::current_exe().unwrap());
    cmd.env("HTTP_SETTING_CHILD", mode)
        .env("HTTP_SETTING_PORT", port.to_string());
    match env {
        Some(v) => cmd.env("JEPROF_SHIM", v),
        None => cmd.env_remove("JEPROF_SHIM"),
    };
    cmd.output().unwrap()
}

fn main() {
    if let Ok(mode) = std::env::var("HTTP_SETTING_CHILD") {
        let port: u16 = std::env::var("HTTP_SETTING_PORT").unwrap().parse().unwrap();
        match mode.as_str() {
            "environment" => child_from_environment(port),
            "configure" => child_configures(port),
            "host_name" => child_from_host_name(port),
            "in_use" => child_port_in_use(),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
        return;
    }
    client::watchdog(Duration::from_secs(120), "http_setting");
    let port = jeprof_conformance::free_port();
    let out = run_child(
        "environment",
        port,
        Some(format!("service:checkout,http:127.0.0.1:{port}")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_child("configure", jeprof_conformance::free_port(), None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = jeprof_conformance::free_port();
    let out = run_child("host_name", port, Some(format!("http:localhost:{port}")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let out = run_child("in_use", port, Some(format!("http:127.0.0.1:{port}")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stderr.contains(&format!("cannot serve HTTP on 127.0.0.1:{port}"))
            && stderr.contains("the program runs on without the listener")
            && stderr.contains("choose a free port"),
        "{stderr}"
    );
    drop(held);
    let out = run_child("idle", 0, Some("http:nowhere".into()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("`nowhere` names no port"),
        "{stderr}"
    );
    println!("ok");
}
