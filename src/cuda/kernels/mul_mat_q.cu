// Quantized MUL_MAT: the path choice (Note [mmq paths] in mul_mat_q.cuh) and the GEMM path. The
// GEMM path dequantizes the weight to F16 (every batch of it, a slab of rows at a time, within a
// scratch budget) and hands each slab to the cuBLAS path of mul_mat.cu as a float-weight node
// whose dst is the matching column range; the activations are converted to F16 once for all slabs.

#include "block_reduce.cuh"
#include "kernels.cuh"
#include "mul_mat_q.cuh"
#include "quant.cuh"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace wsp::cuda {

namespace {

// F16 copies of weights stay under this many bytes unless WSP_GGML_CUDA_DEQUANT_BUDGET says
// otherwise (read at every launch, so that tests can force several slabs)
constexpr size_t DEFAULT_DEQUANT_BUDGET = (size_t) 256 << 20;

size_t dequant_budget() {
    const char * env = std::getenv("WSP_GGML_CUDA_DEQUANT_BUDGET");
    if (env != nullptr) {
        const long long v = std::atoll(env);
        if (v > 0) {
            return (size_t) v;
        }
    }
    return DEFAULT_DEQUANT_BUDGET;
}

struct DequantLayout {
    const char * a;
    int64_t      a_nb1, a_nb2, a_nb3;
    int64_t      K, n0, rows, ne02; // weight rows n0 .. n0 + rows of every batch (ne02 x ne03)
    int64_t      n_pieces;          // 4 quarters per block
    __half *     out;               // [K, rows, ne02, ne03], contiguous
};

// One thread per quarter block (8 values) of the slab: elements 4t..4t+3 and 16+4t..16+4t+3 for
// the 4/5-bit types (which share bytes), 8t..8t+7 for Q8_0; each group of four leaves as 8 bytes.
// Values come from quant.cuh's dequantizers (the CPU's to_float, bit for bit), then round to F16.
template <int T>
__host__ __device__ constexpr int64_t block_bytes() {
    return T == WSP_GGML_TYPE_Q4_0   ? sizeof(block_q4_0)
           : T == WSP_GGML_TYPE_Q4_1 ? sizeof(block_q4_1)
           : T == WSP_GGML_TYPE_Q5_0 ? sizeof(block_q5_0)
           : T == WSP_GGML_TYPE_Q5_1 ? sizeof(block_q5_1)
                                     : sizeof(block_q8_0);
}

template <int T>
__global__ void dequant_f16_kernel(const DequantLayout l) {
    const int64_t nbr    = l.K / QK;
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < l.n_pieces; i += stride) {
        const int     t   = (int) (i % 4);
        const int64_t blk = i / 4, ib = blk % nbr, row = blk / nbr; // row over (n, i2, i3)
        const int64_t n = row % l.rows, i2 = (row / l.rows) % l.ne02, i3 = row / (l.rows * l.ne02);
        const char *  block = l.a + (l.n0 + n) * l.a_nb1 + i2 * l.a_nb2 + i3 * l.a_nb3 + ib * block_bytes<T>();
        const int     j0    = T == WSP_GGML_TYPE_Q8_0 ? 8 * t : 4 * t;
        const int     j1    = T == WSP_GGML_TYPE_Q8_0 ? 8 * t + 4 : 16 + 4 * t;
        __half *      out   = l.out + row * l.K + ib * QK;
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            const int j = part == 0 ? j0 : j1;
            uint2     w;
            w.x = (uint32_t) __half_as_ushort(__float2half_rn(dequantize<T>(block, j))) |
                  ((uint32_t) __half_as_ushort(__float2half_rn(dequantize<T>(block, j + 1))) << 16);
            w.y = (uint32_t) __half_as_ushort(__float2half_rn(dequantize<T>(block, j + 2))) |
                  ((uint32_t) __half_as_ushort(__float2half_rn(dequantize<T>(block, j + 3))) << 16);
            *reinterpret_cast<uint2 *>(out + j) = w; // 8-byte aligned: K * 2 and j * 2 are multiples of 8
        }
    }
}

// the K-quants (and any type dequantize_row_elem reads): one thread per 8 values of a row, each read
// through the element dequantizer, written as 16 bytes (K a multiple of 256: rows of 512 bytes)
__global__ void dequant_f16_elem_kernel(const DequantLayout l, int type) {
    const int64_t per_row = l.K / 8;
    const int64_t stride  = (int64_t) gridDim.x * blockDim.x;
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < l.n_pieces; i += stride) {
        const int64_t p = i % per_row, row = i / per_row; // row over (n, i2, i3)
        const int64_t n = row % l.rows, i2 = (row / l.rows) % l.ne02, i3 = row / (l.rows * l.ne02);
        const char *  src = l.a + (l.n0 + n) * l.a_nb1 + i2 * l.a_nb2 + i3 * l.a_nb3;
        uint32_t      h[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t j = 8 * p + 2 * e;
            h[e]            = (uint32_t) __half_as_ushort(__float2half_rn(dequantize_row_elem(type, src, j))) |
                   ((uint32_t) __half_as_ushort(__float2half_rn(dequantize_row_elem(type, src, j + 1))) << 16);
        }
        *reinterpret_cast<uint4 *>(l.out + row * l.K + 8 * p) = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

bool launch_dequant(LaunchCtx & ctx, wsp_ggml_type type, const DequantLayout & l) {
    const int64_t blocks = std::min<int64_t>((l.n_pieces + 255) / 256, (int64_t) 1 << 20);
    switch (type) {
        case WSP_GGML_TYPE_Q4_0:
            gpu::launch(dequant_f16_kernel<WSP_GGML_TYPE_Q4_0>, (unsigned) blocks, 256, 0, ctx.stream, l);
            break;
        case WSP_GGML_TYPE_Q4_1:
            gpu::launch(dequant_f16_kernel<WSP_GGML_TYPE_Q4_1>, (unsigned) blocks, 256, 0, ctx.stream, l);
            break;
        case WSP_GGML_TYPE_Q5_0:
            gpu::launch(dequant_f16_kernel<WSP_GGML_TYPE_Q5_0>, (unsigned) blocks, 256, 0, ctx.stream, l);
            break;
        case WSP_GGML_TYPE_Q5_1:
            gpu::launch(dequant_f16_kernel<WSP_GGML_TYPE_Q5_1>, (unsigned) blocks, 256, 0, ctx.stream, l);
            break;
        case WSP_GGML_TYPE_Q8_0:
            gpu::launch(dequant_f16_kernel<WSP_GGML_TYPE_Q8_0>, (unsigned) blocks, 256, 0, ctx.stream, l);
            break;
        default:
            if (!is_elem_quant(type)) {
                return false;
            }
            gpu::launch(dequant_f16_elem_kernel, (unsigned) blocks, 256, 0, ctx.stream, l, (int) type);
            break;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// the activations as F16: b itself when it already is, else a contiguous converted copy
const wsp_ggml_tensor * f16_activations(LaunchCtx & ctx, const wsp_ggml_tensor * b, wsp_ggml_tensor & shadow,
                                        std::unique_ptr<Scratch> & holder) {
    if (b->type == WSP_GGML_TYPE_F16) {
        return b;
    }
    holder = std::make_unique<Scratch>(ctx.scratch(), ctx.stream, (size_t) wsp_ggml_nelements(b) * sizeof(__half));
    if (!*holder || !convert_contiguous(ctx, b, holder->get(), WSP_GGML_TYPE_F16)) {
        return nullptr;
    }
    shadow       = *b;
    shadow.type  = WSP_GGML_TYPE_F16;
    shadow.data  = holder->get();
    shadow.nb[0] = sizeof(__half);
    for (int i = 1; i < 4; ++i) {
        shadow.nb[i] = shadow.nb[i - 1] * (size_t) shadow.ne[i - 1];
    }
    return &shadow;
}

bool gemm_path(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor *  a = t->src[0];
    const int64_t            K = a->ne[0], N = a->ne[1], a_batches = a->ne[2] * a->ne[3];
    wsp_ggml_tensor          b16;
    std::unique_ptr<Scratch> b_holder;
    const wsp_ggml_tensor *  b = f16_activations(ctx, t->src[1], b16, b_holder);
    if (b == nullptr) {
        return false;
    }
    // rows per slab: whole weight when it fits the budget, else multiples of 64 rows
    const int64_t row_bytes = K * a_batches * (int64_t) sizeof(__half);
    int64_t       slab      = std::max<int64_t>(1, (int64_t) dequant_budget() / row_bytes);
    slab                    = slab >= N ? N : (slab >= 64 ? slab / 64 * 64 : slab);
    Scratch w16(ctx.scratch(), ctx.stream, (size_t) (slab * row_bytes));
    if (!w16) {
        return false;
    }
    for (int64_t n0 = 0; n0 < N; n0 += slab) {
        const int64_t       rows = std::min(slab, N - n0);
        const DequantLayout l    = { static_cast<const char *>(a->data),
                                     (int64_t) a->nb[1],
                                     (int64_t) a->nb[2],
                                     (int64_t) a->nb[3],
                                     K,
                                     n0,
                                     rows,
                                     a->ne[2],
                                     rows * a_batches * (K / QK) * 4,
                                     static_cast<__half *>(w16.get()) };
        if (!launch_dequant(ctx, a->type, l)) {
            return false;
        }
        // the slab as an F16 weight, and the columns n0 .. n0 + rows of dst
        wsp_ggml_tensor w = *a;
        w.type            = WSP_GGML_TYPE_F16;
        w.data            = w16.get();
        w.ne[1]           = rows;
        w.nb[0]           = sizeof(__half);
        for (int i = 1; i < 4; ++i) {
            w.nb[i] = w.nb[i - 1] * (size_t) w.ne[i - 1];
        }
        wsp_ggml_tensor node = *t;
        node.src[0]          = &w;
        node.src[1]          = const_cast<wsp_ggml_tensor *>(b);
        node.ne[0]           = rows;
        node.data            = static_cast<char *>(t->data) + n0 * (int64_t) t->nb[0];
        if (!mul_mat_float(ctx, &node)) {
            return false;
        }
    }
    return true;
}

// Note [K-quant dot]: a K-quant weight at few activation rows: one warp per weight row (and batch),
// its lanes striding over K, each weight element dequantized once (dequantize_row_elem) and
// multiplied with up to KQ_ROWS activation rows in F32, then summed by shuffles. Exact weights and
// activations, F32 sums: the CPU's K-quant dot path quantizes the activations to Q8_K, so the two
// differ by that rounding (the CPU stays the reference).
constexpr int KQ_WARPS = 4;
constexpr int KQ_ROWS  = 8;

__global__ void kq_dot_kernel(TensorView a, TensorView b, TensorView d, int64_t n_batches) {
    const int     lane = (int) threadIdx.x % WARP_SIZE;
    const int64_t n    = (int64_t) blockIdx.x * KQ_WARPS + threadIdx.x / WARP_SIZE;
    if (n >= a.ne[1]) {
        return; // the whole warp: the shuffles below stay full-warp
    }
    const int M = (int) b.ne[1];
    for (int64_t bt = blockIdx.y; bt < n_batches; bt += gridDim.y) {
        const int64_t i2 = bt % d.ne[2], i3 = bt / d.ne[2];
        const char *  pa =
            a.data + n * a.nb[1] + (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
        const char * pb = b.data + i2 * b.nb[2] + i3 * b.nb[3];
        float        acc[KQ_ROWS];
#pragma unroll
        for (int m = 0; m < KQ_ROWS; ++m) {
            acc[m] = 0.0f;
        }
        for (int64_t k = lane; k < a.ne[0]; k += WARP_SIZE) {
            const float w = dequantize_row_elem(a.type, pa, k);
#pragma unroll
            for (int m = 0; m < KQ_ROWS; ++m) {
                if (m < M) {
                    acc[m] = fmaf(w, load_f(b.type, pb + k * b.nb[0] + m * b.nb[1]), acc[m]);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < KQ_ROWS; ++m) {
            if (m < M) {
                const float v = warp_reduce(acc[m], SumOp());
                if (lane == 0) {
                    *reinterpret_cast<float *>(d.data + n * d.nb[0] + m * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = v;
                }
            }
        }
    }
}

bool kq_dot(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a         = t->src[0];
    const int64_t           n_batches = t->ne[2] * t->ne[3];
    const int64_t           bx        = (a->ne[1] + KQ_WARPS - 1) / KQ_WARPS;
    const dim3              grid((unsigned) std::max<int64_t>(bx, 1), (unsigned) std::min<int64_t>(n_batches, 65535));
    gpu::launch(kq_dot_kernel, grid, dim3(KQ_WARPS * WARP_SIZE), 0, ctx.stream, view_of(a), view_of(t->src[1]),
                view_of(t), n_batches);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

int64_t read_dot_max_rows() {
    const char *    env = std::getenv("WSP_GGML_CUDA_MMQ_DOT_MAX_ROWS");
    const long long v   = env != nullptr ? std::atoll(env) : 0;
    return v > 0 ? (int64_t) v : 8;
}

} // namespace

int64_t mmq_dot_max_rows() {
    static const int64_t rows = read_dot_max_rows();
    return rows;
}

bool mmq_type_supported(wsp_ggml_type t) {
    return is_block_quant(t) || is_elem_quant(t);
}

bool mul_mat_q_supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor *a = t->src[0], *b = t->src[1];
    // blocks back to back along rows; 2-byte aligned row strides for the 16-bit loads of the
    // block fields (every block size is even); dst rows of F32 for cuBLAS (ldc = nb1 / 4)
    return mmq_type_supported(a->type) && a->nb[0] == wsp_ggml_type_size(a->type) &&
           a->ne[0] % wsp_ggml_blck_size(a->type) == 0 && a->nb[1] % 2 == 0 && a->nb[2] % 2 == 0 && a->nb[3] % 2 == 0 &&
           is_float_type(b->type) && t->type == WSP_GGML_TYPE_F32 && t->nb[0] == sizeof(float) &&
           t->nb[1] % sizeof(float) == 0;
}

bool mul_mat_q_launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    if (reinterpret_cast<uintptr_t>(t->src[0]->data) % 2 != 0) {
        WSP_LOG_ERROR("mul_mat: quantized weight %s at an odd address\n", t->src[0]->name);
        return false;
    }
    if (t->src[0]->ne[0] == 0) { // an empty sum: zeros, as on the CPU (dst is a fresh contiguous tensor)
        return WSP_CUDA_OK(cudaMemsetAsync(t->data, 0, wsp_ggml_nbytes(t), ctx.stream), ctx.physical);
    }
    const int64_t M = t->src[1]->ne[1];
    if (is_elem_quant(t->src[0]->type)) {
        return M <= KQ_ROWS ? kq_dot(ctx, t) : gemm_path(ctx, t);
    }
    return M <= mmq_dot_max_rows() ? mul_mat_q_dot(ctx, t) : gemm_path(ctx, t);
}

} // namespace wsp::cuda
