"""Writes torch-trace/cpu_mlp_training.json.gz: a profiler trace of three training steps of a
small MLP on the CPU (Adam, cross-entropy), recorded with `profile_memory=True` and
`with_stack=True` by torch 2.9.1, as `torch.profiler` writes it (run once: the trace holds
times, a process id and file paths of the machine it ran on).

    python -m venv venv && venv/bin/pip install torch==2.9.1
    venv/bin/python torch_trace_cpu.py          # in tests/data
"""
import gzip
import pathlib
import tempfile

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
optimizer = torch.optim.Adam(model.parameters())
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
             with_stack=True) as prof:
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
with tempfile.TemporaryDirectory() as tmp:
    trace = pathlib.Path(tmp) / "trace.json"
    prof.export_chrome_trace(str(trace))
    out = pathlib.Path(__file__).parent / "torch-trace" / "cpu_mlp_training.json.gz"
    out.write_bytes(gzip.compress(trace.read_bytes(), mtime=0))
