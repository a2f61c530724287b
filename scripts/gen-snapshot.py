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
    python3 scripts/gen-snapshot.py --events 3000000 --stacks all --stream -o 1gib.pickle
"""
import argparse
import functools
import pickle
import random
import struct
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


INTERPRETER = [
    frame("_PyEval_EvalFrameDefault", "??", 0),
    frame("_PyFunction_Vectorcall", "??", 0),
    frame("PyObject_Call", "??", 0),
]


def with_interpreter(stack):
    """A stack as `stacks="all"` records it: the interpreter's C frames under each Python one."""
    out = []
    for f in stack:
        out.append(f)
        if f["filename"].endswith(".py"):
            out.extend(INTERPRETER)
    return out


@functools.cache
def stacks(layers, interpreter, device):
    """Per layer, the stacks of its forward allocations and of its gradient; shared dicts. Each
    device has its own (as each device's trace is symbolized apart), the same objects on every
    call, so two runs of a simulation share them."""
    forward, backward = [], []
    for k in range(layers):
        layer = user(100 + 10 * (k % 4))
        block = user(300 + k % 3, "block")
        forward.append([
            NATIVE + [frame("linear", TORCH + "nn/functional.py", 2100), user(60 + k % 5)] + CALL + [layer] + CALL + [block, STEP, MAIN],
            NATIVE + [frame("gelu", TORCH + "nn/functional.py", 1840), user(70 + k % 5)] + CALL + [layer] + CALL + [block, STEP, MAIN],
        ])
        backward.append(NATIVE + [frame("backward", TORCH + "autograd/__init__.py", 347), frame("backward", TORCH + "_tensor.py", 626), user(30, "train_step"), MAIN])
    if interpreter:
        forward = [[with_interpreter(s) for s in layer] for layer in forward]
        backward = [with_interpreter(s) for s in backward]
    return forward, backward


class Allocator:
    """A caching allocator's bookkeeping: segments reserved, freed addresses cached by size."""

    def __init__(self, device, capacity, sink, copy_frames):
        self.device, self.capacity, self.sink, self.copy_frames = device, capacity, sink, copy_frames
        self.count = 0
        self.segment_changes = []  # (event, +size or -size)
        self.segments = []  # [address, size, stream]
        self.reserved = 0
        self.cached = {}  # size -> [addresses]
        self.next_address = 0x7F0000000000
        self.cached_bytes = 0

    def event(self, action, addr, size, stream, frames, t, **extra):
        if self.copy_frames:
            frames = list(frames)  # each event's own list of shared frames, as PyTorch writes
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t, "frames": frames}
        e.update(extra)
        if action == "segment_alloc":
            self.segment_changes.append(size)
        elif action == "segment_free":
            self.segment_changes.append(-size)
        self.sink(e)
        self.count += 1

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


def generate(events, seed, devices, oom, sinks=None, interpreter=False, copy_frames=False):
    """Simulates the devices; each device's events go to `sinks[device]` (a list by default)."""
    rng = random.Random(seed)
    traces, all_segments, figures = [], [], []
    per_device = max(1, events // devices)
    for device in range(devices):
        trace = []
        allocator = Allocator(device, 80 << 30, sinks[device] if sinks else trace.append, copy_frames)
        layers = 12
        forward, backward = stacks(layers, interpreter, device)
        t = 1_700_000_000_000_000 + device
        live = {}  # address -> (size, alloc event index)
        intervals = []

        def release(address, t):
            """Frees `address` a few microseconds after `t`; returns the free's time."""
            size, start = live.pop(address)
            t += rng.randint(1, 9)
            allocator.event("free_requested", address, size, 0, [], t)
            allocator.event("free_completed", address, size, 0, [], t)
            intervals.append((start, allocator.count - 1, size))
            allocator.free(address, size)
            return t

        step = 0
        while allocator.count < per_device:
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
                    live[address] = (size, allocator.count - 1)
                    activations.append(address)
            grads = []
            for k in reversed(range(layers)):
                size = 4 * (1 << rng.randint(16, 20))
                t += rng.randint(5, 50)
                address = allocator.alloc(size, 0, backward[k], t)
                allocator.event("alloc", address, size, 0, backward[k], t)
                live[address] = (size, allocator.count - 1)
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
        intervals.append((allocator.count - 1, allocator.count, size))
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
        figures.append((device, len(intervals), live_peak(intervals), allocator.reserved, reserved_peak(allocator.segment_changes, allocator.reserved)))
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


def reserved_peak(segment_changes, at_dump):
    """The most bytes reserved, walking the segment events back from the dump's total."""
    reserved = peak = at_dump - sum(segment_changes)
    for change in segment_changes:
        reserved += change
        peak = max(peak, reserved)
    return peak


class StreamWriter:
    """Writes a pickle as Python's protocol 4 pickler does (no frames), a trace event at a time.

    What `pickle.dump` needs the whole snapshot in memory for, this writes as the simulation
    runs: each event is written and forgotten (its memo entries too, so Python's memo indices
    are kept but not its objects), with the lists batched in 1000s as Python batches them.
    Shared objects (frame dicts, strings) are memoized once and fetched after.
    """

    def __init__(self, out):
        self.out, self.memo, self.keep, self.next = out, {}, [], 0

    def put(self, obj, forget=False):
        """MEMOIZE: `obj` gets the next index; kept alive (so its id stays its own) unless it
        is to be forgotten once written."""
        self.memo[id(obj)] = self.next
        self.next += 1
        if not forget:
            self.keep.append(obj)
        self.out.write(b"\x94")

    def get(self, obj):
        i = self.memo[id(obj)]
        self.out.write(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))

    def save(self, obj, forget=False):
        w = self.out.write
        if obj is None:
            w(b"N")
        elif obj is True or obj is False:
            w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, int):
            if 0 <= obj < 256:
                w(b"K" + bytes([obj]))
            elif 0 <= obj < 65536:
                w(b"M" + struct.pack("<H", obj))
            elif -(1 << 31) <= obj < (1 << 31):
                w(b"J" + struct.pack("<i", obj))
            else:
                raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
                w(b"\x8a" + bytes([len(raw)]) + raw)
        elif id(obj) in self.memo:
            self.get(obj)
        elif isinstance(obj, str):
            raw = obj.encode()
            w((b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))) + raw)
            self.put(obj)
        elif isinstance(obj, tuple):
            for x in obj:
                self.save(x)
            w(b"\x86" if len(obj) == 2 else b"")
            assert len(obj) == 2, "only pairs"
            self.put(obj)
        elif isinstance(obj, dict):
            w(b"}")
            self.put(obj, forget)
            # An event's own list (its frames) is forgotten with it; what it shares is not.
            self.batches(list(obj.items()), b"s", b"u",
                         lambda kv: (self.save(kv[0]), self.save(kv[1], forget and isinstance(kv[1], list))))
        elif isinstance(obj, list):
            w(b"]")
            self.put(obj, forget)
            self.batches(obj, b"a", b"e", self.save)
        else:
            raise TypeError(type(obj))
        if forget and isinstance(obj, (dict, list)):
            del self.memo[id(obj)]

    def batches(self, items, one, many, save):
        for k in range(0, len(items), 1000):
            batch = items[k:k + 1000]
            if len(batch) > 1:
                self.out.write(b"(")
            for x in batch:
                save(x)
            self.out.write(one if len(batch) == 1 else many)


class StreamedList:
    """A list written as its items come (`add`), batched as Python batches a list's items."""

    def __init__(self, writer):
        self.writer, self.batch, self.n = writer, [], 0
        writer.out.write(b"]")
        writer.put(self, forget=True)

    def add(self, event):
        self.batch.append(event)
        if len(self.batch) == 1000:
            self.flush()

    def flush(self):
        w = self.writer
        if len(self.batch) > 1:
            w.out.write(b"(")
        for e in self.batch:
            w.save(e, forget=True)
        if self.batch:
            w.out.write(b"a" if len(self.batch) == 1 else b"e")
        self.n += len(self.batch)
        self.batch = []


class DeviceLists:
    """The `device_traces` lists, each written whole before the next starts, as Python does."""

    def __init__(self, writer):
        self.writer, self.device, self.list = writer, None, None

    def add(self, device, event):
        if device != self.device:
            self.close()
            self.device, self.list = device, StreamedList(self.writer)
        self.list.add(event)

    def close(self):
        if self.list:
            self.list.flush()


def write_streamed(path, a):
    """The snapshot of `a`, written as the simulation runs. The simulation runs twice: the
    segments at the dump come first in the file and need the whole run."""
    interpreter = a.stacks == "all"
    ignore = [lambda e: None] * a.devices
    snapshot, figures = generate(a.events, a.seed, a.devices, not a.no_oom, ignore, interpreter, True)
    with open(path, "wb", buffering=1 << 20) as f:
        w = StreamWriter(f)
        f.write(b"\x80\x04}")
        w.put(snapshot)
        f.write(b"(")
        w.save("segments")
        w.save(snapshot["segments"])
        w.save("device_traces")
        f.write(b"]")
        w.put(snapshot["device_traces"])
        if a.devices > 1:
            f.write(b"(")
        lists = DeviceLists(w)
        sinks = [lambda e, d=d: lists.add(d, e) for d in range(a.devices)]
        generate(a.events, a.seed, a.devices, not a.no_oom, sinks, interpreter, True)
        lists.close()
        f.write(b"a" if a.devices == 1 else b"e")
        for key in ("allocator_settings", "external_annotations"):
            w.save(key)
            w.save(snapshot[key])
        f.write(b"u.")
    return figures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--protocol", type=int, default=pickle.DEFAULT_PROTOCOL, choices=[2, 3, 4, 5])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--no-oom", action="store_true")
    p.add_argument("--stacks", choices=["python", "all"], default="python",
                   help="all: with the interpreter's C frames, as `_record_memory_history(stacks=\"all\")` records")
    p.add_argument("--stream", action="store_true",
                   help="write protocol 4 as the simulation runs, each event with its own frames list (for files of gigabytes)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    if a.stream:
        figures = write_streamed(a.output, a)
    else:
        snapshot, figures = generate(a.events, a.seed, a.devices, not a.no_oom, interpreter=a.stacks == "all")
        with open(a.output, "wb") as f:
            pickle.dump(snapshot, f, protocol=a.protocol)
    for device, allocations, peak, reserved, reserved_most in figures:
        print(f"cuda:{device} allocations={allocations} live_peak={peak} reserved={reserved} reserved_peak={reserved_most}")


if __name__ == "__main__":
    sys.exit(main())
