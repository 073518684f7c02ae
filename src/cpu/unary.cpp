// Elementwise functions of one tensor: the UNARY family, SQR, SQRT and SCALE, for F32/F16/BF16
// in any layout. Rows are gathered to F32 (when not already contiguous F32), transformed by the
// vectorised functions of vec.h, and stored back.

#include "ops.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

void apply(const wsp_ggml_tensor * dst, const float * x, float * y, int64_t n) {
    switch (dst->op) {
        case WSP_GGML_OP_SQR:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] * x[i];
            return;
        case WSP_GGML_OP_SQRT:
            for (int64_t i = 0; i < n; ++i)
                y[i] = std::sqrt(x[i]);
            return;
        case WSP_GGML_OP_SCALE: {
            const float s = get_op_param_f32(dst, 0);
            const float b = get_op_param_f32(dst, 1);
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] * s + b;
            return;
        }
        default: break;
    }
    switch (wsp_ggml_get_unary_op(dst)) {
        case WSP_GGML_UNARY_OP_ABS:
            for (int64_t i = 0; i < n; ++i)
                y[i] = std::fabs(x[i]);
            break;
        case WSP_GGML_UNARY_OP_SGN:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] > 0.0f ? 1.0f : (x[i] < 0.0f ? -1.0f : 0.0f);
            break;
        case WSP_GGML_UNARY_OP_NEG:
            for (int64_t i = 0; i < n; ++i)
                y[i] = -x[i];
            break;
        case WSP_GGML_UNARY_OP_STEP:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] > 0.0f ? 1.0f : 0.0f;
            break;
        case WSP_GGML_UNARY_OP_TANH: vec_tanh(x, y, n); break;
        case WSP_GGML_UNARY_OP_ELU:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
            break;
        case WSP_GGML_UNARY_OP_RELU:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
            break;
        case WSP_GGML_UNARY_OP_SIGMOID: vec_sigmoid(x, y, n); break;
        case WSP_GGML_UNARY_OP_GELU: vec_gelu(x, y, n); break;
        case WSP_GGML_UNARY_OP_GELU_ERF:
            for (int64_t i = 0; i < n; ++i)
                y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
            break;
        case WSP_GGML_UNARY_OP_GELU_QUICK:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
            break;
        case WSP_GGML_UNARY_OP_SILU: vec_silu(x, y, n); break;
        case WSP_GGML_UNARY_OP_HARDSWISH:
            for (int64_t i = 0; i < n; ++i)
                y[i] = x[i] * std::min(1.0f, std::max(0.0f, (x[i] + 3.0f) / 6.0f));
            break;
        case WSP_GGML_UNARY_OP_HARDSIGMOID:
            for (int64_t i = 0; i < n; ++i)
                y[i] = std::min(1.0f, std::max(0.0f, (x[i] + 3.0f) / 6.0f));
            break;
        case WSP_GGML_UNARY_OP_EXP: vec_exp(x, y, n); break;
        case WSP_GGML_UNARY_OP_COUNT: break;
    }
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    // two F32 rows per task for layouts that need gathering
    return (size_t) n_tasks * 2 * (size_t) dst->ne[0] * sizeof(float) + 64 * (size_t) n_tasks;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);

    const bool direct = a->type == WSP_GGML_TYPE_F32 && dst->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float) &&
                        dst->nb[0] == sizeof(float);
    float * tx = reinterpret_cast<float *>(static_cast<char *>(p.wdata) +
                                           (size_t) p.ith * (2 * (size_t) ne0 * sizeof(float) + 64));
    float * ty = tx + ne0;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        xd = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (direct) {
            apply(dst, reinterpret_cast<const float *>(xa), reinterpret_cast<float *>(xd), ne0);
            continue;
        }
        strided_row_to_f32(a->type, xa, a->nb[0], tx, ne0);
        apply(dst, tx, ty, ne0);
        for (int64_t i = 0; i < ne0; ++i) {
            store_f(dst->type, xd + i * dst->nb[0], ty[i]);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && wsp_ggml_are_same_shape(dst, dst->src[0]);
}

} // namespace

const OpKernel kernel_unary = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
