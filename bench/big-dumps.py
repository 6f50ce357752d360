#!/usr/bin/env python3
"""Writes the two 1,000,000-stack dumps the memory figures of `report` and `diff` are measured on
(bench/RESULTS.md): OUT/big.heap, raw (two frames a stack, as jemalloc writes them, 55 MB), and
OUT/bigsym.heap, the same stacks with a symbol section naming every leaf address as one of 5,000
functions (79 MB). Usage: python3 bench/big-dumps.py OUT_DIR"""
import os, random, sys

BASE = 0x55D0C0A00000


def stacks(n):
    random.seed(1)
    for i in range(n):
        yield BASE + random.randrange(0, 0x100000), BASE + 0x200000 + i * 16


def write(path, n, symbolized):
    with open(path, "w") as f:
        if symbolized:
            f.write("--- symbol\nbinary=prog\n")
            for a in sorted({a for a, _ in stacks(n)}):
                f.write(f"0x{a:016x} leaf_function_{(a - BASE) * 5000 // 0x100000}\n")
            f.write("---\n--- heap\n")
        f.write(f"heap_v2/524288\n  t*: {n}: {n * 524288} [0: 0]\n")
        for a, b in stacks(n):
            f.write(f"@ 0x{a:x} 0x{b:x}\n  t*: 1: 524288 [0: 0]\n")
        f.write("\nMAPPED_LIBRARIES:\n55d0c0a00000-55d0c1a00000 r-xp 00000000 00:00 0 /usr/bin/prog\n")


if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
    sys.exit("usage: big-dumps.py OUT_DIR (an existing directory)")
write(os.path.join(sys.argv[1], "big.heap"), 1_000_000, False)
write(os.path.join(sys.argv[1], "bigsym.heap"), 1_000_000, True)
