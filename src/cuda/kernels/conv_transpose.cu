// CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D: dst[ox, oy, oc, n] = sum over ic and the taps with
// ox = x*s + kx, oy = y*s + ky of k[kx, ky, oc, ic] * src[x, y, ic, n]. Gathered: one thread per
// dst element visits only the taps congruent to it modulo s, so no two threads write one element.
// The 1-D op is the 2-D one with one row (views remapped on the host). Kernel and input
// F32/F16/BF16 with any strides, dst F32.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__global__ void conv_transpose_kernel(TensorView k, TensorView x, TensorView d, int s, int64_t rows) {
    for_each_element(d, rows, [&](int64_t ox, int64_t oy, int64_t oc, int64_t n) {
        float acc = 0.0f;
        for (int64_t ic = 0; ic < x.ne[2]; ++ic) {
            for (int64_t ky = oy % s; ky < k.ne[1]; ky += s) {
                const int64_t iy = (oy - ky) / s;
                if (iy < 0) {
                    break;
                }
                if (iy >= x.ne[1]) {
                    continue;
                }
                for (int64_t kx = ox % s; kx < k.ne[0]; kx += s) {
                    const int64_t ix = (ox - kx) / s;
                    if (ix < 0) {
                        break;
                    }
                    if (ix >= x.ne[0]) {
                        continue;
                    }
                    acc += load_f(k.type, elem(k, kx, ky, oc, ic)) * load_f(x.type, elem(x, ix, iy, ic, n));
                }
            }
        }
        *reinterpret_cast<float *>(elem(d, ox, oy, oc, n)) = acc;
    });
}

// the 1-D op's [K, OC, IC], [L, IC], [OL, OC] as [K, 1, OC, IC], [L, 1, IC, 1], [OL, 1, OC, 1]
TensorView as_one_row(const wsp_ggml_tensor * t) {
    TensorView v = view_of(t);
    v.ne[3]      = t->ne[2];
    v.nb[3]      = (int64_t) t->nb[2];
    v.ne[2]      = t->ne[1];
    v.nb[2]      = (int64_t) t->nb[1];
    v.ne[1]      = 1;
    return v;
}

int stride_of(const wsp_ggml_tensor * t) {
    int32_t v;
    std::memcpy(&v, &t->op_params[0], sizeof(v));
    return v;
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * k = t->src[0];
    const wsp_ggml_tensor * x = t->src[1];
    if (t->type != WSP_GGML_TYPE_F32 || !is_float_type(k->type) || !is_float_type(x->type) || stride_of(t) <= 0) {
        return false;
    }
    if (t->op == WSP_GGML_OP_CONV_TRANSPOSE_1D) {
        return k->ne[2] == x->ne[1] && t->ne[1] == k->ne[1] && x->ne[2] == 1 && t->ne[2] == 1;
    }
    return k->ne[3] == x->ne[2] && t->ne[2] == k->ne[2] && t->ne[3] == x->ne[3];
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const bool       one_d = t->op == WSP_GGML_OP_CONV_TRANSPOSE_1D;
    const TensorView k     = one_d ? as_one_row(t->src[0]) : view_of(t->src[0]);
    const TensorView x     = one_d ? as_one_row(t->src[1]) : view_of(t->src[1]);
    const TensorView d     = one_d ? as_one_row(t) : view_of(t);
    const int64_t    rows  = d.ne[1] * d.ne[2] * d.ne[3];
    const RowGrid    g     = row_grid(d.ne[0], rows);
    gpu::launch(conv_transpose_kernel, g.grid, g.block, 0, ctx.stream, k, x, d, stride_of(t), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_conv_transpose() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
