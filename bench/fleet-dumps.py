#!/usr/bin/env python3
"""Writes a fleet of heap_v2 dumps for `jeprof-compat merge` at scale (bench/RESULTS.md).

Shape: a service whose live heap is drawn from 5,000 distinct call stacks (2,000 functions, 3 to 8
frames, leaf first); each dump holds 200 to 500 of them, chosen at random, with 1 to 20 samples of
8 B to 32 KiB each, at its own sample period (2^16 to 2^20). Four builds lay the functions out at
different offsets: dumps of build 0 carry a symbol section (as jeprof-shim writes them, merged by
function name); builds 1 to 3 are raw, as jemalloc writes them, each process at its own ASLR base
(merged by module + offset through their memory maps). Deterministic for a given N.

With PROCESSES, the dumps are that many processes' series, a dump a minute: dump i is process
i % PROCESSES's at minute i // PROCESSES from 2026-12-01T00:00:00Z, labelled (`# label`) with its
pid, time, service `api` and region `eu` or `us` (what `export` puts in the rows' pid, time and
labels columns). Without it, the dumps carry no label (as before).

Usage: python3 bench/fleet-dumps.py OUT_DIR N [PROCESSES]   (writes OUT_DIR/dump-000000.heap ...)"""
import datetime, os, random, sys

FUNCTIONS, UNIVERSE, BUILDS = 2000, 5000, 4


def universe():
    rng = random.Random(7)
    return [[rng.randrange(FUNCTIONS) for _ in range(rng.randint(3, 8))] for _ in range(UNIVERSE)]


def offset(build, function, depth):
    # Each build its own layout; call sites a few bytes into a function for callers.
    return 0x1000 + ((function * 7919 + build * 104729) % 65536) * 0x40 + (0 if depth == 0 else 5 + depth % 4)


def labels(seed, processes):
    """The `# label` lines of dump `seed` in a fleet of `processes` dumping once a minute."""
    if not processes:
        return ""
    process, minute = seed % processes, seed // processes
    moment = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(minutes=minute)
    return (f"# label service api\n# label region {'eu' if process % 2 == 0 else 'us'}\n"
            f"# label pid {10000 + process}\n# label time {moment.strftime('%Y-%m-%dT%H:%M:%SZ')}\n")


def write(path, seed, stacks_of, processes=0):
    rng = random.Random(seed)
    build = seed % BUILDS
    period = 1 << rng.randint(16, 20)
    base = 0x5500_0000_0000 + rng.randrange(1 << 20) * 0x1000
    chosen = rng.sample(range(UNIVERSE), rng.randint(200, 500))
    lines, names = [], {}
    total_n = total_b = 0
    for s in chosen:
        frames = [base + offset(build, f, d) for d, f in enumerate(stacks_of[s])]
        if build == 0:
            for d, (a, f) in enumerate(zip(frames, stacks_of[s])):
                names[a if d == 0 else a - 1] = f"service::module_{f % 37}::Type{f % 101}::method_{f}"
        n = rng.randint(1, 20)
        b = n * 8 * rng.randint(1, 4096)
        total_n += n
        total_b += b
        lines.append("@ " + " ".join(f"0x{a:x}" for a in frames) + f"\n  t*: {n}: {b} [{n}: {b}]\n")
    with open(path, "w") as f:
        if build == 0:
            f.write("--- symbol\nbinary=service\n")
            f.writelines(f"0x{a:016x} {name}\n" for a, name in sorted(names.items()))
            f.write("---\n--- heap\n")
        f.write(f"heap_v2/{period}\n  t*: {total_n}: {total_b} [{total_n}: {total_b}]\n")
        f.write(labels(seed, processes))
        f.writelines(lines)
        f.write(f"\nMAPPED_LIBRARIES:\n{base:x}-{base + 0x500000:x} r-xp 00000000 08:01 4242 /opt/service/bin/service\n")


if len(sys.argv) not in (3, 4) or not os.path.isdir(sys.argv[1]):
    sys.exit("usage: fleet-dumps.py OUT_DIR N [PROCESSES] (an existing directory, a number of dumps, of processes)")
stacks_of = universe()
processes = int(sys.argv[3]) if len(sys.argv) == 4 else 0
for i in range(int(sys.argv[2])):
    write(os.path.join(sys.argv[1], f"dump-{i:06d}.heap"), i, stacks_of, processes)
