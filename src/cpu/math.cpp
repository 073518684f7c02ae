// Elementwise maps of the math family: LOG, SIN, COS, CLAMP (op_params min, max), LEAKY_RELU
// (op_params negative_slope) and ADD1 (x + the single value of src1), for F32/F16/BF16 in and out,
// any strides. Each element is read before it is written and by the same task, so in place (dst
// aliasing src0) is safe.

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

// the function of a node: the op and its two float parameters
struct MapFn {
    wsp_ggml_op op;
    float       p0, p1;

    float operator()(float v) const {
        switch (op) {
            case WSP_GGML_OP_LOG: return std::log(v);
            case WSP_GGML_OP_SIN: return std::sin(v);
            case WSP_GGML_OP_COS: return std::cos(v);
            // NaN passes through (neither comparison holds)
            case WSP_GGML_OP_CLAMP: return v < p0 ? p0 : (v > p1 ? p1 : v);
            case WSP_GGML_OP_LEAKY_RELU: return v < 0.0f ? v * p0 : v;
            default: return v + p0; // ADD1
        }
    }
};

MapFn map_of(const wsp_ggml_tensor * dst) {
    MapFn f{ dst->op, 0.0f, 0.0f };
    switch (dst->op) {
        case WSP_GGML_OP_CLAMP:
            f.p0 = get_op_param_f32(dst, 0);
            f.p1 = get_op_param_f32(dst, 1);
            break;
        case WSP_GGML_OP_LEAKY_RELU: f.p0 = get_op_param_f32(dst, 0); break;
        case WSP_GGML_OP_ADD1: f.p0 = load_f(dst->src[1]->type, dst->src[1]->data); break;
        default: break;
    }
    return f;
}

template <typename F>
void rows_f32(const ComputeParams & p, wsp_ggml_tensor * dst, F f) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    const bool fast = a->type == WSP_GGML_TYPE_F32 && dst->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float) &&
                      dst->nb[0] == sizeof(float);
    int64_t r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        xd = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (fast) {
            const float * x = reinterpret_cast<const float *>(xa);
            float *       y = reinterpret_cast<float *>(xd);
            for (int64_t i = 0; i < ne0; ++i) {
                y[i] = f(x[i]);
            }
            continue;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            store_f(dst->type, xd + i * dst->nb[0], f(load_f(a->type, xa + i * a->nb[0])));
        }
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    rows_f32(p, dst, map_of(dst));
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    if (!is_float_type(dst->type) || !is_float_type(a->type) || !wsp_ggml_are_same_shape(dst, a)) {
        return false;
    }
    const wsp_ggml_tensor * b = dst->src[1];
    return dst->op != WSP_GGML_OP_ADD1 || (b != nullptr && is_float_type(b->type) && wsp_ggml_nelements(b) == 1);
}

} // namespace

const OpKernel kernel_math_map = { supported, tasks_by_rows, nullptr, compute };

} // namespace wsp::cpu
