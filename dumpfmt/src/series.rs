//! A series of dumps in the order they were written, and the process each came from: the one
//! place that decides both, for every tool that reads several dumps (`leaks`, the page, `report`,
//! `merge`, `export`).
//!
//! # Names
//! jemalloc names its dumps `<prefix>.<pid>.<seq>.<kind><n>.heap` (`jeprof.779.10.i10.heap`: the
//! process's 11th dump, its 11th interval dump) and the one at exit `<prefix>.<pid>.<seq>.f.heap`;
//! `seq` counts every dump of the process, `n` the dumps of one kind (`i` interval, `u` a new
//! peak, `m` asked for). The shim names its dumps the same way ([`DumpName::parse`] reads any kind
//! that is letters, with or without its count). Read as strings, such names sort wrongly (`.10.`
//! before `.2.`); their sequence numbers do not.
//!
//! # Order
//! [`order`] sorts a series by the first of these that every dump has:
//! 1. the `time` label (microseconds; the shim's dumps carry it), ties by sequence number, then
//!    by path;
//! 2. the sequence number of jemalloc's name, when every name parses and all name one process;
//! 3. the file's modification time, ties by path;
//! 4. the path.
//!
//! and says which it used ([`SeriesOrder`]), for the summary lines that must say it.
//!
//! # Processes
//! A dump's process ([`Process`]) is its `pid` and `hostname` labels, or failing a `pid` label the
//! pid of its jemalloc name. Dumps with neither are each their own (unknown) process.

use std::time::SystemTime;

/// A dump's file name as jemalloc (and the shim) writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpName {
    /// What precedes the pid (`prof_prefix`, `jeprof` by default).
    pub prefix: String,
    /// The process id.
    pub pid: u32,
    /// The process's dump count when this one was written.
    pub seq: u64,
    /// The kind's letters: `i`, `u`, `m`, `f`, or another kind a writer adds.
    pub kind: String,
    /// The count within the kind (none for `f`).
    pub kind_seq: Option<u64>,
}

impl DumpName {
    /// Parses a file name (not a path) `<prefix>.<pid>.<seq>.<kind>[<n>].heap`; `None` when it is
    /// not one (a prefix may hold dots; the three fields before `.heap` are read from the end).
    pub fn parse(file_name: &str) -> Option<DumpName> {
        let stem = file_name.strip_suffix(".heap")?;
        let mut fields = stem.rsplitn(4, '.');
        let kind_field = fields.next()?;
        let seq = fields.next()?;
        let pid = fields.next()?;
        let prefix = fields.next()?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(seq) || !digits(pid) || prefix.is_empty() {
            return None;
        }
        let split = kind_field
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(kind_field.len());
        let (kind, count) = kind_field.split_at(split);
        if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_lowercase()) {
            return None;
        }
        let kind_seq = match count {
            "" => None,
            n if digits(n) => Some(n.parse().ok()?),
            _ => return None,
        };
        Some(DumpName {
            prefix: prefix.to_string(),
            pid: pid.parse().ok()?,
            seq: seq.parse().ok()?,
            kind: kind.to_string(),
            kind_seq,
        })
    }

    /// The dump jemalloc (`prof_final`) and the shim write at exit: kind `f`.
    pub fn is_exit(&self) -> bool {
        self.kind == "f"
    }
}

/// What orders one dump in a series and says which process wrote it: gathered by the caller
/// from the dump's labels, its file name and its file's metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesKey {
    /// The path, as given (the last tie-breaker, and the name to show).
    pub path: String,
    /// The `time` label, microseconds since 1970.
    pub time: Option<i64>,
    /// The file name, when it is jemalloc's form.
    pub name: Option<DumpName>,
    /// The file's modification time.
    pub modified: Option<SystemTime>,
    /// The process ([`Process::of`]).
    pub process: Option<Process>,
}

/// Which of [`order`]'s rules ordered a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesOrder {
    /// Every dump has a `time` label.
    Time,
    /// By the sequence number of jemalloc's file names.
    Sequence,
    /// By the files' modification times.
    Modified,
    /// By path.
    Name,
}

impl SeriesOrder {
    /// The words a summary line gives it: "ordered by …".
    pub fn describe(self) -> &'static str {
        match self {
            SeriesOrder::Time => "ordered by their time labels",
            SeriesOrder::Sequence => {
                "ordered by the sequence numbers of their file names (no time labels)"
            }
            SeriesOrder::Modified => {
                "ordered by file modification time (no time labels, names not jemalloc's)"
            }
            SeriesOrder::Name => "ordered by name (no time labels or modification times)",
        }
    }

    /// Whether the dumps' times are known (their labels): rates can be per hour.
    pub fn is_timed(self) -> bool {
        self == SeriesOrder::Time
    }
}

/// The indexes of `keys` in series order, and the rule that ordered them (module docs).
pub fn order(keys: &[SeriesKey]) -> (Vec<usize>, SeriesOrder) {
    let mut index: Vec<usize> = (0..keys.len()).collect();
    let seq = |i: usize| keys[i].name.as_ref().map(|n| n.seq);
    let one_pid = keys
        .windows(2)
        .all(|w| w[0].name.as_ref().map(|n| n.pid) == w[1].name.as_ref().map(|n| n.pid));
    let rule = if keys.iter().all(|k| k.time.is_some()) {
        SeriesOrder::Time
    } else if keys.iter().all(|k| k.name.is_some()) && one_pid {
        SeriesOrder::Sequence
    } else if keys.iter().all(|k| k.modified.is_some()) {
        SeriesOrder::Modified
    } else {
        SeriesOrder::Name
    };
    index.sort_by(|&a, &b| {
        let first = match rule {
            SeriesOrder::Time => keys[a]
                .time
                .cmp(&keys[b].time)
                .then_with(|| seq(a).cmp(&seq(b))),
            SeriesOrder::Sequence => seq(a).cmp(&seq(b)),
            SeriesOrder::Modified => keys[a].modified.cmp(&keys[b].modified),
            SeriesOrder::Name => std::cmp::Ordering::Equal,
        };
        first.then_with(|| keys[a].path.cmp(&keys[b].path))
    });
    (index, rule)
}

/// Whether dump `a` was written after dump `b` by what says so for sure: both `time` labels, or
/// the sequence numbers of two jemalloc names of one process (`diff`'s check of its BASE and NEW).
pub fn written_after(a: &SeriesKey, b: &SeriesKey) -> bool {
    match (a.time, b.time, &a.name, &b.name) {
        (Some(ta), Some(tb), _, _) => ta > tb,
        (_, _, Some(na), Some(nb)) => na.pid == nb.pid && na.seq > nb.seq,
        _ => false,
    }
}

/// The process that wrote a dump: its `pid` and `hostname` labels, or the pid of its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Process {
    /// The pid.
    pub pid: String,
    /// The host, when a label names it.
    pub host: Option<String>,
}

impl Process {
    /// The process of a dump with labels `labels` and file name `name` (module docs).
    pub fn of(labels: &[(String, String)], name: Option<&DumpName>) -> Option<Process> {
        let pid = crate::labels::get(labels, "pid")
            .map(str::to_string)
            .or_else(|| name.map(|n| n.pid.to_string()))?;
        let host = crate::labels::get(labels, "hostname").map(str::to_string);
        Some(Process { pid, host })
    }
}

impl std::fmt::Display for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Some(host) => write!(f, "pid {} on {host}", self.pid),
            None => write!(f, "pid {}", self.pid),
        }
    }
}

/// How many dumps each process has, counted as dumps come (a merge reads its list once): memory
/// holds one entry per process, not one per dump.
#[derive(Debug, Clone, Default)]
pub struct ProcessCounts {
    counts: std::collections::HashMap<Process, usize>,
    dumps: usize,
}

impl ProcessCounts {
    /// Counts one dump, of `process` if known.
    pub fn add(&mut self, process: Option<&Process>) {
        self.dumps += 1;
        if let Some(process) = process {
            match self.counts.get_mut(process) {
                Some(n) => *n += 1,
                None => {
                    self.counts.insert(process.clone(), 1);
                }
            }
        }
    }

    /// The counts of `keys`.
    pub fn of(keys: &[SeriesKey]) -> ProcessCounts {
        let mut counts = ProcessCounts::default();
        keys.iter().for_each(|k| counts.add(k.process.as_ref()));
        counts
    }

    /// How many dumps were counted.
    pub fn dumps(&self) -> usize {
        self.dumps
    }

    /// `(processes with more than one dump, the dumps those processes have)`; `None` when every
    /// known process has one dump.
    pub fn repeated(&self) -> Option<(usize, usize)> {
        let repeated: Vec<usize> = self.counts.values().copied().filter(|&n| n > 1).collect();
        (!repeated.is_empty()).then(|| (repeated.len(), repeated.iter().sum()))
    }
}

/// The dumps of each process, each group in series order ([`order`] over its dumps); a dump of
/// no known process is a group of its own. Groups come in the order of their first dump in `keys`.
pub fn by_process(keys: &[SeriesKey]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: std::collections::HashMap<&Process, usize> = Default::default();
    for (i, key) in keys.iter().enumerate() {
        match &key.process {
            Some(process) => {
                let g = *group_of.entry(process).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(i);
            }
            None => groups.push(vec![i]),
        }
    }
    for members in &mut groups {
        let group: Vec<SeriesKey> = members.iter().map(|&i| keys[i].clone()).collect();
        let (ordered, _) = order(&group);
        *members = ordered.into_iter().map(|j| members[j]).collect();
    }
    groups
}

/// The indexes of each process's last dump in series order, and of every dump of no known
/// process, in the order of `keys`.
pub fn latest_per_process(keys: &[SeriesKey]) -> Vec<usize> {
    let mut kept: Vec<usize> = by_process(keys)
        .into_iter()
        .filter_map(|g| g.last().copied())
        .collect();
    kept.sort_unstable();
    kept
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn named(path: &str) -> SeriesKey {
        let name = DumpName::parse(path);
        SeriesKey {
            path: path.to_string(),
            process: Process::of(&[], name.as_ref()),
            name,
            ..SeriesKey::default()
        }
    }

    fn ordered_paths(keys: &[SeriesKey]) -> (Vec<&str>, SeriesOrder) {
        let (index, rule) = order(keys);
        (index.iter().map(|&i| keys[i].path.as_str()).collect(), rule)
    }

    #[test]
    fn jemalloc_names_parse_with_dotted_prefixes_and_every_kind() {
        let name = DumpName::parse("prof.v2.779.10.i10.heap").expect("a jemalloc name");
        assert_eq!(
            (name.prefix.as_str(), name.pid, name.seq, name.kind.as_str()),
            ("prof.v2", 779, 10, "i")
        );
        assert_eq!(name.kind_seq, Some(10));
        let exit = DumpName::parse("jeprof.779.71.f.heap").expect("the exit dump");
        assert!(exit.is_exit() && exit.kind_seq.is_none());
        for kind in ["u3", "m0", "l12"] {
            let parsed = DumpName::parse(&format!("jeprof.1.2.{kind}.heap")).expect(kind);
            assert!(!parsed.is_exit());
        }
        for not_one in [
            "jeprof.779.10.i10.txt",
            "779.10.i10.heap",
            "jeprof.x.10.i10.heap",
            "jeprof.779.10.10.heap",
            "jeprof.779.10.i1x.heap",
            "heap",
        ] {
            assert_eq!(DumpName::parse(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn untimed_jemalloc_series_orders_by_sequence_not_by_string() {
        let keys: Vec<SeriesKey> = [
            "jeprof.779.10.i10.heap",
            "jeprof.779.2.i2.heap",
            "jeprof.779.11.f.heap",
            "jeprof.779.1.i1.heap",
        ]
        .into_iter()
        .map(named)
        .collect();
        let (paths, rule) = ordered_paths(&keys);
        assert_eq!(rule, SeriesOrder::Sequence);
        assert_eq!(
            paths,
            [
                "jeprof.779.1.i1.heap",
                "jeprof.779.2.i2.heap",
                "jeprof.779.10.i10.heap",
                "jeprof.779.11.f.heap"
            ]
        );
    }

    #[test]
    fn time_labels_order_before_names_and_modification_times() {
        let mut keys = vec![named("jeprof.7.1.i1.heap"), named("jeprof.7.2.i2.heap")];
        keys[0].time = Some(20);
        keys[1].time = Some(10);
        keys[0].modified = Some(UNIX_EPOCH);
        keys[1].modified = Some(UNIX_EPOCH + Duration::from_secs(1));
        let (paths, rule) = ordered_paths(&keys);
        assert_eq!(rule, SeriesOrder::Time);
        assert!(rule.is_timed());
        assert_eq!(paths, ["jeprof.7.2.i2.heap", "jeprof.7.1.i1.heap"]);
    }

    #[test]
    fn written_after_trusts_time_labels_then_one_process_sequence_numbers() {
        let (mut a, mut b) = (named("jeprof.7.10.i10.heap"), named("jeprof.7.2.i2.heap"));
        assert!(written_after(&a, &b) && !written_after(&b, &a));
        (a.time, b.time) = (Some(1), Some(2));
        assert!(!written_after(&a, &b) && written_after(&b, &a));
        let other = named("jeprof.8.1.i1.heap");
        assert!(!written_after(&named("jeprof.7.10.i10.heap"), &other));
        assert!(!written_after(&named("x.heap"), &named("y.heap")));
    }

    #[test]
    fn other_names_order_by_modification_time_else_by_path() {
        let mut keys = vec![named("b.heap"), named("a.heap"), named("c.heap")];
        let (paths, rule) = ordered_paths(&keys);
        assert_eq!(
            (paths, rule),
            (vec!["a.heap", "b.heap", "c.heap"], SeriesOrder::Name)
        );
        for (key, secs) in keys.iter_mut().zip([1, 3, 2]) {
            key.modified = Some(UNIX_EPOCH + Duration::from_secs(secs));
        }
        let (paths, rule) = ordered_paths(&keys);
        assert_eq!(
            (paths, rule),
            (vec!["b.heap", "c.heap", "a.heap"], SeriesOrder::Modified)
        );
    }

    #[test]
    fn names_of_two_processes_do_not_order_by_sequence() {
        let mut keys = vec![named("jeprof.1.5.i5.heap"), named("jeprof.2.1.i1.heap")];
        assert_eq!(order(&keys).1, SeriesOrder::Name);
        keys[0].modified = Some(UNIX_EPOCH);
        keys[1].modified = Some(UNIX_EPOCH);
        assert_eq!(order(&keys).1, SeriesOrder::Modified);
    }

    #[test]
    fn processes_come_from_labels_before_names() {
        let labels = vec![
            ("pid".to_string(), "42".to_string()),
            ("hostname".to_string(), "web-1".to_string()),
        ];
        let name = DumpName::parse("jeprof.779.1.i1.heap");
        let process = Process::of(&labels, name.as_ref()).expect("labelled");
        assert_eq!(process.to_string(), "pid 42 on web-1");
        assert_eq!(
            Process::of(&[], name.as_ref()).map(|p| p.to_string()),
            Some("pid 779".to_string())
        );
        assert_eq!(Process::of(&[], None), None);
    }

    #[test]
    fn repeated_processes_count_only_processes_with_several_dumps() {
        let keys: Vec<SeriesKey> = [
            "jeprof.1.0.i0.heap",
            "jeprof.1.1.i1.heap",
            "jeprof.1.2.f.heap",
            "jeprof.2.0.f.heap",
            "other.heap",
        ]
        .into_iter()
        .map(named)
        .collect();
        assert_eq!(ProcessCounts::of(&keys).repeated(), Some((1, 3)));
        assert_eq!(ProcessCounts::of(&keys).dumps(), 5);
        assert_eq!(ProcessCounts::of(&keys[3..]).repeated(), None);
    }

    #[test]
    fn latest_per_process_keeps_each_process_last_dump_in_series_order() {
        let keys: Vec<SeriesKey> = [
            "jeprof.1.10.i10.heap",
            "jeprof.1.9.i9.heap",
            "jeprof.2.3.i3.heap",
            "unknown.heap",
            "jeprof.2.1.i1.heap",
        ]
        .into_iter()
        .map(named)
        .collect();
        assert_eq!(latest_per_process(&keys), [0, 2, 3]);
        assert_eq!(by_process(&keys), [vec![1, 0], vec![4, 2], vec![3]]);
    }
}
