//! The parts `lib.rs` calls, off Linux: a countdown that never expires and a sampled range that
//! holds no pointer, so [`crate::Profiled`] is its inner allocator; and the public types these
//! modules define on Linux.

pub(crate) mod sampler {
    //! The countdown, never expired: the fast path is one inlined `false`.

    /// Never: nothing is sampled here.
    #[inline(always)]
    pub(crate) fn countdown_expired(_size: usize) -> bool {
        false
    }

    /// Never a period: nothing is sampled here.
    pub(crate) fn on_countdown_expired(_size: usize, _ensure_init: impl FnOnce()) -> Option<u64> {
        None
    }
}

pub(crate) mod sampled_arena {
    //! The sampled range, always empty.

    /// The range `dealloc` compares with: empty, so every block goes back to the inner allocator.
    #[derive(Debug)]
    pub(crate) struct RangeCopy;

    impl RangeCopy {
        pub(crate) const fn new() -> RangeCopy {
            RangeCopy
        }

        /// Nothing to copy: no sampled arena exists.
        pub(crate) fn fill(&self) {}

        /// Never: no block is sampled.
        #[inline(always)]
        pub(crate) fn contains(&self, _ptr: *mut u8) -> bool {
            false
        }
    }
}

pub(crate) mod capture {
    //! The unwinder's public items.

    /// Largest `max_frames` accepted (as on Linux).
    pub const MAX_FRAMES_LIMIT: usize = 256;

    /// The stack unwinder in use (on Linux; [`crate::Stats::unwinder`] reports `FramePointer`
    /// here, where none runs).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Unwinder {
        /// Frame-pointer chain walk.
        FramePointer,
        /// libgcc's DWARF unwinder.
        Backtrace,
        /// The loaded objects' `.eh_frame` tables read in place.
        EhFrame,
    }
}

pub(crate) mod symbolize {
    //! The symbolizer's public figures.

    /// What in-process symbolization cost (on Linux; never here).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct SymbolizerCost {
        /// Addresses resolved.
        pub addresses: usize,
        /// Peak bytes the symbolizer held.
        pub peak_bytes: u64,
        /// Bytes still held after.
        pub retained_bytes: u64,
    }
}

pub(crate) mod scopes {
    //! Scope labels: none is interned here.

    /// Labels refused: none (no label is interned).
    pub(crate) fn dropped() -> u64 {
        0
    }
}
