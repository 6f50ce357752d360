//! Where the resident memory is, per stack, as pprof: the live heap with the residency figures
//! of [`crate::rss`] beside the in-use bytes, so that
//! `go tool pprof -sample_index=resident_space` draws the stacks by the memory the kernel holds
//! for them rather than by what they allocated.
//!
//! The same adapter as [`super::from_profile`] (the same locations, mappings and allocator
//! frames removed), with other sample types, in this order:
//!
//! | sample type | what it is |
//! |---|---|
//! | `inuse_space/bytes` | the stack's live bytes (the unbiased in-use estimate) |
//! | `resident_space/bytes` | bytes of its live objects on present pages ([`crate::rss::SiteRss::resident`]) |
//! | `swapped_space/bytes` | bytes of its live objects on swapped pages |
//! | `fragmentation_space/bytes` | the stranded slab bytes charged to it ([`crate::rss::attribute_stranded`]); only when the allocator is jemalloc, whose per-bin statistics count them |
//!
//! One sample per stack with live objects (no per-scope split), `resident_space` the default;
//! each value is an unbiased estimate rounded to an integer, so sums over stacks stay unbiased.
//! The variances are not carried: pprof has no place for them (`jeprof-compat report --rss`
//! prints the intervals).

use std::collections::HashMap;

use super::{Builder, Locator, Options, PbProfile};
use crate::model::Profile;
use crate::rss::{RssFigures, SiteRss};

/// The sample types of [`from_profile_rss`], in the order of each sample's values; the last is
/// left out when the figures have no slab statistics.
pub const RSS_SAMPLE_TYPES: [(&str, &str); 4] = [
    ("inuse_space", "bytes"),
    ("resident_space", "bytes"),
    ("swapped_space", "bytes"),
    ("fragmentation_space", "bytes"),
];

/// The sample type [`from_profile_rss`] shows first when the header names none.
pub const RSS_DEFAULT_SAMPLE_TYPE: &str = "resident_space";

/// The pprof message of `profile`'s live stacks with their residency `rss` (see the module's
/// doc); `options` as [`super::from_profile`] takes them (an empty default sample type:
/// [`RSS_DEFAULT_SAMPLE_TYPE`]). A stack without an `rss_site` counts zero resident, swapped
/// and stranded bytes. The comments say what the figures are, and why `fragmentation_space` is
/// absent when it is.
pub fn from_profile_rss(profile: &Profile, rss: &RssFigures, options: &Options) -> PbProfile {
    let mut header = options.header.clone();
    if header.period == 0 {
        header.period = profile.sample_period;
    }
    if header.default_sample_type.is_empty() {
        header.default_sample_type = RSS_DEFAULT_SAMPLE_TYPE.to_string();
    }
    header.comments.push(format!(
        "resident_space: bytes of each stack's live objects on present pages, from \
         /proc/self/pagemap at the dump (pages of {} bytes); small objects share pages, so an \
         untouched small object on a touched page counts as resident",
        rss.page_size
    ));
    if let Err(why) = &rss.pagemap {
        header.comments.push(format!(
            "residency unknown: /proc/self/pagemap was unreadable ({why}); resident_space and \
             swapped_space are zero"
        ));
    }
    let types = match rss.slabs {
        Some(_) => &RSS_SAMPLE_TYPES[..],
        None => {
            header.comments.push(
                "fragmentation_space omitted: the allocator is not jemalloc, whose per-bin \
                 statistics count the stranded slab bytes"
                    .to_string(),
            );
            &RSS_SAMPLE_TYPES[..3]
        }
    };
    let mut b = Builder::with_sample_types(&header, types);
    let locator = Locator::new(profile, options, &header, &mut b);
    let sites: HashMap<&[u64], &SiteRss> =
        rss.sites.iter().map(|s| (s.frames.as_slice(), s)).collect();
    let none = SiteRss::default();
    for stack in &profile.stacks {
        if stack.counts.inuse.bytes <= 0.0 {
            continue;
        }
        let site = sites.get(stack.frames.as_slice()).copied().unwrap_or(&none);
        let values = [
            stack.counts.inuse.bytes,
            site.resident.bytes,
            site.swapped.bytes,
            site.stranded.map_or(0.0, |s| s.bytes),
        ];
        let ids = locator.locations(&mut b, &stack.frames);
        b.sample_values(ids, &values[..types.len()], &[]);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Counts, Estimate, Stack};
    use crate::rss::{ByteEstimate, SlabFigures};

    fn profile() -> Profile {
        let mut p = Profile::new(4096);
        let stack = |frames: Vec<u64>, bytes: f64| Stack {
            frames,
            counts: Counts {
                inuse: Estimate {
                    objects: 1.0,
                    bytes,
                    ..Estimate::default()
                },
                accum: Estimate::default(),
            },
            threads: Vec::new(),
        };
        p.stacks = vec![stack(vec![0x10, 0x20], 65536.0), stack(vec![0x30], 8192.0)];
        p
    }

    fn figures(slabs: Option<SlabFigures>) -> RssFigures {
        let e = |bytes: f64| ByteEstimate {
            bytes,
            variance: 1.0,
        };
        RssFigures {
            page_size: 4096,
            pagemap: Ok(()),
            sites: vec![SiteRss {
                frames: vec![0x10, 0x20],
                resident: e(32768.4),
                swapped: e(4096.0),
                stranded: slabs.as_ref().map(|_| e(100.0)),
            }],
            slabs,
        }
    }

    fn names(pb: &PbProfile) -> Vec<String> {
        pb.sample_type
            .iter()
            .map(|t| pb.string_table[t.r#type as usize].clone())
            .collect()
    }

    #[test]
    fn samples_carry_inuse_resident_swapped_and_fragmentation_per_stack_resident_first() {
        let pb = from_profile_rss(
            &profile(),
            &figures(Some(SlabFigures::default())),
            &Options::default(),
        );
        assert_eq!(
            names(&pb),
            [
                "inuse_space",
                "resident_space",
                "swapped_space",
                "fragmentation_space"
            ]
        );
        assert_eq!(
            pb.string_table[pb.default_sample_type as usize],
            "resident_space"
        );
        let values: Vec<&[i64]> = pb.sample.iter().map(|s| s.value.as_slice()).collect();
        assert_eq!(
            values,
            [&[65536, 32768, 4096, 100][..], &[8192, 0, 0, 0][..]]
        );
    }

    #[test]
    fn without_jemalloc_fragmentation_is_left_out_and_the_comments_say_why() {
        let pb = from_profile_rss(&profile(), &figures(None), &Options::default());
        assert_eq!(
            names(&pb),
            ["inuse_space", "resident_space", "swapped_space"]
        );
        assert!(pb.sample.iter().all(|s| s.value.len() == 3));
        let comments: Vec<&str> = pb
            .comment
            .iter()
            .map(|&i| pb.string_table[i as usize].as_str())
            .collect();
        assert!(
            comments
                .iter()
                .any(|c| c.starts_with("fragmentation_space omitted")),
            "{comments:?}"
        );
    }
}
