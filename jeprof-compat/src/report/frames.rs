//! Which frames of a resolved stack a report shows, and the functions it makes of a frame:
//! jeprof's `RemoveUninterestingFrames`, `FilterFrames` (`--retain`, `--exclude`), `--focus`,
//! `--ignore` and `TranslateStack`, for what takes resolved profiles (folded stacks, the views,
//! pprof, export). The text report applies the same rules once per distinct frame
//! ([`super::translate`]).

use regex::Regex;

use super::filters::frame_matches;
use super::lines;
use super::model::ReportOptions;
use crate::names::{self, SkipRules};
use crate::symbolize::keys::LAST_USER_ADDRESS;
use crate::symbolize::{unnamed, Frame};

/// The frames of a stack that survive `RemoveUninterestingFrames`, innermost first.
pub fn interesting_frames(
    frames: &[std::sync::Arc<Frame>],
    skip: SkipRules,
) -> &[std::sync::Arc<Frame>] {
    // jeprof throws away everything up to and including the *last* allocator frame seen from the leaf.
    match frames.iter().rposition(|f| cuts_stack(f, skip)) {
        Some(i) => &frames[i + 1..],
        None => frames,
    }
}

/// Whether `frame` is an allocator frame [`interesting_frames`] cuts a stack at (jeprof only
/// skips frames with real names).
pub(crate) fn cuts_stack(frame: &Frame, skip: SkipRules) -> bool {
    frame.symbolized && names::is_uninteresting(frame.function(), skip)
}

/// How many of a frame's innermost names are allocator functions Rust inlined into its caller
/// (the text report skips them the same way, in `Translator::push_info`), the outermost never.
pub(crate) fn allocator_names_inlined(frame: &Frame, skip: SkipRules) -> usize {
    if !frame.symbolized || !skip.rust_allocator_frames {
        return 0;
    }
    let names = &frame.names;
    names
        .iter()
        .take(names.len().saturating_sub(1))
        .take_while(|n| names::is_uninteresting(n, skip))
        .count()
}

fn focus_matches(frames: &[std::sync::Arc<Frame>], focus: &Regex) -> bool {
    frames
        .iter()
        .any(|f| frame_matches(focus, f.key, &f.names, &f.lines))
}

/// The frames of a stack that a report shows, innermost first, or `None` when it shows none of the
/// stack: jeprof's `RemoveUninterestingFrames` ([`interesting_frames`]), then `--retain` and
/// `--exclude`, `--focus` and `--ignore` ([`crate::report::filters`]), in jeprof's order.
pub fn shown_frames<'f>(
    frames: &'f [std::sync::Arc<Frame>],
    options: &ReportOptions,
) -> Option<std::borrow::Cow<'f, [std::sync::Arc<Frame>]>> {
    let frames = interesting_frames(frames, options.skip);
    let filters = &options.filters;
    let frames: std::borrow::Cow<'f, [std::sync::Arc<Frame>]> = if filters.drops_frames() {
        let retained: Vec<std::sync::Arc<Frame>> = frames
            .iter()
            .filter(|f| !filters.drops_frame(f.function()))
            .cloned()
            .collect();
        if retained.is_empty() {
            return None;
        }
        retained.into()
    } else {
        frames.into()
    };
    if let Some(focus) = &options.focus {
        if !focus_matches(&frames, focus) {
            return None;
        }
    }
    if filters.ignore.is_some()
        && frames
            .iter()
            .any(|f| filters.ignores(f.key, &f.names, &f.lines))
    {
        return None;
    }
    Some(frames)
}

/// The functions a report makes of a frame, innermost first, as its rows name them (jeprof's
/// `TranslateStack` of one address): none above `0x7fffffffffffffff`; a Rust allocator shim
/// inlined into the caller left out unless kept; all but the outermost ` (inline)`; at
/// `--lines`, each followed by its source line.
pub fn frame_functions(frame: &Frame, options: &ReportOptions) -> Vec<String> {
    if frame.key > LAST_USER_ADDRESS {
        return Vec::new();
    }
    if !frame.symbolized {
        let prefixed = frame.names.first().is_some_and(|n| n.starts_with("0x"));
        return vec![if options.lines {
            lines::unnamed_with_line(frame.key, prefixed)
        } else {
            unnamed(frame.key, prefixed)
        }];
    }
    let mut first = 0;
    if options.skip.rust_allocator_frames {
        while frame.names.len() - first > 1
            && names::is_uninteresting(&frame.names[first], options.skip)
        {
            first += 1;
        }
    }
    let last = frame.names.len().saturating_sub(1);
    (first..frame.names.len())
        .filter(|&j| !frame.names[j].is_empty())
        .map(|j| {
            let name = &frame.names[j];
            let name = if j < last {
                format!("{name} (inline)")
            } else {
                name.clone()
            };
            if options.lines {
                lines::with_line(&name, frame.line(j))
            } else {
                name
            }
        })
        .collect()
}
