//! The process's page table entries (`/proc/self/pagemap`), read in bounded batches: which bytes
//! of an object lie on present pages and which on swapped ones.
//!
//! `/proc/self/pagemap` holds one 64-bit word per virtual page (bit 63 present, bit 62 swapped;
//! the frame numbers need `CAP_SYS_ADMIN`, these two bits do not). [`PageMap`] keeps a window of
//! [`WINDOW`] consecutive entries (4 KiB of words, 2 MiB of address space at 4 KiB pages) in
//! place, filled by one `pread`: objects visited in address order that lie in the same window cost
//! one read between them, an object larger than the window is read a window at a time, and nothing
//! is allocated. The words are the kernel's at the moment of the read; a page the program touches
//! or the kernel reclaims meanwhile is seen as it was then.

use std::fs::File;
use std::os::unix::fs::FileExt as _;

use jeprof_dumpfmt::rss::object_residency;

/// Entries per read: 512 words, one 4 KiB read.
const WINDOW: usize = 512;

/// A reader of `/proc/self/pagemap` with a window of entries.
pub(crate) struct PageMap {
    file: File,
    page_size: u64,
    /// The entries of the pages from `first_page` on; `len` of them were read (a read past the
    /// end of the address space returns fewer).
    entries: [u64; WINDOW],
    first_page: u64,
    len: usize,
    /// Reads made, for the cost figures.
    reads: u64,
}

impl PageMap {
    /// Opens the process's page map; an error says why it cannot be read (a kernel without it, a
    /// sandbox that hides it).
    pub(crate) fn open() -> std::io::Result<PageMap> {
        let file = File::open("/proc/self/pagemap")?;
        Ok(PageMap {
            file,
            page_size: page_size(),
            entries: [0; WINDOW],
            first_page: 0,
            len: 0,
            reads: 0,
        })
    }

    /// The page size the entries are of, bytes.
    pub(crate) fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The reads made so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn reads(&self) -> u64 {
        self.reads
    }

    /// The bytes of `[start, start + len)` on present pages and on swapped pages. An error of the
    /// read counts the rest of the object as neither.
    pub(crate) fn residency(&mut self, start: u64, len: u64) -> (u64, u64) {
        let end = start.saturating_add(len);
        let (mut resident, mut swapped) = (0u64, 0u64);
        let mut at = start;
        while at < end {
            let page = at / self.page_size;
            if !(self.first_page..self.first_page + self.len as u64).contains(&page)
                && !self.load(page)
            {
                break;
            }
            let window_end = (self.first_page + self.len as u64).saturating_mul(self.page_size);
            let part_end = end.min(window_end);
            let (r, s) = object_residency(
                at,
                part_end - at,
                self.page_size,
                self.first_page,
                &self.entries[..self.len],
            );
            resident += r;
            swapped += s;
            at = part_end;
        }
        (resident, swapped)
    }

    /// Reads the window of entries from `page` on; false when nothing could be read.
    fn load(&mut self, page: u64) -> bool {
        let mut bytes = [0u8; WINDOW * 8];
        let Some(offset) = page.checked_mul(8) else {
            return false;
        };
        let mut got = 0;
        while got < bytes.len() {
            match self.file.read_at(&mut bytes[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.reads += 1;
        self.len = got / 8;
        self.first_page = page;
        for (entry, word) in self.entries.iter_mut().zip(bytes.chunks_exact(8)) {
            *entry = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
        }
        self.len > 0
    }
}

/// The system's page size.
fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_pages_read_present_and_untouched_ones_do_not() {
        let mut map = PageMap::open().expect("/proc/self/pagemap");
        let page = map.page_size() as usize;
        // A fresh anonymous mapping of 2 windows and a bit: only every third page touched.
        let pages = 2 * WINDOW + 7;
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(start, libc::MAP_FAILED);
        let start = start as usize;
        let touched: Vec<usize> = (0..pages).step_by(3).collect();
        for &p in &touched {
            // SAFETY: inside the mapping, which is writable.
            unsafe { *((start + p * page) as *mut u8) = 1 };
        }
        let (resident, swapped) = map.residency(start as u64, (pages * page) as u64);
        assert_eq!(resident, (touched.len() * page) as u64);
        assert_eq!(swapped, 0);
        assert!(map.reads() >= 3, "{}", map.reads());
        // One touched page alone, inside the window just read: no new read.
        let reads = map.reads();
        let last = *touched.last().unwrap();
        let (r, _) = map.residency((start + last * page + 8) as u64, 16);
        assert_eq!(r, 16);
        assert_eq!(map.reads(), reads);
        // Half of a touched page and half of the untouched one after it.
        let (r, _) = map.residency((start + page / 2) as u64, page as u64);
        assert_eq!(r, (page / 2) as u64);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(start as *mut libc::c_void, pages * page) };
    }
}
