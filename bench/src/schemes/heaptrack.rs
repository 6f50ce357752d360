//! Real servers' allocation streams: recorded with heaptrack's preload library (raw format, jemalloc
//! preloaded beneath it so the addresses are jemalloc's) and read back into a [`Trace`].
//!
//! # heaptrack's raw format (libheaptrack, file version 3)
//! One record per line, numbers in hexadecimal, strings prefixed by their length:
//!
//! ```text
//! x <len> <path>                      the executable
//! m <len> <name> <base> (<off> <len>)*  a loaded module and its segments ("x": the executable;
//!                                      "m 1 -" starts a new module list after dlopen/dlclose)
//! t <ip> <parent>                     trace node k (numbered from 1 in order): a return address and
//!                                      the node of its caller (0: the root)
//! + <size> <trace> <ptr>              malloc (calloc, realloc's new block, …) of `size` bytes
//! - <ptr>                             free
//! c <ms>                              milliseconds since the process started (every 10 ms or so)
//! ```
//!
//! Other records (timestamps, RSS, the header) are skipped. A call site is the leaf-most frame of an
//! allocation's trace that lies in the executable (the server's own code, rather than libc or
//! jemalloc) together with the next frame of the executable above it: the servers wrap malloc
//! (redis's `zmalloc`, nginx's `ngx_alloc`), so the leaf-most frame alone would name the wrapper for
//! nearly every allocation. An allocation with no frame in the executable is attributed to its trace
//! node. Sites are named by `addr2line` where the executable has symbols.

use std::collections::HashMap;
use std::io::BufRead;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::trace::Trace;

/// The executable's mapped segments, as absolute address ranges.
#[derive(Debug, Default)]
struct Executable {
    ranges: Vec<(u64, u64)>,
    base: u64,
}

impl Executable {
    fn offset_of(&self, ip: u64) -> Option<u64> {
        self.ranges
            .iter()
            .any(|&(start, end)| (start..end).contains(&ip))
            .then(|| ip - self.base)
    }
}

fn hex(field: Option<&str>, line: usize, what: &str) -> Result<u64, String> {
    let field = field.ok_or_else(|| format!("line {line}: {what} missing"))?;
    u64::from_str_radix(field, 16)
        .map_err(|_| format!("line {line}: {what} {field:?} is not hexadecimal"))
}

/// Reads a raw heaptrack file into a trace of at most `max_events` events. The snapshot is the first
/// timestamp at or after `snapshot_ms` (when the load generator finished), or else the last
/// allocation before the teardown's frees ([`Trace::drop_teardown`]). Sites are named
/// `<executable>+0x<leaf offset> ← 0x<caller offset>` (prefixed with the functions where `addr2line`
/// finds them), or `trace #<k>`.
pub fn read_raw(
    input: impl BufRead,
    max_events: usize,
    snapshot_ms: Option<u64>,
) -> Result<Trace, String> {
    let mut trace = Trace::default();
    let mut exe = Executable::default();
    let mut exe_name = String::from("exe");
    let mut exe_path: Option<PathBuf> = None;
    // Per site: the executable offsets it was named from (empty for `trace #k`).
    let mut site_offsets: Vec<Vec<u64>> = Vec::new();
    // Trace node k is nodes[k - 1] = (ip, parent).
    let mut nodes: Vec<(u64, u64)> = Vec::new();
    let mut site_of_node: HashMap<u64, u32> = HashMap::new();
    let mut site_of_key: HashMap<String, u32> = HashMap::new();
    let mut live: HashMap<u64, u32> = HashMap::new();
    let mut at_snapshot = false;
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", n + 1))?;
        let n = n + 1;
        let mut f = line.split(' ');
        match f.next() {
            Some("x") => {
                let _len = f.next();
                if let Some(path) = f.next() {
                    exe_path = Some(PathBuf::from(path));
                    exe_name = Path::new(path)
                        .file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| path.to_string());
                }
            }
            Some("m") => {
                let _len = f.next();
                if f.next() != Some("x") {
                    continue;
                }
                let base = hex(f.next(), n, "module base")?;
                let fields: Vec<&str> = f.collect();
                exe = Executable {
                    base,
                    ranges: fields
                        .chunks(2)
                        .filter(|c| c.len() == 2)
                        .map(|c| {
                            let off = hex(Some(c[0]), n, "segment offset")?;
                            let len = hex(Some(c[1]), n, "segment length")?;
                            Ok((base + off, base + off + len))
                        })
                        .collect::<Result<_, String>>()?,
                };
            }
            Some("t") => {
                let ip = hex(f.next(), n, "trace ip")?;
                let parent = hex(f.next(), n, "trace parent")?;
                nodes.push((ip, parent));
            }
            Some("+") => {
                let size = hex(f.next(), n, "size")?;
                let node = hex(f.next(), n, "trace index")?;
                let ptr = hex(f.next(), n, "pointer")?;
                let site = match site_of_node.get(&node) {
                    Some(&s) => s,
                    None => {
                        let offsets = own_frames(&nodes, &exe, node);
                        let key = if offsets.is_empty() {
                            format!("trace #{node}")
                        } else {
                            let hex: Vec<String> =
                                offsets.iter().map(|o| format!("0x{o:x}")).collect();
                            format!("{exe_name}+{}", hex.join(" ← "))
                        };
                        let s = *site_of_key.entry(key.clone()).or_insert_with(|| {
                            site_offsets.push(offsets);
                            trace.add_site(key)
                        });
                        site_of_node.insert(node, s);
                        s
                    }
                };
                // A block at an address still live was freed where heaptrack did not see it.
                if let Some(old) = live.insert(ptr, trace.allocations.len() as u32) {
                    trace.free(old);
                }
                trace.alloc(ptr, size, site);
            }
            Some("-") => {
                let ptr = hex(f.next(), n, "pointer")?;
                if let Some(index) = live.remove(&ptr) {
                    trace.free(index);
                }
            }
            Some("c") => {
                let ms = hex(f.next(), n, "timestamp")?;
                if snapshot_ms.is_some_and(|at| ms >= at) {
                    at_snapshot = true;
                    break;
                }
            }
            _ => {}
        }
        if trace.events.len() >= max_events {
            break;
        }
    }
    if trace.allocations.is_empty() {
        return Err("no allocation records ('+' lines): not a heaptrack raw file?".into());
    }
    if !at_snapshot {
        trace.drop_teardown();
    }
    if let Some(exe) = exe_path {
        name_sites(&mut trace, &site_offsets, &exe);
    }
    Ok(trace)
}

/// The executable's offsets of the (at most two) leaf-most frames of trace `node` that lie in it.
fn own_frames(nodes: &[(u64, u64)], exe: &Executable, node: u64) -> Vec<u64> {
    let mut offsets = Vec::new();
    let mut k = node;
    let mut steps = 0;
    while k != 0 && (k as usize) <= nodes.len() && steps < 256 && offsets.len() < 2 {
        let (ip, parent) = nodes[k as usize - 1];
        if let Some(offset) = exe.offset_of(ip) {
            offsets.push(offset);
        }
        k = parent;
        steps += 1;
    }
    offsets
}

/// Renames the sites named by executable offsets after their functions, where `addr2line` finds
/// them in `exe` (return addresses: the call is the byte before). Sites keep their offsets when
/// the executable has no symbols or is not on this machine.
fn name_sites(trace: &mut Trace, site_offsets: &[Vec<u64>], exe: &Path) {
    let mut all: Vec<u64> = site_offsets.iter().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    if all.is_empty() || !exe.exists() {
        return;
    }
    let Ok(output) = Command::new("addr2line")
        .arg("-f")
        .arg("-C")
        .arg("-e")
        .arg(exe)
        .args(all.iter().map(|o| format!("0x{:x}", o.saturating_sub(1))))
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let functions: Vec<&str> = text.lines().step_by(2).collect();
    if functions.len() != all.len() {
        return;
    }
    let name_of: HashMap<u64, &str> = all.iter().copied().zip(functions).collect();
    for (site, offsets) in trace.sites.iter_mut().zip(site_offsets) {
        let names: Vec<&str> = offsets.iter().map(|o| name_of[o]).collect();
        if !offsets.is_empty() && names.iter().all(|n| *n != "??") {
            *site = format!("{} ({site})", names.join(" ← "));
        }
    }
}

/// A server and its load generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `redis-server` under `redis-benchmark`.
    Redis,
    /// `memcached` under `memcslap`.
    Memcached,
    /// `nginx` under `wrk`.
    Nginx,
}

impl Server {
    /// All three.
    pub const ALL: [Server; 3] = [Server::Redis, Server::Memcached, Server::Nginx];

    /// The name of the workload.
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Memcached => "memcached",
            Server::Nginx => "nginx",
        }
    }

    /// The programs it needs.
    pub fn programs(self) -> [&'static str; 2] {
        match self {
            Server::Redis => ["redis-server", "redis-benchmark"],
            Server::Memcached => ["memcached", "memcslap"],
            Server::Nginx => ["nginx", "wrk"],
        }
    }

    /// The load, as the report describes it.
    pub fn load(self) -> &'static str {
        match self {
            Server::Redis => {
                "`redis-benchmark -n 50000 -r 20000 -d 200 -c 16 -t set,get,lpush,hset`"
            }
            Server::Memcached => {
                "`memcslap --concurrency=4 --execute-number=20000 --test=set`, then `--test=get`"
            }
            Server::Nginx => "`wrk -t2 -c32 -d3s` on a 4 KiB static file",
        }
    }
}

/// heaptrack's preload library and jemalloc's shared library, found on this machine.
#[derive(Debug, Clone)]
pub struct Preloads {
    /// libheaptrack_preload.so.
    pub heaptrack: PathBuf,
    /// libjemalloc.so.2.
    pub jemalloc: PathBuf,
}

impl Preloads {
    /// Looks in the places Debian installs them.
    pub fn find() -> Result<Preloads, String> {
        let first = |candidates: &[&str], what: &str| {
            candidates
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
                .ok_or_else(|| format!("{what} not found (looked in {})", candidates.join(", ")))
        };
        Ok(Preloads {
            heaptrack: first(
                &[
                    "/usr/lib/heaptrack/libheaptrack_preload.so",
                    "/usr/lib/x86_64-linux-gnu/heaptrack/libheaptrack_preload.so",
                ],
                "heaptrack's preload library (apt-get install heaptrack)",
            )?,
            jemalloc: first(
                &[
                    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                    "/lib/x86_64-linux-gnu/libjemalloc.so.2",
                ],
                "libjemalloc.so.2 (apt-get install libjemalloc2)",
            )?,
        })
    }
}

/// Whether `program` is on the PATH.
pub fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn wait_for_port(port: u16, server: &mut Child) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = server.try_wait() {
            return Err(format!("the server exited before listening ({status})"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("nothing listened on port {port} within 20 s"))
}

fn run_load(mut load: Command, what: &str) -> Result<(), String> {
    let status = load
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{what}: {e}"))?;
    if !status.success() {
        return Err(format!("{what} failed: {status}"));
    }
    Ok(())
}

/// Runs `server` under heaptrack (raw, jemalloc beneath it) with its load on loopback, stops it with
/// SIGTERM, and returns the raw file written in `dir` with the milliseconds from the server's start
/// to the end of its load (the snapshot for [`read_raw`]). Each load is bounded (a fixed request
/// count, or a few seconds) and `timeout` bounds every step.
pub fn record(server: Server, dir: &Path, preloads: &Preloads) -> Result<(PathBuf, u64), String> {
    let port = free_port()?;
    let raw = dir.join(format!("{}.raw", server.name()));
    let mut cmd = match server {
        Server::Redis => {
            let mut c = Command::new("redis-server");
            c.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--dir", &dir.to_string_lossy()]);
            c
        }
        Server::Memcached => {
            let mut c = Command::new("memcached");
            c.args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
                .args(["-m", "64", "-t", "2"]);
            // memcached refuses to run as root unless told which user to run as.
            if running_as_root() {
                c.args(["-u", "root"]);
            }
            c
        }
        Server::Nginx => {
            let root = dir.join("www");
            std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
            std::fs::write(root.join("index.html"), vec![b'x'; 4096])
                .map_err(|e| format!("{}: {e}", root.display()))?;
            let conf = dir.join("nginx.conf");
            let d = dir.display();
            std::fs::write(
                &conf,
                format!(
                    "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;\n\
                     error_log {d}/error.log;\n\
                     events {{ worker_connections 256; }}\n\
                     http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
                     fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
                     server {{ listen 127.0.0.1:{port}; root {d}/www; }} }}\n"
                ),
            )
            .map_err(|e| format!("{}: {e}", conf.display()))?;
            let mut c = Command::new("nginx");
            c.args(["-p", &dir.to_string_lossy(), "-c", &conf.to_string_lossy()]);
            c
        }
    };
    cmd.env(
        "LD_PRELOAD",
        format!(
            "{}:{}",
            preloads.heaptrack.display(),
            preloads.jemalloc.display()
        ),
    )
    .env("DUMP_HEAPTRACK_OUTPUT", &raw)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{}: {e}", server.programs()[0]))?;
    let outcome = wait_for_port(port, &mut child).and_then(|()| {
        let p = port.to_string();
        let bounded = |program: &str| {
            let mut c = Command::new("timeout");
            c.args(["60", program]);
            c
        };
        match server {
            Server::Redis => {
                let mut c = bounded("redis-benchmark");
                c.args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &p,
                    "-q",
                    "-n",
                    "50000",
                    "-r",
                    "20000",
                ])
                .args(["-d", "200", "-c", "16", "-t", "set,get,lpush,hset"]);
                run_load(c, "redis-benchmark")
            }
            Server::Memcached => {
                for test in ["set", "get"] {
                    let mut c = bounded("memcslap");
                    c.arg(format!("--servers=127.0.0.1:{p}"))
                        .args(["--concurrency=4", "--execute-number=20000"])
                        .arg(format!("--test={test}"));
                    run_load(c, "memcslap")?;
                }
                Ok(())
            }
            Server::Nginx => {
                let mut c = bounded("wrk");
                c.args(["-t2", "-c32", "-d3s"])
                    .arg(format!("http://127.0.0.1:{p}/index.html"));
                run_load(c, "wrk")
            }
        }
    });
    let load_done_ms = started.elapsed().as_millis() as u64;
    // SIGTERM: each server exits through exit(), where heaptrack flushes its file.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            _ if start.elapsed() > Duration::from_secs(30) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not stop within 30 s of SIGTERM",
                    server.name()
                ));
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    outcome?;
    if !raw.exists() {
        return Err(format!("heaptrack wrote no {}", raw.display()));
    }
    Ok((raw, load_done_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str = "v 10400 3\n\
x b /usr/bin/srv\n\
m 1 -\n\
m 1 x 1000 0 100 200 100\n\
m 15 /lib/libc.so 9000 0 1000\n\
t 9010 0\n\
t 1050 1\n\
t 9020 2\n\
t 9030 0\n\
+ 40 3 aa0\n\
+ 80 4 bb0\n\
- aa0\n\
c a\n\
+ 10 3 cc0\n\
- bb0\n";

    #[test]
    fn raw_records_become_a_trace_with_the_servers_own_frame_as_site() {
        let trace = read_raw(RAW.as_bytes(), usize::MAX, None).expect("parses");
        assert_eq!(
            trace.sites,
            vec!["srv+0x50".to_string(), "trace #4".to_string()]
        );
        assert_eq!(trace.allocations.len(), 3);
        assert_eq!(trace.allocations[1].addr, 0xbb0);
        // The trailing free is the teardown: the snapshot is after the last allocation.
        assert_eq!(trace.truth().live_bytes, vec![16.0, 128.0]);
    }

    #[test]
    fn snapshot_is_taken_at_the_first_timestamp_past_the_load() {
        let trace = read_raw(RAW.as_bytes(), usize::MAX, Some(10)).expect("parses");
        assert_eq!(trace.allocations.len(), 2);
        assert_eq!(trace.truth().live_bytes, vec![0.0, 128.0]);
    }

    #[test]
    fn a_site_is_the_two_leaf_most_frames_in_the_executable() {
        let exe = Executable {
            base: 0x1000,
            ranges: vec![(0x1000, 0x2000)],
        };
        // Node 4 (libc) ← 3 (exe, the wrapper) ← 2 (libc) ← 1 (exe, its caller); node 5 ← 4.
        let nodes = [
            (0x1100, 0),
            (0x9000, 1),
            (0x1200, 2),
            (0x9100, 3),
            (0x9200, 4),
        ];
        assert_eq!(own_frames(&nodes, &exe, 5), vec![0x200, 0x100]);
        assert_eq!(own_frames(&nodes, &exe, 2), vec![0x100]);
        assert!(own_frames(&[(0x9000, 0)], &exe, 1).is_empty());
    }

    #[test]
    fn a_file_without_allocations_is_not_taken_for_a_trace() {
        let err = read_raw("hello\n".as_bytes(), usize::MAX, None).expect_err("rejected");
        assert!(err.contains("heaptrack raw"), "{err}");
    }
}
