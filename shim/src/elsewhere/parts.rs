//! The parts `lib.rs` calls, off Linux: a countdown that never expires and a sampled range that
//! holds no pointer, so [`crate::Profiled`] is its inner allocator.

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

pub(crate) mod scopes {
    //! Scope labels: none is interned here.

    /// Labels refused: none (no label is interned).
    pub(crate) fn dropped() -> u64 {
        0
    }
}
