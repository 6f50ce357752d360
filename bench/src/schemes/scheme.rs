//! The sampling schemes, behind one trait, each with its Horvitz–Thompson estimator.
//!
//! A scheme decides, allocation by allocation, whether to sample it and with what *inclusion
//! probability* p. The estimator is the same for all of them: a sampled allocation of Z bytes stands
//! for Z/p bytes, and adds Z²(1 − p)/p² to the variance estimate (`jeprof_dumpfmt::math`'s
//! [`SampleWeight`], `docs/design.md` §2). Both are right only when p is the probability of inclusion
//! over the scheme's randomness *and* the decisions are independent; what each scheme assumes, and
//! where that fails, is in [`SchemeSpec::assumes`].

use jeprof_dumpfmt::math::{sample_probability, SampleWeight};

/// A sampling scheme with its state (countdown, generator, hash key).
pub trait Scheme {
    /// Whether the allocation of `size` bytes at `addr` is sampled: `Some(p)` with its inclusion
    /// probability p, or `None`.
    fn decide(&mut self, addr: u64, size: u64) -> Option<f64>;

    /// What a sampled allocation of `size` bytes, included with probability `p`, stands for.
    fn weigh(&self, size: u64, p: f64) -> SampleWeight {
        horvitz_thompson(size, p)
    }
}

/// The inverse-inclusion-probability weight of one sample of `size` bytes included with
/// probability `p`: `size/p` bytes, `1/p` objects, and the unbiased variance estimates
/// `size²(1 − p)/p²` and `(1 − p)/p²` of independent trials.
pub fn horvitz_thompson(size: u64, p: f64) -> SampleWeight {
    let objects = 1.0 / p;
    let q = (1.0 - p) / (p * p);
    let z = size as f64;
    SampleWeight {
        objects,
        bytes: z * objects,
        objects_variance: q,
        bytes_variance: z * z * q,
    }
}

/// splitmix64: the generator of the countdowns and coins, and (its finaliser) the address hash.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is finite.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}

/// splitmix64's finaliser: every input bit flips each output bit with probability about 1/2, so
/// addresses that differ only in a few bits (aligned, close together) hash independently.
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The schemes compared, with their parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SchemeSpec {
    /// Per-byte Poisson sampling at mean period `period` bytes: the shim's countdown
    /// (`docs/design.md` §1).
    Poisson {
        /// Mean bytes between picked bytes (R).
        period: u64,
    },
    /// Every allocation sampled with probability 1/`one_in`, by a coin of its own.
    Bernoulli {
        /// N in 1/N.
        one_in: u64,
    },
    /// An allocation is sampled when a seeded hash of its address falls in 1/`one_in` of the range.
    AddressHash {
        /// N in 1/N.
        one_in: u64,
    },
    /// An allocation is sampled when a seeded hash of its 4 KiB page falls in 1/`one_in`.
    PageHash {
        /// N in 1/N.
        one_in: u64,
    },
    /// Poisson below `threshold` bytes, the address hash at and above it.
    Hybrid {
        /// The Poisson period for small allocations.
        period: u64,
        /// The address hash's N for large ones.
        one_in: u64,
        /// Sizes from here on are hashed.
        threshold: u64,
    },
}

impl SchemeSpec {
    /// The schemes of the report: the published evaluation's set, and ours at our period.
    pub fn compared() -> Vec<SchemeSpec> {
        vec![
            SchemeSpec::Poisson { period: 4096 },
            SchemeSpec::Poisson { period: 512 * 1024 },
            SchemeSpec::Bernoulli { one_in: 256 },
            SchemeSpec::AddressHash { one_in: 256 },
            SchemeSpec::PageHash { one_in: 1024 },
            SchemeSpec::Hybrid {
                period: 4096,
                one_in: 256,
                threshold: 1024,
            },
        ]
    }

    /// A short name for tables and figures.
    pub fn label(&self) -> String {
        fn bytes(n: u64) -> String {
            if n.is_multiple_of(1024) {
                format!("{}K", n / 1024)
            } else {
                n.to_string()
            }
        }
        match *self {
            SchemeSpec::Poisson { period } => format!("poisson-{}", bytes(period)),
            SchemeSpec::Bernoulli { one_in } => format!("bernoulli-1/{one_in}"),
            SchemeSpec::AddressHash { one_in } => format!("addr-hash-1/{one_in}"),
            SchemeSpec::PageHash { one_in } => format!("page-hash-1/{one_in}"),
            SchemeSpec::Hybrid {
                period,
                one_in,
                threshold,
            } => format!(
                "hybrid-{}<{}≤hash-1/{one_in}",
                bytes(period),
                bytes(threshold)
            ),
        }
    }

    /// What the scheme's estimator assumes, and where that fails.
    pub fn assumes(&self) -> &'static str {
        match self {
            SchemeSpec::Poisson { .. } => {
                "p = 1 − e^(−Z/R) exactly (memoryless countdown: allocations independent whatever the \
                 sizes or addresses); fails only where a site has too few samples for the normal \
                 interval (none sampled: the interval is [0, 0])"
            }
            SchemeSpec::Bernoulli { .. } => {
                "p = 1/N, independent coins; unbiased, but blind to size: a few large objects weigh \
                 as much as a few small ones, so byte estimates of large-object sites vary most"
            }
            SchemeSpec::AddressHash { .. } => {
                "p = 1/N over the hash key, decisions independent across *live* objects (distinct \
                 addresses); an address reused over time is decided the same way every time, so \
                 counts over time (allocated bytes, sampled fractions, sample-free windows) move \
                 together and their variance estimate is far too small"
            }
            SchemeSpec::PageHash { .. } => {
                "p = 1/N over the hash key, decisions independent per allocation; wrong: every \
                 object on a page shares its page's decision, so live estimates vary by whole \
                 pages and the variance estimate is too small, and a working set of few pages is \
                 often not sampled at all"
            }
            SchemeSpec::Hybrid { .. } => {
                "Poisson's assumptions below the threshold, the address hash's above it; it \
                 inherits the hash's correlation for large objects"
            }
        }
    }

    /// The scheme with fresh state from `seed`.
    pub fn instantiate(&self, seed: u64) -> Box<dyn Scheme> {
        let mut rng = SplitMix64::new(seed ^ 0x5eed_5c4e_3e00_0000);
        match *self {
            SchemeSpec::Poisson { period } => Box::new(Poisson::new(period, rng)),
            SchemeSpec::Bernoulli { one_in } => Box::new(Bernoulli { one_in, rng }),
            SchemeSpec::AddressHash { one_in } => Box::new(AddressHash {
                one_in,
                key: rng.next_u64(),
            }),
            SchemeSpec::PageHash { one_in } => Box::new(PageHash {
                one_in,
                key: rng.next_u64(),
            }),
            SchemeSpec::Hybrid {
                period,
                one_in,
                threshold,
            } => {
                let key = rng.next_u64();
                Box::new(Hybrid {
                    threshold,
                    small: Poisson::new(period, rng),
                    large: AddressHash { one_in, key },
                })
            }
        }
    }
}

/// Per-byte Poisson sampling by the shim's countdown: `bytes_until_sample` holds ⌊X⌋ of an
/// exponential X of mean R; an allocation of Z bytes is a sample exactly when Z > ⌊X⌋ (X < Z,
/// probability 1 − e^(−Z/R)), and a fresh countdown is drawn after each sample.
#[derive(Debug, Clone)]
pub struct Poisson {
    period: u64,
    bytes_until_sample: u64,
    rng: SplitMix64,
}

impl Poisson {
    /// A countdown at mean period `period` drawing from `rng`.
    pub fn new(period: u64, mut rng: SplitMix64) -> Poisson {
        let bytes_until_sample = Poisson::draw(&mut rng, period);
        Poisson {
            period,
            bytes_until_sample,
            rng,
        }
    }

    fn draw(rng: &mut SplitMix64, period: u64) -> u64 {
        (-rng.unit().ln() * period as f64) as u64
    }
}

impl Scheme for Poisson {
    fn decide(&mut self, _addr: u64, size: u64) -> Option<f64> {
        if size <= self.bytes_until_sample {
            self.bytes_until_sample -= size;
            return None;
        }
        self.bytes_until_sample = Poisson::draw(&mut self.rng, self.period);
        Some(sample_probability(size as f64, self.period as f64))
    }

    fn weigh(&self, size: u64, _p: f64) -> SampleWeight {
        SampleWeight::of(size as f64, self.period as f64)
    }
}

/// A coin per allocation.
#[derive(Debug, Clone)]
pub struct Bernoulli {
    one_in: u64,
    rng: SplitMix64,
}

impl Scheme for Bernoulli {
    fn decide(&mut self, _addr: u64, _size: u64) -> Option<f64> {
        self.rng
            .next_u64()
            .is_multiple_of(self.one_in)
            .then(|| 1.0 / self.one_in as f64)
    }
}

/// A seeded hash of the address: stateless, so the same address always gets the same answer.
#[derive(Debug, Clone)]
pub struct AddressHash {
    one_in: u64,
    key: u64,
}

impl Scheme for AddressHash {
    fn decide(&mut self, addr: u64, _size: u64) -> Option<f64> {
        mix64(addr ^ self.key)
            .is_multiple_of(self.one_in)
            .then(|| 1.0 / self.one_in as f64)
    }
}

/// A seeded hash of the 4 KiB page that holds the allocation's first byte.
#[derive(Debug, Clone)]
pub struct PageHash {
    one_in: u64,
    key: u64,
}

impl Scheme for PageHash {
    fn decide(&mut self, addr: u64, _size: u64) -> Option<f64> {
        mix64((addr >> 12) ^ self.key)
            .is_multiple_of(self.one_in)
            .then(|| 1.0 / self.one_in as f64)
    }
}

/// Poisson for small allocations, the address hash for large ones.
#[derive(Debug, Clone)]
pub struct Hybrid {
    threshold: u64,
    small: Poisson,
    large: AddressHash,
}

impl Scheme for Hybrid {
    fn decide(&mut self, addr: u64, size: u64) -> Option<f64> {
        if size < self.threshold {
            self.small.decide(addr, size)
        } else {
            self.large.decide(addr, size)
        }
    }

    fn weigh(&self, size: u64, p: f64) -> SampleWeight {
        if size < self.threshold {
            self.small.weigh(size, p)
        } else {
            self.large.weigh(size, p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horvitz_thompson_at_poisson_probability_is_the_dump_weight() {
        for &(size, period) in &[(16u64, 4096u64), (4000, 4096), (100, 524_288)] {
            let p = sample_probability(size as f64, period as f64);
            let ours = horvitz_thompson(size, p);
            let dump = SampleWeight::of(size as f64, period as f64);
            assert!((ours.bytes - dump.bytes).abs() <= 1e-9 * dump.bytes);
            assert!(
                (ours.bytes_variance - dump.bytes_variance).abs() <= 1e-9 * dump.bytes_variance
            );
        }
    }

    #[test]
    fn poisson_countdown_samples_each_size_with_its_probability() {
        let mut s = SchemeSpec::Poisson { period: 4096 }.instantiate(7);
        let n = 200_000;
        let sampled = (0..n).filter(|_| s.decide(0, 1024).is_some()).count();
        let p = sample_probability(1024.0, 4096.0);
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (sampled as f64 - n as f64 * p).abs() < 5.0 * sd,
            "{sampled} vs {}",
            n as f64 * p
        );
    }

    #[test]
    fn address_hash_gives_one_address_one_answer_and_samples_one_in_n() {
        let mut s = SchemeSpec::AddressHash { one_in: 256 }.instantiate(3);
        let first: Vec<bool> = (0..100_000u64)
            .map(|i| s.decide(i * 16, 64).is_some())
            .collect();
        let again: Vec<bool> = (0..100_000u64)
            .map(|i| s.decide(i * 16, 64).is_some())
            .collect();
        assert_eq!(first, again);
        let hits = first.iter().filter(|&&b| b).count() as f64;
        assert!(
            (hits - 100_000.0 / 256.0).abs() < 5.0 * (100_000.0f64 / 256.0).sqrt(),
            "{hits}"
        );
    }
}
