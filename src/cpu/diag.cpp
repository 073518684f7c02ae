// DIAG ([n, 1, ne2, ne3] -> [n, n, ne2, ne3], x on the diagonal, zeros elsewhere) and
// DIAG_MASK_INF / DIAG_MASK_ZERO (element (column i, row j) of each 2-D slice set to -inf / 0 when
// i > n_past + j, the others copied). F32/F16/BF16 in and out, any strides. A mask reads each
// element before writing it, in the same task, so in place is safe.

#include "ops.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a      = dst->src[0];
    const bool              diag   = dst->op == WSP_GGML_OP_DIAG;
    const int64_t           n_past = diag ? 0 : get_op_param_i32(dst, 0);
    const float             fill   = dst->op == WSP_GGML_OP_DIAG_MASK_INF ? -INFINITY : 0.0f;
    const int64_t           ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t j = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        char *        y = static_cast<char *>(dst->data) + j * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (diag) {
            const char * x = static_cast<const char *>(a->data) + i2 * a->nb[2] + i3 * a->nb[3];
            for (int64_t i = 0; i < ne0; ++i) {
                store_f(dst->type, y + i * dst->nb[0], i == j ? load_f(a->type, x + i * a->nb[0]) : 0.0f);
            }
            continue;
        }
        const char * x = static_cast<const char *>(a->data) + j * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        for (int64_t i = 0; i < ne0; ++i) {
            const float v = i > n_past + j ? fill : load_f(a->type, x + i * a->nb[0]);
            store_f(dst->type, y + i * dst->nb[0], v);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    if (!is_float_type(dst->type) || !is_float_type(a->type)) {
        return false;
    }
    if (dst->op == WSP_GGML_OP_DIAG) {
        return a->ne[1] == 1 && dst->ne[0] == a->ne[0] && dst->ne[1] == a->ne[0] && dst->ne[2] == a->ne[2] &&
               dst->ne[3] == a->ne[3];
    }
    return wsp_ggml_are_same_shape(dst, a);
}

} // namespace

const OpKernel kernel_diag = { supported, tasks_by_rows, nullptr, compute };

} // namespace wsp::cpu
