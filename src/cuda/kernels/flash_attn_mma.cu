// FLASH_ATTN_EXT on tensor cores (sm_80+, F16 K/V, heads up to 128: Note [big heads]): a CTA of
// 4 warps takes 64 queries of one head (16 per warp, held as F16 mma fragments) and walks its chunk
// of keys in tiles of 64. Each tile of K (row-major) and V (transposed) is staged in shared memory;
// S = Q K^T and O += P V are mma.m16n8k16 with F32 accumulators; the online softmax runs on the S
// fragments in registers and turns them into the A fragments of P V without leaving registers
// (Note [fragment reuse]).

#include "flash_attn.cuh"

namespace wsp::cuda::fa {

namespace {

constexpr int BQ = MMA_BLOCK_Q;
constexpr int BK = MMA_BLOCK_K;
// Shared tiles are arrays of 32-bit words, each a pair of halves. Rows are padded by 4 words:
// the fragment loads of a warp (8 rows g x 4 words t) then hit 32 distinct banks for every head
// size (row strides of 36, 44, 52, 60, 68 words put row g at bank 4g, 12g, 20g, 28g, 4g mod 32).
constexpr int PAD_W = 4;
constexpr int SV    = BK / 2 + PAD_W; // words per row of Vt (one row per output column)

// d = a * b + d on one m16n8k16 tile (the vendor's, Note [vendors]; its comment gives the
// fragment layout the code below relies on)
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    gpu::mma_m16n8k16_f32_f16(d, a, b0, b1);
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    return (uint32_t) __half_as_ushort(__float2half_rn(lo)) | ((uint32_t) __half_as_ushort(__float2half_rn(hi)) << 16);
}

// eight consecutive elements of a K or V row as F16 pairs; zeros past the chunk
__device__ __forceinline__ uint4 load8(const Params & p, const char * row, int64_t nb0, int d0, bool valid) {
    if (!valid) {
        return make_uint4(0, 0, 0, 0);
    }
    if (p.kv_vec) {
        return *reinterpret_cast<const uint4 *>(row + (int64_t) d0 * 2);
    }
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        x[e] = load_f(p.kv_type, row + (int64_t) (d0 + e) * nb0);
    }
    return make_uint4(pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7]));
}

// Stage keys [kb, kb + BK) of K (row-major, ks[key][d]) and V (transposed, vt[d][key pair]) for
// the CTA; keys at or past k_end are zeros, so their (masked, -inf) scores meet finite values.
template <int D>
__device__ __forceinline__ void load_tile(const Params & p, const char * kbase, const char * vbase, int kb, int k_end,
                                          uint32_t * ks, uint32_t * vt) {
    constexpr int SK     = D / 2 + PAD_W;
    constexpr int CHUNKS = D / 8; // 16-byte pieces per row
    for (int i = threadIdx.x; i < BK * CHUNKS; i += THREADS) {
        const int   r = i / CHUNKS, c = i % CHUNKS;
        const int   key   = kb + r;
        const bool  valid = key < k_end;
        const uint4 w     = load8(p, kbase + (int64_t) (valid ? key : 0) * p.k_nb[1], p.k_nb[0], 8 * c, valid);
        *reinterpret_cast<uint4 *>(ks + r * SK + 4 * c) = w; // 16-byte aligned: SK and 4c are multiples of 4
    }
    // one thread per (key pair, piece): lanes take consecutive key pairs, so the transposed
    // stores of a warp fill 32 consecutive words of a vt row
    for (int i = threadIdx.x; i < (BK / 2) * CHUNKS; i += THREADS) {
        const int      kp = i % (BK / 2), c = i / (BK / 2);
        const int      k0 = kb + 2 * kp, k1 = k0 + 1;
        const uint4    a = load8(p, vbase + (int64_t) (k0 < k_end ? k0 : 0) * p.v_nb[1], p.v_nb[0], 8 * c, k0 < k_end);
        const uint4    b = load8(p, vbase + (int64_t) (k1 < k_end ? k1 : 0) * p.v_nb[1], p.v_nb[0], 8 * c, k1 < k_end);
        const uint32_t wa[4] = { a.x, a.y, a.z, a.w }, wb[4] = { b.x, b.y, b.z, b.w };
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            // column 8c + 2e from the low halves, 8c + 2e + 1 from the high halves
            vt[(8 * c + 2 * e) * SV + kp]     = __byte_perm(wa[e], wb[e], 0x5410);
            vt[(8 * c + 2 * e + 1) * SV + kp] = __byte_perm(wa[e], wb[e], 0x7632);
        }
    }
}

// the warp's 16 query rows as A fragments: rows r0 = q0 + 16 w + g and r0 + 8, pre-scaled
template <int D>
__device__ __forceinline__ void load_q(const Params & p, const char * qbase, int r0, uint32_t (&qf)[D / 16][4]) {
    const int t  = threadIdx.x % 4;
    auto      at = [&](int r, int c) {
        return r < p.n_q ? load_f(p.q_type, qbase + (int64_t) r * p.q_nb[1] + (int64_t) c * p.q_nb[0]) * p.qscale
                              : 0.0f;
    };
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const int c = 16 * kk + 2 * t;
        qf[kk][0]   = pack_half2(at(r0, c), at(r0, c + 1));
        qf[kk][1]   = pack_half2(at(r0 + 8, c), at(r0 + 8, c + 1));
        qf[kk][2]   = pack_half2(at(r0, c + 8), at(r0, c + 9));
        qf[kk][3]   = pack_half2(at(r0 + 8, c + 8), at(r0 + 8, c + 9));
    }
}

// running softmax state of the two rows a thread holds (row g and g + 8 of its warp's 16)
struct RowState {
    float m[2] = { -INFINITY, -INFINITY };
    float l[2] = { 0.0f, 0.0f }; // this thread's share; the quad's four shares add up at the end
};

// Note [fragment reuse]: S tile j holds keys 8j..8j+7 in the accumulator layout (row g: keys
// 8j + 2t, +1 in s[j][0..1]; row g + 8 in s[j][2..3]). The A fragment of P V for keys 16kk..16kk+15
// wants row g, keys 2t..2t+1 (word 0), row g + 8 (word 1), then the same 8 keys on (words 2, 3):
// exactly s[2kk][0..1], s[2kk][2..3], s[2kk+1][0..1], s[2kk+1][2..3] packed to F16 pairs.
template <int D>
__device__ __forceinline__ void softmax_step(float (&s)[BK / 8][4], RowState & st, float (&o)[D / 8][4]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < BK / 8; ++j) {
            mx = fmaxf(mx, fmaxf(s[j][2 * half], s[j][2 * half + 1]));
        }
        // the 4 threads of a quad hold the 64 keys of the same row
        mx                = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        mx                = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
        const float m_new = fmaxf(st.m[half], mx);
        // every key so far masked: nothing to add, and exp(-inf - -inf) would be NaN
        const bool  none  = m_new == -INFINITY;
        const float alpha = none ? 1.0f : __expf(st.m[half] - m_new); // 0 on the first attended tile
        float       sum   = 0.0f;
#pragma unroll
        for (int j = 0; j < BK / 8; ++j) {
#pragma unroll
            for (int e = 2 * half; e < 2 * half + 2; ++e) {
                s[j][e] = none ? 0.0f : __expf(s[j][e] - m_new);
                sum += s[j][e];
            }
        }
        st.l[half] = st.l[half] * alpha + sum;
        st.m[half] = m_new;
#pragma unroll
        for (int nd = 0; nd < D / 8; ++nd) {
            o[nd][2 * half] *= alpha;
            o[nd][2 * half + 1] *= alpha;
        }
    }
}

// one tile for one warp: scores, softmax, O += P V
template <int D>
__device__ __forceinline__ void attend_tile(const Params & p, const uint32_t (&qf)[D / 16][4], const uint32_t * ks,
                                            const uint32_t * vt, const char * mrows, float slope, int r0, int kb,
                                            int k_end, RowState & st, float (&o)[D / 8][4]) {
    constexpr int SK = D / 2 + PAD_W;
    const int     g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
    float         s[BK / 8][4];
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        const uint32_t * krow = ks + (8 * j + g) * SK + t; // B(d, key) = K[key][d]: key 8j + g, d 16kk + 2t
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            mma_16816(s[j], qf[kk], krow[8 * kk], krow[8 * kk + 4]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int key = kb + 8 * j + 2 * t + (e & 1);
            s[j][e]       = finish_score(p, s[j][e], mrows, slope, r0 + (e < 2 ? 0 : 8), key, k_end);
        }
    }
    softmax_step<D>(s, st, o);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        const uint32_t a[4] = { pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]) };
#pragma unroll
        for (int nd = 0; nd < D / 8; ++nd) {
            // B(key, col) = V[key][col]: keys 16kk + 2t, +1 (word 8kk + t of row col), col 8nd + g
            const uint32_t * vrow = vt + (8 * nd + g) * SV + 8 * kk + t;
            mma_16816(o[nd], a, vrow[0], vrow[4]);
        }
    }
}

// the two rows of a thread: normalised into dst with one chunk, raw with (m, l) into the partials
template <int D>
__device__ __forceinline__ void store_rows(const Params & p, const RowState & st, const float (&o)[D / 8][4], int r0,
                                           int h, int b) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int iq = r0 + 8 * half;
        float     l  = st.l[half];
        l += __shfl_xor_sync(FULL_MASK, l, 1);
        l += __shfl_xor_sync(FULL_MASK, l, 2);
        if (iq >= p.n_q) {
            continue;
        }
        if (p.n_chunks == 1) {
            float * out = dst_row(p, iq, h, b);
            // l >= 1 once a key is attended (the row max adds exp(0)): the fast division is exact
            // enough and avoids the IEEE slow-path call; l == 0 is a fully masked query: zeros
            const float inv = l > 0.0f ? __fdividef(1.0f, l) : 0.0f;
#pragma unroll
            for (int nd = 0; nd < D / 8; ++nd) {
                out[8 * nd + 2 * t]     = o[nd][2 * half] * inv;
                out[8 * nd + 2 * t + 1] = o[nd][2 * half + 1] * inv;
            }
        } else {
            const int64_t row = (int64_t) blockIdx.y * p.n_q * p.n_head * p.ne3 + part_row(p, iq, h, b);
            float *       out = p.part_o + row * D;
#pragma unroll
            for (int nd = 0; nd < D / 8; ++nd) {
                out[8 * nd + 2 * t]     = o[nd][2 * half];
                out[8 * nd + 2 * t + 1] = o[nd][2 * half + 1];
            }
            if (t == 0) {
                p.part_ml[row] = make_float2(st.m[half], l);
            }
        }
    }
}

template <int D>
__global__ void __launch_bounds__(THREADS) fa_mma_kernel(const Params p, const int n_qblocks) {
    constexpr int SK = D / 2 + PAD_W;
    __shared__ __align__(16) uint32_t ks[BK * SK];
    __shared__ __align__(16) uint32_t vt[D * SV];

    const int qb = (int) (blockIdx.x % n_qblocks), b = (int) (blockIdx.x / n_qblocks);
    const int h = (int) blockIdx.z, warp = threadIdx.x / 32;
    const int hk = h / p.head_ratio, bk = b / p.batch_ratio;
    const int r0      = qb * BQ + 16 * warp + (threadIdx.x % 32) / 4; // this thread's first row
    const int k_begin = (int) blockIdx.y * p.chunk_keys;
    const int k_end   = min(p.n_kv, k_begin + p.chunk_keys);

    const char * kbase = p.k + (int64_t) hk * p.k_nb[2] + (int64_t) bk * p.k_nb[3];
    const char * vbase = p.v + (int64_t) hk * p.v_nb[2] + (int64_t) bk * p.v_nb[3];
    const char * mrows = p.mask != nullptr ? mask_rows(p, h, b) : nullptr;
    const float  slope = alibi_slope(p, h);
    // warps whose 16 rows all lie past n_q only help stage the tiles
    const bool active = qb * BQ + 16 * warp < p.n_q;

    uint32_t qf[D / 16][4];
    load_q<D>(p, p.q + (int64_t) h * p.q_nb[2] + (int64_t) b * p.q_nb[3], r0, qf);
    RowState st;
    float    o[D / 8][4];
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
        o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    }

    for (int kb = k_begin; kb < k_end; kb += BK) {
        __syncthreads(); // the previous tile is no longer read
        load_tile<D>(p, kbase, vbase, kb, k_end, ks, vt);
        __syncthreads();
        if (active) {
            attend_tile<D>(p, qf, ks, vt, mrows, slope, r0, kb, k_end, st, o);
        }
    }
    if (active) {
        store_rows<D>(p, st, o, r0, h, b);
    }
}

template <int D>
bool launch_d(const Params & p, int n_qblocks, cudaStream_t stream, int device) {
    const dim3 grid((unsigned) (n_qblocks * p.ne3), (unsigned) p.n_chunks, (unsigned) p.n_head);
    gpu::launch(fa_mma_kernel<D>, grid, THREADS, 0, stream, p, n_qblocks);
    return WSP_CUDA_LAUNCH_OK(device);
}

} // namespace

bool launch_mma(const Params & p, int d, int n_qblocks, cudaStream_t stream, int device) {
    switch (d) {
        case 64: return launch_d<64>(p, n_qblocks, stream, device);
        case 80: return launch_d<80>(p, n_qblocks, stream, device);
        case 96: return launch_d<96>(p, n_qblocks, stream, device);
        case 112: return launch_d<112>(p, n_qblocks, stream, device);
        case 128: return launch_d<128>(p, n_qblocks, stream, device);
        default: return false;
    }
}

} // namespace wsp::cuda::fa
