#pragma once

// Typed row loads for flash attention (F32 / F16 / BF16 elements straight into F32 vectors) and
// the P.V register tile that both the block path (V converted to F32 once per block) and the
// few-query path (V read in its storage type) run. Loads of n < LANES elements never touch
// memory past the n-th element, so the last row of a tensor can be read safely.

#include "flash_attn_tile.h"

#include <cstring>

namespace wsp::cpu::fa {

template <wsp_ggml_type T>
struct Rows;

template <>
struct Rows<WSP_GGML_TYPE_F32> {
    static constexpr size_t SIZE = 4;
    static simd::VecF       load(const char * p) { return simd::vload(reinterpret_cast<const float *>(p)); }
    static simd::VecF load_n(const char * p, int n) { return simd::vload_n(reinterpret_cast<const float *>(p), n); }
};

template <>
struct Rows<WSP_GGML_TYPE_F16> {
    static constexpr size_t SIZE = 2;
    static simd::VecF       load(const char * p) {
#if defined(__AVX512F__)
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
#else
        float t[simd::LANES];
        for (int i = 0; i < simd::LANES; ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            t[i] = fp16_to_fp32(h);
        }
        return simd::vload(t);
#endif
    }
    static simd::VecF load_n(const char * p, int n) {
        alignas(64) char buf[simd::LANES * SIZE] = {};
        std::memcpy(buf, p, (size_t) n * SIZE);
        return load(buf);
    }
};

template <>
struct Rows<WSP_GGML_TYPE_BF16> {
    static constexpr size_t SIZE = 2;
    static simd::VecF       load(const char * p) {
#if defined(__AVX512F__)
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
#elif defined(__AVX2__) && defined(__FMA__)
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
#else
        float t[simd::LANES];
        for (int i = 0; i < simd::LANES; ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            t[i] = bf16_to_fp32(h);
        }
        return simd::vload(t);
#endif
    }
    static simd::VecF load_n(const char * p, int n) {
        alignas(64) char buf[simd::LANES * SIZE] = {};
        std::memcpy(buf, p, (size_t) n * SIZE);
        return load(buf);
    }
};

// o[r * ldo + c * LANES ...] = alpha[r] * o[...] + sum_{j < nk} p[r * BLOCK_K + j] * V_j[c * LANES ...]
// for r < R, c < NV; V_j starts at v + j * v_stride. With TAIL the last vector holds `last` lanes
// of V and lanes beyond are accumulated as zeros. (A template flag, not a test in the loop: GCC
// keeps the accumulators in memory when the loop body branches.)
template <class L, int R, int NV, bool TAIL>
void pv_tile(const float * p, const char * v, size_t v_stride, int64_t nk, int last, const float * alpha, float * o,
             int64_t ldo) {
    using namespace simd;
    VecF acc[R][NV];
    for (int r = 0; r < R; ++r) {
        const VecF a = vset1(alpha[r]);
        for (int c = 0; c < NV; ++c) {
            acc[r][c] = vmul(vload(o + r * ldo + c * LANES), a);
        }
    }
    for (int64_t j = 0; j < nk; ++j) {
        const char * row = v + j * v_stride;
        VecF         vv[NV];
        for (int c = 0; c < NV; ++c) {
            const char * e = row + (size_t) c * LANES * L::SIZE;
            vv[c]          = (TAIL && c == NV - 1) ? L::load_n(e, last) : L::load(e);
            keep_in_register(vv[c]); // Note [register operands] in vec.h
        }
        for (int r = 0; r < R; ++r) {
            const VecF pb = vset1(p[r * BLOCK_K + j]);
            for (int c = 0; c < NV; ++c) {
                acc[r][c] = vfma(pb, vv[c], acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < NV; ++c) {
            vstore(o + r * ldo + c * LANES, acc[r][c]);
        }
    }
}

#if defined(__AVX512F__)
constexpr int PV_COLS = 4; // 32 zmm: 16 accumulators, 4 value vectors, broadcasts
#else
constexpr int PV_COLS = 2; // 16 ymm: 8 accumulators, 2 value vectors, broadcasts
#endif
constexpr int PV_ROWS = 4;

// pv_tile for rows (1..PV_ROWS) and cols (1..PV_COLS) chosen at run time
template <class L, int R = PV_ROWS, int NV = PV_COLS>
void pv_tile_any(int rows, int cols, const float * p, const char * v, size_t v_stride, int64_t nk, int last,
                 const float * alpha, float * o, int64_t ldo) {
    if constexpr (R > 1) {
        if (rows < R) {
            pv_tile_any<L, R - 1, NV>(rows, cols, p, v, v_stride, nk, last, alpha, o, ldo);
            return;
        }
    }
    if constexpr (NV > 1) {
        if (cols < NV) {
            pv_tile_any<L, R, NV - 1>(rows, cols, p, v, v_stride, nk, last, alpha, o, ldo);
            return;
        }
    }
    if (last < simd::LANES) {
        pv_tile<L, R, NV, true>(p, v, v_stride, nk, last, alpha, o, ldo);
    } else {
        pv_tile<L, R, NV, false>(p, v, v_stride, nk, last, alpha, o, ldo);
    }
}

// P.V over a whole block: nq queries, Dv columns of V rows at v + j * v_stride; o rows ldo apart
template <class L>
void pv_rows(const float * p, int64_t nq, const char * v, size_t v_stride, int64_t nk, int64_t Dv, const float * alpha,
             float * o, int64_t ldo) {
    const int64_t nvec = (Dv + simd::LANES - 1) / simd::LANES;
    const int     tail = (int) (Dv - (nvec - 1) * simd::LANES);
    for (int64_t c0 = 0; c0 < nvec; c0 += PV_COLS) {
        const int cols = (int) (nvec - c0 < PV_COLS ? nvec - c0 : PV_COLS);
        const int last = c0 + cols == nvec ? tail : simd::LANES;
        for (int64_t i0 = 0; i0 < nq; i0 += PV_ROWS) {
            const int rows = (int) (nq - i0 < PV_ROWS ? nq - i0 : PV_ROWS);
            pv_tile_any<L>(rows, cols, p + i0 * BLOCK_K, v + (size_t) c0 * simd::LANES * L::SIZE, v_stride, nk, last,
                           alpha + i0, o + i0 * ldo + c0 * simd::LANES, ldo);
        }
    }
}

} // namespace wsp::cpu::fa
