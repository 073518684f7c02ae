// REPEAT (a tiled to dst's shape), PAD (zeros appended at the end of each dim; op_params p0..p3)
// and ROLL (each dim shifted with wrap-around; op_params shift0..3): gathers of whole elements,
// copied as bytes, so any non-quantized type whose source and destination types agree. Tasks
// split dst's rows; each row of dst is written by one task only.

#include "ops.h"

#include <cstring>

namespace wsp::cpu {

namespace {

inline char * at(const wsp_ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

inline void unravel(const wsp_ggml_tensor * t, int64_t r, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = r % t->ne[1];
    i2 = (r / t->ne[1]) % t->ne[2];
    i3 = r / (t->ne[1] * t->ne[2]);
}

// n elements from a strided source row to a strided destination row
void copy_elems(char * d, size_t dnb, const char * s, size_t snb, int64_t n, size_t elem) {
    if (dnb == elem && snb == elem) {
        std::memcpy(d, s, (size_t) n * elem);
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        std::memcpy(d + i * dnb, s + i * snb, elem);
    }
}

void zero_elems(char * d, size_t dnb, int64_t n, size_t elem) {
    if (dnb == elem) {
        std::memset(d, 0, (size_t) n * elem);
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        std::memset(d + i * dnb, 0, elem);
    }
}

void repeat_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const size_t            elem = wsp_ggml_type_size(dst->type);
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        unravel(dst, r, i1, i2, i3);
        const char * s = at(a, 0, i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
        char *       d = at(dst, 0, i1, i2, i3);
        for (int64_t k = 0; k < dst->ne[0]; k += a->ne[0]) {
            copy_elems(d + k * dst->nb[0], dst->nb[0], s, a->nb[0], a->ne[0], elem);
        }
    }
}

void pad_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const size_t            elem = wsp_ggml_type_size(dst->type);
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        unravel(dst, r, i1, i2, i3);
        char *        d    = at(dst, 0, i1, i2, i3);
        const bool    row  = i1 < a->ne[1] && i2 < a->ne[2] && i3 < a->ne[3];
        const int64_t kept = row ? a->ne[0] : 0;
        if (row) {
            copy_elems(d, dst->nb[0], at(a, 0, i1, i2, i3), a->nb[0], kept, elem);
        }
        zero_elems(d + kept * dst->nb[0], dst->nb[0], dst->ne[0] - kept, elem);
    }
}

// (i - shift) mod n in [0, n)
inline int64_t wrap(int64_t i, int64_t shift, int64_t n) {
    int64_t j = (i - shift) % n;
    return j < 0 ? j + n : j;
}

void roll_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const size_t            elem = wsp_ggml_type_size(dst->type);
    const int32_t *         s    = dst->op_params;
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        unravel(dst, r, i1, i2, i3);
        const char *  src = at(a, 0, wrap(i1, s[1], a->ne[1]), wrap(i2, s[2], a->ne[2]), wrap(i3, s[3], a->ne[3]));
        char *        d   = at(dst, 0, i1, i2, i3);
        const int64_t n = a->ne[0], k = wrap(0, s[0], n);
        // dst[0, n - k) = src[k, n), dst[n - k, n) = src[0, k)
        copy_elems(d, dst->nb[0], src + k * a->nb[0], a->nb[0], n - k, elem);
        copy_elems(d + (n - k) * dst->nb[0], dst->nb[0], src, a->nb[0], k, elem);
    }
}

bool same_plain_type(const wsp_ggml_tensor * dst) {
    return !wsp_ggml_is_quantized(dst->type) && dst->src[0]->type == dst->type;
}

bool repeat_supported(const wsp_ggml_tensor * dst) {
    return same_plain_type(dst) && wsp_ggml_can_repeat(dst->src[0], dst) && !wsp_ggml_is_empty(dst->src[0]);
}

bool pad_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    for (int i = 0; i < 4; ++i) {
        if (dst->ne[i] != a->ne[i] + dst->op_params[i] || dst->op_params[i] < 0) {
            return false;
        }
    }
    return same_plain_type(dst);
}

bool roll_supported(const wsp_ggml_tensor * dst) {
    return same_plain_type(dst) && wsp_ggml_are_same_shape(dst, dst->src[0]);
}

} // namespace

const OpKernel kernel_repeat = { repeat_supported, tasks_by_rows, nullptr, repeat_compute };
const OpKernel kernel_pad    = { pad_supported, tasks_by_rows, nullptr, pad_compute };
const OpKernel kernel_roll   = { roll_supported, tasks_by_rows, nullptr, roll_compute };

} // namespace wsp::cpu
