//! A cgroup v1 memory controller group of the test's own, and a program run in it until the OOM
//! killer ends it: what `dump_near_limit`'s tests grow a process into.
//!
//! Needs root and the v1 memory hierarchy mounted at `/sys/fs/cgroup/memory` (where the kernel
//! has one, a writable `memory.limit_in_bytes` in a new directory). [`MemoryCgroup::create`]
//! says why not otherwise; the tests fail with that reason under `CI=true` and say it elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Instant;

/// Where the v1 memory hierarchy is mounted on the machines the tests run on.
pub const V1_MEMORY: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup with a limit, removed on drop (once the processes in it have ended).
#[derive(Debug)]
pub struct MemoryCgroup {
    /// Its directory.
    pub dir: PathBuf,
}

/// How a program run in the cgroup ended.
#[derive(Debug)]
pub struct Ended {
    /// Its pid.
    pub pid: u32,
    /// Its status (`signal() == Some(9)` when the OOM killer ended it).
    pub status: ExitStatus,
    /// When the test saw it end (its `wait` returned).
    pub ended: Instant,
    /// The cgroup's `oom_kill` count after it ended (`memory.oom_control`).
    pub oom_kills: u64,
}

impl MemoryCgroup {
    /// Creates `<V1_MEMORY>/<name>` with `memory.limit_in_bytes = limit`, or says why it cannot.
    pub fn create(name: &str, limit: u64) -> Result<MemoryCgroup, String> {
        let root = Path::new(V1_MEMORY);
        if !root.join("memory.limit_in_bytes").exists() {
            return Err(format!("no cgroup v1 memory hierarchy at {V1_MEMORY}"));
        }
        let dir = root.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create {}: {e} (root needed)", dir.display()))?;
        let group = MemoryCgroup { dir };
        std::fs::write(group.dir.join("memory.limit_in_bytes"), limit.to_string())
            .map_err(|e| format!("cannot set {}'s limit: {e}", group.dir.display()))?;
        Ok(group)
    }

    /// Runs `program args` inside the cgroup (a shell moves itself in, then execs the program,
    /// so the program's first instruction is charged to the group) with `env`, and waits until
    /// it ends.
    pub fn run(&self, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Ended {
        let procs = self.dir.join("cgroup.procs");
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(program)
            .args(args)
            .envs(env.iter().copied());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let pid = child.id();
        let status = child.wait().expect("wait");
        let ended = Instant::now();
        Ended {
            pid,
            status,
            ended,
            oom_kills: self.oom_kills(),
        }
    }

    /// The cgroup's `oom_kill` count.
    pub fn oom_kills(&self) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("memory.oom_control")).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // A group with no process left is removed by rmdir (its files go with it).
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A memory cgroup for a test, or the reason there is none: under `CI=true` the reason fails the
/// test (CI's machine has the controller; a missing one is a broken runner, not a pass).
pub fn for_test(name: &str, limit: u64) -> Option<MemoryCgroup> {
    match MemoryCgroup::create(name, limit) {
        Ok(group) => Some(group),
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true and no writable cgroup v1 memory controller: {why}")
        }
        Err(why) => {
            eprintln!("not run: no writable cgroup v1 memory controller: {why}");
            None
        }
    }
}

/// The one near-limit dump of process `pid` in `dir`, written with the dump prefix
/// `<dir>/<prefix>` (`<prefix>.<pid>.<seq>.l0.heap`); panics naming the files there otherwise.
pub fn near_limit_dump(dir: &Path, prefix: &str, pid: u32) -> PathBuf {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let dumps: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with(&format!("{prefix}.{pid}.")) && n.ends_with(".l0.heap"))
        .collect();
    assert_eq!(dumps.len(), 1, "no near-limit dump of {pid} in {names:?}");
    dir.join(dumps[0])
}
