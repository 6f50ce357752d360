//! Which unwinder captures stacks (`parts::capture` on Linux), and the frames limit.

/// Largest `max_frames` accepted: the on-stack capture buffer's size.
pub const MAX_FRAMES_LIMIT: usize = 256;

/// The stack unwinder in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwinder {
    /// Frame-pointer chain walk: no lock, a few loads per frame.
    FramePointer,
    /// `backtrace::trace_unsynchronized` (libgcc's DWARF unwinder).
    Backtrace,
    /// The loaded objects' `.eh_frame` tables read in place (gimli), rules cached per return
    /// address (x86_64 and aarch64 Linux).
    EhFrame,
}
