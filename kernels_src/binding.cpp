// The torch-facing shim (compiled by load_inline's host compiler): checks tensors with readable messages, then
// calls the plain-pointer launcher in launch.cu on the stream Python passes (the caller's current stream, which
// is the capture stream inside torch.cuda.graph).
#include <torch/extension.h>

const char* okc_launch_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                            int N, int K, int NW, int S, int U, int NB, int R, int P, bool cluster, bool dual,
                            long long stream);
const char* okc_launch_tma_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                                int N, int K, int S, int NB, int STAGES, bool cluster, bool dual, long long stream);
const char* okc_tma_config_error(int NB, int STAGES, bool dual, int S, bool cluster);

static void check_tensor(const torch::Tensor& t, const char* name, at::ScalarType dtype) {
    TORCH_CHECK(t.is_cuda(), "gemv: ", name, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == dtype, "gemv: ", name, " must be ", c10::toString(dtype), ", got ",
                c10::toString(t.scalar_type()));
    TORCH_CHECK(t.is_contiguous(), "gemv: ", name, " must be contiguous");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "gemv: ", name, " must be 16-byte aligned");
}

// out[M, N] = x[M, K] . W[:N]^T with W packed by packing.pack_mma_a (dual: W = hi + lo, both packed).
void gemv(torch::Tensor x, torch::Tensor w, torch::Tensor w2, torch::Tensor out, torch::Tensor ws,
          torch::Tensor sem, int64_t N, int64_t K, int64_t NW, int64_t S, int64_t U, int64_t NB, int64_t R,
          bool cluster, bool dual, int64_t P, int64_t stream) {
    check_tensor(x, "x", at::kBFloat16);
    check_tensor(w, "w", at::kBFloat16);
    if (dual) check_tensor(w2, "w2 (lo weights)", at::kBFloat16);
    check_tensor(out, "out", dual ? at::kFloat : at::kBFloat16);
    check_tensor(ws, "ws", at::kFloat);
    check_tensor(sem, "sem", at::kInt);
    TORCH_CHECK(x.dim() == 2 && x.size(1) == K, "gemv: x must be [M, ", K, "], got ", x.sizes());
    const int64_t M = x.size(0);
    TORCH_CHECK(M >= 1 && M <= 8 * NB, "gemv: M=", M, " does not fit NB=", NB, " column blocks of 8 tokens");
    TORCH_CHECK(N % 16 == 0 && K % 32 == 0, "gemv: need N % 16 == 0 and K % 32 == 0, got N=", N, " K=", K);
    TORCH_CHECK(R >= 1 && (N / 16) % R == 0, "gemv: R=", R, " must divide the ", N / 16, " row blocks of N=", N);
    TORCH_CHECK(w.numel() >= N * K, "gemv: packed w holds ", w.numel(), " weights, fewer than N*K=", N * K);
    TORCH_CHECK(!dual || w2.numel() >= N * K, "gemv: packed w2 holds fewer than N*K weights");
    TORCH_CHECK(out.dim() == 2 && out.size(0) == M && out.size(1) == N, "gemv: out must be [", M, ", ", N, "]");
    TORCH_CHECK(NW >= 1 && NW <= 16, "gemv: NW must be 1..16, got ", NW);
    TORCH_CHECK(S >= 1 && (K / 32) % S == 0, "gemv: S=", S, " must divide the ", K / 32, " K blocks");
    TORCH_CHECK(!cluster || (S >= 2 && S <= 16), "gemv: a cluster split needs 2 <= S <= 16, got S=", S);
    TORCH_CHECK(S == 1 || ws.numel() >= (N / 16) * S * NB * 128, "gemv: workspace too small for S=", S);
    TORCH_CHECK(S == 1 || sem.numel() >= N / (16 * R), "gemv: need one semaphore per CTA row group (", N / (16 * R),
                ")");
    const char* err = okc_launch_gemv(x.data_ptr(), w.data_ptr(), dual ? w2.data_ptr() : nullptr, out.data_ptr(),
                                      ws.data_ptr<float>(), sem.data_ptr<int>(), (int)M, (int)N, (int)K, (int)NW,
                                      (int)S, (int)U, (int)NB, (int)R, (int)P, cluster, dual,
                                      (long long)stream);
    TORCH_CHECK(err == nullptr, "gemv (NW=", NW, " S=", S, " U=", U, " NB=", NB, " R=", R, " P=", P, " C=", cluster,
                " dual=", dual, "): ", err ? err : "");
}

// out[M, N] = x[M, K] . W[:N]^T through the bulk-copy + wgmma kernel (tma_gemv.cuh): W in its natural [n, k]
// row-major layout (dual: the router's hi and lo halves), no packing.
void tma_gemv(torch::Tensor x, torch::Tensor w, torch::Tensor w2, torch::Tensor out, torch::Tensor ws,
              torch::Tensor sem, int64_t N, int64_t K, int64_t S, int64_t NB, int64_t STAGES, bool cluster,
              bool dual, int64_t stream) {
    check_tensor(x, "x", at::kBFloat16);
    check_tensor(w, "w", at::kBFloat16);
    if (dual) check_tensor(w2, "w2 (lo weights)", at::kBFloat16);
    check_tensor(out, "out", dual ? at::kFloat : at::kBFloat16);
    check_tensor(ws, "ws", at::kFloat);
    check_tensor(sem, "sem", at::kInt);
    TORCH_CHECK(x.dim() == 2 && x.size(1) == K, "tma_gemv: x must be [M, ", K, "], got ", x.sizes());
    const int64_t M = x.size(0);
    const char* bad = okc_tma_config_error((int)NB, (int)STAGES, dual, (int)S, cluster);
    TORCH_CHECK(bad == nullptr, "tma_gemv (NB=", NB, " STAGES=", STAGES, " dual=", dual, "): ", bad ? bad : "");
    TORCH_CHECK(M >= 1 && M <= 8 * NB, "tma_gemv: M=", M, " does not fit NB=", NB, " column blocks of 8 tokens");
    TORCH_CHECK(N % 64 == 0 && K % 64 == 0, "tma_gemv: need N % 64 == 0 and K % 64 == 0, got N=", N, " K=", K);
    TORCH_CHECK(w.numel() >= N * K, "tma_gemv: packed w holds ", w.numel(), " weights, fewer than N*K=", N * K);
    TORCH_CHECK(!dual || w2.numel() >= N * K, "tma_gemv: packed w2 holds fewer than N*K weights");
    TORCH_CHECK(out.dim() == 2 && out.size(0) == M && out.size(1) == N, "tma_gemv: out must be [", M, ", ", N, "]");
    TORCH_CHECK(S >= 1 && S <= K / 64, "tma_gemv: S=", S, " must be 1..", K / 64, " (the 64-wide K tiles)");
    TORCH_CHECK(S == 1 || ws.numel() >= (N / 64) * S * 64 * 8 * NB, "tma_gemv: workspace too small for S=", S);
    TORCH_CHECK(S == 1 || sem.numel() >= N / 64, "tma_gemv: need one semaphore per 64-row tile (", N / 64, ")");
    const char* err = okc_launch_tma_gemv(x.data_ptr(), w.data_ptr(), dual ? w2.data_ptr() : nullptr,
                                          out.data_ptr(), ws.data_ptr<float>(), sem.data_ptr<int>(), (int)M, (int)N,
                                          (int)K, (int)S, (int)NB, (int)STAGES, cluster, dual, (long long)stream);
    TORCH_CHECK(err == nullptr, "tma_gemv (S=", S, " NB=", NB, " STAGES=", STAGES, " dual=", dual, "): ",
                err ? err : "");
}
