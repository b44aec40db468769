# writes wgmma_rs.cuh: wgmma m64nNk16 with A from registers, N = 8, 16, 32, 64
out = ["#pragma once", "namespace zr {", "template <int NB> __device__ __forceinline__ void wgmma_rs(float (&d)[4 * NB], const uint32_t (&a)[4], uint64_t b);"]
for nb in (1, 2, 4, 8):
    n = 8 * nb
    nd = 4 * nb
    dl = ", ".join(f"%{i}" for i in range(nd))
    al = ", ".join(f"%{nd + i}" for i in range(4))
    bidx = nd + 4
    cons_d = ", ".join(f'"+f"(d[{i}])' for i in range(nd))
    out.append(f"template <> __device__ __forceinline__ void wgmma_rs<{nb}>(float (&d)[{nd}], const uint32_t (&a)[4], uint64_t b) {{")
    out.append(f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"')
    out.append(f'        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{dl}}}, {{{al}}}, %{bidx}, p, 1, 1, 0;\\n}}\\n"')
    out.append(f'        : {cons_d}')
    out.append(f'        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));')
    out.append("}")
out.append("}  // namespace zr")
open("wgmma_rs.cuh", "w").write("\n".join(out) + "\n")
