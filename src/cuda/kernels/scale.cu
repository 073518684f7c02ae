// SCALE: dst = src * s + b (op_params: s, b), F32/F16/BF16, any strides.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__global__ void scale_kernel(TensorView x, TensorView d, float s, float bias, int64_t rows) {
    const int64_t i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(d, r, i1, i2, i3);
        const float v = load_f(x.type, x.data + i0 * x.nb[0] + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3]);
        store_f(d.type, d.data + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], v * s + bias);
    }
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    float s, bias;
    std::memcpy(&s, &t->op_params[0], sizeof(float));
    std::memcpy(&bias, &t->op_params[1], sizeof(float));
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    scale_kernel<<<g.grid, g.block, 0, ctx.stream>>>(view_of(t->src[0]), view_of(t), s, bias, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry op_scale = { supported, launch };

} // namespace wsp::cuda
