//! Dump files nobody can hijack and nobody sees half of: `write::write_file` (what the shim's
//! `dump()` and the CLI's outputs use) through `output::AtomicFile`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use jeprof_dumpfmt::{Estimate, Profile, Stack, WriteOptions};

fn profile(stacks: u64) -> Profile {
    let mut p = Profile::new(1 << 19);
    for i in 0..stacks {
        let mut s = Stack {
            frames: vec![0x401000 + i * 16, 0x402000],
            ..Stack::default()
        };
        s.counts
            .inuse
            .add(&Estimate::of_sample(4096.0, (1 << 19) as f64));
        p.stacks.push(s);
    }
    p.mapped_libraries = Some("00400000-00500000 r-xp 00000000 00:00 0 /bin/prog\n".into());
    p
}

fn write(path: &Path, p: &Profile) -> Result<(), jeprof_dumpfmt::Error> {
    jeprof_dumpfmt::write::write_file(p, path, &WriteOptions::default())
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn planted_symlinks_are_never_followed_and_planted_files_never_written_into() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let target = dir.path().join("heap.prof");
    // The names an attacker could predict: the target itself and the temporary name earlier
    // versions used (`.<name>.<pid>.tmp`), each a symlink to the victim.
    let legacy = dir
        .path()
        .join(format!(".heap.prof.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &legacy).unwrap();
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    for _ in 0..20 {
        write(&target, &profile(3)).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the link was replaced by the dump"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(
        std::fs::read_link(&legacy).is_ok(),
        "the planted link is left alone"
    );
    // Nothing else left behind: no temporary file survives a successful write.
    assert_eq!(names_in(dir.path()).len(), 3, "{:?}", names_in(dir.path()));

    // A world-readable file planted at the target (owned by someone else in real life) is
    // replaced, not written into: whoever holds it never receives the dump.
    std::fs::remove_file(&target).unwrap();
    std::fs::write(&target, "").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
    let planted = std::fs::File::open(&target).unwrap();
    let planted_inode = planted.metadata().unwrap().ino();
    write(&target, &profile(3)).unwrap();
    assert_eq!(
        planted.metadata().unwrap().len(),
        0,
        "planted file stays empty"
    );
    let written = std::fs::metadata(&target).unwrap();
    assert_ne!(written.ino(), planted_inode);
    assert_eq!(written.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_failed_write_leaves_the_previous_dump_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("heap.prof");
    write(&target, &profile(2)).unwrap();
    let before = std::fs::read(&target).unwrap();
    // An invalid profile fails inside the write, after the temporary file exists.
    let mut bad = profile(2);
    bad.stacks[0].counts.inuse.bytes = f64::NAN;
    assert!(write(&target, &bad).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), before);
    assert_eq!(names_in(dir.path()), vec!["heap.prof".to_string()]);
}

#[test]
fn concurrent_dumps_to_one_path_all_succeed_and_a_reader_only_sees_whole_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("heap.prof");
    write(&target, &profile(1)).unwrap();
    let done = AtomicBool::new(false);
    let (reads, errors) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let target = &target;
                s.spawn(move || {
                    let p = profile(20 + w);
                    (0..1000).filter(|_| write(target, &p).is_err()).count()
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut reads = 0usize;
            while !done.load(Ordering::Relaxed) {
                // Every read must be one whole dump: it parses, and it is one of the two written
                // (or the first), never a mix.
                let p = jeprof_dumpfmt::read::read_file(&target).expect("a whole dump");
                assert!([1, 20, 21].contains(&p.stacks.len()), "{}", p.stacks.len());
                reads += 1;
            }
            reads
        });
        let errors: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        (reader.join().unwrap(), errors)
    });
    assert_eq!(errors, 0, "every concurrent dump succeeds");
    assert!(reads > 0);
    assert_eq!(names_in(dir.path()), vec!["heap.prof".to_string()]);
}
