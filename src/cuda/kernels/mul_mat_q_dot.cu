// The dot path of quantized MUL_MAT (Note [mmq paths] in mul_mat_q.cuh). Phase 1 quantizes every
// activation row to 8-bit blocks (int8 values apart from their (d, s) pairs, so both load
// aligned). Phase 2: a warp takes two weight rows against NR <= 8 activation rows; lane l works
// on block l / 4 of every 8 and on a quarter (8 values) of it, so the warp reads 8 consecutive
// blocks of each weight row per step and every weight byte once for all NR rows.

#include "kernels.cuh"
#include "mul_mat_q.cuh"
#include "quant.cuh"

#include <algorithm>

namespace wsp::cuda {

namespace {

constexpr int THREADS         = 128;
constexpr int WARP_ROWS       = 2;                        // weight rows per warp
constexpr int BLOCK_ROWS      = THREADS / 32 * WARP_ROWS; // weight rows per CTA
constexpr int ROWS_PER_GROUP  = 8;                        // activation rows per pass
constexpr int BLOCKS_PER_STEP = 32 / 4;                   // weight blocks a warp covers per step

// One warp per 32-value block: x -> q = round-to-even(x / d), d = amax / 127, s = d * sum(q).
// Every step is rounded as written (no contraction), as the CPU's quantize_row_q8 does it, so the
// integer values and both floats are bit-identical with the CPU's.
__global__ void quantize_act_kernel(const TensorView b, int8_t * qx, float2 * ds, int64_t K, int64_t n_blocks) {
    const int     lane   = threadIdx.x % 32;
    const int64_t nbr    = K / QK;
    const int64_t stride = (int64_t) gridDim.x * (blockDim.x / 32);
    for (int64_t w = (int64_t) blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < n_blocks; w += stride) {
        const int64_t r = w / nbr, ib = w % nbr;
        int64_t       i1, i2, i3;
        unravel_row(b, r, i1, i2, i3); // r = (i3 * ne2 + i2) * ne1 + i1, the dot kernel's order
        const float x =
            load_f(b.type, b.data + (ib * QK + lane) * b.nb[0] + i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3]);
        float amax = fabsf(x);
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            amax = fmaxf(amax, __shfl_xor_sync(group32_mask(), amax, off));
        }
        const float d   = __fdiv_rn(amax, 127.0f);
        const float id  = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        const int   q   = __float2int_rn(__fmul_rn(x, id));
        int         sum = q;
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            sum += __shfl_xor_sync(group32_mask(), sum, off);
        }
        qx[r * K + ib * QK + lane] = (int8_t) q;
        if (lane == 0) {
            ds[w] = make_float2(d, __fmul_rn(d, (float) sum));
        }
    }
}

// 4 bytes at a 2-byte aligned address (block fields after an fp16 are only 2-byte aligned)
__device__ __forceinline__ int load_u32(const void * p) {
    const uint16_t * h = static_cast<const uint16_t *>(p);
    return (int) ((uint32_t) h[0] | ((uint32_t) h[1] << 16));
}

// bits 0..3 of h to bit 4 of bytes 0..3 (the fifth bits of four Q5 elements)
__device__ __forceinline__ int fifth_bits(uint32_t h) {
    return (int) (((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25));
}

// Thread t's quarter of block ib: 8 small integers in two words (lo, hi) such that the block's
// values are w = d * u + bias (u unsigned for Q4/Q5, signed for Q8_0). Quarters of the 4- and
// 5-bit types are elements 4t..4t+3 (lo) and 16+4t..16+4t+3 (hi), which share the bytes qs[4t..];
// quarters of Q8_0 are elements 8t..8t+7. x_lo / x_hi give the matching activation offsets.
struct Piece {
    int   lo, hi;
    float d, bias;
};

template <int T>
struct Decode;

template <>
struct Decode<WSP_GGML_TYPE_Q4_0> {
    static constexpr bool                   has_bias = true;
    static __device__ __forceinline__ int   x_lo(int t) { return 4 * t; }
    static __device__ __forceinline__ int   x_hi(int t) { return 16 + 4 * t; }
    static __device__ __forceinline__ Piece piece(const char * row, int64_t ib, int t) {
        const block_q4_0 * b = reinterpret_cast<const block_q4_0 *>(row) + ib;
        const int          v = load_u32(b->qs + 4 * t);
        const float        d = fp16_bits_to_float(b->d);
        return { v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f, d, -8.0f * d };
    }
};

template <>
struct Decode<WSP_GGML_TYPE_Q4_1> {
    static constexpr bool                   has_bias = true;
    static __device__ __forceinline__ int   x_lo(int t) { return 4 * t; }
    static __device__ __forceinline__ int   x_hi(int t) { return 16 + 4 * t; }
    static __device__ __forceinline__ Piece piece(const char * row, int64_t ib, int t) {
        const block_q4_1 * b = reinterpret_cast<const block_q4_1 *>(row) + ib;
        const int          v = load_u32(b->qs + 4 * t);
        return { v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f, fp16_bits_to_float(b->d), fp16_bits_to_float(b->m) };
    }
};

template <>
struct Decode<WSP_GGML_TYPE_Q5_0> {
    static constexpr bool                   has_bias = true;
    static __device__ __forceinline__ int   x_lo(int t) { return 4 * t; }
    static __device__ __forceinline__ int   x_hi(int t) { return 16 + 4 * t; }
    static __device__ __forceinline__ Piece piece(const char * row, int64_t ib, int t) {
        const block_q5_0 * b  = reinterpret_cast<const block_q5_0 *>(row) + ib;
        const int          v  = load_u32(b->qs + 4 * t);
        const uint32_t     qh = (uint32_t) load_u32(b->qh); // bit j: fifth bit of element j
        const float        d  = fp16_bits_to_float(b->d);
        return { (v & 0x0f0f0f0f) | fifth_bits(qh >> (4 * t)), ((v >> 4) & 0x0f0f0f0f) | fifth_bits(qh >> (16 + 4 * t)),
                 d, -16.0f * d };
    }
};

template <>
struct Decode<WSP_GGML_TYPE_Q5_1> {
    static constexpr bool                   has_bias = true;
    static __device__ __forceinline__ int   x_lo(int t) { return 4 * t; }
    static __device__ __forceinline__ int   x_hi(int t) { return 16 + 4 * t; }
    static __device__ __forceinline__ Piece piece(const char * row, int64_t ib, int t) {
        const block_q5_1 * b  = reinterpret_cast<const block_q5_1 *>(row) + ib;
        const int          v  = load_u32(b->qs + 4 * t);
        const uint32_t     qh = (uint32_t) load_u32(b->qh);
        return { (v & 0x0f0f0f0f) | fifth_bits(qh >> (4 * t)), ((v >> 4) & 0x0f0f0f0f) | fifth_bits(qh >> (16 + 4 * t)),
                 fp16_bits_to_float(b->d), fp16_bits_to_float(b->m) };
    }
};

template <>
struct Decode<WSP_GGML_TYPE_Q8_0> {
    static constexpr bool                   has_bias = false;
    static __device__ __forceinline__ int   x_lo(int t) { return 8 * t; }
    static __device__ __forceinline__ int   x_hi(int t) { return 8 * t + 4; }
    static __device__ __forceinline__ Piece piece(const char * row, int64_t ib, int t) {
        const block_q8_0 * b = reinterpret_cast<const block_q8_0 *>(row) + ib;
        return { load_u32(b->qs + 8 * t), load_u32(b->qs + 8 * t + 4), fp16_bits_to_float(b->d), 0.0f };
    }
};

struct DotParams {
    const char *   a;
    int64_t        a_nb1, a_nb2, a_nb3;
    const int8_t * qx; // [rows][K], row = batch * M + i1
    const float2 * ds; // [rows][K / 32]
    char *         dst;
    int64_t        d_nb1, d_nb2, d_nb3;
    int64_t        K, N, M, ne12, r2, r3, n_batch;
    int64_t        group0, n_groups; // the activation row groups (of 8) of this launch
};

// acc[w][r] of the warp summed over its lanes; lane w * NR + r stores it
template <int NR>
__device__ __forceinline__ void reduce_store(const DotParams & p, float (&acc)[WARP_ROWS][NR], int64_t n0, int64_t n1,
                                             int64_t batch, int64_t grp) {
    const int     lane = threadIdx.x % 32;
    const int64_t i2 = batch % p.ne12, i3 = batch / p.ne12;
#pragma unroll
    for (int w = 0; w < WARP_ROWS; ++w) {
#pragma unroll
        for (int r = 0; r < NR; ++r) {
            float v = acc[w][r];
#pragma unroll
            for (int off = 16; off > 0; off /= 2) {
                v += __shfl_xor_sync(group32_mask(), v, off);
            }
            // the second row of a warp at the end of an odd N repeats the first: not stored
            if (lane == w * NR + r && (w == 0 || n1 != n0)) {
                const int64_t i1                               = grp * ROWS_PER_GROUP + r;
                char *        d                                = p.dst + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
                reinterpret_cast<float *>(d)[w == 0 ? n0 : n1] = v;
            }
        }
    }
}

template <int T, int NR>
__global__ void __launch_bounds__(THREADS) dot_kernel(const DotParams p) {
    using Q            = Decode<T>;
    const int     lane = threadIdx.x % 32, t = lane % 4;
    const int64_t n0 = (int64_t) blockIdx.x * BLOCK_ROWS + (threadIdx.x / 32) * WARP_ROWS;
    if (n0 >= p.N) {
        return; // warp-uniform; the kernel has no block barrier
    }
    const int64_t n1   = n0 + 1 < p.N ? n0 + 1 : n0;
    const int64_t nblk = p.K / QK;
    for (int64_t y = blockIdx.y; y < p.n_groups * p.n_batch; y += gridDim.y) {
        const int64_t batch = y / p.n_groups, grp = p.group0 + y % p.n_groups;
        const int64_t i2 = batch % p.ne12, i3 = batch / p.ne12;
        const char *  abase = p.a + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
        const char *  w0 = abase + n0 * p.a_nb1, *w1 = abase + n1 * p.a_nb1;
        const int64_t xr0 = batch * p.M + grp * ROWS_PER_GROUP; // first activation row
        float         acc[WARP_ROWS][NR];
#pragma unroll
        for (int r = 0; r < NR; ++r) {
            acc[0][r] = acc[1][r] = 0.0f;
        }
        for (int64_t ib = lane / 4; ib < nblk; ib += BLOCKS_PER_STEP) {
            const Piece pw[WARP_ROWS] = { Q::piece(w0, ib, t), Q::piece(w1, ib, t) };
#pragma unroll
            for (int r = 0; r < NR; ++r) {
                const int8_t * xq   = p.qx + (xr0 + r) * p.K + ib * QK;
                const int      x_lo = *reinterpret_cast<const int *>(xq + Q::x_lo(t));
                const int      x_hi = *reinterpret_cast<const int *>(xq + Q::x_hi(t));
                const float2   dsx  = p.ds[(xr0 + r) * nblk + ib];
#pragma unroll
                for (int w = 0; w < WARP_ROWS; ++w) {
                    const int isum = __dp4a(pw[w].lo, x_lo, __dp4a(pw[w].hi, x_hi, 0));
                    acc[w][r]      = fmaf(pw[w].d * dsx.x, (float) isum, acc[w][r]);
                    if (Q::has_bias && t == 0) {
                        acc[w][r] = fmaf(pw[w].bias, dsx.y, acc[w][r]); // once per block: bias * d_x * sum(q)
                    }
                }
            }
        }
        reduce_store<NR>(p, acc, n0, n1, batch, grp);
    }
}

template <int T, int NR>
bool launch_nr(const DotParams & p, cudaStream_t stream, int device) {
    const int64_t gx = (p.N + BLOCK_ROWS - 1) / BLOCK_ROWS;
    const int64_t gy = std::min<int64_t>(p.n_groups * p.n_batch, 65535);
    gpu::launch(dot_kernel<T, NR>, dim3((unsigned) gx, (unsigned) gy), THREADS, 0, stream, p);
    return WSP_CUDA_LAUNCH_OK(device);
}

template <int T>
bool launch_type(const DotParams & p, int nr, cudaStream_t stream, int device) {
    switch (nr) {
        case 1: return launch_nr<T, 1>(p, stream, device);
        case 2: return launch_nr<T, 2>(p, stream, device);
        case 3: return launch_nr<T, 3>(p, stream, device);
        case 4: return launch_nr<T, 4>(p, stream, device);
        case 5: return launch_nr<T, 5>(p, stream, device);
        case 6: return launch_nr<T, 6>(p, stream, device);
        case 7: return launch_nr<T, 7>(p, stream, device);
        default: return launch_nr<T, 8>(p, stream, device);
    }
}

bool launch_dot(wsp_ggml_type type, const DotParams & p, int nr, cudaStream_t stream, int device) {
    switch (type) {
        case WSP_GGML_TYPE_Q4_0: return launch_type<WSP_GGML_TYPE_Q4_0>(p, nr, stream, device);
        case WSP_GGML_TYPE_Q4_1: return launch_type<WSP_GGML_TYPE_Q4_1>(p, nr, stream, device);
        case WSP_GGML_TYPE_Q5_0: return launch_type<WSP_GGML_TYPE_Q5_0>(p, nr, stream, device);
        case WSP_GGML_TYPE_Q5_1: return launch_type<WSP_GGML_TYPE_Q5_1>(p, nr, stream, device);
        case WSP_GGML_TYPE_Q8_0: return launch_type<WSP_GGML_TYPE_Q8_0>(p, nr, stream, device);
        default: return false;
    }
}

} // namespace

bool mul_mat_q_dot(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor *a = t->src[0], *b = t->src[1];
    const int64_t          K = a->ne[0], M = b->ne[1], n_batch = b->ne[2] * b->ne[3];
    const int64_t          rows = M * n_batch, n_blocks = rows * (K / QK);
    // int8 values first (rows * K, a multiple of 32 bytes), then the (d, s) pairs
    Scratch scratch(ctx.scratch(), ctx.stream, (size_t) (rows * K) + (size_t) n_blocks * sizeof(float2));
    if (!scratch) {
        return false;
    }
    auto * qx = static_cast<int8_t *>(scratch.get());
    auto * ds = reinterpret_cast<float2 *>(qx + rows * K);

    const int64_t qgrid = std::min<int64_t>((n_blocks + 7) / 8, (int64_t) 1 << 20); // 8 warps per CTA
    gpu::launch(quantize_act_kernel, (unsigned) qgrid, 256, 0, ctx.stream, view_of(b), qx, ds, K, n_blocks);
    if (!WSP_CUDA_LAUNCH_OK(ctx.physical)) {
        return false;
    }

    DotParams p;
    p.a       = static_cast<const char *>(a->data);
    p.a_nb1   = (int64_t) a->nb[1];
    p.a_nb2   = (int64_t) a->nb[2];
    p.a_nb3   = (int64_t) a->nb[3];
    p.qx      = qx;
    p.ds      = ds;
    p.dst     = static_cast<char *>(t->data);
    p.d_nb1   = (int64_t) t->nb[1];
    p.d_nb2   = (int64_t) t->nb[2];
    p.d_nb3   = (int64_t) t->nb[3];
    p.K       = K;
    p.N       = a->ne[1];
    p.M       = M;
    p.ne12    = b->ne[2];
    p.r2      = b->ne[2] / a->ne[2];
    p.r3      = b->ne[3] / a->ne[3];
    p.n_batch = n_batch;
    // whole groups of 8 rows, then the remainder with a kernel sized to it
    const int64_t full = M / ROWS_PER_GROUP, rest = M % ROWS_PER_GROUP;
    if (full > 0) {
        p.group0   = 0;
        p.n_groups = full;
        if (!launch_dot(a->type, p, ROWS_PER_GROUP, ctx.stream, ctx.physical)) {
            return false;
        }
    }
    if (rest > 0) {
        p.group0   = full;
        p.n_groups = 1;
        if (!launch_dot(a->type, p, (int) rest, ctx.stream, ctx.physical)) {
            return false;
        }
    }
    return true;
}

} // namespace wsp::cuda
