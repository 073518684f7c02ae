// RMS_NORM (y = x / sqrt(mean(x^2) + eps)), L2_NORM (y = x / max(||x||, eps)) per row, and
// GROUP_NORM: dim 2's channels split into n_groups groups of ceil(ne2 / n_groups) (the last ones
// shorter or empty), each group of each i3 normalised by its mean and variance over ne0 * ne1 *
// channels values. F32/F16/BF16 in and out, any strides; sums in double. Every value a row or a
// group needs is read before any of it is written, by one task, so in place is safe.

#include "ops.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

const char * elem(const wsp_ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

bool f32_packed(const wsp_ggml_tensor * t) {
    return t->type == WSP_GGML_TYPE_F32 && t->nb[0] == sizeof(float);
}

double sum_sq(const wsp_ggml_tensor * a, const char * x) {
    double s = 0.0;
    if (f32_packed(a)) {
        const float * v = reinterpret_cast<const float *>(x);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            s += (double) v[i] * v[i];
        }
        return s;
    }
    for (int64_t i = 0; i < a->ne[0]; ++i) {
        const double v = load_f(a->type, x + i * a->nb[0]);
        s += v * v;
    }
    return s;
}

// y = x * scale over one row
void scale_row(const wsp_ggml_tensor * a, const char * x, wsp_ggml_tensor * d, char * y, float scale) {
    if (f32_packed(a) && f32_packed(d)) {
        const float * xv = reinterpret_cast<const float *>(x);
        float *       yv = reinterpret_cast<float *>(y);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            yv[i] = xv[i] * scale;
        }
        return;
    }
    for (int64_t i = 0; i < a->ne[0]; ++i) {
        store_f(d->type, y + i * d->nb[0], load_f(a->type, x + i * a->nb[0]) * scale);
    }
}

void compute_rows(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const float             eps = get_op_param_f32(dst, 0);
    const int64_t           ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  x = elem(a, 0, i1, i2, i3);
        const double  s = sum_sq(a, x);
        float         scale;
        if (dst->op == WSP_GGML_OP_RMS_NORM) {
            scale = (float) (1.0 / std::sqrt(s / (double) a->ne[0] + (double) eps));
        } else {
            scale = (float) (1.0 / std::max(std::sqrt(s), (double) eps));
        }
        scale_row(a, x, dst, const_cast<char *>(elem(dst, 0, i1, i2, i3)), scale);
    }
}

// the sum of f(x) over the group's values
template <typename F>
double group_sum(const wsp_ggml_tensor * a, int64_t c0, int64_t c1, int64_t i3, F f) {
    double s = 0.0;
    for (int64_t i2 = c0; i2 < c1; ++i2) {
        for (int64_t i1 = 0; i1 < a->ne[1]; ++i1) {
            const char * x = elem(a, 0, i1, i2, i3);
            for (int64_t i0 = 0; i0 < a->ne[0]; ++i0) {
                s += f((double) load_f(a->type, x + i0 * a->nb[0]));
            }
        }
    }
    return s;
}

void compute_group(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a        = dst->src[0];
    const int64_t           n_groups = get_op_param_i32(dst, 0);
    const float             eps      = get_op_param_f32(dst, 1);
    const int64_t           per      = (a->ne[2] + n_groups - 1) / n_groups;
    int64_t                 j0, j1;
    split_range(n_groups * a->ne[3], p.ith, p.nth, j0, j1);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t g = j % n_groups, i3 = j / n_groups;
        const int64_t c0 = std::min(g * per, a->ne[2]), c1 = std::min(c0 + per, a->ne[2]);
        const double  n = (double) (a->ne[0] * a->ne[1] * (c1 - c0));
        if (n == 0.0) {
            continue;
        }
        const double mean  = group_sum(a, c0, c1, i3, [](double v) { return v; }) / n;
        const double var   = group_sum(a, c0, c1, i3, [mean](double v) { return (v - mean) * (v - mean); }) / n;
        const double scale = 1.0 / std::sqrt(var + (double) eps);
        for (int64_t i2 = c0; i2 < c1; ++i2) {
            for (int64_t i1 = 0; i1 < a->ne[1]; ++i1) {
                const char * x = elem(a, 0, i1, i2, i3);
                char *       y = const_cast<char *>(elem(dst, 0, i1, i2, i3));
                for (int64_t i0 = 0; i0 < a->ne[0]; ++i0) {
                    const double v = load_f(a->type, x + i0 * a->nb[0]);
                    store_f(dst->type, y + i0 * dst->nb[0], (float) ((v - mean) * scale));
                }
            }
        }
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    if (dst->op == WSP_GGML_OP_GROUP_NORM) {
        compute_group(p, dst);
    } else {
        compute_rows(p, dst);
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && wsp_ggml_are_same_shape(dst, dst->src[0]) &&
           (dst->op != WSP_GGML_OP_GROUP_NORM || get_op_param_i32(dst, 0) > 0);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    if (dst->op != WSP_GGML_OP_GROUP_NORM) {
        return tasks_by_rows(dst, n_threads);
    }
    const int64_t jobs = (int64_t) get_op_param_i32(dst, 0) * dst->ne[3];
    const int     n    = tasks_for_elements(wsp_ggml_nelements(dst), n_threads);
    return (int) (jobs < n ? (jobs < 1 ? 1 : jobs) : n);
}

} // namespace

const OpKernel kernel_rms_norm = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
