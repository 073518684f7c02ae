// MEAN: the mean of each row of an F32/F16/BF16 tensor (any strides) into an F32 tensor of shape
// [1, ne1, ne2, ne3]. One block per row; per-thread float sums of a few values each, then a
// fixed-order tree, so the rounding error grows with log(n) rather than n.

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__global__ void mean_kernel(TensorView x, TensorView d, int64_t rows) {
    __shared__ float scratch[WARP_SIZE];
    const int64_t    n = x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        const char * px = x.data + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3];
        float        s  = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            s += load_f(x.type, px + i * x.nb[0]);
        }
        s = block_reduce(s, scratch, SumOp());
        if (threadIdx.x == 0) {
            // an empty row has mean 0, as on the CPU
            *reinterpret_cast<float *>(d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) =
                n > 0 ? s / (float) n : 0.0f;
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    return t->type == WSP_GGML_TYPE_F32 && is_float_type(a->type) && t->ne[0] == 1 && t->ne[1] == a->ne[1] &&
           t->ne[2] == a->ne[2] && t->ne[3] == a->ne[3];
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a    = t->src[0];
    const int64_t           rows = wsp_ggml_nrows(a);
    gpu::launch(mean_kernel, row_blocks(rows), reduce_threads(a->ne[0]), 0, ctx.stream, view_of(a), view_of(t), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_mean() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
