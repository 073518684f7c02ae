// Mamba's SSM_CONV and SSM_SCAN (F32, any strides). The convolution is one thread per output
// (channel, token, sequence). The scan is one thread per (channel, sequence) walking the tokens
// in order, its d_state values in the block's shared memory (n-major: [n][thread], so a warp's
// accesses are consecutive); the CPU kernel (src/cpu/ssm.cpp) runs the same recurrence.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__device__ __forceinline__ float f32_at(const TensorView & v, int64_t i0, int64_t i1, int64_t i2) {
    return *reinterpret_cast<const float *>(elem(v, i0, i1, i2, 0));
}

// ---- SSM_CONV: out(i, t, s) = sum_k sx(t + k, i, s) * c(k, i); rows of dst are (t, s)

__global__ void ssm_conv_kernel(TensorView sx, TensorView c, TensorView d, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i, int64_t t, int64_t s, int64_t) {
        float sum = 0.0f;
        for (int64_t k = 0; k < c.ne[0]; ++k) {
            sum = fmaf(f32_at(sx, t + k, i, s), f32_at(c, k, i, 0), sum);
        }
        *reinterpret_cast<float *>(elem(d, i, t, s, 0)) = sum;
    });
}

bool all_f32(const wsp_ggml_tensor * t, int n_src) {
    for (int i = 0; i < n_src; ++i) {
        if (t->src[i] == nullptr || t->src[i]->type != WSP_GGML_TYPE_F32) {
            return false;
        }
    }
    return t->type == WSP_GGML_TYPE_F32;
}

bool conv_supported(const wsp_ggml_tensor * t) {
    return all_f32(t, 2);
}

bool conv_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t rows = t->ne[1] * t->ne[2];
    if (wsp_ggml_nelements(t) == 0) {
        return true;
    }
    const RowGrid g = row_grid(t->ne[0], rows);
    gpu::launch(ssm_conv_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t->src[1]), view_of(t),
                rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// ---- SSM_SCAN

constexpr int SCAN_THREADS   = 64;
constexpr int SCAN_MAX_STATE = 128; // 32 KiB of shared memory per block

struct ScanArgs {
    TensorView s0, x, dt, A, B, C;
};

// block (blockIdx.x: channels, blockIdx.y: the sequence); dynamic shared: d_state * blockDim floats
__global__ void ssm_scan_kernel(ScanArgs a, float * y, float * s_out) {
    WSP_DYNAMIC_SHARED(float, st);
    const int64_t d_state = a.s0.ne[0], d_inner = a.s0.ne[1], n_t = a.x.ne[1];
    const int64_t s = blockIdx.y, i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= d_inner) {
        return;
    }
    float * mine = st + threadIdx.x;
    for (int64_t n = 0; n < d_state; ++n) {
        mine[n * blockDim.x] = f32_at(a.s0, n, i, s);
    }
    for (int64_t t = 0; t < n_t; ++t) {
        const float v    = f32_at(a.dt, i, t, s);
        const float dts  = v <= 20.0f ? log1pf(expf(v)) : v; // softplus, linear where it is v anyway
        const float x_dt = f32_at(a.x, i, t, s) * dts;
        float       sum  = 0.0f;
        for (int64_t n = 0; n < d_state; ++n) {
            const float e = mine[n * blockDim.x] * expf(dts * f32_at(a.A, n, i, 0)) + f32_at(a.B, n, t, s) * x_dt;
            mine[n * blockDim.x] = e;
            sum += e * f32_at(a.C, n, t, s);
        }
        y[(s * n_t + t) * d_inner + i] = sum;
    }
    for (int64_t n = 0; n < d_state; ++n) {
        s_out[(s * d_inner + i) * d_state + n] = mine[n * blockDim.x];
    }
}

bool scan_supported(const wsp_ggml_tensor * t) {
    return all_f32(t, 6) && wsp_ggml_is_contiguous(t) && t->src[0]->ne[0] <= SCAN_MAX_STATE &&
           t->src[0]->ne[2] <= 65535;
}

bool scan_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const ScanArgs a       = { view_of(t->src[0]), view_of(t->src[1]), view_of(t->src[2]),
                               view_of(t->src[3]), view_of(t->src[4]), view_of(t->src[5]) };
    const int64_t  d_state = a.s0.ne[0], d_inner = a.s0.ne[1], n_s = a.s0.ne[2];
    if (d_inner == 0 || n_s == 0) {
        return true;
    }
    float *      y     = static_cast<float *>(t->data);
    float *      s_out = y + wsp_ggml_nelements(t->src[1]);
    const dim3   grid((unsigned) ((d_inner + SCAN_THREADS - 1) / SCAN_THREADS), (unsigned) n_s);
    const size_t shmem = (size_t) d_state * SCAN_THREADS * sizeof(float);
    gpu::launch(ssm_scan_kernel, grid, dim3(SCAN_THREADS), shmem, ctx.stream, a, y, s_out);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_ssm_conv() {
    static const OpEntry entry = { conv_supported, conv_launch };
    return entry;
}

const OpEntry & op_ssm_scan() {
    static const OpEntry entry = { scan_supported, scan_launch };
    return entry;
}

} // namespace wsp::cuda
