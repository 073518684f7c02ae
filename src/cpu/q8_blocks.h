#pragma once

// The weight blocks of the dot_q8 path (mul_mat_q8.cpp, mul_mat_q8_pairs.cpp). A weight block
// decodes to 32 small unsigned integers u with w = d_w * (u - o) + m_w (Q4_0, Q5_0: o = 8, 16 and
// m_w = 0; Q4_1, Q5_1: o = 0 and m_w the block's min), so its contribution to a dot product with
// an 8-bit activation block (q8_act.h) is d_w * d_x * sum(u * q) + (m_w - o * d_w) * s_x. Q8_0
// weights are signed: sum(|w| * sign(w) q).

#include "mul_mat_common.h"
#include "q8_act.h"
#include "vec.h"

#include "../core/quants.h"

#include <cstdint>
#include <cstring>

namespace wsp::cpu::mm::q8 {

constexpr int QK = 32;
// bytes ahead of the weight block being read. Measured (2 threads, 192 MiB of weights, the
// distances interleaved in 4 rounds, GFLOP/s): Q8_0 K = 5120 M = 4 164-169 at 1 KiB, 180-186 at
// 2 KiB, 192-195 at 4 KiB; M = 1 of Q8_0, Q4_1, Q5_1 5-20% up from 1 KiB to 4 KiB
constexpr int PREFETCH = 4096;

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

// Weight rows [i0, i1) of a batch against the batch's M quantized b rows (per_row blocks of type X
// each), in tiles of up to R b rows: tile(weight row, the tile's b rows, their count r, out) leaves
// one output per b row in out[0 .. r)
template <int R, class X, class Tile>
void tile_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const X * qx, int64_t per_row, Tile && tile) {
    const X * xrows[R];
    float     out[R];
    // the batch's first weight row and dst row, not redone per row (as in mul_mat_dot.cpp)
    const char * a0   = g.a_row(0, batch);
    char *       d0   = g.dst_row(0, batch);
    const size_t a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0], d_nb1 = g.dst->nb[1];
    for (int64_t i = i0; i < i1; ++i) {
        const char * wrow = a0 + i * a_nb;
        for (int64_t m = 0; m < g.M; m += R) {
            const int r = (int) (g.M - m < R ? g.M - m : R);
            for (int q = 0; q < r; ++q) {
                xrows[q] = qx + (batch * g.M + m + q) * per_row;
            }
            tile(wrow, xrows, r, out);
            for (int q = 0; q < r; ++q) {
                *reinterpret_cast<float *>(d0 + (m + q) * d_nb1 + i * d_nb0) = out[q];
            }
        }
    }
}

// Weight rows [i0, i1) of a batch against its one b row, four at a time a quarter of the range
// apart (Note [four-row stream], mul_mat_kq.cpp): four(the 4 rows, their 4 outputs), and one(row,
// out) for the rows left over
template <class Four, class One>
void for_four_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, Four && four, One && one) {
    const char *  a0   = g.a_row(0, batch);
    char *        d0   = g.dst_row(0, batch);
    const size_t  a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0];
    const int64_t q = (i1 - i0) / 4;
    for (int64_t i = i0; i < i0 + q; ++i) {
        const char * rows[4];
        float        out[4];
        for (int j = 0; j < 4; ++j) {
            rows[j] = a0 + (i + j * q) * a_nb;
        }
        four(rows, out);
        for (int j = 0; j < 4; ++j) {
            *reinterpret_cast<float *>(d0 + (i + j * q) * d_nb0) = out[j];
        }
    }
    for (int64_t i = i0 + 4 * q; i < i1; ++i) {
        one(a0 + i * a_nb, reinterpret_cast<float *>(d0 + i * d_nb0));
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

} // namespace wsp::cpu::mm::q8
