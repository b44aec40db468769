"""Timing primitives for the H200: CUDA graphs, events, medians, and an L2 flush that reads (never writes)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

L2_FLUSH_BYTES = 1 << 30  # >= 2x the H200's 60 MiB L2 many times over


class L2Flusher:
    """Evicts L2 by READING a large buffer. A write-flush (zero_) leaves dirty lines whose write-back is billed to
    the next kernel: +4 to +6 us on a 37-67 MB read (docs/method.md)."""

    def __init__(self, nbytes: int = L2_FLUSH_BYTES, device="cuda"):
        self.buffer = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=device)

    def __call__(self) -> None:
        self.buffer.sum()


def capture(fn: Callable[[], object], calls: int = 1) -> torch.cuda.CUDAGraph:
    """A graph of `calls` back-to-back calls of fn, after an eager warm-up on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def time_cold_us(fn: Callable[[], object], flush: L2Flusher, reps: int = 100) -> float:
    """Median microseconds of one graph replay of fn with L2 flushed before each; events around the replay only."""
    graph = capture(fn)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        flush()
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))


def time_warm_us(fn: Callable[[], object], calls: int = 20, reps: int = 20) -> float:
    """Median microseconds per call of `calls` back-to-back calls in one graph, no flush (weights may sit in L2)."""
    graph = capture(fn, calls)
    graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)) / calls


def time_eager_interleaved_us(fns: list, flush: L2Flusher, reps: int = 100) -> list[float]:
    """Median microseconds of one eager call of each of fns, host time included: L2 read-flushed, the GPU idle
    (synchronized), then events around the call, so the GPU waits for the host's launch work between them. The
    samples are interleaved, round r calling the fns in an order rotated by r, so that the host's drift over the
    run falls on each alike: timed in separate blocks, one shape's eager ratio against cuBLAS moved from 1.07 to
    0.81 between two benches of the same kernels (docs/results.md)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for r in range(reps):
        for j in range(len(fns)):
            i = (r + j) % len(fns)
            flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fns[i]()
            end.record()
            end.synchronize()
            times[i].append(start.elapsed_time(end) * 1000.0)
    return [statistics.median(t) for t in times]


def launch_floor_us(flush: L2Flusher, reps: int = 200) -> float:
    """The per-call floor every shape pays: one trivial kernel, timed exactly like a submission call."""
    tiny = torch.zeros(1, device="cuda")
    return time_cold_us(lambda: tiny.add_(1.0), flush, reps)


def settle(flush: L2Flusher, seconds: float = 1.0) -> None:
    """Time the launch floor's kernel cold, over and over, for `seconds`, and discard it all. Right after the GPU
    has idled (prepare, compilation), cold calls run faster for about half a second: the floor and o's kernels
    alike read ~0.3 us lower there than for the rest of a run (docs/method.md: first floor sample 4.48 us,
    then 4.62-4.96 with a median of 4.78; o m = 16 8.96 us, then 9.09-9.41). A floor taken before this settles is
    compared with shapes timed after it and inflates every x floor ratio (o's by ~3 %); in ab and sweep the first
    launches timed would run faster than the rest. Every harness calls this once, before its first cold timing.
    """
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        launch_floor_us(flush, reps=50)


def read_bandwidth(flush: L2Flusher, reps: int = 20) -> float:
    """Bytes per second of one large read (torch.sum over the flush buffer, far larger than L2)."""
    buffer = flush.buffer
    fn = lambda: buffer.sum()  # noqa: E731
    fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    seconds = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) / 1000.0
    return buffer.numel() * buffer.element_size() / seconds
