// The dot_q8 path (few b rows, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 and K-quant weights; q8_blocks.h): phase 1
// quantizes every b row to 8-bit blocks of 32 (q8_act.h), phase 2 takes guided ranges of weight
// rows. With AVX-512 the paired kernels take the node up to some M (mul_mat_q8_pairs.cpp); otherwise
// the general tile here decodes a weight block once for up to RQ b rows; the K-quants have their
// own tiles (mul_mat_kq.cpp).

#include "mul_mat_dot.h"
#include "mul_mat_kq.h"
#include "q8_blocks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

namespace wsp::cpu::mm {

namespace {

using namespace q8;

constexpr int RQ = 8; // b rows per tile: RQ accumulators + the decoded block in 16 registers

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
    const auto &  tiles = tiles_for(g.a->type);
    const int64_t nb    = g.K / QK;
    tile_rows<RQ>(g, batch, i0, i1, qx, nb, [&](const char * w, const BlockQ8 * const * x, int r, float * out) {
        tiles[(size_t) r - 1](w, x, nb, out);
    });
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

// Note [activation quantization]: phase 1 of every node whose b rows go to 8-bit blocks, done by
// all tasks before the weights stream. At M = 1 and K = 5120 the scalar loop (std::fmax does not
// vectorize: it is a libm call per element) took 5.5 us per task, a tenth of the node's 53 us
// of weight reads, with the memory idle meanwhile. The vector loop computes the same values:
// the same maximum of |x| (a NaN is skipped as fmax skips it), the same d and 1 / d, the same
// rounding of x / d in the current mode, the same sum.
void quantize_row_q8(const float * x, BlockQ8 * y, int64_t K) {
    for (int64_t ib = 0; ib < K / QK8; ++ib, x += QK8) {
#if WSP_MM_Q8_SIMD
        const __m256 v[4] = { _mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16),
                              _mm256_loadu_ps(x + 24) };
        const __m256 sign = _mm256_set1_ps(-0.0f);
        __m256       m    = _mm256_setzero_ps();
        for (const __m256 & vi : v) {
            m = _mm256_max_ps(_mm256_andnot_ps(sign, vi), m); // the second operand where the first is NaN
        }
        __m128 h          = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h                 = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h                 = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float  amax = _mm_cvtss_f32(h);
        const float  d    = amax / 127.0f;
        const float  id   = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid  = _mm256_set1_ps(id);
        __m256i      q[4];
        for (int t = 0; t < 4; ++t) {
            q[t] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[t], vid), _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC));
        }
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        // the packs work within 128-bit lanes: bytes come out as 0-3 8-11 16-19 24-27 4-7 12-15 ...
        const __m256i b8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(y[ib].qs),
                            _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4         = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4         = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        y[ib].d    = d;
        y[ib].s    = d * (float) _mm_cvtsi128_si32(s4);
#else
        float amax = 0.0f;
        for (int j = 0; j < QK8; ++j) {
            amax = std::fmax(amax, std::fabs(x[j]));
        }
        const float d    = amax / 127.0f;
        const float id   = d != 0.0f ? 1.0f / d : 0.0f;
        int         isum = 0;
        for (int j = 0; j < QK8; ++j) {
            const int q = (int) std::nearbyint(x[j] * id);
            y[ib].qs[j] = (int8_t) q;
            isum += q;
        }
        y[ib].d = d;
        y[ib].s = d * (float) isum;
#endif
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

const BlockQ8 * quantize_activations(const ComputeParams & p, const Geometry & g) {
    float *   scratch = nullptr;
    BlockQ8 * qx      = carve_activations(p, g, &scratch);
    quantize_b_rows(p, g, QK, qx, scratch, quantize_row_q8);
    p.barrier();
    return qx;
}

size_t dot_q8_work_size(const Geometry & g, int nth) {
    if (is_k_quant(g.a->type) || is_grid_iquant(g.a->type)) {
        return kq_work_size(g, nth);
    }
    return q8_activations_work_size(g, nth) + dot_q8_paired_work_size(g, nth);
}

void dot_q8_compute(const ComputeParams & p, const Geometry & g) {
    if (is_k_quant(g.a->type)) {
        kq_compute(p, g); // activations to Q8_K, not to blocks of 32
        return;
    }
    if (is_grid_iquant(g.a->type)) {
        iq_compute(p, g); // Q8_K too
        return;
    }
    if (dot_q8_paired_compute(p, g)) {
        return;
    }
    // phase 1: every b row to 8-bit blocks
    const BlockQ8 * qx = quantize_activations(p, g);

    // phase 2: guided ranges of the weight rows of all batches, one batch after another
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        if (g.M == 1) {
            stream_rows(g, batch, i0, i1, qx);
        } else {
            dot_rows(g, batch, i0, i1, qx);
        }
    });
}

} // namespace wsp::cpu::mm
