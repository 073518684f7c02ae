// SCALE: dst = src * s + b (op_params: s, b), F32/F16/BF16, any strides.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__global__ void scale_kernel(TensorView x, TensorView d, float s, float bias, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        store_f(d.type, elem(d, i0, i1, i2, i3), load_f(x.type, elem(x, i0, i1, i2, i3)) * s + bias);
    });
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
    gpu::launch(scale_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), s, bias, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_scale() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
