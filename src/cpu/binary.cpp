// ADD, SUB, MUL, DIV with b broadcast over a (a->ne[i] % b->ne[i] == 0), any mix of
// F32/F16/BF16. All-F32 rows take a vectorisable loop; other layouts go element by element.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

template <typename Op>
void row_f32(float * d, const float * x, const float * y, int64_t ne0, int64_t ne10, Op op) {
    if (ne10 == ne0) {
        for (int64_t i = 0; i < ne0; ++i) {
            d[i] = op(x[i], y[i]);
        }
    } else if (ne10 == 1) {
        const float v = y[0];
        for (int64_t i = 0; i < ne0; ++i) {
            d[i] = op(x[i], v);
        }
    } else {
        for (int64_t r = 0; r < ne0; r += ne10) {
            for (int64_t i = 0; i < ne10; ++i) {
                d[r + i] = op(x[r + i], y[i]);
            }
        }
    }
}

template <typename Op>
void compute_op(const ComputeParams & p, wsp_ggml_tensor * dst, Op op) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const wsp_ggml_tensor * b   = dst->src[1];
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    const int64_t           nrows = wsp_ggml_nrows(a);
    int64_t                 r0, r1;
    split_range(nrows, p.ith, p.nth, r0, r1);

    const bool fast = a->type == WSP_GGML_TYPE_F32 && b->type == WSP_GGML_TYPE_F32 && dst->type == WSP_GGML_TYPE_F32 &&
                      a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const int64_t j1 = i1 % b->ne[1], j2 = i2 % b->ne[2], j3 = i3 % b->ne[3];
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        const char *  xb = static_cast<const char *>(b->data) + j1 * b->nb[1] + j2 * b->nb[2] + j3 * b->nb[3];
        char *        xd = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (fast) {
            row_f32(reinterpret_cast<float *>(xd), reinterpret_cast<const float *>(xa),
                    reinterpret_cast<const float *>(xb), ne0, b->ne[0], op);
            continue;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            const float va = load_f(a->type, xa + i * a->nb[0]);
            const float vb = load_f(b->type, xb + (i % b->ne[0]) * b->nb[0]);
            store_f(dst->type, xd + i * dst->nb[0], op(va, vb));
        }
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    switch (dst->op) {
        case WSP_GGML_OP_ADD: compute_op(p, dst, [](float x, float y) { return x + y; }); break;
        case WSP_GGML_OP_SUB: compute_op(p, dst, [](float x, float y) { return x - y; }); break;
        case WSP_GGML_OP_MUL: compute_op(p, dst, [](float x, float y) { return x * y; }); break;
        case WSP_GGML_OP_DIV: compute_op(p, dst, [](float x, float y) { return x / y; }); break;
        default: break;
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && is_float_type(dst->src[1]->type) &&
           wsp_ggml_can_repeat(dst->src[1], dst->src[0]);
}

} // namespace

const OpKernel kernel_binary = { supported, tasks_by_rows, nullptr, compute };

} // namespace wsp::cpu
