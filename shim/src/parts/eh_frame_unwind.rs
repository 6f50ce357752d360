//! Stack capture from the program's own `.eh_frame` unwind tables, without libgcc (x86_64 Linux).
//!
//! The DWARF call-frame information (CFI) that libgcc reads is already mapped in memory: every
//! loaded object's `PT_GNU_EH_FRAME` program header points at its `.eh_frame_hdr` (a sorted table
//! of function start → FDE), and that header points at `.eh_frame`. gimli parses those live bytes
//! and evaluates the FDE's CFI program to the row for an address; this module keeps, per return
//! address, only what a return address needs from that row (where the CFA is, relative to `rsp`
//! or `rbp`; where the caller's `rbp` was saved), in a 1,024-slot cache. A frame seen before then
//! costs a hash lookup and one or two bounds-checked stack reads. See `docs/design.md` §8.
//!
//! What makes it fit the sampled path:
//! - **No lock across the walk.** The object list is an immutable snapshot behind an `AtomicPtr`;
//!   the rule caches sit in a pool of 16 slots, taken and put back with one atomic swap each.
//!   glibc's loader-list lock is taken only inside `dl_iterate_phdr`, which reads the
//!   `dlpi_adds`/`dlpi_subs` counters: on a cache miss (before any unwind table is read) and
//!   every 64th capture on a cache, never across the walk; glibc never allocates while holding
//!   it, and it is recursive.
//! - **No allocation in the steady state.** The snapshot is rebuilt only when the loader's
//!   counters moved; a cache is allocated only when no pooled one is free; gimli evaluates CFI
//!   in fixed-size storage. Allocations happen under the caller's re-entrancy guard, so they go
//!   to the inner allocator unsampled.
//! - **No fault.** Stack reads are bounds-checked against `[own stack pointer, top of the
//!   thread's stack)`, which is live, mapped stack; the capture gives up (returns no frame) when
//!   the stack pointer is not inside the thread's stack (a signal handler on an alternate stack).
//!   Unwind tables are read only through a snapshot checked against the loader just before, and
//!   only for return addresses of this thread's own frames: an object cannot be unloaded while a
//!   thread still has frames in it. A cached rule only reads the stack.
//! - **It stops where information ends**, as libgcc does: a return address outside every loaded
//!   object, or without an FDE, is recorded and ends the walk, and so does a frame whose CFI says
//!   the return address is undefined (`_start`, thread start). It never guesses with frame
//!   pointers.
//!
//! Limits: CFI it does not follow (a CFA given as a DWARF expression, as in glibc's signal
//! trampoline `__restore_rt`; a register saved in another register) ends the walk there, so a
//! stack captured inside a signal handler stops at the signal frame (allocating in a signal
//! handler is undefined anyway). After a library is unloaded and another loaded at the same
//! address, up to 63 captures per cache may still use a cached rule of the old one (a wrong
//! frame, never a bad read). Snapshots replaced after a `dlopen`/`dlclose` are kept, not freed,
//! because another thread may still be reading one: about a hundred bytes per object per load or
//! unload event seen.

/// Whether this unwinder exists on this target.
pub(crate) const SUPPORTED: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use imp::walk;

/// Without support the walk returns no frame (callers pick another unwinder: see `SUPPORTED`).
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) fn walk(_marker: usize, _buf: &mut [std::mem::MaybeUninit<u64>]) -> usize {
    0
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use std::cell::Cell;
    use std::mem::MaybeUninit;
    use std::ops::Range;
    use std::sync::atomic::{AtomicPtr, Ordering};

    use gimli::{
        BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, ParsedEhFrameHdr,
        Register, RegisterRule, UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow,
        X86_64,
    };

    use crate::base::thread::{self, Guard};

    type Bytes = EndianSlice<'static, LittleEndian>;

    /// One loaded object's code range and unwind tables.
    ///
    /// Its `'static` slices are a promise kept by [`Snapshot`]'s use, not by the loader: they point
    /// into the object's mapped image, and are read only while the object is loaded.
    struct Object {
        code: Range<u64>,
        bases: BaseAddresses,
        eh_frame: EhFrame<Bytes>,
        hdr: ParsedEhFrameHdr<Bytes>,
    }

    /// The loaded objects as of one pair of loader counters. Immutable once published.
    ///
    /// Why its bytes are mapped whenever they are read: a capture first brings the snapshot up to
    /// date with the loader counters, then reads unwind tables only for return addresses inside
    /// one of its objects' code ranges, reached by following the CFI from the capture's own frame.
    /// Those are frames of this thread, and an object cannot be unloaded while a thread still has
    /// frames in it.
    struct Snapshot {
        /// Sorted by code start, not overlapping.
        objects: Vec<Object>,
        /// `dlpi_adds + dlpi_subs` when built: both only grow, so a larger sum is newer; also the
        /// rule caches' generation.
        changes: u64,
        adds: u64,
        subs: u64,
    }

    impl Snapshot {
        /// The object whose code holds `address`; `hint` is the index of the one that held the
        /// previous address (most neighbouring frames share an object).
        #[inline]
        fn find(&self, address: u64, hint: &mut usize) -> Option<&Object> {
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

    /// How to step from a frame to its caller, from the CFI row at its address: the canonical
    /// frame address (CFA) is `rsp` or `rbp` plus `cfa_offset`; the return address is stored at
    /// `CFA − 8` (where `call` pushed it: x86_64 CFI always says so, and a row that says otherwise
    /// is a `STOP`), the caller's `rbp` at `CFA + bp_at` (or kept, when `bp_at` is `KEPT`); the
    /// caller's `rsp` is the CFA. Whole words, so reading one takes no shifts or masks.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    struct Rule {
        cfa_offset: i32,
        /// A multiple of 8 (or `KEPT`), so it keeps the CFA's alignment.
        bp_at: i32,
        kind: u32,
    }

    const KEPT: i32 = i32::MIN;
    /// `kind`s: none (an empty slot's); CFA from rsp; from rbp; the stack ends here (the return
    /// address is undefined); the CFI is one this walker does not follow (an expression, a
    /// register rule): the walk stops, as it does where there is no CFI.
    const EMPTY: u32 = 0;
    const FROM_SP: u32 = 1;
    const FROM_BP: u32 = 2;
    const END: u32 = 3;
    const STOP: u32 = 4;

    impl Rule {
        const fn of(kind: u32) -> Rule {
            Rule {
                kind,
                cfa_offset: 0,
                bp_at: KEPT,
            }
        }

        /// The rule a CFI row gives, for the three registers that matter here.
        fn from_row<S: UnwindContextStorage<usize>>(row: &UnwindTableRow<usize, S>) -> Rule {
            let (kind, cfa_offset) = match *row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => {
                    let Ok(offset) = i32::try_from(offset) else {
                        return Rule::of(STOP);
                    };
                    match register {
                        X86_64::RSP => (FROM_SP, offset),
                        X86_64::RBP => (FROM_BP, offset),
                        _ => return Rule::of(STOP),
                    }
                }
                CfaRule::Expression(_) => return Rule::of(STOP),
            };
            match row.register(X86_64::RA) {
                Some(RegisterRule::Undefined) => return Rule::of(END),
                Some(RegisterRule::Offset(-8)) => {}
                _ => return Rule::of(STOP),
            }
            let bp_at = match row.register(X86_64::RBP) {
                None | Some(RegisterRule::SameValue) => KEPT,
                Some(RegisterRule::Offset(o)) if o % 8 == 0 => match i32::try_from(o) {
                    Ok(o) if o != KEPT => o,
                    _ => return Rule::of(STOP),
                },
                _ => return Rule::of(STOP),
            };
            Rule {
                kind,
                cfa_offset,
                bp_at,
            }
        }
    }

    /// gimli's working storage for evaluating one FDE's CFI program, fixed-size so that a cache
    /// miss never allocates: 32 register rules (x86_64 CFI names at most 17 registers) and 4
    /// remembered states (`DW_CFA_remember_state` nesting). A program that needs more is an error,
    /// and the walk stops there.
    struct FixedStorage;

    impl UnwindContextStorage<usize> for FixedStorage {
        type Rules = [(Register, RegisterRule<usize>); 32];
        type Stack = [UnwindTableRow<usize, Self>; 4];
    }

    /// Slots of a rule cache: a power of two, indexed by a hash of the return address.
    const RULE_SLOTS: usize = 1024;

    /// One slot: an address and its rule; address 0 (never looked up) marks an empty slot.
    #[derive(Clone, Copy)]
    struct Entry {
        address: u64,
        rule: Rule,
    }

    /// Rules by return address, and gimli's context for computing a missing one.
    struct RuleCache {
        /// The snapshot (`changes`) the rules were computed under; the slots are cleared when it
        /// differs, since an address may then belong to another object.
        generation: u64,
        /// Captures since this cache last compared its generation with the loader's counters.
        uses: u32,
        entries: Box<[Entry; RULE_SLOTS]>,
        context: Box<UnwindContext<usize, FixedStorage>>,
    }

    const NO_ENTRY: Entry = Entry {
        address: 0,
        rule: Rule::of(EMPTY),
    };

    impl RuleCache {
        fn new() -> RuleCache {
            // Built on the heap (a 24 KiB array is too much for a small thread's stack).
            let entries: Box<[Entry]> = vec![NO_ENTRY; RULE_SLOTS].into_boxed_slice();
            RuleCache {
                generation: u64::MAX,
                uses: 0,
                entries: entries.try_into().unwrap_or_else(|_| unreachable!()),
                context: Box::new(UnwindContext::new_in()),
            }
        }

        /// Brings the snapshot up to date with the loader and empties the slots if it changed.
        /// `None` if there is no snapshot (the loader gave no counters).
        fn sync(&mut self) -> Option<&'static Snapshot> {
            self.uses = 0;
            let snapshot = current_snapshot()?;
            if self.generation != snapshot.changes {
                self.entries.fill(NO_ENTRY);
                self.generation = snapshot.changes;
            }
            Some(snapshot)
        }

        /// The rule for `address` (a return address minus one, or the first frame's pc).
        #[inline(always)]
        fn rule(&mut self, address: u64, hint: &mut usize) -> Rule {
            // Fibonacci hashing: neighbouring addresses spread over the slots; the top 10 bits
            // index the 2^10 slots, so no bounds check is needed.
            let slot = (address.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize;
            let entry = &self.entries[slot];
            // An empty slot's address is 0, which is never looked up (`walk` stops below 4096).
            if entry.address == address {
                return entry.rule;
            }
            self.miss(address, hint, slot)
        }

        /// Computes and stores the rule for `address` in `slot`: the cold path.
        #[cold]
        #[inline(never)]
        fn miss(&mut self, address: u64, hint: &mut usize, slot: usize) -> Rule {
            // The unwind tables are read only here, and only through a snapshot checked against
            // the loader just now: every object it names is loaded (see `Snapshot`).
            let Some(snapshot) = self.sync() else {
                return Rule::of(STOP);
            };
            let rule = match snapshot.find(address, hint) {
                None => Rule::of(STOP),
                Some(object) => object
                    .hdr
                    .table()
                    .and_then(|table| {
                        table
                            .unwind_info_for_address(
                                &object.eh_frame,
                                &object.bases,
                                &mut self.context,
                                address,
                                EhFrame::cie_from_offset,
                            )
                            .ok()
                    })
                    .map_or(Rule::of(STOP), Rule::from_row),
            };
            self.entries[slot % RULE_SLOTS] = Entry { address, rule };
            rule
        }
    }

    /// The current snapshot; null until the first capture. Replaced ones are leaked (module docs).
    static SNAPSHOT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

    /// Rule caches, taken by a capture with one swap and put back after it. A thread starts at
    /// the slot of its uid, so threads rarely meet in one.
    const CACHE_SLOTS: usize = 16;
    static CACHES: [AtomicPtr<RuleCache>; CACHE_SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; CACHE_SLOTS];

    thread_local! {
        /// This thread's stack as `(bottom, top)`; (0, 0) until asked, (1, 1) if unknown.
        static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    fn stack_bounds() -> (usize, usize) {
        STACK
            .try_with(|s| {
                if s.get().0 == 0 {
                    s.set(super::super::ask_stack_bounds().unwrap_or((1, 1)));
                }
                s.get()
            })
            .unwrap_or((1, 1))
    }

    /// Unwinds the calling thread with the `.eh_frame` tables, writing return addresses whose
    /// caller's stack pointer lies above `marker` (frames up to and including the one holding
    /// `marker` are the profiler's). Returns the number written into `buf`.
    #[inline(never)]
    pub(crate) fn walk(marker: usize, buf: &mut [MaybeUninit<u64>]) -> usize {
        if buf.is_empty() {
            return 0;
        }
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads rip (via a rip-relative lea), rsp and rbp into variables; no memory
        // access, no side effect.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags)
            )
        };
        let (bottom, top) = stack_bounds();
        // `sp` is in this function's frame: everything from it to the top of the thread's stack
        // is live stack. Outside that stack (an alternate signal stack) we do not know the bounds.
        if top <= 1 || !(bottom..top).contains(&(sp as usize)) || top - (sp as usize) < 16 {
            return 0;
        }
        let Some(mut cache) = take_cache() else {
            return 0;
        };
        // Cached rules are reused without asking the loader (a miss always asks first), but not
        // for long: every 64th capture on a cache compares it with the loader's counters, so a
        // rule of an unloaded object does not outlive it by much (it could only give a wrong
        // frame, never a bad read: rules only read the stack, through `read`).
        cache.uses += 1;
        if cache.uses >= 64 && cache.sync().is_none() {
            put_cache(cache);
            return 0;
        }
        let (low, span) = (sp, top as u64 - 8 - sp);
        // Reads the stack word at `addr` if low ≤ addr ≤ top − 8 (one compare: an address below
        // `low` wraps to above `span`). The callers only pass 8-aligned addresses (the CFA is
        // checked for alignment, and every offset from it is a multiple of 8).
        let read = |addr: u64| -> Option<u64> {
            if addr.wrapping_sub(low) > span {
                return None;
            }
            // SAFETY: low ≤ addr ≤ low + span = top − 8 and 8-aligned (above): a word of this
            // thread's live stack, which lies between this function's own frame and the top of
            // the stack mapping.
            Some(unsafe { *(addr as *const u64) })
        };
        let (mut sp, mut bp) = (sp, bp);
        // The first frame is this function's at `ip`; callers' are looked up at their return
        // address minus one, inside the call instruction (a call may be a function's last).
        let mut address = ip;
        let mut hint = 0usize;
        let mut n = 0;
        loop {
            let rule = cache.rule(address, &mut hint);
            let base = match rule.kind {
                FROM_SP => sp,
                FROM_BP => bp,
                _ => break,
            };
            // Wrapping arithmetic: an address that wraps lands outside the stack, which `read`
            // refuses, or at or below `sp`, which the next check refuses.
            let cfa = base.wrapping_add_signed(rule.cfa_offset.into());
            // The stack only grows towards the top: this also bounds the walk.
            if cfa <= sp || cfa % 8 != 0 {
                break;
            }
            let Some(ret) = read(cfa.wrapping_sub(8)) else {
                break;
            };
            if rule.bp_at != KEPT {
                match read(cfa.wrapping_add_signed(rule.bp_at.into())) {
                    Some(v) => bp = v,
                    None => break,
                }
            }
            sp = cfa;
            if ret < 4096 {
                break;
            }
            // The caller's stack pointer is the callee's CFA, which is what libgcc's
            // `_Unwind_GetCFA` compares with the marker.
            if cfa as usize > marker {
                buf[n].write(ret);
                n += 1;
                if n == buf.len() {
                    break;
                }
            }
            address = ret - 1;
        }
        put_cache(cache);
        n
    }

    /// A rule cache from the pool, or a new one (allocated under the re-entrancy guard).
    fn take_cache() -> Option<CacheBox> {
        let slot = thread::uid() as usize % CACHE_SLOTS;
        for i in 0..CACHE_SLOTS {
            // Ordering: Acquire pairs with the Release in `put_cache`, so the cache's contents
            // written by the thread that last used it are visible here.
            let p = CACHES[(slot + i) % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                return Some(CacheBox(p));
            }
        }
        let _guard = Guard::enter();
        Some(CacheBox(Box::into_raw(Box::new(RuleCache::new()))))
    }

    /// Puts a cache back into an empty slot, or frees it if all are full.
    fn put_cache(cache: CacheBox) {
        let p = cache.0;
        std::mem::forget(cache);
        let slot = thread::uid() as usize % CACHE_SLOTS;
        for i in 0..CACHE_SLOTS {
            // Ordering: Release pairs with the Acquire swap in `take_cache`.
            if CACHES[(slot + i) % CACHE_SLOTS]
                .compare_exchange(
                    std::ptr::null_mut(),
                    p,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
        drop(CacheBox(p));
    }

    /// An owned rule cache taken out of the pool.
    ///
    /// Invariant: `.0` came from `Box::into_raw` and nothing else owns it.
    struct CacheBox(*mut RuleCache);

    impl std::ops::Deref for CacheBox {
        type Target = RuleCache;
        fn deref(&self) -> &RuleCache {
            // SAFETY: the type's invariant: a live box owned by this value alone.
            unsafe { &*self.0 }
        }
    }

    impl std::ops::DerefMut for CacheBox {
        fn deref_mut(&mut self) -> &mut RuleCache {
            // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
            unsafe { &mut *self.0 }
        }
    }

    impl Drop for CacheBox {
        fn drop(&mut self) {
            let _guard = Guard::enter();
            // SAFETY: the type's invariant: we own the box.
            drop(unsafe { Box::from_raw(self.0) });
        }
    }

    /// The snapshot, rebuilt first if objects were loaded or unloaded since it was made.
    fn current_snapshot() -> Option<&'static Snapshot> {
        let mut check = Check {
            // Ordering: Acquire pairs with the Release publication in `publish`, so the
            // snapshot's contents are visible.
            current: SNAPSHOT.load(Ordering::Acquire),
            building: None,
        };
        // SAFETY: the callback matches dl_iterate_phdr's contract and only reads the info it is
        // handed; `check` outlives the call.
        unsafe {
            libc::dl_iterate_phdr(Some(on_object), (&mut check as *mut Check).cast());
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
        let bases = bases.set_eh_frame(eh_frame_avma);
        // Parsed again with the complete bases (the table's entries are relative to the header).
        let hdr = EhFrameHdr::new(hdr_bytes.slice(), LittleEndian)
            .parse(&bases, 8)
            .ok()?;
        Some(Object {
            code: bias.checked_add(code.start)?..bias.checked_add(code.end)?,
            bases,
            eh_frame,
            hdr,
        })
    }
}
