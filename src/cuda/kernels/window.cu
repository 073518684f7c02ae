// SAM's window attention ops, as src/cpu/window.cpp defines them: WIN_PART (w x w windows
// [C, w, w, npx * npy], window p = py * npx + px, zeros past the image), WIN_UNPART (the inverse
// for a w0 x h0 image), GET_REL_POS (dst(:, k, q) = a(:, (kh - 1) + q - k)), gathers of raw
// elements of any non-quantized type; ADD_REL_POS (F32: dst(h k + w, q, b) = a + pw(w, q, b) +
// ph(h, q, b), in place allowed: each thread reads the element it writes). Any strides.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

__device__ __forceinline__ void copy_elem(char * d, const char * s, int size) {
    switch (size) {
        case 8: *reinterpret_cast<int64_t *>(d) = s ? *reinterpret_cast<const int64_t *>(s) : 0; break;
        case 4: *reinterpret_cast<int32_t *>(d) = s ? *reinterpret_cast<const int32_t *>(s) : 0; break;
        case 2: *reinterpret_cast<int16_t *>(d) = s ? *reinterpret_cast<const int16_t *>(s) : (int16_t) 0; break;
        default: *d = s ? *s : (char) 0; break;
    }
}

enum Kind { WIN_PART, WIN_UNPART, GET_REL_POS };

// npx: windows per row of the image (WIN_PART, WIN_UNPART); w: the window size
__global__ void window_kernel(TensorView a, TensorView d, int64_t rows, int kind, int64_t npx, int64_t w, int size) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const char * s = nullptr;
        if (kind == WIN_PART) {
            const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
            if (x < a.ne[1] && y < a.ne[2]) {
                s = elem(a, i0, x, y, 0);
            }
        } else if (kind == WIN_UNPART) {
            s = elem(a, i0, i1 % w, i2 % w, (i2 / w) * npx + i1 / w);
        } else {
            s = elem(a, i0, (d.ne[1] - 1) + i2 - i1, 0, 0);
        }
        copy_elem(elem(d, i0, i1, i2, i3), s, size);
    });
}

bool plain_same_type(const wsp_ggml_tensor * t) {
    const size_t size = wsp_ggml_type_size(t->type);
    return !wsp_ggml_is_quantized(t->type) && t->src[0]->type == t->type &&
           (size == 1 || size == 2 || size == 4 || size == 8);
}

bool win_part_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a   = t->src[0];
    const int64_t           npx = t->op_params[0], npy = t->op_params[1], w = t->op_params[2];
    return plain_same_type(t) && w > 0 && t->ne[0] == a->ne[0] && t->ne[1] == w && t->ne[2] == w &&
           t->ne[3] == npx * npy && npx * w >= a->ne[1] && npy * w >= a->ne[2] && a->ne[3] == 1;
}

bool win_unpart_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const int64_t           w = t->op_params[0];
    return plain_same_type(t) && w > 0 && a->ne[1] == w && a->ne[2] == w && t->ne[0] == a->ne[0] &&
           a->ne[3] == ((t->ne[1] + w - 1) / w) * ((t->ne[2] + w - 1) / w) && t->ne[3] == 1;
}

bool get_rel_pos_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    return plain_same_type(t) && t->ne[1] == t->ne[2] && a->ne[1] == 2 * t->ne[1] - 1 && a->ne[0] == t->ne[0] &&
           t->ne[3] == 1;
}

bool launch_kind(LaunchCtx & ctx, wsp_ggml_tensor * t, Kind kind, int64_t npx, int64_t w) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(window_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), rows, (int) kind, npx, w,
                (int) wsp_ggml_type_size(t->type));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

bool win_part_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_kind(ctx, t, WIN_PART, t->op_params[0], t->op_params[2]);
}

bool win_unpart_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t w = t->op_params[0];
    return launch_kind(ctx, t, WIN_UNPART, (t->ne[1] + w - 1) / w, w);
}

bool get_rel_pos_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_kind(ctx, t, GET_REL_POS, 1, 1);
}

// x: the k * k scores of a row, y strides over the rows (q, b)
__global__ void add_rel_pos_kernel(TensorView a, TensorView pw, TensorView ph, TensorView d, int64_t rows) {
    for_each_element(d, rows, [&](int64_t kk, int64_t q, int64_t b, int64_t i3) {
        const int64_t k = pw.ne[0], h = kk / k, w = kk % k;
        const int64_t q1 = q % pw.ne[1], q2 = q / pw.ne[1];
        const float   vw                                  = *reinterpret_cast<const float *>(elem(pw, w, q1, q2, b));
        const float   vh                                  = *reinterpret_cast<const float *>(elem(ph, h, q1, q2, b));
        const float   v                                   = *reinterpret_cast<const float *>(elem(a, kk, q, b, i3));
        *reinterpret_cast<float *>(elem(d, kk, q, b, i3)) = (v + vw) + vh;
    });
}

bool add_rel_pos_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a  = t->src[0];
    const wsp_ggml_tensor * pw = t->src[1];
    const wsp_ggml_tensor * ph = t->src[2];
    return t->type == WSP_GGML_TYPE_F32 && a->type == WSP_GGML_TYPE_F32 && pw->type == WSP_GGML_TYPE_F32 &&
           ph->type == WSP_GGML_TYPE_F32 && wsp_ggml_are_same_shape(pw, ph) && wsp_ggml_are_same_shape(a, t) &&
           pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] && pw->ne[3] == a->ne[2] &&
           a->ne[3] == 1;
}

bool add_rel_pos_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(add_rel_pos_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t->src[1]),
                view_of(t->src[2]), view_of(t), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_win_part() {
    static const OpEntry entry = { win_part_supported, win_part_launch };
    return entry;
}

const OpEntry & op_win_unpart() {
    static const OpEntry entry = { win_unpart_supported, win_unpart_launch };
    return entry;
}

const OpEntry & op_get_rel_pos() {
    static const OpEntry entry = { get_rel_pos_supported, get_rel_pos_launch };
    return entry;
}

const OpEntry & op_add_rel_pos() {
    static const OpEntry entry = { add_rel_pos_supported, add_rel_pos_launch };
    return entry;
}

} // namespace wsp::cuda
