#!/usr/bin/env python3
"""Writes a minimalloc CSV of N buffers for the scale benches (seeded: the same file each time).

Each buffer is live 1 to 199 time units from a start drawn uniformly over 2N units, and takes
64 B to 4 KiB (a multiple of 64), so about a hundred are live at once at any N.

    python3 scripts/gen-csv.py 1000000 m1.csv
"""
import random
import sys

rows, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
with open(out, "w") as f:
    f.write("id,lower,upper,size\n")
    for i in range(rows):
        start = rng.randrange(0, 2 * rows)
        f.write(f"{i},{start},{start + rng.randrange(1, 200)},{rng.randrange(1, 64) * 64}\n")
