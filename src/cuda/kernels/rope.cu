// ROPE in every mode (normal, NEOX, MROPE, VISION) with YaRN and frequency factors, F32 / F16 /
// BF16 in and out, any strides, in place allowed (a thread reads both elements of its pair before
// writing them). The angle math is src/core/rope_math.h, shared with the CPU kernel: double
// angles rounded once, so both backends agree to the last bit but for the libm's ulp. One thread
// per pair (x), rows strided over (y); elements past the rotated ones are copied.

#include "common.cuh"
#include "kernels.cuh"

#include "../../core/rope_math.h"

namespace wsp::cuda {

namespace {

// thread x < n_pairs rotates pair x; threads past them copy the tail elements
__global__ void rope_kernel(TensorView a, TensorView d, const int32_t * pos, const float * ff, rope::Params p,
                            int64_t rows, int64_t n_tail) {
    const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= p.n_pairs + n_tail) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(a, r, i1, i2, i3);
        const char * s  = elem(a, 0, i1, i2, i3);
        char *       pd = elem(d, 0, i1, i2, i3);
        if (x >= p.n_pairs) {
            const int64_t j = p.n_rotated + (x - p.n_pairs);
            store_f(d.type, pd + j * d.nb[0], load_f(a.type, s + j * a.nb[0]));
            continue;
        }
        double c, sn;
        rope::angle(p, pos, a.ne[2], i2, (int) x, ff, c, sn);
        int64_t j0, j1;
        rope::pair_of(p, (int) x, j0, j1);
        const double x0 = load_f(a.type, s + j0 * a.nb[0]);
        const double x1 = load_f(a.type, s + j1 * a.nb[0]);
        store_f(d.type, pd + j0 * d.nb[0], (float) (x0 * c - x1 * sn));
        store_f(d.type, pd + j1 * d.nb[0], (float) (x0 * sn + x1 * c));
    }
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && rope::supported_shape(t);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a      = t->src[0];
    const rope::Params      p      = rope::params_of(t);
    const int64_t           n_tail = a->ne[0] - p.n_rotated;
    const int64_t           rows   = wsp_ggml_nrows(t);
    const RowGrid           g      = row_grid(p.n_pairs + n_tail, rows, 128);
    const float *           ff     = t->src[2] != nullptr ? static_cast<const float *>(t->src[2]->data) : nullptr;
    gpu::launch(rope_kernel, g.grid, g.block, 0, ctx.stream, view_of(a), view_of(t),
                static_cast<const int32_t *>(t->src[1]->data), ff, p, rows, n_tail);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_rope() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
