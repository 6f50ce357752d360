//! The hasher of the profiler's tables: a cheap multiplicative one for addresses and stack hashes
//! (keys are not attacker-chosen).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier (2^64 / φ): consecutive keys land far apart.
pub(crate) const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// A cheap multiplicative hasher for addresses and stack hashes.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    /// A hasher that starts from `seed`.
    pub(crate) fn with_seed(seed: u64) -> WordHasher {
        WordHasher(seed)
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // A product's low bits depend only on the factors' low bits, and sampled addresses are
        // 16-aligned or more: fold the well-mixed high half into the low bits hashbrown indexes
        // with (its 7-bit tags come from the top bits, which stay as they are).
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(26) ^ x).wrapping_mul(MIX);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

/// A hash map with [`WordHasher`].
pub(crate) type Map<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;
