//! jeprof's `--ignore`, `--retain` and `--exclude`: which stacks and frames a report keeps.
//!
//! As jeprof 5.3.1 applies them (`FilterAndPrint`, `RemoveUninterestingFrames`, `FilterFrames`,
//! `IgnoreProfile`), after the `Total:` figure is taken and allocator frames are removed:
//! 1. `--retain RE` keeps only the frames whose function matches, `--exclude RE` drops the frames
//!    whose function matches (the containing function's name, or the address as printed when
//!    nothing names it); a stack left with no frame is dropped;
//! 2. `--focus RE` keeps the stacks with a frame whose 16-digit address or any name matches;
//! 3. `--ignore RE` drops the stacks with a frame whose 16-digit address or any name matches.

use jeprof_dumpfmt::SourceLine;
use regex::Regex;

/// The stack and frame filters of a report, besides `--focus` (all empty by default).
#[derive(Debug, Clone, Default)]
pub struct StackFilters {
    /// `--ignore`: drop every stack with a frame whose address or a name matches.
    pub ignore: Option<Regex>,
    /// `--retain`: keep only the frames whose function matches.
    pub retain: Option<Regex>,
    /// `--exclude`: drop the frames whose function matches.
    pub exclude: Option<Regex>,
}

impl StackFilters {
    /// Whether `--retain` or `--exclude` may drop frames.
    pub fn drops_frames(&self) -> bool {
        self.retain.is_some() || self.exclude.is_some()
    }

    /// Whether `--retain`/`--exclude` drop a frame whose containing function prints as `function`
    /// (jeprof's `FilterFrames` tests the first name of its symbol entry: the outer function).
    pub fn drops_frame(&self, function: &str) -> bool {
        self.retain.as_ref().is_some_and(|r| !r.is_match(function))
            || self.exclude.as_ref().is_some_and(|e| e.is_match(function))
    }

    /// Whether `--ignore` matches a frame at lookup key `key` with these names and their source
    /// lines (as `--focus` matches: [`frame_matches`]).
    pub fn ignores<S: AsRef<str>>(
        &self,
        key: u64,
        names: &[S],
        lines: &[Option<SourceLine>],
    ) -> bool {
        self.ignore
            .as_ref()
            .is_some_and(|re| frame_matches(re, key, names, lines))
    }
}

/// Whether `--focus` or `--ignore` matches a frame, as jeprof's `SymbolMatches` (and the address
/// test before it): its 16-digit key, any of its names, or any of their known source lines
/// (`file:line`, which jeprof matches too).
pub fn frame_matches<S: AsRef<str>>(
    re: &Regex,
    key: u64,
    names: &[S],
    lines: &[Option<SourceLine>],
) -> bool {
    re.is_match(&format!("{key:016x}"))
        || names.iter().any(|n| re.is_match(n.as_ref()))
        || lines.iter().flatten().any(|l| re.is_match(&l.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_keeps_and_exclude_drops_by_the_containing_function() {
        let filters = StackFilters {
            retain: Some(Regex::new("^my_").unwrap()),
            exclude: Some(Regex::new("helper").unwrap()),
            ..Default::default()
        };
        assert!(!filters.drops_frame("my_main"));
        assert!(filters.drops_frame("other"));
        assert!(filters.drops_frame("my_helper"));
        assert!(!StackFilters::default().drops_frame("anything"));
    }

    #[test]
    fn ignore_matches_the_sixteen_digit_key_or_any_name() {
        let filters = StackFilters {
            ignore: Some(Regex::new("^00000000004011|inlined").unwrap()),
            ..Default::default()
        };
        assert!(filters.ignores(0x401149, &["mid_a"], &[]));
        assert!(filters.ignores(0x1, &["inlined_helper", "main"], &[]));
        assert!(!filters.ignores(0x1, &["main"], &[]));
        let at = SourceLine {
            file: "src/inlined.rs".into(),
            line: 3,
        };
        assert!(filters.ignores(0x1, &["main"], &[Some(at)]));
    }
}
