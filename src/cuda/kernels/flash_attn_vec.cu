// FLASH_ATTN_EXT with F32 FMA arithmetic: a CTA of 128 threads takes NQ (1, 2, 4 or 8) queries of
// one head and walks its chunk of keys 128 at a time, one key per thread for Q.K^T (the key row
// read once for all NQ queries), then one column pair per thread for P.V with the keys split
// among thread groups. It serves decode steps (few queries: the split-KV chunks fill the device)
// and every K/V type and layout (block-quantized K/V element by element); the tensor-core kernel
// takes the long F16 runs.

#include "flash_attn.cuh"

namespace wsp::cuda::fa {

namespace {

constexpr int BK    = VEC_BLOCK_K; // keys per step, one per thread
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float2 half2_bits(uint32_t u) {
    return make_float2(__half2float(__ushort_as_half((unsigned short) (u & 0xffffu))),
                       __half2float(__ushort_as_half((unsigned short) (u >> 16))));
}

// s[i] = q_i . K[key] for the NQ queries (q pre-scaled in shared memory)
template <int D, int NQ>
__device__ __forceinline__ void dot_key(const Params & p, const char * krow, const float (&q)[NQ][D], float (&s)[NQ]) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        s[i] = 0.0f;
    }
    if (p.kv_vec) {
#pragma unroll 2
        for (int d = 0; d < D; d += 8) {
            const uint4  w    = *reinterpret_cast<const uint4 *>(krow + (int64_t) d * 2);
            const float2 k[4] = { half2_bits(w.x), half2_bits(w.y), half2_bits(w.z), half2_bits(w.w) };
#pragma unroll
            for (int i = 0; i < NQ; ++i) {
                // all threads read the same q words: shared-memory broadcasts
                const float4 qa = *reinterpret_cast<const float4 *>(&q[i][d]);
                const float4 qb = *reinterpret_cast<const float4 *>(&q[i][d + 4]);
                s[i] += qa.x * k[0].x + qa.y * k[0].y + qa.z * k[1].x + qa.w * k[1].y;
                s[i] += qb.x * k[2].x + qb.y * k[2].y + qb.z * k[3].x + qb.w * k[3].y;
            }
        }
        return;
    }
    for (int d = 0; d < D; ++d) {
        const float kd =
            p.kv_quant ? dequantize_row_elem(p.kv_type, krow, d) : load_f(p.kv_type, krow + (int64_t) d * p.k_nb[0]);
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            s[i] += q[i][d] * kd;
        }
    }
}

__device__ __forceinline__ float2 load_v2(const Params & p, const char * vrow, int col) {
    if (p.kv_vec) {
        return half2_bits(*reinterpret_cast<const uint32_t *>(vrow + (int64_t) col * 2));
    }
    if (p.kv_quant) {
        return make_float2(dequantize_row_elem(p.kv_type, vrow, col), dequantize_row_elem(p.kv_type, vrow, col + 1));
    }
    return make_float2(load_f(p.kv_type, vrow + (int64_t) col * p.v_nb[0]),
                       load_f(p.kv_type, vrow + (int64_t) (col + 1) * p.v_nb[0]));
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        x = fmaxf(x, __shfl_xor_sync(group32_mask(), x, off));
    }
    return x;
}

template <int D, int NQ>
struct Smem {
    static constexpr int PAIRS  = D / 2;           // output column pairs
    static constexpr int GROUPS = THREADS / PAIRS; // key groups of P.V (2 to 4)
    float                q[NQ][D];
    float                p[NQ][BK];
    float                red[WARPS][NQ];
    float                o[GROUPS][NQ][D];
    float                l[GROUPS][NQ];
    float                m[NQ];
};

// the NQ queries (rows q0..q0+NQ-1, zeros past n_q) into shared memory, pre-scaled
template <int D, int NQ>
__device__ __forceinline__ void load_queries(const Params & p, Smem<D, NQ> & sm, int q0, int h, int b) {
    for (int i = threadIdx.x; i < NQ * D; i += THREADS) {
        const int r = i / D, d = i % D, iq = q0 + r;
        sm.q[r][d] = iq < p.n_q ? load_f(p.q_type, p.q + (int64_t) iq * p.q_nb[1] + (int64_t) h * p.q_nb[2] +
                                                       (int64_t) b * p.q_nb[3] + (int64_t) d * p.q_nb[0]) *
                                      p.qscale
                                : 0.0f;
    }
}

// combine the key groups' shares and write the NQ rows (normalised, or raw with (m, l))
template <int D, int NQ>
__device__ __forceinline__ void store_rows(const Params & p, const Smem<D, NQ> & sm, int q0, int h, int b) {
    for (int i = threadIdx.x; i < NQ * D; i += THREADS) {
        const int r = i / D, d = i % D, iq = q0 + r;
        if (iq >= p.n_q) {
            continue;
        }
        float o = 0.0f, l = 0.0f;
#pragma unroll
        for (int g = 0; g < Smem<D, NQ>::GROUPS; ++g) {
            o += sm.o[g][r][d];
            l += sm.l[g][r];
        }
        if (p.n_chunks == 1) {
            // l >= 1 once a key is attended (see flash_attn_mma.cu); 0: fully masked, zeros
            dst_row(p, iq, h, b)[d] = l > 0.0f ? __fdividef(o, l) : 0.0f;
        } else {
            const int64_t row     = (int64_t) blockIdx.y * p.n_q * p.n_head * p.ne3 + part_row(p, iq, h, b);
            p.part_o[row * D + d] = o;
            if (d == 0) {
                p.part_ml[row] = make_float2(sm.m[r], l);
            }
        }
    }
}

// Where the CTA is in the problem: query block, batch, head, its chunk of keys and the K/V/mask
// bases of that head
struct Place {
    int          q0, h, b, k_begin, k_end;
    const char * kbase;
    const char * vbase;
    const char * mrows;
    float        slope;
};

__device__ __forceinline__ Place place_of(const Params & p, int nq, int n_qblocks) {
    Place     c;
    const int qb = (int) (blockIdx.x % n_qblocks);
    c.b          = (int) (blockIdx.x / n_qblocks);
    c.h          = (int) blockIdx.z;
    c.q0         = qb * nq;
    c.k_begin    = (int) blockIdx.y * p.chunk_keys;
    c.k_end      = min(p.n_kv, c.k_begin + p.chunk_keys);
    const int hk = c.h / p.head_ratio, bk = c.b / p.batch_ratio;
    c.kbase = p.k + (int64_t) hk * p.k_nb[2] + (int64_t) bk * p.k_nb[3];
    c.vbase = p.v + (int64_t) hk * p.v_nb[2] + (int64_t) bk * p.v_nb[3];
    c.mrows = p.mask != nullptr ? mask_rows(p, c.h, c.b) : nullptr;
    c.slope = alibi_slope(p, c.h);
    return c;
}

// Scores of this thread's key (kb + tid) for the NQ queries, the CTA's new running max m, and from
// it the probabilities (into sm.p) and the factors alpha that shrink earlier sums. Every thread
// derives the same m and alpha from the same shared values.
template <int D, int NQ>
__device__ __forceinline__ void scores_step(const Params & p, Smem<D, NQ> & sm, const Place & c, int kb, float (&m)[NQ],
                                            float (&alpha)[NQ]) {
    const int tid = threadIdx.x, warp = tid / 32, key = kb + tid;
    float     s[NQ];
    dot_key<D, NQ>(p, c.kbase + (int64_t) (key < c.k_end ? key : c.k_begin) * p.k_nb[1], sm.q, s);
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        s[i]             = finish_score(p, s[i], c.mrows, c.slope, c.q0 + i, key, c.k_end);
        const float wmax = warp_max(s[i]);
        if (tid % 32 == 0) {
            sm.red[warp][i] = wmax;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        float tile_max = sm.red[0][i];
#pragma unroll
        for (int w = 1; w < WARPS; ++w) {
            tile_max = fmaxf(tile_max, sm.red[w][i]);
        }
        const float m_new = fmaxf(m[i], tile_max);
        const bool  none  = m_new == -INFINITY; // all keys so far masked (exp would give NaN)
        alpha[i]          = none ? 1.0f : __expf(m[i] - m_new);
        sm.p[i][tid]      = none ? 0.0f : __expf(s[i] - m_new);
        m[i]              = m_new;
    }
    __syncthreads();
}

// O += P V over the step's keys for this thread's column pair; the key groups split the keys
template <int D, int NQ>
__device__ __forceinline__ void pv_step(const Params & p, const Smem<D, NQ> & sm, const Place & c, int kb,
                                        const float (&alpha)[NQ], float (&acc)[NQ][2], float (&l)[NQ]) {
    constexpr int PAIRS = Smem<D, NQ>::PAIRS, GROUPS = Smem<D, NQ>::GROUPS;
    const int     pair = threadIdx.x % PAIRS, group = threadIdx.x / PAIRS;
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        acc[i][0] *= alpha[i];
        acc[i][1] *= alpha[i];
        l[i] *= alpha[i];
    }
    const int n = min(BK, c.k_end - kb);
    for (int j = group; j < n; j += GROUPS) {
        const float2 v = load_v2(p, c.vbase + (int64_t) (kb + j) * p.v_nb[1], 2 * pair);
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            const float pj = sm.p[i][j];
            acc[i][0] += pj * v.x;
            acc[i][1] += pj * v.y;
            l[i] += pj;
        }
    }
}

template <int D, int NQ>
__global__ void __launch_bounds__(THREADS) fa_vec_kernel(const Params p, const int n_qblocks) {
    constexpr int PAIRS = Smem<D, NQ>::PAIRS, GROUPS = Smem<D, NQ>::GROUPS;
    __shared__ __align__(16) Smem<D, NQ> sm;
    const Place                          c = place_of(p, NQ, n_qblocks);
    const int pair = threadIdx.x % PAIRS, group = threadIdx.x / PAIRS; // group == GROUPS: idle in P V

    load_queries<D, NQ>(p, sm, c.q0, c.h, c.b);
    float m[NQ], l[NQ], acc[NQ][2], alpha[NQ];
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        m[i] = -INFINITY;
        l[i] = acc[i][0] = acc[i][1] = 0.0f;
    }
    __syncthreads();
    for (int kb = c.k_begin; kb < c.k_end; kb += BK) {
        scores_step<D, NQ>(p, sm, c, kb, m, alpha);
        if (group < GROUPS) {
            pv_step<D, NQ>(p, sm, c, kb, alpha, acc, l);
        }
        // the next step writes sm.red before its first barrier, which every thread reaches only
        // after reading this step's sm.red, and sm.p after that barrier, past this step's reads
    }

    // each key group's share of the sums, then the rows
    if (group < GROUPS) {
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            sm.o[group][i][2 * pair]     = acc[i][0];
            sm.o[group][i][2 * pair + 1] = acc[i][1];
            if (pair == 0) {
                sm.l[group][i] = l[i];
            }
        }
    }
    if (threadIdx.x == 0) {
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            sm.m[i] = m[i];
        }
    }
    __syncthreads();
    store_rows<D, NQ>(p, sm, c.q0, c.h, c.b);
}

template <int D, int NQ>
bool launch_dq(const Params & p, int n_qblocks, cudaStream_t stream, int device) {
    const dim3 grid((unsigned) (n_qblocks * p.ne3), (unsigned) p.n_chunks, (unsigned) p.n_head);
    gpu::launch(fa_vec_kernel<D, NQ>, grid, THREADS, 0, stream, p, n_qblocks);
    return WSP_CUDA_LAUNCH_OK(device);
}

template <int D>
bool launch_d(const Params & p, int nq, int n_qblocks, cudaStream_t stream, int device) {
    switch (nq) {
        case 1: return launch_dq<D, 1>(p, n_qblocks, stream, device);
        case 2: return launch_dq<D, 2>(p, n_qblocks, stream, device);
        case 4: return launch_dq<D, 4>(p, n_qblocks, stream, device);
        case 8: return launch_dq<D, 8>(p, n_qblocks, stream, device);
        default: return false;
    }
}

} // namespace

bool launch_vec(const Params & p, int d, int nq_per_block, int n_qblocks, cudaStream_t stream, int device) {
    switch (d) {
        case 64: return launch_d<64>(p, nq_per_block, n_qblocks, stream, device);
        case 80: return launch_d<80>(p, nq_per_block, n_qblocks, stream, device);
        case 96: return launch_d<96>(p, nq_per_block, n_qblocks, stream, device);
        case 112: return launch_d<112>(p, nq_per_block, n_qblocks, stream, device);
        case 128: return launch_d<128>(p, nq_per_block, n_qblocks, stream, device);
        default: return false;
    }
}

} // namespace wsp::cuda::fa
