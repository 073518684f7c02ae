// CONV_2D_DW (direct depthwise 2-D convolution): dst[ow, oh, c, n] = sum_{kx, ky}
// k[kx, ky, 0, c] * src[ow*s0 + kx*d0 - p0, oh*s1 + ky*d1 - p1, c, n], zero outside the input.
// Kernel and input F32/F16/BF16 with any strides, so both the channels-first [W, H, C, N] and
// the channels-innermost layout (a permuted [C, W, H, N]) run; dst is written in its own layout,
// walking channels innermost when its channels are. The kernel is converted to F32 once.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

constexpr int64_t CH_BLOCK = 16; // channels per work unit

struct Dw {
    int s0, s1, p0, p1, d0, d1;
};

Dw dw_of(const wsp_ggml_tensor * dst) {
    return { get_op_param_i32(dst, 0), get_op_param_i32(dst, 1), get_op_param_i32(dst, 2),
             get_op_param_i32(dst, 3), get_op_param_i32(dst, 4), get_op_param_i32(dst, 5) };
}

size_t work_size(const wsp_ggml_tensor * dst, int) {
    const wsp_ggml_tensor * k = dst->src[0];
    return (size_t) (k->ne[0] * k->ne[1] * k->ne[3]) * sizeof(float);
}

// one output element: the taps of channel c over the input plane of (c, n)
inline float tap_sum(const wsp_ggml_tensor * b, const char * plane, const float * kc, int64_t KW, int64_t KH,
                     int64_t ix0, int64_t iy0, const Dw & g) {
    const bool f32 = b->type == WSP_GGML_TYPE_F32;
    float      acc = 0.0f;
    for (int64_t ky = 0; ky < KH; ++ky) {
        const int64_t iy = iy0 + ky * g.d1;
        if (iy < 0 || iy >= b->ne[1]) {
            continue;
        }
        const char * row = plane + iy * b->nb[1];
        for (int64_t kx = 0; kx < KW; ++kx) {
            const int64_t ix = ix0 + kx * g.d0;
            if (ix < 0 || ix >= b->ne[0]) {
                continue;
            }
            const char * e = row + ix * b->nb[0];
            acc += kc[ky * KW + kx] * (f32 ? *reinterpret_cast<const float *>(e) : load_f(b->type, e));
        }
    }
    return acc;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * k  = dst->src[0];
    const wsp_ggml_tensor * b  = dst->src[1];
    const Dw                g  = dw_of(dst);
    const int64_t           KW = k->ne[0], KH = k->ne[1], C = dst->ne[2];
    const int64_t           OW = dst->ne[0], OH = dst->ne[1], N = dst->ne[3];
    float *                 kf = static_cast<float *>(p.wdata); // [KW*KH, C]

    int64_t c0, c1;
    split_range(C, p.ith, p.nth, c0, c1);
    for (int64_t c = c0; c < c1; ++c) {
        for (int64_t ky = 0; ky < KH; ++ky) {
            strided_row_to_f32(k->type, static_cast<const char *>(k->data) + ky * k->nb[1] + c * k->nb[3], k->nb[0],
                               kf + (c * KH + ky) * KW, KW);
        }
    }
    p.barrier();

    // units: (channel block, oh, n); channels innermost in dst -> walk them innermost
    const bool    ch_inner = dst->nb[2] < dst->nb[0];
    const int64_t n_cb     = (C + CH_BLOCK - 1) / CH_BLOCK;
    const int64_t units    = n_cb * OH * N;
    for (int64_t u = p.next_chunk(); u < units; u = p.next_chunk()) {
        const int64_t cb = u % n_cb, oh = (u / n_cb) % OH, n = u / (n_cb * OH);
        const int64_t cs = cb * CH_BLOCK, ce = cs + CH_BLOCK < C ? cs + CH_BLOCK : C;
        const int64_t iy0 = oh * g.s1 - g.p1;
        auto          one = [&](int64_t ow, int64_t c) {
            const char * plane = static_cast<const char *>(b->data) + c * b->nb[2] + n * b->nb[3];
            const float  v     = tap_sum(b, plane, kf + c * KW * KH, KW, KH, ow * g.s0 - g.p0, iy0, g);
            store_f(dst->type,
                             static_cast<char *>(dst->data) + ow * dst->nb[0] + oh * dst->nb[1] + c * dst->nb[2] +
                                 n * dst->nb[3],
                             v);
        };
        if (ch_inner) {
            for (int64_t ow = 0; ow < OW; ++ow) {
                for (int64_t c = cs; c < ce; ++c) {
                    one(ow, c);
                }
            }
        } else {
            for (int64_t c = cs; c < ce; ++c) {
                for (int64_t ow = 0; ow < OW; ++ow) {
                    one(ow, c);
                }
            }
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && is_float_type(dst->src[1]->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * k = dst->src[0];
    return tasks_for_elements(wsp_ggml_nelements(dst) * k->ne[0] * k->ne[1], n_threads);
}

} // namespace

const OpKernel kernel_conv_2d_dw = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
