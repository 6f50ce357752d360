#!/usr/bin/env python3
"""Writes a fleet of heap_v2 dumps for `jeprof-compat merge` at scale (bench/RESULTS.md).

Shape: a service whose live heap is drawn from 5,000 distinct call stacks (2,000 functions, 3 to 8
frames, leaf first); each dump holds 200 to 500 of them, chosen at random, with 1 to 20 samples of
8 B to 32 KiB each, at its own sample period (2^16 to 2^20). Four builds lay the functions out at
different offsets: dumps of build 0 carry a symbol section (as jeprof-shim writes them, merged by
function name); builds 1 to 3 are raw, as jemalloc writes them, each process at its own ASLR base
(merged by module + offset through their memory maps). Deterministic for a given N.

Usage: python3 bench/fleet-dumps.py OUT_DIR N   (writes OUT_DIR/dump-000000.heap ...)"""
import os, random, sys

FUNCTIONS, UNIVERSE, BUILDS = 2000, 5000, 4


def universe():
    rng = random.Random(7)
    return [[rng.randrange(FUNCTIONS) for _ in range(rng.randint(3, 8))] for _ in range(UNIVERSE)]


def offset(build, function, depth):
    # Each build its own layout; call sites a few bytes into a function for callers.
    return 0x1000 + ((function * 7919 + build * 104729) % 65536) * 0x40 + (0 if depth == 0 else 5 + depth % 4)


def write(path, seed, stacks_of):
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
        f.writelines(lines)
        f.write(f"\nMAPPED_LIBRARIES:\n{base:x}-{base + 0x500000:x} r-xp 00000000 08:01 4242 /opt/service/bin/service\n")


if len(sys.argv) != 3 or not os.path.isdir(sys.argv[1]):
    sys.exit("usage: fleet-dumps.py OUT_DIR N (an existing directory, a number of dumps)")
stacks_of = universe()
for i in range(int(sys.argv[2])):
    write(os.path.join(sys.argv[1], f"dump-{i:06d}.heap"), i, stacks_of)
