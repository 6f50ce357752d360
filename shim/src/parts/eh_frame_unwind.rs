//! Stack capture from the program's own `.eh_frame` unwind tables, without libgcc (x86_64).
//!
//! The DWARF call-frame information that libgcc reads is already mapped in memory: every loaded
//! object's `PT_GNU_EH_FRAME` program header points at its `.eh_frame_hdr` (a sorted table of
//! function start → FDE), and that header points at `.eh_frame`. This module hands slices of
//! those live images to `framehop` (the unwinder of the samply profiler), which evaluates the CFI
//! for the three registers a return address needs (rip, rsp, rbp) and caches the resulting rule
//! per return address, so a stack seen before costs a hash lookup and two stack reads per frame.
//! See `docs/design.md` §8.
//!
//! What makes it fit the sampled path:
//! - **No process-wide lock across the unwind.** The module list is an immutable snapshot behind
//!   an `AtomicPtr`; the rule caches sit in a small pool of slots, taken and put back with one
//!   atomic swap each. The only lock touched is glibc's loader-list lock, inside the one
//!   `dl_iterate_phdr` call per capture that reads the load/unload counters (a few dozen
//!   instructions; glibc never allocates while holding it, and it is recursive).
//! - **No allocation in the steady state.** The snapshot is rebuilt only when the loader's
//!   `dlpi_adds`/`dlpi_subs` counters moved; a cache is allocated only when its slot is empty.
//!   Both happen under the caller's re-entrancy guard, so they go to the inner allocator unsampled.
//!   framehop runs with `MustNotAllocateDuringUnwind`.
//! - **No fault.** Stack reads are bounds-checked against `[own stack pointer, top of the
//!   thread's stack)`, which is live, mapped stack; the capture gives up (returns no frame) when
//!   the stack pointer is not inside the thread's stack (a signal handler on an alternate stack).
//!   The unwind tables are read only for addresses inside an object that was loaded when the
//!   capture began; an object cannot be unloaded while this thread still has frames in it.
//! - **It stops where information ends**, as libgcc does: a return address outside every loaded
//!   object is recorded and ends the walk (framehop would otherwise guess with frame pointers),
//!   and so does a frame whose CFI says the return address is undefined (`_start`, thread start).
//!
//! Limits: CFA rules given as DWARF expressions (glibc's signal trampoline `__restore_rt`) are
//! not evaluated, so a stack captured inside a signal handler ends (or, with frame pointers,
//! continues by guess) at the signal frame; allocating in a signal handler is undefined anyway.
//! Snapshots replaced after a `dlopen`/`dlclose` are kept, not freed, because another thread may
//! still be reading one: a few hundred bytes per object per load or unload event seen.

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
    use std::ops::{Deref, Range};
    use std::sync::atomic::{AtomicPtr, Ordering};

    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    use framehop::{
        ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder,
    };

    use crate::base::thread::{self, Guard};

    /// Bytes of a loaded object's image, read in place.
    ///
    /// Invariant: `ptr..ptr + len` lies inside one `PT_LOAD` segment of an object that was loaded
    /// when the snapshot holding this was built (see [`Snapshot`] for why it is still mapped
    /// whenever it is read).
    #[derive(Clone, Copy)]
    pub(crate) struct LiveBytes {
        ptr: *const u8,
        len: usize,
    }

    impl Default for LiveBytes {
        /// No bytes (framehop's section info defaults absent sections to this).
        fn default() -> LiveBytes {
            LiveBytes {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            }
        }
    }

    impl Deref for LiveBytes {
        type Target = [u8];
        fn deref(&self) -> &[u8] {
            // SAFETY: the type's invariant: the bytes are mapped (a file-backed part of a loaded
            // object's segment, read-only after relocation, so nothing writes them meanwhile), or
            // `len` is 0 and `ptr` is non-null and aligned (the default).
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
    }

    type Unwinder64 = UnwinderX86_64<LiveBytes, MustNotAllocateDuringUnwind>;
    type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

    /// The loaded objects as of one pair of loader counters. Immutable once published.
    ///
    /// Why its bytes are mapped whenever they are read: a capture first brings the snapshot up to
    /// date with the loader counters, then reads unwind tables only for return addresses inside
    /// one of its objects' code ranges, reached by following the CFI from the capture's own frame.
    /// Those are frames of this thread, and an object cannot be unloaded while a thread still has
    /// frames in it.
    struct Snapshot {
        unwinder: Unwinder64,
        /// Executable ranges of the objects, sorted by start, not overlapping.
        code: Vec<Range<u64>>,
        /// `dlpi_adds + dlpi_subs` when built: both only grow, so a larger sum is newer.
        changes: u64,
        adds: u64,
        subs: u64,
    }

    impl Snapshot {
        /// Whether `address` lies in the code of a known object; `hint` is the index of the range
        /// that held the previous address (most neighbouring frames share an object).
        #[inline]
        fn find(&self, address: u64, hint: &mut usize) -> bool {
            if let Some(r) = self.code.get(*hint) {
                if r.contains(&address) {
                    return true;
                }
            }
            match self.code.binary_search_by(|r| {
                if r.end <= address {
                    std::cmp::Ordering::Less
                } else if r.start > address {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            }) {
                Ok(i) => {
                    *hint = i;
                    true
                }
                Err(_) => false,
            }
        }
    }

    /// The current snapshot; null until the first capture. Replaced ones are leaked (module docs).
    static SNAPSHOT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

    /// Rule caches, taken by a capture with one swap and put back after it. A thread starts at
    /// the slot of its uid, so threads rarely meet in one.
    const CACHE_SLOTS: usize = 16;
    static CACHES: [AtomicPtr<Cache>; CACHE_SLOTS] =
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
        let Some(snapshot) = current_snapshot() else {
            return 0;
        };
        let Some(mut cache) = take_cache() else {
            return 0;
        };
        let (low, last) = (sp, top as u64 - 8);
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            if addr < low || addr > last || addr % 8 != 0 {
                return Err(());
            }
            // SAFETY: low ≤ addr ≤ top − 8 and 8-aligned: a word of this thread's live stack,
            // which lies between this function's own frame and the top of the stack mapping.
            Ok(unsafe { *(addr as *const u64) })
        };
        let mut regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut address = FrameAddress::from_instruction_pointer(ip);
        let mut hint = 0usize;
        let mut n = 0;
        loop {
            let ret = match snapshot.unwinder.unwind_frame(
                address,
                &mut regs,
                &mut *cache,
                &mut read_stack,
            ) {
                Ok(Some(ret)) if ret >= 4096 => ret,
                // Ok(None): the CFI says the stack ends here; Err: it could not be followed.
                _ => break,
            };
            // `regs.sp()` is now the caller's stack pointer, i.e. the callee's CFA, which is what
            // libgcc's `_Unwind_GetCFA` compares with the marker.
            if regs.sp() as usize > marker {
                buf[n].write(ret);
                n += 1;
                if n == buf.len() {
                    break;
                }
            }
            // Outside every known object there is no unwind information: libgcc records such
            // an address and stops; framehop would go on guessing with frame pointers.
            if !snapshot.find(ret - 1, &mut hint) {
                break;
            }
            match FrameAddress::from_return_address(ret) {
                Some(a) => address = a,
                None => break,
            }
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
        Some(CacheBox(Box::into_raw(Box::new(Cache::new_in()))))
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
    struct CacheBox(*mut Cache);

    impl std::ops::Deref for CacheBox {
        type Target = Cache;
        fn deref(&self) -> &Cache {
            // SAFETY: the type's invariant: a live box owned by this value alone.
            unsafe { &*self.0 }
        }
    }

    impl std::ops::DerefMut for CacheBox {
        fn deref_mut(&mut self) -> &mut Cache {
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
                unwinder: Unwinder64::new(),
                code: Vec::new(),
                changes: adds.wrapping_add(subs),
                adds,
                subs,
            }));
        }
        let _guard = Guard::enter();
        if let Some(snapshot) = check.building.as_mut() {
            // SAFETY: `info` describes a loaded object (dl_iterate_phdr's contract).
            if let Some((module, code)) = unsafe { module_of(info) } {
                snapshot.unwinder.add_module(module);
                let at = snapshot.code.partition_point(|r| r.start < code.start);
                snapshot.code.insert(at, code);
            }
        }
        0
    }

    /// The framehop module and executable range of one loaded object, if it has an
    /// `.eh_frame_hdr` we can read.
    ///
    /// # Safety
    /// `info` describes an object loaded now (its program headers and segments are mapped).
    unsafe fn module_of(info: &libc::dl_phdr_info) -> Option<(Module<LiveBytes>, Range<u64>)> {
        if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
            return None;
        }
        // SAFETY: dl_iterate_phdr hands a pointer to the object's `dlpi_phnum` program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let bias = info.dlpi_addr;
        let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
        let code = loads().filter(|p| p.p_flags & libc::PF_X != 0).fold(
            None::<Range<u64>>,
            |acc, p| {
                let r = p.p_vaddr..p.p_vaddr.checked_add(p.p_memsz)?;
                Some(match acc {
                    None => r,
                    Some(a) => a.start.min(r.start)..a.end.max(r.end),
                })
            },
        )?;
        let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME)?;
        // The file-backed end of the loaded segment holding `svma`: bytes up to it are mapped.
        let mapped_end = |svma: u64| {
            loads()
                .find(|p| p.p_vaddr <= svma && svma < p.p_vaddr + p.p_filesz)
                .map(|p| p.p_vaddr + p.p_filesz)
        };
        let hdr_end = mapped_end(hdr.p_vaddr)?.min(hdr.p_vaddr + hdr.p_memsz);
        let hdr_bytes = LiveBytes {
            ptr: bias.wrapping_add(hdr.p_vaddr) as *const u8,
            len: usize::try_from(hdr_end - hdr.p_vaddr).ok()?,
        };
        // .eh_frame_hdr: version 1, eh_frame_ptr's encoding, the count's and the table's, then
        // eh_frame_ptr. Linkers write it pc-relative, signed 4 bytes (0x1b); anything else we
        // leave alone rather than guess.
        let h = &*hdr_bytes;
        if h.len() < 8 || h[0] != 1 || h[1] != 0x1b {
            return None;
        }
        let rel = i64::from(i32::from_le_bytes([h[4], h[5], h[6], h[7]]));
        let eh_frame_svma = hdr.p_vaddr.checked_add(4)?.checked_add_signed(rel)?;
        let eh_frame_end = mapped_end(eh_frame_svma)?;
        let eh_frame = LiveBytes {
            ptr: bias.wrapping_add(eh_frame_svma) as *const u8,
            len: usize::try_from(eh_frame_end - eh_frame_svma).ok()?,
        };
        let section_info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(code.clone()),
            eh_frame_svma: Some(eh_frame_svma..eh_frame_end),
            eh_frame: Some(eh_frame),
            eh_frame_hdr_svma: Some(hdr.p_vaddr..hdr_end),
            eh_frame_hdr: Some(hdr_bytes),
            ..Default::default()
        };
        let avma = bias.checked_add(code.start)?..bias.checked_add(code.end)?;
        let module = Module::new(String::new(), avma.clone(), bias, section_info);
        Some((module, avma))
    }
}
