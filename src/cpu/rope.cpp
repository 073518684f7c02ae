// ROPE: rotary position embeddings (op_params in src/core/ops_rope.cpp's layout). Pair i of a row
// turns by theta_i = p * base^(-2e/n_dims) / c[i], with e = i (the exponent restarts at each
// section in VISION mode) and p the token's position (its section's position in the multi-section
// modes), blended by YaRN: theta = s * theta_i (1 - r) + theta_i r, r = ramp(i) * ext_factor, and
// scaled by mscale = attn_factor (1 + 0.1 ln(1/s) when ext_factor != 0). Pairs: (2i, 2i + 1)
// normally, (i, i + n_dims/2) for NEOX and MROPE, (i, i + n_dims) for VISION; other elements are
// copied. The angles and the rotation are computed in double and rounded once (the CUDA kernel
// does the same), once per token and reused for every head.

#include "ops.h"
#include "../core/rope_math.h"
#include "vec.h"

#include <cmath>

namespace wsp::cpu {

namespace {

size_t task_doubles(const wsp_ggml_tensor * dst) {
    return (size_t) dst->ne[0] + 8;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_doubles(dst) * sizeof(double);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a   = dst->src[0];
    const int32_t *         pos = static_cast<const int32_t *>(dst->src[1]->data);
    const float *           ff  = dst->src[2] != nullptr ? static_cast<const float *>(dst->src[2]->data) : nullptr;
    const rope::Params      rp  = rope::params_of(dst);
    double * cs = reinterpret_cast<double *>(static_cast<char *>(p.wdata) + (size_t) p.ith * task_doubles(dst) * 8);

    int64_t r0, r1;
    split_range(wsp_ggml_nrows(dst), p.ith, p.nth, r0, r1);
    int64_t cached = -1; // the token (i2) whose angles are in cs
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        if (i2 != cached) {
            for (int i = 0; i < rp.n_pairs; ++i) {
                rope::angle(rp, pos, a->ne[2], i2, i, ff, cs[2 * i], cs[2 * i + 1]);
            }
            cached = i2;
        }
        const char * s = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *       d = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int i = 0; i < rp.n_pairs; ++i) {
            int64_t j0, j1;
            rope::pair_of(rp, i, j0, j1);
            const double x0 = load_f(a->type, s + j0 * a->nb[0]);
            const double x1 = load_f(a->type, s + j1 * a->nb[0]);
            store_f(dst->type, d + j0 * dst->nb[0], (float) (x0 * cs[2 * i] - x1 * cs[2 * i + 1]));
            store_f(dst->type, d + j1 * dst->nb[0], (float) (x0 * cs[2 * i + 1] + x1 * cs[2 * i]));
        }
        for (int64_t j = rp.n_rotated; j < a->ne[0]; ++j) {
            store_f(dst->type, d + j * dst->nb[0], load_f(a->type, s + j * a->nb[0]));
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return is_float_type(dst->type) && is_float_type(dst->src[0]->type) && rope::supported_shape(dst);
}

} // namespace

const OpKernel kernel_rope = { supported, tasks_by_rows, work_size, compute };

} // namespace wsp::cpu
