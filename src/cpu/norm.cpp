// NORM: y = (x - mean) / sqrt(var + eps) per row. Precision with a large mean and a small spread:
// the mean is summed over x - x[0] (exact differences when the values are close), kept as a
// float pair hi + lo, and (x - hi) - lo forms the deviations, so no float rounding of the mean
// leaks into the output. In place is safe: each element is read before it is written.

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

using namespace simd;

// sum of (x - shift), float vectors added up in double
double shifted_sum(const float * x, int64_t n, float shift) {
    const VecF vs = vset1(shift);
    VecF       a0 = vzero(), a1 = vzero();
    int64_t    i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        a0 = vadd(a0, vsub(vload(x + i), vs));
        a1 = vadd(a1, vsub(vload(x + i + LANES), vs));
    }
    double s = (double) vhsum(a0) + (double) vhsum(a1);
    for (; i < n; ++i) {
        s += (double) (x[i] - shift);
    }
    return s;
}

inline VecF deviation(VecF x, VecF hi, VecF lo) {
    return vsub(vsub(x, hi), lo);
}

double sum_sq_dev(const float * x, int64_t n, float hi, float lo) {
    const VecF vh = vset1(hi), vl = vset1(lo);
    VecF       a0 = vzero(), a1 = vzero();
    int64_t    i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        const VecF d0 = deviation(vload(x + i), vh, vl);
        const VecF d1 = deviation(vload(x + i + LANES), vh, vl);
        a0            = vfma(d0, d0, a0);
        a1            = vfma(d1, d1, a1);
    }
    double s = (double) vhsum(a0) + (double) vhsum(a1);
    for (; i < n; ++i) {
        const float d = (x[i] - hi) - lo;
        s += (double) d * d;
    }
    return s;
}

void normalise(const float * x, float * y, int64_t n, float hi, float lo, float scale) {
    const VecF vh = vset1(hi), vl = vset1(lo), vs = vset1(scale);
    int64_t    i = 0;
    for (; i + LANES <= n; i += LANES) {
        vstore(y + i, vmul(deviation(vload(x + i), vh, vl), vs));
    }
    if (i < n) {
        const int r = (int) (n - i);
        vstore_n(y + i, vmul(deviation(vload_n(x + i, r), vh, vl), vs), r);
    }
}

size_t task_floats(const wsp_ggml_tensor * dst) {
    return (size_t) ((dst->ne[0] + 15) / 16 * 16) + 16;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_floats(dst) * sizeof(float);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const float             eps = get_op_param_f32(dst, 0);
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    const bool              f32_in  = a->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float);
    const bool              f32_out = dst->type == WSP_GGML_TYPE_F32 && dst->nb[0] == sizeof(float);
    float * tmp = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + (size_t) p.ith * task_floats(dst) * 4);

    int64_t r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        xd = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        const float * x  = reinterpret_cast<const float *>(xa);
        if (!f32_in) {
            strided_row_to_f32(a->type, xa, a->nb[0], tmp, ne0);
            x = tmp;
        }
        const double mean  = (double) x[0] + shifted_sum(x, ne0, x[0]) / (double) ne0;
        const float  hi    = (float) mean;
        const float  lo    = (float) (mean - (double) hi);
        const double var   = sum_sq_dev(x, ne0, hi, lo) / (double) ne0;
        const float  scale = (float) (1.0 / std::sqrt(var + (double) eps));
        if (f32_out) {
            normalise(x, reinterpret_cast<float *>(xd), ne0, hi, lo, scale);
        } else {
            normalise(x, tmp, ne0, hi, lo, scale);
            strided_row_from_f32(dst->type, tmp, xd, dst->nb[0], ne0);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type);
}

} // namespace

const OpKernel kernel_norm = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
