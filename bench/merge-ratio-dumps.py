#!/usr/bin/env python3
"""Writes the dumps of issue 38's merge ratio (bench/RESULTS.md): N symbolized heap_v2 dumps of M
stacks each, the shape of bench/benches/compat.rs's fleet (stacks of 6 to 15 frames over 3,000
functions named as the compat bench names them, 1 to 20 samples of 8 B to 32 KiB, each dump at its
own address base and sample period 2^16 to 2^20) but with every stack drawn afresh, so that the
merged dump holds N x M distinct stacks. Deterministic.

Usage: python3 bench/merge-ratio-dumps.py OUT_DIR N M   (40 2000 for the issue's shape)"""
import random, sys, os
out, dumps, stacks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out, exist_ok=True)
rng = random.Random(1)
for d in range(dumps):
    period = 1 << rng.randint(16, 20)
    base = 0x550000000000 + d * 0x100000
    names, recs = {}, []
    for i in range(stacks):
        funcs = [rng.randrange(3000) for _ in range(6 + rng.randrange(10))]
        frames = [base + f * 0x400 + (k % 4) * 8 + 1 for k, f in enumerate(funcs)]
        for k, a in enumerate(frames):
            names[a if k == 0 else a - 1] = "service::module_%d::Type%d::method_%d" % (funcs[k] % 37, funcs[k] % 101, funcs[k])
        size = 8 * (1 + rng.randrange(4096)); n = 1 + rng.randrange(20)
        recs.append((frames, n, n * size))
    with open("%s/fleet-%04d.heap" % (out, d), "w") as f:
        f.write("--- symbol\nbinary=service\n")
        for a in sorted(names): f.write("0x%016x %s\n" % (a, names[a]))
        f.write("---\n--- heap\n")
        tn = sum(r[1] for r in recs); ts = sum(r[2] for r in recs)
        f.write("heap_v2/%d\n  t*: %d: %d [%d: %d]\n" % (period, tn, ts, tn, ts))
        for frames, n, s in recs:
            f.write("@ " + " ".join("0x%x" % a for a in frames) + "\n")
            f.write("  t*: %d: %d [%d: %d]\n" % (n, s, n, s))
        f.write("\nMAPPED_LIBRARIES:\n")
