// REPEAT (a tiled to dst's shape), PAD (zeros appended at the end of each dim, op_params p0..p3)
// and ROLL (each dim shifted with wrap-around, op_params shift0..3): gathers over dst's elements,
// one thread per element of a row (row_grid), elements copied as raw bytes, so any non-quantized
// type whose source and destination types agree; any strides.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// one element of `size` bytes (1, 2, 4 or 8: the non-quantized types); src NULL writes zero
__device__ __forceinline__ void copy_elem(char * d, const char * s, int size) {
    switch (size) {
        case 8: *reinterpret_cast<int64_t *>(d) = s ? *reinterpret_cast<const int64_t *>(s) : 0; break;
        case 4: *reinterpret_cast<int32_t *>(d) = s ? *reinterpret_cast<const int32_t *>(s) : 0; break;
        case 2: *reinterpret_cast<int16_t *>(d) = s ? *reinterpret_cast<const int16_t *>(s) : (int16_t) 0; break;
        default: *d = s ? *s : (char) 0; break;
    }
}

__device__ __forceinline__ int64_t wrap(int64_t i, int64_t shift, int64_t n) {
    const int64_t j = (i - shift) % n;
    return j < 0 ? j + n : j;
}

enum Kind { REPEAT, PAD, ROLL };

struct Shifts {
    int32_t s[4];
};

__global__ void gather_kernel(TensorView a, TensorView d, int64_t rows, int kind, Shifts sh, int size) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const char * s = nullptr;
        if (kind == REPEAT) {
            s = elem(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
        } else if (kind == PAD) {
            if (i0 < a.ne[0] && i1 < a.ne[1] && i2 < a.ne[2] && i3 < a.ne[3]) {
                s = elem(a, i0, i1, i2, i3);
            }
        } else {
            s = elem(a, wrap(i0, sh.s[0], a.ne[0]), wrap(i1, sh.s[1], a.ne[1]), wrap(i2, sh.s[2], a.ne[2]),
                     wrap(i3, sh.s[3], a.ne[3]));
        }
        copy_elem(elem(d, i0, i1, i2, i3), s, size);
    });
}

bool plain_same_type(const wsp_ggml_tensor * t) {
    const size_t size = wsp_ggml_type_size(t->type);
    return !wsp_ggml_is_quantized(t->type) && t->src[0]->type == t->type &&
           (size == 1 || size == 2 || size == 4 || size == 8);
}

bool repeat_supported(const wsp_ggml_tensor * t) {
    return plain_same_type(t) && wsp_ggml_can_repeat(t->src[0], t) && !wsp_ggml_is_empty(t->src[0]);
}

bool pad_supported(const wsp_ggml_tensor * t) {
    for (int i = 0; i < 4; ++i) {
        if (t->op_params[i] < 0 || t->ne[i] != t->src[0]->ne[i] + t->op_params[i]) {
            return false;
        }
    }
    return plain_same_type(t);
}

bool roll_supported(const wsp_ggml_tensor * t) {
    return plain_same_type(t) && wsp_ggml_are_same_shape(t, t->src[0]);
}

bool launch_kind(LaunchCtx & ctx, wsp_ggml_tensor * t, Kind kind) {
    Shifts sh;
    std::memcpy(sh.s, t->op_params, sizeof(sh.s));
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(gather_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), rows, (int) kind, sh,
                (int) wsp_ggml_type_size(t->type));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

bool repeat_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_kind(ctx, t, REPEAT);
}

bool pad_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_kind(ctx, t, PAD);
}

bool roll_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_kind(ctx, t, ROLL);
}

} // namespace

const OpEntry & op_repeat() {
    static const OpEntry entry = { repeat_supported, repeat_launch };
    return entry;
}

const OpEntry & op_pad() {
    static const OpEntry entry = { pad_supported, pad_launch };
    return entry;
}

const OpEntry & op_roll() {
    static const OpEntry entry = { roll_supported, roll_launch };
    return entry;
}

} // namespace wsp::cuda
