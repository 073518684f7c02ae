// IM2COL (op_params s0, s1, p0, p1, d0, d1, is_2D): dst[(ic*KH + kh)*KW + kw, ow, oh, n] =
// src[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n], zero outside the input; the 1-D form has
// KH = OH = 1, drops the h terms and takes ic from dim 1 and n from dim 2. Source F32/F16, dst
// F32/F16/BF16, any strides. One thread per dst element, consecutive threads along dst's dim 0,
// so the (K times larger) dst is written coalesced while the source is gathered.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

struct Conv {
    int     s0, s1, p0, p1, d0, d1;
    bool    is_2d;
    int64_t KW, KH, IW, IH, OW, OH;
};

// x covers dst's dim 0 (IC*KH*KW), y strides over the OW*OH*N dst rows (gridDim.y <= 65535)
__global__ void im2col_kernel(TensorView src, TensorView d, Conv c, int64_t rows) {
    const int64_t k = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= d.ne[0]) {
        return;
    }
    // the kernel tap this thread fills, the same for every row
    const int64_t kw = k % c.KW, kh = (k / c.KW) % c.KH, ic = k / (c.KW * c.KH);
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t ow = r % c.OW, oh = (r / c.OW) % c.OH, n = r / (c.OW * c.OH);
        const int64_t iw = ow * c.s0 + kw * c.d0 - c.p0;
        const int64_t ih = oh * c.s1 + kh * c.d1 - c.p1; // unused (and oh = kh = 0) in 1-D
        char *        pd = d.data + k * d.nb[0] + ow * d.nb[1] + (c.is_2d ? oh * d.nb[2] + n * d.nb[3] : n * d.nb[2]);
        float         v  = 0.0f;
        if (iw >= 0 && iw < c.IW && (!c.is_2d || (ih >= 0 && ih < c.IH))) {
            const char * ps =
                src.data + iw * src.nb[0] +
                (c.is_2d ? ih * src.nb[1] + ic * src.nb[2] + n * src.nb[3] : ic * src.nb[1] + n * src.nb[2]);
            v = load_f(src.type, ps);
        }
        store_f(d.type, pd, v);
    }
}

int32_t param(const wsp_ggml_tensor * t, int i) {
    int32_t v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

Conv conv_of(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * k = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    Conv                    c;
    c.s0    = param(t, 0);
    c.s1    = param(t, 1);
    c.p0    = param(t, 2);
    c.p1    = param(t, 3);
    c.d0    = param(t, 4);
    c.d1    = param(t, 5);
    c.is_2d = param(t, 6) == 1;
    c.KW    = k->ne[0];
    c.KH    = c.is_2d ? k->ne[1] : 1;
    c.IW    = b->ne[0];
    c.IH    = c.is_2d ? b->ne[1] : 1;
    c.OW    = t->ne[1];
    c.OH    = c.is_2d ? t->ne[2] : 1;
    return c;
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * b = t->src[1];
    if (!is_float_type(t->type) || (b->type != WSP_GGML_TYPE_F32 && b->type != WSP_GGML_TYPE_F16)) {
        return false;
    }
    const Conv    c  = conv_of(t);
    const int64_t ic = c.is_2d ? b->ne[2] : b->ne[1];
    const int64_t n  = c.is_2d ? b->ne[3] : b->ne[2];
    // dst's dim 0 must be exactly the taps the kernel decomposes (so ic < IC) and its batch the
    // source's (so n < N): the kernel indexes the source with both unchecked
    const bool batch = c.is_2d ? t->ne[3] == n : (t->ne[2] == n && t->ne[3] == 1);
    return c.KW > 0 && c.KH > 0 && t->ne[0] == ic * c.KH * c.KW && batch;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const Conv    c    = conv_of(t);
    const int64_t rows = c.OW * c.OH * (c.is_2d ? t->ne[3] : t->ne[2]);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(im2col_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[1]), view_of(t), c, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_im2col() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
