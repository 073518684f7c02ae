// Elementwise functions of one tensor: the UNARY family, SQR, SQRT and SCALE, for F32/F16/BF16
// in any layout. Contiguous F32 rows are transformed where they lie; other rows are gathered to
// F32 scratch, transformed by the vectorised functions of vec.h, and stored back. Every function
// maps x[i] to y[i] alone, so in place (dst aliasing src0) is safe.

#include "ops.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

// y = f(x) for the functions simple enough to be vectorised by the compiler
template <typename F>
inline void map_scalar(const float * x, float * y, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = f(x[i]);
    }
}

inline float hard_sigmoid(float v) {
    return std::min(1.0f, std::max(0.0f, (v + 3.0f) / 6.0f));
}

void apply_unary(wsp_ggml_unary_op op, const float * x, float * y, int64_t n) {
    switch (op) {
        case WSP_GGML_UNARY_OP_ABS: map_scalar(x, y, n, [](float v) { return std::fabs(v); }); break;
        case WSP_GGML_UNARY_OP_SGN:
            map_scalar(x, y, n, [](float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); });
            break;
        case WSP_GGML_UNARY_OP_NEG: map_scalar(x, y, n, [](float v) { return -v; }); break;
        case WSP_GGML_UNARY_OP_STEP: map_scalar(x, y, n, [](float v) { return v > 0.0f ? 1.0f : 0.0f; }); break;
        case WSP_GGML_UNARY_OP_TANH: vec_tanh(x, y, n); break;
        // expm1 keeps full relative precision near 0, where exp(x) - 1 would cancel
        case WSP_GGML_UNARY_OP_ELU: map_scalar(x, y, n, [](float v) { return v > 0.0f ? v : std::expm1(v); }); break;
        case WSP_GGML_UNARY_OP_RELU: map_scalar(x, y, n, [](float v) { return v > 0.0f ? v : 0.0f; }); break;
        case WSP_GGML_UNARY_OP_SIGMOID: vec_sigmoid(x, y, n); break;
        case WSP_GGML_UNARY_OP_GELU: vec_gelu(x, y, n); break;
        case WSP_GGML_UNARY_OP_GELU_ERF:
            map_scalar(x, y, n, [](float v) { return 0.5f * v * std::erfc(-v * 0.70710678118654752f); });
            break;
        case WSP_GGML_UNARY_OP_GELU_QUICK: vec_gelu_quick(x, y, n); break;
        case WSP_GGML_UNARY_OP_SILU: vec_silu(x, y, n); break;
        case WSP_GGML_UNARY_OP_HARDSWISH: map_scalar(x, y, n, [](float v) { return v * hard_sigmoid(v); }); break;
        case WSP_GGML_UNARY_OP_HARDSIGMOID: map_scalar(x, y, n, hard_sigmoid); break;
        case WSP_GGML_UNARY_OP_EXP: vec_exp(x, y, n); break;
        case WSP_GGML_UNARY_OP_COUNT: break;
    }
}

void apply(const wsp_ggml_tensor * dst, const float * x, float * y, int64_t n) {
    switch (dst->op) {
        case WSP_GGML_OP_SQR: map_scalar(x, y, n, [](float v) { return v * v; }); break;
        case WSP_GGML_OP_SQRT: vec_sqrt(x, y, n); break;
        case WSP_GGML_OP_SCALE: vec_scale_bias(x, y, n, get_op_param_f32(dst, 0), get_op_param_f32(dst, 1)); break;
        default: apply_unary(wsp_ggml_get_unary_op(dst), x, y, n); break;
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
        if (f32_out) {
            apply(dst, x, reinterpret_cast<float *>(xd), ne0);
        } else {
            apply(dst, x, tmp, ne0);
            strided_row_from_f32(dst->type, tmp, xd, dst->nb[0], ne0);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && wsp_ggml_are_same_shape(dst, dst->src[0]);
}

} // namespace

const OpKernel kernel_unary = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
