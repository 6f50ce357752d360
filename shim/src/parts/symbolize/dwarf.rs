//! Addresses to inlined frames and source lines, one compilation unit at a time.
//!
//! The same answers as addr2line's `find_frames` (which backtrace uses), computed differently:
//! addr2line keeps every unit it has looked into (its headers, abbreviations, line table and
//! function tree), which is memory in proportion to the debug info touched. Here the addresses
//! are sorted and the units are read in order: a unit whose ranges hold none of the addresses
//! still to name costs its first entry; a unit that holds some is walked once for its functions,
//! once for its inlined calls and once for its line program, each address taking what it needs
//! on the way, and is dropped before the next. Nothing is built per function or per line row, so
//! what is alive at once is one unit's abbreviations and line-program header plus the frames
//! found, whatever the size of the object.
//!
//! The semantics copied from addr2line 0.27 (`function.rs`, `line.rs`, `frame.rs`): a unit
//! covers its `DW_AT_ranges`, else `DW_AT_low_pc`/`DW_AT_high_pc`, else its line sequences; the
//! function is the `DW_TAG_subprogram` whose ranges hold the address; its inlined calls form a
//! chain by depth; frames go innermost first, the first with the line table's position, each
//! next one with the call site (`DW_AT_call_file`, `DW_AT_call_line`) of the one inside it; a
//! name is the linkage name, else the name, else that of the `DW_AT_abstract_origin` or
//! `DW_AT_specification` (16 links at most); paths are the unit's directory, the file's
//! directory and its name joined, an absolute part replacing what precedes it. Not followed:
//! split DWARF (`.dwo`, `.dwp`) and supplementary files (`.gnu_debugaltlink`): frames from
//! them get the symbol table's name.

use gimli::{AttributeValue, EndianSlice, NativeEndian, UnitOffset, UnitRef};

/// The DWARF of one object, borrowed from its mapping (or its decompressed sections).
pub(super) type Slice<'a> = EndianSlice<'a, NativeEndian>;
/// The sections gimli reads.
pub(super) type Dwarf<'a> = gimli::Dwarf<Slice<'a>>;

/// One frame found for an address: the function's name (demangled; `None` when the DWARF has
/// none, the symbol table's is used then) and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Frame {
    pub(super) name: Option<String>,
    pub(super) file: Option<String>,
    pub(super) line: Option<u32>,
}

/// An address to name (in the object's own addresses) and, once its unit is found, its frames.
#[derive(Debug)]
pub(super) struct Probe {
    pub(super) svma: u64,
    /// `Some` once a unit gave a function or a line for it (possibly frames without names).
    pub(super) frames: Option<Vec<Frame>>,
}

/// An inlined call holding an address: the inlined function's name and where it was called.
#[derive(Debug, Clone)]
struct Inlined {
    name: Option<String>,
    call_file: Option<u64>,
    call_line: u32,
}

/// What one unit told about one candidate address.
#[derive(Debug, Default)]
struct Found {
    /// The subprogram holding it.
    function: Option<UnitOffset<usize>>,
    /// Its name, once the function was read.
    function_name: Option<String>,
    /// Inlined calls holding it, outermost first.
    inlined: Vec<Inlined>,
    /// The line table's file index and line (0: none).
    row: Option<(u64, u32)>,
}

/// The addresses' ranges as `[begin, end)` of a DIE (`DW_AT_low_pc`, `DW_AT_high_pc`,
/// `DW_AT_ranges`).
#[derive(Default)]
struct RangeAttrs {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges: Option<gimli::RangeListsOffset<usize>>,
}

impl RangeAttrs {
    /// Reads `attr` if it is one of the range attributes.
    fn note<'a>(&mut self, unit: UnitRef<'_, Slice<'a>>, attr: &gimli::Attribute<Slice<'a>>) {
        match (attr.name(), attr.value()) {
            (gimli::DW_AT_low_pc, AttributeValue::Addr(v)) => self.low_pc = Some(v),
            (gimli::DW_AT_low_pc, AttributeValue::DebugAddrIndex(i)) => {
                self.low_pc = unit.address(i).ok()
            }
            (gimli::DW_AT_high_pc, AttributeValue::Addr(v)) => self.high_pc = Some(v),
            (gimli::DW_AT_high_pc, AttributeValue::DebugAddrIndex(i)) => {
                self.high_pc = unit.address(i).ok()
            }
            (gimli::DW_AT_high_pc, AttributeValue::Udata(v)) => self.size = Some(v),
            (gimli::DW_AT_ranges, v) => self.ranges = unit.attr_ranges_offset(v).ok().flatten(),
            _ => {}
        }
    }

    /// Calls `f` with each non-empty range; whether there was any.
    fn for_each(
        &self,
        unit: UnitRef<'_, Slice<'_>>,
        mut f: impl FnMut(u64, u64),
    ) -> gimli::Result<bool> {
        let mut any = false;
        let mut add = |begin: u64, end: u64| {
            if begin < end {
                f(begin, end);
                any = true;
            }
        };
        if let Some(offset) = self.ranges {
            let mut list = unit.ranges(offset)?;
            while let Some(r) = list.next()? {
                add(r.begin, r.end);
            }
        } else if let (Some(b), Some(e)) = (self.low_pc, self.high_pc) {
            add(b, e);
        } else if let (Some(b), Some(s)) = (self.low_pc, self.size) {
            // A -1 tombstone overflows to an empty range, which `add` drops.
            add(b, b.wrapping_add(s));
        }
        Ok(any)
    }
}

/// The positions in `candidates` (sorted by address) whose address is in `[begin, end)`.
fn within(probes: &[Probe], candidates: &[usize], begin: u64, end: u64) -> std::ops::Range<usize> {
    let lo = candidates.partition_point(|&i| probes[i].svma < begin);
    let hi = candidates.partition_point(|&i| probes[i].svma < end);
    lo..hi.max(lo)
}

/// Finds frames for every probe still without any (`probes` sorted by `svma`), unit by unit;
/// calls `observe` after each unit that held some, while its data is still alive (for the
/// caller's peak). Stops early, keeping what was found, at a malformed unit list.
pub(super) fn find_frames(dwarf: &Dwarf<'_>, probes: &mut [Probe], observe: &mut dyn FnMut()) {
    let mut units = dwarf.units();
    let mut candidates = Vec::new();
    let mut unit_starts: Option<Vec<usize>> = None;
    while let Ok(Some(header)) = units.next() {
        if !matches!(
            header.type_(),
            gimli::UnitType::Compilation | gimli::UnitType::Skeleton(_)
        ) {
            continue;
        }
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let unit = UnitRef::new(dwarf, &unit);
        candidates.clear();
        if unit_candidates(unit, probes, &mut candidates).is_err() || candidates.is_empty() {
            continue;
        }
        // A unit's ranges may repeat or overlap.
        candidates.sort_unstable();
        candidates.dedup();
        let mut found: Vec<Found> = Vec::new();
        found.resize_with(candidates.len(), Found::default);
        if read_unit(unit, probes, &candidates, &mut found, &mut unit_starts).is_err() {
            continue;
        }
        let mut files = FileNames::default();
        for (&i, f) in candidates.iter().zip(found) {
            if let Some(frames) = assemble(unit, f, &mut files) {
                probes[i].frames = Some(frames);
            }
        }
        observe();
    }
}

/// Pushes onto `out` the probes without frames that the unit's ranges hold.
fn unit_candidates(
    unit: UnitRef<'_, Slice<'_>>,
    probes: &[Probe],
    out: &mut Vec<usize>,
) -> gimli::Result<()> {
    let mut entries = unit.entries_raw(None)?;
    let Some(abbrev) = entries.read_abbreviation()? else {
        return Ok(());
    };
    let mut ranges = RangeAttrs::default();
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        ranges.note(unit, &attr);
    }
    let mut push = |begin: u64, end: u64| {
        let lo = probes.partition_point(|p| p.svma < begin);
        for (i, p) in probes.iter().enumerate().skip(lo) {
            if p.svma >= end {
                break;
            }
            if p.frames.is_none() {
                out.push(i);
            }
        }
    };
    if ranges.for_each(unit, &mut push)? {
        return Ok(());
    }
    // No ranges declared: the line program's sequences, as addr2line does.
    if let Some(program) = unit.line_program.clone() {
        let mut rows = program.rows();
        let mut start = None;
        while let Some((_, row)) = rows.next_row()? {
            if row.end_sequence() {
                if let Some(begin) = start.take() {
                    push(begin, row.address());
                }
            } else if start.is_none() {
                start = Some(row.address());
            }
        }
    }
    Ok(())
}

/// Fills `found` (parallel to `candidates`) from the unit: functions, inlined calls, lines.
fn read_unit(
    unit: UnitRef<'_, Slice<'_>>,
    probes: &[Probe],
    candidates: &[usize],
    found: &mut [Found],
    unit_starts: &mut Option<Vec<usize>>,
) -> gimli::Result<()> {
    // The subprograms holding each candidate (any depth, as addr2line; the first one wins).
    let mut entries = unit.entries_raw(None)?;
    while !entries.is_empty() {
        let offset = entries.next_offset();
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        if abbrev.tag() != gimli::DW_TAG_subprogram {
            entries.skip_attributes(abbrev.attributes())?;
            continue;
        }
        let mut ranges = RangeAttrs::default();
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec)?;
            ranges.note(unit, &attr);
        }
        ranges.for_each(unit, |begin, end| {
            for k in within(probes, candidates, begin, end) {
                found[k].function.get_or_insert(offset);
            }
        })?;
    }

    // Each function holding candidates: its name and the inlined calls holding each of them.
    let mut order: Vec<usize> = (0..found.len())
        .filter(|&k| found[k].function.is_some())
        .collect();
    order.sort_by_key(|&k| found[k].function.map(|o| o.0));
    let mut group = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let function = found[order[start]].function;
        let mut end = start;
        while end < order.len() && found[order[end]].function == function {
            end += 1;
        }
        group.clear();
        group.extend_from_slice(&order[start..end]);
        // Sorted by address (candidates are), for `within`.
        group.sort_unstable();
        if let Some(offset) = function {
            read_function(unit, offset, probes, candidates, &group, found, unit_starts)?;
        }
        start = end;
    }

    // The line table: each row covers up to the next row's address in its sequence.
    if let Some(program) = unit.line_program.clone() {
        let mut rows = program.rows();
        let mut pending: Option<(u64, u64, u32)> = None;
        let mut assign = |begin: u64, end: u64, file: u64, line: u32| {
            for k in within(probes, candidates, begin, end) {
                found[k].row.get_or_insert((file, line));
            }
        };
        while let Some((_, row)) = rows.next_row()? {
            let address = row.address();
            if let Some((begin, file, line)) = pending {
                if address > begin {
                    assign(begin, address, file, line);
                } else if address == begin && !row.end_sequence() {
                    // Rows at one address: the last one holds (addr2line keeps it).
                    pending = Some((begin, row.file_index(), line_of(row)));
                    continue;
                }
            }
            pending = (!row.end_sequence()).then(|| (address, row.file_index(), line_of(row)));
        }
    }
    Ok(())
}

fn line_of(row: &gimli::LineRow) -> u32 {
    row.line()
        .map_or(0, |l| u32::try_from(l.get()).unwrap_or(u32::MAX))
}

/// Reads the subprogram at `offset`: its name into each of `group`'s entries of `found`, and
/// the chain of inlined calls holding each.
fn read_function(
    unit: UnitRef<'_, Slice<'_>>,
    offset: UnitOffset<usize>,
    probes: &[Probe],
    candidates: &[usize],
    group: &[usize],
    found: &mut [Found],
    unit_starts: &mut Option<Vec<usize>>,
) -> gimli::Result<()> {
    let addresses: Vec<usize> = group.iter().map(|&k| candidates[k]).collect();
    let mut entries = unit.entries_raw(Some(offset))?;
    let depth = entries.next_depth();
    let Some(abbrev) = entries.read_abbreviation()? else {
        return Ok(());
    };
    let mut names = NameAttrs::default();
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        names.note(&attr);
    }
    let name = names.resolve(unit, unit_starts);
    for &k in group {
        found[k].function_name.clone_from(&name);
    }

    // Depth-first over the children: (DIE depth, inlined depth) of the open inlined calls.
    let mut open: Vec<isize> = Vec::new();
    let mut skip_below: Option<isize> = None;
    loop {
        let d = entries.next_depth();
        if d <= depth || entries.is_empty() {
            return Ok(());
        }
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        if let Some(s) = skip_below {
            if d > s {
                entries.skip_attributes(abbrev.attributes())?;
                continue;
            }
            skip_below = None;
        }
        while open.last().is_some_and(|&o| o >= d) {
            open.pop();
        }
        match abbrev.tag() {
            // A nested function is its own subprogram: not an inlined call of this one.
            gimli::DW_TAG_subprogram => {
                entries.skip_attributes(abbrev.attributes())?;
                skip_below = Some(d);
            }
            gimli::DW_TAG_inlined_subroutine => {
                let inlined_depth = open.len();
                open.push(d);
                let (ranges, names, call_file, call_line) =
                    inlined_attributes(unit, &mut entries, abbrev)?;
                let mut hits = Vec::new();
                ranges.for_each(unit, |begin, end| {
                    let lo = addresses.partition_point(|&i| probes[i].svma < begin);
                    let hi = addresses.partition_point(|&i| probes[i].svma < end);
                    hits.extend(lo..hi.max(lo));
                })?;
                if hits.is_empty() {
                    continue;
                }
                let inlined = Inlined {
                    name: names.resolve(unit, unit_starts),
                    call_file,
                    call_line,
                };
                for g in hits {
                    let chain = &mut found[group[g]].inlined;
                    // Only under a call that holds it too (addr2line looks depth by depth).
                    if chain.len() >= inlined_depth {
                        chain.truncate(inlined_depth);
                        chain.push(inlined.clone());
                    }
                }
            }
            _ => entries.skip_attributes(abbrev.attributes())?,
        }
    }
}

/// An inlined call's attributes: its address ranges, what names its function, and its call
/// site (file and line).
fn inlined_attributes<'a>(
    unit: UnitRef<'_, Slice<'a>>,
    entries: &mut gimli::EntriesRaw<'_, Slice<'a>>,
    abbrev: &gimli::Abbreviation,
) -> gimli::Result<(RangeAttrs, NameAttrs<'a>, Option<u64>, u32)> {
    let mut ranges = RangeAttrs::default();
    let mut names = NameAttrs::default();
    let mut call_file = None;
    let mut call_line = 0;
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        ranges.note(unit, &attr);
        names.note(&attr);
        match (attr.name(), attr.value()) {
            // DWARF 5 numbers files from 0 (addr2line's reading of the spec issue).
            (gimli::DW_AT_call_file, AttributeValue::FileIndex(f))
                if f > 0 || unit.header.version() >= 5 =>
            {
                call_file = Some(f)
            }
            (gimli::DW_AT_call_line, _) => {
                call_line = attr
                    .udata_value()
                    .map_or(0, |l| u32::try_from(l).unwrap_or(u32::MAX))
            }
            _ => {}
        }
    }
    Ok((ranges, names, call_file, call_line))
}

/// The attributes that name a function, as read from its DIE.
#[derive(Default)]
struct NameAttrs<'a> {
    linkage: Option<AttributeValue<Slice<'a>>>,
    name: Option<AttributeValue<Slice<'a>>>,
    origin: Option<AttributeValue<Slice<'a>>>,
}

impl<'a> NameAttrs<'a> {
    fn note(&mut self, attr: &gimli::Attribute<Slice<'a>>) {
        match attr.name() {
            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                self.linkage = Some(attr.value())
            }
            gimli::DW_AT_name => self.name = Some(attr.value()),
            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => {
                self.origin = Some(attr.value())
            }
            _ => {}
        }
    }

    /// The demangled name: linkage name, else name, else the origin's (followed 16 links deep).
    fn resolve(
        &self,
        unit: UnitRef<'_, Slice<'a>>,
        unit_starts: &mut Option<Vec<usize>>,
    ) -> Option<String> {
        let raw = self.raw(unit, unit_starts, 16)?;
        Some(format!("{:#}", backtrace::SymbolName::new(raw.slice())))
    }

    fn raw(
        &self,
        unit: UnitRef<'_, Slice<'a>>,
        unit_starts: &mut Option<Vec<usize>>,
        links: usize,
    ) -> Option<Slice<'a>> {
        for value in [&self.linkage, &self.name].into_iter().flatten() {
            if let Ok(s) = unit.attr_string(*value) {
                return Some(s);
            }
        }
        let origin = self.origin?;
        if links == 0 {
            return None;
        }
        match origin {
            AttributeValue::UnitRef(offset) => name_at(unit, offset, unit_starts, links - 1),
            AttributeValue::DebugInfoRef(offset) => {
                let starts = unit_starts.get_or_insert_with(|| unit_offsets(unit.dwarf));
                let at = starts.partition_point(|&s| s <= offset.0);
                let start = *starts.get(at.checked_sub(1)?)?;
                let header = unit
                    .dwarf
                    .debug_info
                    .header_from_offset(gimli::DebugInfoOffset(start))
                    .ok()?;
                let local = offset.to_unit_offset(&header)?;
                let other = unit.dwarf.unit(header).ok()?;
                name_at(
                    UnitRef::new(unit.dwarf, &other),
                    local,
                    unit_starts,
                    links - 1,
                )
            }
            _ => None,
        }
    }
}

/// The name of the entry at `offset` in `unit`.
fn name_at<'a>(
    unit: UnitRef<'_, Slice<'a>>,
    offset: UnitOffset<usize>,
    unit_starts: &mut Option<Vec<usize>>,
    links: usize,
) -> Option<Slice<'a>> {
    let mut entries = unit.entries_raw(Some(offset)).ok()?;
    let abbrev = entries.read_abbreviation().ok()??;
    let mut names = NameAttrs::default();
    for spec in abbrev.attributes() {
        names.note(&entries.read_attribute(*spec).ok()?);
    }
    names.raw(unit, unit_starts, links)
}

/// The `.debug_info` offsets where units start, in order (built once per object, only when a
/// name refers into another unit: 8 bytes a unit).
fn unit_offsets(dwarf: &Dwarf<'_>) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        starts.push(header.offset().0);
    }
    starts
}

/// The unit's file names by line-table index, rendered when first asked for.
#[derive(Default)]
struct FileNames {
    rendered: Vec<(u64, Option<String>)>,
}

impl FileNames {
    fn get(&mut self, unit: UnitRef<'_, Slice<'_>>, index: u64) -> Option<String> {
        if let Some((_, name)) = self.rendered.iter().find(|(i, _)| *i == index) {
            return name.clone();
        }
        let name = render_file(unit, index);
        self.rendered.push((index, name.clone()));
        name
    }
}

/// The path of file `index` of the unit's line table, as addr2line renders it.
fn render_file(unit: UnitRef<'_, Slice<'_>>, index: u64) -> Option<String> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let Some(file) = header.file(index) else {
        // DWARF 4 and older have no file 0: addr2line names it "".
        return (index == 0).then(String::new);
    };
    let mut path = match unit.comp_dir {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => String::new(),
    };
    if file.directory_index() != 0 {
        if let Some(dir) = file.directory(header) {
            let dir = unit.attr_string(dir).ok()?;
            path_push(&mut path, &dir.to_string_lossy());
        }
    }
    let name = unit.attr_string(file.path_name()).ok()?;
    path_push(&mut path, &name.to_string_lossy());
    Some(path)
}

/// Joins `p` to `path`; an absolute `p` replaces it (addr2line's `path_push`).
fn path_push(path: &mut String, p: &str) {
    let forward_root = |s: &str| s.starts_with('/') || s.get(1..3) == Some(":/");
    let backward_root = |s: &str| s.starts_with('\\') || s.get(1..3) == Some(":\\");
    if forward_root(p) || backward_root(p) {
        *path = p.to_string();
    } else {
        let separator = if backward_root(path) { '\\' } else { '/' };
        if !path.is_empty() && !path.ends_with(separator) {
            path.push(separator);
        }
        path.push_str(p);
    }
}

/// The frames for one address, innermost first: `None` when the unit has neither a function nor
/// a line for it (a later unit may).
fn assemble(unit: UnitRef<'_, Slice<'_>>, f: Found, files: &mut FileNames) -> Option<Vec<Frame>> {
    let (mut file, mut line) = match f.row {
        Some((file_index, l)) => (files.get(unit, file_index), (l != 0).then_some(l)),
        None => (None, None),
    };
    if f.function.is_none() {
        return f.row.map(|_| {
            vec![Frame {
                name: None,
                file,
                line,
            }]
        });
    }
    let mut frames = Vec::with_capacity(f.inlined.len() + 1);
    for inlined in f.inlined.into_iter().rev() {
        frames.push(Frame {
            name: inlined.name,
            file: file.take(),
            line,
        });
        file = inlined.call_file.and_then(|i| files.get(unit, i));
        line = (inlined.call_line != 0).then_some(inlined.call_line);
    }
    frames.push(Frame {
        name: f.function_name,
        file,
        line,
    });
    Some(frames)
}

#[cfg(test)]
mod tests {
    use super::path_push;

    #[test]
    fn path_push_joins_relative_parts_and_an_absolute_part_replaces() {
        let mut p = String::from("/build");
        path_push(&mut p, "src");
        path_push(&mut p, "lib.rs");
        assert_eq!(p, "/build/src/lib.rs");
        path_push(&mut p, "/rustc/abc/library/core/src/ptr.rs");
        assert_eq!(p, "/rustc/abc/library/core/src/ptr.rs");
    }
}
