//! What a page shows ([`Page`]): the producer (the shim in-process, `jeprof-compat` from dumps)
//! fills it, [`crate::render`] writes it.

use jeprof_dumpfmt::rss::ByteEstimate;
use jeprof_dumpfmt::Estimate;

/// One site: a function charged as the text report charges it (flat: the stacks whose user
/// frame it is; cum: the stacks it appears in, once each), with the variances of the estimates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    /// The function, as the report names it.
    pub name: String,
    /// Live bytes charged flat.
    pub bytes: f64,
    /// Their variance.
    pub bytes_variance: f64,
    /// Live objects charged flat.
    pub objects: f64,
    /// Their variance.
    pub objects_variance: f64,
    /// Live bytes of the stacks it appears in.
    pub cum_bytes: f64,
    /// Their variance.
    pub cum_bytes_variance: f64,
    /// Bytes of the live objects charged flat that lie on present pages, with their variance
    /// ([`jeprof_dumpfmt::rss`]); `None` when the profile carries no residency figures (then
    /// the page has no resident column).
    pub resident: Option<ByteEstimate>,
}

/// One site's live bytes at each moment of a [`History`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// The site.
    pub name: String,
    /// Live bytes at each of [`History::times`].
    pub bytes: Vec<f64>,
    /// Found still growing by the leak test.
    pub suspect: bool,
}

/// Live bytes over time for the top sites.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Seconds from the first moment, ascending.
    pub times: Vec<f64>,
    /// The sites drawn.
    pub series: Vec<Series>,
    /// What the history is and what the leak test said (one line).
    pub note: String,
}

/// Where the page's profile came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A running process, served by its listener (links to its endpoints are relative).
    Live {
        /// The process id.
        pid: u32,
    },
    /// Dump files (the last one is the moment shown).
    Dumps(Vec<String>),
}

/// One site's change between an earlier moment and the one shown, with `diff`'s 95% interval
/// (the type `jeprof-compat diff` reports).
pub use jeprof_dumpfmt::math::Change;

/// What grew between an earlier moment and the one shown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Growth {
    /// The earlier moment, as a heading names it.
    pub base: String,
    /// Folded stacks (`root;…;leaf`) with their live bytes then and now, for the differential
    /// flame graph.
    pub folded: Vec<(String, f64, f64)>,
    /// The sites' changes, largest first.
    pub changes: Vec<Change>,
    /// What the comparison leaves out (one line; empty when nothing).
    pub note: String,
}

/// Everything a page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The heading: what and when.
    pub title: String,
    /// Where the profile came from.
    pub source: Source,
    /// Every stack's in-use figures added up (the report's `Total:`).
    pub total: Estimate,
    /// The sites, largest flat bytes first (then by name, as the report sorts).
    pub sites: Vec<Site>,
    /// Folded stacks (`root;…;leaf`) with their live bytes, for the flame graph.
    pub folded: Vec<(String, f64)>,
    /// The allocator's figures and their reading, or why there are none.
    pub allocator: Result<String, String>,
    /// Live bytes over time, or why there is no history.
    pub history: Result<History, String>,
    /// Each scope's in-use figures, by label (empty: no scopes).
    pub scopes: Vec<(String, Estimate)>,
    /// What grew since an earlier moment, when one was chosen.
    pub growth: Option<Growth>,
    /// Moments the page can be compared with, as (label, link): a menu (empty: none).
    pub moments: Vec<(String, String)>,
}
