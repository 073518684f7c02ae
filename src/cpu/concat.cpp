// CONCAT along one dim: dst is its sources laid one after the other along `dim`, for any
// non-quantized type (elements are copied as bytes). The builder makes two sources; the
// scheduler's gather of split mul_mat slices uses up to WSP_GGML_MAX_SRC.

#include "ops.h"

#include <cstring>

namespace wsp::cpu {

namespace {

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const int    dim  = get_op_param_i32(dst, 0);
    const size_t elem = wsp_ggml_type_size(dst->type);
    int64_t      r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t idx[4] = { 0, r % dst->ne[1], (r / dst->ne[1]) % dst->ne[2], r / (dst->ne[1] * dst->ne[2]) };
        char *  drow = static_cast<char *>(dst->data) + idx[1] * dst->nb[1] + idx[2] * dst->nb[2] + idx[3] * dst->nb[3];
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            idx[0] = i0;
            // the source that holds this position along dim, and the position within it
            int64_t j[4] = { idx[0], idx[1], idx[2], idx[3] };
            int     k    = 0;
            while (j[dim] >= dst->src[k]->ne[dim]) {
                j[dim] -= dst->src[k]->ne[dim];
                ++k;
            }
            const wsp_ggml_tensor * s   = dst->src[k];
            const char *            src = static_cast<const char *>(s->data) + j[0] * s->nb[0] + j[1] * s->nb[1] +
                               j[2] * s->nb[2] + j[3] * s->nb[3];
            std::memcpy(drow + i0 * dst->nb[0], src, elem);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    if (wsp_ggml_is_quantized(dst->type)) {
        return false;
    }
    for (const wsp_ggml_tensor * s : dst->src) {
        if (s != nullptr && s->type != dst->type) {
            return false;
        }
    }
    return dst->src[0] != nullptr;
}

} // namespace

const OpKernel kernel_concat = { supported, tasks_by_rows, nullptr, compute };

} // namespace wsp::cpu
