//! Interned stacks: every distinct stack the profiler recorded, under an id that dumps and the
//! per-thread tables refer to.
//!
//! The table sits behind a `std::sync::Mutex` (futex-based on Linux: it never allocates). It
//! allocates only while its lock is held *and* the thread is inside the re-entrancy guard, so
//! those allocations go straight to the inner allocator and never come back here.

use std::hash::Hasher;
use std::sync::Mutex;

use crate::base::hash::{Map, WordHasher, MIX};
use crate::base::sync::lock;

/// One distinct stack.
pub(crate) struct StackRecord {
    /// Return addresses, innermost first. Leaked when interned (a stack is never forgotten), so
    /// that threads can keep them in their stack caches (the per-thread tables).
    pub(crate) frames: &'static [u64],
    /// Next record with the same hash (`u32::MAX`: none).
    next_same_hash: u32,
}

/// The hash a stack is interned under: four independent multiply chains over every fourth frame
/// (so the 32 or 128 multiplies of a stack overlap instead of waiting on each other), then folded
/// together with the length.
pub(crate) fn stack_hash(frames: &[u64]) -> u64 {
    let step = |lane: u64, frame: u64| (lane.rotate_left(26) ^ frame).wrapping_mul(MIX);
    let mut lanes = [
        MIX,
        MIX.rotate_left(16),
        MIX.rotate_left(32),
        MIX.rotate_left(48),
    ];
    let mut quads = frames.chunks_exact(4);
    for quad in &mut quads {
        lanes[0] = step(lanes[0], quad[0]);
        lanes[1] = step(lanes[1], quad[1]);
        lanes[2] = step(lanes[2], quad[2]);
        lanes[3] = step(lanes[3], quad[3]);
    }
    for (lane, &frame) in lanes.iter_mut().zip(quads.remainder()) {
        *lane = step(*lane, frame);
    }
    let mut h = WordHasher::with_seed(frames.len() as u64);
    for lane in lanes {
        h.write_u64(lane);
    }
    h.finish()
}

/// Interned stacks. What was allocated from each is charged to the allocating thread's own table
/// (the per-thread tables), not here.
#[derive(Default)]
pub(crate) struct StackTable {
    /// Hash of frames → first record with that hash.
    by_hash: Map<u64, u32>,
    /// Records; an index is a stack id.
    pub(crate) records: Vec<StackRecord>,
}

/// The stack table.
pub(crate) static STACKS: Mutex<Option<StackTable>> = Mutex::new(None);

impl StackTable {
    /// Finds or adds `frames` and returns its id; `None` when the stack is new and the table
    /// already holds `max_stacks` stacks.
    ///
    /// `hash` is [`stack_hash`]`(frames)`, computed by the caller before it takes the table's lock
    /// (any hash works: equal hashes with different frames are chained).
    pub(crate) fn intern(&mut self, frames: &[u64], hash: u64, max_stacks: usize) -> Option<u32> {
        let mut id = self.by_hash.get(&hash).copied().unwrap_or(u32::MAX);
        while id != u32::MAX && *self.records[id as usize].frames != *frames {
            id = self.records[id as usize].next_same_hash;
        }
        if id == u32::MAX {
            if self.records.len() >= max_stacks || self.records.len() >= u32::MAX as usize - 1 {
                return None;
            }
            id = self.records.len() as u32;
            let next_same_hash = self.by_hash.insert(hash, id).unwrap_or(u32::MAX);
            self.records.push(StackRecord {
                frames: Box::leak(frames.into()),
                next_same_hash,
            });
        }
        Some(id)
    }

    /// Bytes this table holds (capacity, not just length).
    pub(crate) fn metadata_bytes(&self) -> usize {
        let map = self.by_hash.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        let records = self.records.capacity() * std::mem::size_of::<StackRecord>();
        let frames: usize = self.records.iter().map(|r| r.frames.len() * 8).sum();
        map + records + frames
    }
}

/// Finds or adds `frames` in the stack table ([`StackTable::intern`], creating the table at first
/// use): its id and its interned frames, or `None` when the stack is new and the table is full.
pub(crate) fn intern(
    frames: &[u64],
    hash: u64,
    max_stacks: usize,
) -> Option<(u32, &'static [u64])> {
    let mut stacks = lock(&STACKS);
    let table = stacks.get_or_insert_with(StackTable::default);
    let id = table.intern(frames, hash, max_stacks)?;
    Some((id, table.records[id as usize].frames))
}

/// Frames as written to a dump: the innermost return address minus one (so it points into the
/// call instruction, and jeprof, which takes the first frame as an exact PC, finds the calling
/// line), every other frame as returned (jeprof subtracts one itself).
pub(crate) fn frames_for_dump(frames: &[u64]) -> Vec<u64> {
    let mut out = frames.to_vec();
    if let Some(first) = out.first_mut() {
        *first = first.saturating_sub(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_finds_equal_stacks_and_caps_distinct_ones() {
        let mut t = StackTable::default();
        let intern = |t: &mut StackTable, frames: &[u64]| t.intern(frames, stack_hash(frames), 2);
        let a = intern(&mut t, &[1, 2, 3]).unwrap();
        let b = intern(&mut t, &[1, 2, 4]).unwrap();
        assert_ne!(a, b);
        assert_eq!(intern(&mut t, &[1, 2, 3]), Some(a));
        assert_eq!(intern(&mut t, &[9]), None);
        assert_eq!(t.records[b as usize].frames, &[1, 2, 4]);
    }

    #[test]
    fn equal_hashes_with_different_frames_are_different_stacks() {
        let mut t = StackTable::default();
        // Forced collision: both interned under hash 7.
        let a = t.intern(&[1, 2], 7, 10).unwrap();
        let b = t.intern(&[3, 4], 7, 10).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.intern(&[1, 2], 7, 10), Some(a));
        assert_eq!(t.intern(&[3, 4], 7, 10), Some(b));
    }

    #[test]
    fn stack_hash_depends_on_every_frame_and_its_place() {
        let base: Vec<u64> = (0..37).map(|i| 0x5555_0000_1000 + 40 * i).collect();
        let h = stack_hash(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] += 1;
            assert_ne!(stack_hash(&changed), h, "frame {i}");
        }
        let mut swapped = base.clone();
        swapped.swap(0, 4);
        assert_ne!(stack_hash(&swapped), h);
        assert_ne!(stack_hash(&base[..36]), h);
        assert_ne!(stack_hash(&[]), stack_hash(&[0]));
    }
}
