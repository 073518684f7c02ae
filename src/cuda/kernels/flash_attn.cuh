#pragma once

// FLASH_ATTN_EXT on CUDA, shared by its three files: the parameters every kernel takes by value,
// the per-score epilogue (softcap, ALiBi-scaled mask, keys past the chunk), and the launchers.
// Keys are split into chunks (split-KV) when the queries alone cannot fill the device: each chunk
// leaves its unnormalised output with its running max and sum, and a combine kernel merges them.

#include "common.cuh"
#include "quant.cuh"

namespace wsp::cuda::fa {

// (K, V) head sizes with a kernel: D == Dv of whisper and the common decoders, and DeepSeek's MLA
// (K 576 = 512 latent + 64 rope columns, V the 512 latent ones); others are refused by supported()
inline bool head_sizes_supported(int64_t dk, int64_t dv) {
    if (dk == 576) {
        return dv == 512;
    }
    return dk == dv && (dk == 64 || dk == 80 || dk == 96 || dk == 112 || dk == 128 || dk == 192 || dk == 256);
}

// Note [big heads]: the tensor-core kernel keeps a warp's 16 query rows and its 16 x D output in
// registers (D / 4 + D / 2 words a thread, plus 32 of scores) and stages a 64-key tile of K and of
// transposed V in static shared memory (64 (D / 2 + 4) + 36 D words). At D = 192 that is 176
// registers before addresses and 52 KB; at D = 256, 224 registers and 69 KB: past the 48 KB of
// static shared memory, and spills. Heads above 128 therefore take the FMA kernel at any query
// count, which is slower on long F16 prompts but needs only the NQ queries, NQ rows of
// probabilities and the outputs of its key groups in shared memory (38 KB at 576 / 512 with 8
// queries); each of its threads holds several output columns (Note [vec column layout]).
inline bool mma_head_sizes(int64_t dk, int64_t dv) {
    return dk == dv && dk <= 128;
}

constexpr int THREADS = 128; // every flash-attention kernel runs 4 warps

// The tensor-core kernel is written with NVIDIA's mma.sync (sm_80+); targets without it take the
// FMA kernel for everything (Note [vendors])
constexpr bool MMA_AVAILABLE = WSP_GPU_HAS_MMA_M16N8K16;

struct Params {
    const char * q;
    const char * k;
    const char * v;
    const char * mask; // null without a mask
    char *       dst;
    float *      part_o;  // [n_chunks][n_rows][Dv] unnormalised outputs, null with one chunk
    float2 *     part_ml; // [n_chunks][n_rows] (running max, running sum)
    int64_t      q_nb[4], k_nb[4], v_nb[4], mask_nb[4], dst_nb[4]; // bytes
    int          q_type, kv_type, mask_type;
    int          n_q, n_kv, n_head, ne3;
    int          mask_ne2, mask_ne3;
    int          head_ratio;  // n_head / n_head_kv (GQA)
    int          batch_ratio; // q ne3 / k ne3
    int          n_chunks, chunk_keys;
    float        qscale;           // scale, or scale / softcap when softcap is on (the CPU's order)
    float        softcap;          // 0: off
    float        log2_m0, log2_m1; // log2 of the ALiBi bases; max_bias <= 0 gives slope 1
    int          n_head_log2;
    bool         alibi;
    bool         kv_vec;   // K and V are F16 with 16-byte aligned rows: vector loads
    bool         kv_quant; // K and V are of one block type (quant.cuh): elements dequantized
};

// ALiBi slope of head h: the CPU's m0^(h + 1) or m1^(2 (h - n_head_log2) + 1) (vec.cpp:
// alibi_slope) as exp2 of a product, a few ulp from the CPU's powf; powf's inlined slow paths
// cost these kernels registers and local-memory spills
__device__ __forceinline__ float alibi_slope(const Params & p, int h) {
    if (!p.alibi) {
        return 1.0f;
    }
    return h < p.n_head_log2 ? exp2f(p.log2_m0 * (float) (h + 1))
                             : exp2f(p.log2_m1 * (float) (2 * (h - p.n_head_log2) + 1));
}

// base of the mask rows of (head h, batch b); row iq is mask_row(...) + iq * mask_nb[1]
__device__ __forceinline__ const char * mask_rows(const Params & p, int h, int b) {
    return p.mask + (int64_t) (h % p.mask_ne2) * p.mask_nb[2] + (int64_t) (b % p.mask_ne3) * p.mask_nb[3];
}

// Final score of (query iq, key j) from the raw dot product x of the pre-scaled query: the CPU's
// order (tanh, times softcap, plus slope * mask); keys at or past k_end (outside this chunk) and
// rows past n_q get -inf so that they weigh nothing.
__device__ __forceinline__ float finish_score(const Params & p, float x, const char * mrows, float slope, int iq, int j,
                                              int k_end) {
    if (j >= k_end || iq >= p.n_q) {
        return -INFINITY;
    }
    if (p.softcap != 0.0f) {
        x = p.softcap * tanhf(x);
    }
    if (mrows != nullptr) {
        x += slope * load_f(p.mask_type, mrows + (int64_t) iq * p.mask_nb[1] + (int64_t) j * p.mask_nb[0]);
    }
    return x;
}

// Output of row (iq, h, b): with one chunk the normalised result goes to dst, with several the
// unnormalised sum and (m, l) go to the partials (row index ((b * n_head + h) * n_q + iq)).
__device__ __forceinline__ int64_t part_row(const Params & p, int iq, int h, int b) {
    return ((int64_t) b * p.n_head + h) * p.n_q + iq;
}

__device__ __forceinline__ float * dst_row(const Params & p, int iq, int h, int b) {
    return reinterpret_cast<float *>(p.dst + (int64_t) h * p.dst_nb[1] + (int64_t) iq * p.dst_nb[2] +
                                     (int64_t) b * p.dst_nb[3]);
}

// launchers (false: no kernel for these head sizes); grid x = query block + n_blocks * batch,
// y = chunk, z = head
bool launch_mma(const Params & p, int d, int n_qblocks, cudaStream_t stream, int device);
bool launch_vec(const Params & p, int dk, int dv, int nq_per_block, int n_qblocks, cudaStream_t stream, int device);

// queries per CTA of the tensor-core kernel (16 per warp)
constexpr int MMA_BLOCK_Q = 64;
// keys per tile of each kernel; chunks are whole tiles
constexpr int MMA_BLOCK_K = 64;
constexpr int VEC_BLOCK_K = THREADS;

} // namespace wsp::cuda::fa
