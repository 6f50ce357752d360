//! An allocation stream with its exact truth: what every scheme replays.

/// One allocation of a trace: where it was placed, how big it was, and the call site that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// The address the allocator returned.
    pub addr: u64,
    /// Requested bytes.
    pub size: u64,
    /// Index into [`Trace::sites`].
    pub site: u32,
}

/// One event of a trace, naming its allocation by its index in [`Trace::allocations`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The allocation was made.
    Alloc(u32),
    /// The allocation was freed.
    Free(u32),
}

/// An allocation stream that ends at the moment the estimates are taken (the *snapshot*).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Call-site names, indexed by [`Allocation::site`].
    pub sites: Vec<String>,
    /// Every allocation, in the order it was made.
    pub allocations: Vec<Allocation>,
    /// Allocations and frees in program order; every `Free(i)` follows its `Alloc(i)`.
    pub events: Vec<Event>,
}

/// The exact figures a scheme's estimates are compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Truth {
    /// Bytes live at the snapshot, per site.
    pub live_bytes: Vec<f64>,
    /// Bytes allocated from the start up to the snapshot, per site (pprof's `alloc_space`).
    pub allocated_bytes: Vec<f64>,
    /// Allocations in the trace.
    pub allocations: u64,
    /// Bytes allocated in the trace.
    pub bytes: u64,
    /// Distinct addresses the allocations were placed at.
    pub distinct_addresses: u64,
    /// Distinct 4 KiB pages that held the start of an allocation.
    pub distinct_pages: u64,
}

impl Trace {
    /// Adds a call site and returns its index.
    pub fn add_site(&mut self, name: impl Into<String>) -> u32 {
        self.sites.push(name.into());
        (self.sites.len() - 1) as u32
    }

    /// Records an allocation and returns its index, for the matching [`Trace::free`].
    pub fn alloc(&mut self, addr: u64, size: u64, site: u32) -> u32 {
        let index = self.allocations.len() as u32;
        self.allocations.push(Allocation { addr, size, site });
        self.events.push(Event::Alloc(index));
        index
    }

    /// Records the free of allocation `index`.
    pub fn free(&mut self, index: u32) {
        self.events.push(Event::Free(index));
    }

    /// The exact live and allocated bytes per site at the end of the trace.
    pub fn truth(&self) -> Truth {
        let mut live_bytes = vec![0.0; self.sites.len()];
        let mut allocated_bytes = vec![0.0; self.sites.len()];
        let mut bytes = 0;
        for event in &self.events {
            match *event {
                Event::Alloc(i) => {
                    let a = self.allocations[i as usize];
                    live_bytes[a.site as usize] += a.size as f64;
                    allocated_bytes[a.site as usize] += a.size as f64;
                    bytes += a.size;
                }
                Event::Free(i) => {
                    let a = self.allocations[i as usize];
                    live_bytes[a.site as usize] -= a.size as f64;
                }
            }
        }
        let mut addresses: Vec<u64> = self.allocations.iter().map(|a| a.addr).collect();
        addresses.sort_unstable();
        addresses.dedup();
        let mut pages: Vec<u64> = addresses.iter().map(|a| a >> 12).collect();
        pages.dedup();
        Truth {
            live_bytes,
            allocated_bytes,
            allocations: self.allocations.len() as u64,
            bytes,
            distinct_addresses: addresses.len() as u64,
            distinct_pages: pages.len() as u64,
        }
    }

    /// Drops the frees after the last allocation: a server's teardown, which would leave nothing
    /// live to estimate.
    pub fn drop_teardown(&mut self) {
        let last_alloc = self
            .events
            .iter()
            .rposition(|e| matches!(e, Event::Alloc(_)))
            .map_or(0, |at| at + 1);
        self.events.truncate(last_alloc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_counts_live_bytes_per_site_at_the_end() {
        let mut t = Trace::default();
        let (a, b) = (t.add_site("a"), t.add_site("b"));
        let x = t.alloc(0x1000, 10, a);
        t.alloc(0x2010, 20, b);
        t.alloc(0x1000, 30, a);
        t.free(x);
        let truth = t.truth();
        assert_eq!(truth.live_bytes, vec![30.0, 20.0]);
        assert_eq!(truth.allocated_bytes, vec![40.0, 20.0]);
        assert_eq!((truth.distinct_addresses, truth.distinct_pages), (2, 2));
    }

    #[test]
    fn drop_teardown_keeps_everything_up_to_the_last_allocation() {
        let mut t = Trace::default();
        let s = t.add_site("s");
        let x = t.alloc(1, 100, s);
        let y = t.alloc(2, 50, s);
        t.free(x);
        let z = t.alloc(3, 10, s);
        t.free(y);
        t.free(z);
        t.drop_teardown();
        assert_eq!(t.events.len(), 4);
        assert_eq!(t.truth().live_bytes, vec![60.0]);
    }
}
