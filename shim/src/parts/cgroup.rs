//! The memory limit that would kill this process first, and the use the kernel compares with it:
//! what `dump_near_limit` watches.
//!
//! # Finding the limit
//! `/proc/self/cgroup` names the process's cgroup in each hierarchy (`0::/path` for cgroup v2,
//! `N:memory:/path` for v1's memory controller); the mount table (`/proc/self/mountinfo`) says
//! where each hierarchy is mounted (`cgroup2`, or `cgroup` with the `memory` super option) and
//! which of its directories the mount shows (its root field: a container sees its own cgroup as
//! `/`). From the process's directory up to the mount point, every level's hard limit is read
//! (v2 `memory.max`, `max` for none; v1 `memory.limit_in_bytes`, where no limit reads as
//! `PAGE_COUNTER_MAX` pages, about 2^63): the smallest is the one the kernel enforces first,
//! because a charge is refused at the first ancestor whose limit it would pass. The use compared
//! with it is that level's own counter (v2 `memory.current`, v1 `memory.usage_in_bytes`), which
//! counts the whole subtree, siblings included: the figure the kernel compares. A v2 hierarchy
//! without the memory controller has no `memory.max` files and gives no limit.
//!
//! [`STATE`] keeps what the watcher (`profiler::near_limit`) found and wrote, for `stats()` and
//! `/debug/pprof/allocator` (both below the watcher).
//!
//! Every path is taken under a root directory, `/` in a process: a test lays out a tree in a
//! temporary directory (`proc/self/cgroup`, `proc/self/mountinfo` and the cgroup files) and
//! reads it with the same code.
//!
//! # v2 events
//! `memory.events` counts, per cgroup, the times use passed `memory.high` (`high`: throttling
//! begins) and reached `memory.max` (`max`: reclaim failed to make room, the kill is near); the
//! kernel notifies a change as `POLLPRI` on an open descriptor of the file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::api::near_limit::{NearLimitDump, NearLimitStats, NearLimitWatch};
use crate::base::sync::lock;
use crate::base::thread::Guard;

/// What `dump_near_limit`'s watcher (`profiler::near_limit`) found and did; taken by `stats()`, and by the fork handlers with no other
/// profiler lock held.
pub(crate) static STATE: Mutex<Watched> = Mutex::new(Watched::new());

/// The watcher's findings (the limit is found once, when it starts).
pub(crate) struct Watched {
    pub(crate) watch: NearLimitWatch,
    pub(crate) limit: Option<Limit>,
    pub(crate) threshold: u64,
    pub(crate) rearm: u64,
    pub(crate) dumps: u64,
    pub(crate) last_dump: Option<NearLimitDump>,
}

impl Watched {
    const fn new() -> Watched {
        Watched {
            watch: NearLimitWatch::Off,
            limit: None,
            threshold: 0,
            rearm: 0,
            dumps: 0,
            last_dump: None,
        }
    }
}

/// The figures for `stats()`, the use read now.
pub(crate) fn stats() -> NearLimitStats {
    let _guard = Guard::enter();
    let state = lock(&STATE);
    let limit = state.limit.as_ref();
    NearLimitStats {
        watch: state.watch,
        cgroup: limit.map(|l| l.cgroup.clone()),
        cgroup_version: limit.map_or(0, |l| version_number(l.version)),
        limit_bytes: limit.map_or(0, |l| l.bytes),
        use_bytes: limit.and_then(Limit::usage).unwrap_or(0),
        threshold_bytes: state.threshold,
        rearm_bytes: state.rearm,
        dumps: state.dumps,
        last_dump: state.last_dump.clone(),
    }
}

pub(crate) fn version_number(version: Version) -> u8 {
    match version {
        Version::V1 => 1,
        Version::V2 => 2,
    }
}

/// Limits at or above this are "no limit": v1 writes `PAGE_COUNTER_MAX` pages (about 2^63 bytes
/// with 4 KiB pages, less with larger ones) where none is set; no machine has 2^60 bytes.
const NO_LIMIT: u64 = 1 << 60;

/// Which cgroup interface a limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// The hard limit that would kill the process first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) version: Version,
    /// The directory of the cgroup that holds the limit (under the root given to [`discover`]).
    pub(crate) dir: PathBuf,
    /// That cgroup's path in its hierarchy, as `/proc/self/cgroup` writes paths.
    pub(crate) cgroup: String,
    /// The limit in bytes.
    pub(crate) bytes: u64,
}

impl Limit {
    /// The file whose content is the use the kernel compares with the limit.
    pub(crate) fn usage_file(&self) -> PathBuf {
        self.dir.join(match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        })
    }

    /// The use now, in bytes (`None` when the file cannot be read, e.g. the cgroup was removed).
    pub(crate) fn usage(&self) -> Option<u64> {
        read_number(&self.usage_file())
    }
}

/// The tightest hard memory limit of this process under `root` (`/` for the real one), from
/// cgroup v1 and v2 alike; `None` when no level of either has one.
pub(crate) fn discover(root: &Path) -> Option<Limit> {
    let cgroups = std::fs::read_to_string(root.join("proc/self/cgroup")).ok()?;
    let mounts = std::fs::read_to_string(root.join("proc/self/mountinfo")).ok()?;
    [Version::V2, Version::V1]
        .into_iter()
        .filter_map(|version| {
            let path = cgroup_path(&cgroups, version)?;
            let (mount_root, mount_point) = mount_of(&mounts, version)?;
            tightest(root, version, &path, &mount_root, &mount_point)
        })
        .min_by_key(|limit| limit.bytes)
}

/// The process's cgroup path in the hierarchy of `version` (v1: the one holding `memory`).
pub(crate) fn cgroup_path(proc_self_cgroup: &str, version: Version) -> Option<String> {
    proc_self_cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let wanted = match version {
            Version::V2 => id == "0" && controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|c| c == "memory"),
        };
        wanted.then(|| path.to_string())
    })
}

/// The root field and the mount point of the hierarchy of `version` in a mount table (the first
/// such mount), with the kernel's octal escapes (`\040` for a space) undone.
pub(crate) fn mount_of(mountinfo: &str, version: Version) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let before: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
        let wanted = match version {
            Version::V2 => fstype == "cgroup2",
            Version::V1 => fstype == "cgroup" && options.split(',').any(|o| o == "memory"),
        };
        (wanted && before.len() >= 5).then(|| (unescape(before[3]), unescape(before[4])))
    })
}

/// Undoes the mount table's `\ooo` escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The smallest limit from the process's cgroup `path` up to the mount's top, the mount showing
/// the hierarchy's `mount_root` at `mount_point` (both under `root`).
fn tightest(
    root: &Path,
    version: Version,
    path: &str,
    mount_root: &str,
    mount_point: &str,
) -> Option<Limit> {
    // The part of the path below what the mount shows ("/" shows everything).
    let below = path
        .strip_prefix(mount_root.trim_end_matches('/'))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        .unwrap_or(path)
        .trim_start_matches('/');
    let top = root.join(mount_point.trim_start_matches('/'));
    let limit_file = match version {
        Version::V1 => "memory.limit_in_bytes",
        Version::V2 => "memory.max",
    };
    let mut best: Option<Limit> = None;
    let mut level = PathBuf::from(below);
    loop {
        let dir = top.join(&level);
        if let Some(bytes) = read_number(&dir.join(limit_file)).filter(|&b| b < NO_LIMIT) {
            if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                let cgroup = format!("{}/{}", mount_root.trim_end_matches('/'), level.display());
                best = Some(Limit {
                    version,
                    dir,
                    cgroup: cgroup.trim_end_matches('/').to_string(),
                    bytes,
                });
            }
        }
        if !level.pop() {
            break;
        }
    }
    best.map(|mut b| {
        if b.cgroup.is_empty() {
            b.cgroup = "/".into();
        }
        b
    })
}

/// A file holding one number (`max`, v2's "no limit", reads as `u64::MAX`).
fn read_number(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_number(&text)
}

fn parse_number(text: &str) -> Option<u64> {
    match text.trim() {
        "max" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

/// The `high` and `max` counts of a v2 `memory.events` file's text (0 for a missing key).
pub(crate) fn events(memory_events: &str) -> (u64, u64) {
    let count = |key: &str| {
        memory_events
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    };
    (count("high"), count("max"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` to `root/relative`, creating directories.
    fn put(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 /kubepods/pod\\0401 /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_v2_tree_gives_the_tightest_memory_max_up_to_the_mount_and_its_owners_current() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "proc/self/cgroup", "0::/kubepods/pod 1/app/worker\n");
        put(root, "proc/self/mountinfo", MOUNTS);
        // The mount shows /kubepods/pod 1 (a container's view): levels above it are not seen.
        let top = "sys/fs/cgroup/unified";
        put(root, &format!("{top}/memory.max"), "1048576\n");
        put(root, &format!("{top}/app/memory.max"), "419430400\n");
        put(root, &format!("{top}/app/memory.current"), "335544320\n");
        put(root, &format!("{top}/app/worker/memory.max"), "max\n");
        put(root, &format!("{top}/app/worker/memory.current"), "4096\n");
        let mut limit = discover(root).expect("a limit");
        assert_eq!(limit.version, Version::V2);
        // The mount's own top level is the tightest here.
        assert_eq!(limit.bytes, 1 << 20);
        assert_eq!(limit.cgroup, "/kubepods/pod 1");
        // Without it, the parent's 400 MiB over the process's own `max`, and the parent's use.
        std::fs::remove_file(root.join(format!("{top}/memory.max"))).unwrap();
        limit = discover(root).expect("a limit");
        assert_eq!(limit.bytes, 400 << 20);
        assert_eq!(limit.cgroup, "/kubepods/pod 1/app");
        assert_eq!(limit.dir, root.join(format!("{top}/app")));
        assert_eq!(limit.usage(), Some(320 << 20));
    }

    #[test]
    fn a_v2_hierarchy_without_the_memory_controller_and_a_v1_without_limits_give_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "proc/self/cgroup", "4:memory:/a\n0::/a\n");
        put(root, "proc/self/mountinfo", MOUNTS);
        put(root, "sys/fs/cgroup/unified/a/cgroup.procs", "1\n");
        put(
            root,
            "sys/fs/cgroup/memory/a/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        put(
            root,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        assert_eq!(discover(root), None);
        // A v1 limit on the parent level is found, with the parent's usage.
        put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "8192\n");
        put(root, "sys/fs/cgroup/memory/memory.usage_in_bytes", "100\n");
        let limit = discover(root).expect("a limit");
        assert_eq!((limit.version, limit.bytes), (Version::V1, 8192));
        assert_eq!(limit.cgroup, "/");
        assert_eq!(limit.usage(), Some(100));
    }

    #[test]
    fn the_tighter_of_a_v1_and_a_v2_limit_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(
            root,
            "proc/self/cgroup",
            "4:memory:/a\n0::/kubepods/pod 1/b\n",
        );
        put(root, "proc/self/mountinfo", MOUNTS);
        put(
            root,
            "sys/fs/cgroup/memory/a/memory.limit_in_bytes",
            "5000\n",
        );
        put(root, "sys/fs/cgroup/unified/b/memory.max", "6000\n");
        assert_eq!(discover(root).map(|l| l.version), Some(Version::V1));
        put(root, "sys/fs/cgroup/unified/b/memory.max", "4000\n");
        assert_eq!(discover(root).map(|l| l.version), Some(Version::V2));
    }

    #[test]
    fn memory_events_give_the_high_and_max_counts() {
        let text = "low 0\nhigh 17\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(events(text), (17, 3));
        assert_eq!(events("low 0\n"), (0, 0));
        assert_eq!(events("highest 9\nmax x\n"), (0, 0));
    }

    #[test]
    fn mount_fields_are_unescaped_and_matched_by_type() {
        assert_eq!(
            mount_of(MOUNTS, Version::V2),
            Some(("/kubepods/pod 1".into(), "/sys/fs/cgroup/unified".into()))
        );
        assert_eq!(
            mount_of(MOUNTS, Version::V1),
            Some(("/".into(), "/sys/fs/cgroup/memory".into()))
        );
        assert_eq!(
            cgroup_path("2:cpu,memory:/x\n", Version::V1),
            Some("/x".into())
        );
        assert_eq!(cgroup_path("2:cpu:/x\n", Version::V1), None);
    }
}
