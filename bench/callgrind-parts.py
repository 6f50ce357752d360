#!/usr/bin/env python3
"""The sampled path's cost per sample, by part, from callgrind output files of `churn-shim`.

    python3 bench/callgrind-parts.py callgrind.out.<pid> ...

Reads the call records (`calls=` lines and the inclusive cost after them) that `alloc_sampled`
and `free_sampled` make, and prints per sample (per call of `alloc_sampled`; in builds where it
is inlined into its callers, per call of `allocate_and_record`, with every `capture_uninit`):

- capture: `capture_uninit`, less the thread's one-time stack-bounds query (`ask_this_thread`)
  and the rule cache's creation (`take_cache_elsewhere`, when the pool has no cache to lend);
- interning: `ThreadTotals::charge` (hashes the stack, interns it);
- recording: the rest of `alloc_sampled` (live-sample table, estimates, triggers, peak tracker);
- arena: `mallocx` and `nallocx` into the sampled arena (gross: plain jemalloc would allocate too);
- free: `free_sampled`, inclusive (its `sdallocx` too, gross as the arena's);
- all: everything above;
- own: all less the arena and the free's `sdallocx`: the profiler's own instructions;
- once: one-time costs (the sampled arena's creation, the thread's stack bounds, the rule cache's
  creation) spread over this run's samples, left out of every other column;
- first: what first sightings cost, inside own: the rule cache's misses (`MissState::miss`, with
  its loader check) and the shared stack table's lookups (`stacks::intern`, called for stacks new
  to the thread's cache: new stacks, and the rare eviction); own less first is the steady state;
- callers: the self cost of the slow paths that call the sampled path (`alloc_slow`,
  `realloc_slow`): where builds that inline `alloc_sampled` run its guard and capture buffer;
- snapshots (peak tracker) and rule-cache misses (`.eh_frame` unwinder), as counts.

`callgrind_annotate --inclusive=yes --tree=calling` shows the same figures one call site at a time.
"""
import collections
import re
import sys

ALLOC = "jeprof_shim::profiler::sampled_path::alloc_sampled"
RECORD = "jeprof_shim::profiler::sampled_path::allocate_and_record"
CAPTURE = "jeprof_shim::parts::capture::capture_uninit"
FREE = "jeprof_shim::profiler::sampled_path::free_sampled"
THREAD = "jeprof_shim::parts::capture::eh_frame_unwind::walk::ask_this_thread"
CACHE_NEW = "jeprof_shim::parts::capture::eh_frame_unwind::cache::take_cache_elsewhere"
MISS = "jeprof_shim::parts::capture::eh_frame_unwind::cache::MissState::miss"
INTERN = "jeprof_shim::parts::stacks::intern"


CALLERS = r"::(alloc_slow|realloc_slow)$"


def load(path):
    """The total; calls and inclusive cost per (caller, callee) and per callee; the self cost of
    every function."""
    names, calls, incl, own = {}, collections.Counter(), collections.Counter(), collections.Counter()
    total, caller, callee, pending = None, None, None, None

    def name(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), spec)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                caller = name(line[3:])
            elif line.startswith("cfn="):
                callee = name(line[4:])
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif pending is not None:
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                for key in ((caller, callee), callee):
                    calls[key] += pending
                    incl[key] += cost
                pending = None
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
            elif line[:1] in "0123456789+-*" and caller:
                fields = line.split()
                own[caller] += int(fields[1]) if len(fields) > 1 else 0
    return total, calls, incl, own


def from_caller(calls, incl, caller, pattern):
    keys = [k for k in incl if isinstance(k, tuple) and k[0] == caller and re.search(pattern, k[1] or "")]
    return sum(calls[k] for k in keys), sum(incl[k] for k in keys)


def sampled(calls, incl):
    """The sampled path's figures over a whole run (instructions, not per sample), from `load`'s
    calls and inclusive costs: samples, capture, interning, recording, arena, free, every ("all"),
    own, once, first, snapshots and misses, as the module's doc defines them; None without a
    sample."""
    # Builds that inline `alloc_sampled` into its callers (so that the capture starts in the
    # marker's frame) call `capture_uninit` from there and the rest from `allocate_and_record`.
    inlined = calls[ALLOC] == 0
    alloc = RECORD if inlined else ALLOC
    n = calls[alloc]
    if n == 0:
        return None
    capture_once = incl[THREAD] + incl[CACHE_NEW]
    if inlined:
        capture = sum(incl[k] for k in incl if isinstance(k, str) and k.endswith(CAPTURE)) - capture_once
    else:
        capture = from_caller(calls, incl, ALLOC, r"capture_uninit$")[1] - capture_once
    interning = from_caller(calls, incl, alloc, r"ThreadTotals::charge$")[1]
    arena = from_caller(calls, incl, alloc, r"^_rjem_(mallocx|nallocx)$")[1]
    once = from_caller(calls, incl, alloc, r"sampled_arena::(create|create_tcache)$")[1] + capture_once
    freed_sd = from_caller(calls, incl, FREE, r"^_rjem_sdallocx$")[1]
    recorded = incl[alloc] + (capture + capture_once if inlined else 0)
    free = incl[FREE]
    every = recorded - once + free
    return {
        "samples": n, "capture": capture, "interning": interning,
        "recording": recorded - capture - interning - arena - once, "arena": arena, "free": free,
        "every": every, "own": every - arena - freed_sd, "once": once,
        "first": incl[MISS] + incl[INTERN],
        "snapshots": from_caller(calls, incl, alloc, r"peak::on_new_high$")[0], "misses": calls[MISS],
    }


def main(paths):
    print("file\ttotal\tsamples\tcapture\tinterning\trecording\tarena\tfree\tall\town\tonce\tfirst\tcallers\tsnapshots\tmisses")
    for path in paths:
        total, calls, incl, own = load(path)
        callers = sum(c for fn, c in own.items() if re.search(CALLERS, fn))
        f = sampled(calls, incl)
        if f is None or total is None:
            print(f"{path}\t{total or 0:,}\t0")
            continue
        n = f["samples"]
        keys = ("capture", "interning", "recording", "arena", "free", "every", "own", "once", "first")
        per = [round(f[k] / n) for k in keys] + [round(callers / n)]
        print("\t".join([path, f"{total:,}", str(n)] + [f"{x:,}" for x in per]
                        + [str(f["snapshots"]), str(f["misses"])]))


if __name__ == "__main__":
    main(sys.argv[1:])
