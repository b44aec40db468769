// The torch-facing shim (compiled by load_inline's host compiler): checks tensors with readable messages, then
// calls the plain-pointer launcher in launch.cu on the stream Python passes (the caller's current stream, which
// is the capture stream inside torch.cuda.graph).
#include <torch/extension.h>

const char* okc_launch_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                            int N, int K, int NW, int S, int U, int NB, int R, int P, int C, bool dual,
                            long long stream);
const char* okc_launch_tma_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                                int N, int K, int S, int NB, int STAGES, int cluster, bool dual, long long stream);
const char* okc_tma_config_error(int NB, int STAGES, bool dual, int S, int cluster);
int okc_ticket_groups();   // row groups a C = 2 gemv launch may have (common.cuh, kTicketGroups)
int okc_semaphore_ints();  // the semaphore array's length that C = 2's tickets and flags need
const char* okc_launch_zgemv(const void* x, const void* w, const void* patches, const void* overflow,
                             const int* overflow_starts, void* out,
                             float* ws, int* sem, int t0, int t1, int t2, int t3, int M, int N, int K, int n_overflow,
                             int NW, int S, int UG, int NB, int R, int P, bool cluster, long long stream);

// Every entry point returns "" once its kernel is launched, else one line saying why not; runtime.py raises that
// line as a RuntimeError.
//
// The line is built without iostreams. On the H200 image, building a refusal that formats a number through
// std::ostream (c10::str, TORCH_CHECK) ended the process with a segfault, while one made of strings only came
// back fine, and the launchers' own messages read through ctypes were intact (notes/session4/segv_probe*).
// Built with std::to_string instead, the same refusal ("gemv: NW must be 1..16, got 0") comes back as its line
// on the H200 (notes/session5/segv_run1.txt).
static std::string text_of(const char* s) { return s == nullptr ? "" : s; }
static std::string text_of(const std::string& s) { return s; }
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
static std::string text_of(T v) {
    return std::to_string(v);  // bool prints as 0 / 1, as the stream did
}
static std::string text_of(at::IntArrayRef sizes) {
    std::string out = "[";
    for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
    return out + "]";
}
template <typename... Parts>
static std::string cat(const Parts&... parts) {
    std::string out;
    ((out += text_of(parts)), ...);
    return out;
}

#define OKC_REQUIRE(cond, ...)                                 \
    do {                                                       \
        if (!(cond)) return cat(__VA_ARGS__);                  \
    } while (0)

static std::string check_tensor(const char* fn, const torch::Tensor& t, const char* name, at::ScalarType dtype) {
    OKC_REQUIRE(t.defined() && t.is_cuda(), fn, ": ", name, " must be a CUDA tensor");
    OKC_REQUIRE(t.scalar_type() == dtype, fn, ": ", name, " must be ", c10::toString(dtype), ", got ",
                c10::toString(t.scalar_type()));
    OKC_REQUIRE(t.is_contiguous(), fn, ": ", name, " must be contiguous");
    OKC_REQUIRE(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, fn, ": ", name, " must be 16-byte aligned");
    return "";
}

// What both GEMVs ask of their operands: x [M, K] bf16 with 1 <= M <= 8 NB, weights holding at least N*K bf16
// (w2 too in dual mode), out [M, N] (fp32 in dual mode), an fp32 workspace and int32 counters.
static std::string check_operands(const char* fn, const torch::Tensor& x, const torch::Tensor& w,
                                  const torch::Tensor& w2, const torch::Tensor& out, const torch::Tensor& ws,
                                  const torch::Tensor& sem, int64_t N, int64_t K, int64_t NB, bool dual) {
    std::string bad;
    if (!(bad = check_tensor(fn, x, "x", at::kBFloat16)).empty()) return bad;
    if (!(bad = check_tensor(fn, w, "w", at::kBFloat16)).empty()) return bad;
    if (dual && !(bad = check_tensor(fn, w2, "w2 (lo weights)", at::kBFloat16)).empty()) return bad;
    if (!(bad = check_tensor(fn, out, "out", dual ? at::kFloat : at::kBFloat16)).empty()) return bad;
    if (!(bad = check_tensor(fn, ws, "ws", at::kFloat)).empty()) return bad;
    if (!(bad = check_tensor(fn, sem, "sem", at::kInt)).empty()) return bad;
    OKC_REQUIRE(x.dim() == 2 && x.size(1) == K, fn, ": x must be [M, ", K, "], got ", x.sizes());
    const int64_t M = x.size(0);
    OKC_REQUIRE(M >= 1 && M <= 8 * NB, fn, ": M=", M, " does not fit NB=", NB, " column blocks of 8 tokens");
    OKC_REQUIRE(w.numel() >= N * K, fn, ": packed w holds ", w.numel(), " weights, fewer than N*K=", N * K);
    OKC_REQUIRE(!dual || w2.numel() >= N * K, fn, ": packed w2 holds fewer than N*K weights");
    OKC_REQUIRE(out.dim() == 2 && out.size(0) == M && out.size(1) == N, fn, ": out must be [", M, ", ", N, "]");
    return "";
}

// out[M, N] = x[M, K] . W[:N]^T with W packed by packing.pack_mma_a (dual: W = hi + lo, both packed).
std::string gemv(torch::Tensor x, torch::Tensor w, torch::Tensor w2, torch::Tensor out, torch::Tensor ws,
                 torch::Tensor sem, int64_t N, int64_t K, int64_t NW, int64_t S, int64_t U, int64_t NB, int64_t R,
                 int64_t C, bool dual, int64_t P, int64_t stream) {
    const std::string bad = check_operands("gemv", x, w, w2, out, ws, sem, N, K, NB, dual);
    if (!bad.empty()) return bad;
    OKC_REQUIRE(N % 16 == 0 && K % 32 == 0, "gemv: need N % 16 == 0 and K % 32 == 0, got N=", N, " K=", K);
    OKC_REQUIRE(R >= 1 && (N / 16) % R == 0, "gemv: R=", R, " must divide the ", N / 16, " row blocks of N=", N);
    OKC_REQUIRE(NW >= 1 && NW <= 16, "gemv: NW must be 1..16, got ", NW);
    OKC_REQUIRE(S >= 1 && (K / 32) % S == 0, "gemv: S=", S, " must divide the ", K / 32, " K blocks");
    OKC_REQUIRE(C >= 0 && C <= 2, "gemv: C must be 0, 1 or 2, got ", C);
    OKC_REQUIRE(C != 1 || (S >= 2 && S <= 16), "gemv: a cluster split needs 2 <= S <= 16, got S=", S);
    OKC_REQUIRE(C != 2 || (dual && S >= 2 && S <= 32 && (S & (S - 1)) == 0 && N / (16 * R) <= okc_ticket_groups()),
                "gemv: C=2 (atomic split) needs the fp32 output of dual mode, S a power of two in 2..32 and at most ",
                okc_ticket_groups(), " row groups");
    OKC_REQUIRE(C != 2 || sem.numel() >= okc_semaphore_ints(), "gemv: C=2 needs ", okc_semaphore_ints(),
                " semaphore ints (tickets and flags), got ", sem.numel());
    OKC_REQUIRE(S == 1 || ws.numel() >= (N / 16) * S * NB * 128, "gemv: workspace too small for S=", S);
    OKC_REQUIRE(S == 1 || sem.numel() >= N / (16 * R), "gemv: need one semaphore per CTA row group (", N / (16 * R),
                ")");
    const char* err = okc_launch_gemv(x.data_ptr(), w.data_ptr(), dual ? w2.data_ptr() : nullptr, out.data_ptr(),
                                      ws.data_ptr<float>(), sem.data_ptr<int>(), (int)x.size(0), (int)N, (int)K,
                                      (int)NW, (int)S, (int)U, (int)NB, (int)R, (int)P, (int)C, dual,
                                      (long long)stream);
    OKC_REQUIRE(err == nullptr, "gemv (NW=", NW, " S=", S, " U=", U, " NB=", NB, " R=", R, " P=", P, " C=", C,
                " dual=", dual, "): ", err);
    return "";
}

// out[M, N] = x[M, K] . W[:N]^T through the bulk-copy + wgmma kernel (tma_gemv.cuh), W packed by
// packing.pack_tma_bulk (dual: the router's hi and lo halves), or by pack_tma_half_bulk for C = 3, 4.
std::string tma_gemv(torch::Tensor x, torch::Tensor w, torch::Tensor w2, torch::Tensor out, torch::Tensor ws,
                     torch::Tensor sem, int64_t N, int64_t K, int64_t S, int64_t NB, int64_t STAGES, int64_t C,
                     bool dual, int64_t stream) {
    const std::string bad = check_operands("tma_gemv", x, w, w2, out, ws, sem, N, K, NB, dual);
    if (!bad.empty()) return bad;
    const char* refused = okc_tma_config_error((int)NB, (int)STAGES, dual, (int)S, (int)C);
    OKC_REQUIRE(refused == nullptr, "tma_gemv (NB=", NB, " STAGES=", STAGES, " C=", C, " dual=", dual, "): ", refused);
    OKC_REQUIRE(N % 64 == 0 && K % 64 == 0, "tma_gemv: need N % 64 == 0 and K % 64 == 0, got N=", N, " K=", K);
    OKC_REQUIRE(C < 3 || K % 128 == 0, "tma_gemv: C=", C, " (half tiles) needs K % 128 == 0, got K=", K);
    OKC_REQUIRE(S >= 1 && S <= K / 64, "tma_gemv: S=", S, " must be 1..", K / 64, " (the 64-wide K tiles)");
    OKC_REQUIRE(S == 1 || ws.numel() >= (N / 64) * S * 64 * 8 * NB, "tma_gemv: workspace too small for S=", S);
    OKC_REQUIRE(S == 1 || sem.numel() >= N / 64, "tma_gemv: need one semaphore per 64-row tile (", N / 64, ")");
    const char* err = okc_launch_tma_gemv(x.data_ptr(), w.data_ptr(), dual ? w2.data_ptr() : nullptr,
                                          out.data_ptr(), ws.data_ptr<float>(), sem.data_ptr<int>(), (int)x.size(0),
                                          (int)N, (int)K, (int)S, (int)NB, (int)STAGES, (int)C, dual,
                                          (long long)stream);
    OKC_REQUIRE(err == nullptr, "tma_gemv (S=", S, " NB=", NB, " STAGES=", STAGES, " C=", C, " dual=", dual, "): ", err);
    return "";
}

// out[M, N] = x[M, K] . W[:N]^T through the compressed GEMV (zgemv.cuh); zs, patches, overflow, overflow_starts and
// the table words t0..t3 are kernels_src/compress.py's output.
std::string zgemv(torch::Tensor x, torch::Tensor zs, torch::Tensor patches, torch::Tensor overflow, torch::Tensor overflow_starts,
                  torch::Tensor out, torch::Tensor ws, torch::Tensor sem, int64_t N, int64_t K, int64_t NW, int64_t S,
                  int64_t UG, int64_t NB, int64_t R, bool cluster, int64_t P, int64_t t0, int64_t t1, int64_t t2,
                  int64_t t3, int64_t stream) {
    std::string bad;
    if (!(bad = check_tensor("zgemv", x, "x", at::kBFloat16)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", zs, "compressed stream", at::kByte)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", patches, "patches", at::kInt)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", overflow, "overflow", at::kInt)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", overflow_starts, "overflow_starts", at::kInt)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", out, "out", at::kBFloat16)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", ws, "ws", at::kFloat)).empty()) return bad;
    if (!(bad = check_tensor("zgemv", sem, "sem", at::kInt)).empty()) return bad;
    OKC_REQUIRE(x.dim() == 2 && x.size(1) == K, "zgemv: x must be [M, ", K, "], got ", x.sizes());
    const int64_t M = x.size(0);
    OKC_REQUIRE(M >= 1 && M <= 8 * NB, "zgemv: M=", M, " does not fit NB=", NB, " column blocks of 8 tokens");
    OKC_REQUIRE(N % 16 == 0 && K % 64 == 0, "zgemv: need N % 16 == 0 and K % 64 == 0, got N=", N, " K=", K);
    OKC_REQUIRE(zs.numel() * 8 >= N * K * 12, "zgemv: the stream holds fewer than N*K 12-bit weights");
    OKC_REQUIRE(patches.dim() == 3 && patches.size(0) >= N / 16 && patches.size(1) == K / 64 && patches.size(2) == 4,
                "zgemv: patches must be [>= N/16, K/64, 4], got ", patches.sizes());
    OKC_REQUIRE(overflow.dim() == 1, "zgemv: overflow must be 1-D, got ", overflow.sizes());
    OKC_REQUIRE(overflow_starts.dim() == 1 && overflow_starts.size(0) >= (N / 16) * (K / 64) + 1,
                "zgemv: overflow_starts must be [>= N/16 * K/64 + 1], got ", overflow_starts.sizes());
    OKC_REQUIRE(out.dim() == 2 && out.size(0) == M && out.size(1) == N, "zgemv: out must be [", M, ", ", N, "]");
    OKC_REQUIRE(R >= 1 && (N / 16) % R == 0, "zgemv: R=", R, " must divide the ", N / 16, " row blocks of N=", N);
    OKC_REQUIRE(NW >= 1 && NW <= 16, "zgemv: NW must be 1..16, got ", NW);
    OKC_REQUIRE(S >= 1 && (K / 64) % S == 0, "zgemv: S=", S, " must divide the ", K / 64, " K groups");
    OKC_REQUIRE(!cluster || (S >= 2 && S <= 16), "zgemv: a cluster split needs 2 <= S <= 16, got S=", S);
    OKC_REQUIRE(S == 1 || ws.numel() >= (N / 16) * S * NB * 128, "zgemv: workspace too small for S=", S);
    OKC_REQUIRE(S == 1 || sem.numel() >= N / (16 * R), "zgemv: need one semaphore per CTA row group (",
                N / (16 * R), ")");
    const char* err = okc_launch_zgemv(x.data_ptr(), zs.data_ptr(), patches.data_ptr(), overflow.data_ptr(),
                                       overflow_starts.data_ptr<int>(),
                                       out.data_ptr(), ws.data_ptr<float>(), sem.data_ptr<int>(), (int)t0, (int)t1,
                                       (int)t2, (int)t3, (int)M, (int)N, (int)K, (int)overflow.numel(), (int)NW,
                                       (int)S, (int)UG, (int)NB, (int)R, (int)P, cluster, (long long)stream);
    OKC_REQUIRE(err == nullptr, "zgemv (NW=", NW, " S=", S, " UG=", UG, " NB=", NB, " R=", R, " P=", P,
                " C=", cluster, "): ", err);
    return "";
}

#undef OKC_REQUIRE
