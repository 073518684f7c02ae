// UPSCALE (op_params[0]: the wsp_ggml_scale_mode): dst's element takes the source element at
// i / sf in every dim (sf = dst ne / src ne, as a float), NEAREST; BILINEAR interpolates dims 0
// and 1 with half-pixel centres (x = (i + 0.5) / sf - 0.5, neighbours clamped to the edge) and
// takes dims 2 and 3 by nearest. ARANGE: start + i * step. TIMESTEP_EMBEDDING: per timestep t,
// cos(t f_j) in column j and sin(t f_j) in column half + j, f_j = max_period^(-j / half), zeros
// after 2 * half. The position math of the last two runs in double (the CUDA kernels do the
// same), so both backends round the same exact value once.

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

inline const char * at(const wsp_ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// source coordinate of a bilinear sample: the two neighbours and the weight of the second
struct Tap {
    int64_t lo, hi;
    float   w;
};

inline Tap bilinear_tap(int64_t i, float sf, int64_t n) {
    const float   x  = ((float) i + 0.5f) / sf - 0.5f;
    const float   fx = std::floor(x);
    const int64_t x0 = (int64_t) fx;
    Tap           t;
    t.lo = x0 < 0 ? 0 : (x0 > n - 1 ? n - 1 : x0);
    t.hi = x0 + 1 < 0 ? 0 : (x0 + 1 > n - 1 ? n - 1 : x0 + 1);
    t.w  = std::fmin(std::fmax(x - fx, 0.0f), 1.0f);
    return t;
}

void upscale_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a        = dst->src[0];
    const bool              bilinear = dst->op_params[0] == WSP_GGML_SCALE_MODE_BILINEAR;
    float                   sf[4];
    for (int i = 0; i < 4; ++i) {
        sf[i] = (float) dst->ne[i] / (float) a->ne[i];
    }
    int64_t r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const int64_t j2 = (int64_t) ((float) i2 / sf[2]), j3 = (int64_t) ((float) i3 / sf[3]);
        char *        d = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (!bilinear) {
            const int64_t j1 = (int64_t) ((float) i1 / sf[1]);
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                const int64_t j0 = (int64_t) ((float) i0 / sf[0]);
                store_f(dst->type, d + i0 * dst->nb[0], load_f(a->type, at(a, j0, j1, j2, j3)));
            }
            continue;
        }
        const Tap ty = bilinear_tap(i1, sf[1], a->ne[1]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            const Tap   tx  = bilinear_tap(i0, sf[0], a->ne[0]);
            const float v00 = load_f(a->type, at(a, tx.lo, ty.lo, j2, j3));
            const float v01 = load_f(a->type, at(a, tx.hi, ty.lo, j2, j3));
            const float v10 = load_f(a->type, at(a, tx.lo, ty.hi, j2, j3));
            const float v11 = load_f(a->type, at(a, tx.hi, ty.hi, j2, j3));
            const float v   = v00 * (1.0f - tx.w) * (1.0f - ty.w) + v01 * tx.w * (1.0f - ty.w) +
                            v10 * (1.0f - tx.w) * ty.w + v11 * tx.w * ty.w;
            store_f(dst->type, d + i0 * dst->nb[0], v);
        }
    }
}

bool upscale_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const int32_t           mode = dst->op_params[0];
    return is_float_type(dst->type) && is_float_type(a->type) &&
           (mode == WSP_GGML_SCALE_MODE_NEAREST || mode == WSP_GGML_SCALE_MODE_BILINEAR) && !wsp_ggml_is_empty(a);
}

void arange_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const float start = get_op_param_f32(dst, 0), step = get_op_param_f32(dst, 2);
    int64_t     i0, i1;
    split_range(dst->ne[0], p.ith, p.nth, i0, i1);
    for (int64_t i = i0; i < i1; ++i) {
        *reinterpret_cast<float *>(static_cast<char *>(dst->data) + i * dst->nb[0]) =
            (float) ((double) start + (double) step * (double) i);
    }
}

bool arange_supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32;
}

int arange_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(dst->ne[0], n_threads);
}

void timestep_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * ts         = dst->src[0];
    const int64_t           half       = dst->op_params[0] / 2;
    const double            log_period = std::log((double) dst->op_params[1]);
    int64_t                 r0, r1;
    split_range(dst->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const double t = (double) *reinterpret_cast<const float *>(at(ts, r, 0, 0, 0));
        char *       d = static_cast<char *>(dst->data) + r * dst->nb[1];
        for (int64_t j = 0; j < half; ++j) {
            const double arg                               = t * std::exp(-log_period * (double) j / (double) half);
            *reinterpret_cast<float *>(d + j * dst->nb[0]) = (float) std::cos(arg);
            *reinterpret_cast<float *>(d + (half + j) * dst->nb[0]) = (float) std::sin(arg);
        }
        for (int64_t j = 2 * half; j < dst->ne[0]; ++j) {
            *reinterpret_cast<float *>(d + j * dst->nb[0]) = 0.0f;
        }
    }
}

bool timestep_supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32 && dst->src[0]->type == WSP_GGML_TYPE_F32 &&
           dst->ne[1] == dst->src[0]->ne[0] && dst->ne[0] >= 2 * (dst->op_params[0] / 2) && dst->op_params[1] > 0;
}

} // namespace

const OpKernel kernel_upscale  = { upscale_supported, tasks_by_rows, nullptr, upscale_compute };
const OpKernel kernel_arange   = { arange_supported, arange_tasks, nullptr, arange_compute };
const OpKernel kernel_timestep = { timestep_supported, tasks_by_rows, nullptr, timestep_compute };

} // namespace wsp::cpu
