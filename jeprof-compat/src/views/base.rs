//! jeprof's `--base`, `--drop_negative` and `--thread`: the profile a report is made of, before any
//! frame is named.
//!
//! As jeprof 5.3.1's `Main` does:
//! - the dumps are added up per stack (`AddProfile`), then the base is subtracted per stack
//!   (`SubtractProfile`): a stack only in the base counts negative, unless `--drop_negative`, which
//!   also makes every negative difference zero; symbol sections are merged, a later dump's entry
//!   for an address replacing an earlier one's, the base's last (`MergeSymbols`); the memory map is
//!   the first dump's;
//! - `--thread N` (or `*`) reports, instead of that profile, each thread of the *first* dump (in
//!   thread order), its per-thread figures as the dump gives them: neither the other dumps nor the
//!   base enter a thread's report.
//!
//! Stacks are compared by their frame addresses as written: `--base` means a dump of the same
//! process (as in jeprof; across processes and builds, `jeprof-compat diff` compares functions).

use std::collections::BTreeMap;

use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack};

/// Which threads `--thread` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadChoice {
    /// `--thread N`.
    One(u64),
    /// `--thread '*'`: every thread.
    All,
}

impl std::str::FromStr for ThreadChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<ThreadChoice, String> {
        if text == "*" {
            return Ok(ThreadChoice::All);
        }
        text.parse().map(ThreadChoice::One).map_err(|_| {
            format!(
                "{text:?} is not a thread: expected a thread number (the N of `tN:` lines) or '*'"
            )
        })
    }
}

/// `dumps` added up stack by stack, minus `base` if given, as one profile (see the module
/// documentation). Panics on no dumps (the command line requires one).
pub fn subtract_base(dumps: Vec<Profile>, base: Option<Profile>, drop_negative: bool) -> Profile {
    let mut dumps = dumps.into_iter();
    let first = dumps.next().expect("at least one dump");
    let mut sums: BTreeMap<Vec<u64>, Counts> = BTreeMap::new();
    let mut combined = Profile {
        sample_period: first.sample_period,
        mapped_libraries: first.mapped_libraries.clone(),
        ..Profile::default()
    };
    for dump in std::iter::once(first).chain(dumps) {
        merge_symbols(&mut combined, &dump);
        for stack in dump.stacks {
            sums.entry(stack.frames).or_default().add(&stack.counts);
        }
    }
    if let Some(base) = base {
        merge_symbols(&mut combined, &base);
        let mut subtracted: BTreeMap<Vec<u64>, Counts> = BTreeMap::new();
        for stack in base.stacks {
            subtracted
                .entry(stack.frames)
                .or_default()
                .add(&stack.counts);
        }
        for (frames, counts) in &mut sums {
            if let Some(b) = subtracted.remove(frames) {
                subtract(counts, &b);
            }
            if drop_negative {
                clamp_negative(counts);
            }
        }
        // jeprof's second loop: stacks only in the base, negated, unless dropped.
        if !drop_negative {
            for (frames, b) in subtracted {
                let mut counts = Counts::default();
                subtract(&mut counts, &b);
                sums.insert(frames, counts);
            }
        }
    }
    combined.stacks = sums
        .into_iter()
        .map(|(frames, counts)| Stack {
            frames,
            counts,
            threads: Vec::new(),
        })
        .collect();
    combined
}

/// `--thread`: the chosen threads of `first` (the first dump), each as a profile of its own
/// figures, in thread order, with `symbols` (the symbol section of every dump, merged) and the
/// first dump's memory map.
pub fn thread_profiles(
    first: &Profile,
    symbols: &Profile,
    which: ThreadChoice,
) -> Vec<(u64, Profile)> {
    let mut threads: BTreeMap<u64, Profile> = BTreeMap::new();
    for stack in &first.stacks {
        for t in &stack.threads {
            if which != ThreadChoice::All && which != ThreadChoice::One(t.thread) {
                continue;
            }
            let profile = threads.entry(t.thread).or_insert_with(|| Profile {
                sample_period: first.sample_period,
                mapped_libraries: first.mapped_libraries.clone(),
                symbols: symbols.symbols.clone(),
                ..Profile::default()
            });
            profile.stacks.push(Stack {
                frames: stack.frames.clone(),
                counts: t.counts,
                threads: Vec::new(),
            });
        }
    }
    threads.into_iter().collect()
}

/// jeprof's `MergeSymbols` into `into`: every entry of `from`'s symbol section, replacing one for
/// the same address.
fn merge_symbols(into: &mut Profile, from: &Profile) {
    let Some(from) = &from.symbols else {
        return;
    };
    let table = into.symbols.get_or_insert_with(Default::default);
    if from.binary.is_some() {
        table.binary.clone_from(&from.binary);
    }
    for (address, names) in &from.names {
        table.names.insert(*address, names.clone());
        match from.lines.get(address) {
            Some(lines) => table.lines.insert(*address, lines.clone()),
            None => table.lines.remove(address),
        };
    }
}

/// `a - b`, figure by figure; the variances of independent estimates add.
fn subtract(a: &mut Counts, b: &Counts) {
    for (x, y) in [(&mut a.inuse, &b.inuse), (&mut a.accum, &b.accum)] {
        x.objects -= y.objects;
        x.bytes -= y.bytes;
        x.objects_variance += y.objects_variance;
        x.bytes_variance += y.bytes_variance;
    }
}

/// `--drop_negative`: a negative figure becomes zero (each figure on its own: a report shows one).
fn clamp_negative(counts: &mut Counts) {
    let clamp = |e: &mut Estimate| {
        e.objects = e.objects.max(0.0);
        e.bytes = e.bytes.max(0.0);
    };
    clamp(&mut counts.inuse);
    clamp(&mut counts.accum);
}

#[cfg(test)]
mod tests {
    use super::*;
    use jeprof_dumpfmt::ThreadCounts;

    fn stack(frames: &[u64], bytes: f64) -> Stack {
        let mut counts = Counts::default();
        counts.inuse.bytes = bytes;
        counts.inuse.objects = 1.0;
        Stack {
            frames: frames.to_vec(),
            counts,
            threads: vec![ThreadCounts { thread: 3, counts }],
        }
    }

    fn profile(stacks: Vec<Stack>) -> Profile {
        Profile {
            stacks,
            ..Profile::new(1)
        }
    }

    fn bytes(p: &Profile) -> Vec<(Vec<u64>, f64)> {
        p.stacks
            .iter()
            .map(|s| (s.frames.clone(), s.counts.inuse.bytes))
            .collect()
    }

    #[test]
    fn base_is_subtracted_per_stack_and_stacks_only_in_the_base_count_negative() {
        let a = profile(vec![stack(&[1, 2], 100.0), stack(&[3], 10.0)]);
        let b = profile(vec![stack(&[1, 2], 30.0), stack(&[3], 10.0)]);
        let base = profile(vec![
            stack(&[1, 2], 50.0),
            stack(&[3], 40.0),
            stack(&[4], 7.0),
        ]);
        let kept = subtract_base(vec![a.clone(), b.clone()], Some(base.clone()), false);
        assert_eq!(
            bytes(&kept),
            [(vec![1, 2], 80.0), (vec![3], -20.0), (vec![4], -7.0)]
        );
        let dropped = subtract_base(vec![a, b], Some(base), true);
        assert_eq!(bytes(&dropped), [(vec![1, 2], 80.0), (vec![3], 0.0)]);
    }

    #[test]
    fn thread_profiles_take_the_chosen_threads_of_the_first_dump() {
        let mut a = profile(vec![stack(&[1], 5.0)]);
        a.stacks[0].threads.push(ThreadCounts {
            thread: 1,
            counts: Counts::default(),
        });
        let all = thread_profiles(&a, &a, ThreadChoice::All);
        assert_eq!(all.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [1, 3]);
        let three = thread_profiles(&a, &a, ThreadChoice::One(3));
        assert_eq!(three.len(), 1);
        assert_eq!(bytes(&three[0].1), [(vec![1], 5.0)]);
        assert!(thread_profiles(&a, &a, ThreadChoice::One(9)).is_empty());
        assert_eq!("*".parse(), Ok(ThreadChoice::All));
        assert!("x".parse::<ThreadChoice>().is_err());
    }
}
