// The Python-facing shim, compiled by the host compiler with pybind11 alone (no torch headers: they took most
// of a one-kernel build's 48 s on the H200). plan() keeps a launch's fixed part once, in prepare(); run() adds the
// per-call part and launches. Tensors cross as integers (data_ptr): prepare() has checked them, and each
// launcher checks what a call can change (M against the kernel's column blocks).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "call.h"
#include "generated/constants.h"

namespace {
std::vector<std::pair<int, okc::Call>> plans;  // (kernel number, fixed part); every prepare() appends its own
}

// The launch table's kernel `kernel` for a layer's (N, K), its operands (addresses) and scalars, up to
// kCallOperands and kCallScalars of each (slots past them are 0), and the shared buffers: returns the plan number
// run() takes, or -1 for too many.
static int64_t plan(int64_t kernel, int64_t n, int64_t k, const pybind11::tuple& operands,
                    const pybind11::tuple& scalars, int64_t ws, int64_t sem) {
    if (operands.size() > okc::kCallOperands || scalars.size() > okc::kCallScalars) return -1;
    okc::Call c{};
    c.N = (int)n, c.K = (int)k;
    for (size_t i = 0; i < operands.size(); ++i)
        c.operand[i] = reinterpret_cast<const void*>(operands[i].cast<int64_t>());
    for (size_t i = 0; i < scalars.size(); ++i) c.scalar[i] = scalars[i].cast<long long>();
    c.ws = reinterpret_cast<float*>(ws);
    c.sem = reinterpret_cast<int*>(sem);
    plans.emplace_back((int)kernel, c);
    return (int64_t)plans.size() - 1;
}

// Launch plan `id` on x [m, K] into out on `stream`: "" once launched, else one line saying why not (runtime.py
// raises it). The line is made of strings only: on the H200 image, formatting a number through std::ostream in
// an extension's refusal ended the process with a segfault.
static std::string run(int64_t id, int64_t x, int64_t out, int64_t m, int64_t stream) {
    if (id < 0 || id >= (int64_t)plans.size()) return "run: no such plan";
    okc::Call c = plans[(size_t)id].second;
    c.x = reinterpret_cast<const void*>(x);
    c.out = reinterpret_cast<void*>(out);
    c.M = (int)m;
    c.stream = reinterpret_cast<void*>(stream);
    const char* refused = okc_launch(plans[(size_t)id].first, c);
    return refused == nullptr ? std::string() : std::string(refused);
}
