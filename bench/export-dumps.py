#!/usr/bin/env python3
"""Writes the dumps `export` is measured on (bench/RESULTS.md): N symbolized dumps x S stacks, shaped
as the compat bench's fleet (a universe of 20,000 stacks over 3,000 functions, each dump at its own
address base and sample period). Usage: python3 bench/export-dumps.py OUT_DIR N S"""
import os, random, sys
out, n, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
universe = [[random.randrange(3000) for _ in range(6 + random.randrange(10))] for _ in range(20000)]
def name(f): return f"service::module_{f % 37}::Type{f % 101}::method_{f}"
for d in range(n):
    r = random.Random(d + 1)
    period = 1 << (16 + r.randrange(5))
    base = 0x550000000000 + ((d + 1) % 4096) * 0x100000
    start = r.randrange(len(universe))
    names, body = {}, []
    for i in range(s):
        fs = universe[(start + i * 3) % len(universe)]
        frames = [base + f * 0x400 + (k % 4) * 8 + 1 for k, f in enumerate(fs)]
        for k, a in enumerate(frames):
            names.setdefault(a if k == 0 else a - 1, name(fs[k]))
        size = 8 * (1 + r.randrange(4096)); c = 1 + r.randrange(20)
        body.append("@ " + " ".join(f"0x{a:x}" for a in frames) + f"\n  t*: {c}: {c*size} [{c}: {c*size}]\n")
    with open(os.path.join(out, f"fleet-{d:04}.heap"), "w") as f:
        f.write("--- symbol\nbinary=service\n")
        for a in sorted(names): f.write(f"0x{a:016x} {names[a]}\n")
        f.write(f"---\n--- heap\nheap_v2/{period}\n  t*: 0: 0 [0: 0]\n")
        f.writelines(body)
        f.write(f"\nMAPPED_LIBRARIES:\n{base:x}-{base+0x1000000:x} r-xp 00000000 08:01 7 /usr/bin/service\n")
