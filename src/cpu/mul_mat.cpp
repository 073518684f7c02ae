// MUL_MAT: dst[i0, i1, i2, i3] = sum_k a[k, i0, i2 / r2, i3 / r3] * b[k, i1, i2, i3] with
// r2 = ne12 / ne02, r3 = ne13 / ne03 (a broadcast over b's dims 2-3).
// Reference path: b rows converted once to F32 in the work buffer, a rows converted per use.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

size_t b_bytes(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * b = dst->src[1];
    return (size_t) wsp_ggml_nelements(b) * sizeof(float);
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    const wsp_ggml_tensor * a = dst->src[0];
    return b_bytes(dst) + (size_t) n_tasks * ((size_t) a->ne[0] * sizeof(float) + 64) + 64;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a  = dst->src[0];
    const wsp_ggml_tensor * b  = dst->src[1];
    const int64_t           K  = a->ne[0];
    float *                 bf = static_cast<float *>(p.wdata);

    // phase 1: b -> contiguous f32 rows
    const int64_t nrows_b = wsp_ggml_nrows(b);
    int64_t       r0, r1;
    split_range(nrows_b, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % b->ne[1], i2 = (r / b->ne[1]) % b->ne[2], i3 = r / (b->ne[1] * b->ne[2]);
        const char *  s = static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        strided_row_to_f32(b->type, s, b->nb[0], bf + r * K, K);
    }
    p.barrier();

    // phase 2: each task takes rows of a (per batch) and dots them with every row of b
    float *       arow = reinterpret_cast<float *>(reinterpret_cast<char *>(bf) + WSP_GGML_PAD(b_bytes(dst), 64) +
                                             (size_t) p.ith * ((size_t) K * sizeof(float) + 64));
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t n_units = a->ne[1] * b->ne[2] * b->ne[3];
    int64_t       u0, u1;
    split_range(n_units, p.ith, p.nth, u0, u1);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t i0 = u % a->ne[1], i2 = (u / a->ne[1]) % b->ne[2], i3 = u / (a->ne[1] * b->ne[2]);
        const char *  s =
            static_cast<const char *>(a->data) + i0 * a->nb[1] + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
        if (wsp_ggml_is_quantized(a->type)) {
            row_to_f32(a->type, s, arow, K);
        } else {
            strided_row_to_f32(a->type, s, a->nb[0], arow, K);
        }
        for (int64_t i1 = 0; i1 < b->ne[1]; ++i1) {
            const float * brow = bf + ((i3 * b->ne[2] + i2) * b->ne[1] + i1) * K;
            float * d = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i0 * dst->nb[0] + i1 * dst->nb[1] +
                                                  i2 * dst->nb[2] + i3 * dst->nb[3]);
            *d        = vec_dot_f32(arow, brow, K);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const wsp_ggml_tensor * b    = dst->src[1];
    const bool              a_ok = is_float_type(a->type) ||
                      (wsp_ggml_is_quantized(a->type) && wsp_ggml_get_type_traits(a->type)->to_float != nullptr &&
                       wsp_ggml_is_contiguous_rows(a));
    return dst->type == WSP_GGML_TYPE_F32 && a_ok && is_float_type(b->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * a     = dst->src[0];
    const int64_t           flops = a->ne[0] * wsp_ggml_nelements(dst);
    return tasks_for_elements(flops, n_threads, 65536);
}

} // namespace

const OpKernel kernel_mul_mat = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
