//! # jeprof-page: a heap profile as one HTML page
//!
//! [`render`] writes a [`Page`] as one self-contained HTML document (its CSS and script inline;
//! nothing is fetched, so it opens on a machine that reaches no network and can be attached to a
//! ticket), read-only, showing:
//!
//! - the in-use flame graph, inferno's interactive SVG (click to zoom, Ctrl-F to search), or,
//!   when the page compares two moments ([`Growth`]), what grew: the differential flame graph
//!   and each site's change, coloured only where `diff`'s interval test finds it significant;
//!   and a menu of the moments to compare with;
//! - the top sites by user frame with live bytes, objects and cum bytes, each with its 95%
//!   interval ([`jeprof_dumpfmt::math::confidence_interval_95`]), in a table sorted by clicking
//!   a column, written for people ([`units`]: `27.7 MiB (22.9–32.5 MiB)`) with the figures
//!   `jeprof-compat report --show_bytes --interval` prints in each cell's `title`; when the
//!   profile carries residency figures ([`jeprof_dumpfmt::rss`]), a resident column (each site's
//!   live bytes on present pages, charged flat, with its interval) and one line under the table
//!   on what it counts; a profile without them shows the table as before;
//! - the allocator's figures and what they say about the gap to RSS
//!   ([`jeprof_dumpfmt::allocator::describe`]);
//! - live bytes over time for the top sites, leak suspects drawn thick and listed;
//! - each scope's live bytes, when there are scopes;
//! - the profiler's endpoints with the command lines that read them, when a listener serves the
//!   page; from dumps, the files (a long series as its first, last and count) and the commands
//!   that read them.
//!
//! Two producers fill a [`Page`]: the shim's listener serves it at `/` from the process's own
//! profile, its sites charged by [`charge()`] (a thin caller of the workspace's one charging
//! engine, [`jeprof_dumpfmt::charge`], which `jeprof-compat`'s reports call too: the page keeps no
//! rules of its own) and its history from the in-process leak history;
//! `jeprof-compat report --html OUT.html DUMP...` writes it from dumps, its sites from the text
//! report's own engine, its history from the series of dumps.
//!
//! ```
//! use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable};
//!
//! let mut profile = Profile::new(512 * 1024);
//! let inuse = Estimate { objects: 10.0, bytes: 4_194_304.0, ..Estimate::default() };
//! profile.stacks.push(Stack {
//!     frames: vec![0x1000],
//!     counts: Counts { inuse, accum: inuse },
//!     threads: Vec::new(),
//! });
//! let mut symbols = SymbolTable::default();
//! symbols.names.insert(0x1000, vec!["app::<cache>::fill".to_string()]);
//! profile.symbols = Some(symbols);
//!
//! let charged = jeprof_page::charge(&profile);
//! let page = jeprof_page::Page {
//!     title: "heap".into(),
//!     source: jeprof_page::Source::Dumps(vec!["heap.prof".into()]),
//!     total: charged.total,
//!     sites: charged.sites,
//!     folded: charged.folded,
//!     allocator: Err("no allocator figures".into()),
//!     history: Err("one dump: no history".into()),
//!     scopes: Vec::new(),
//!     growth: None,
//!     moments: Vec::new(),
//! };
//! let html = jeprof_page::render(&page);
//! assert!(html.contains("app::&lt;cache&gt;::fill") && html.contains("4.00 MiB"));
//! assert!(html.contains("title=\"4194304 bytes\""));
//! ```
//!
//! ## Guarantees and limits
//! - **Escaped.** Every name and label goes through [`escape::text`] (`&`, `<`, `>`, quotes);
//!   inferno escapes what it writes into the flame graph. A symbol named
//!   `<script>alert(1)</script>` shows as that text.
//! - **Bounded.** At most [`html::MAX_SITES`] sites are listed and [`html::MAX_FOLDED`] stacks
//!   drawn (the largest), so the page stays a few megabytes whatever the profile.
//! - [`charge()`] takes names as the symbol section spells them (demangled), so a dump that needs
//!   its binaries to be named is `jeprof-compat`'s to charge (`report --html`).
//!
//! ## Modules, bottom to top
//! [`escape`], [`model`] and [`units`] use no other module; [`charge`](mod@charge) uses model
//! (and the engine in `jeprof-dumpfmt`); [`flame`] uses none; [`chart`] uses escape, model and
//! units; [`html`] uses all of them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod charge;
pub mod chart;
pub mod escape;
pub mod flame;
pub mod html;
pub mod model;
pub mod units;

pub use charge::{charge, Charged};
pub use html::render;
pub use model::{Change, Growth, History, Page, Series, Site, Source};
