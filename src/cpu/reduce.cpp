// MEAN: the mean of each row, accumulated in double.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        double        s  = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            s += load_f(a->type, xa + i * a->nb[0]);
        }
        float * y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                              i3 * dst->nb[3]);
        *y        = ne0 > 0 ? (float) (s / (double) ne0) : 0.0f;
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32 && is_float_type(dst->src[0]->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_by_rows(dst->src[0], n_threads);
}

} // namespace

const OpKernel kernel_mean = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
