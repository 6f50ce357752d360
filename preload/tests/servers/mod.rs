//! Shared by the real-server tests (`postgres_server.rs`, `nginx_server.rs`): finding the server's
//! programs, running them bounded in time and as another user, and reading every dump they wrote
//! with `jeprof-compat report`'s own code.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};

/// `tool` on `PATH`, or else in one of `dirs` (the first that has it).
pub fn find_tool(tool: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(dirs.iter().cloned())
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// Whether the test can run: `false` (after saying so) when a tool is missing outside CI; a
/// failure under `CI=true`, where `.ci/run` installs them (`packages` says which).
pub fn tools_present(test: &str, missing: &[&str], packages: &str) -> bool {
    if missing.is_empty() {
        return true;
    }
    assert!(
        !jeprof_conformance::in_ci(),
        "CI must install {packages}: {missing:?} not found"
    );
    eprintln!("SKIPPED {test}: {missing:?} not found (apt-get install {packages})");
    false
}

/// A server, killed when dropped (on every failure path).
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `command` to completion within `limit`, killing it past that.
pub fn run_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    // Pipes drained on threads: a chatty program must not block on a full pipe.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} took over {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.map(|t| t.join().unwrap()).unwrap_or_default(),
        stderr: stderr.map(|t| t.join().unwrap()).unwrap_or_default(),
    }
}

fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// [`run_bounded`], panicking with the output unless the command exits 0; returns stdout.
pub fn run_ok(command: Command, limit: Duration) -> String {
    let shown = format!("{command:?}");
    let output = run_bounded(command, limit);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Waits until `done`, failing past `limit`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `jeprof-compat report` made of a directory of dumps.
pub struct DumpsRead {
    /// Dumps read.
    pub count: usize,
    /// Every function name the reports list (their rows, before the text's cut), over all dumps.
    pub names: Vec<String>,
}

impl DumpsRead {
    /// Whether some listed function starts with one of `prefixes`.
    pub fn names_any(&self, prefixes: &[&str]) -> bool {
        self.names
            .iter()
            .any(|n| prefixes.iter().any(|p| n.starts_with(p)))
    }
}

/// Reads every file in `dir` as `jeprof-compat report FILE` does (its library's report of one
/// dump, with the dump's own symbol section, strict about cut dumps) and writes its text table;
/// panics naming the file that does not read.
pub fn report_every_dump(dir: &Path) -> DumpsRead {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let options = ReportOptions::default();
    let mut names = Vec::new();
    for path in &paths {
        let table = report::build_files(
            std::slice::from_ref(path),
            &SymbolizeOptions::default(),
            &options,
            &ReadPolicy::default(),
        )
        .unwrap_or_else(|e| panic!("jeprof-compat report {}: {e}", path.display()));
        let mut text = Vec::new();
        table.write_text(&options, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        // A process whose heap is empty at exit (nginx's master, run as a plain user) has a
        // dump of no live bytes, whose text table may be empty.
        assert!(
            text.starts_with("Total: ") || table.total() == 0.0,
            "{}'s report:\n{text}",
            path.display()
        );
        names.extend(table.rows().map(|row| row.name.to_string()));
    }
    names.sort();
    names.dedup();
    DumpsRead {
        count: paths.len(),
        names,
    }
}

/// Core files left in `dir` (a crash with core dumps enabled).
pub fn cores_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("core"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The preload library copied into `dir`, for a program run as another user (the build's own copy
/// may lie under a home directory that user cannot enter).
pub fn library_in(dir: &Path) -> PathBuf {
    let copy = dir.join("libjeprof_preload.so");
    std::fs::copy(crate::common::preload_library(), &copy).unwrap();
    set_mode(&copy, 0o755);
    copy
}

/// `chmod mode path`.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `(uid, gid)` of `user` from `/etc/passwd`.
pub fn user_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() > 3 && fields[0] == user)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

/// Whether this test runs as root.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // `/proc/self` belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Prints how long each phase took (shown with `--nocapture`, and in the failure's output).
pub struct Phases {
    started: Instant,
    last: Instant,
}

impl Phases {
    pub fn new() -> Phases {
        let now = Instant::now();
        Phases {
            started: now,
            last: now,
        }
    }

    pub fn done(&mut self, phase: &str) {
        let now = Instant::now();
        println!(
            "{phase}: {:.1} s (total {:.1} s)",
            (now - self.last).as_secs_f64(),
            (now - self.started).as_secs_f64()
        );
        self.last = now;
    }

    pub fn total(&self) -> Duration {
        self.started.elapsed()
    }
}
