//! The loaded objects' unwind tables, as of one pair of loader counters: the snapshot (rebuilt
//! through `dl_iterate_phdr` when objects were loaded or unloaded, published behind an
//! `AtomicPtr`, never freed), the object holding an address, and the FDE covering it.

use std::ops::Range;
use std::sync::atomic::{AtomicPtr, Ordering};

use gimli::{
    BaseAddresses, EhFrame, EhFrameHdr, EhFrameOffset, EndianSlice, FrameDescriptionEntry,
    LittleEndian, ParsedEhFrameHdr, UnwindSection,
};

use super::arch;
use crate::base::thread::Guard;

pub(super) type Bytes = EndianSlice<'static, LittleEndian>;

/// One loaded object's code range and unwind tables.
///
/// Its `'static` slices are a promise kept by [`Snapshot`]'s use, not by the loader: they point
/// into the object's mapped image, and are read only while the object is loaded.
pub(super) struct Object {
    pub(super) code: Range<u64>,
    pub(super) bases: BaseAddresses,
    pub(super) eh_frame: EhFrame<Bytes>,
    /// Where `.eh_frame` is mapped (FDE pointers in the search table are addresses).
    eh_frame_avma: u64,
    pub(super) hdr: ParsedEhFrameHdr<Bytes>,
    /// The search table read directly, when it has the encoding every linker writes.
    pub(super) table: Option<SearchTable>,
}

impl Object {
    /// The FDE that covers `address`, if any.
    pub(super) fn fde_for(&self, address: u64) -> Option<FrameDescriptionEntry<Bytes>> {
        match &self.table {
            Some(table) => {
                let offset = table.fde_offset(address, self.eh_frame_avma)?;
                let fde = self
                    .eh_frame
                    .fde_from_offset(&self.bases, offset, EhFrame::cie_from_offset)
                    .ok()?;
                // The search finds the last FDE starting at or below `address`; it may end
                // before it (a gap without unwind information).
                fde.contains(address).then_some(fde)
            }
            None => self
                .hdr
                .table()?
                .fde_for_address(
                    &self.eh_frame,
                    &self.bases,
                    address,
                    EhFrame::cie_from_offset,
                )
                .ok(),
        }
    }
}

/// An `.eh_frame_hdr` search table in the encoding GNU ld, gold, lld and mold write (version 1,
/// `.eh_frame` pointer `pcrel|sdata4`, count `udata4`, entries `datarel|sdata4`): sorted pairs
/// of 32-bit offsets from the header, (function start, FDE). Searched here with plain integer
/// compares; gimli's generic search decodes every probed pointer through its encoding, which
/// was a third of a cache miss's cost (about 1,300 of 3,700 instructions, 14 probes).
pub(super) struct SearchTable {
    /// `count` entries of 8 bytes.
    entries: &'static [u8],
    count: usize,
    /// Where the header is mapped: the base of the entries' offsets.
    hdr_avma: u64,
}

impl SearchTable {
    /// The table of the header `hdr` (mapped at `hdr_avma`), if it has the usual encoding and
    /// all its entries lie in `hdr`.
    fn of(hdr: &'static [u8], hdr_avma: u64) -> Option<SearchTable> {
        if hdr.get(..4)? != [1, 0x1b, 0x03, 0x3b] {
            return None;
        }
        let count = usize::try_from(u32::from_le_bytes(hdr.get(8..12)?.try_into().ok()?)).ok()?;
        let entries = hdr.get(12..count.checked_mul(8)?.checked_add(12)?)?;
        Some(SearchTable {
            entries,
            count,
            hdr_avma,
        })
    }

    /// The 32-bit offset at byte `at` of the entries, sign-extended.
    fn word(&self, at: usize) -> Option<i64> {
        let b = self.entries.get(at..at.checked_add(4)?)?;
        Some(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// The `.eh_frame` offset of the last FDE whose function starts at or below `address`.
    fn fde_offset(&self, address: u64, eh_frame_avma: u64) -> Option<EhFrameOffset<usize>> {
        // The address relative to the header, as the entries are (a code address outside
        // ±2 GiB of it compares as whatever it wraps to, and then fails `contains`).
        let relative = address.wrapping_sub(self.hdr_avma) as i64;
        // The first entry starting above `address`.
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let middle = low + (high - low) / 2;
            if self.word(middle * 8)? <= relative {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let fde = self
            .hdr_avma
            .wrapping_add_signed(self.word(low.checked_sub(1)? * 8 + 4)?);
        usize::try_from(fde.checked_sub(eh_frame_avma)?)
            .ok()
            .map(EhFrameOffset)
    }
}

/// The loaded objects as of one pair of loader counters. Immutable once published.
///
/// Why its bytes are mapped whenever they are read: a capture first brings the snapshot up to
/// date with the loader counters, then reads unwind tables only for return addresses inside
/// one of its objects' code ranges, reached by following the CFI from the capture's own frame.
/// Those are frames of this thread, and an object cannot be unloaded while a thread still has
/// frames in it.
pub(super) struct Snapshot {
    /// Sorted by code start, not overlapping.
    pub(super) objects: Vec<Object>,
    /// `dlpi_adds + dlpi_subs` when built: both only grow, so a larger sum is newer; also the
    /// rule caches' generation.
    pub(super) changes: u64,
    adds: u64,
    subs: u64,
}

impl Snapshot {
    /// The object whose code holds `address`; `hint` is the index of the one that held the
    /// previous address (most neighbouring frames share an object).
    #[inline]
    pub(super) fn find(&self, address: u64, hint: &mut usize) -> Option<&Object> {
        if let Some(o) = self.objects.get(*hint) {
            if o.code.contains(&address) {
                return Some(o);
            }
        }
        let i = self.objects.partition_point(|o| o.code.end <= address);
        let o = self.objects.get(i)?;
        if o.code.start <= address {
            *hint = i;
            Some(o)
        } else {
            None
        }
    }
}

/// The current snapshot; null until the first capture. Replaced ones are leaked (module docs).
static SNAPSHOT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

/// The snapshot, rebuilt first if objects were loaded or unloaded since it was made.
pub(super) fn current_snapshot() -> Option<&'static Snapshot> {
    let mut check = Check {
        // Ordering: Acquire pairs with the Release publication in `publish`, so the
        // snapshot's contents are visible.
        current: SNAPSHOT.load(Ordering::Acquire),
        building: None,
    };
    // SAFETY: the callback matches dl_iterate_phdr's contract, only reads the info it is
    // handed, and neither walks the loaded objects nor unwinds; `check` outlives the call.
    unsafe {
        crate::base::loader::iterate_phdr(on_object, (&mut check as *mut Check).cast());
    }
    if let Some(built) = check.building.take() {
        publish(built);
    }
    // Ordering: as above.
    let p = SNAPSHOT.load(Ordering::Acquire);
    // SAFETY: published snapshots are never freed (module docs) and never mutated.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Replaces the snapshot with `built` unless a newer one was published meanwhile.
fn publish(built: Box<Snapshot>) {
    let _guard = Guard::enter();
    let changes = built.changes;
    let new = Box::into_raw(built);
    // Ordering: Acquire to read the current one's `changes`; see `current_snapshot`.
    let mut current = SNAPSHOT.load(Ordering::Acquire);
    loop {
        // SAFETY: published snapshots are never freed.
        if !current.is_null() && unsafe { (*current).changes } >= changes {
            // SAFETY: `new` came from Box::into_raw above and was never published.
            drop(unsafe { Box::from_raw(new) });
            return;
        }
        // Ordering: Release publishes the snapshot's contents to the Acquire loads.
        match SNAPSHOT.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
            // The replaced snapshot is leaked on purpose (module docs).
            Ok(_) => return,
            Err(now) => current = now,
        }
    }
}

/// State of one `dl_iterate_phdr` pass.
struct Check {
    current: *mut Snapshot,
    /// Being built, when the counters moved.
    building: Option<Box<Snapshot>>,
}

/// `dl_iterate_phdr`'s callback: on the first object compares the loader counters with the
/// snapshot's and stops if they match; otherwise collects every object.
unsafe extern "C" fn on_object(
    info: *mut libc::dl_phdr_info,
    size: usize,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `Check` passed by `current_snapshot`, alive and not otherwise
    // borrowed during the call; `info` points at a valid dl_phdr_info of `size` bytes.
    let (check, info) = unsafe { (&mut *data.cast::<Check>(), &*info) };
    if check.building.is_none() {
        // The counters are only present in newer callers' layouts: glibc says so by `size`.
        let has_counters = size
            >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs)
                + std::mem::size_of::<libc::c_ulonglong>();
        if !has_counters {
            return 1;
        }
        let (adds, subs) = (info.dlpi_adds, info.dlpi_subs);
        if !check.current.is_null() {
            // SAFETY: published snapshots are never freed.
            let cur = unsafe { &*check.current };
            if cur.adds == adds && cur.subs == subs {
                return 1;
            }
        }
        let _guard = Guard::enter();
        check.building = Some(Box::new(Snapshot {
            objects: Vec::new(),
            changes: adds.wrapping_add(subs),
            adds,
            subs,
        }));
    }
    let _guard = Guard::enter();
    if let Some(snapshot) = check.building.as_mut() {
        // SAFETY: `info` describes a loaded object (dl_iterate_phdr's contract).
        if let Some(object) = unsafe { object_of(info) } {
            let at = snapshot
                .objects
                .partition_point(|o| o.code.start < object.code.start);
            snapshot.objects.insert(at, object);
        }
    }
    0
}

/// The code range and unwind tables of one loaded object, if it has an `.eh_frame_hdr` with
/// a search table.
///
/// # Safety
/// `info` describes an object loaded now (its program headers and segments are mapped).
unsafe fn object_of(info: &libc::dl_phdr_info) -> Option<Object> {
    if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
        return None;
    }
    // SAFETY: dl_iterate_phdr hands a pointer to the object's `dlpi_phnum` program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
    let bias = info.dlpi_addr;
    let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let code = loads().filter(|p| p.p_flags & libc::PF_X != 0).try_fold(
        None::<Range<u64>>,
        |acc, p| {
            let r = p.p_vaddr..p.p_vaddr.checked_add(p.p_memsz)?;
            Some(Some(match acc {
                None => r,
                Some(a) => a.start.min(r.start)..a.end.max(r.end),
            }))
        },
    )??;
    let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME)?;
    // The file-backed end of the loaded segment holding `vaddr`: bytes up to it are mapped.
    let mapped_end = |vaddr: u64| {
        loads()
            .find(|p| p.p_vaddr <= vaddr && vaddr < p.p_vaddr.saturating_add(p.p_filesz))
            .map(|p| p.p_vaddr + p.p_filesz)
    };
    // Bytes from `vaddr` to the end of its segment's file-backed part, in the live image.
    let live = |vaddr: u64| -> Option<Bytes> {
        let len = usize::try_from(mapped_end(vaddr)? - vaddr).ok()?;
        let ptr = bias.wrapping_add(vaddr) as *const u8;
        // SAFETY: `vaddr..vaddr + len` lies in a PT_LOAD segment's file-backed part of an
        // object loaded now (the caller's contract), so the bytes are mapped and, after
        // relocation, read-only. They stay mapped while the object is loaded, which is
        // whenever a snapshot reads them (see `Snapshot`).
        Some(EndianSlice::new(
            unsafe { std::slice::from_raw_parts(ptr, len) },
            LittleEndian,
        ))
    };
    let hdr_avma = bias.wrapping_add(hdr.p_vaddr);
    let hdr_bytes = live(hdr.p_vaddr)?;
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(hdr_avma)
        .set_text(bias.wrapping_add(code.start));
    let parsed = EhFrameHdr::new(hdr_bytes.slice(), LittleEndian)
        .parse(&bases, 8)
        .ok()?;
    parsed.table()?;
    // The header points at .eh_frame (an absolute address once its encoding is applied).
    let eh_frame_avma = match parsed.eh_frame_ptr() {
        gimli::Pointer::Direct(a) => a,
        gimli::Pointer::Indirect(_) => return None,
    };
    let eh_frame_bytes = live(eh_frame_avma.checked_sub(bias)?)?;
    let mut eh_frame = EhFrame::new(eh_frame_bytes.slice(), LittleEndian);
    eh_frame.set_address_size(8);
    eh_frame.set_vendor(arch::VENDOR);
    let bases = bases.set_eh_frame(eh_frame_avma);
    // Parsed again with the complete bases (the table's entries are relative to the header).
    let hdr = EhFrameHdr::new(hdr_bytes.slice(), LittleEndian)
        .parse(&bases, 8)
        .ok()?;
    Some(Object {
        code: bias.checked_add(code.start)?..bias.checked_add(code.end)?,
        bases,
        eh_frame,
        eh_frame_avma,
        table: SearchTable::of(hdr_bytes.slice(), hdr_avma),
        hdr,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Addresses spread over the code of every loaded object that has a search table in
    /// the usual encoding, with the snapshot they were found through.
    pub(in super::super) fn sampled_addresses() -> (&'static Snapshot, Vec<u64>) {
        let snapshot = current_snapshot().expect("dl_iterate_phdr gives the loader counters");
        let mut addresses = Vec::new();
        for object in snapshot.objects.iter().filter(|o| o.table.is_some()) {
            let step = ((object.code.end - object.code.start) / 3_000).max(1);
            addresses.extend((object.code.start..object.code.end).step_by(step as usize));
        }
        (snapshot, addresses)
    }

    #[test]
    fn the_direct_table_search_finds_the_fde_gimlis_search_finds() {
        let (snapshot, addresses) = sampled_addresses();
        assert!(addresses.len() > 3_000, "{} addresses", addresses.len());
        let (mut found, mut hint) = (0, 0);
        for address in addresses {
            let object = snapshot.find(address, &mut hint).expect("inside an object");
            let direct = object.fde_for(address).map(|f| f.offset());
            let gimli = object
                .hdr
                .table()
                .and_then(|t| {
                    t.fde_for_address(
                        &object.eh_frame,
                        &object.bases,
                        address,
                        EhFrame::cie_from_offset,
                    )
                    .ok()
                })
                .map(|f| f.offset());
            assert_eq!(direct, gimli, "{address:#x}");
            found += usize::from(direct.is_some());
        }
        assert!(found > 1_000, "only {found} addresses had an FDE");
    }
}
