// FLASH_ATTN_EXT: for each query row, softmax(scale * q.k (softcapped) + slope * mask) . v
// with an online softmax (running max and sum), so no n_kv-sized score row is stored.
// q F32/F16, k/v F16/F32/BF16; result [Dv, n_head, n_q, ne3] (permuted).

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

size_t task_floats(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * q = dst->src[0];
    const wsp_ggml_tensor * v = dst->src[2];
    return (size_t) (q->ne[0] + 2 * v->ne[0]) + 16;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_floats(dst) * sizeof(float);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * q        = dst->src[0];
    const wsp_ggml_tensor * k        = dst->src[1];
    const wsp_ggml_tensor * v        = dst->src[2];
    const wsp_ggml_tensor * mask     = dst->src[3];
    const float             scale    = get_op_param_f32(dst, 0);
    const float             max_bias = get_op_param_f32(dst, 1);
    const float             softcap  = get_op_param_f32(dst, 2);

    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t n_q = q->ne[1], n_head = q->ne[2];
    const int64_t rk2 = q->ne[2] / k->ne[2], rk3 = q->ne[3] / k->ne[3];

    float * qf  = static_cast<float *>(p.wdata) + (size_t) p.ith * task_floats(dst);
    float * kf  = qf + D;
    float * acc = kf + (D > Dv ? D : Dv);
    (void) kf;

    int64_t r0, r1;
    split_range(n_q * n_head * q->ne[3], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t iq1 = r % n_q, iq2 = (r / n_q) % n_head, iq3 = r / (n_q * n_head);
        const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;
        strided_row_to_f32(q->type,
                           static_cast<const char *>(q->data) + iq1 * q->nb[1] + iq2 * q->nb[2] + iq3 * q->nb[3],
                           q->nb[0], qf, D);
        const float  slope = alibi_slope(max_bias, iq2, n_head);
        const char * mrow  = mask ? static_cast<const char *>(mask->data) + iq1 * mask->nb[1] +
                                       (iq2 % mask->ne[2]) * mask->nb[2] + (iq3 % mask->ne[3]) * mask->nb[3]
                                  : nullptr;
        float        M     = -INFINITY;
        float        S     = 0.0f;
        for (int64_t i = 0; i < Dv; ++i) {
            acc[i] = 0.0f;
        }
        for (int64_t ic = 0; ic < n_kv; ++ic) {
            const float mv = mrow ? slope * load_f(mask->type, mrow + ic * mask->nb[0]) : 0.0f;
            if (mv == -INFINITY) {
                continue;
            }
            const char * krow = static_cast<const char *>(k->data) + ic * k->nb[1] + ik2 * k->nb[2] + ik3 * k->nb[3];
            float        s    = 0.0f;
            for (int64_t i = 0; i < D; ++i) {
                s += qf[i] * load_f(k->type, krow + i * k->nb[0]);
            }
            s *= scale;
            if (softcap != 0.0f) {
                s = softcap * std::tanh(s / softcap);
            }
            s += mv;
            const char * vrow = static_cast<const char *>(v->data) + ic * v->nb[1] + ik2 * v->nb[2] + ik3 * v->nb[3];
            if (s > M) {
                const float ms = std::exp(M - s); // rescale what was accumulated under the old max
                M              = s;
                S              = S * ms + 1.0f;
                for (int64_t i = 0; i < Dv; ++i) {
                    acc[i] = acc[i] * ms + load_f(v->type, vrow + i * v->nb[0]);
                }
            } else {
                const float vs = std::exp(s - M);
                S += vs;
                for (int64_t i = 0; i < Dv; ++i) {
                    acc[i] += vs * load_f(v->type, vrow + i * v->nb[0]);
                }
            }
        }
        float * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + iq2 * dst->nb[1] + iq1 * dst->nb[2] +
                                                iq3 * dst->nb[3]);
        const float inv = S > 0.0f ? 1.0f / S : 0.0f;
        for (int64_t i = 0; i < Dv; ++i) {
            out[i] = acc[i] * inv;
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * q    = dst->src[0];
    const wsp_ggml_tensor * k    = dst->src[1];
    const wsp_ggml_tensor * v    = dst->src[2];
    const wsp_ggml_tensor * mask = dst->src[3];
    return dst->type == WSP_GGML_TYPE_F32 && is_float_type(q->type) && is_float_type(k->type) &&
           is_float_type(v->type) && (mask == nullptr || is_float_type(mask->type));
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * q = dst->src[0];
    const wsp_ggml_tensor * k = dst->src[1];
    return tasks_for_elements(q->ne[1] * q->ne[2] * q->ne[3] * k->ne[1] * q->ne[0], n_threads, 65536);
}

} // namespace

const OpKernel kernel_flash_attn = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
