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
}
