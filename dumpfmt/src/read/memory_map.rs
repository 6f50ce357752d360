//! The memory map, after `MAPPED_LIBRARIES:`: the rest of the dump, kept verbatim but for `\r`s.

use std::io::BufRead;

use super::errors::malformed;
use super::lines::Lines;
use crate::error::Error;
use crate::syntax::END_MARKER;

/// The largest memory map section the reader keeps (a process's `/proc/self/maps` is rarely more
/// than a few hundred KiB).
pub const MAX_MAPS: usize = 64 << 20;

/// How a memory map section ends.
pub(super) struct MapsEnd {
    /// With [`END_MARKER`], last.
    pub(super) end_marker: bool,
    /// In the middle of a line (its number and length): the dump was cut.
    pub(super) cut_line: Option<(usize, usize)>,
}

/// The memory map: every line after the current one, `\r` removed, up to [`END_MARKER`] (which
/// must then be last) or the end of the input.
pub(super) fn read_memory_map(lines: &mut Lines<impl BufRead>) -> Result<(String, MapsEnd), Error> {
    let mut maps = String::new();
    let mut end = MapsEnd {
        end_marker: false,
        cut_line: None,
    };
    while let Some((no, line, unterminated)) = lines.next_line()? {
        if unterminated {
            end.cut_line = Some((no, line.len()));
            break;
        }
        if end.end_marker {
            return Err(malformed(
                no,
                line,
                &format!("nothing after `{END_MARKER}`"),
            ));
        }
        // The line as it is kept (and written again): compared with the marker after the
        // `\r`s are gone, or a map line `# \r…end of dump` would be kept as `# end of dump`
        // and read back as the marker.
        let text = String::from_utf8_lossy(line).replace('\r', "");
        if text == END_MARKER {
            end.end_marker = true;
            continue;
        }
        if maps.len() + text.len() >= MAX_MAPS {
            return Err(malformed(
                no,
                line,
                &format!("a memory map of at most {MAX_MAPS} bytes"),
            ));
        }
        maps.push_str(&text);
        maps.push('\n');
    }
    Ok((maps, end))
}

#[cfg(test)]
mod tests {
    use crate::read::parse;

    #[test]
    fn a_map_line_that_is_the_end_marker_once_its_crs_are_gone_is_the_marker() {
        // The map keeps its lines with every `\r` removed, as jeprof reads them; a line that is
        // `# end of dump` after that must end the map, not be kept and written back as one.
        let text = b"heap_v2/524288\n  t*: 2: 1048576 [0: 0]\nMAPPED_LIBRARIES:\n\
                     00400000-00402000 r-xp 00000000 08:01 1234 /usr/bin/kv\n# \r\rend of dump\n";
        let profile = parse(text).expect("a whole dump");
        let maps = profile.mapped_libraries.as_deref().unwrap_or_default();
        assert!(!maps.contains("end of dump"), "{maps:?}");
        let err = parse(&[text.as_slice(), b"# end of dump\n"].concat()).expect_err("two markers");
        assert!(err.to_string().contains("nothing after"), "{err}");
    }
}
