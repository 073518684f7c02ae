// The dot_float path (few b rows with float weights, or narrow weights of any type, converted
// row by row): b rows are converted to F32 once per node (phase 1), then each item dots WB weight
// rows with up to RB b rows at a time, reading each weight vector once per RB rows. An output's
// accumulators depend on the tile's b rows alone (accumulators_per_output), so its value does not
// depend on how weight rows are grouped or split.

#include "mul_mat_dot.h"

#include "vec.h"

#include <array>
#include <utility>

namespace wsp::cpu::mm {

namespace {

constexpr int RB = 4; // b rows per tile
#if defined(__AVX512F__)
constexpr int WB = 4; // weight rows per tile: WB x RB accumulators of the 32 registers
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int WB = 2; // 8 of the 16 registers
#else
constexpr int WB = 2;
#endif

struct LoadF32 {
    using T = float;
    static float scalar(const T * p, int64_t k) { return p[k]; }
#if defined(__AVX512F__)
    static __m512 v16(const T * p, int64_t k) {
        return _mm512_loadu_ps(p + k);
    }
#elif defined(__AVX2__) && defined(__FMA__)
    static __m256 v8(const T * p, int64_t k) {
        return _mm256_loadu_ps(p + k);
    }
#endif
};

struct LoadF16 {
    using T = uint16_t;
    static float scalar(const T * p, int64_t k) { return fp16_to_fp32(p[k]); }
#if defined(__AVX512F__)
    static __m512 v16(const T * p, int64_t k) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + k)));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    static __m256 v8(const T * p, int64_t k) {
#    if defined(__F16C__)
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + k)));
#    else
        alignas(32) float t[8];
        for (int i = 0; i < 8; ++i) {
            t[i] = fp16_to_fp32(p[k + i]);
        }
        return _mm256_load_ps(t);
#    endif
    }
#endif
};

struct LoadBF16 {
    using T = uint16_t;
    static float scalar(const T * p, int64_t k) { return bf16_to_fp32(p[k]); }
#if defined(__AVX512F__)
    static __m512 v16(const T * p, int64_t k) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + k)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    static __m256 v8(const T * p, int64_t k) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
#endif
};

// Accumulators per output: a tile of few b rows would make every FMA wait for the previous one
// into the same register (latency 4-5 cycles, two FMA ports), so the outputs of tiles with R <= 2
// b rows keep U = 2 accumulators, for even and odd vectors of k, summed in that order at the end.
// U depends on R alone, never on W: a weight row gets the same rounding in a tile of one weight
// row and in a tile of WB, so a weight split by rows over devices computes as the whole.
template <int R>
constexpr int accumulators_per_output() {
    return R <= 2 ? 2 : 1;
}

// out[i * RB + r] = sum_k w_i[k] * x_r[k] for i < W, r < R; x_r = x + r * K. ahead > 0: the
// weights ahead elements past each row are read next (the next tile's rows) and are prefetched.
template <class L, int W, int R>
void dot_tile(const void * const * wrows, const float * x, int64_t K, int64_t ahead, float * out) {
    constexpr int         U = accumulators_per_output<R>();
    const typename L::T * w[W];
    for (int i = 0; i < W; ++i) {
        w[i] = static_cast<const typename L::T *>(wrows[i]);
    }
    float   sum[W][R];
    int64_t k = 0;
#if defined(__AVX512F__)
    constexpr int VL = 16;
    using V          = __m512;
    const auto load  = [](const typename L::T * p, int64_t at) { return L::v16(p, at); };
    const auto loadx = [](const float * p) { return _mm512_loadu_ps(p); };
    const auto fma   = [](V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); };
    const auto add   = [](V a, V b) { return _mm512_add_ps(a, b); };
    const auto hsum  = [](V a) { return hsum512(a); };
    const auto zero  = [] { return _mm512_setzero_ps(); };
#    define WSP_DOT_TILE_SIMD 1
#elif defined(__AVX2__) && defined(__FMA__)
    constexpr int VL = 8;
    using V          = __m256;
    const auto load  = [](const typename L::T * p, int64_t at) { return L::v8(p, at); };
    const auto loadx = [](const float * p) { return _mm256_loadu_ps(p); };
    const auto fma   = [](V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); };
    const auto add   = [](V a, V b) { return _mm256_add_ps(a, b); };
    const auto hsum  = [](V a) { return hsum256(a); };
    const auto zero  = [] { return _mm256_setzero_ps(); };
#    define WSP_DOT_TILE_SIMD 1
#endif
#if defined(WSP_DOT_TILE_SIMD)
#    undef WSP_DOT_TILE_SIMD
    V           acc[U][W][R];
#    pragma GCC unroll 32
    for (int i = 0; i < U * W * R; ++i) {
        acc[i / (W * R)][i / R % W][i % R] = zero();
    }
    // U vectors of k per step, each into its own accumulators
    for (; k + U * VL <= K; k += U * VL) {
        // Note [weight prefetch]: each of the W rows is a stream of its own; a DRAM-resident weight
        // read as W short streams at once trains the hardware prefetcher too late, so the rows of
        // the next tile are requested while this one computes
        if (ahead > 0) {
#    pragma GCC unroll 4
            for (int i = 0; i < W; ++i) {
                _mm_prefetch(reinterpret_cast<const char *>(w[i] + ahead + k), _MM_HINT_T0);
            }
        }
#    pragma GCC unroll 2
        for (int u = 0; u < U; ++u) {
            V wv[W];
#    pragma GCC unroll 4
            for (int i = 0; i < W; ++i) {
                wv[i] = load(w[i], k + u * VL);
            }
#    pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const V xv = loadx(x + r * K + k + u * VL);
#    pragma GCC unroll 4
                for (int i = 0; i < W; ++i) {
                    acc[u][i][r] = fma(wv[i], xv, acc[u][i][r]);
                }
            }
        }
    }
    // a last whole vector goes to the first accumulators
    for (; k + VL <= K; k += VL) {
        V wv[W];
        for (int i = 0; i < W; ++i) {
            wv[i] = load(w[i], k);
        }
        for (int r = 0; r < R; ++r) {
            const V xv = loadx(x + r * K + k);
            for (int i = 0; i < W; ++i) {
                acc[0][i][r] = fma(wv[i], xv, acc[0][i][r]);
            }
        }
    }
    for (int i = 0; i < W; ++i) {
        for (int r = 0; r < R; ++r) {
            V a = acc[0][i][r];
            for (int u = 1; u < U; ++u) {
                a = add(a, acc[u][i][r]);
            }
            sum[i][r] = hsum(a);
        }
    }
#else
    (void) U;
    (void) ahead;
    for (int i = 0; i < W * R; ++i) {
        sum[i / R][i % R] = 0.0f;
    }
#endif
    for (; k < K; ++k) {
        for (int i = 0; i < W; ++i) {
            const float wk = L::scalar(w[i], k);
            for (int r = 0; r < R; ++r) {
                sum[i][r] += wk * x[r * K + k];
            }
        }
    }
    for (int i = 0; i < W; ++i) {
        for (int r = 0; r < R; ++r) {
            out[i * RB + r] = sum[i][r];
        }
    }
}

using TileFn = void (*)(const void * const *, const float *, int64_t, int64_t, float *);

// [0][R - 1]: one weight row, [1][R - 1]: WB weight rows
template <class L, size_t... I>
constexpr std::array<std::array<TileFn, RB>, 2> make_tiles(std::index_sequence<I...>) {
    return { { { { &dot_tile<L, 1, (int) I + 1>... } }, { { &dot_tile<L, WB, (int) I + 1>... } } } };
}

const std::array<std::array<TileFn, RB>, 2> & tiles_for(wsp_ggml_type t) {
    static constexpr auto f32  = make_tiles<LoadF32>(std::make_index_sequence<RB>());
    static constexpr auto f16  = make_tiles<LoadF16>(std::make_index_sequence<RB>());
    static constexpr auto bf16 = make_tiles<LoadBF16>(std::make_index_sequence<RB>());
    return t == WSP_GGML_TYPE_F16 ? f16 : t == WSP_GGML_TYPE_BF16 ? bf16 : f32;
}

// rows that kernels can read in place: a contiguous float type
bool reads_in_place(const Geometry & g) {
    return is_float_type(g.a->type) && g.a_rows_contiguous();
}

// Note [one-row stream]: with one b row a tile reuses nothing across its weight rows, and WB
// rows read side by side are WB short streams (a K = 512 F16 row is 16 cache lines) that the
// hardware prefetcher does not follow. Read one row after another instead: the weights are then
// one sequential stream per task. Measured on this machine (2 threads, 256 MiB of F16 weights,
// K = 512, the variants interleaved in one process, median GB/s): 4 rows side by side 19.6
// (29.1 with software prefetch), one row at a time 35.7 (35.2 with prefetch), the bandwidth
// probe about 38. Results are the same either way: an output's accumulators depend on the b rows
// alone (accumulators_per_output).
int weight_rows_per_tile(const Geometry & g, int64_t rows_left) {
    return g.M > 1 && rows_left >= WB ? WB : 1;
}

// dots weight rows [i0, i1) of a batch with all its b rows
void dot_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const float * xs, float * scratch) {
    const bool    in_place = reads_in_place(g);
    const auto &  tiles    = tiles_for(in_place ? g.a->type : WSP_GGML_TYPE_F32);
    const float * xb       = xs + batch * g.M * g.K;
    float         out[WB * RB];
    // in place, the next tile's rows lie w row strides on (a prefetch never faults, even past the end)
    const int64_t stride = in_place ? (int64_t) (g.a->nb[1] / wsp_ggml_type_size(g.a->type)) : 0;
    // the batch's first weight row and dst row: rows of a short K cost little more than this
    // addressing, so it is not redone per row
    const char * a0   = g.a_row(0, batch);
    char *       d0   = g.dst_row(0, batch);
    const size_t a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0], d_nb1 = g.dst->nb[1];
    for (int64_t i = i0; i < i1;) {
        const int    w = weight_rows_per_tile(g, i1 - i);
        const void * rows[WB];
        for (int j = 0; j < w; ++j) {
            const char * src = a0 + (i + j) * a_nb;
            if (in_place) {
                rows[j] = src;
            } else {
                // quantized rows are whole blocks whatever nb[0] says (one-block rows may carry any)
                float * t = scratch + j * g.K;
                if (is_float_type(g.a->type)) {
                    strided_row_to_f32(g.a->type, src, g.a->nb[0], t, g.K);
                } else {
                    row_to_f32(g.a->type, src, t, g.K);
                }
                rows[j] = t;
            }
        }
        for (int64_t m = 0; m < g.M; m += RB) {
            const int r = (int) (g.M - m < RB ? g.M - m : RB);
            // the first pass over these rows brings them in; later passes find them in the cache
            tiles[w == WB ? 1 : 0][r - 1](rows, xb + m * g.K, g.K, m == 0 ? 2 * w * stride : 0, out);
            for (int j = 0; j < w; ++j) {
                for (int q = 0; q < r; ++q) {
                    *reinterpret_cast<float *>(d0 + (m + q) * d_nb1 + (i + j) * d_nb0) = out[j * RB + q];
                }
            }
        }
        i += w;
    }
}

// Note [stream prefetch]: cross attention's K = 64 rows at a 1.5 KiB stride, 12 layers of whisper
// small: 0.92 ms with the prefetch two rows ahead, 0.62-0.67 with 4 KiB of rows ahead (8 and 16
// KiB: 0.72); the contiguous decoder shapes (K = 512, 768, 3072) take 4 KiB as well as before.
constexpr int64_t PREFETCH_BYTES = 4096;

// One b row against weight rows [i0, i1) read in place, one row after another (Note [one-row
// stream]), calling the tile directly: for a short K (attention's K = 64 rows are two cache
// lines) a call through the tile table per row would cost as much as the row.
template <class L>
void stream_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const float * x) {
    const char *  a0   = g.a_row(0, batch);
    char *        d0   = g.dst_row(0, batch);
    const size_t  a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0];
    const int64_t stride = (int64_t) (a_nb / sizeof(typename L::T));
    // prefetch rows far enough ahead that the request covers memory latency: PREFETCH_BYTES of
    // rows, at least two rows (attention's K = 64 rows are 128 bytes; two rows ahead was too close)
    const int64_t row_bytes = g.K * (int64_t) sizeof(typename L::T);
    const int64_t ahead     = (PREFETCH_BYTES + row_bytes - 1) / row_bytes;
    float         out[2 * RB];
    // Note [two streams] (mul_mat_repack.cpp): rows of a KiB and more are read as two streams, row
    // i and row i + half of the range side by side; each row sums as it would alone (the
    // accumulators depend on the b rows only). Attention's short strided rows keep one stream.
    if (row_bytes >= 1024) {
        i0 = two_streams(i0, i1, [&](int64_t i, int64_t j) {
            const void * rows[2] = { a0 + i * a_nb, a0 + j * a_nb };
            dot_tile<L, 2, 1>(rows, x, g.K, (ahead > 2 ? ahead : 2) * stride, out);
            *reinterpret_cast<float *>(d0 + i * d_nb0) = out[0];
            *reinterpret_cast<float *>(d0 + j * d_nb0) = out[RB];
        });
    }
    for (int64_t i = i0; i < i1; ++i) {
        const void * row = a0 + i * a_nb;
        dot_tile<L, 1, 1>(&row, x, g.K, (ahead > 2 ? ahead : 2) * stride, out);
        *reinterpret_cast<float *>(d0 + i * d_nb0) = out[0];
    }
}

void stream_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const float * x) {
    switch (g.a->type) {
        case WSP_GGML_TYPE_F16: stream_rows<LoadF16>(g, batch, i0, i1, x); break;
        case WSP_GGML_TYPE_BF16: stream_rows<LoadBF16>(g, batch, i0, i1, x); break;
        default: stream_rows<LoadF32>(g, batch, i0, i1, x); break;
    }
}

// Note [heads in one row]: whisper's cross attention reads K as a view [64, 1500, heads] of the cache
// [768, 1500]: row i of head h is the h-th 128 bytes of cache row i, so head after head (batch
// after batch) sweeps the cache once per head, 128 bytes of every 1.5 KiB. When a's batches lie
// within one row (nb[2] * ne[2] <= nb[1]) and b holds one row per batch, each task takes cache
// rows instead and dots every head of a row before the next: one sequential stream. Each output
// is the same dot as batch-major order computes (accumulators_per_output).
bool heads_in_one_row(const Geometry & g) {
    const wsp_ggml_tensor * a = g.a;
    return g.M == 1 && g.n_batch > 1 && g.ne13 == 1 && g.r2 == 1 && a->ne[3] == 1 && a->nb[2] * a->ne[2] <= a->nb[1];
}

// rows [i0, i1) of every batch, row-major (Note [heads in one row])
template <class L>
void stream_heads(const Geometry & g, int64_t i0, int64_t i1, const float * xs) {
    const char *  a0    = static_cast<const char *>(g.a->data);
    char *        d0    = static_cast<char *>(g.dst->data);
    const size_t  a_nb1 = g.a->nb[1], a_nb2 = g.a->nb[2], d_nb0 = g.dst->nb[0], d_nb2 = g.dst->nb[2];
    const int64_t ahead = PREFETCH_BYTES / (int64_t) sizeof(typename L::T);
    float         out[RB];
    for (int64_t i = i0; i < i1; ++i) {
        for (int64_t h = 0; h < g.n_batch; ++h) {
            const void * row = a0 + i * a_nb1 + h * a_nb2;
            dot_tile<L, 1, 1>(&row, xs + h * g.K, g.K, ahead, out);
            *reinterpret_cast<float *>(d0 + h * d_nb2 + i * d_nb0) = out[0];
        }
    }
}

void stream_heads(const Geometry & g, int64_t i0, int64_t i1, const float * xs) {
    switch (g.a->type) {
        case WSP_GGML_TYPE_F16: stream_heads<LoadF16>(g, i0, i1, xs); break;
        case WSP_GGML_TYPE_BF16: stream_heads<LoadBF16>(g, i0, i1, xs); break;
        default: stream_heads<LoadF32>(g, i0, i1, xs); break;
    }
}

// b as contiguous F32 rows, batch after batch: then phase 1 has nothing to do
bool b_is_packed_f32(const Geometry & g) {
    return g.b->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(g.b);
}

} // namespace

// Note [one claim per task]: each claimed range starts two cold streams (Note [two streams]), whose
// first lines are read on demand before the prefetch runs ahead, and guided claims make about
// four ranges per task. A decoder step is a chain of small weights at one b row (whisper small:
// 72 of 768 x 768 per token), so that start is paid many times per weight: 384 x 384 F16 read at
// 0.79 of the bandwidth probe, Q5_0 768 x 768 at 0.72. At one b row a weight of up to 8 MiB is
// therefore claimed in nth ranges per batch, one per task (a task that finds the other's range
// untaken still takes it). Interleaved, 8 rounds, median fraction of the probe: F16 384 x 384
// 0.79 -> 0.89, 512 x 512 0.88 -> 0.97; Q5_0 768 x 768 0.72 -> 0.88, Q4_0 0.71 -> 0.82, Q8_0
// 384 x 384 0.65 -> 0.74; 768 x 3072 and larger (F16, Q8_0) the same within noise (memory-bound).
// Larger weights keep guided claims, which let a task that started late catch up.
constexpr size_t ONE_CLAIM_BYTES = 8u << 20;

int64_t dot_rows_per_item(const Geometry & g, int nth) {
    if (g.M == 1 && wsp_ggml_nbytes(g.a) <= ONE_CLAIM_BYTES) {
        const int64_t rows = (g.N + nth - 1) / nth;
        return (rows + 3) / 4 * 4;
    }
    int64_t rows = g.N / (8 * (int64_t) nth);
    rows         = rows < 8 ? 8 : rows > 64 ? 64 : rows;
    return (rows + 3) / 4 * 4;
}

size_t dot_float_work_size(const Geometry & g, int nth) {
    const size_t xs = (size_t) (g.n_batch * g.M * g.K) * sizeof(float);
    return ALIGN + align_up(xs) + (size_t) nth * align_up((size_t) WB * g.K * sizeof(float));
}

void dot_float_compute(const ComputeParams & p, const Geometry & g) {
    WorkCarver carve(p.wdata);
    float *    xs      = carve.take<float>((size_t) (g.n_batch * g.M * g.K));
    float *    scratch = nullptr;
    for (int t = 0; t <= p.ith; ++t) {
        scratch = carve.take<float>((size_t) WB * g.K);
    }

    // phase 1: every b row to contiguous F32, unless it is already
    if (b_is_packed_f32(g)) {
        xs = static_cast<float *>(g.b->data);
    } else {
        int64_t r0, r1;
        split_range(g.n_batch * g.M, p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            strided_row_to_f32(g.b->type, g.b_row(r % g.M, r / g.M), g.b->nb[0], xs + r * g.K, g.K);
        }
        p.barrier();
    }

    // phase 2: guided ranges of the weight rows of all batches, one batch after another
    const bool stream = g.M == 1 && reads_in_place(g);
    if (stream && heads_in_one_row(g)) {
        int64_t begin, end;
        while (p.claim(g.N, dot_rows_per_item(g, p.nth), begin, end)) {
            stream_heads(g, begin, end, xs);
        }
        return;
    }
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        if (stream) {
            stream_rows(g, batch, i0, i1, xs + batch * g.K);
        } else {
            dot_rows(g, batch, i0, i1, xs, scratch);
        }
    });
}

} // namespace wsp::cpu::mm
