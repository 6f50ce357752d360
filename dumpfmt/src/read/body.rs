//! The body, after the header: header thread lines, annotations and labels, then the stack
//! entries (a `@` line, its counts, its comments), then the memory map. One line at a time, each
//! kind by a function of its own; each stack is handed over as soon as the next one starts.

use std::io::BufRead;

use super::classify::{after_word, classify, BodyLine};
use super::comments::{self, parse_variance};
use super::counts::{decode_counts, parse_counts, CountsLine};
use super::errors::{malformed, orphan_stack, BODY_EXPECTED};
use super::lines::Lines;
use super::memory_map::read_memory_map;
use super::stack::{parse_frames, StackSink};
use super::truncation::BodyEnd;
use crate::error::Error;
use crate::model::{Counts, Profile, ScopeStack, Stack, ThreadCounts, ThreadSummary};
use crate::syntax::{self, END_MARKER};

/// The body's reading: the profile so far, the stack being read, and how the dump ends.
struct Body<'p, 'f, F> {
    profile: &'p mut Profile,
    /// The header's period, which every counts line is decoded with (the profile's may become
    /// the `sample_period` annotation's).
    header_period: u64,
    sink: StackSink<'f, F>,
    /// The stack entry that counts lines currently belong to: the last one read. It is complete,
    /// and handed over, when the next one starts or the body ends.
    current: Option<Stack>,
    /// Whether the current entry carried a `# var` line (then per-line variance estimates are
    /// not used).
    current_has_variance: bool,
    /// The header's `t*` total (jeprof never reads it) has been seen.
    header_total: bool,
    /// How the dump ends; its `awaiting_counts` is the line of the current stack while it has
    /// no `t*` counts line yet (a stack without figures is an orphan: an error, or the cut end
    /// of a dump).
    end: BodyEnd,
}

/// Reads the body into `profile` (the header read, its period in `profile.sample_period`),
/// handing each stack to `on_stack`; returns how the dump ends, with the error of the first stack
/// whose figures are not valid, if any, which [`BodyEnd::outcome`] orders against the ending.
pub(super) fn read_body<F: FnMut(&Profile, Stack)>(
    lines: &mut Lines<impl BufRead>,
    profile: &mut Profile,
    on_stack: &mut F,
) -> Result<(BodyEnd, Option<Error>), Error> {
    let mut body = Body {
        header_period: profile.sample_period,
        profile,
        sink: StackSink::new(on_stack),
        current: None,
        current_has_variance: false,
        header_total: false,
        end: BodyEnd::default(),
    };
    while let Some((no, raw, unterminated)) = lines.next_line()? {
        if unterminated {
            // The last line has no newline: the dump was cut inside it, and what it holds (part
            // of a number, part of a stack) cannot be trusted.
            body.end.cut_line = Some((no, raw.len()));
            break;
        }
        if body.end.end_marker {
            return Err(malformed(no, raw, &format!("nothing after `{END_MARKER}`")));
        }
        match classify(raw) {
            BodyLine::MemoryMap => {
                body.memory_map(lines)?;
                break;
            }
            BodyLine::Blank => {}
            BodyLine::Stack(rest) => body.stack_line(no, raw, rest)?,
            BodyLine::Comment(line) => body.comment_line(no, raw, line)?,
            BodyLine::Counts(line) => body.counts_line(no, raw, line)?,
            BodyLine::Other => return Err(malformed(no, raw, BODY_EXPECTED)),
        }
    }
    body.end.last = lines.number;
    Ok(body.finish())
}

impl<F: FnMut(&Profile, Stack)> Body<'_, '_, F> {
    /// The current stack must have its counts before another line that ends it.
    fn check_not_awaiting_counts(&self) -> Result<(), Error> {
        match self.end.awaiting_counts {
            Some(at) => Err(orphan_stack(at)),
            None => Ok(()),
        }
    }

    /// The memory map, after its first line: the stacks end there, so the last one is handed
    /// over before the map is read.
    fn memory_map(&mut self, lines: &mut Lines<impl BufRead>) -> Result<(), Error> {
        self.check_not_awaiting_counts()?;
        if let Some(stack) = self.current.take() {
            self.sink.complete(self.profile, stack);
        }
        let (maps, maps_end) = read_memory_map(lines)?;
        self.profile.mapped_libraries = Some(maps);
        self.end.maps = true;
        self.end.end_marker = maps_end.end_marker;
        self.end.cut_line = maps_end.cut_line;
        Ok(())
    }

    /// A `@` line (`rest` follows the `@`): the stack before it is complete, this one starts.
    fn stack_line(&mut self, no: usize, raw: &[u8], rest: &[u8]) -> Result<(), Error> {
        self.check_not_awaiting_counts()?;
        let mut frames = parse_frames(no, raw, rest)?;
        if frames.is_empty() {
            // jeprof: a bare `@` does not match `^@\s+(.*)$`, so the current stack is unchanged.
            let Some(previous) = &self.current else {
                return Err(malformed(
                    no,
                    raw,
                    "a stack before the first bare `@` (jeprof would give its counts to no \
                     stack, dropping them)",
                ));
            };
            frames = previous.frames.clone();
        }
        match self.current.take() {
            Some(previous) => self.sink.complete(self.profile, previous),
            // The annotations are all read: the period is final before any stack is seen.
            None => comments::take_sample_period(self.profile),
        }
        self.current = Some(Stack {
            frames,
            ..Stack::default()
        });
        self.end.awaiting_counts = Some(no);
        self.current_has_variance = false;
        Ok(())
    }

    /// A `#` line (`line` trimmed): the end marker, a label, a stack's `# var` or `# scope`
    /// line, or an annotation (before the first stack; ignored after it).
    fn comment_line(&mut self, no: usize, raw: &[u8], line: &[u8]) -> Result<(), Error> {
        if line == END_MARKER.as_bytes() {
            self.check_not_awaiting_counts()?;
            self.end.end_marker = true;
            return Ok(());
        }
        if let Some(rest) = comments::label_rest(raw) {
            return comments::read_label(no, raw, rest, self.profile, self.current.is_some());
        }
        let text = String::from_utf8_lossy(&line[1..]);
        let text = text.trim();
        if let Some(rest) = after_word(text, syntax::VAR) {
            self.variance_line(no, raw, rest)
        } else if let Some(rest) = after_word(text, syntax::SCOPE) {
            self.scope_line(no, raw, rest)
        } else {
            if self.current.is_none() {
                self.annotation(text);
            }
            Ok(())
        }
    }

    /// `# var <objects> <bytes> <objects> <bytes>` (`rest` follows `var `): the current stack's
    /// variances, kept over the ones its counts line would estimate.
    fn variance_line(&mut self, no: usize, raw: &[u8], rest: &str) -> Result<(), Error> {
        let Some(stack) = &mut self.current else {
            return Err(malformed(
                no,
                raw,
                "a `# var` line only after a `@` stack line",
            ));
        };
        let v = parse_variance(rest).ok_or_else(|| {
            malformed(
                no,
                raw,
                "`# var <objects> <bytes> <objects> <bytes>` (four reals)",
            )
        })?;
        let counts = &mut stack.counts;
        counts.inuse.objects_variance = v[0];
        counts.inuse.bytes_variance = v[1];
        counts.accum.objects_variance = v[2];
        counts.accum.bytes_variance = v[3];
        self.current_has_variance = true;
        Ok(())
    }

    /// `# scope …` (`rest` follows `scope `): one scope's in-use figures at the current stack.
    fn scope_line(&mut self, no: usize, raw: &[u8], rest: &str) -> Result<(), Error> {
        let Some(stack) = &self.current else {
            return Err(malformed(
                no,
                raw,
                "a `# scope` line only after a `@` stack line",
            ));
        };
        let (inuse, scope) = crate::scopes::parse_scope_line(rest).ok_or_else(|| {
            malformed(
                no,
                raw,
                "`# scope <objects> <bytes> <objects variance> <bytes variance> <label>`",
            )
        })?;
        self.profile.scopes.push(ScopeStack {
            scope,
            frames: stack.frames.clone(),
            inuse,
        });
        Ok(())
    }

    /// `# <key>: <value>` before the first stack (`text` follows the `#`, trimmed): an annotation,
    /// or the writer's announcement that the dump ends with [`END_MARKER`]. Other comments are
    /// ignored, as jeprof ignores them.
    fn annotation(&mut self, text: &str) {
        if let Some((k, v)) = comments::split_annotation(text) {
            if k == syntax::WRITER_KEY && v == syntax::WRITER {
                self.end.announced_end_marker = true;
            } else {
                self.profile
                    .annotations
                    .push((k.to_string(), v.to_string()));
            }
        }
    }

    /// A counts line (`line` trimmed): the header's (before the first stack), or the current
    /// stack's: its `t*` figures, once, then its threads' shares.
    fn counts_line(&mut self, no: usize, raw: &[u8], line: &[u8]) -> Result<(), Error> {
        let CountsLine {
            thread,
            values,
            name,
        } = parse_counts(no, raw, line)?;
        let name = name.map(str::to_string);
        let counts = decode_counts(&values, self.header_period);
        let Some(stack) = &mut self.current else {
            return self.header_counts(no, raw, thread, counts, name);
        };
        if name.is_some() {
            return Err(malformed(
                no,
                raw,
                "nothing after `]` (only header thread lines carry a name)",
            ));
        }
        match thread {
            None => {
                if self.end.awaiting_counts.take().is_none() {
                    return Err(malformed(
                        no,
                        raw,
                        "a `@ 0x…` stack line before these counts (this stack already has its \
                         `t*` line)",
                    ));
                }
                add_counts(stack, &counts, self.current_has_variance);
            }
            Some(thread) => {
                if let Some(at) = self.end.awaiting_counts {
                    return Err(malformed(
                        no,
                        raw,
                        &format!(
                            "the stack's `t*` line before its per-thread lines (stack at line \
                             {at})"
                        ),
                    ));
                }
                stack.threads.push(ThreadCounts { thread, counts });
            }
        }
        Ok(())
    }

    /// A header counts line: a thread's summary (`t<uid>`, with its name if any), or the `t*`
    /// total, once and before the threads.
    fn header_counts(
        &mut self,
        no: usize,
        raw: &[u8],
        thread: Option<u64>,
        counts: Counts,
        name: Option<String>,
    ) -> Result<(), Error> {
        if let Some(thread) = thread {
            self.profile.threads.push(ThreadSummary {
                thread,
                counts,
                name,
            });
        } else if name.is_some() {
            return Err(malformed(no, raw, "nothing after `]` on a `t*` line"));
        } else if self.header_total || !self.profile.threads.is_empty() {
            return Err(malformed(
                no,
                raw,
                "a `@ 0x…` stack line before these counts (a `t*` line here belongs to no \
                 stack)",
            ));
        } else {
            self.header_total = true;
        }
        Ok(())
    }

    /// The input has ended. The last stack is complete if it has its figures; if not, the dump
    /// was cut and the stack is dropped.
    fn finish(mut self) -> (BodyEnd, Option<Error>) {
        if self.end.awaiting_counts.is_none() {
            if let Some(stack) = self.current.take() {
                self.sink.complete(self.profile, stack);
            }
        }
        (self.end, self.sink.invalid)
    }
}

/// Adds a `t*` line's figures to `stack`, keeping the variances of a `# var` line if it had one.
fn add_counts(stack: &mut Stack, counts: &Counts, has_variance: bool) {
    let before = stack.counts;
    stack.counts.add(counts);
    if has_variance {
        // Variance came from the `# var` line; keep it.
        stack.counts.inuse.objects_variance = before.inuse.objects_variance;
        stack.counts.inuse.bytes_variance = before.inuse.bytes_variance;
        stack.counts.accum.objects_variance = before.accum.objects_variance;
        stack.counts.accum.bytes_variance = before.accum.bytes_variance;
    }
}
