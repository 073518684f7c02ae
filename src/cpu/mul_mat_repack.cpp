// MUL_MAT with a weight in the 8-row layout (Note [Q4_0x8 repack], repack.h), at every M. Phase 1
// quantizes the b rows to 8-bit blocks (q8_act.h); phase 2 takes items of row groups. A group's
// block decodes once into 8 vectors of nibbles (lane = row, 4 columns per 32-bit lane) and serves
// up to 8 b rows; per b row the 32 columns are 8 multiply-adds of those vectors with one 4-byte
// broadcast of the activations each, then (s_x = d_x * sum(q), from phase 1)
//   Q4_0, Q5_0, Q8_0, w = d_w * (u - o): sum = d_w * (d_x * sum(u * q) - o * s_x)  (o = 8, 16, 128)
//   Q4_1, Q5_1, w = d_w * u + m_w:    sum = d_w * (d_x * sum(u * q)) + m_w * s_x
// for the group's 8 rows in one vector; the Q5 types add 16 to u where the fifth bit is set, one
// masked add per nibble vector. Q8_0's 8 vectors are its stored bytes (Note [Q8_0x8], repack.h).
// The kernels are templates on the type.

#include "mul_mat_dot.h"
#include "q8_act.h"
#include "repack.h"
#include "vec.h"

#include <array>
#include <cstring>
#include <utility>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#    include <immintrin.h>
#    define WSP_REPACK_SIMD 1
#endif

namespace wsp::cpu::mm {

namespace {

constexpr int RT = 8; // b rows per tile

template <wsp_ggml_type T>
constexpr RepackLayout LAYOUT = repack_layout(T);
template <wsp_ggml_type T>
constexpr size_t GROUP_BLOCK = LAYOUT<T>.block; // bytes of one block of a group
template <wsp_ggml_type T>
constexpr bool MIN = LAYOUT<T>.m >= 0; // w = d * u + m
template <wsp_ggml_type T>
constexpr bool FIFTH = LAYOUT<T>.qh >= 0; // u has a fifth bit
template <wsp_ggml_type T>
constexpr bool BYTES = T == WSP_GGML_TYPE_Q8_0; // 8-bit u, not nibbles: chunk t is lo[t], chunk 4 + t hi[t]
template <wsp_ggml_type T>
constexpr float OFFSET = MIN<T>     ? 0.0f
                         : BYTES<T> ? 128.0f
                         : FIFTH<T> ? 16.0f
                                    : 8.0f; // w = d * (u - o)
// bytes ahead of the block being read, each of its cache lines asked for: at M = 1 / 4 / 16
// (2 threads, K = 1280, N = 5120, quiet machine, GFLOP/s) one line 1 KiB ahead gave 100 / 280 / 400,
// 4 KiB ahead 110 / 280 / 405, all three lines 4 KiB ahead 115 / 355 / 475 (2 or 6 KiB: the same).
// With the tiles of today, at one b row 8 KiB beats 4 KiB (three interleaved rounds, Q4_x and Q5_x,
// both whisper shapes: better in 21 of 24 pairs, Q5_0 and Q5_1 by 5-15%; 16 KiB in between, 1 KiB
// 15-25% worse), while at M = 16 it is 3-9% worse and at M = 2-4 the same: one row reads ahead
// farther. At one b row the lines are asked for as non-temporal (prefetchnta): better in 11 of 12
// interleaved pairs (Q4_0, Q5_1, both shapes, median +4%; over four types 24 of 32, +4%), where
// prefetcht1 was 10% worse and no software prefetch 16% worse; at M >= 2 it made no clear
// difference (23 of 36, +1.7%), so those keep prefetcht0.
constexpr int PREFETCH     = 4096;
constexpr int PREFETCH_ONE = 8192; // group_tile at one b row

#if WSP_REPACK_SIMD
inline __m256i bcast4(const int8_t * q) {
    int32_t v;
    std::memcpy(&v, q, sizeof v);
    return _mm256_set1_epi32(v);
}

// per lane (row): sum over the block's 32 columns of u * q
template <wsp_ggml_type T>
inline __m256i block_dot(const __m256i * lo, const __m256i * hi, const int8_t * q) {
#    if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    // two chains of 4 (a chain of 8 would wait on the multiply-add's latency)
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
        s0 = _mm256_dpbusd_epi32(s0, lo[t], bcast4(q + 4 * t));
        s1 = _mm256_dpbusd_epi32(s1, hi[t], bcast4(q + 16 + 4 * t));
    }
    return _mm256_add_epi32(s0, s1);
#    elif defined(__AVXVNNI__)
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
        s0 = _mm256_dpbusd_avx_epi32(s0, lo[t], bcast4(q + 4 * t));
        s1 = _mm256_dpbusd_avx_epi32(s1, hi[t], bcast4(q + 16 + 4 * t));
    }
    return _mm256_add_epi32(s0, s1);
#    else
    if constexpr (BYTES<T>) {
        // u up to 255 would overflow maddubs's pair sums: sum(w * q) with w = u - 128 as |w| times
        // q with w's sign (pairs within 2 * 128 * 127), widened per chunk, then 128 * sum(q) back
        __m256i s = _mm256_setzero_si256();
        for (int t = 0; t < 8; ++t) {
            const __m256i w = _mm256_xor_si256(t < 4 ? lo[t] : hi[t - 4], _mm256_set1_epi8((char) 0x80));
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(bcast4(q + 4 * t), w));
            s               = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
        }
        int32_t sum_q = 0;
        for (int j = 0; j < 32; ++j) {
            sum_q += q[j];
        }
        return _mm256_add_epi32(s, _mm256_set1_epi32(128 * sum_q));
    }
    // u <= 31 (the Q5 types), |q| <= 127: a pair sum is at most 7874 in size, 4 of them 31496,
    // within int16; 8 of them are not, so the lo and hi sums widen apart
    __m256i pl = _mm256_setzero_si256(), ph = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
        pl = _mm256_add_epi16(pl, _mm256_maddubs_epi16(lo[t], bcast4(q + 4 * t)));
        ph = _mm256_add_epi16(ph, _mm256_maddubs_epi16(hi[t], bcast4(q + 16 + 4 * t)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16(1)), _mm256_madd_epi16(ph, _mm256_set1_epi16(1)));
#    endif
}
#endif

#if WSP_REPACK_SIMD
// the cache lines of a group block (three, up to four from 160 bytes, six for Q8_0's 272), AHEAD
// bytes ahead
// (Note [weight prefetch], mul_mat_dot.cpp)
template <wsp_ggml_type T, int AHEAD = PREFETCH>
inline void prefetch_block(const uint8_t * blk) {
    constexpr auto H = AHEAD == PREFETCH_ONE ? _MM_HINT_NTA : _MM_HINT_T0;
    const char *   p = reinterpret_cast<const char *>(blk) + AHEAD;
    _mm_prefetch(p, H);
    _mm_prefetch(p + 64, H);
    _mm_prefetch(p + 128, H);
    if constexpr (BYTES<T>) {
        _mm_prefetch(p + 192, H);
        _mm_prefetch(p + 256, H);
    }
    if constexpr (GROUP_BLOCK < T >> 144) {
        _mm_prefetch(p + GROUP_BLOCK<T> - 1, H);
    }
}

// the fifth bits of nibble vector v (0..3: lo[v], 4..7: hi[v - 4]) added to u as 16
template <wsp_ggml_type T>
inline __m256i add_fifth(__m256i u, const uint8_t * blk, int v) {
    uint32_t k;
    std::memcpy(&k, blk + LAYOUT<T>.qh + 4 * v, 4);
#    if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(u, (__mmask32) k, u, _mm256_set1_epi8(16));
#    else
    // byte j takes bit j of k: byte j / 8 of k spread over 8 bytes, then tested against 1 << (j % 8)
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int) k),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                                2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bits   = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    const __m256i set    = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
    return _mm256_add_epi8(u, _mm256_and_si256(set, _mm256_set1_epi8(16)));
#    endif
}

// one block of a group: its 8 scales (and mins, to *mw), and its nibbles as 8 vectors (lane = row)
template <wsp_ggml_type T, int AHEAD>
inline __m256 decode(const uint8_t * blk, __m256i * lo, __m256i * hi, __m256 * mw) {
    prefetch_block<T, AHEAD>(blk);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int t = 0; t < 4; ++t) {
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + LAYOUT<T>.qs + 32 * t));
        if constexpr (BYTES<T>) {
            lo[t] = c;
            hi[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + LAYOUT<T>.qs + 128 + 32 * t));
            continue;
        }
        lo[t] = _mm256_and_si256(c, m4);
        hi[t] = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
        if constexpr (FIFTH<T>) {
            lo[t] = add_fifth<T>(lo[t], blk, t);
            hi[t] = add_fifth<T>(hi[t], blk, 4 + t);
        }
    }
    if constexpr (MIN<T>) {
        *mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + LAYOUT<T>.m)));
    }
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk)));
}

// acc += the block's contribution for one b row (the sums at the top of the file)
template <wsp_ggml_type T>
inline __m256 accumulate(__m256 acc, __m256 dw, __m256 mw, const __m256i * lo, const __m256i * hi, const BlockQ8 & xb) {
    const __m256 s = _mm256_cvtepi32_ps(block_dot<T>(lo, hi, xb.qs));
    if constexpr (MIN<T>) {
        acc = _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_set1_ps(xb.d)), dw, acc);
        return _mm256_fmadd_ps(mw, _mm256_set1_ps(xb.s), acc);
    } else {
        const __m256 v = _mm256_fmadd_ps(s, _mm256_set1_ps(xb.d), _mm256_set1_ps(-OFFSET<T> * xb.s));
        return _mm256_fmadd_ps(v, dw, acc);
    }
}
#endif

// out[8 r + lane] = row (8 g + lane) of the group dotted with b row x[r], r < R
template <wsp_ggml_type T, int R>
void group_tile(const uint8_t * grp, const BlockQ8 * const * x, int64_t nb, float * out) {
#if WSP_REPACK_SIMD
    __m256 acc[R];
    for (int r = 0; r < R; ++r) {
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b, grp += GROUP_BLOCK<T>) {
        __m256i      lo[4], hi[4];
        __m256       mw = _mm256_setzero_ps();
        const __m256 dw = decode < T, R == 1 ? PREFETCH_ONE : PREFETCH > (grp, lo, hi, &mw);
#    pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            acc[r] = accumulate<T>(acc[r], dw, mw, lo, hi, x[r][b]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(out + 8 * r, acc[r]);
    }
#else
    float                  acc[R][REPACK_ROWS] = {};
    constexpr RepackLayout L                   = LAYOUT<T>;
    for (int64_t b = 0; b < nb; ++b, grp += GROUP_BLOCK<T>) {
        uint32_t masks[8] = {};
        if (FIFTH<T>) {
            std::memcpy(masks, grp + L.qh, sizeof masks);
        }
        for (int lane = 0; lane < REPACK_ROWS; ++lane) {
            uint16_t h, hm = 0;
            std::memcpy(&h, grp + 2 * lane, 2);
            if (MIN<T>) {
                std::memcpy(&hm, grp + L.m + 2 * lane, 2);
            }
            const float dw = fp16_to_fp32(h), mw = fp16_to_fp32(hm);
            for (int r = 0; r < R; ++r) {
                const BlockQ8 & xb  = x[r][b];
                int             sum = 0;
                for (int t = 0; t < 4; ++t) {
                    for (int i = 0; i < 4; ++i) {
                        const int     j  = 4 * lane + i;
                        const uint8_t c  = grp[L.qs + 32 * t + j];
                        const int     ul = BYTES<T> ? c : (c & 0x0f) | (int) (masks[t] >> j & 1u) << 4;
                        const int     uh =
                            BYTES<T> ? grp[L.qs + 128 + 32 * t + j] : (c >> 4) | (int) (masks[4 + t] >> j & 1u) << 4;
                        sum += ul * xb.qs[4 * t + i] + uh * xb.qs[16 + 4 * t + i];
                    }
                }
                acc[r][lane] +=
                    MIN<T> ? dw * (xb.d * (float) sum) + mw * xb.s : dw * (xb.d * (float) sum - OFFSET<T> * xb.s);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int lane = 0; lane < REPACK_ROWS; ++lane) {
            out[8 * r + lane] = acc[r][lane];
        }
    }
#endif
}

#if WSP_REPACK_SIMD
// Note [two streams]: at one b row the kernel reads group after group, one stream per task; the
// hardware keeps a limited number of requests per stream in flight, and a stream alone fell
// short of the bandwidth probe (0.73-0.85 at 73-77 GB/s). Two groups half an item apart, read
// block by block side by side, make two streams per task and two independent chains: better in
// 20 of 24 interleaved pairs (Q4_x, Q5_x, both whisper shapes, median +10%; 0.82-0.91 of the
// probe). Each group's sums are group_tile's, in the same order, so results are bit for bit the
// same.
#    if !defined(WSP_REPACK_WIDE_TWO) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
        defined(__AVX512VNNI__)
#        define WSP_REPACK_WIDE_TWO 1
#    endif
#    if WSP_REPACK_WIDE_TWO
// Note [two groups in one vector]: with 512-bit vectors the two groups share every instruction,
// group a in the low 8 lanes and group b in the high 8: both read the same b row block, so one
// 4-byte broadcast feeds all 16 lanes, and each lane computes what group_tile's lane computes, in
// the same order (results bit for bit the same). Measured where the kernel is the limit (one
// thread, weights in L2, 1280 x 256, four interleaved rounds, GFLOP/s): Q4_0 160 -> 207, Q4_1
// 169 -> 201, Q5_0 111 -> 150, Q5_1 110 -> 144. Kept out of line: inlined into compute_as, GCC
// ran out of general registers and moved the Q5 masks through xmm spills (Q5_x 115 instead of
// 150). From DRAM at two threads the memory is the limit and both kernels read alike (9 of 24
// interleaved pairs better, median -1%); the gain is for weights in cache and for the share of
// the cores left to the memory requests.
inline __m512i two_chunks(const uint8_t * ga, const uint8_t * gb, int off) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(ga + off))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gb + off)), 1);
}

// the 8 fp16 values at off of each group, a's in the low lanes
inline __m512 two_halves(const uint8_t * ga, const uint8_t * gb, int off) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(ga + off));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(gb + off));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}

// add_fifth for both groups: bit j of a's mask to byte j, of b's to byte 32 + j
template <wsp_ggml_type T>
inline __m512i add_fifth_two(__m512i u, const uint8_t * ga, const uint8_t * gb, int v) {
    uint32_t ka, kb;
    std::memcpy(&ka, ga + LAYOUT<T>.qh + 4 * v, 4);
    std::memcpy(&kb, gb + LAYOUT<T>.qh + 4 * v, 4);
    return _mm512_mask_add_epi8(u, (__mmask64) ((uint64_t) kb << 32 | ka), u, _mm512_set1_epi8(16));
}

template <wsp_ggml_type T>
__attribute__((noinline)) void group_tile_two(const uint8_t * ga, const uint8_t * gb, const BlockQ8 * x, int64_t nb,
                                              float * oa, float * ob) {
    const __m512i m4  = _mm512_set1_epi8(0x0f);
    __m512        acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, ga += GROUP_BLOCK<T>, gb += GROUP_BLOCK<T>) {
        prefetch_block<T, PREFETCH_ONE>(ga);
        prefetch_block<T, PREFETCH_ONE>(gb);
        const int8_t * q  = x[b].qs;
        __m512i        s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int t = 0; t < 4; ++t) {
            const __m512i c = two_chunks(ga, gb, LAYOUT<T>.qs + 32 * t);
            __m512i       lo, hi;
            if constexpr (BYTES<T>) {
                lo = c;
                hi = two_chunks(ga, gb, LAYOUT<T>.qs + 128 + 32 * t);
            } else {
                lo = _mm512_and_si512(c, m4);
                hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
            }
            if constexpr (FIFTH<T>) {
                lo = add_fifth_two<T>(lo, ga, gb, t);
                hi = add_fifth_two<T>(hi, ga, gb, 4 + t);
            }
            int32_t ql, qh;
            std::memcpy(&ql, q + 4 * t, 4);
            std::memcpy(&qh, q + 16 + 4 * t, 4);
            s0 = _mm512_dpbusd_epi32(s0, lo, _mm512_set1_epi32(ql));
            s1 = _mm512_dpbusd_epi32(s1, hi, _mm512_set1_epi32(qh));
        }
        const __m512 s  = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        const __m512 dw = two_halves(ga, gb, 0);
        // the same operations, in the same order, as accumulate's
        if constexpr (MIN<T>) {
            const __m512 mw = two_halves(ga, gb, LAYOUT<T>.m);
            acc             = _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_set1_ps(x[b].d)), dw, acc);
            acc             = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[b].s), acc);
        } else {
            const __m512 v = _mm512_fmadd_ps(s, _mm512_set1_ps(x[b].d), _mm512_set1_ps(-OFFSET<T> * x[b].s));
            acc            = _mm512_fmadd_ps(v, dw, acc);
        }
    }
    _mm256_storeu_ps(oa, _mm512_castps512_ps256(acc));
    _mm256_storeu_ps(ob, _mm512_extractf32x8_ps(acc, 1));
}
#    else
template <wsp_ggml_type T>
void group_tile_two(const uint8_t * ga, const uint8_t * gb, const BlockQ8 * x, int64_t nb, float * oa, float * ob) {
    __m256 acc_a = _mm256_setzero_ps(), acc_b = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, ga += GROUP_BLOCK<T>, gb += GROUP_BLOCK<T>) {
        __m256i lo[4], hi[4];
        __m256 mw = _mm256_setzero_ps();
        __m256 dw = decode<T, PREFETCH_ONE>(ga, lo, hi, &mw);
        acc_a = accumulate<T>(acc_a, dw, mw, lo, hi, x[b]);
        dw = decode<T, PREFETCH_ONE>(gb, lo, hi, &mw);
        acc_b = accumulate<T>(acc_b, dw, mw, lo, hi, x[b]);
    }
    _mm256_storeu_ps(oa, acc_a);
    _mm256_storeu_ps(ob, acc_b);
}
#    endif
#endif

using TileFn = void (*)(const uint8_t *, const BlockQ8 * const *, int64_t, float *);

template <wsp_ggml_type T, size_t... I>
constexpr std::array<TileFn, RT> make_tiles(std::index_sequence<I...>) {
    return { { &group_tile<T, (int) I + 1>... } };
}

template <wsp_ggml_type T>
constexpr std::array<TileFn, RT> TILES = make_tiles<T>(std::make_index_sequence<RT>());

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__) && \
    defined(__BMI2__) && WSP_REPACK_SIMD
#    define WSP_REPACK_PAIRS 1

// Note [b row pairs]: from two b rows on, a 512-bit instruction serves two b rows at once. Lane
// 2 l + h holds weight row l of the group against b row 2 p + h of the pair p: the group's
// nibble vectors are widened with each 32-bit lane doubled (one permute per 32-byte chunk, shared
// by every pair), and the activations of a pair are stored interleaved in phase 1, 4 bytes of one
// row then 4 of the other, so one 8-byte broadcast feeds a multiply-add. Every lane computes what
// the 256-bit tile's lane computes, in the same order (two chains of four, the same two FMAs), so
// a pair's results are those of group_tile bit for bit, at half its instructions.
struct PairQ8 {
    int8_t qs[64]; // qs[8 j + 4 h + i] = row h's q[4 j + i]
    float  d[2];   // d_x of the two rows
    float  ms[2];  // -o * s_x (Q4_0, Q5_0) or s_x (Q4_1, Q5_1) of the two rows
};

template <wsp_ggml_type T>
void pair_block(const BlockQ8 & a, const BlockQ8 & b, PairQ8 & out) {
    for (int j = 0; j < 8; ++j) {
        std::memcpy(out.qs + 8 * j, a.qs + 4 * j, 4);
        std::memcpy(out.qs + 8 * j + 4, b.qs + 4 * j, 4);
    }
    const float f = MIN<T> ? 1.0f : -OFFSET<T>;
    out.d[0]      = a.d;
    out.d[1]      = b.d;
    out.ms[0]     = f * a.s;
    out.ms[1]     = f * b.s;
}

// out[16 p + 2 lane + h] = row (8 g + lane) of the group dotted with b row 2 p + h of x, p < P
// the fifth bits of nibble vector v (as add_fifth) in the doubled lanes: bit 4 l + i of the mask
// goes to bits 8 l + i and 8 l + 4 + i
template <wsp_ggml_type T>
inline __m512i add_fifth_doubled(__m512i u, const uint8_t * blk, int v) {
    uint32_t k;
    std::memcpy(&k, blk + LAYOUT<T>.qh + 4 * v, 4);
    const uint64_t twice = _pdep_u64(k, 0x0f0f0f0f0f0f0f0full) | _pdep_u64(k, 0xf0f0f0f0f0f0f0f0ull);
    return _mm512_mask_add_epi8(u, (__mmask64) twice, u, _mm512_set1_epi8(16));
}

template <wsp_ggml_type T, int P>
void pair_tile(const uint8_t * grp, const PairQ8 * const * x, int64_t nb, float * out) {
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i m4  = _mm512_set1_epi8(0x0f);
    __m512        acc[P];
    for (int q = 0; q < P; ++q) {
        acc[q] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b, grp += GROUP_BLOCK<T>) {
        prefetch_block<T>(grp);
        __m512i lo[4], hi[4];
        // chunk t of the group block, each 32-bit lane doubled
        auto doubled = [&](int t) {
            return _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm256_loadu_si256(
                                                     reinterpret_cast<const __m256i *>(grp + LAYOUT<T>.qs + 32 * t))));
        };
        for (int t = 0; t < 4; ++t) {
            const __m512i c = doubled(t);
            if constexpr (BYTES<T>) {
                lo[t] = c;
                hi[t] = doubled(4 + t);
                continue;
            }
            lo[t] = _mm512_and_si512(c, m4);
            hi[t] = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
            if constexpr (FIFTH<T>) {
                lo[t] = add_fifth_doubled<T>(lo[t], grp, t);
                hi[t] = add_fifth_doubled<T>(hi[t], grp, 4 + t);
            }
        }
        // the 8 rows' fp16 values at off, each lane doubled
        auto halves = [&](int off) {
            return _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_cvtph_ps(
                                                  _mm_loadu_si128(reinterpret_cast<const __m128i *>(grp + off)))));
        };
        const __m512 dw = halves(0);
        const __m512 mw = MIN<T> ? halves(LAYOUT<T>.m) : _mm512_setzero_ps();
#    pragma GCC unroll 8
        for (int q = 0; q < P; ++q) {
            const PairQ8 & xp = x[q][b];
            __m512i        s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
            for (int t = 0; t < 4; ++t) {
                s0 = _mm512_dpbusd_epi32(s0, lo[t],
                                         _mm512_set1_epi64(*reinterpret_cast<const long long *>(xp.qs + 8 * t)));
                s1 = _mm512_dpbusd_epi32(s1, hi[t],
                                         _mm512_set1_epi64(*reinterpret_cast<const long long *>(xp.qs + 32 + 8 * t)));
            }
            const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            const __m512 dx =
                _mm512_broadcast_f32x2(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(xp.d))));
            const __m512 ms =
                _mm512_broadcast_f32x2(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(xp.ms))));
            // the same operations, in the same order, as accumulate's
            if constexpr (MIN<T>) {
                acc[q] = _mm512_fmadd_ps(_mm512_mul_ps(sum, dx), dw, acc[q]);
                acc[q] = _mm512_fmadd_ps(mw, ms, acc[q]);
            } else {
                acc[q] = _mm512_fmadd_ps(_mm512_fmadd_ps(sum, dx, ms), dw, acc[q]);
            }
        }
    }
    for (int q = 0; q < P; ++q) {
        _mm512_storeu_ps(out + 16 * q, acc[q]);
    }
}

using PairTileFn = void (*)(const uint8_t *, const PairQ8 * const *, int64_t, float *);

template <wsp_ggml_type T, size_t... I>
constexpr std::array<PairTileFn, RT> make_pair_tiles(std::index_sequence<I...>) {
    return { { &pair_tile<T, (int) I + 1>... } };
}

constexpr int RP = 8; // b row pairs per tile: 8 accumulators
template <wsp_ggml_type T>
constexpr std::array<PairTileFn, RP> PAIR_TILES = make_pair_tiles<T>(std::make_index_sequence<RP>());

// the pairs of a batch's b rows after phase 1's blocks (M / 2 pairs of nb blocks per batch)
size_t pairs_size(const Geometry & g) {
    return (size_t) (g.n_batch * (g.M / 2) * (g.K / QK8)) * sizeof(PairQ8);
}

PairQ8 * carve_pairs(const ComputeParams & p, const Geometry & g) {
    return reinterpret_cast<PairQ8 *>(static_cast<char *>(p.wdata) + q8_activations_work_size(g, p.nth));
}

// phase 1b: the tasks interleave their share of the pairs' blocks, then wait for each other
template <wsp_ggml_type T>
const PairQ8 * prepare_pairs(const ComputeParams & p, const Geometry & g, const BlockQ8 * qx) {
    PairQ8 *      pairs = carve_pairs(p, g);
    const int64_t nb = g.K / QK8, per_batch = (g.M / 2) * nb;
    int64_t       j0, j1;
    split_range(g.n_batch * per_batch, p.ith, p.nth, j0, j1);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t   batch = j / per_batch, pr = j % per_batch / nb, b = j % nb;
        const BlockQ8 * r0 = qx + (batch * g.M + 2 * pr) * nb;
        pair_block<T>(r0[b], r0[nb + b], pairs[j]);
    }
    p.barrier();
    return pairs;
}

// groups [g0, g1) of a batch against its b row pairs, then a last odd b row through group_tile
template <wsp_ggml_type T>
void groups_paired(const Geometry & g, int64_t batch, int64_t g0, int64_t g1, const BlockQ8 * qx,
                   const PairQ8 * pairs) {
    const int64_t  nb = g.K / QK8, np = g.M / 2;
    const PairQ8 * xp[RP];
    float          out[RP * 2 * REPACK_ROWS];
    for (int64_t grp = g0; grp < g1; ++grp) {
        const auto * w = reinterpret_cast<const uint8_t *>(g.a_row(grp * REPACK_ROWS, batch));
        for (int64_t q0 = 0; q0 < np; q0 += RP) {
            const int n = (int) (np - q0 < RP ? np - q0 : RP);
            for (int q = 0; q < n; ++q) {
                xp[q] = pairs + (batch * np + q0 + q) * nb;
            }
            PAIR_TILES<T>[(size_t) n - 1](w, xp, nb, out);
            for (int q = 0; q < n; ++q) {
                for (int lane = 0; lane < REPACK_ROWS; ++lane) {
                    for (int h = 0; h < 2; ++h) {
                        *g.dst_at(grp * REPACK_ROWS + lane, 2 * (q0 + q) + h, batch) = out[16 * q + 2 * lane + h];
                    }
                }
            }
        }
        if (g.M % 2 == 1) {
            const BlockQ8 * last = qx + (batch * g.M + g.M - 1) * nb;
            TILES<T>[0](w, &last, nb, out);
            for (int lane = 0; lane < REPACK_ROWS; ++lane) {
                *g.dst_at(grp * REPACK_ROWS + lane, g.M - 1, batch) = out[lane];
            }
        }
    }
}
#endif

template <wsp_ggml_type T>
void groups_of(const Geometry & g, int64_t batch, int64_t g0, int64_t g1, const BlockQ8 * qx) {
    const int64_t   nb = g.K / QK8;
    const BlockQ8 * xrows[RT];
    float           out[RT * REPACK_ROWS];
#if WSP_REPACK_SIMD
    if (g.M == 1) { // Note [two streams]
        const BlockQ8 * x = qx + batch * nb;
        if (g1 - g0 >= 2) { // Note [stream heads]
            prefetch_heads(g.a_row(g0 * REPACK_ROWS, batch), g.a_row((g0 + (g1 - g0) / 2) * REPACK_ROWS, batch),
                           PREFETCH_ONE);
        }

        g0 = two_streams(g0, g1, [&](int64_t ga, int64_t gb) {
            group_tile_two<T>(reinterpret_cast<const uint8_t *>(g.a_row(ga * REPACK_ROWS, batch)),
                              reinterpret_cast<const uint8_t *>(g.a_row(gb * REPACK_ROWS, batch)), x, nb, out, out + 8);
            for (int lane = 0; lane < REPACK_ROWS; ++lane) {
                *g.dst_at(ga * REPACK_ROWS + lane, 0, batch) = out[lane];
                *g.dst_at(gb * REPACK_ROWS + lane, 0, batch) = out[8 + lane];
            }
        });
    }
#endif
    for (int64_t grp = g0; grp < g1; ++grp) {
        const auto * w = reinterpret_cast<const uint8_t *>(g.a_row(grp * REPACK_ROWS, batch));
        for (int64_t m = 0; m < g.M; m += RT) {
            const int r = (int) (g.M - m < RT ? g.M - m : RT);
            for (int q = 0; q < r; ++q) {
                xrows[q] = qx + (batch * g.M + m + q) * nb;
            }
            TILES<T>[(size_t) r - 1](w, xrows, nb, out);
            for (int q = 0; q < r; ++q) {
                for (int lane = 0; lane < REPACK_ROWS; ++lane) {
                    *g.dst_at(grp * REPACK_ROWS + lane, m + q, batch) = out[q * REPACK_ROWS + lane];
                }
            }
        }
    }
}

template <wsp_ggml_type T>
void compute_as(const ComputeParams & p, const Geometry & g) {
    // phase 1: every b row to 8-bit blocks
    const BlockQ8 * qx = quantize_activations(p, g);

    // phase 2: guided ranges of whole row groups (N is a multiple of REPACK_ROWS)
    const int64_t per = (dot_rows_per_item(g, p.nth) + REPACK_ROWS - 1) / REPACK_ROWS * REPACK_ROWS;
#if WSP_REPACK_PAIRS
    if (g.M >= 2) {
        const PairQ8 * pairs = prepare_pairs<T>(p, g, qx);
        for_claimed_rows(p, g, per, [&](int64_t batch, int64_t i0, int64_t i1) {
            groups_paired<T>(g, batch, i0 / REPACK_ROWS, i1 / REPACK_ROWS, qx, pairs);
        });
        return;
    }
#endif
    for_claimed_rows(p, g, per, [&](int64_t batch, int64_t i0, int64_t i1) {
        groups_of<T>(g, batch, i0 / REPACK_ROWS, i1 / REPACK_ROWS, qx);
    });
}

} // namespace

size_t repack_work_size(const Geometry & g, int nth) {
#if WSP_REPACK_PAIRS
    return q8_activations_work_size(g, nth) + pairs_size(g);
#else
    return q8_activations_work_size(g, nth);
#endif
}

void repack_compute(const ComputeParams & p, const Geometry & g) {
    switch (g.a->type) {
        case WSP_GGML_TYPE_Q4_1: compute_as<WSP_GGML_TYPE_Q4_1>(p, g); return;
        case WSP_GGML_TYPE_Q5_0: compute_as<WSP_GGML_TYPE_Q5_0>(p, g); return;
        case WSP_GGML_TYPE_Q5_1: compute_as<WSP_GGML_TYPE_Q5_1>(p, g); return;
        case WSP_GGML_TYPE_Q8_0: compute_as<WSP_GGML_TYPE_Q8_0>(p, g); return;
        default: compute_as<WSP_GGML_TYPE_Q4_0>(p, g); return; // fits_repack takes no other type
    }
}

} // namespace wsp::cpu::mm
