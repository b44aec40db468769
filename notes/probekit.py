"""What the device probes in notes/sessionN/ share (sessions 10-11 wrote it out in each of lprobe, nprobe, bprobe,
rprobe, aprobe; those stay as they ran): dist/submission.py's CUDA_SRC edited as text and compiled as its own
extension, a prepared state, the L2 flusher with the run's launch floor and read bandwidth, and a correctness
check of any launch against float64 on NaN-poisoned outputs.

A probe's edits read a mode from the environment in the launcher (OKC_MODE, through `MODE_FN`), so one compiled
extension times every variant and a CUDA graph captures the mode that was set when it was captured. Nothing
probe-only lives in kernels_src/.

Run from the repository root with PYTHONPATH=. (the device's python3 has torch; generator/ is imported from
the tree)."""

import os
import time

import torch
from torch.utils.cpp_extension import load_inline

from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth
from generator.judge.verify import poisoned_allocations
from generator.judge.weights import make_weights
from generator.problem import load_problem

# Prepended to the edited CUDA_SRC: the launchers call okc_probe_mode() at every launch.
MODE_FN = """#include <cstdlib>
static int okc_probe_mode() {
    const char* v = getenv("OKC_MODE");
    return v ? atoi(v) : 0;
}
"""


def edited_source(cuda_src, edits):
    """CUDA_SRC with each (old, new) text edit applied exactly once, MODE_FN first; an edit whose `old` text is not
    there exactly once raises, naming it (the source moved on: fix the probe, do not time the unedited kernel)."""
    for old, new in edits:
        count = cuda_src.count(old)
        if count != 1:
            raise SystemExit(f"probe edit matches {count} times, expected once: {old[:100]!r}")
        cuda_src = cuda_src.replace(old, new)
    return MODE_FN + cuda_src


class Probe:
    """dist/submission.py loaded, its CUDA edited and compiled as `name`, prepared on `normal` weights (seed 0)."""

    def __init__(self, name, edits, functions, dist="dist/submission.py"):
        started = time.time()
        self.mod = load_submission(dist)
        self.mod._EXTENSION = load_inline(
            name=name,
            cpp_sources=self.mod.BINDING_SRC,
            cuda_sources=edited_source(self.mod.CUDA_SRC, edits),
            functions=functions,
            extra_cuda_cflags=self.mod.CUDA_FLAGS,
            verbose=False,
        )
        print(f"extension loaded in {time.time() - started:.0f} s", flush=True)
        self.problem = load_problem()
        self.weights = make_weights(self.problem, "normal", 0, "cuda")
        self.state = self.mod.prepare({n: w.clone() for n, w in self.weights.items()})
        self.flush = L2Flusher()
        self.floor_us = launch_floor_us(self.flush)
        self.read_tbps = read_bandwidth(self.flush) / 1e12
        print(
            f"launch floor {self.floor_us:.2f} us, read {self.read_tbps:.2f} TB/s (set-up {time.time() - started:.0f} s)",
            flush=True,
        )

    @staticmethod
    def with_mode(mode, fn):
        """fn wrapped so that OKC_MODE = mode whenever it launches (eagerly or while a graph captures it)."""

        def call():
            os.environ["OKC_MODE"] = str(mode)
            return fn()

        return call

    def check(self, layer, m, x, call, launches=20):
        """(ok, problem) of `launches` calls on NaN-poisoned outputs against float64."""
        lay = self.problem.layers[layer]
        ref, scale = reference(x, self.weights[layer], lay.n_for(m))
        for _ in range(launches):
            try:
                with poisoned_allocations():
                    got = call()
                torch.cuda.synchronize()
            except RuntimeError as refused:
                torch.cuda.synchronize()
                return False, "refused: " + str(refused).splitlines()[0]
            result = compare(got, ref, scale, fp32_out=lay.dual)
            if not result.ok:
                return False, result.problem
        return True, ""
