// The dot_q8 path (few b rows, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weights). Phase 1 quantizes every b row
// to 8-bit blocks of 32 (q8_act.h). Phase 2 takes items of weight rows; a
// weight block decodes once to 32 small unsigned integers u with w = d_w * (u - o) + m_w (Q4_0,
// Q5_0: o = 8, 16 and m_w = 0; Q4_1, Q5_1: o = 0 and m_w the block's min), so its contribution
// is d_w * d_x * sum(u * q) + (m_w - o * d_w) * s_x. Q8_0 weights are signed: sum(|w| * sign(w) q).

#include "mul_mat_dot.h"
#include "q8_act.h"

#include "vec.h"

#include "../core/quants.h"

#include <array>
#include <cmath>
#include <cstring>
#include <utility>

namespace wsp::cpu::mm {

namespace {

constexpr int QK       = 32;
constexpr int RQ       = 8;    // b rows per tile: RQ accumulators + the decoded block in 16 registers
constexpr int PREFETCH = 1024; // bytes ahead of the weight block being read

inline uint32_t load_qh(const uint8_t * qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof(v));
    return v;
}

// scalar decode: u[j] and the block's (d, bias = m - o * d)
struct Scalar {
    int   u[QK];
    float d, bias;
};

inline void nibbles(const uint8_t * qs, int * u) {
    for (int j = 0; j < QK / 2; ++j) {
        u[j]          = qs[j] & 0x0f;
        u[j + QK / 2] = qs[j] >> 4;
    }
}

// Q5 values 0..31: the nibbles with the fifth bits of qh on top
inline void five_bit_values(const uint8_t * qs, const uint8_t * qh, int * u) {
    nibbles(qs, u);
    const uint32_t bits = load_qh(qh);
    for (int j = 0; j < QK; ++j) {
        u[j] |= (int) ((bits >> j) & 1u) << 4;
    }
}

#if defined(__AVX2__) && defined(__FMA__)
#    define WSP_MM_Q8_SIMD 1

// SIMD decode: 32 bytes (unsigned, or signed for Q8_0) and the block's (d, bias)
struct Simd {
    __m256i v;
    float   d, bias;
};

inline __m256i nibbles_256(const uint8_t * qs) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

// byte j = 0x10 where bit j of qh is set
inline __m256i fifth_bits(uint32_t qh) {
#    if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32) qh, _mm256_set1_epi8(0x10));
#    else
    // spread byte j / 8 of qh to byte j, then keep bit j % 8 of it
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int) qh), _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                                            0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
#    endif
}

// 8 lanes of sums of 4 products u8 x s8
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#    if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#    elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#    else
    // |u * s| <= 31 * 127 for the unsigned types and 128 * 127 for Q8_0: the 16-bit pair sums of
    // maddubs cannot saturate
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#    endif
}
#endif

struct Q4_0 {
    using Block                     = block_q4_0;
    static constexpr bool is_signed = false;
    static void           scalar(const Block & b, Scalar & o) {
                  nibbles(b.qs, o.u);
                  o.d    = fp16_to_fp32(b.d);
                  o.bias = -8.0f * o.d;
    }
#if WSP_MM_Q8_SIMD
    static Simd simd(const Block & b) {
        const float d = fp16_to_fp32(b.d);
        return { nibbles_256(b.qs), d, -8.0f * d };
    }
#endif
};

struct Q4_1 {
    using Block                     = block_q4_1;
    static constexpr bool is_signed = false;
    static void           scalar(const Block & b, Scalar & o) {
                  nibbles(b.qs, o.u);
                  o.d    = fp16_to_fp32(b.d);
                  o.bias = fp16_to_fp32(b.m);
    }
#if WSP_MM_Q8_SIMD
    static Simd simd(const Block & b) {
        return { nibbles_256(b.qs), fp16_to_fp32(b.d), fp16_to_fp32(b.m) };
    }
#endif
};

struct Q5_0 {
    using Block                     = block_q5_0;
    static constexpr bool is_signed = false;
    static void           scalar(const Block & b, Scalar & o) {
                  five_bit_values(b.qs, b.qh, o.u);
                  o.d    = fp16_to_fp32(b.d);
                  o.bias = -16.0f * o.d;
    }
#if WSP_MM_Q8_SIMD
    static Simd simd(const Block & b) {
        const float d = fp16_to_fp32(b.d);
        return { _mm256_or_si256(nibbles_256(b.qs), fifth_bits(load_qh(b.qh))), d, -16.0f * d };
    }
#endif
};

struct Q5_1 {
    using Block                     = block_q5_1;
    static constexpr bool is_signed = false;
    static void           scalar(const Block & b, Scalar & o) {
                  five_bit_values(b.qs, b.qh, o.u);
                  o.d    = fp16_to_fp32(b.d);
                  o.bias = fp16_to_fp32(b.m);
    }
#if WSP_MM_Q8_SIMD
    static Simd simd(const Block & b) {
        return { _mm256_or_si256(nibbles_256(b.qs), fifth_bits(load_qh(b.qh))), fp16_to_fp32(b.d), fp16_to_fp32(b.m) };
    }
#endif
};

struct Q8_0 {
    using Block                     = block_q8_0;
    static constexpr bool is_signed = true;
    static void           scalar(const Block & b, Scalar & o) {
                  for (int j = 0; j < QK; ++j) {
                      o.u[j] = b.qs[j];
        }
                  o.d    = fp16_to_fp32(b.d);
                  o.bias = 0.0f;
    }
#if WSP_MM_Q8_SIMD
    static Simd simd(const Block & b) {
        return { _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs)), fp16_to_fp32(b.d), 0.0f };
    }
#endif
};

#if WSP_MM_Q8_SIMD
// one block of weights against b rows x[r] (block ib), into one set of accumulators
template <class Q, int R>
inline void q8_block(const typename Q::Block & wb, const BlockQ8 * const * x, int64_t ib, __m256 * acc, float * bias) {
    const Simd    blk = Q::simd(wb);
    const __m256i u   = Q::is_signed ? _mm256_sign_epi8(blk.v, blk.v) : blk.v;

#    pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const BlockQ8 & xb = x[r][ib];
        __m256i         s  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb.qs));
        if (Q::is_signed) {
            s = _mm256_sign_epi8(s, blk.v);
        }
        const __m256 sumi = _mm256_cvtepi32_ps(dot_u8s8(u, s));
        acc[r]            = _mm256_fmadd_ps(sumi, _mm256_set1_ps(blk.d * xb.d), acc[r]);
        if (!Q::is_signed) {
            bias[r] += blk.bias * xb.s;
        }
    }
}

#endif

// out[r] = dot of one weight row (nb blocks) with b rows x[r], r < R
template <class Q, int R>
void q8_tile(const void * wrow, const BlockQ8 * const * x, int64_t nb, float * out) {
    const auto * w = static_cast<const typename Q::Block *>(wrow);
#if WSP_MM_Q8_SIMD
    // with few rows a single accumulator per row would make every block wait for the previous
    // block's FMA; even and odd blocks accumulate apart (registers allow it up to 4 rows)
    constexpr int U = R <= 4 ? 2 : 1;
    __m256        acc[U][R];
    float         bias[U][R];
    for (int i = 0; i < U * R; ++i) {
        acc[i / R][i % R]  = _mm256_setzero_ps();
        bias[i / R][i % R] = 0.0f;
    }
    int64_t ib = 0;
    for (; ib + U <= nb; ib += U) {
        // Note [weight prefetch] (mul_mat_dot.cpp): the weight streams from memory; ask for it
        // PREFETCH bytes before it is needed
        _mm_prefetch(reinterpret_cast<const char *>(w + ib) + PREFETCH, _MM_HINT_T0);
#    pragma GCC unroll 2
        for (int j = 0; j < U; ++j) {
            q8_block<Q, R>(w[ib + j], x, ib + j, acc[j], bias[j]);
        }
    }
    for (; ib < nb; ++ib) {
        q8_block<Q, R>(w[ib], x, ib, acc[0], bias[0]);
    }
    for (int r = 0; r < R; ++r) {
        __m256 a = acc[0][r];
        float  b = bias[0][r];
        for (int j = 1; j < U; ++j) {
            a = _mm256_add_ps(a, acc[j][r]);
            b += bias[j][r];
        }
        out[r] = hsum256(a) + b;
    }
#else
    float acc[R], bias[R];
    for (int r = 0; r < R; ++r) {
        acc[r]  = 0.0f;
        bias[r] = 0.0f;
    }
    Scalar blk;
    for (int64_t ib = 0; ib < nb; ++ib) {
        Q::scalar(w[ib], blk);
        for (int r = 0; r < R; ++r) {
            const BlockQ8 & xb   = x[r][ib];
            int             sumi = 0;
            for (int j = 0; j < QK; ++j) {
                sumi += blk.u[j] * xb.qs[j];
            }
            acc[r] += blk.d * xb.d * (float) sumi;
            bias[r] += blk.bias * xb.s;
        }
    }
    for (int r = 0; r < R; ++r) {
        out[r] = acc[r] + bias[r];
    }
#endif
}

using TileFn = void (*)(const void *, const BlockQ8 * const *, int64_t, float *);

template <class Q, size_t... I>
constexpr std::array<TileFn, RQ> make_tiles(std::index_sequence<I...>) {
    return { { &q8_tile<Q, (int) I + 1>... } };
}

const std::array<TileFn, RQ> & tiles_for(wsp_ggml_type t) {
    static constexpr auto q4_0 = make_tiles<Q4_0>(std::make_index_sequence<RQ>());
    static constexpr auto q4_1 = make_tiles<Q4_1>(std::make_index_sequence<RQ>());
    static constexpr auto q5_0 = make_tiles<Q5_0>(std::make_index_sequence<RQ>());
    static constexpr auto q5_1 = make_tiles<Q5_1>(std::make_index_sequence<RQ>());
    static constexpr auto q8_0 = make_tiles<Q8_0>(std::make_index_sequence<RQ>());
    switch (t) {
        case WSP_GGML_TYPE_Q4_0: return q4_0;
        case WSP_GGML_TYPE_Q4_1: return q4_1;
        case WSP_GGML_TYPE_Q5_0: return q5_0;
        case WSP_GGML_TYPE_Q5_1: return q5_1;
        default: return q8_0;
    }
}

void dot_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx) {
    const auto &    tiles = tiles_for(g.a->type);
    const int64_t   nb    = g.K / QK;
    const BlockQ8 * xrows[RQ];
    float           out[RQ];
    // the batch's first weight row and dst row, not redone per row (as in mul_mat_dot.cpp)
    const char * a0   = g.a_row(0, batch);
    char *       d0   = g.dst_row(0, batch);
    const size_t a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0], d_nb1 = g.dst->nb[1];
    for (int64_t i = i0; i < i1; ++i) {
        const char * wrow = a0 + i * a_nb;
        for (int64_t m = 0; m < g.M; m += RQ) {
            const int r = (int) (g.M - m < RQ ? g.M - m : RQ);
            for (int q = 0; q < r; ++q) {
                xrows[q] = qx + (batch * g.M + m + q) * nb;
            }
            tiles[(size_t) r - 1](wrow, xrows, nb, out);
            for (int q = 0; q < r; ++q) {
                *reinterpret_cast<float *>(d0 + (m + q) * d_nb1 + i * d_nb0) = out[q];
            }
        }
    }
}

// fn(weight row, its output) for rows [i0, i1) of a batch, with one b row
template <class Fn>
void for_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, Fn && fn) {
    const char * a0   = g.a_row(0, batch);
    char *       d0   = g.dst_row(0, batch);
    const size_t a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0];
    for (int64_t i = i0; i < i1; ++i) {
        fn(a0 + i * a_nb, reinterpret_cast<float *>(d0 + i * d_nb0));
    }
}

// One b row against weight rows [i0, i1), one row after another with the tile called directly
// (Note [one-row stream], mul_mat_dot.cpp): at K = 512 a row is 16 blocks, and a call through the
// tile table per row cost a third of the row.
template <class Q>
void stream_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx) {
    const int64_t   nb = g.K / QK;
    const BlockQ8 * x  = qx + batch * nb;
    for_rows(g, batch, i0, i1, [&](const char * w, float * out) { q8_tile<Q, 1>(w, &x, nb, out); });
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && WSP_MM_Q8_SIMD
#    define WSP_MM_Q8_0_PAIRS 1

// Note [Q8_0 pairs]: at one b row a Q8_0 weight is read once per node and the 256-bit kernel is
// bound by its instructions (about 13 a block: two sign flips, a scalar scale). With AVX-512 two
// blocks share each instruction: weight bytes w become unsigned as w + 128 (one xor), and the
// dot product starts from a per-lane correction -128 * (the lane's four activation bytes), so
// each 32-bit lane holds exactly the integer the 256-bit kernel's lane holds; the scales
// d_w * d_x are formed per lane with the same single multiply. Low half = even block, high half
// = odd block, as that kernel's two accumulators: the result is bit for bit the same.
struct PairedRow {
    const int8_t *  q;    // K activation bytes, contiguous
    const int32_t * corr; // 8 per block
    const float *   dx;   // 8 per block: the block's d_x, repeated
};

PairedRow prepare_pairs(const BlockQ8 * x, int64_t nb, void * mem) {
    auto * q    = static_cast<int8_t *>(mem);
    auto * corr = reinterpret_cast<int32_t *>(q + nb * QK);
    auto * dx   = reinterpret_cast<float *>(corr + nb * 8);
    for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(q + b * QK, x[b].qs, QK);
        for (int j = 0; j < 8; ++j) {
            const int8_t * l = x[b].qs + 4 * j;
            corr[b * 8 + j]  = -128 * ((int32_t) l[0] + l[1] + l[2] + l[3]);
            dx[b * 8 + j]    = x[b].d;
        }
    }
    return { q, corr, dx };
}

float q8_0_row_pairs(const block_q8_0 * w, const PairedRow & x, const BlockQ8 * xb, int64_t nb) {
    const __m512i flip = _mm512_set1_epi8((char) 0x80);
    __m512        acc  = _mm512_setzero_ps();
    int64_t       ib   = 0;
    for (; ib + 2 <= nb; ib += 2) {
        _mm_prefetch(reinterpret_cast<const char *>(w + ib) + PREFETCH, _MM_HINT_T0);
        const __m512i wv =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[ib].qs))),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[ib + 1].qs)), 1);
        const __m512i s  = _mm512_dpbusd_epi32(_mm512_loadu_si512(x.corr + 8 * ib), _mm512_xor_si512(wv, flip),
                                               _mm512_loadu_si512(x.q + QK * ib));
        const __m256i dh = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short) w[ib].d)),
                                                   _mm_set1_epi16((short) w[ib + 1].d), 1);
        const __m512  sc = _mm512_mul_ps(_mm512_cvtph_ps(dh), _mm512_loadu_ps(x.dx + 8 * ib));
        acc              = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc);
    }
    __m256 even = _mm512_castps512_ps256(acc);
    __m256 odd  = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    if (ib < nb) { // an odd last block joins the even ones, as in q8_tile
        float bias = 0.0f;
        q8_block<Q8_0, 1>(w[ib], &xb, ib, &even, &bias);
    }
    return hsum256(_mm256_add_ps(even, odd)) + (0.0f + 0.0f); // + the two (zero) biases, as q8_tile
}

void stream_rows_q8_0_pairs(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx,
                            const PairedRow & x) {
    const int64_t   nb = g.K / QK;
    const BlockQ8 * xb = qx + batch * nb;
    for_rows(g, batch, i0, i1, [&](const char * w, float * out) {
        *out = q8_0_row_pairs(reinterpret_cast<const block_q8_0 *>(w), x, xb, nb);
    });
}
#endif

void stream_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx) {
    switch (g.a->type) {
        case WSP_GGML_TYPE_Q4_0: stream_rows<Q4_0>(g, batch, i0, i1, qx); break;
        case WSP_GGML_TYPE_Q4_1: stream_rows<Q4_1>(g, batch, i0, i1, qx); break;
        case WSP_GGML_TYPE_Q5_0: stream_rows<Q5_0>(g, batch, i0, i1, qx); break;
        case WSP_GGML_TYPE_Q5_1: stream_rows<Q5_1>(g, batch, i0, i1, qx); break;
        default: stream_rows<Q8_0>(g, batch, i0, i1, qx); break;
    }
}

} // namespace

void quantize_row_q8(const float * x, BlockQ8 * y, int64_t K) {
    for (int64_t ib = 0; ib < K / QK; ++ib, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; ++j) {
            amax = std::fmax(amax, std::fabs(x[j]));
        }
        const float d    = amax / 127.0f;
        const float id   = d != 0.0f ? 1.0f / d : 0.0f;
        int         isum = 0;
        for (int j = 0; j < QK; ++j) {
            const int q = (int) std::nearbyint(x[j] * id);
            y[ib].qs[j] = (int8_t) q;
            isum += q;
        }
        y[ib].d = d;
        y[ib].s = d * (float) isum;
    }
}

size_t q8_activations_work_size(const Geometry & g, int nth) {
    const size_t qx = (size_t) (g.n_batch * g.M * (g.K / QK)) * sizeof(BlockQ8);
    return ALIGN + align_up(qx) + (size_t) nth * align_up((size_t) g.K * sizeof(float));
}

namespace {

// the work buffer as quantize_activations lays it out: the blocks, then K floats per task
BlockQ8 * carve_activations(const ComputeParams & p, const Geometry & g, float ** scratch) {
    WorkCarver carve(p.wdata);
    BlockQ8 *  qx = carve.take<BlockQ8>((size_t) (g.n_batch * g.M * (g.K / QK)));
    for (int t = 0; t <= p.ith; ++t) {
        *scratch = carve.take<float>((size_t) g.K);
    }
    return qx;
}

} // namespace

void * task_scratch(const ComputeParams & p, const Geometry & g) {
    float * scratch = nullptr;
    carve_activations(p, g, &scratch);
    return scratch;
}

const BlockQ8 * quantize_activations(const ComputeParams & p, const Geometry & g) {
    float *   scratch = nullptr;
    BlockQ8 * qx      = carve_activations(p, g, &scratch);
    int64_t   r0, r1;
    split_range(g.n_batch * g.M, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        strided_row_to_f32(g.b->type, g.b_row(r % g.M, r / g.M), g.b->nb[0], scratch, g.K);
        quantize_row_q8(scratch, qx + r * (g.K / QK), g.K);
    }
    p.barrier();
    return qx;
}

size_t dot_q8_work_size(const Geometry & g, int nth) {
    return q8_activations_work_size(g, nth);
}

void dot_q8_compute(const ComputeParams & p, const Geometry & g) {
    // phase 1: every b row to 8-bit blocks
    const BlockQ8 * qx = quantize_activations(p, g);

    // phase 2: guided ranges of the weight rows of all batches, one batch after another
#if WSP_MM_Q8_0_PAIRS
    if (g.M == 1 && g.a->type == WSP_GGML_TYPE_Q8_0) {
        // this task's phase-1 scratch (K floats) is free now and holds the paired b row
        void *    mem      = task_scratch(p, g);
        int64_t   prepared = -1;
        PairedRow x{};
        for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
            if (batch != prepared) {
                x        = prepare_pairs(qx + batch * (g.K / QK), g.K / QK, mem);
                prepared = batch;
            }
            stream_rows_q8_0_pairs(g, batch, i0, i1, qx, x);
        });
        return;
    }
#endif
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        if (g.M == 1) {
            stream_rows(g, batch, i0, i1, qx);
        } else {
            dot_rows(g, batch, i0, i1, qx);
        }
    });
}

} // namespace wsp::cpu::mm
