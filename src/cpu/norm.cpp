// NORM: y = (x - mean) / sqrt(var + eps) per row. Sums are taken in float vectors and added up
// in double, so long rows keep their precision; in place is safe (a row is read before written).

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

void row_stats(const float * x, int64_t n, double & mean, double & var) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        s += x[i];
    }
    mean          = s / (double) n;
    const float m = (float) mean;
    double      v = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - m;
        v += (double) (d * d);
    }
    var = v / (double) n;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * ((size_t) dst->ne[0] * sizeof(float) + 64);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const float             eps = get_op_param_f32(dst, 0);
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    float * tmp =
        reinterpret_cast<float *>(static_cast<char *>(p.wdata) + (size_t) p.ith * ((size_t) ne0 * sizeof(float) + 64));
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        xd = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        strided_row_to_f32(a->type, xa, a->nb[0], tmp, ne0);
        double mean, var;
        row_stats(tmp, ne0, mean, var);
        const float m     = (float) mean;
        const float scale = (float) (1.0 / std::sqrt(var + (double) eps));
        if (dst->type == WSP_GGML_TYPE_F32 && dst->nb[0] == sizeof(float)) {
            float * y = reinterpret_cast<float *>(xd);
            for (int64_t i = 0; i < ne0; ++i) {
                y[i] = (tmp[i] - m) * scale;
            }
        } else {
            for (int64_t i = 0; i < ne0; ++i) {
                store_f(dst->type, xd + i * dst->nb[0], (tmp[i] - m) * scale);
            }
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type);
}

} // namespace

const OpKernel kernel_norm = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
