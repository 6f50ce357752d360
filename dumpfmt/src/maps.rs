//! The `MAPPED_LIBRARIES:` section: a process's `/proc/self/maps`, parsed into mappings.
//!
//! A frame address inside an executable mapping becomes `(module, file offset)`, which is the same in
//! every process running the same build whatever ASLR did: `file offset = address − start + offset`.

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// Whether the mapping is executable (`..x.`).
    pub executable: bool,
    /// The mapped file (or `[heap]`, `[vdso]`…); empty for anonymous mappings.
    pub path: String,
}

impl Mapping {
    /// The file offset that `address` (inside this mapping) corresponds to.
    pub fn file_offset(&self, address: u64) -> u64 {
        address.wrapping_sub(self.start).wrapping_add(self.offset)
    }

    /// The last component of the path, which names the module in merged output.
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// True for a mapping backed by a file (not anonymous, not `[vdso]`-style).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/') || (!self.path.is_empty() && !self.path.starts_with('['))
    }
}

/// Parses maps text. Lines that are not maps lines (the macOS "cooked" form, garbage) are skipped;
/// the cooked `start-end: path` form is accepted as an executable mapping at offset 0.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(m) = parse_line(line) {
            out.push(m);
        }
    }
    out.sort_by_key(|m| m.start);
    out
}

fn parse_line(line: &str) -> Option<Mapping> {
    let line = line.trim();
    let (range, rest) = line.split_once(|c: char| c.is_ascii_whitespace() || c == ':')?;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    if end <= start {
        return None;
    }
    if line[range.len()..].starts_with(':') {
        // macOS "cooked" form: `start-end: path`.
        return Some(Mapping {
            start,
            end,
            offset: 0,
            executable: true,
            path: rest.trim().to_string(),
        });
    }
    let mut fields = rest.split_ascii_whitespace();
    let perms = fields.next()?;
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    // The path may contain spaces: take everything after the fifth field.
    let path = fields.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start,
        end,
        offset,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        path,
    })
}

/// The executable mapping holding `address`, if any (`maps` sorted by start).
pub fn find(maps: &[Mapping], address: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= address);
    let m = maps.get(i.checked_sub(1)?)?;
    (address < m.end && m.executable).then_some(m)
}

/// The program's own executable mapping in `maps` (sorted by start), which pprof, Parca and
/// Pyroscope expect first (pprof's `File:` is the first mapping's): the executable mapping of
/// `program_file` (the mapped path of the file with the program's build id) when given and
/// present; else pprof's own guess (`massageMappings` in its `profile.go`): the first executable
/// mapping of a file whose name is not a shared library's (`.so`, `.so.N`), the kernel placing a
/// program below its libraries.
pub fn program_mapping<'m>(maps: &'m [Mapping], program_file: Option<&str>) -> Option<&'m Mapping> {
    if let Some(file) = program_file {
        if let Some(m) = maps.iter().find(|m| m.executable && m.path == file) {
            return Some(m);
        }
    }
    maps.iter()
        .find(|m| m.executable && m.is_file() && !is_shared_library(m.file_name()))
}

/// Whether `name` is a shared library's file name (pprof's `libRx`: `.so` at the end, or `.so.`
/// or `.so_` followed by a digit).
fn is_shared_library(name: &str) -> bool {
    let name = name.trim_end_matches(" (deleted)");
    name.ends_with(".so")
        || name.match_indices(".so").any(|(i, _)| {
            let rest = &name.as_bytes()[i + 3..];
            rest.len() >= 2 && matches!(rest[0], b'.' | b'_') && rest[1].is_ascii_digit()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pie_address_becomes_module_offset() {
        let maps = parse_maps(
            "5594f49a6000-5594f49af000 r--p 00000000 fe:00 10043485   /srv/app/real2\n\
             5594f49af000-5594f4a67000 r-xp 00009000 fe:00 10043485   /srv/app/real2\n\
             7f00-8f00 rw-p 00000000 00:00 0\n",
        );
        assert_eq!(maps.len(), 3);
        let m = find(&maps, 0x5594f4a54a80).expect("inside the text mapping");
        assert_eq!(m.path, "/srv/app/real2");
        assert_eq!(
            m.file_offset(0x5594f4a54a80),
            0x5594f4a54a80 - 0x5594f49af000 + 0x9000
        );
        assert!(find(&maps, 0x5594f49a6001).is_none(), "not executable");
        assert!(find(&maps, 0x10).is_none());
    }

    #[test]
    fn paths_with_spaces_and_cooked_lines_parse() {
        let maps =
            parse_maps("1000-2000 r-xp 00000000 00:00 1 /a b/c.so\n3000-4000: /usr/lib/x.dylib\n");
        assert_eq!(maps[0].path, "/a b/c.so");
        assert_eq!(maps[1].path, "/usr/lib/x.dylib");
        assert!(maps[1].executable);
    }

    const REDIS_MAPS: &str = "\
        55d0c4a00000-55d0c4a40000 r--p 00000000 fe:00 7 /usr/bin/redis-check-rdb\n\
        55d0c4a40000-55d0c4c00000 r-xp 00040000 fe:00 7 /usr/bin/redis-check-rdb\n\
        7f10a0000000-7f10a0100000 r-xp 00000000 fe:00 8 /usr/lib/x86_64-linux-gnu/libcrypto.so.3\n\
        7f10a0200000-7f10a0300000 r-xp 00000000 fe:00 9 /opt/app/lib/libjeprof_preload.so\n";

    #[test]
    fn the_program_mapping_is_the_file_with_the_programs_build_id() {
        let maps = parse_maps(REDIS_MAPS);
        let m = program_mapping(&maps, Some("/usr/lib/x86_64-linux-gnu/libcrypto.so.3"));
        assert_eq!(m.unwrap().path, "/usr/lib/x86_64-linux-gnu/libcrypto.so.3");
        let m = program_mapping(&maps, Some("/usr/bin/redis-check-rdb")).unwrap();
        assert_eq!((m.start, m.executable), (0x55d0c4a40000, true));
    }

    #[test]
    fn without_a_build_id_the_program_is_the_first_file_that_is_not_a_library() {
        let libraries_first = "\
            1000-2000 r-xp 00000000 00:00 1 /lib/libz.so.1.2.13\n\
            3000-4000 r-xp 00000000 00:00 2 /lib/libx.so\n\
            5000-6000 r-xp 00000000 00:00 3 [vdso]\n\
            7000-8000 r-xp 00000000 00:00 4 /opt/app/server\n";
        let maps = parse_maps(libraries_first);
        assert_eq!(
            program_mapping(&maps, None).unwrap().path,
            "/opt/app/server"
        );
        assert_eq!(
            program_mapping(&maps, Some("/not/mapped")).unwrap().path,
            "/opt/app/server"
        );
        let maps = parse_maps(REDIS_MAPS);
        assert_eq!(
            program_mapping(&maps, None).unwrap().path,
            "/usr/bin/redis-check-rdb"
        );
        assert!(
            program_mapping(&parse_maps("1000-2000 r-xp 0 0:0 1 /lib/a.so.6\n"), None).is_none()
        );
        assert!(!is_shared_library("python3.11"));
        assert!(is_shared_library("libfoo.so_1"));
    }
}
