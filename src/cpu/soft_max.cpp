// SOFT_MAX: y = softmax(x * scale + slope * mask) per row, where slope is the ALiBi slope of
// the row's head (dim 2) when max_bias > 0, else 1. The mask row is mask[:, i1, i2 % ne2, i3 % ne3].
// A row that is entirely -inf gives zeros rather than NaN.

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

float alibi_slope(float max_bias, int64_t head, int64_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0f;
    }
    const int64_t n_head_log2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
    const float   m0          = std::pow(2.0f, -max_bias / (float) n_head_log2);
    const float   m1          = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_head_log2);
    return head < n_head_log2 ? std::pow(m0, (float) (head + 1)) : std::pow(m1, (float) (2 * (head - n_head_log2) + 1));
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * ((size_t) dst->ne[0] * sizeof(float) + 64);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a        = dst->src[0];
    const wsp_ggml_tensor * mask     = dst->src[1];
    const float             scale    = get_op_param_f32(dst, 0);
    const float             max_bias = get_op_param_f32(dst, 1);
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    float * w =
        reinterpret_cast<float *>(static_cast<char *>(p.wdata) + (size_t) p.ith * ((size_t) ne0 * sizeof(float) + 64));

    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float * x = reinterpret_cast<const float *>(static_cast<const char *>(a->data) + i1 * a->nb[1] +
                                                          i2 * a->nb[2] + i3 * a->nb[3]);
        float *       y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                              i3 * dst->nb[3]);
        for (int64_t i = 0; i < ne0; ++i) {
            w[i] = x[i] * scale;
        }
        if (mask != nullptr) {
            const float  slope = alibi_slope(max_bias, i2, ne2);
            const char * mrow  = static_cast<const char *>(mask->data) + i1 * mask->nb[1] +
                                (i2 % mask->ne[2]) * mask->nb[2] + (i3 % mask->ne[3]) * mask->nb[3];
            if (mask->type == WSP_GGML_TYPE_F32) {
                const float * m = reinterpret_cast<const float *>(mrow);
                for (int64_t i = 0; i < ne0; ++i) {
                    w[i] += slope * m[i];
                }
            } else {
                const uint16_t * m = reinterpret_cast<const uint16_t *>(mrow);
                for (int64_t i = 0; i < ne0; ++i) {
                    w[i] += slope * fp16_to_fp32(m[i]);
                }
            }
        }
        const float mx = vec_max(w, ne0);
        if (mx == -INFINITY) {
            for (int64_t i = 0; i < ne0; ++i) {
                y[i] = 0.0f;
            }
            continue;
        }
        const float sum = vec_exp_sub_sum(w, y, ne0, mx);
        vec_scale(y, ne0, 1.0f / sum);
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const wsp_ggml_tensor * mask = dst->src[1];
    return dst->type == WSP_GGML_TYPE_F32 && a->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float) &&
           dst->nb[0] == sizeof(float) &&
           (mask == nullptr || mask->type == WSP_GGML_TYPE_F32 || mask->type == WSP_GGML_TYPE_F16);
}

} // namespace

const OpKernel kernel_soft_max = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
