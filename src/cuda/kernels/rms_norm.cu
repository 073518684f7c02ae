// RMS_NORM (x / sqrt(mean(x^2) + eps)) and L2_NORM (x / max(||x||, eps)), one block per row;
// GROUP_NORM (op_params n_groups, eps; groups of ceil(ne2 / n_groups) channels per i3), one block
// per group: mean, then variance of the deviations (never E[x^2] - E[x]^2), then the output.
// F32/F16/BF16, any strides, in place allowed: all reads of a block's values end at the last
// block_reduce's barrier, after which each thread rewrites only the elements it reads.

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

template <bool RMS>
__global__ void row_norm_kernel(TensorView x, TensorView d, float eps, int64_t rows) {
    __shared__ float scratch[WARP_SIZE];
    const int64_t    n = x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        const char * px = elem(x, 0, i1, i2, i3);
        char *       pd = elem(d, 0, i1, i2, i3);
        float        q  = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = load_f(x.type, px + i * x.nb[0]);
            q             = fmaf(v, v, q);
        }
        q                 = block_reduce(q, scratch, SumOp());
        const float scale = RMS ? rsqrtf(q / (float) n + eps) : 1.0f / fmaxf(sqrtf(q), eps);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            store_f(d.type, pd + i * d.nb[0], load_f(x.type, px + i * x.nb[0]) * scale);
        }
    }
}

// f(element address of x, element address of d) over the group's elements owned by this thread
template <typename F>
__device__ __forceinline__ void for_group(const TensorView & x, const TensorView & d, int64_t c0, int64_t c1,
                                          int64_t i3, F f) {
    const int64_t ne0 = x.ne[0], plane = x.ne[0] * x.ne[1], n = plane * (c1 - c0);
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const int64_t i0 = e % ne0, i1 = (e % plane) / ne0, i2 = c0 + e / plane;
        f(elem(x, i0, i1, i2, i3), elem(d, i0, i1, i2, i3));
    }
}

__global__ void group_norm_kernel(TensorView x, TensorView d, int64_t n_groups, float eps) {
    __shared__ float scratch[WARP_SIZE];
    const int64_t    per = (x.ne[2] + n_groups - 1) / n_groups;
    for (int64_t j = blockIdx.x; j < n_groups * x.ne[3]; j += gridDim.x) {
        const int64_t g = j % n_groups, i3 = j / n_groups;
        const int64_t c0 = g * per < x.ne[2] ? g * per : x.ne[2];
        const int64_t c1 = c0 + per < x.ne[2] ? c0 + per : x.ne[2];
        const float   n  = (float) (x.ne[0] * x.ne[1] * (c1 - c0));
        if (c1 == c0) {
            continue; // uniform across the block
        }
        float s = 0.0f;
        for_group(x, d, c0, c1, i3, [&](const char * px, char *) { s += load_f(x.type, px); });
        const float mean = block_reduce(s, scratch, SumOp()) / n;
        float       q    = 0.0f;
        for_group(x, d, c0, c1, i3, [&](const char * px, char *) {
            const float dev = load_f(x.type, px) - mean;
            q               = fmaf(dev, dev, q);
        });
        const float scale = rsqrtf(block_reduce(q, scratch, SumOp()) / n + eps);
        for_group(x, d, c0, c1, i3,
                  [&](const char * px, char * pd) { store_f(d.type, pd, (load_f(x.type, px) - mean) * scale); });
    }
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && wsp_ggml_are_same_shape(t, t->src[0]) &&
           (t->op != WSP_GGML_OP_GROUP_NORM || t->op_params[0] > 0);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const TensorView x = view_of(t->src[0]), d = view_of(t);
    if (t->op == WSP_GGML_OP_GROUP_NORM) {
        float eps;
        std::memcpy(&eps, &t->op_params[1], sizeof(float));
        const int64_t n_groups = t->op_params[0];
        const int64_t per      = (t->ne[2] + n_groups - 1) / n_groups;
        gpu::launch(group_norm_kernel, row_blocks(n_groups * t->ne[3]), reduce_threads(t->ne[0] * t->ne[1] * per, 1024),
                    0, ctx.stream, x, d, n_groups, eps);
        return WSP_CUDA_LAUNCH_OK(ctx.physical);
    }
    float eps;
    std::memcpy(&eps, &t->op_params[0], sizeof(float));
    const int64_t rows = wsp_ggml_nrows(t);
    if (t->op == WSP_GGML_OP_RMS_NORM) {
        gpu::launch(row_norm_kernel<true>, row_blocks(rows), reduce_threads(t->ne[0]), 0, ctx.stream, x, d, eps, rows);
    } else {
        gpu::launch(row_norm_kernel<false>, row_blocks(rows), reduce_threads(t->ne[0]), 0, ctx.stream, x, d, eps, rows);
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_rms_norm() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
