// Our own tiled GEMM for float weights, where no BLAS library serves (HIP without hipBLAS) and,
// with WSP_GGML_CUDA_OWN_GEMM=1, on CUDA and the host target so that it runs in CI and the GPU
// check can compare it with cuBLAS. dst[N, M, b2, b3] = W[K, N]^T x[K, M, b2, b3], W broadcast over
// dims 2-3, any strides on x, activations rounded to the weight's type first (as the cuBLAS path
// converts them). A CTA of 256 threads computes a 32 x 32 tile of dst, 2 x 2 values per thread,
// walking K in steps of 32 through shared memory; sums run in float in k order.

#include "common.cuh"
#include "kernels.cuh"

#include <cstdlib>

namespace wsp::cuda {

namespace {

constexpr int TILE    = 32; // outputs per CTA in n and in m, and keys per step
constexpr int THREADS = 256;

struct GemmParams {
    TensorView w; // [K, N, ne2 / r2, ne3 / r3]
    TensorView x; // [K, M, ne2, ne3]
    TensorView d; // [N, M, ne2, ne3], F32
    int64_t    r2, r3;
};

// x's value as the GEMM sees it: rounded to the weight's type
__device__ __forceinline__ float act(const GemmParams & p, const char * q) {
    const float v = load_f(p.x.type, q);
    if (p.w.type == WSP_GGML_TYPE_F16) {
        return __half2float(__float2half_rn(v));
    }
    if (p.w.type == WSP_GGML_TYPE_BF16) {
        return __bfloat162float(__float2bfloat16_rn(v));
    }
    return v;
}

__global__ void __launch_bounds__(THREADS) gemm_kernel(const GemmParams p) {
    __shared__ float ws[TILE][TILE + 1]; // [n][k], padded against bank conflicts
    __shared__ float xs[TILE][TILE + 1]; // [m][k]
    const int64_t    K = p.w.ne[0], N = p.w.ne[1], M = p.x.ne[1];
    const int64_t    n0 = (int64_t) blockIdx.x * TILE, m0 = (int64_t) blockIdx.y * TILE;
    const int        tx = (int) threadIdx.x % 16, ty = (int) threadIdx.x / 16; // 2 x 2 outputs each
    const int64_t    batches = p.d.ne[2] * p.d.ne[3];
    for (int64_t bz = blockIdx.z; bz < batches; bz += gridDim.z) {
        const int64_t i2 = bz % p.d.ne[2], i3 = bz / p.d.ne[2];
        const char *  wb        = p.w.data + (i2 / p.r2) * p.w.nb[2] + (i3 / p.r3) * p.w.nb[3];
        const char *  xb        = p.x.data + i2 * p.x.nb[2] + i3 * p.x.nb[3];
        float         acc[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } };
        for (int64_t k0 = 0; k0 < K; k0 += TILE) {
            __syncthreads(); // the previous step's tiles are no longer read
            for (int i = (int) threadIdx.x; i < TILE * TILE; i += THREADS) {
                const int     r = i / TILE, c = i % TILE;
                const int64_t k = k0 + c;
                ws[r][c] = n0 + r < N && k < K ? load_f(p.w.type, wb + (n0 + r) * p.w.nb[1] + k * p.w.nb[0]) : 0.0f;
                xs[r][c] = m0 + r < M && k < K ? act(p, xb + (m0 + r) * p.x.nb[1] + k * p.x.nb[0]) : 0.0f;
            }
            __syncthreads();
#pragma unroll 8
            for (int k = 0; k < TILE; ++k) {
                for (int i = 0; i < 2; ++i) {
                    for (int j = 0; j < 2; ++j) {
                        acc[i][j] += ws[tx + 16 * i][k] * xs[ty + 16 * j][k];
                    }
                }
            }
        }
        for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 2; ++j) {
                const int64_t n = n0 + tx + 16 * i, m = m0 + ty + 16 * j;
                if (n < N && m < M) {
                    *reinterpret_cast<float *>(p.d.data + n * p.d.nb[0] + m * p.d.nb[1] + i2 * p.d.nb[2] +
                                               i3 * p.d.nb[3]) = acc[i][j];
                }
            }
        }
    }
}

} // namespace

bool own_gemm_wanted() {
    if (!WSP_GPU_HAS_BLAS) {
        return true;
    }
    static const bool on = [] {
        const char * env = std::getenv("WSP_GGML_CUDA_OWN_GEMM");
        return env != nullptr && std::atoi(env) != 0;
    }();
    return on || !wsp::gpu::blas_available();
}

bool mul_mat_own_gemm(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const GemmParams p       = { view_of(a), view_of(t->src[1]), view_of(t), t->ne[2] / a->ne[2], t->ne[3] / a->ne[3] };
    const int64_t    batches = t->ne[2] * t->ne[3];
    const dim3       grid((unsigned) ((a->ne[1] + TILE - 1) / TILE), (unsigned) ((t->ne[1] + TILE - 1) / TILE),
                          (unsigned) (batches < 65535 ? batches : 65535));
    if ((a->ne[1] + TILE - 1) / TILE > 0x7fffffff || (t->ne[1] + TILE - 1) / TILE > 65535) {
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME ": mul_mat %s is too large for the own GEMM's grid\n", describe(t).c_str());
        return false;
    }
    gpu::launch(gemm_kernel, grid, THREADS, 0, ctx.stream, p);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace wsp::cuda
