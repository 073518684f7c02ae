// ADD, SUB, MUL, DIV: dst = a op b with b broadcast over a (a->ne[i] % b->ne[i] == 0), any mix
// of F32/F16/BF16 and any strides. One block row per dst row; types are read at run time.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

template <int OP>
__device__ __forceinline__ float apply(float x, float y) {
    if (OP == WSP_GGML_OP_ADD)
        return x + y;
    if (OP == WSP_GGML_OP_SUB)
        return x - y;
    if (OP == WSP_GGML_OP_MUL)
        return x * y;
    return x / y;
}

template <int OP>
__global__ void binary_kernel(TensorView a, TensorView b, TensorView d, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const char * pb = elem(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        store_f(d.type, elem(d, i0, i1, i2, i3),
                apply<OP>(load_f(a.type, elem(a, i0, i1, i2, i3)), load_f(b.type, pb)));
    });
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && is_float_type(t->src[1]->type) &&
           wsp_ggml_can_repeat(t->src[1], t->src[0]);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t    rows = wsp_ggml_nrows(t);
    const RowGrid    g    = row_grid(t->ne[0], rows);
    const TensorView a = view_of(t->src[0]), b = view_of(t->src[1]), d = view_of(t);
    switch (t->op) {
        case WSP_GGML_OP_ADD:
            gpu::launch(binary_kernel<WSP_GGML_OP_ADD>, g.grid, g.block, 0, ctx.stream, a, b, d, rows);
            break;
        case WSP_GGML_OP_SUB:
            gpu::launch(binary_kernel<WSP_GGML_OP_SUB>, g.grid, g.block, 0, ctx.stream, a, b, d, rows);
            break;
        case WSP_GGML_OP_MUL:
            gpu::launch(binary_kernel<WSP_GGML_OP_MUL>, g.grid, g.block, 0, ctx.stream, a, b, d, rows);
            break;
        default: gpu::launch(binary_kernel<WSP_GGML_OP_DIV>, g.grid, g.block, 0, ctx.stream, a, b, d, rows); break;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_binary() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
