#!/usr/bin/env python3
"""Writes a realistic PyTorch CUDA memory snapshot of about N trace events, for tests and benches.

The snapshot has the shape `torch.cuda.memory._dump_snapshot()` writes: a dict with `segments`
(each with `device`, `address`, `total_size`, `stream`, `blocks`) and `device_traces` (one list
of events per device: `alloc`, `free_requested`, `free_completed`, `segment_alloc`,
`segment_free`, `oom`, each with `addr`, `size`, `stream`, `time_us`, `frames`). Frames are
shared dicts, as PyTorch shares them, so the pickle's memo carries them as it does in real files.

What it simulates: training steps of an L-layer model. Each step allocates activations layer by
layer (the forward), frees them in reverse while allocating gradients (the backward), and frees
the gradients after the optimizer; some allocations are on a side stream. A caching allocator
reserves segments (2 MiB for small blocks, at least 20 MiB for large ones) when what is cached
cannot take an allocation, reuses freed addresses of the same size, and at one step releases
its cache (segment_free), and again before the dump. Stacks run from native frames (`??`, `.cpp`) through PyTorch's Python
frames to the user's model code. One allocation past the device's memory is an `oom` event.

It prints its own figures, computed here without memplan: the allocations, the live peak (the
most bytes live at once over half-open [alloc, free_completed) event intervals), the reserved
bytes at the dump and at most.

    python3 scripts/gen-snapshot.py --events 20000 --protocol 4 -o snapshot.pickle
"""
import argparse
import pickle
import random
import sys

MIB = 1 << 20


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


NATIVE = [
    frame("torch::unwind::unwind()", "??", 0),
    frame("torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0),
    frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "CUDACachingAllocator.cpp", 1142),
    frame("at::native::empty_cuda", "EmptyTensor.cpp", 54),
]
TORCH = "/usr/lib/python3.12/site-packages/torch/"
CALL = [
    frame("_call_impl", TORCH + "nn/modules/module.py", 1750),
    frame("_wrapped_call_impl", TORCH + "nn/modules/module.py", 1739),
]


def user(line, name="forward"):
    return frame(name, "/home/me/project/model.py", line)


MAIN = frame("<module>", "/home/me/project/train.py", 42)
STEP = frame("train_step", "/home/me/project/train.py", 27)


def stacks(layers):
    """Per layer, the stacks of its forward allocations and of its gradient; shared dicts."""
    forward, backward = [], []
    for k in range(layers):
        layer = user(100 + 10 * (k % 4))
        block = user(300 + k % 3, "block")
        forward.append([
            NATIVE + [frame("linear", TORCH + "nn/functional.py", 2100), user(60 + k % 5)] + CALL + [layer] + CALL + [block, STEP, MAIN],
            NATIVE + [frame("gelu", TORCH + "nn/functional.py", 1840), user(70 + k % 5)] + CALL + [layer] + CALL + [block, STEP, MAIN],
        ])
        backward.append(NATIVE + [frame("backward", TORCH + "autograd/__init__.py", 347), frame("backward", TORCH + "_tensor.py", 626), user(30, "train_step"), MAIN])
    return forward, backward


class Allocator:
    """A caching allocator's bookkeeping: segments reserved, freed addresses cached by size."""

    def __init__(self, device, capacity, trace):
        self.device, self.capacity, self.trace = device, capacity, trace
        self.segments = []  # [address, size, stream]
        self.reserved = 0
        self.cached = {}  # size -> [addresses]
        self.next_address = 0x7F0000000000
        self.cached_bytes = 0

    def event(self, action, addr, size, stream, frames, t, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t, "frames": frames}
        e.update(extra)
        self.trace.append(e)

    def alloc(self, size, stream, frames, t):
        free = self.cached.get(size)
        if free:
            self.cached_bytes -= size
            return free.pop()
        segment = max(size, 2 * MIB if size <= MIB else 20 * MIB)
        segment = (segment + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
        address = self.next_address
        self.next_address += segment
        self.segments.append([address, segment, stream])
        self.reserved += segment
        self.event("segment_alloc", address, segment, stream, frames, t)
        # The rest of a new segment is cached for blocks of the same size.
        for extra in range(address + size, address + segment - size + 1, size):
            self.cached.setdefault(size, []).append(extra)
            self.cached_bytes += size
        return address

    def free(self, address, size):
        self.cached.setdefault(size, []).append(address)
        self.cached_bytes += size

    def empty_cache(self, live_addresses, t):
        """Releases every segment that holds no live block."""
        kept = []
        for segment in self.segments:
            start, size, stream = segment
            if any(start <= a < start + size for a in live_addresses):
                kept.append(segment)
            else:
                self.reserved -= size
                self.event("segment_free", start, size, stream, [], t)
                for s, addresses in self.cached.items():
                    inside = [a for a in addresses if start <= a < start + size]
                    self.cached_bytes -= s * len(inside)
                    self.cached[s] = [a for a in addresses if not start <= a < start + size]
        self.segments = kept


def generate(events, seed, devices, oom):
    rng = random.Random(seed)
    traces, all_segments, figures = [], [], []
    per_device = max(1, events // devices)
    for device in range(devices):
        trace = []
        allocator = Allocator(device, capacity=80 << 30, trace=trace)
        layers = 12
        forward, backward = stacks(layers)
        t = 1_700_000_000_000_000 + device
        live = {}  # address -> (size, alloc event index)
        intervals = []

        def release(address, t):
            """Frees `address` a few microseconds after `t`; returns the free's time."""
            size, start = live.pop(address)
            t += rng.randint(1, 9)
            allocator.event("free_requested", address, size, 0, [], t)
            allocator.event("free_completed", address, size, 0, [], t)
            intervals.append((start, len(trace) - 1, size))
            allocator.free(address, size)
            return t

        step = 0
        while len(trace) < per_device:
            step += 1
            batch = rng.choice([4, 8, 8, 16])
            activations = []
            for k in range(layers):
                for which in range(2):
                    size = batch * (1 << rng.randint(18, 22))
                    stream = 7 if rng.random() < 0.05 else 0
                    frames = forward[k][which]
                    t += rng.randint(5, 50)
                    address = allocator.alloc(size, stream, frames, t)
                    allocator.event("alloc", address, size, stream, frames, t)
                    live[address] = (size, len(trace) - 1)
                    activations.append(address)
            grads = []
            for k in reversed(range(layers)):
                size = 4 * (1 << rng.randint(16, 20))
                t += rng.randint(5, 50)
                address = allocator.alloc(size, 0, backward[k], t)
                allocator.event("alloc", address, size, 0, backward[k], t)
                live[address] = (size, len(trace) - 1)
                grads.append(address)
                for _ in range(2):
                    t = release(activations.pop(), t)
            for g in grads:
                t = release(g, t)
            if step == 3:
                allocator.empty_cache(set(live), t)
        # The cache released at the end too: the dump holds less than the trace reserved at most.
        allocator.empty_cache(set(live), t)
        if oom:
            t += 10
            allocator.event("oom", 0, 96 << 30, 0, forward[0][0], t, device_free=7 << 30)
        # Never freed: one buffer kept to the end.
        size = 3 * MIB
        address = allocator.alloc(size, 0, forward[0][0], t)
        allocator.event("alloc", address, size, 0, forward[0][0], t)
        intervals.append((len(trace) - 1, len(trace), size))
        end_blocks = {address: size}
        traces.append(trace)
        for start, size_s, stream in allocator.segments:
            blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": forward[0][0]}
                      for a, s in end_blocks.items() if start <= a < start + size_s]
            all_segments.append({
                "device": device, "address": start, "total_size": size_s, "allocated_size": sum(b["size"] for b in blocks),
                "active_size": sum(b["size"] for b in blocks), "requested_size": sum(b["size"] for b in blocks),
                "stream": stream, "segment_type": "large" if size_s > 2 * MIB else "small",
                "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks,
            })
        figures.append((device, len(intervals), live_peak(intervals), allocator.reserved, reserved_peak(trace, allocator.reserved)))
    snapshot = {"segments": all_segments, "device_traces": traces, "allocator_settings": {}, "external_annotations": []}
    return snapshot, figures


def live_peak(intervals):
    """The most bytes live at once over half-open [start, end) event intervals."""
    changes = []
    for start, end, size in intervals:
        changes.append((start, 1, size))
        changes.append((end, 0, -size))
    live = peak = 0
    for _, _, delta in sorted(changes):
        live += delta
        peak = max(peak, live)
    return peak


def reserved_peak(trace, at_dump):
    """The most bytes reserved, walking the segment events back from the dump's total."""
    delta = sum(e["size"] if e["action"] == "segment_alloc" else -e["size"] for e in trace if e["action"] in ("segment_alloc", "segment_free"))
    reserved = peak = at_dump - delta
    for e in trace:
        if e["action"] == "segment_alloc":
            reserved += e["size"]
        elif e["action"] == "segment_free":
            reserved -= e["size"]
        peak = max(peak, reserved)
    return peak


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--protocol", type=int, default=pickle.DEFAULT_PROTOCOL, choices=[2, 3, 4, 5])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--no-oom", action="store_true")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    snapshot, figures = generate(a.events, a.seed, a.devices, not a.no_oom)
    with open(a.output, "wb") as f:
        pickle.dump(snapshot, f, protocol=a.protocol)
    for device, allocations, peak, reserved, reserved_most in figures:
        print(f"cuda:{device} allocations={allocations} live_peak={peak} reserved={reserved} reserved_peak={reserved_most}")


if __name__ == "__main__":
    sys.exit(main())
