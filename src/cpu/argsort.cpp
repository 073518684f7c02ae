// ARGSORT (op_params[0]: wsp_ggml_sort_order): the I32 indices that sort each row of a float
// tensor. The order is total and deterministic: ties keep their index order (a stable sort) and
// NaN sorts after every number in ascending order, before them in descending order, so the CUDA
// kernel, which breaks ties by index the same way, gives the same permutation.

#include "ops.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

size_t task_bytes(const wsp_ggml_tensor * dst) {
    return (size_t) dst->ne[0] * sizeof(float) + 64;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_bytes(dst);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const bool              desc = dst->op_params[0] == WSP_GGML_SORT_ORDER_DESC;
    const int64_t           n    = a->ne[0];
    float * v = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + (size_t) p.ith * task_bytes(dst));
    int64_t r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        const char *  src = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        d   = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        strided_row_to_f32(a->type, src, a->nb[0], v, n);
        // the indices are sorted in place in dst's row (contiguous: supported() checks it)
        int32_t * idx = reinterpret_cast<int32_t *>(d);
        for (int64_t i = 0; i < n; ++i) {
            idx[i] = (int32_t) i;
        }
        if (desc) {
            std::stable_sort(idx, idx + n, [v](int32_t x, int32_t y) {
                return v[x] > v[y] || (std::isnan(v[x]) && !std::isnan(v[y]));
            });
        } else {
            std::stable_sort(idx, idx + n, [v](int32_t x, int32_t y) {
                return v[x] < v[y] || (!std::isnan(v[x]) && std::isnan(v[y]));
            });
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    return dst->type == WSP_GGML_TYPE_I32 && is_float_type(a->type) && wsp_ggml_are_same_shape(a, dst) &&
           dst->nb[0] == sizeof(int32_t) && a->ne[0] <= INT32_MAX;
}

} // namespace

const OpKernel kernel_argsort = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
