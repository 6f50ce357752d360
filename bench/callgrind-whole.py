#!/usr/bin/env python3
"""What the shim adds to a whole process, and where: the table of issue 38, item 1.

    python3 bench/callgrind-whole.py DIR

DIR holds callgrind files of one workload named MODE-RUN.out, as `bench/service-callgrind.sh`
leaves them: `plain` (tikv-jemallocator, jemalloc's profiler compiled in but off), `shim`
(`Profiled<Jemalloc>`, R = 512 KiB), `jemalloc-prof` (jemalloc's profiler at the same R) and `off`
(the shim with sampling off). Prints two tables (Markdown):

1. **Whole process.** Each mode's runs, the mean over plain's mean, and the **share**: the shim's
   addition over jemalloc's profiler's, (shim − plain) / (jemalloc-prof − plain), with the range
   that pairs the extremes of the runs.
2. **By part**, for each shim run against plain's first run; instructions, and per call or per
   sample where that is the unit:
   - fast path: the self cost of `__rust_alloc`, `__rust_alloc_zeroed`, `__rust_dealloc` and
     `__rust_realloc`, shim's less plain's (the countdown and the range check inlined there);
   - expiries: the slow paths (`alloc_slow`, `realloc_slow`) less what they call in jemalloc
     (`_rjem_*`: the allocation plain makes too), less the sampled path and less the copies: the
     countdown's redraw when it expires without a sample;
   - copies: the whole process's `memcpy` and `memmove`, shim's less plain's: a sampled block
     reallocated is moved out of the sampled arena (a new block and a copy) where jemalloc would
     have copied some blocks too and grown others in place, so only the net is the shim's;
   - samples: the profiler's own instructions per sample, steady state (`callgrind-parts.py`'s
     own less first), times the samples;
   - first sightings: the rule cache's misses and the shared stack table's lookups;
   - one-time: the sampled arena's creation, each thread's stack bounds, the rule cache's
     creation (`callgrind-parts.py`'s once), and the shim's start before `main`
     (`start_before_main`, inclusive);
   - the rest: the addition less all of the above: the sampled arena's own allocations and frees
     (gross of what plain's tcache would have spent on the same blocks), jemalloc's time-based
     purging and tcache garbage collection firing at other points, and the loader's work on a
     larger binary. Its three largest differences by function (self cost, the shim's own code
     left out) are printed under it: where to look first.
"""
import collections
import glob
import importlib.util
import os
import re
import statistics
import sys

spec = importlib.util.spec_from_file_location(
    "parts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "callgrind-parts.py"))
parts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parts)

FAST = ("__rust_alloc", "__rust_alloc_zeroed", "__rust_dealloc", "__rust_realloc")
SLOW = re.compile(r"jeprof_shim::Profiled<A>::(alloc_slow|realloc_slow)$")
START = "jeprof_shim::startup::start_before_main"
COPY = re.compile(r"mem(cpy|move)")
SHIM = ("jeprof_shim::", "gimli::")


def fast_name(name):
    """`__rust_alloc` whatever the mangling's namespace (`__rustc::__rust_alloc` since 1.89)."""
    short = (name or "").rsplit("::", 1)[-1]
    return short if short in FAST else None


def profile(path):
    """Total; self cost and calls of the fast-path functions; the slow paths' own cost; the
    start's inclusive cost; and callgrind-parts.py's figures."""
    total, calls, incl, own = parts.load(path)
    selfc, fast_calls = collections.Counter(), collections.Counter()
    for fn, cost in own.items():
        selfc[fast_name(fn) or fn] += cost
    for key, n in calls.items():
        if isinstance(key, str) and fast_name(key):
            fast_calls[fast_name(key)] += n
    expiries, moved = 0, 0
    for key, cost in incl.items():
        if isinstance(key, tuple) and key[0] and SLOW.search(key[0]):
            callee = key[1] or ""
            if callee.startswith("_rjem_") or callee.endswith((parts.RECORD, parts.FREE, parts.CAPTURE)):
                expiries -= cost
            elif COPY.search(callee):
                moved += cost
    expiries += sum(c for k, c in incl.items() if isinstance(k, str) and SLOW.search(k)) - moved
    return {
        "total": total, "self": selfc, "calls": fast_calls, "expiries": expiries,
        "start": incl[START],
        "parts": parts.sampled(calls, incl) or {"samples": 0, "own": 0, "first": 0, "once": 0},
    }


def m(x):
    return f"{x / 1e6:,.2f} M"


def whole(runs):
    plain = [r["total"] for r in runs.get("plain", [])]
    print("(plain and jemalloc-prof less the shim's start before `main`, which `churn-plain` runs too:"
          " the bench's library links the shim)\n")
    base = statistics.mean(plain)
    print("| mode | runs (M instructions) | mean over plain's mean |")
    print("|---|---|---|")
    for mode in ("plain", "off", "shim", "jemalloc-prof"):
        totals = [r["total"] for r in runs.get(mode, [])]
        if not totals:
            continue
        add = statistics.mean(totals) - base
        print(f"| {mode} | {' · '.join(f'{t / 1e6:,.1f}' for t in totals)} | "
              f"{add / 1e6:+,.2f} M ({100 * add / base:+.3f}%) |")
    shim = [r["total"] - base for r in runs.get("shim", [])]
    prof = [r["total"] - base for r in runs.get("jemalloc-prof", [])]
    if shim and prof:
        share = statistics.mean(shim) / statistics.mean(prof)
        low, high = min(shim) / max(prof), max(shim) / min(prof)
        print(f"\n**Share** of jemalloc's profiler's addition: **{100 * share:.1f}%** "
              f"(runs paired at their extremes: {100 * low:.1f}–{100 * high:.1f}%)\n")


def by_part(runs):
    plain = runs["plain"][0]
    print("| part | " + " | ".join(f"shim run {i + 1}" for i in range(len(runs["shim"]))) + " |")
    print("|---|" + "---|" * len(runs["shim"]))
    rows = collections.OrderedDict()
    for r in runs["shim"]:
        p = r["parts"]
        fast = {f: r["self"][f] - plain["self"][f] for f in FAST}
        calls = r["calls"]
        steady = p["own"] - p["first"]
        once = p["once"] + r["start"]
        copies = sum(c - plain["self"][f] for f, c in r["self"].items() if f and COPY.search(f))
        accounted = sum(fast.values()) + r["expiries"] + copies + p["own"] + once
        added = r["total"] - plain["total"]
        for f in FAST:
            if calls[f]:
                rows.setdefault(f"fast path `{f}`", []).append(
                    f"{m(fast[f])} ({fast[f] / calls[f]:.2f} a call, {calls[f]:,} calls)")
        rows.setdefault("expiries (slow paths, no sample)", []).append(m(r["expiries"]))
        rows.setdefault("copies (`memcpy`, `memmove`), net", []).append(m(copies))
        n = max(p["samples"], 1)
        rows.setdefault("samples, steady state", []).append(
            f"{m(steady)} ({steady / n:,.0f} a sample, {p['samples']:,} samples)")
        rows.setdefault("first sightings", []).append(f"{m(p['first'])} ({p['first'] / n:,.0f} a sample)")
        rows.setdefault("one-time (arena, stack bounds, rule cache, start)", []).append(m(once))
        rows.setdefault("the rest (the arena's blocks, jemalloc, the loader)", []).append(m(added - accounted))
        rows.setdefault("**added**", []).append(f"**{m(added)}** ({100 * added / plain['total']:+.3f}%)")
        top = sorted(((c - plain["self"][f], f) for f, c in r["self"].items()
                      if f and not fast_name(f) and not COPY.search(f) and not f.startswith(SHIM)),
                     key=lambda x: -abs(x[0]))[:3]
        rows.setdefault("the rest's largest differences", []).append(
            "; ".join(f"`{f[:40]}` {m(d)}" for d, f in top))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(directory):
    runs = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(directory, "*.out"))):
        mode = re.sub(r"-\d+\.out$", "", os.path.basename(path))
        run = profile(path)
        if mode in ("plain", "jemalloc-prof"):
            # `churn-plain` links the shim (the bench's library does), whose constructor runs
            # before `main` in every process; plain jemalloc's program would not run it.
            run["total"] -= run["start"]
        runs[mode].append(run)
    if not runs.get("plain"):
        sys.exit(f"{directory}: no plain-N.out")
    print(f"### {os.path.basename(os.path.normpath(directory))}\n")
    whole(runs)
    if runs.get("shim"):
        by_part(runs)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
