"""generator/cxx.py on a source of every kind of definition the kernels hold: what the launch table does not reach
is named and dropped, what it reaches (through overloads, specialisations, members, enumerators, a static_assert or
a preprocessor conditional) stays, and the lines after a gap stay where their #line directive says."""

from generator.cxx import unreached, without_unreached

SOURCE = """#line 1 "kernels_src/a.cuh"
#define KEEP_MACRO 1
#define DROP_MACRO 2
namespace okc {
// A ring's barriers.
enum Barrier : int {
    kUsed = 1,    // read by the kernel
    kUnused = 2,  // read by nothing
};
struct alignas(16) Frag {
    int r[4];
    __device__ void used() {}
    // read by nothing
    __device__ void unused() {}
};
template <int N>
__device__ int spec();
template <>
__device__ int spec<1>() { return 1; }
constexpr int kAsserted = 3;
static_assert(kAsserted == 3, "the source's own check");
// Read by nothing: it goes, this comment with it.
__device__ int helper() { return 2; }
#if KEEP_MACRO
template <typename L>
__global__ void kernel(Frag f) { f.used(); (void)spec<1>(); (void)kUsed; }
#endif
}  // namespace okc
"""


def test_what_the_launch_table_does_not_reach_is_named():
    names = [(d.kind, d.name) for d in unreached(SOURCE, {"kernel"})]
    assert names == [
        ("enumerator", "kUnused"),
        ("method", "unused"),
        ("function", "helper"),
        ("macro", "DROP_MACRO"),
    ]


def test_what_is_dropped_leaves_every_other_line_where_its_line_directive_says():
    kept = without_unreached(SOURCE, {"kernel"})
    assert (
        "helper" not in kept
        and "kUnused" not in kept
        and "unused()" not in kept
        and "Read by nothing" not in kept
    )
    original = SOURCE.split("\n")
    number = None
    for line in kept.split("\n"):
        if line.startswith("#line "):
            number = int(line.split()[1])
            continue
        assert line == original[number], (
            number,
            line,
        )  # original[0] is the first #line: line n is original[n]
        number += 1
    assert without_unreached(SOURCE, {"kernel", "helper", "kUnused", "unused", "DROP_MACRO"}) == SOURCE
