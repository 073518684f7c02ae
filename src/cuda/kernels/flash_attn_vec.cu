// FLASH_ATTN_EXT with F32 FMA arithmetic: a CTA of 128 threads takes NQ (1, 2, 4 or 8) queries of
// one head and walks its chunk of keys 128 at a time, one key per thread for Q.K^T (the key row
// read once for all NQ queries), then a few output column pairs per thread for P.V with the keys
// split among thread groups (Note [vec column layout]). It serves decode steps (few queries: the
// split-KV chunks fill the device), every K/V type and layout (block-quantized K/V element by
// element) and the heads above 128 (Note [big heads]); the tensor-core kernel takes the long F16
// runs.

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
template <int DK, int NQ>
__device__ __forceinline__ void dot_key(const Params & p, const char * krow, const float (&q)[NQ][DK], float (&s)[NQ]) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        s[i] = 0.0f;
    }
    if (p.kv_vec) {
#pragma unroll 2
        for (int d = 0; d < DK; d += 8) {
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
    for (int d = 0; d < DK; ++d) {
        const float kd = p.kv_quant ? dequantize_block_row_elem(p.kv_type, krow, d)
                                    : load_f(p.kv_type, krow + (int64_t) d * p.k_nb[0]);
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
        return make_float2(dequantize_block_row_elem(p.kv_type, vrow, col),
                           dequantize_block_row_elem(p.kv_type, vrow, col + 1));
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

// Note [vec column layout]: in P.V a thread owns NP column pairs of the Dv outputs, TPG pairs
// apart (a warp's loads of one V row cover consecutive words), and the CTA's threads form GROUPS
// groups of TPG, each group taking every GROUPS-th key of a step; the groups' sums meet in shared
// memory at the end. Up to Dv = 128 a thread has one pair (TPG = Dv / 2: 2 to 4 groups, some
// threads idle at 80, 96 and 112). Above, one pair a thread would leave threads idle (192), one
// group (256) or too few threads (512), and each probability read from shared memory would feed
// only 2 FMAs: 192 takes 3 pairs (4 groups of 32), 256 and 512 take 2 (2 groups of 64, one of
// 128), which keeps the NQ x 2 NP accumulators within 48 registers at NQ = 8.
template <int DV>
struct Cols {
    static constexpr int PAIRS  = DV / 2;
    static constexpr int NP     = DV <= 128 ? 1 : DV == 192 ? 3 : 2; // column pairs a thread
    static constexpr int TPG    = PAIRS / NP;                        // threads a key group
    static constexpr int GROUPS = THREADS / TPG;                     // key groups of P.V
    static_assert(PAIRS % NP == 0 && TPG <= THREADS, "a thread for every column pair");
};

template <int DK, int DV, int NQ>
struct Smem {
    static constexpr int GROUPS = Cols<DV>::GROUPS;
    float                q[NQ][DK];
    float                p[NQ][BK];
    float                red[WARPS][NQ];
    float                o[GROUPS][NQ][DV];
    float                l[GROUPS][NQ];
    float                m[NQ];
};

// the NQ queries (rows q0..q0+NQ-1, zeros past n_q) into shared memory, pre-scaled
template <int DK, int DV, int NQ>
__device__ __forceinline__ void load_queries(const Params & p, Smem<DK, DV, NQ> & sm, int q0, int h, int b) {
    for (int i = threadIdx.x; i < NQ * DK; i += THREADS) {
        const int r = i / DK, d = i % DK, iq = q0 + r;
        sm.q[r][d] = iq < p.n_q ? load_f(p.q_type, p.q + (int64_t) iq * p.q_nb[1] + (int64_t) h * p.q_nb[2] +
                                                       (int64_t) b * p.q_nb[3] + (int64_t) d * p.q_nb[0]) *
                                      p.qscale
                                : 0.0f;
    }
}

// combine the key groups' shares and write the NQ rows (normalised, or raw with (m, l))
template <int DK, int DV, int NQ>
__device__ __forceinline__ void store_rows(const Params & p, const Smem<DK, DV, NQ> & sm, int q0, int h, int b) {
    for (int i = threadIdx.x; i < NQ * DV; i += THREADS) {
        const int r = i / DV, d = i % DV, iq = q0 + r;
        if (iq >= p.n_q) {
            continue;
        }
        float o = 0.0f, l = 0.0f;
#pragma unroll
        for (int g = 0; g < Cols<DV>::GROUPS; ++g) {
            o += sm.o[g][r][d];
            l += sm.l[g][r];
        }
        if (p.n_chunks == 1) {
            // l >= 1 once a key is attended (see flash_attn_mma.cu); 0: fully masked, zeros
            dst_row(p, iq, h, b)[d] = l > 0.0f ? __fdividef(o, l) : 0.0f;
        } else {
            const int64_t row      = (int64_t) blockIdx.y * p.n_q * p.n_head * p.ne3 + part_row(p, iq, h, b);
            p.part_o[row * DV + d] = o;
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
template <int DK, int DV, int NQ>
__device__ __forceinline__ void scores_step(const Params & p, Smem<DK, DV, NQ> & sm, const Place & c, int kb,
                                            float (&m)[NQ], float (&alpha)[NQ]) {
    const int tid = threadIdx.x, warp = tid / 32, key = kb + tid;
    float     s[NQ];
    dot_key<DK, NQ>(p, c.kbase + (int64_t) (key < c.k_end ? key : c.k_begin) * p.k_nb[1], sm.q, s);
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

// O += P V over the step's keys for this thread's column pairs; the key groups split the keys
template <int DK, int DV, int NQ>
__device__ __forceinline__ void pv_step(const Params & p, const Smem<DK, DV, NQ> & sm, const Place & c, int kb,
                                        const float (&alpha)[NQ], float2 (&acc)[NQ][Cols<DV>::NP], float (&l)[NQ]) {
    using C         = Cols<DV>;
    const int col   = threadIdx.x % C::TPG;
    const int group = threadIdx.x / C::TPG;
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
#pragma unroll
        for (int e = 0; e < C::NP; ++e) {
            acc[i][e].x *= alpha[i];
            acc[i][e].y *= alpha[i];
        }
        l[i] *= alpha[i];
    }
    const int n = min(BK, c.k_end - kb);
    for (int j = group; j < n; j += C::GROUPS) {
        const char * vrow = c.vbase + (int64_t) (kb + j) * p.v_nb[1];
        float2       v[C::NP];
#pragma unroll
        for (int e = 0; e < C::NP; ++e) {
            v[e] = load_v2(p, vrow, 2 * (col + e * C::TPG));
        }
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            const float pj = sm.p[i][j];
#pragma unroll
            for (int e = 0; e < C::NP; ++e) {
                acc[i][e].x += pj * v[e].x;
                acc[i][e].y += pj * v[e].y;
            }
            l[i] += pj;
        }
    }
}

template <int DK, int DV, int NQ>
__global__ void __launch_bounds__(THREADS) fa_vec_kernel(const Params p, const int n_qblocks) {
    using C = Cols<DV>;
    static_assert(sizeof(Smem<DK, DV, NQ>) <= 48 * 1024, "within the static shared memory of every target");
    __shared__ __align__(16) Smem<DK, DV, NQ> sm;
    const Place                               c     = place_of(p, NQ, n_qblocks);
    const int                                 col   = threadIdx.x % C::TPG;
    const int                                 group = threadIdx.x / C::TPG; // group == GROUPS: idle in P V

    load_queries<DK, DV, NQ>(p, sm, c.q0, c.h, c.b);
    float  m[NQ], l[NQ], alpha[NQ];
    float2 acc[NQ][C::NP];
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < C::NP; ++e) {
            acc[i][e] = make_float2(0.0f, 0.0f);
        }
    }
    __syncthreads();
    for (int kb = c.k_begin; kb < c.k_end; kb += BK) {
        scores_step<DK, DV, NQ>(p, sm, c, kb, m, alpha);
        if (group < C::GROUPS) {
            pv_step<DK, DV, NQ>(p, sm, c, kb, alpha, acc, l);
        }
        // the next step writes sm.red before its first barrier, which every thread reaches only
        // after reading this step's sm.red, and sm.p after that barrier, past this step's reads
    }

    // each key group's share of the sums, then the rows
    if (group < C::GROUPS) {
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
#pragma unroll
            for (int e = 0; e < C::NP; ++e) {
                const int d           = 2 * (col + e * C::TPG);
                sm.o[group][i][d]     = acc[i][e].x;
                sm.o[group][i][d + 1] = acc[i][e].y;
            }
            if (col == 0) {
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
    store_rows<DK, DV, NQ>(p, sm, c.q0, c.h, c.b);
}

template <int DK, int DV, int NQ>
bool launch_dq(const Params & p, int n_qblocks, cudaStream_t stream, int device) {
    const dim3 grid((unsigned) (n_qblocks * p.ne3), (unsigned) p.n_chunks, (unsigned) p.n_head);
    gpu::launch(fa_vec_kernel<DK, DV, NQ>, grid, THREADS, 0, stream, p, n_qblocks);
    return WSP_CUDA_LAUNCH_OK(device);
}

template <int DK, int DV = DK>
bool launch_d(const Params & p, int nq, int n_qblocks, cudaStream_t stream, int device) {
    switch (nq) {
        case 1: return launch_dq<DK, DV, 1>(p, n_qblocks, stream, device);
        case 2: return launch_dq<DK, DV, 2>(p, n_qblocks, stream, device);
        case 4: return launch_dq<DK, DV, 4>(p, n_qblocks, stream, device);
        case 8: return launch_dq<DK, DV, 8>(p, n_qblocks, stream, device);
        default: return false;
    }
}

} // namespace

// the cases of head_sizes_supported
bool launch_vec(const Params & p, int dk, int dv, int nq_per_block, int n_qblocks, cudaStream_t stream, int device) {
    if (dk != dv) {
        return dk == 576 && dv == 512 && launch_d<576, 512>(p, nq_per_block, n_qblocks, stream, device);
    }
    switch (dk) {
        case 64: return launch_d<64>(p, nq_per_block, n_qblocks, stream, device);
        case 80: return launch_d<80>(p, nq_per_block, n_qblocks, stream, device);
        case 96: return launch_d<96>(p, nq_per_block, n_qblocks, stream, device);
        case 112: return launch_d<112>(p, nq_per_block, n_qblocks, stream, device);
        case 128: return launch_d<128>(p, nq_per_block, n_qblocks, stream, device);
        case 192: return launch_d<192>(p, nq_per_block, n_qblocks, stream, device);
        case 256: return launch_d<256>(p, nq_per_block, n_qblocks, stream, device);
        default: return false;
    }
}

} // namespace wsp::cuda::fa
