//! Which frames of a resolved stack a report shows, and the functions it makes of a frame:
//! jeprof's `RemoveUninterestingFrames`, `FilterFrames` (`--retain`, `--exclude`), `--focus`,
//! `--ignore` and `TranslateStack`, for what takes resolved profiles (folded stacks, the views,
//! pprof, export). Which frames are the allocator's is the charging engine's
//! ([`jeprof_dumpfmt::charge`]); the text report calls it once per distinct frame
//! ([`super::translate`]).

use jeprof_dumpfmt::charge::{self, FrameClass, Object};
use regex::Regex;

use super::filters::frame_matches;
use super::lines;
use super::model::ReportOptions;
use crate::names::SkipRules;
use crate::symbolize::keys::LAST_USER_ADDRESS;
use crate::symbolize::{unnamed, Frame};

/// The frames of a stack that survive `RemoveUninterestingFrames` (under `skip`, by name and,
/// unless jeprof's rules, by the object a frame lies in), innermost first.
pub fn interesting_frames(
    frames: &[std::sync::Arc<Frame>],
    skip: SkipRules,
) -> &[std::sync::Arc<Frame>] {
    // Everything up to and including the *last* allocator frame seen from the leaf goes.
    &frames[charge::allocator_frames(frames.len(), |i| frame_class(&frames[i], skip))..]
}

/// What the charging engine makes of `frame` ([`charge::classify`]): jeprof only skips frames with
/// real names; the object is the mapped file the frame lies in.
pub(crate) fn frame_class(frame: &Frame, skip: SkipRules) -> FrameClass {
    let object = frame
        .module
        .as_ref()
        .map_or(Object::Other, |(path, _)| charge::object_of(path));
    charge::classify(frame.symbolized.then(|| frame.function()), object, skip)
}

/// How many of a frame's innermost names are allocator functions Rust inlined into its caller
/// ([`charge::inlined_allocator_names`]; the text report skips them the same way, in
/// `Translator::push_info`), the outermost never.
pub(crate) fn allocator_names_inlined(frame: &Frame, skip: SkipRules) -> usize {
    if !frame.symbolized {
        return 0;
    }
    charge::inlined_allocator_names(&frame.names, skip)
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
    let first = allocator_names_inlined(frame, options.skip);
    let last = frame.names.len().saturating_sub(1);
    (first..frame.names.len())
        .filter(|&j| !frame.names[j].is_empty())
        .map(|j| {
            let name = charge::row_name(&frame.names[j], j < last);
            if options.lines {
                lines::with_line(&name, frame.line(j))
            } else {
                name
            }
        })
        .collect()
}
