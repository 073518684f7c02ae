// Mamba's SSM_CONV and SSM_SCAN (F32). Both split the d_inner channels over the tasks: a channel's
// outputs and its state depend on that channel alone, so tasks never share a written byte. The
// scan keeps a channel's d_state values in the task's scratch across the tokens of a sequence
// and writes the final state once; dt goes through softplus (linear above 20, as upstream).

#include "ops.h"

#include <cmath>

namespace wsp::cpu {

namespace {

inline const float * f32_at(const wsp_ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2) {
    return reinterpret_cast<const float *>(static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] +
                                           i2 * t->nb[2]);
}

bool all_f32(const wsp_ggml_tensor * dst, int n_src) {
    if (dst->type != WSP_GGML_TYPE_F32) {
        return false;
    }
    for (int i = 0; i < n_src; ++i) {
        if (dst->src[i] == nullptr || dst->src[i]->type != WSP_GGML_TYPE_F32) {
            return false;
        }
    }
    return true;
}

// ---- SSM_CONV: out(i, t, s) = sum_k sx(t + k, i, s) * c(k, i), any strides

void conv_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * sx     = dst->src[0];
    const wsp_ggml_tensor * c      = dst->src[1];
    const int64_t           d_conv = c->ne[0], d_inner = c->ne[1], n_t = dst->ne[1], n_s = dst->ne[2];
    int64_t                 i0, i1;
    split_range(d_inner, p.ith, p.nth, i0, i1);
    for (int64_t s = 0; s < n_s; ++s) {
        for (int64_t t = 0; t < n_t; ++t) {
            float * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + t * dst->nb[1] + s * dst->nb[2]);
            for (int64_t i = i0; i < i1; ++i) {
                const char * xs  = static_cast<const char *>(sx->data) + t * sx->nb[0] + i * sx->nb[1] + s * sx->nb[2];
                const char * cs  = static_cast<const char *>(c->data) + i * c->nb[1];
                float        sum = 0.0f;
                for (int64_t k = 0; k < d_conv; ++k) {
                    sum += *reinterpret_cast<const float *>(xs + k * sx->nb[0]) *
                           *reinterpret_cast<const float *>(cs + k * c->nb[0]);
                }
                *reinterpret_cast<float *>(reinterpret_cast<char *>(out) + i * dst->nb[0]) = sum;
            }
        }
    }
}

bool conv_supported(const wsp_ggml_tensor * dst) {
    return all_f32(dst, 2);
}

int conv_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int64_t d_inner = dst->src[1]->ne[1];
    const int     by_size = tasks_for_elements(wsp_ggml_nelements(dst) * dst->src[1]->ne[0], n_threads);
    return (int) (d_inner < by_size ? (d_inner < 1 ? 1 : d_inner) : by_size);
}

// ---- SSM_SCAN

inline float softplus(float v) {
    return v <= 20.0f ? std::log1p(std::exp(v)) : v;
}

size_t scan_work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * (size_t) dst->src[0]->ne[0] * sizeof(float);
}

void scan_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * s0      = dst->src[0];
    const wsp_ggml_tensor * x       = dst->src[1];
    const wsp_ggml_tensor * dt      = dst->src[2];
    const wsp_ggml_tensor * A       = dst->src[3];
    const wsp_ggml_tensor * B       = dst->src[4];
    const wsp_ggml_tensor * C       = dst->src[5];
    const int64_t           d_state = s0->ne[0], d_inner = s0->ne[1], n_t = x->ne[1], n_s = x->ne[2];
    float *                 y     = static_cast<float *>(dst->data);
    float *                 s_out = y + wsp_ggml_nelements(x);
    float *                 st    = static_cast<float *>(p.wdata) + (size_t) p.ith * (size_t) d_state;

    int64_t i0, i1;
    split_range(d_inner, p.ith, p.nth, i0, i1);
    for (int64_t s = 0; s < n_s; ++s) {
        for (int64_t i = i0; i < i1; ++i) {
            const float * a    = f32_at(A, 0, i, 0);
            const float * init = f32_at(s0, 0, i, s);
            for (int64_t n = 0; n < d_state; ++n) {
                st[n] = init[n];
            }
            for (int64_t t = 0; t < n_t; ++t) {
                const float   dts  = softplus(*f32_at(dt, i, t, s));
                const float   x_dt = *f32_at(x, i, t, s) * dts;
                const float * b    = f32_at(B, 0, t, s);
                const float * cc   = f32_at(C, 0, t, s);
                float         sum  = 0.0f;
                for (int64_t n = 0; n < d_state; ++n) {
                    st[n] = st[n] * std::exp(dts * a[n]) + b[n] * x_dt;
                    sum += st[n] * cc[n];
                }
                y[(s * n_t + t) * d_inner + i] = sum;
            }
            float * out = s_out + (s * d_inner + i) * d_state;
            for (int64_t n = 0; n < d_state; ++n) {
                out[n] = st[n];
            }
        }
    }
}

bool scan_supported(const wsp_ggml_tensor * dst) {
    return all_f32(dst, 6) && wsp_ggml_is_contiguous(dst) && wsp_ggml_is_contiguous(dst->src[0]) &&
           wsp_ggml_is_contiguous(dst->src[3]);
}

int scan_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * s0      = dst->src[0];
    const int64_t           d_inner = s0->ne[1];
    const int               by_size = tasks_for_elements(wsp_ggml_nelements(dst->src[1]) * s0->ne[0], n_threads, 4096);
    return (int) (d_inner < by_size ? (d_inner < 1 ? 1 : d_inner) : by_size);
}

} // namespace

const OpKernel kernel_ssm_conv = { conv_supported, conv_tasks, nullptr, conv_compute };
const OpKernel kernel_ssm_scan = { scan_supported, scan_tasks, scan_work_size, scan_compute };

} // namespace wsp::cpu
