// SOFT_MAX: y = softmax(x * scale + slope * mask) per row (op_params: scale, max_bias), with the
// mask row mask[:, i1, i2 % ne2, i3 % ne3] (F16/F32, optional) and slope the ALiBi slope of head
// i2 when max_bias > 0, else 1. A row that is all -inf gives zeros. One block per row, any row
// length: the logits are cached in shared memory when the row fits, recomputed otherwise.

#include "block_reduce.cuh"
#include "kernels.cuh"

#include <cmath>

namespace wsp::cuda {

namespace {

// rows up to this many values keep their logits in dynamic shared memory (32 KiB, under the
// 48 KiB that needs no opt-in, leaving room for several blocks per SM)
constexpr int64_t CACHE_FLOATS = 8192;

struct Alibi {
    float   max_bias;
    float   m0, m1;
    int64_t n_head_log2;
};

// as src/cpu/vec.cpp alibi_slope: heads below n_head_log2 get m0^(h+1), the rest m1^(2(h-n)+1)
__device__ __forceinline__ float alibi_slope(const Alibi & a, int64_t h) {
    if (a.max_bias <= 0.0f) {
        return 1.0f;
    }
    return h < a.n_head_log2 ? powf(a.m0, (float) (h + 1)) : powf(a.m1, (float) (2 * (h - a.n_head_log2) + 1));
}

struct Row {
    const char * x;
    const char * m; // null without a mask
    float        scale, slope;
};

// same operation order as the CPU: x * scale rounded, then fma(slope, mask, that)
__device__ __forceinline__ float logit(const TensorView & x, const TensorView & mask, const Row & row, int64_t i) {
    const float v = load_f(x.type, row.x + i * x.nb[0]) * row.scale;
    return row.m != nullptr ? fmaf(row.slope, load_f(mask.type, row.m + i * mask.nb[0]), v) : v;
}

// dynamic shared memory: n floats when `cached`, none otherwise
__global__ void soft_max_kernel(TensorView x, TensorView mask, TensorView d, float scale, Alibi alibi, int64_t rows,
                                bool cached) {
    WSP_DYNAMIC_SHARED(float, cache);
    __shared__ float scratch[WARP_SIZE];
    const int64_t    n = x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        Row row{ x.data + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3], nullptr, scale, alibi_slope(alibi, i2) };
        if (mask.data != nullptr) {
            row.m = mask.data + i1 * mask.nb[1] + (i2 % mask.ne[2]) * mask.nb[2] + (i3 % mask.ne[3]) * mask.nb[3];
        }
        char * pd = d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];

        // a thread only ever touches the cache entries i == threadIdx.x (mod blockDim.x), so
        // the cache needs no barrier between passes (block_reduce has them for the scratch)
        float mx = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float w = logit(x, mask, row, i);
            if (cached) {
                cache[i] = w;
            }
            mx = fmaxf(mx, w);
        }
        mx = block_reduce(mx, scratch, MaxOp());
        if (mx == -INFINITY) { // the whole row is masked: zeros, not 0/0 (uniform branch)
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                store_f(d.type, pd + i * d.nb[0], 0.0f);
            }
            continue;
        }
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = expf((cached ? cache[i] : logit(x, mask, row, i)) - mx);
            if (cached) {
                cache[i] = e;
            }
            sum += e;
        }
        // every read of x is done past this barrier: dst may alias x (same element, same thread)
        const float inv = 1.0f / block_reduce(sum, scratch, SumOp());
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = cached ? cache[i] : expf(logit(x, mask, row, i) - mx);
            store_f(d.type, pd + i * d.nb[0], e * inv);
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * mask = t->src[1];
    if (mask != nullptr && (mask->type != WSP_GGML_TYPE_F32 && mask->type != WSP_GGML_TYPE_F16)) {
        return false;
    }
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && wsp_ggml_are_same_shape(t, t->src[0]) &&
           (mask == nullptr || (mask->ne[0] == t->ne[0] && mask->ne[1] >= t->ne[1] && t->ne[2] % mask->ne[2] == 0 &&
                                t->ne[3] % mask->ne[3] == 0));
}

Alibi alibi_of(float max_bias, int64_t n_head) {
    Alibi a{ max_bias, 1.0f, 1.0f, 1 };
    if (max_bias > 0.0f) {
        a.n_head_log2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
        a.m0          = std::pow(2.0f, -max_bias / (float) a.n_head_log2);
        a.m1          = std::pow(2.0f, -(max_bias / 2.0f) / (float) a.n_head_log2);
    }
    return a;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    float scale, max_bias;
    std::memcpy(&scale, &t->op_params[0], sizeof(float));
    std::memcpy(&max_bias, &t->op_params[1], sizeof(float));
    TensorView mask = {};
    if (t->src[1] != nullptr) {
        mask = view_of(t->src[1]);
    }
    const int64_t n      = t->ne[0];
    const int64_t rows   = wsp_ggml_nrows(t);
    const bool    cached = n <= CACHE_FLOATS;
    const size_t  shmem  = cached ? (size_t) n * sizeof(float) : 0;
    gpu::launch(soft_max_kernel, row_blocks(rows), reduce_threads(n), shmem, ctx.stream, view_of(t->src[0]), mask,
                view_of(t), scale, alibi_of(max_bias, t->ne[2]), rows, cached);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_soft_max() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
