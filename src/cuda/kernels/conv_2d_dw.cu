// CONV_2D_DW (direct depthwise 2-D convolution): dst[ow, oh, c, n] = sum_{kx, ky}
// k[kx, ky, 0, c] * src[ow*s0 + kx*d0 - p0, oh*s1 + ky*d1 - p1, c, n], zero outside the input.
// Kernel, input and dst F32/F16/BF16 with any strides: channels first or channels innermost (a
// permuted [C, W, H, N]). One thread per dst element, consecutive threads along dst's innermost
// dim (ow, or c when the channels are innermost) so that dst and the input stay coalesced.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

struct Dw {
    int  s0, s1, p0, p1, d0, d1;
    bool ch_inner; // walk c fastest
};

__global__ void conv_2d_dw_kernel(TensorView k, TensorView x, TensorView d, Dw g, int64_t n_elems) {
    const int64_t OW = d.ne[0], OH = d.ne[1], C = d.ne[2];
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n_elems;
         i += (int64_t) gridDim.x * blockDim.x) {
        int64_t ow, oh, c, n;
        if (g.ch_inner) {
            c  = i % C;
            ow = (i / C) % OW;
            oh = (i / (C * OW)) % OH;
            n  = i / (C * OW * OH);
        } else {
            ow = i % OW;
            oh = (i / OW) % OH;
            c  = (i / (OW * OH)) % C;
            n  = i / (OW * OH * C);
        }
        float acc = 0.0f;
        for (int64_t ky = 0; ky < k.ne[1]; ++ky) {
            const int64_t iy = oh * g.s1 + ky * g.d1 - g.p1;
            if (iy < 0 || iy >= x.ne[1]) {
                continue;
            }
            for (int64_t kx = 0; kx < k.ne[0]; ++kx) {
                const int64_t ix = ow * g.s0 + kx * g.d0 - g.p0;
                if (ix < 0 || ix >= x.ne[0]) {
                    continue;
                }
                acc += load_f(k.type, elem(k, kx, ky, 0, c)) * load_f(x.type, elem(x, ix, iy, c, n));
            }
        }
        store_f(d.type, elem(d, ow, oh, c, n), acc);
    }
}

int32_t param(const wsp_ggml_tensor * t, int i) {
    int32_t v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * k = t->src[0];
    const wsp_ggml_tensor * x = t->src[1];
    return is_float_type(t->type) && is_float_type(k->type) && is_float_type(x->type) && k->ne[2] == 1 &&
           k->ne[3] == x->ne[2] && t->ne[2] == x->ne[2] && t->ne[3] == x->ne[3];
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const Dw g{ param(t, 0), param(t, 1), param(t, 2), param(t, 3), param(t, 4), param(t, 5), t->nb[2] < t->nb[0] };
    const int64_t n       = wsp_ggml_nelements(t);
    const int     threads = 256;
    const int64_t blocks  = (n + threads - 1) / threads;
    gpu::launch(conv_2d_dw_kernel,
                dim3((unsigned) (blocks < 1       ? 1
                                 : blocks < 65535 ? blocks
                                                  : 65535)),
                dim3(threads), 0, ctx.stream, view_of(t->src[0]), view_of(t->src[1]), view_of(t), g, n);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_conv_2d_dw() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
