"""Independent figures of an XLA dump (a buffer assignment and its live range).

Written apart from memplan (Python's re only) so the importer is checked against it:

- values: every `value:` line of the buffer assignment, and their sizes summed;
- temp: the values of the `preallocated-temp` allocation, and that allocation's size (XLA's
  temp arena);
- temp_lower_bound: the most bytes of temp values live at once, each live on its closed
  live-range interval `start..=end`, where a value that starts at the position its operand's
  interval ends, over that operand's bytes (XLA's in-place reuse), shares those bytes there;
  each value's size rounded up to the alignment, the largest power of two up to 64 that
  divides every offset of the temp allocations (what XLA's plan shows of its alignment);
- allocations_bytes: the sizes of every allocation but the thread-local ones (what XLA's
  runtime holds for the run).

    python3 xla_figures.py DIR...    # each DIR holds one *-buffer-assignment.txt and its
                                     # *-live-range.txt; prints [[xla.file]] TOML entries
"""
import glob
import re
import sys

ALLOCATION = re.compile(r"^allocation (\d+): size (\d+),(.*):$")
VALUE = re.compile(r"^ value: <\d+ ([^ >{]+)(\{[^}]*\})?[^>]*> \(size=(\d+),offset=(\d+)\)")
RANGE = re.compile(r"^    (\S+?)(\{[^}]*\}):(\d+)-(\d+)$")


def figures(folder):
    [assignment] = glob.glob(f"{folder}/*-buffer-assignment.txt")
    [live_range] = glob.glob(f"{folder}/*-live-range.txt")
    allocations, values = [], []
    for line in open(assignment):
        line = line.rstrip("\n")
        m = ALLOCATION.match(line)
        if m:
            allocations.append((int(m[2]), m[3]))
            continue
        m = VALUE.match(line)
        if m:
            key = m[1] + (m[2] or "{}")
            values.append((key, int(m[3]), int(m[4]), len(allocations) - 1))
    ranges = {}
    for line in open(live_range):
        m = RANGE.match(line.rstrip("\n"))
        if m:
            ranges[m[1] + m[2]] = (int(m[3]), int(m[4]))
    temp_allocations = [i for i, a in enumerate(allocations) if "preallocated-temp" in a[1]]
    temp = [v for v in values if v[3] in temp_allocations]
    alignment = 64
    while any(v[2] % alignment for v in temp):
        alignment //= 2
    temp = [(k, -(-size // alignment) * alignment, offset, a) for k, size, offset, a in temp]
    positions = max(e for _, e in ranges.values()) + 1
    peak = 0
    for p in range(positions):
        live = [v for v in temp if ranges[v[0]][0] <= p <= ranges[v[0]][1]]
        total = sum(v[1] for v in live)
        # In place: b starts at p over the bytes of a, which ends at p; they share.
        for b in live:
            for a in live:
                if (ranges[b[0]][0] == p and ranges[a[0]][1] == p and ranges[a[0]][0] < p
                        and a[3] == b[3] and a[2] < b[2] + b[1] and b[2] < a[2] + a[1]):
                    total -= min(a[1], b[1])
                    break
        peak = max(peak, total)
    return {
        "values": len(values),
        "values_bytes": sum(v[1] for v in values),
        "temp_values": len(temp),
        "temp_bytes": sum(allocations[i][0] for i in temp_allocations),
        "temp_lower_bound": peak,
        "allocations_bytes": sum(a[0] for a in allocations if "thread-local" not in a[1]),
    }


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        f = figures(folder)
        [path] = glob.glob(f"{folder}/*-buffer-assignment.txt")
        print("[[xla.file]]")
        print(f'path = "{path}"')
        for k, v in f.items():
            print(f"{k} = {v}")
        print()
