// PAD_REFLECT_1D (op_params p0, p1): each F32 row of n values becomes p0 + n + p1 values,
// mirrored about its first and last element without repeating them:
//   y[i] = x[p0 - i] for i < p0, x[i - p0] inside, x[n - 2 - (i - p0 - n)] after.
// The builder guarantees p0, p1 < n, so every source index lies in [0, n); supported() checks it
// again because the kernel relies on it. Any strides.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// x covers the padded row, y strides over the rows (gridDim.y <= 65535)
__global__ void pad_reflect_kernel(TensorView x, TensorView d, int p0, int64_t rows) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= d.ne[0]) {
        return;
    }
    const int64_t n = x.ne[0];
    // the mirrored source index; the middle case maps i to i - p0, both ends reflect inward
    const int64_t j = i < p0 ? p0 - i : (i < p0 + n ? i - p0 : n - 2 - (i - p0 - n));
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(d, r, i1, i2, i3);
        const float v =
            *reinterpret_cast<const float *>(x.data + j * x.nb[0] + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3]);
        *reinterpret_cast<float *>(d.data + i * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = v;
    }
}

void pads_of(const wsp_ggml_tensor * t, int32_t & p0, int32_t & p1) {
    std::memcpy(&p0, &t->op_params[0], sizeof(p0));
    std::memcpy(&p1, &t->op_params[1], sizeof(p1));
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    int32_t                 p0, p1;
    pads_of(t, p0, p1);
    return t->type == WSP_GGML_TYPE_F32 && a->type == WSP_GGML_TYPE_F32 && p0 >= 0 && p1 >= 0 && p0 < a->ne[0] &&
           p1 < a->ne[0] && t->ne[0] == a->ne[0] + p0 + p1 && t->ne[1] == a->ne[1] && t->ne[2] == a->ne[2] &&
           t->ne[3] == a->ne[3];
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    int32_t p0, p1;
    pads_of(t, p0, p1);
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(pad_reflect_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), p0, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_pad_reflect() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
