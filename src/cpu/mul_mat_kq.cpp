// The dot_q8 path of the K-quant weights (Q2_K ... Q6_K): phase 1 quantizes every b row to Q8_K
// (the client's activation blocks for them: 256 values, one f32 scale, the sums of each 16),
// phase 2 dots each weight super-block with them in integers.
//
// Note [K-quant groups]: each K-quant decodes a super-block to 8 groups of 32 small unsigned
// integers u (in the order dequantize_row_* writes the values, so group g meets activation bytes
// 32 g ..), with a scale s_h and a min m_h for each half h of 16 values (Q4_K and Q5_K have one
// for the whole group: both halves get it) and an offset o of the type:
//     w = d * s_h * (u - o) - dmin * m_h
// so a super-block's dot product with activations a = d_y * q is
//     d_y * (d * (sum_h s_h * sum(u q) - o * sum_h s_h * S_h) - dmin * sum_h m_h * S_h)
// with S_h the Q8_K block's sum of half h. sum(u q) is exact in 16-bit pairs (u <= 63, |q| <= 127,
// maddubs cannot saturate), each half weighted by its scale in 32 bits (madd), and the whole
// super-block adds up in integers before its one float multiply, as the client's kernels do.
//
// Note [K-quant pairs]: where the build has AVX-512BW the mul_mat tiles decode two groups at once
// (T::pair: groups 2p and 2p + 1 in the low and high 256 bits, each from the same loads with
// per-half shifts), meet 64 activation bytes with one maddubs, and weight the four halves by their
// scales with one madd and add (one vpdpwssd with AVX512-VNNI): a third of the AVX2 tile's
// instructions per byte. The sums are the same integers. The type traits' vec_dot (kq_dot) keeps
// the 256-bit form, so the tests run both on such a machine.

#include "mul_mat_kq.h"

#include "mul_mat_dot.h"
#include "q8_blocks.h"

#include <algorithm>
#include <cstring>

namespace wsp::cpu::mm {

namespace {

using namespace q8;

constexpr int GROUPS = QK_K / 32; // activation blocks per super-block

// a super-block's float scales and its per-half integer scales and mins
struct KScales {
    float d, dmin;
    int   s[16]; // s_h of half h = 2 g + (0 or 1)
    int   m[16]; // m_h (zero where the type has no mins)
};

#if WSP_MM_Q8_SIMD && defined(__AVX512F__) && defined(__AVX512BW__) && !defined(WSP_GGML_KQ_NO_PAIRS)
#    define WSP_MM_KQ_PAIRS 1 // Note [K-quant pairs]
#endif

#if WSP_MM_KQ_PAIRS
// 32 bytes at p in both halves
inline __m512i load256x2(const void * p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i *>(p)));
}

// each 16-bit lane shifted right by a in the low half, by b in the high half
inline __m512i srl_halves(__m512i v, int a, int b) {
    return _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_set1_epi16((short) a), _mm256_set1_epi16((short) b), 1));
}
#endif

#if WSP_MM_Q8_SIMD
// With SIMD a type gives its 16 s_h as bytes (scales8, signed) and, with mins, its 16 m_h
// (mins8): every s_h and m_h fits in a signed byte (Q4_K / Q5_K: 6 bits; Q2_K: 4; Q3_K: -32..31;
// Q6_K: a signed byte)
inline __m128i load128(const void * p) {
    return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

// the 6-bit scales and mins of a Q4_K / Q5_K block (scale_min_k4's layout), each twice: one per
// half. Bytes 0..3 hold the low 6 bits of the scales of groups 0..3, bytes 4..7 those of the mins;
// bytes 8..11 the low 4 bits of groups 4..7 (scale in the low nibble, min in the high), whose top 2
// bits are the top 2 of bytes 0..3 (scales) and 4..7 (mins). Shuffled in one register, as scalar
// words they went through the stack.
inline void k4_scales_mins(const uint8_t * packed, __m128i & sc, __m128i & mn) {
    const __m128i v = load128(packed); // the 12 bytes and 4 after them (the block goes on: qs)
    // out bytes 0..7: the scales of groups 0..7; 8..15: their mins
    const __m128i x    = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low  = _mm_and_si128(x, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0));
    const __m128i nib  = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_setr_epi32(0, 0, 0, 0x0f0f0f0f));
    const __m128i top  = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)); // bits 6, 7 to 4, 5
    const __m128i all  = _mm_or_si128(_mm_or_si128(low, nib), high);
    sc                 = _mm_unpacklo_epi8(all, all);
    mn                 = _mm_unpackhi_epi8(all, all);
}
#endif

// the 32 u of group g, one byte each (scalar decode)
using Group = uint8_t[32];

struct KQ2 {
    using Block                    = block_q2_K;
    static constexpr int  off      = 0;
    static constexpr bool has_mins = true;
#if WSP_MM_Q8_SIMD
    static __m128i scales8(const Block & b) {
        return _mm_and_si128(load128(b.scales), _mm_set1_epi8(0xF));
    }
    static __m128i mins8(const Block & b) {
        return _mm_and_si128(_mm_srli_epi16(load128(b.scales), 4), _mm_set1_epi8(0xF));
    }
    static void scales_mins8(const Block & b, __m128i & sc, __m128i & mn) {
        sc = scales8(b);
        mn = mins8(b);
    }
    static float dmin(const Block & b) {
        return fp16_to_fp32(b.dmin);
    }
#endif
    static void scales(const Block & b, KScales & k) {
        k.d    = fp16_to_fp32(b.d);
        k.dmin = fp16_to_fp32(b.dmin);
        for (int h = 0; h < 16; ++h) {
            k.s[h] = b.scales[h] & 0xF;
            k.m[h] = b.scales[h] >> 4;
        }
    }
    static void group(const Block & b, int g, Group & u) {
        const uint8_t * q = b.qs + 32 * (g / 4);
        for (int l = 0; l < 32; ++l) {
            u[l] = (uint8_t) ((q[l] >> (2 * (g % 4))) & 3);
        }
    }
#if WSP_MM_Q8_SIMD
    static __m256i group(const Block & b, int g) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32 * (g / 4)));
        return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * (g % 4))), _mm256_set1_epi8(3));
    }
#endif
#if WSP_MM_KQ_PAIRS
    static __m512i pair(const Block & b, int p) { // groups 2p, 2p + 1: one 32-byte chunk
        const int g = 2 * p;
        return _mm512_and_si512(srl_halves(load256x2(b.qs + 32 * (g / 4)), 2 * (g % 4), 2 * (g % 4) + 2),
                                _mm512_set1_epi8(3));
    }
#endif
};

// Q3_K and Q6_K: signed scales and an offset, no mins
struct NoMins {
    static constexpr bool has_mins = false;
#if WSP_MM_Q8_SIMD
    template <class Block>
    static __m128i mins8(const Block &) {
        return _mm_setzero_si128();
    }
    template <class Block>
    static float dmin(const Block &) {
        return 0.0f;
    }
#endif
};

struct KQ3 : NoMins {
    using Block              = block_q3_K;
    static constexpr int off = 4;
#if WSP_MM_Q8_SIMD
    // dequantize_row_q3_K's unpacking in one register: scale h has its low 4 bits in byte h (h < 8)
    // or the high nibble of byte h - 8, its high 2 bits at bit 2 (h / 4) of byte 8 + h % 4
    static __m128i scales8(const Block & b) {
        // the 16 bytes that end with the scales (the 12 and qs' last 4): a load inside the block
        const __m128i v = load128(b.scales - 4);
        const __m128i x = _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
        const __m128i low =
            _mm_or_si128(_mm_and_si128(x, _mm_setr_epi32(0x0f0f0f0f, 0x0f0f0f0f, 0, 0)),
                         _mm_and_si128(_mm_srli_epi16(x, 4), _mm_setr_epi32(0, 0, 0x0f0f0f0f, 0x0f0f0f0f)));
        const __m128i y    = _mm_shuffle_epi8(v, _mm_set1_epi32(0x0f0e0d0c)); // bytes 8..11 in each word
        const __m128i high = _mm_and_si128(_mm_srlv_epi32(y, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
        return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    }
    static void scales_mins8(const Block & b, __m128i & sc, __m128i & mn) {
        sc = scales8(b);
        mn = _mm_setzero_si128();
    }
#endif
    static void scales(const Block & b, KScales & k) {
        k.d    = fp16_to_fp32(b.d);
        k.dmin = 0.0f;
        for (int h = 0; h < 16; ++h) { // 6 bits: the low 4 in bytes 0..7, the high 2 in bytes 8..11
            const int low  = h < 8 ? b.scales[h] & 0xF : b.scales[h - 8] >> 4;
            const int high = (b.scales[8 + h % 4] >> (2 * (h / 4))) & 3;
            k.s[h]         = (low | (high << 4)) - 32;
            k.m[h]         = 0;
        }
    }
    // u = the low 2 bits + 4 where the high bit is set: w = d s (u - 4)
    static void group(const Block & b, int g, Group & u) {
        const uint8_t * q = b.qs + 32 * (g / 4);
        for (int l = 0; l < 32; ++l) {
            u[l] = (uint8_t) (((q[l] >> (2 * (g % 4))) & 3) | (((b.hmask[l] >> g) & 1) << 2));
        }
    }
#if WSP_MM_Q8_SIMD
    static __m256i group(const Block & b, int g) {
        const __m256i q    = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32 * (g / 4)));
        const __m256i hm   = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.hmask));
        const __m256i low  = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * (g % 4))), _mm256_set1_epi8(3));
        const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(g)), _mm256_set1_epi8(1));
        return _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
    }
#endif
#if WSP_MM_KQ_PAIRS
    static __m512i pair(const Block & b, int p) {
        const int     g    = 2 * p;
        const __m512i low  = _mm512_and_si512(srl_halves(load256x2(b.qs + 32 * (g / 4)), 2 * (g % 4), 2 * (g % 4) + 2),
                                              _mm512_set1_epi8(3));
        const __m512i high = _mm512_and_si512(srl_halves(load256x2(b.hmask), g, g + 1), _mm512_set1_epi8(1));
        return _mm512_or_si512(low, _mm512_slli_epi16(high, 2));
    }
#endif
};

// Q4_K and Q5_K: one 6-bit scale and min per group of 32 (scale_min_k4's layout, both halves of a
// group taking them), and the low 4 bits of value l of group g in byte 32 (g / 2) + l, the low
// nibble for even g
template <class B>
struct K4Base {
    using Block                    = B;
    static constexpr int  off      = 0;
    static constexpr bool has_mins = true;
#if WSP_MM_Q8_SIMD
    static __m128i scales8(const Block & b) {
        __m128i sc, mn;
        k4_scales_mins(b.scales, sc, mn);
        return sc;
    }
    static __m128i mins8(const Block & b) {
        __m128i sc, mn;
        k4_scales_mins(b.scales, sc, mn);
        return mn;
    }
    static void scales_mins8(const Block & b, __m128i & sc, __m128i & mn) { // one unpacking for both
        k4_scales_mins(b.scales, sc, mn);
    }
    static float dmin(const Block & b) {
        return fp16_to_fp32(b.dmin);
    }
    static __m256i nibbles(const Block & b, int g) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32 * (g / 2)));
        return _mm256_and_si256(g % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0xF));
    }
#endif
#if WSP_MM_KQ_PAIRS
    static __m512i nibble_pair(const Block & b, int p) { // the low and the high nibbles of one chunk
        return _mm512_and_si512(srl_halves(load256x2(b.qs + 32 * p), 0, 4), _mm512_set1_epi8(0xF));
    }
#endif
    static void scales(const Block & b, KScales & k) {
        k.d    = fp16_to_fp32(b.d);
        k.dmin = fp16_to_fp32(b.dmin);
        for (int g = 0; g < GROUPS; ++g) {
            uint8_t sc, m;
            scale_min_k4(g, b.scales, sc, m);
            k.s[2 * g] = k.s[2 * g + 1] = sc;
            k.m[2 * g] = k.m[2 * g + 1] = m;
        }
    }
    static int nibble(const Block & b, int g, int l) {
        const uint8_t q = b.qs[32 * (g / 2) + l];
        return g % 2 == 0 ? (q & 0xF) : (q >> 4);
    }
};

struct KQ4 : K4Base<block_q4_K> {
    static void group(const Block & b, int g, Group & u) {
        for (int l = 0; l < 32; ++l) {
            u[l] = (uint8_t) nibble(b, g, l);
        }
    }
#if WSP_MM_Q8_SIMD
    static __m256i group(const Block & b, int g) {
        return nibbles(b, g);
    }
#endif
#if WSP_MM_KQ_PAIRS
    static __m512i pair(const Block & b, int p) {
        return nibble_pair(b, p);
    }
#endif
};

// Q4_K's nibbles and bit g of qh[l] as the fifth bit
struct KQ5 : K4Base<block_q5_K> {
    static void group(const Block & b, int g, Group & u) {
        for (int l = 0; l < 32; ++l) {
            u[l] = (uint8_t) (nibble(b, g, l) | (((b.qh[l] >> g) & 1) << 4));
        }
    }
#if WSP_MM_Q8_SIMD
    static __m256i group(const Block & b, int g) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qh));
        // bit g of each byte to bit 4: the 16-bit shift moves no bit of one byte into the other's bit 0
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(g)), _mm256_set1_epi8(1));
        return _mm256_or_si256(nibbles(b, g), _mm256_slli_epi16(hi, 4));
    }
#endif
#if WSP_MM_KQ_PAIRS
    static __m512i pair(const Block & b, int p) {
        const __m512i hi = _mm512_and_si512(srl_halves(load256x2(b.qh), 2 * p, 2 * p + 1), _mm512_set1_epi8(1));
        return _mm512_or_si512(nibble_pair(b, p), _mm512_slli_epi16(hi, 4));
    }
#endif
};

struct KQ6 : NoMins {
    using Block              = block_q6_K;
    static constexpr int off = 32;
#if WSP_MM_Q8_SIMD
    static __m128i scales8(const Block & b) {
        return load128(b.scales);
    }
    static void scales_mins8(const Block & b, __m128i & sc, __m128i & mn) {
        sc = scales8(b);
        mn = _mm_setzero_si128();
    }
#endif
    static void scales(const Block & b, KScales & k) {
        k.d    = fp16_to_fp32(b.d);
        k.dmin = 0.0f;
        for (int h = 0; h < 16; ++h) {
            k.s[h] = b.scales[h];
            k.m[h] = 0;
        }
    }
    // group g = 4 n + t of half n: the low 4 bits from ql (bytes 64 n + 32 (t % 2), the low nibble
    // for t < 2), the high 2 from bits 2 t of qh[32 n + l]
    static void group(const Block & b, int g, Group & u) {
        const int       n = g / 4, t = g % 4;
        const uint8_t * ql = b.ql + 64 * n + 32 * (t % 2);
        const uint8_t * qh = b.qh + 32 * n;
        for (int l = 0; l < 32; ++l) {
            const int low = t < 2 ? ql[l] & 0xF : ql[l] >> 4;
            u[l]          = (uint8_t) (low | (((qh[l] >> (2 * t)) & 3) << 4));
        }
    }
#if WSP_MM_Q8_SIMD
    static __m256i group(const Block & b, int g) {
        const int     n = g / 4, t = g % 4;
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.ql + 64 * n + 32 * (t % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qh + 32 * n));
        const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0xF));
        // bits 2t, 2t + 1 of each byte to bits 4, 5
        const __m256i hi = t < 2 ? _mm256_slli_epi16(qh, 4 - 2 * t) : _mm256_srli_epi16(qh, 2 * t - 4);
        return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
    }
#endif
#if WSP_MM_KQ_PAIRS
    // groups 4n + t and 4n + t + 1 (t = 0 or 2): the 64 bytes of ql at 64 n (the low nibbles for
    // t = 0), and bits t, t + 1 (low half) and t + 2, t + 3 (high half) of qh's 32 bytes at 32 n
    // to bits 4, 5
    static __m512i pair(const Block & b, int p) {
        const int     n = p / 2, t = 2 * (p % 2);
        const __m512i ql = _mm512_loadu_si512(b.ql + 64 * n);
        const __m512i lo = _mm512_and_si512(t == 0 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0xF));
        const __m512i qh = load256x2(b.qh + 32 * n);
        const __m512i hi =
            t == 0 ? _mm512_sllv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1))
                   : _mm512_srlv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1));
        return _mm512_or_si512(lo, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
    }
#endif
};

#if WSP_MM_Q8_SIMD
// corr[r] += d_y (d o sum_h s_h S_h + dmin sum_h m_h S_h) of super-block ib (Note [K-quant groups]),
// 8 lanes
template <class T, int R>
inline void corrections(const typename T::Block & b, __m128i sc8, __m128i mn8, float d, const block_q8_K * const * x,
                        int64_t ib, __m256 * corr) {
    if (T::off == 0 && !T::has_mins) {
        return;
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i m16 = T::has_mins ? _mm256_cvtepi8_epi16(mn8) : _mm256_setzero_si256();
    const float   dm  = T::dmin(b);
    for (int r = 0; r < R; ++r) {
        const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[r][ib].bsums));
        __m256        c    = _mm256_setzero_ps();
        if (T::off != 0) {
            c = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sums, s16)), _mm256_set1_ps(d * (float) T::off));
        }
        if (T::has_mins) {
            c = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sums, m16)), _mm256_set1_ps(dm), c);
        }
        corr[r] = _mm256_fmadd_ps(c, _mm256_set1_ps(x[r][ib].d), corr[r]);
    }
}

// every cache line of the block PREFETCH bytes ahead (a super-block spans 2 to 4 lines)
template <class Block>
inline void prefetch_block(const Block * b) {
    const char * p = reinterpret_cast<const char *>(b) + PREFETCH;

#    pragma GCC unroll 4
    for (size_t o = 0; o < sizeof(Block); o += 64) {
        _mm_prefetch(p + o, _MM_HINT_T0);
    }
}

#endif

// out[r] = dot of one weight row (nsb super-blocks) with the Q8_K rows x[r], r < R
template <class T, int R>
void kq_tile(const void * wrow, const block_q8_K * const * x, int64_t nsb, float * out) {
    const auto * w = static_cast<const typename T::Block *>(wrow);
    KScales      k;
#if WSP_MM_Q8_SIMD
    (void) k;
    __m256 acc[R];
    __m256 corr[R]; // d_y (d o sum_h s_h S_h + dmin sum_h m_h S_h), 8 lanes
    for (int r = 0; r < R; ++r) {
        acc[r]  = _mm256_setzero_ps();
        corr[r] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < nsb; ++ib) {
        const typename T::Block & b = w[ib];
        prefetch_block(w + ib);
        __m128i sc8, mn8;
        T::scales_mins8(b, sc8, mn8);
        const float d = fp16_to_fp32(b.d);
        __m256i     isum[R];
        for (int r = 0; r < R; ++r) {
            isum[r] = _mm256_setzero_si256();
        }
#    pragma GCC unroll 8
        for (int g = 0; g < GROUPS; ++g) {
            const __m256i u = T::group(b, g);
            // s of half 2g in the low 8 lanes, of 2g + 1 in the high 8
            const __m256i sv = _mm256_cvtepi8_epi16(
                _mm_shuffle_epi8(sc8, _mm_set_epi64x((long long) (0x0101010101010101ull * (uint64_t) (2 * g + 1)),
                                                     (long long) (0x0101010101010101ull * (uint64_t) (2 * g)))));
#    pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[r][ib].qs + 32 * g));
                isum[r]         = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), sv));
            }
        }
        corrections<T, R>(b, sc8, mn8, d, x, ib, corr);
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * x[r][ib].d), acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        out[r] = hsum256(acc[r]) - hsum256(corr[r]);
    }
#else
    float acc[R];
    for (int r = 0; r < R; ++r) {
        acc[r] = 0.0f;
    }
    Group u;
    for (int64_t ib = 0; ib < nsb; ++ib) {
        T::scales(w[ib], k);
        for (int r = 0; r < R; ++r) {
            const block_q8_K & y   = x[r][ib];
            int                suq = 0, soff = 0, smin = 0;
            for (int g = 0; g < GROUPS; ++g) {
                T::group(w[ib], g, u);
                for (int l = 0; l < 32; ++l) {
                    suq += k.s[2 * g + l / 16] * u[l] * y.qs[32 * g + l];
                }
            }
            for (int h = 0; h < 16; ++h) {
                soff += k.s[h] * y.bsums[h];
                smin += k.m[h] * y.bsums[h];
            }
            acc[r] += y.d * (k.d * (float) (suq - T::off * soff) - k.dmin * (float) smin);
        }
    }
    for (int r = 0; r < R; ++r) {
        out[r] = acc[r];
    }
#endif
}

#if WSP_MM_KQ_PAIRS
// one super-block b of a weight row against the Q8_K rows x[r] (block ib), two groups a step
// (Note [K-quant pairs]): acc[r] += d d_y sum_h s_h sum(u q), corr[r] as corrections() gives it
template <class T, int R>
inline void kq_pairs_block(const typename T::Block & b, const block_q8_K * const * x, int64_t ib, __m512 * acc,
                           __m256 * corr) {
    prefetch_block(&b);
    __m128i sc8, mn8;
    T::scales_mins8(b, sc8, mn8);
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc8)); // s_h in 16-bit lane h
    const float   d   = fp16_to_fp32(b.d);
    __m512i       isum[R];
    for (int r = 0; r < R; ++r) {
        isum[r] = _mm512_setzero_si512();
    }
#    pragma GCC unroll 4
    for (int p = 0; p < GROUPS / 2; ++p) {
        const __m512i u = T::pair(b, p);
        // 16-bit lane i of maddubs covers bytes 2i, 2i + 1: half 4p + i / 8
        const __m512i sv = _mm512_permutexvar_epi16(
            _mm512_add_epi16(
                _mm512_set1_epi16((short) (4 * p)),
                _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                                                   14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                  3)),
            s16);
#    pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m512i q    = _mm512_loadu_si512(x[r][ib].qs + 64 * p);
            const __m512i prod = _mm512_maddubs_epi16(u, q);
#    if defined(__AVX512VNNI__)
            isum[r] = _mm512_dpwssd_epi32(isum[r], prod, sv);
#    else
            isum[r] = _mm512_add_epi32(isum[r], _mm512_madd_epi16(prod, sv));
#    endif
        }
    }
    corrections<T, R>(b, sc8, mn8, d, x, ib, corr);
    for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_set1_ps(d * x[r][ib].d), acc[r]);
    }
}

// kq_tile with two groups a step (Note [K-quant pairs]); the mins and offset corrections as there
template <class T, int R>
void kq_tile_pairs(const void * wrow, const block_q8_K * const * x, int64_t nsb, float * out) {
    const auto * w = static_cast<const typename T::Block *>(wrow);
    __m512       acc[R];
    __m256       corr[R];
    for (int r = 0; r < R; ++r) {
        acc[r]  = _mm512_setzero_ps();
        corr[r] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < nsb; ++ib) {
        kq_pairs_block<T, R>(w[ib], x, ib, acc, corr);
    }
    for (int r = 0; r < R; ++r) {
        out[r] = hsum512(acc[r]) - hsum256(corr[r]);
    }
}

// Note [four-row stream]: at M = 1 a weight row of K = 1280 is 5 super-blocks, and what a row
// costs beyond them (the call, zeroing, two horizontal sums, the store: about 40 instructions
// against 60 a super-block) was a tenth of it. Four weight rows go together, super-block by
// super-block, and their sums reduce in one transposed step to four floats. The four rows are a
// quarter of the task's range apart (q8_blocks.h's for_four_rows), so the task reads four streams
// of memory, as the bandwidth probe does: with four adjacent rows (one stream) Q4_K 1280x5120 took
// 72 us in the cache and about 100 from DRAM (2 threads), and more prefetching did not close that.
constexpr int WK = 4;

template <class T>
void kq_four_rows(const char * const * rows, const block_q8_K * x, int64_t nsb, float * out) {
    const typename T::Block * w[WK];
    __m512                    acc[WK];
    __m256                    corr[WK];
    for (int j = 0; j < WK; ++j) {
        w[j]    = reinterpret_cast<const typename T::Block *>(rows[j]);
        acc[j]  = _mm512_setzero_ps();
        corr[j] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < nsb; ++ib) {
#    pragma GCC unroll 4
        for (int j = 0; j < WK; ++j) {
            kq_pairs_block<T, 1>(w[j][ib], &x, ib, &acc[j], &corr[j]);
        }
    }
    __m256 h[WK]; // each row's 16 lanes folded to 8, the correction taken off
    for (int j = 0; j < WK; ++j) {
        h[j] = _mm256_sub_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[j]), _mm512_extractf32x8_ps(acc[j], 1)), corr[j]);
    }
    // lane l of each 128-bit half: row l's partial sums
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

constexpr int RK = 4; // b rows per tile: 3 accumulators each + the decoded group in 16 registers

template <class T>
void rows_of(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const block_q8_K * qx) {
    const int64_t nsb = g.K / QK_K;
#if WSP_MM_KQ_PAIRS
    if (g.M == 1) { // Note [four-row stream]
        const block_q8_K * x = qx + batch * nsb;
        for_four_rows(
            g, batch, i0, i1, [&](const char * const * rows, float * out) { kq_four_rows<T>(rows, x, nsb, out); },
            [&](const char * row, float * out) { kq_tile_pairs<T, 1>(row, &x, nsb, out); });
        return;
    }
#endif
    tile_rows<RK>(g, batch, i0, i1, qx, nsb, [&](const char * w, const block_q8_K * const * x, int r, float * out) {
#if WSP_MM_KQ_PAIRS
        switch (r) {
            case 1: kq_tile_pairs<T, 1>(w, x, nsb, out); break;
            case 2: kq_tile_pairs<T, 2>(w, x, nsb, out); break;
            case 3: kq_tile_pairs<T, 3>(w, x, nsb, out); break;
            default: kq_tile_pairs<T, 4>(w, x, nsb, out); break;
        }
#else
        switch (r) {
            case 1: kq_tile<T, 1>(w, x, nsb, out); break;
            case 2: kq_tile<T, 2>(w, x, nsb, out); break;
            case 3: kq_tile<T, 3>(w, x, nsb, out); break;
            default: kq_tile<T, 4>(w, x, nsb, out); break;
        }
#endif
    });
}

// the work buffer: the Q8_K blocks of every b row, then K floats per task (a b row not of F32)
block_q8_K * carve_q8_k(const ComputeParams & p, const Geometry & g, float ** scratch) {
    WorkCarver   carve(p.wdata);
    block_q8_K * qx = carve.take<block_q8_K>((size_t) (g.n_batch * g.M * (g.K / QK_K)));
    for (int t = 0; t <= p.ith; ++t) {
        *scratch = carve.take<float>((size_t) g.K);
    }
    return qx;
}

} // namespace

// Phase 1: the tasks split the super-blocks of all b rows (not the rows: at M = 1 every task takes
// a share of the one row) and quantize them with the client's Q8_K reference, then wait
const block_q8_K * quantize_activations_q8_k(const ComputeParams & p, const Geometry & g) {
    float *      scratch  = nullptr;
    block_q8_K * qx       = carve_q8_k(p, g, &scratch);
    const auto   quantize = wsp_ggml_get_type_traits(WSP_GGML_TYPE_Q8_K)->from_float_ref;
    quantize_b_rows(p, g, QK_K, qx, scratch, quantize);
    p.barrier();
    return qx;
}

float kq_dot(wsp_ggml_type t, const void * x, const block_q8_K * y, int64_t nsb) {
    float out = 0.0f;
    switch (t) {
        case WSP_GGML_TYPE_Q2_K: kq_tile<KQ2, 1>(x, &y, nsb, &out); break;
        case WSP_GGML_TYPE_Q3_K: kq_tile<KQ3, 1>(x, &y, nsb, &out); break;
        case WSP_GGML_TYPE_Q4_K: kq_tile<KQ4, 1>(x, &y, nsb, &out); break;
        case WSP_GGML_TYPE_Q5_K: kq_tile<KQ5, 1>(x, &y, nsb, &out); break;
        default: kq_tile<KQ6, 1>(x, &y, nsb, &out); break;
    }
    return out;
}

size_t kq_work_size(const Geometry & g, int nth) {
    return ALIGN + align_up((size_t) (g.n_batch * g.M * (g.K / QK_K)) * sizeof(block_q8_K)) +
           (size_t) nth * align_up((size_t) g.K * sizeof(float));
}

void kq_compute(const ComputeParams & p, const Geometry & g) {
    const block_q8_K * qx = quantize_activations_q8_k(p, g);
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        switch (g.a->type) {
            case WSP_GGML_TYPE_Q2_K: rows_of<KQ2>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_Q3_K: rows_of<KQ3>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_Q4_K: rows_of<KQ4>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_Q5_K: rows_of<KQ5>(g, batch, i0, i1, qx); break;
            default: rows_of<KQ6>(g, batch, i0, i1, qx); break;
        }
    });
}

} // namespace wsp::cpu::mm
