// Written by `python -m generator build` for the sources to include: do not edit.
#pragma once
// Generated from the engines (generator/sources.py, cuda_prelude): the constants and mode codes the
// CUDA side shares with Python, each written once, in Python.
#include <cstddef>
namespace okc {
// engine.py REDUCTION: the split-K reductions (each engine's reduce field names some of them)
enum class Reduce : int { kNone = 0, kClusterGather = 1, kClusterScatter = 2, kAtomic = 3, kSemaphore = 4, kCluster = 5, kAtomicOut = 6 };
// engine.py SMEM_LIMIT: dynamic shared memory a CUDA kernel's block may take
constexpr size_t kSmemOptInLimit = 231424;
// engine.py SEMAPHORE_GROUPS: int offset of the tickets in the semaphore array
constexpr int kTicketAt = 4096;
// engine.py TICKET_GROUPS: row groups an output-atomic launch may have
constexpr int kTicketGroups = 256;
// engine.py TICKET_SPLITS: S = 2, 4, 8, 16, 32
constexpr int kTicketSplits = 5;
// engine.py SEMAPHORES: the int32 counters runtime.py allocates
constexpr int kSemaphoreInts = 6656;
// engine.py CALL_OPERANDS: operand pointers a call holds
constexpr int kCallOperands = 4;
// engine.py CALL_SCALARS: 64-bit scalars a call holds
constexpr int kCallScalars = 3;
// mma_gemv.py MMA_PIPELINE: the software-pipelining styles (compressed_gemv: the first two)
enum class MmaPipeline : int { kBatch = 0, kDouble = 1, kBatchL2 = 2, kDoubleL2 = 3, kDoubleW = 4, kDoubleWL2 = 5 };
// compressed_ring.py STAGED_ENTRIES: overflow entries a CTA stages
constexpr int kStagedOverflowEntries = 64;
// compress.py HEADER_BYTES: a K group's header
constexpr int kCompressedHeaderBytes = 16;
// tma_gemv.py TILE_ROWS: weight rows per CTA, the wgmma M
constexpr int kTmaTileRows = 64;
// tma_gemv.py TILE_K: K per ring slot, one 128-byte swizzle row of bf16
constexpr int kTmaTileK = 64;
// tma_gemv.py CONSUMERS: threads of one consumer warpgroup
constexpr int kTmaConsumers = 128;
// tma_gemv.py PRODUCER: threads of the producer warp
constexpr int kTmaProducer = 32;
// persistent_gemm.py GEMM_STAGED_BYTES: output bytes a consumer warpgroup stages at a time
constexpr int kGemmStagedBytes = 8192;
// persistent_gemm.py GEMM_MAX_ACCUMULATORS: fp32 accumulators a consumer thread holds
constexpr int kGemmMaxAccumulators = 128;
}  // namespace okc
