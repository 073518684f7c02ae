// GET_ROWS: dst[:, i10, i11, i12] = a[:, b[i10, i11, i12], i11, i12], rows of any type with a
// converter (quantized included) gathered into F32, or I32 rows copied. An index outside a
// gives a zero row and one logged error per task that meets one.

#include "ops.h"
#include "vec.h"

#include <atomic>
#include <cstring>

namespace wsp::cpu {

namespace {

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    const int64_t           n = wsp_ggml_nelements(b);
    int64_t                 r0, r1;
    split_range(n, p.ith, p.nth, r0, r1);
    bool reported = false;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i10 = r % b->ne[0], i11 = (r / b->ne[0]) % b->ne[1], i12 = r / (b->ne[0] * b->ne[1]);
        const int32_t row = *reinterpret_cast<const int32_t *>(static_cast<const char *>(b->data) + i10 * b->nb[0] +
                                                               i11 * b->nb[1] + i12 * b->nb[2]);
        char *        d   = static_cast<char *>(dst->data) + i10 * dst->nb[1] + i11 * dst->nb[2] + i12 * dst->nb[3];
        if (row < 0 || row >= a->ne[1]) {
            if (!reported) {
                WSP_LOG_ERROR("get_rows: index %d is outside the %lld rows of %s; the row is filled with zeros\n", row,
                              (long long) a->ne[1], describe(a).c_str());
                reported = true;
            }
            std::memset(d, 0, (size_t) dst->ne[0] * wsp_ggml_type_size(dst->type));
            continue;
        }
        const char * s =
            static_cast<const char *>(a->data) + row * a->nb[1] + i11 * a->nb[2] + (i12 % a->ne[3]) * a->nb[3];
        if (dst->type == WSP_GGML_TYPE_I32 || a->type == WSP_GGML_TYPE_F32) {
            std::memcpy(d, s, (size_t) a->ne[0] * wsp_ggml_type_size(a->type));
        } else {
            row_to_f32(a->type, s, reinterpret_cast<float *>(d), a->ne[0]);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    if (!wsp_ggml_is_contiguous_rows(a) || dst->nb[0] != wsp_ggml_type_size(dst->type)) {
        return false;
    }
    if (a->type == WSP_GGML_TYPE_I32) {
        return dst->type == WSP_GGML_TYPE_I32;
    }
    return dst->type == WSP_GGML_TYPE_F32 && wsp_ggml_get_type_traits(a->type)->to_float != nullptr;
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(wsp_ggml_nelements(dst), n_threads);
}

} // namespace

const OpKernel kernel_get_rows = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
