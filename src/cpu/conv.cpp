// IM2COL (1-D and 2-D) and PAD_REFLECT_1D.
// im2col: dst[(ic*KH + kh)*KW + kw, ow, oh, n] = src[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n],
// zero outside the input; the 1-D form drops the h terms and takes n from dim 2.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

void im2col_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * k     = dst->src[0];
    const wsp_ggml_tensor * b     = dst->src[1];
    const int32_t           s0    = get_op_param_i32(dst, 0);
    const int32_t           s1    = get_op_param_i32(dst, 1);
    const int32_t           p0    = get_op_param_i32(dst, 2);
    const int32_t           p1    = get_op_param_i32(dst, 3);
    const int32_t           d0    = get_op_param_i32(dst, 4);
    const int32_t           d1    = get_op_param_i32(dst, 5);
    const bool              is_2d = get_op_param_i32(dst, 6) == 1;

    const int64_t KW = k->ne[0];
    const int64_t KH = is_2d ? k->ne[1] : 1;
    const int64_t IC = is_2d ? b->ne[2] : b->ne[1];
    const int64_t IW = b->ne[0];
    const int64_t IH = is_2d ? b->ne[1] : 1;
    const int64_t OW = dst->ne[1];
    const int64_t OH = is_2d ? dst->ne[2] : 1;
    const int64_t N  = is_2d ? dst->ne[3] : dst->ne[2];

    // one dst row per (ow, oh, n)
    int64_t r0, r1;
    split_range(OW * OH * N, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ow = r % OW, oh = (r / OW) % OH, n = r / (OW * OH);
        char *        drow = static_cast<char *>(dst->data) + ow * dst->nb[1] +
                      (is_2d ? oh * dst->nb[2] + n * dst->nb[3] : n * dst->nb[2]);
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t kh = 0; kh < KH; ++kh) {
                const int64_t ih = oh * s1 + kh * d1 - p1;
                for (int64_t kw = 0; kw < KW; ++kw) {
                    const int64_t iw = ow * s0 + kw * d0 - p0;
                    float         v  = 0.0f;
                    if (iw >= 0 && iw < IW && (!is_2d || (ih >= 0 && ih < IH))) {
                        const char * s =
                            static_cast<const char *>(b->data) + iw * b->nb[0] +
                            (is_2d ? ih * b->nb[1] + ic * b->nb[2] + n * b->nb[3] : ic * b->nb[1] + n * b->nb[2]);
                        v = load_f(b->type, s);
                    }
                    store_f(dst->type, drow + ((ic * KH + kh) * KW + kw) * dst->nb[0], v);
                }
            }
        }
    }
}

bool im2col_supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[1]->type);
}

int im2col_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(wsp_ggml_nelements(dst), n_threads, 8192);
}

void pad_reflect_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int32_t           p0  = get_op_param_i32(dst, 0);
    const int32_t           p1  = get_op_param_i32(dst, 1);
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float * x = reinterpret_cast<const float *>(static_cast<const char *>(a->data) + i1 * a->nb[1] +
                                                          i2 * a->nb[2] + i3 * a->nb[3]);
        float *       y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                              i3 * dst->nb[3]);
        for (int64_t i = 0; i < p0; ++i) {
            y[i] = x[p0 - i];
        }
        for (int64_t i = 0; i < ne0; ++i) {
            y[p0 + i] = x[i];
        }
        for (int64_t i = 0; i < p1; ++i) {
            y[p0 + ne0 + i] = x[ne0 - 2 - i];
        }
    }
}

bool pad_reflect_supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32 && dst->src[0]->type == WSP_GGML_TYPE_F32 &&
           dst->src[0]->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
}

} // namespace

const OpKernel kernel_im2col      = { im2col_supported, im2col_tasks, nullptr, im2col_compute };
const OpKernel kernel_pad_reflect = { pad_reflect_supported, tasks_by_rows, nullptr, pad_reflect_compute };

} // namespace wsp::cpu
