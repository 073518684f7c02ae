// NORM: y = (x - mean) / sqrt(var + eps) per row (eps in op_params[0]), F32/F16/BF16 in and
// out, any strides, in place allowed. One block per row, three passes over the row (it stays in
// L1/L2: whisper's rows are 384..1280 values): shifted sum, sum of squared deviations, output.

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// Note [norm precision]: a row with a large mean and a small spread (mean 1000, spread 0.01)
// loses every digit of its variance if the mean is subtracted after rounding it. Values are
// shifted by x0 = x[0] first: x - x0 is exact when x and x0 are within a factor of two
// (Sterbenz), so the shifted sum, its mean ms and the deviations (x - x0) - ms are all small
// numbers carrying the spread at full float precision. The variance is the mean of squared
// deviations (two passes, never E[x^2] - E[x]^2). This matches the CPU kernel's hi/lo mean.
__global__ void norm_kernel(TensorView x, TensorView d, float eps, int64_t rows) {
    __shared__ float scratch[WARP_SIZE];
    const int64_t    n = x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        const char * px = x.data + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3];
        char *       pd = d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        // every thread reads x0 before the first barrier, so an in-place write of y[0] in the
        // last pass cannot be seen here
        const float x0 = load_f(x.type, px);

        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            s += load_f(x.type, px + i * x.nb[0]) - x0;
        }
        const float ms = block_reduce(s, scratch, SumOp()) / (float) n;

        float q = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float dev = (load_f(x.type, px + i * x.nb[0]) - x0) - ms;
            q               = fmaf(dev, dev, q);
        }
        const float var   = block_reduce(q, scratch, SumOp()) / (float) n;
        const float scale = 1.0f / sqrtf(var + eps);

        // all reads of passes 1-2 finished at the barrier inside block_reduce; each thread now
        // reads and writes the same elements, so dst may alias src
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float dev = (load_f(x.type, px + i * x.nb[0]) - x0) - ms;
            store_f(d.type, pd + i * d.nb[0], dev * scale);
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && wsp_ggml_are_same_shape(t, t->src[0]);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    float eps;
    std::memcpy(&eps, &t->op_params[0], sizeof(float));
    const int64_t rows = wsp_ggml_nrows(t);
    gpu::launch(norm_kernel, row_blocks(rows), reduce_threads(t->ne[0]), 0, ctx.stream, view_of(t->src[0]), view_of(t),
                eps, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_norm() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
