// UPSCALE (nearest in every dim, or bilinear in dims 0 and 1 with half-pixel centres and edge
// clamping; float types, any strides), ARANGE (start + i * step) and TIMESTEP_EMBEDDING (cos and
// sin of t * max_period^(-j / half), zeros past 2 * half), as src/cpu/upscale.cpp defines them:
// the same float coordinate maps, and the positions of the last two computed in double so both
// backends round the same value once.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

struct Scale {
    float sf[4];
};

struct Tap {
    int64_t lo, hi;
    float   w;
};

__device__ __forceinline__ Tap bilinear_tap(int64_t i, float sf, int64_t n) {
    const float   x  = ((float) i + 0.5f) / sf - 0.5f;
    const float   fx = floorf(x);
    const int64_t x0 = (int64_t) fx;
    Tap           t;
    t.lo = x0 < 0 ? 0 : (x0 > n - 1 ? n - 1 : x0);
    t.hi = x0 + 1 < 0 ? 0 : (x0 + 1 > n - 1 ? n - 1 : x0 + 1);
    t.w  = fminf(fmaxf(x - fx, 0.0f), 1.0f);
    return t;
}

__global__ void upscale_kernel(TensorView a, TensorView d, int64_t rows, Scale s, bool bilinear) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const int64_t j2 = (int64_t) ((float) i2 / s.sf[2]), j3 = (int64_t) ((float) i3 / s.sf[3]);
        float         v;
        if (!bilinear) {
            v = load_f(a.type, elem(a, (int64_t) ((float) i0 / s.sf[0]), (int64_t) ((float) i1 / s.sf[1]), j2, j3));
        } else {
            const Tap   tx  = bilinear_tap(i0, s.sf[0], a.ne[0]);
            const Tap   ty  = bilinear_tap(i1, s.sf[1], a.ne[1]);
            const float v00 = load_f(a.type, elem(a, tx.lo, ty.lo, j2, j3));
            const float v01 = load_f(a.type, elem(a, tx.hi, ty.lo, j2, j3));
            const float v10 = load_f(a.type, elem(a, tx.lo, ty.hi, j2, j3));
            const float v11 = load_f(a.type, elem(a, tx.hi, ty.hi, j2, j3));
            v = v00 * (1.0f - tx.w) * (1.0f - ty.w) + v01 * tx.w * (1.0f - ty.w) + v10 * (1.0f - tx.w) * ty.w +
                v11 * tx.w * ty.w;
        }
        store_f(d.type, elem(d, i0, i1, i2, i3), v);
    });
}

bool upscale_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a    = t->src[0];
    const int32_t           mode = t->op_params[0];
    return is_float_type(t->type) && is_float_type(a->type) &&
           (mode == WSP_GGML_SCALE_MODE_NEAREST || mode == WSP_GGML_SCALE_MODE_BILINEAR) && !wsp_ggml_is_empty(a);
}

bool upscale_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    Scale                   s;
    for (int i = 0; i < 4; ++i) {
        s.sf[i] = (float) t->ne[i] / (float) a->ne[i];
    }
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(upscale_kernel, g.grid, g.block, 0, ctx.stream, view_of(a), view_of(t), rows, s,
                t->op_params[0] == WSP_GGML_SCALE_MODE_BILINEAR);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

__global__ void arange_kernel(TensorView d, float start, float step) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < d.ne[0]) {
        *reinterpret_cast<float *>(d.data + i * d.nb[0]) = (float) ((double) start + (double) step * (double) i);
    }
}

bool arange_supported(const wsp_ggml_tensor * t) {
    return t->type == WSP_GGML_TYPE_F32;
}

bool arange_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    float start, step;
    std::memcpy(&start, &t->op_params[0], sizeof(float));
    std::memcpy(&step, &t->op_params[2], sizeof(float));
    const unsigned blocks = (unsigned) ((t->ne[0] + 255) / 256);
    gpu::launch(arange_kernel, dim3(blocks), dim3(256), 0, ctx.stream, view_of(t), start, step);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// x: the columns of an embedding, y strides over the timesteps
__global__ void timestep_kernel(TensorView ts, TensorView d, int64_t half, double log_period) {
    for_each_element(d, d.ne[1], [&](int64_t j, int64_t n, int64_t, int64_t) {
        float * out = reinterpret_cast<float *>(elem(d, j, n, 0, 0));
        if (j >= 2 * half) {
            *out = 0.0f;
            return;
        }
        const double  t   = (double) *reinterpret_cast<const float *>(ts.data + n * ts.nb[0]);
        const int64_t k   = j < half ? j : j - half;
        const double  arg = t * exp(-log_period * (double) k / (double) half);
        *out              = (float) (j < half ? cos(arg) : sin(arg));
    });
}

bool timestep_supported(const wsp_ggml_tensor * t) {
    return t->type == WSP_GGML_TYPE_F32 && t->src[0]->type == WSP_GGML_TYPE_F32 && t->ne[1] == t->src[0]->ne[0] &&
           t->ne[0] >= 2 * (t->op_params[0] / 2) && t->op_params[1] > 0;
}

bool timestep_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const RowGrid g = row_grid(t->ne[0], t->ne[1]);
    gpu::launch(timestep_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t),
                (int64_t) (t->op_params[0] / 2), std::log((double) t->op_params[1]));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_upscale() {
    static const OpEntry entry = { upscale_supported, upscale_launch };
    return entry;
}

const OpEntry & op_arange() {
    static const OpEntry entry = { arange_supported, arange_launch };
    return entry;
}

const OpEntry & op_timestep_embedding() {
    static const OpEntry entry = { timestep_supported, timestep_launch };
    return entry;
}

} // namespace wsp::cuda
