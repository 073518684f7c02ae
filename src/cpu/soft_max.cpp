// SOFT_MAX: y = softmax(x * scale + slope * mask) per row, where slope is the ALiBi slope of the
// row's head (dim 2) when max_bias > 0, else 1. The mask row is mask[:, i1, i2 % ne2, i3 % ne3].
// A row that is entirely -inf gives zeros rather than NaN. Each row is built in F32 scratch
// before the output row is written, so computing in place (dst aliasing src0) is safe.

#include "ops.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

// two F32 rows per task (logits and the converted mask row), 64-byte aligned
size_t task_floats(const wsp_ggml_tensor * dst) {
    return 2 * (size_t) ((dst->ne[0] + 15) / 16 * 16) + 16;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_floats(dst) * sizeof(float);
}

// w = x * scale + slope * mask_row
void logits(const wsp_ggml_tensor * a, const char * xa, const wsp_ggml_tensor * mask, const char * mrow, float scale,
            float slope, float * w, float * mtmp) {
    const int64_t n = a->ne[0];
    if (a->type == WSP_GGML_TYPE_F32) {
        vec_scale_bias(reinterpret_cast<const float *>(xa), w, n, scale, 0.0f);
    } else {
        row_to_f32(a->type, xa, w, n);
        vec_scale(w, n, scale);
    }
    if (mask == nullptr) {
        return;
    }
    const float * m = reinterpret_cast<const float *>(mrow);
    if (mask->type != WSP_GGML_TYPE_F32) {
        row_to_f32(mask->type, mrow, mtmp, n);
        m = mtmp;
    }
    vec_axpy(w, m, n, slope);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a        = dst->src[0];
    const wsp_ggml_tensor * mask     = dst->src[1];
    const float             scale    = get_op_param_f32(dst, 0);
    const float             max_bias = get_op_param_f32(dst, 1);
    const int64_t           ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    const bool              f32_out = dst->type == WSP_GGML_TYPE_F32;

    char * base = static_cast<char *>(p.wdata) + (size_t) p.ith * task_floats(dst) * sizeof(float);
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    float * w    = reinterpret_cast<float *>(base);
    float * mtmp = w + (ne0 + 15) / 16 * 16;

    int64_t r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char *  xa   = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *        yd   = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        const char *  mrow = mask ? static_cast<const char *>(mask->data) + i1 * mask->nb[1] +
                                       (i2 % mask->ne[2]) * mask->nb[2] + (i3 % mask->ne[3]) * mask->nb[3]
                                  : nullptr;
        logits(a, xa, mask, mrow, scale, alibi_slope(max_bias, i2, ne2), w, mtmp);

        // F32 output is written directly; other types go through w and one conversion
        float *     y  = f32_out ? reinterpret_cast<float *>(yd) : w;
        const float mx = vec_max(w, ne0);
        if (mx == -INFINITY) {
            std::fill(y, y + ne0, 0.0f);
        } else {
            const float sum = vec_exp_sub_sum(w, y, ne0, mx);
            vec_scale(y, ne0, 1.0f / sum);
        }
        if (!f32_out) {
            row_from_f32(dst->type, w, yd, ne0);
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const wsp_ggml_tensor * mask = dst->src[1];
    return is_float_type(dst->type) && is_float_type(a->type) && a->nb[0] == wsp_ggml_type_size(a->type) &&
           dst->nb[0] == wsp_ggml_type_size(dst->type) &&
           (mask == nullptr || ((mask->type == WSP_GGML_TYPE_F32 || mask->type == WSP_GGML_TYPE_F16) &&
                                mask->nb[0] == wsp_ggml_type_size(mask->type)));
}

} // namespace

// exp costs more than the elementwise ops' default split assumes: cross attention's 12 heads x
// 1500 logits (whisper small, one token) took 16 us on one thread
int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int64_t rows    = wsp_ggml_nrows(dst);
    const int     by_size = tasks_for_elements(wsp_ggml_nelements(dst), n_threads, 4096);
    return (int) (rows < by_size ? (rows < 1 ? 1 : rows) : by_size);
}

const OpKernel kernel_soft_max = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
