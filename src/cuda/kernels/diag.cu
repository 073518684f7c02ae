// DIAG ([n, 1, ne2, ne3] -> [n, n, ne2, ne3], x on the diagonal, zeros elsewhere) and
// DIAG_MASK_INF / DIAG_MASK_ZERO (element (column i0, row i1) of each 2-D slice set to -inf / 0
// when i0 > n_past + i1, the others copied; op_params n_past). F32/F16/BF16 in and out, any
// strides; a mask is in place safe (each thread reads its element before writing it).

#include "common.cuh"
#include "kernels.cuh"

#include <cmath>

namespace wsp::cuda {

namespace {

__global__ void diag_kernel(TensorView x, TensorView d, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        store_f(d.type, elem(d, i0, i1, i2, i3), i0 == i1 ? load_f(x.type, elem(x, i0, 0, i2, i3)) : 0.0f);
    });
}

__global__ void diag_mask_kernel(TensorView x, TensorView d, int64_t rows, int64_t n_past, float fill) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const float v = i0 > n_past + i1 ? fill : load_f(x.type, elem(x, i0, i1, i2, i3));
        store_f(d.type, elem(d, i0, i1, i2, i3), v);
    });
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    if (!is_float_type(t->type) || !is_float_type(a->type)) {
        return false;
    }
    if (t->op == WSP_GGML_OP_DIAG) {
        return a->ne[1] == 1 && t->ne[0] == a->ne[0] && t->ne[1] == a->ne[0] && t->ne[2] == a->ne[2] &&
               t->ne[3] == a->ne[3];
    }
    return wsp_ggml_are_same_shape(t, a);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    if (t->op == WSP_GGML_OP_DIAG) {
        gpu::launch(diag_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), rows);
    } else {
        const float fill = t->op == WSP_GGML_OP_DIAG_MASK_INF ? -INFINITY : 0.0f;
        gpu::launch(diag_mask_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), rows,
                    (int64_t) t->op_params[0], fill);
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_diag() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
