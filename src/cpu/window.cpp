// SAM's window attention ops. WIN_PART cuts [C, W, H] into w x w windows [C, w, w, npx * npy]
// (window p = py * npx + px, zeros past the image); WIN_UNPART puts them back for a w0 x h0
// image, dropping the padding; GET_REL_POS gathers rows of the embedding table,
// dst(:, k, q) = a(:, (kh - 1) + q - k); ADD_REL_POS adds the decomposed relative positions to
// attention scores: dst(h * k + w, q, b) = a(h * k + w, q, b) + pw(w, q, b) + ph(h, q, b).
// The gathers copy whole rows as bytes; tasks split dst's rows.

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

// one row of n elements; src NULL writes zeros
void copy_row(char * d, size_t dnb, const char * s, size_t snb, int64_t n, size_t elem) {
    for (int64_t i = 0; i < n; ++i) {
        if (s != nullptr) {
            std::memcpy(d + i * dnb, s + i * snb, elem);
        } else {
            std::memset(d + i * dnb, 0, elem);
        }
    }
}

// the source row of dst's row (i1, i2, i3), or NULL for a zero row
const char * win_part_row(const wsp_ggml_tensor * dst, int64_t i1, int64_t i2, int64_t i3) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           npx = dst->op_params[0], w = dst->op_params[2];
    const int64_t           x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
    return x < a->ne[1] && y < a->ne[2] ? at(a, 0, x, y, 0) : nullptr;
}

const char * win_unpart_row(const wsp_ggml_tensor * dst, int64_t i1, int64_t i2, int64_t) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           w   = dst->op_params[0];
    const int64_t           npx = (dst->ne[1] + w - 1) / w;
    return at(a, 0, i1 % w, i2 % w, (i2 / w) * npx + i1 / w);
}

const char * get_rel_pos_row(const wsp_ggml_tensor * dst, int64_t i1, int64_t i2, int64_t) {
    return at(dst->src[0], 0, (dst->ne[1] - 1) + i2 - i1, 0, 0);
}

template <const char * (*Row)(const wsp_ggml_tensor *, int64_t, int64_t, int64_t)>
void gather_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const size_t            elem = wsp_ggml_type_size(dst->type);
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        unravel(dst, r, i1, i2, i3);
        copy_row(at(dst, 0, i1, i2, i3), dst->nb[0], Row(dst, i1, i2, i3), a->nb[0], dst->ne[0], elem);
    }
}

bool win_part_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int64_t           npx = dst->op_params[0], npy = dst->op_params[1], w = dst->op_params[2];
    return !wsp_ggml_is_quantized(dst->type) && a->type == dst->type && w > 0 && dst->ne[0] == a->ne[0] &&
           dst->ne[1] == w && dst->ne[2] == w && dst->ne[3] == npx * npy && npx * w >= a->ne[1] &&
           npy * w >= a->ne[2] && a->ne[3] == 1;
}

bool win_unpart_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const int64_t           w = dst->op_params[0];
    return !wsp_ggml_is_quantized(dst->type) && a->type == dst->type && w > 0 && a->ne[1] == w && a->ne[2] == w &&
           dst->ne[0] == a->ne[0] && a->ne[3] == ((dst->ne[1] + w - 1) / w) * ((dst->ne[2] + w - 1) / w) &&
           dst->ne[3] == 1;
}

bool get_rel_pos_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    return !wsp_ggml_is_quantized(dst->type) && a->type == dst->type && dst->ne[1] == dst->ne[2] &&
           a->ne[1] == 2 * dst->ne[1] - 1 && a->ne[0] == dst->ne[0] && dst->ne[3] == 1;
}

void add_rel_pos_compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a  = dst->src[0];
    const wsp_ggml_tensor * pw = dst->src[1];
    const wsp_ggml_tensor * ph = dst->src[2];
    const int64_t           k  = pw->ne[0];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t q, b, i3;
        unravel(dst, r, q, b, i3);
        const int64_t q1 = q % pw->ne[1], q2 = q / pw->ne[1];
        const char *  sa = at(a, 0, q, b, i3);
        char *        d  = at(dst, 0, q, b, i3);
        for (int64_t h = 0; h < k; ++h) {
            const float vh = *reinterpret_cast<const float *>(at(ph, h, q1, q2, b));
            for (int64_t w = 0; w < k; ++w) {
                const float   vw                               = *reinterpret_cast<const float *>(at(pw, w, q1, q2, b));
                const int64_t i                                = h * k + w;
                const float   v                                = *reinterpret_cast<const float *>(sa + i * a->nb[0]);
                *reinterpret_cast<float *>(d + i * dst->nb[0]) = (v + vw) + vh;
            }
        }
    }
}

bool add_rel_pos_supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a  = dst->src[0];
    const wsp_ggml_tensor * pw = dst->src[1];
    const wsp_ggml_tensor * ph = dst->src[2];
    return dst->type == WSP_GGML_TYPE_F32 && a->type == WSP_GGML_TYPE_F32 && pw->type == WSP_GGML_TYPE_F32 &&
           ph->type == WSP_GGML_TYPE_F32 && wsp_ggml_are_same_shape(pw, ph) && wsp_ggml_are_same_shape(a, dst) &&
           pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] && pw->ne[3] == a->ne[2] &&
           a->ne[3] == 1;
}

} // namespace

const OpKernel kernel_win_part    = { win_part_supported, tasks_by_rows, nullptr, gather_compute<win_part_row> };
const OpKernel kernel_win_unpart  = { win_unpart_supported, tasks_by_rows, nullptr, gather_compute<win_unpart_row> };
const OpKernel kernel_get_rel_pos = { get_rel_pos_supported, tasks_by_rows, nullptr, gather_compute<get_rel_pos_row> };
const OpKernel kernel_add_rel_pos = { add_rel_pos_supported, tasks_by_rows, nullptr, add_rel_pos_compute };

} // namespace wsp::cpu
