// POOL_1D and POOL_2D: max or average over windows of dims 0 (and 1), F32/F16/BF16 in (any
// strides), F32 out. Padded positions are no elements (Note [pooling padding] in
// src/core/ops_conv.cpp): MAX skips them (-FLT_MAX for an empty window), AVG divides by the
// count of input elements, summed in the CPU's order. POOL_1D is POOL_2D with a window of one
// row. One thread per dst element.

#include "common.cuh"
#include "kernels.cuh"

#include <cfloat>

namespace wsp::cuda {

namespace {

struct Pool {
    int op, k0, k1, s0, s1, p0, p1;
};

__global__ void pool_kernel(TensorView a, TensorView d, Pool q, int64_t rows) {
    for_each_element(d, rows, [&](int64_t ow, int64_t oh, int64_t c, int64_t n) {
        const bool    avg = q.op == WSP_GGML_OP_POOL_AVG;
        const int64_t ix0 = ow * q.s0 - q.p0, iy0 = oh * q.s1 - q.p1;
        const int64_t x0 = ix0 < 0 ? 0 : ix0, x1 = ix0 + q.k0 < a.ne[0] ? ix0 + q.k0 : a.ne[0];
        const int64_t y0 = iy0 < 0 ? 0 : iy0, y1 = iy0 + q.k1 < a.ne[1] ? iy0 + q.k1 : a.ne[1];
        float         acc = avg ? 0.0f : -FLT_MAX;
        for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = x0; x < x1; ++x) {
                const float v = load_f(a.type, elem(a, x, y, c, n));
                acc           = avg ? acc + v : (v > acc ? v : acc);
            }
        }
        if (avg) {
            const int64_t count = (y1 > y0 ? y1 - y0 : 0) * (x1 > x0 ? x1 - x0 : 0);
            acc                 = count > 0 ? acc / (float) count : 0.0f;
        }
        *reinterpret_cast<float *>(elem(d, ow, oh, c, n)) = acc;
    });
}

int32_t param(const wsp_ggml_tensor * t, int i) {
    int32_t v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

Pool pool_of(const wsp_ggml_tensor * t) {
    if (t->op == WSP_GGML_OP_POOL_1D) {
        return { param(t, 0), param(t, 1), 1, param(t, 2), 1, param(t, 3), 0 };
    }
    return { param(t, 0), param(t, 1), param(t, 2), param(t, 3), param(t, 4), param(t, 5), param(t, 6) };
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const Pool              q = pool_of(t);
    return t->type == WSP_GGML_TYPE_F32 && is_float_type(a->type) && t->ne[2] == a->ne[2] && t->ne[3] == a->ne[3] &&
           (t->op == WSP_GGML_OP_POOL_2D || t->ne[1] == a->ne[1]) && q.s0 > 0 && q.s1 > 0;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(pool_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), pool_of(t), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_pool() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
