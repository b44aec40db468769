"""Session 28: what torch's sum (the judge's L2 flush, generator/judge/timing.py L2Flusher) launches: grid, block,
registers and shared memory per CTA, from the profiler's kernel records. The carveout probe asks whether the split
it leaves behind matters."""

import json
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

buf = torch.ones((1 << 30) // 2, dtype=torch.bfloat16, device="cuda")
buf.sum()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    buf.sum()
    torch.cuda.synchronize()
with tempfile.NamedTemporaryFile(suffix=".json") as f:
    prof.export_chrome_trace(f.name)
    events = json.load(open(f.name))["traceEvents"]
for e in events:
    if e.get("cat") == "kernel":
        args = e.get("args", {})
        keep = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %")
        print(e["name"][:120])
        print({k: args[k] for k in keep if k in args})
