// The dot_q8 path of the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S):
// the b rows quantized to Q8_K (mul_mat_kq.cpp's phase 1), then each weight super-block decoded
// once per tile of b rows and dotted with them in integers.
//
// Note [grid dots]: every grid type's weight is w = d * c * v / F with d the block's fp16 scale,
// c a small odd integer scale per 16 weights, F a power of two of the type and v an integer:
//     IQ2_*:   c = 2 s + 1, F = 8,  v = point byte (8, 25 or 43) * sign
//     IQ3_XXS: c = 2 s + 1, F = 4,  v = point byte * sign
//     IQ3_S:   c = 2 s + 1, F = 1,  v = point byte * sign
//     IQ1_*:   c = 2 s + 1, F = 8,  v = 8 g + e, g the point's -1 / 0 / 1 and e = -1 or +1 the
//              delta's sign (the delta is 1/8)
// (the dequantizers' d * (0.5 + s) * 0.25 is d (2 s + 1) / 8, and so on). Each group of 32 weights
// decodes to 32 unsigned bytes u (the magnitudes; IQ1: g + 1), their signs (IQ1: the delta's) and
// 2 scales c; against Q8_K activations q a super-block's dot is d * d_y / F * sum_h c_h * sum(v q)
// over each half h of 16, with
//     sum(v q) = sum(u * (sign q))                           (IQ2, IQ3)
//     sum(v q) = 8 sum(u q) - 8 sum(q) + sum(e q)            (IQ1)
// all exact in 16-bit pairs (|u (sign q)| <= 62 * 127 per byte, twice; IQ1's
// 8 * 254 + 254 fits) and in 32-bit sums, with one float multiply per super-block,
// as the client's kernels do. Results are the client's product of the dequantized weights with
// the Q8_K round trip of the activations, to float rounding (SuperBlockTypes.MulMatAndGetRows...).

#include "mul_mat_kq.h"

#include "mul_mat_dot.h"
#include "q8_blocks.h"

#include <cstring>

namespace wsp::cpu::mm {

namespace {

using namespace q8;

// one group of 32 weights decoded: the 4 codebook points of its 8-weight runs (IQ3: two 4-byte
// points each; IQ1: bytes -1, 0, 1), a mask per run with 0xff bytes where v is negative (IQ2, IQ3:
// the weight's sign; IQ1: the delta's) and the scales c of its two halves of 16. Plain integers, so
// that the decode stays in registers and serves the SIMD and the scalar dot alike.
struct Group {
    uint64_t pt[4];
    uint64_t neg[4];
    uint32_t neg_bits; // bit j set where v of weight j is negative: neg as one bit a byte
    int      c0, c1;
};

// the 8 mask bytes of a sign byte's bits (0xff for a set bit), for all 256 bytes and for the 128
// 7-bit indices of Note [even signs]
struct SignTables {
    uint64_t of[256];
    uint64_t even[128];
    constexpr SignTables() : of(), even() {
        for (int b = 0; b < 256; ++b) {
            uint64_t v = 0;
            for (int j = 0; j < 8; ++j) {
                v |= (uint64_t) ((b >> j) & 1 ? 0xff : 0) << (8 * j);
            }
            of[b] = v;
        }
        for (uint32_t i = 0; i < 128; ++i) {
            even[i] = of[iq_even_signs(i)];
        }
    }
};
constexpr SignTables SIGNS;
constexpr uint64_t   ALL_NEG = ~0ull;

// the sign byte of each 7-bit index (Note [even signs])
struct EvenSignBytes {
    uint8_t of[128];
    constexpr EvenSignBytes() : of() {
        for (uint32_t i = 0; i < 128; ++i) {
            of[i] = iq_even_signs(i);
        }
    }
};
constexpr EvenSignBytes EVEN;

// a block's bytes read as one integer and taken apart by shifts: read byte by byte, the compiler
// vectorizes the four reads and reloads them through the stack (a stall per group: 3x slower)
inline uint64_t load_u64(const void * p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

inline uint32_t load_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

inline uint32_t load_u16(const void * p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

// the sign bits of four 7-bit indices in bits 0..27 of w (Note [even signs]), a byte each
inline uint32_t even_bits(uint32_t w) {
    return (uint32_t) EVEN.of[w & 127] | (uint32_t) EVEN.of[(w >> 7) & 127] << 8 |
           (uint32_t) EVEN.of[(w >> 14) & 127] << 16 | (uint32_t) EVEN.of[(w >> 21) & 127] << 24;
}

// Each type: d(b), the block's d / F (Note [grid dots]); group(cb, b, ib, g), group ib; TERNARY:
// IQ1's form of v
struct IQ2XXS {
    using Block = block_iq2_xxs;

    static constexpr bool TERNARY = false;

    static float d(const Block & b) { return fp16_to_fp32(b.d) * 0.125f; }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint64_t aux = load_u64(b.qs + 4 * ib); // 4 codebook bytes; 4 x 7 sign bits, the scale
        const uint32_t hi  = (uint32_t) (aux >> 32);
        for (int l = 0; l < 4; ++l) {
            g.pt[l]  = cb.iq2xxs[(aux >> (8 * l)) & 0xff];
            g.neg[l] = SIGNS.even[(hi >> (7 * l)) & 127];
        }
        g.neg_bits = even_bits(hi);
        g.c0 = g.c1 = 2 * (int) (hi >> 28) + 1;
    }
};

struct IQ2XS {
    using Block = block_iq2_xs;

    static constexpr bool TERNARY = false;

    static float d(const Block & b) { return fp16_to_fp32(b.d) * 0.125f; }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint64_t qs = load_u64(b.qs + 4 * ib);
        for (int l = 0; l < 4; ++l) {
            const uint32_t q = (uint32_t) (qs >> (16 * l)) & 0xffff;
            g.pt[l]          = cb.iq2xs[q & 511];
            g.neg[l]         = SIGNS.even[q >> 9];
        }
        g.neg_bits = (uint32_t) EVEN.of[(qs >> 9) & 127] | (uint32_t) EVEN.of[(qs >> 25) & 127] << 8 |
                     (uint32_t) EVEN.of[(qs >> 41) & 127] << 16 | (uint32_t) EVEN.of[(qs >> 57) & 127] << 24;
        g.c0 = 2 * (b.scales[ib] & 0xf) + 1;
        g.c1 = 2 * (b.scales[ib] >> 4) + 1;
    }
};

struct IQ2S {
    using Block = block_iq2_s;

    static constexpr bool TERNARY = false;

    static float d(const Block & b) { return fp16_to_fp32(b.d) * 0.125f; }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint32_t qs = load_u32(b.qs + 4 * ib), signs = load_u32(b.qs + QK_K / 8 + 4 * ib);
        const uint32_t qh = b.qh[ib];
        for (int l = 0; l < 4; ++l) {
            g.pt[l]  = cb.iq2s[((qs >> (8 * l)) & 0xff) | ((qh << (8 - 2 * l)) & 0x300)];
            g.neg[l] = SIGNS.of[(signs >> (8 * l)) & 0xff];
        }
        g.neg_bits = signs;
        g.c0       = 2 * (b.scales[ib] & 0xf) + 1;
        g.c1       = 2 * (b.scales[ib] >> 4) + 1;
    }
};

struct IQ3XXS {
    using Block = block_iq3_xxs;

    static constexpr bool TERNARY = false;

    static float d(const Block & b) { return fp16_to_fp32(b.d) * 0.25f; }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint32_t aux = load_u32(b.qs + QK_K / 4 + 4 * ib);
        const uint64_t qs  = load_u64(b.qs + 8 * ib);
        for (int l = 0; l < 4; ++l) {
            g.pt[l]  = cb.iq3xxs[(qs >> (16 * l)) & 0xff] | ((uint64_t) cb.iq3xxs[(qs >> (16 * l + 8)) & 0xff] << 32);
            g.neg[l] = SIGNS.even[(aux >> (7 * l)) & 127];
        }
        g.neg_bits = even_bits(aux);
        g.c0 = g.c1 = 2 * (int) (aux >> 28) + 1;
    }
};

struct IQ3S {
    using Block = block_iq3_s;

    static constexpr bool TERNARY = false;

    static float d(const Block & b) { return fp16_to_fp32(b.d); }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint64_t qs = load_u64(b.qs + 8 * ib);
        const uint32_t qh = b.qh[ib], signs = load_u32(b.signs + 4 * ib);
        for (int l = 0; l < 4; ++l) {
            const uint32_t i0 = ((qs >> (16 * l)) & 0xff) | ((qh << (8 - 2 * l)) & 256);
            const uint32_t i1 = ((qs >> (16 * l + 8)) & 0xff) | ((qh << (7 - 2 * l)) & 256);
            g.pt[l]           = cb.iq3s[i0] | ((uint64_t) cb.iq3s[i1] << 32);
            g.neg[l]          = SIGNS.of[(signs >> (8 * l)) & 0xff];
        }
        g.neg_bits = signs;
        g.c0 = g.c1 = 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
    }
};

struct IQ1S {
    using Block = block_iq1_s;

    static constexpr bool TERNARY = true;

    static float d(const Block & b) { return fp16_to_fp32(b.d) * 0.125f; }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint32_t h = b.qh[ib], qs = load_u32(b.qs + 4 * ib);
        for (int l = 0; l < 4; ++l) {
            g.pt[l]  = cb.iq1s[((qs >> (8 * l)) & 0xff) | (((h >> (3 * l)) & 7) << 8)];
            g.neg[l] = h & 0x8000 ? ALL_NEG : 0;
        }
        g.neg_bits = h & 0x8000 ? ~0u : 0u;
        g.c0 = g.c1 = 2 * ((h >> 12) & 7) + 1;
    }
};

struct IQ1M {
    using Block = block_iq1_m;

    static constexpr bool TERNARY = true;

    static float d(const Block & b) {
        const uint64_t sc = load_u64(b.scales); // the four 16-bit scale words
        const uint16_t dbits =
            (uint16_t) (((sc >> 12) & 0x000f) | ((sc >> 24) & 0x00f0) | ((sc >> 36) & 0x0f00) | ((sc >> 48) & 0xf000));
        return fp16_to_fp32(dbits) * 0.125f;
    }

    static void group(const IqCodebooks & cb, const Block & b, int ib, Group & g) {
        const uint32_t qs = load_u32(b.qs + 4 * ib), qh = load_u16(b.qh + 2 * ib);
        for (int l = 0; l < 4; ++l) {
            const uint32_t h = qh >> (4 * l);
            g.pt[l]          = cb.iq1s[((qs >> (8 * l)) & 0xff) | ((h & 7) << 8)];
            g.neg[l]         = h & 8 ? ALL_NEG : 0;
        }
        // bit 3 of each nibble of qh to bit 0 of its run's byte, then to all 8 bits (no carries)
        const uint32_t t     = (qh >> 3) & 0x1111;
        g.neg_bits           = ((t & 1) | ((t & 0x10) << 4) | ((t & 0x100) << 8) | ((t & 0x1000) << 12)) * 0xffu;
        const uint32_t sc    = load_u16(b.scales + 2 * (ib / 2));
        const int      shift = 6 * (ib % 2);
        g.c0                 = 2 * ((sc >> shift) & 7) + 1;
        g.c1                 = 2 * ((sc >> (shift + 3)) & 7) + 1;
    }
};

constexpr int RI = 4; // b rows per tile

#if WSP_MM_Q8_SIMD && defined(__AVX512BW__) && defined(__AVX512VL__)
#    define WSP_MM_IQ_MASKS 1 // the signs as a mask register: one masked subtract a b row
#endif

#if WSP_MM_Q8_SIMD
// one super-block b of a weight row against the Q8_K rows x[q] (block ib), q < R (Note [grid
// dots]): each group decoded once, then met by every row; acc[q] += d d_y sum_h c_h sum(v q) in 8
// float lanes. The signs go onto the activations (maddubs takes unsigned bytes first): Q8_K's values
// are -127 ... 127 (its reference scales by -127 / max), so negating a byte never wraps.
template <class T, int R>
inline void iq_block(const IqCodebooks & cb, const typename T::Block & b, const block_q8_K * const * x, int64_t ib,
                     __m256 * acc) {
    __m256i       vsum[R];
    const __m256i ones = _mm256_set1_epi8(1);
    for (int q = 0; q < R; ++q) {
        vsum[q] = _mm256_setzero_si256();
    }
    for (int gi = 0; gi < QK_K / 32; ++gi) {
        Group g;
        T::group(cb, b, gi, g);
        __m256i u =
            _mm256_set_epi64x((long long) g.pt[3], (long long) g.pt[2], (long long) g.pt[1], (long long) g.pt[0]);
        if (T::TERNARY) {
            u = _mm256_add_epi8(u, ones); // g + 1: 0, 1, 2
        }
        // c of half 2 gi in 16-bit lanes 0..7, of 2 gi + 1 in lanes 8..15
#    if WSP_MM_IQ_MASKS
        const __mmask32 neg = g.neg_bits;
        const __m256i   c   = _mm256_mask_set1_epi16(_mm256_set1_epi16((short) g.c0), 0xff00, (short) g.c1);
#    else
        const __m256i s = _mm256_or_si256(
            _mm256_set_epi64x((long long) g.neg[3], (long long) g.neg[2], (long long) g.neg[1], (long long) g.neg[0]),
            ones);
        const __m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short) g.c0)),
                                                  _mm_set1_epi16((short) g.c1), 1);
#    endif
#    pragma GCC unroll 4
        for (int q = 0; q < R; ++q) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x[q][ib].qs + 32 * gi));
#    if WSP_MM_IQ_MASKS
            const __m256i as = _mm256_mask_sub_epi8(a, neg, _mm256_setzero_si256(), a);
#    else
            const __m256i as = _mm256_sign_epi8(a, s);
#    endif
            __m256i p16;
            if (T::TERNARY) { // 8 (sum(u a) - sum(a)) + sum(e a)
                const __m256i ua = _mm256_maddubs_epi16(u, a);
                const __m256i sa = _mm256_maddubs_epi16(ones, a);
                const __m256i ea = _mm256_maddubs_epi16(ones, as);
                p16              = _mm256_add_epi16(_mm256_slli_epi16(_mm256_sub_epi16(ua, sa), 3), ea);
            } else {
                p16 = _mm256_maddubs_epi16(u, as);
            }
            vsum[q] = _mm256_add_epi32(vsum[q], _mm256_madd_epi16(p16, c));
        }
    }
    const float d = T::d(b);
    for (int q = 0; q < R; ++q) {
        acc[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(vsum[q]), _mm256_set1_ps(d * x[q][ib].d), acc[q]);
    }
}
#endif

// out[q] = dot of one weight row (nsb super-blocks) with the Q8_K rows x[q], q < R (Note [grid dots])
template <class T, int R>
void iq_tile(const IqCodebooks & cb, const char * wrow, const block_q8_K * const * x, int64_t nsb, float * out) {
    const auto * w = reinterpret_cast<const typename T::Block *>(wrow);
#if WSP_MM_Q8_SIMD
    __m256 acc[R];
    for (int q = 0; q < R; ++q) {
        acc[q] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < nsb; ++ib) {
        iq_block<T, R>(cb, w[ib], x, ib, acc);
    }
    for (int q = 0; q < R; ++q) {
        out[q] = hsum256(acc[q]);
    }
#else
    float acc[R] = {};
    for (int64_t ib = 0; ib < nsb; ++ib) {
        const typename T::Block & b = w[ib];
        int32_t                   isum[R];
        for (int q = 0; q < R; ++q) {
            isum[q] = 0;
        }
        for (int gi = 0; gi < QK_K / 32; ++gi) {
            Group g;
            T::group(cb, b, gi, g);
            for (int q = 0; q < R; ++q) {
                const int8_t * a       = x[q][ib].qs + 32 * gi;
                int32_t        half[2] = { 0, 0 };
                for (int j = 0; j < 32; ++j) {
                    const int pt   = (int) (uint8_t) (g.pt[j / 8] >> (8 * (j % 8)));
                    const int sign = (g.neg[j / 8] >> (8 * (j % 8))) & 1 ? -1 : 1;
                    half[j / 16] += T::TERNARY ? 8 * (int8_t) pt * a[j] + sign * a[j] : pt * sign * a[j];
                }
                isum[q] += g.c0 * half[0] + g.c1 * half[1];
            }
        }
        const float d = T::d(b);
        for (int q = 0; q < R; ++q) {
            acc[q] += d * x[q][ib].d * (float) isum[q];
        }
    }
    for (int q = 0; q < R; ++q) {
        out[q] = acc[q];
    }
#endif
}

#if WSP_MM_Q8_SIMD
// four weight rows against one b row, super-block by super-block (Note [four-row stream],
// mul_mat_kq.cpp): out[j] for rows[j]
template <class T>
void iq_four_rows(const IqCodebooks & cb, const char * const * rows, const block_q8_K * x, int64_t nsb, float * out) {
    __m256 acc[4];
    for (int j = 0; j < 4; ++j) {
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < nsb; ++ib) {
#    pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            iq_block<T, 1>(cb, reinterpret_cast<const typename T::Block *>(rows[j])[ib], &x, ib, &acc[j]);
        }
    }
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

template <class T>
void rows_of(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const block_q8_K * qx) {
    const IqCodebooks & cb  = *iq_codebooks(); // the op is supported only where it is not null
    const int64_t       nsb = g.K / QK_K;
#if WSP_MM_Q8_SIMD
    if (g.M == 1) {
        const block_q8_K * x = qx + batch * nsb;
        for_four_rows(
            g, batch, i0, i1, [&](const char * const * rows, float * out) { iq_four_rows<T>(cb, rows, x, nsb, out); },
            [&](const char * row, float * out) { iq_tile<T, 1>(cb, row, &x, nsb, out); });
        return;
    }
#endif
    tile_rows<RI>(g, batch, i0, i1, qx, nsb, [&](const char * w, const block_q8_K * const * x, int r, float * out) {
        switch (r) {
            case 1: iq_tile<T, 1>(cb, w, x, nsb, out); break;
            case 2: iq_tile<T, 2>(cb, w, x, nsb, out); break;
            case 3: iq_tile<T, 3>(cb, w, x, nsb, out); break;
            default: iq_tile<T, 4>(cb, w, x, nsb, out); break;
        }
    });
}

} // namespace

void iq_compute(const ComputeParams & p, const Geometry & g) {
    const block_q8_K * qx = quantize_activations_q8_k(p, g);
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        switch (g.a->type) {
            case WSP_GGML_TYPE_IQ2_XXS: rows_of<IQ2XXS>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_IQ2_XS: rows_of<IQ2XS>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_IQ2_S: rows_of<IQ2S>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_IQ3_XXS: rows_of<IQ3XXS>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_IQ3_S: rows_of<IQ3S>(g, batch, i0, i1, qx); break;
            case WSP_GGML_TYPE_IQ1_S: rows_of<IQ1S>(g, batch, i0, i1, qx); break;
            default: rows_of<IQ1M>(g, batch, i0, i1, qx); break;
        }
    });
}

} // namespace wsp::cpu::mm
