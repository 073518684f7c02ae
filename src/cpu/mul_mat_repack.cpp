// MUL_MAT with a weight in the Q4_0x8 layout (Note [Q4_0x8 repack], repack.h), at every M. Phase 1
// quantizes the b rows to 8-bit blocks (q8_act.h); phase 2 takes items of row groups. A group's
// block decodes once into 8 vectors of nibbles (lane = row, 4 columns per 32-bit lane) and serves
// up to 8 b rows; per b row the 32 columns are 8 multiply-adds of those vectors with one 4-byte
// broadcast of the activations each, then w = d_w * (u - 8) gives
//   sum = d_w * (d_x * sum(u * q) - 8 * s_x)     (s_x = d_x * sum(q), from phase 1)
// for the group's 8 rows in one vector.

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

constexpr int    RT          = 8;   // b rows per tile
constexpr size_t GROUP_BLOCK = 144; // bytes of one block of a group
// bytes ahead of the block being read, each of its three cache lines asked for: at M = 1 / 4 / 16
// (2 threads, K = 1280, N = 5120, quiet machine, GFLOP/s) one line 1 KiB ahead gave 100 / 280 / 400,
// 4 KiB ahead 110 / 280 / 405, all three lines 4 KiB ahead 115 / 355 / 475 (2 or 6 KiB: the same)
constexpr int PREFETCH = 4096;

#if WSP_REPACK_SIMD
inline __m256i bcast4(const int8_t * q) {
    int32_t v;
    std::memcpy(&v, q, sizeof v);
    return _mm256_set1_epi32(v);
}

// per lane (row): sum over the block's 32 columns of u * q
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
    // u <= 15, |q| <= 127: a pair sum is at most 3810 in size, 8 of them 30480, within int16
    __m256i p = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[t], bcast4(q + 4 * t)));
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[t], bcast4(q + 16 + 4 * t)));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#    endif
}
#endif

#if WSP_REPACK_SIMD
// one block of a group: its 8 scales, and its nibbles as 8 vectors (lane = row); the block's
// three cache lines are asked for PREFETCH bytes ahead (Note [weight prefetch], mul_mat_dot.cpp)
inline __m256 decode(const uint8_t * blk, __m256i * lo, __m256i * hi) {
    const char * p = reinterpret_cast<const char *>(blk) + PREFETCH;
    _mm_prefetch(p, _MM_HINT_T0);
    _mm_prefetch(p + 64, _MM_HINT_T0);
    _mm_prefetch(p + 128, _MM_HINT_T0);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int t = 0; t < 4; ++t) {
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 16 + 32 * t));
        lo[t]           = _mm256_and_si256(c, m4);
        hi[t]           = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
    }
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk)));
}

// acc += the block's contribution for one b row: d_w * (d_x * sum(u * q) - 8 * s_x)
inline __m256 accumulate(__m256 acc, __m256 dw, const __m256i * lo, const __m256i * hi, const BlockQ8 & xb) {
    const __m256 s = _mm256_cvtepi32_ps(block_dot(lo, hi, xb.qs));
    const __m256 v = _mm256_fmadd_ps(s, _mm256_set1_ps(xb.d), _mm256_set1_ps(-8.0f * xb.s));
    return _mm256_fmadd_ps(v, dw, acc);
}
#endif

// out[8 r + lane] = row (8 g + lane) of the group dotted with b row x[r], r < R
template <int R>
void group_tile(const uint8_t * grp, const BlockQ8 * const * x, int64_t nb, float * out) {
#if WSP_REPACK_SIMD
    __m256 acc[R];
    for (int r = 0; r < R; ++r) {
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b, grp += GROUP_BLOCK) {
        __m256i      lo[4], hi[4];
        const __m256 dw = decode(grp, lo, hi);
#    pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            acc[r] = accumulate(acc[r], dw, lo, hi, x[r][b]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(out + 8 * r, acc[r]);
    }
#else
    float acc[R][REPACK_ROWS] = {};
    for (int64_t b = 0; b < nb; ++b, grp += GROUP_BLOCK) {
        for (int lane = 0; lane < REPACK_ROWS; ++lane) {
            uint16_t h;
            std::memcpy(&h, grp + 2 * lane, 2);
            const float dw = fp16_to_fp32(h);
            for (int r = 0; r < R; ++r) {
                const BlockQ8 & xb  = x[r][b];
                int             sum = 0;
                for (int t = 0; t < 4; ++t) {
                    for (int i = 0; i < 4; ++i) {
                        const uint8_t byte = grp[16 + 32 * t + 4 * lane + i];
                        sum += (byte & 0x0f) * xb.qs[4 * t + i] + (byte >> 4) * xb.qs[16 + 4 * t + i];
                    }
                }
                acc[r][lane] += dw * (xb.d * (float) sum - 8.0f * xb.s);
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

using TileFn = void (*)(const uint8_t *, const BlockQ8 * const *, int64_t, float *);

template <size_t... I>
constexpr std::array<TileFn, RT> make_tiles(std::index_sequence<I...>) {
    return { { &group_tile<(int) I + 1>... } };
}

constexpr std::array<TileFn, RT> TILES = make_tiles(std::make_index_sequence<RT>());

void groups_of(const Geometry & g, int64_t batch, int64_t g0, int64_t g1, const BlockQ8 * qx) {
    const int64_t   nb = g.K / QK8;
    const BlockQ8 * xrows[RT];
    float           out[RT * REPACK_ROWS];
    for (int64_t grp = g0; grp < g1; ++grp) {
        const auto * w = reinterpret_cast<const uint8_t *>(g.a_row(grp * REPACK_ROWS, batch));
        for (int64_t m = 0; m < g.M; m += RT) {
            const int r = (int) (g.M - m < RT ? g.M - m : RT);
            for (int q = 0; q < r; ++q) {
                xrows[q] = qx + (batch * g.M + m + q) * nb;
            }
            TILES[(size_t) r - 1](w, xrows, nb, out);
            for (int q = 0; q < r; ++q) {
                for (int lane = 0; lane < REPACK_ROWS; ++lane) {
                    *g.dst_at(grp * REPACK_ROWS + lane, m + q, batch) = out[q * REPACK_ROWS + lane];
                }
            }
        }
    }
}

} // namespace

size_t repack_work_size(const Geometry & g, int nth) {
    return q8_activations_work_size(g, nth);
}

void repack_compute(const ComputeParams & p, const Geometry & g) {
    // phase 1: every b row to 8-bit blocks
    const BlockQ8 * qx = quantize_activations(p, g);

    // phase 2: guided ranges of whole row groups (N is a multiple of REPACK_ROWS)
    const int64_t per = (dot_rows_per_item(g, p.nth) + REPACK_ROWS - 1) / REPACK_ROWS * REPACK_ROWS;
    for_claimed_rows(p, g, per, [&](int64_t batch, int64_t i0, int64_t i1) {
        groups_of(g, batch, i0 / REPACK_ROWS, i1 / REPACK_ROWS, qx);
    });
}

} // namespace wsp::cpu::mm
