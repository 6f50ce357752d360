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
//! trampoline `__restore_rt`; a register saved in another register; a CFA offset that is not a
//! positive multiple of 8; a caller's `rbp` saved at or above the return address) ends the walk
//! there, so a stack captured inside a signal handler stops at the signal frame (allocating in a
//! signal handler is undefined anyway). After a library is unloaded and another loaded at the same
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
    /// frame address (CFA) is `rsp` (or `rbp`, when `from_bp`) plus `cfa_offset`; the return
    /// address is stored at `CFA − 8` (where `call` pushed it: x86_64 CFI always says so, and a row
    /// that says otherwise ends the walk), the caller's `rbp` at `CFA + bp_at` (or kept, when
    /// `bp_at` is `KEPT`); the caller's `rsp` is the CFA.
    ///
    /// Eight bytes, so it travels in one register; and no separate "kind": a row the walk cannot
    /// follow (or the end of the stack) is [`Rule::STOP`], whose CFA equals `rsp`, which the walk's
    /// one bounds check (the CFA must lie above `rsp`) refuses. So a cached frame costs no branch
    /// on the kind of rule, only the `rsp`/`rbp` select.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    #[repr(C)]
    struct Rule {
        /// A positive multiple of 8 (0 only in `Rule::STOP`).
        cfa_offset: i32,
        /// A multiple of 8 and at most −8 (or `KEPT`): an aligned word below the return address.
        bp_at: i16,
        from_bp: bool,
    }

    const KEPT: i16 = i16::MIN;

    impl Rule {
        /// Ends the walk: CFA = `rsp` + 0, never above `rsp`. Used where the return address is
        /// undefined (`_start`, thread start), where there is no CFI, and for CFI this walker does
        /// not follow (an expression, a register rule): libgcc stops at the first two as well.
        const STOP: Rule = Rule {
            cfa_offset: 0,
            bp_at: KEPT,
            from_bp: false,
        };

        /// The rule a CFI row gives, for the three registers that matter here.
        fn from_row<S: UnwindContextStorage<usize>>(row: &UnwindTableRow<usize, S>) -> Rule {
            let (from_bp, cfa_offset) = match *row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => {
                    // A CFA at or below the register it is computed from is never a caller's
                    // frame (and would read as `STOP` anyway).
                    // A multiple of 8, so the CFA keeps the word alignment of its base (x86_64
                    // CFI never says otherwise).
                    let Ok(offset @ 1..) = i32::try_from(offset) else {
                        return Rule::STOP;
                    };
                    if offset % 8 != 0 {
                        return Rule::STOP;
                    }
                    match register {
                        X86_64::RSP => (false, offset),
                        X86_64::RBP => (true, offset),
                        _ => return Rule::STOP,
                    }
                }
                CfaRule::Expression(_) => return Rule::STOP,
            };
            match row.register(X86_64::RA) {
                Some(RegisterRule::Offset(-8)) => {}
                // Undefined (the outermost frame) and anything else: the walk ends here.
                _ => return Rule::STOP,
            }
            // The caller's rbp is saved below the return address (pushed after it), which the
            // walk relies on: it reads `CFA + bp_at` after checking only that it is at or above
            // `rsp`. x86_64 CFI never says otherwise; a row that does ends the walk.
            let bp_at = match row.register(X86_64::RBP) {
                None | Some(RegisterRule::SameValue) => KEPT,
                Some(RegisterRule::Offset(o)) if o % 8 == 0 && o <= -8 => match i16::try_from(o) {
                    Ok(o) if o != KEPT => o,
                    _ => return Rule::STOP,
                },
                _ => return Rule::STOP,
            };
            Rule {
                cfa_offset,
                bp_at,
                from_bp,
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
    /// Sixteen bytes, so a slot is found with a shift, and a slot never straddles cache lines.
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    struct Entry {
        address: u64,
        rule: Rule,
    }

    /// Rules by return address, and what computing a missing one needs.
    ///
    /// Two parts, so that the walk can hold the slots (their address stays in a register across
    /// the cold miss call) and the miss path the rest, each borrowed on its own.
    struct RuleCache {
        entries: Box<[Entry; RULE_SLOTS]>,
        state: MissState,
    }

    /// What a miss needs besides the slots.
    struct MissState {
        /// The snapshot (`changes`) the rules were computed under; the slots are cleared when it
        /// differs, since an address may then belong to another object.
        generation: u64,
        /// Captures since this cache last compared its generation with the loader's counters.
        uses: u32,
        /// The index of the object that held the last missed address (neighbouring frames
        /// mostly share an object).
        hint: usize,
        context: Box<UnwindContext<usize, FixedStorage>>,
    }

    const NO_ENTRY: Entry = Entry {
        address: 0,
        rule: Rule::STOP,
    };

    impl RuleCache {
        fn new() -> RuleCache {
            // Built on the heap (a 16 KiB array is too much for a small thread's stack).
            let entries: Box<[Entry]> = vec![NO_ENTRY; RULE_SLOTS].into_boxed_slice();
            RuleCache {
                entries: entries.try_into().unwrap_or_else(|_| unreachable!()),
                state: MissState {
                    generation: u64::MAX,
                    uses: 0,
                    hint: 0,
                    context: Box::new(UnwindContext::new_in()),
                },
            }
        }
    }

    /// The rule for `address` (a return address minus one, or the first frame's pc).
    #[inline(always)]
    fn rule<'e>(
        entries: &'e mut [Entry; RULE_SLOTS],
        state: &mut MissState,
        address: u64,
    ) -> &'e Rule {
        // Fibonacci hashing on the low 32 bits (one multiply by an immediate; the slots only
        // need neighbouring addresses spread): the top 10 bits of the product index the 2^10
        // slots, so no bounds check is needed.
        let slot = ((address as u32).wrapping_mul(0x9e37_79b1) >> 22) as usize;
        // An empty slot's address is 0, which is never looked up (`walk` stops below 4096).
        if entries[slot].address != address {
            state.miss(entries, address, slot);
        }
        // Read from the slot on both paths, so a hit loads each field straight from it.
        &entries[slot].rule
    }

    impl MissState {
        /// Brings the snapshot up to date with the loader and empties the slots if it changed.
        /// `None` if there is no snapshot (the loader gave no counters).
        fn sync(&mut self, entries: &mut [Entry; RULE_SLOTS]) -> Option<&'static Snapshot> {
            self.uses = 0;
            let snapshot = current_snapshot()?;
            if self.generation != snapshot.changes {
                entries.fill(NO_ENTRY);
                self.generation = snapshot.changes;
            }
            Some(snapshot)
        }

        /// Computes and stores the rule for `address` in `slot`: the cold path.
        #[cold]
        #[inline(never)]
        fn miss(&mut self, entries: &mut [Entry; RULE_SLOTS], address: u64, slot: usize) {
            // The unwind tables are read only here, and only through a snapshot checked against
            // the loader just now: every object it names is loaded (see `Snapshot`).
            let Some(snapshot) = self.sync(entries) else {
                entries[slot % RULE_SLOTS] = Entry {
                    address,
                    rule: Rule::STOP,
                };
                return;
            };
            let rule = match snapshot.find(address, &mut self.hint) {
                None => Rule::STOP,
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
                    .map_or(Rule::STOP, Rule::from_row),
            };
            entries[slot % RULE_SLOTS] = Entry { address, rule };
        }
    }

    /// The current snapshot; null until the first capture. Replaced ones are leaked (module docs).
    static SNAPSHOT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

    /// Rule caches, taken by a capture with one swap and put back after it. A thread starts at
    /// the slot of its uid, so threads rarely meet in one.
    const CACHE_SLOTS: usize = 16;
    static CACHES: [AtomicPtr<RuleCache>; CACHE_SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; CACHE_SLOTS];

    /// What a capture needs to know about its thread, kept in one thread-local so that a capture
    /// makes one thread-local access: the stack's bounds and where in the cache pool to start.
    #[derive(Clone, Copy)]
    struct ThisThread {
        /// The stack as `[bottom, top)`; `top` ≤ 1 when unknown (0: not asked yet).
        bottom: usize,
        top: usize,
        /// The pool slot this thread tries first (its uid modulo the pool's size), so threads
        /// rarely meet in one.
        slot: usize,
    }

    thread_local! {
        static THIS_THREAD: Cell<ThisThread> =
            const { Cell::new(ThisThread { bottom: 0, top: 0, slot: 0 }) };
    }

    /// This thread's [`ThisThread`], asked for on its first capture.
    #[inline(always)]
    fn this_thread() -> ThisThread {
        let unknown = ThisThread {
            bottom: 1,
            top: 1,
            slot: 0,
        };
        THIS_THREAD
            .try_with(|t| {
                if t.get().top == 0 {
                    t.set(ask_this_thread());
                }
                t.get()
            })
            .unwrap_or(unknown)
    }

    #[cold]
    #[inline(never)]
    fn ask_this_thread() -> ThisThread {
        let (bottom, top) = super::super::ask_stack_bounds().unwrap_or((1, 1));
        ThisThread {
            bottom,
            top,
            slot: thread::uid() as usize % CACHE_SLOTS,
        }
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
        let this = this_thread();
        let top = this.top as u64;
        // `sp` is in this function's frame: everything from it to the top of the thread's stack
        // is live stack. Outside that stack (an alternate signal stack) we do not know the bounds.
        // `sp` is 16-aligned here (the ABI's alignment at a call, kept by the prologue), which
        // `Walk::step` relies on.
        if top <= 1 || !(this.bottom as u64..top).contains(&sp) || top - sp < 16 || sp % 8 != 0 {
            return 0;
        }
        let Some(mut cache) = take_cache(this.slot) else {
            return 0;
        };
        // Cached rules are reused without asking the loader (a miss always asks first), but not
        // for long: every 64th capture on a cache compares it with the loader's counters, so a
        // rule of an unloaded object does not outlive it by much (it could only give a wrong
        // frame, never a bad read: rules only read the stack, through `Walk::step`).
        let RuleCache { entries, state } = &mut *cache;
        let entries: &mut [Entry; RULE_SLOTS] = entries;
        state.uses += 1;
        if state.uses >= 64 && state.sync(entries).is_none() {
            put_cache(cache, this.slot);
            return 0;
        }
        let mut walk = Walk { top, sp, bp };
        // The first frame is this function's at `ip`; callers' are looked up at their return
        // address minus one, inside the call instruction (a call may be a function's last).
        // Frames up to the marker's are the profiler's own: stepped over, not recorded. The
        // caller's stack pointer is the callee's CFA, which is what libgcc's `_Unwind_GetCFA`
        // compares with the marker.
        let mut address = ip;
        let first = loop {
            let Some(ret) = walk.step(entries, state, address) else {
                break None;
            };
            if walk.sp as usize > marker {
                break Some(ret);
            }
            address = ret - 1;
        };
        // Two loops rather than a marker test per frame. The slots after the first are walked
        // as an iterator (a pointer compared with the end), so writing one needs no bounds check.
        let mut n = 0;
        if let (Some(mut ret), Some((head, tail))) = (first, buf.split_first_mut()) {
            head.write(ret);
            n = 1;
            for slot in tail {
                match walk.step(entries, state, ret - 1) {
                    Some(next) => ret = next,
                    None => break,
                }
                slot.write(ret);
                n += 1;
            }
        }
        put_cache(cache, this.slot);
        n
    }

    /// The registers of the frame being unwound, and the top of the stack.
    ///
    /// Invariant: `[sp, top)` is live stack of this thread (from `walk`'s own frame, or above
    /// it, to the top of the stack mapping), and `sp` is 8-aligned.
    struct Walk {
        top: u64,
        sp: u64,
        bp: u64,
    }

    impl Walk {
        /// Steps from the frame at `address` (its pc, or a return address minus one) to its
        /// caller: updates `sp` and `bp` and returns the caller's return address, or `None` where
        /// the stack ends or cannot be followed.
        #[inline(always)]
        fn step(
            &mut self,
            entries: &mut [Entry; RULE_SLOTS],
            state: &mut MissState,
            address: u64,
        ) -> Option<u64> {
            let rule = rule(entries, state, address);
            // `rbp` rounded down to a word: in a frame that sets it up it is aligned already
            // (copied from the aligned `rsp`); elsewhere it may hold anything, and rounding keeps
            // the CFA aligned without a check per frame, as `cfa_offset` is a multiple of 8.
            let base = if rule.from_bp { self.bp & !7 } else { self.sp };
            // Wrapping arithmetic: a CFA that wraps fails the bounds check below.
            let cfa = base.wrapping_add_signed(rule.cfa_offset.into());
            // The stack only grows towards the top: this bounds the walk, and refuses
            // `Rule::STOP`, whose CFA is `sp`.
            if cfa <= self.sp || cfa > self.top {
                return None;
            }
            // SAFETY: sp < cfa ≤ top, both 8-aligned (the invariant; `base` is, and so is
            // `cfa_offset`, see `Rule::from_row`), and the check just above:
            // `cfa − 8` is an aligned word of `[sp, top)`, live stack by the invariant.
            let ret = unsafe { *(cfa.wrapping_sub(8) as *const u64) };
            if rule.bp_at != KEPT {
                // `bp_at` ≤ −8 (`Rule::from_row`), so `at` ≤ cfa − 8: only its lower end needs a
                // check (a wrapped `at` is above `cfa`, which `bp_at` ≤ −8 rules out).
                let at = cfa.wrapping_add_signed(rule.bp_at.into());
                if at < self.sp {
                    return None;
                }
                // SAFETY: sp ≤ at ≤ cfa − 8 < top, 8-aligned (cfa and bp_at are): a word of
                // live stack by the invariant.
                self.bp = unsafe { *(at as *const u64) };
            }
            // Keeps the invariant: sp < cfa ≤ top, cfa 8-aligned.
            self.sp = cfa;
            (ret >= 4096).then_some(ret)
        }
    }

    /// A rule cache from the pool, starting at `slot`, or a new one (allocated under the
    /// re-entrancy guard).
    #[inline(always)]
    fn take_cache(slot: usize) -> Option<CacheBox> {
        // Ordering: Acquire pairs with the Release in `put_cache`, so the cache's contents
        // written by the thread that last used it are visible here.
        let p = CACHES[slot % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
        if !p.is_null() {
            return Some(CacheBox(p));
        }
        take_cache_elsewhere(slot)
    }

    /// [`take_cache`] when this thread's first slot is empty: the other slots, then a new cache.
    #[cold]
    #[inline(never)]
    fn take_cache_elsewhere(slot: usize) -> Option<CacheBox> {
        for i in 1..CACHE_SLOTS {
            // Ordering: as in `take_cache`.
            let p = CACHES[(slot + i) % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                return Some(CacheBox(p));
            }
        }
        let _guard = Guard::enter();
        Some(CacheBox(Box::into_raw(Box::new(RuleCache::new()))))
    }

    /// Puts a cache back into an empty slot, starting at `slot`, or frees it if all are full.
    fn put_cache(cache: CacheBox, slot: usize) {
        let p = cache.0;
        std::mem::forget(cache);
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
