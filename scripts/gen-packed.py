#!/usr/bin/env python3
"""Writes minimalloc CSV instances whose optimum is known: a perfect packing cut at random.

Usage: scripts/gen-packed.py BUFFERS SEEDS OUTDIR

Each instance starts from one rectangle, 1 MiB of offsets by 1 MiB of time, and cuts a piece
chosen at random in two, in time or in offsets (each with even odds where both are possible) at
a random multiple of 1 KiB, until it has BUFFERS pieces. Each piece is a buffer: its time span
is its half-open lifetime, its height its size. The pieces tile the rectangle, so at every time
the live bytes sum to 1 MiB: the lower bound is 1 MiB and a layout at it exists (the cuts'
own), the known optimum. What a planner finds above 1 MiB is its gap, with no better bound to
hide behind. The buffers are listed in a random order, with ids 0..BUFFERS-1.

Deterministic: SplitMix64 seeded by the seed and the size, the same files on every Python.
Writes packed-BUFFERS-sSEED.csv for SEED in 0..SEEDS-1.
"""

import os
import sys

SPAN = 1 << 20
GRAIN = 1 << 10
MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def instance(buffers, seed):
    rng = SplitMix64(seed * 1_000_003 + buffers)
    pieces = [(0, SPAN, 0, SPAN)]  # (start, end, low, high)
    while len(pieces) < buffers:
        i = rng.below(len(pieces))
        start, end, low, high = pieces[i]
        can_time, can_bytes = end - start >= 2 * GRAIN, high - low >= 2 * GRAIN
        if not (can_time or can_bytes):
            continue
        in_time = can_time and (not can_bytes or rng.below(2) == 0)
        if in_time:
            cut = start + GRAIN * (1 + rng.below((end - start) // GRAIN - 1))
            pieces[i], piece = (start, cut, low, high), (cut, end, low, high)
        else:
            cut = low + GRAIN * (1 + rng.below((high - low) // GRAIN - 1))
            pieces[i], piece = (start, end, low, cut), (start, end, cut, high)
        pieces.append(piece)
    for i in range(len(pieces) - 1, 0, -1):  # Fisher-Yates
        j = rng.below(i + 1)
        pieces[i], pieces[j] = pieces[j], pieces[i]
    rows = ["id,lower,upper,size"]
    rows += [f"{k},{s},{e},{h - l}" for k, (s, e, l, h) in enumerate(pieces)]
    return "\n".join(rows) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2])
    buffers, seeds, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if buffers < 1 or buffers > (SPAN // GRAIN) ** 2:
        sys.exit(f"BUFFERS must be 1 to {(SPAN // GRAIN) ** 2}")
    os.makedirs(out, exist_ok=True)
    for seed in range(seeds):
        with open(os.path.join(out, f"packed-{buffers}-s{seed}.csv"), "w") as f:
            f.write(instance(buffers, seed))


if __name__ == "__main__":
    main()
