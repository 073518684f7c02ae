// The paired kernels of the dot_q8 path (Note [Q8_0 pairs], Note [nibble pairs]): with AVX-512
// two weight blocks share each instruction, against b rows each task lays out per 32-bit lane;
// Note [paired rows by M] (mul_mat_path.h) says up to which M they take a node.

#include "mul_mat_dot.h"
#include "mul_mat_path.h"
#include "q8_blocks.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace wsp::cpu::mm {

namespace {

using namespace q8;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && WSP_MM_Q8_SIMD
#    define WSP_MM_Q8_0_PAIRS 1

// Note [Q8_0 pairs]: at one b row a Q8_0 weight is read once per node and the 256-bit kernel is
// bound by its instructions (about 13 a block: two sign flips, a scalar scale). With AVX-512 two
// blocks share each instruction: weight bytes w become unsigned as w + 128 (one xor), and the
// dot product starts from a per-lane correction -128 * (the lane's four activation bytes), so
// each 32-bit lane holds exactly the integer the 256-bit kernel's lane holds; the scales
// d_w * d_x are formed per lane with the same single multiply. Low half = even block, high half
// = odd block, as that kernel's two accumulators: the result is bit for bit the same. Weights in
// CPU_REPACK (as whisper.cpp places them) take the 8-row layout instead (Note [Q8_0x8], repack.h);
// these kernels serve Q8_0 in plain buffers (the CPU buffer, split slices).
struct PairedRow {
    const int8_t *  q;    // K activation bytes, contiguous
    const int32_t * corr; // 8 per block: -o * (the lane's four bytes), for weights u - o
    const float *   sx;   // 8 per block: d_x * (the lane's four bytes), for weights with a min
    const float *   dx;   // 8 per block: the block's d_x, repeated
};

// A b row in the lanes' order takes 3 K bytes: the bytes, then corr (o != 0) or sx (o == 0),
// then dx. Each task writes the rows of a batch from its 8-bit blocks (write_paired_rows).
PairedRow paired_row(const char * mem, int64_t nb) {
    const auto * q     = reinterpret_cast<const int8_t *>(mem);
    const char * lanes = mem + nb * QK;
    return { q, reinterpret_cast<const int32_t *>(lanes), reinterpret_cast<const float *>(lanes),
             reinterpret_cast<const float *>(lanes + nb * 8 * sizeof(float)) };
}

// block b of the paired row at mem (nb blocks) from its 8-bit block x
void write_paired(const BlockQ8 & x, int64_t b, int64_t nb, char * mem, int o) {
    char * lanes = mem + nb * QK;
    auto * corr  = reinterpret_cast<int32_t *>(lanes);
    auto * sx    = reinterpret_cast<float *>(lanes);
    auto * dx    = reinterpret_cast<float *>(lanes + nb * 8 * sizeof(float));
    std::memcpy(mem + b * QK, x.qs, QK);
    for (int j = 0; j < 8; ++j) {
        const int8_t * l   = x.qs + 4 * j;
        const int32_t  sum = (int32_t) l[0] + l[1] + l[2] + l[3];
        if (o != 0) {
            corr[b * 8 + j] = -o * sum;
        } else {
            sx[b * 8 + j] = x.d * (float) sum;
        }
        dx[b * 8 + j] = x.d;
    }
}

// acc += blocks ib and ib + 1 of the row w against the paired row x
inline __m512 q8_0_two_blocks(const block_q8_0 * w, int64_t ib, const PairedRow & x, __m512 acc) {
    const __m512i flip = _mm512_set1_epi8((char) 0x80);
    _mm_prefetch(reinterpret_cast<const char *>(w + ib) + PREFETCH, _MM_HINT_T0);
    const __m512i wv =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[ib].qs))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[ib + 1].qs)), 1);
    const __m512i s  = _mm512_dpbusd_epi32(_mm512_loadu_si512(x.corr + 8 * ib), _mm512_xor_si512(wv, flip),
                                           _mm512_loadu_si512(x.q + QK * ib));
    const __m256i dh = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short) w[ib].d)),
                                               _mm_set1_epi16((short) w[ib + 1].d), 1);
    const __m512  sc = _mm512_mul_ps(_mm512_cvtph_ps(dh), _mm512_loadu_ps(x.dx + 8 * ib));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc);
}

// the row's sum from its accumulator, an odd last block joining the even ones as in q8_tile
inline float q8_0_row_sum(const block_q8_0 * w, __m512 acc, const BlockQ8 * xb, int64_t nb) {
    __m256 even = _mm512_castps512_ps256(acc);
    __m256 odd  = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    if (nb % 2 == 1) {
        float bias = 0.0f;
        q8_block<Q8_0, 1>(w[nb - 1], &xb, nb - 1, &even, &bias);
    }
    return hsum256(_mm256_add_ps(even, odd)) + (0.0f + 0.0f); // + the two (zero) biases, as q8_tile
}

float q8_0_row_pairs(const block_q8_0 * w, const PairedRow & x, const BlockQ8 * xb, int64_t nb) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t ib = 0; ib + 2 <= nb; ib += 2) {
        acc = q8_0_two_blocks(w, ib, x, acc);
    }
    return q8_0_row_sum(w, acc, xb, nb);
}

// two rows side by side, two streams (Note [two streams], mul_mat_repack.cpp); each row's sum is
// q8_0_row_pairs's, bit for bit
void q8_0_two_rows(const block_q8_0 * wa, const block_q8_0 * wb, const PairedRow & x, const BlockQ8 * xb, int64_t nb,
                   float * oa, float * ob) {
    __m512 acc_a = _mm512_setzero_ps(), acc_b = _mm512_setzero_ps();
    for (int64_t ib = 0; ib + 2 <= nb; ib += 2) {
        acc_a = q8_0_two_blocks(wa, ib, x, acc_a);
        acc_b = q8_0_two_blocks(wb, ib, x, acc_b);
    }
    *oa = q8_0_row_sum(wa, acc_a, xb, nb);
    *ob = q8_0_row_sum(wb, acc_b, xb, nb);
}

#    if defined(__AVX512VBMI__)
#        define WSP_MM_NIBBLE_PAIRS 1

// Note [nibble pairs]: the 4- and 5-bit types at one b row, two blocks an instruction as in
// Note [Q8_0 pairs]. One masked load takes both blocks whole (36 to 48 bytes; the mask keeps it
// inside the row), and byte permutes (VBMI) spread it: the nibbles to the 64 lanes of the two
// blocks, the fifth bits (Q5) to a mask, d (and m) to the 16 float lanes. The integer sum per
// lane starts from -o * (the lane's activations) (Q4_0: o = 8, Q5_0: o = 16), so it is exactly
// sum((u - o) * q); the mins of Q4_1 / Q5_1 add m * d_x * sum(q) per lane. About 9 instructions
// a block against 17 for the 256-bit tile. Its sums round in another order than the tile's: a row
// comes out bit for bit the same in every batch these kernels take (Note [paired rows by M]),
// and agrees to float rounding with the tile's result for the same row in a larger batch.
template <class B>
struct NibbleLayout; // the byte offsets of d, m, qh (-1: none), qs and o

template <>
struct NibbleLayout<block_q4_0> {
    static constexpr int m = -1, qh = -1, qs = offsetof(block_q4_0, qs), o = 8;
};

template <>
struct NibbleLayout<block_q4_1> {
    static constexpr int m = offsetof(block_q4_1, m), qh = -1, qs = offsetof(block_q4_1, qs), o = 0;
};

template <>
struct NibbleLayout<block_q5_0> {
    static constexpr int m = -1, qh = offsetof(block_q5_0, qh), qs = offsetof(block_q5_0, qs), o = 16;
};

template <>
struct NibbleLayout<block_q5_1> {
    static constexpr int m = offsetof(block_q5_1, m), qh = offsetof(block_q5_1, qh), qs = offsetof(block_q5_1, qs),
                         o = 0;
};

// the permutes' indices into the two blocks' bytes, built once per block type
struct NibbleTables {
    alignas(64) uint8_t nib[64];    // byte j (block j / 32, element t = j % 32) <- qs[t % 16]
    alignas(64) uint16_t shift[32]; // 4 on the words of the high nibbles (t >= 16)
    alignas(64) uint8_t qh[64];     // byte j <- byte t / 8 of the block's qh
    alignas(64) uint8_t bit[64];    // 1 << (t % 8)
    alignas(64) uint16_t dm[32];    // word i < 16: d of block i / 8; word i >= 16: m of block (i - 16) / 8
};

template <class B>
const NibbleTables & nibble_tables() {
    using L                     = NibbleLayout<B>;
    static const NibbleTables t = [] {
        NibbleTables r{};
        for (int j = 0; j < 64; ++j) {
            const int b = j / 32, e = j % 32, base = b * (int) sizeof(B);
            r.nib[j] = (uint8_t) (base + L::qs + e % 16);
            r.qh[j]  = (uint8_t) (base + (L::qh < 0 ? 0 : L::qh) + e / 8);
            r.bit[j] = (uint8_t) (1u << (e % 8));
        }
        for (int i = 0; i < 32; ++i) {
            r.shift[i]    = (uint16_t) ((i / 8) % 2 == 1 ? 4 : 0);
            const int blk = (i % 16) / 8, at = i < 16 ? 0 : (L::m < 0 ? 0 : L::m);
            r.dm[i] = (uint16_t) ((blk * (int) sizeof(B) + at) / 2);
        }
        return r;
    }();
    return t;
}

// out[r] = the weight row w dotted with b row r (paired x[r], blocks xb[r]), r < R: each pair of
// blocks decodes once for the R rows, and every row sums as it would alone (even and odd pairs
// apart, then the odd last block), so a row's result does not depend on M
template <class Q, int R>
void nibble_rows_pairs(const typename Q::Block * w, const PairedRow * x, const BlockQ8 * const * xb, int64_t nb,
                       float * out) {
    using B = typename Q::Block;
    using L = NibbleLayout<B>;
    static_assert(sizeof(B) % 2 == 0 && 2 * sizeof(B) <= 64, "two blocks in one load, d and m on words");
    const NibbleTables & t     = nibble_tables<B>();
    const __m512i        nib   = _mm512_load_si512(t.nib);
    const __m512i        shift = _mm512_load_si512(t.shift);
    const __m512i        qh    = _mm512_load_si512(t.qh);
    const __m512i        bit   = _mm512_load_si512(t.bit);
    const __m512i        dm    = _mm512_load_si512(t.dm);
    const __m512i        low4  = _mm512_set1_epi8(0x0f);
    const __mmask64      both  = ~(__mmask64) 0 >> (64 - 2 * sizeof(B));
    // two pairs a step, each into its own sums, so one pair does not wait for the other's FMA
    __m512 acc0[R], acc1[R], mins0[R], mins1[R];
    for (int r = 0; r < R; ++r) {
        acc0[r] = acc1[r] = mins0[r] = mins1[r] = _mm512_setzero_ps();
    }
    auto pair = [&](int64_t i, __m512 * acc, __m512 * mins) {
        const __m512i raw = _mm512_maskz_loadu_epi8(both, w + i);
        __m512i       u   = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(nib, raw), shift), low4);
        if constexpr (L::qh >= 0) {
            const __mmask64 fifth = _mm512_test_epi8_mask(_mm512_permutexvar_epi8(qh, raw), bit);
            u                     = _mm512_mask_add_epi8(u, fifth, u, _mm512_set1_epi8(16));
        }
        const __m512i h  = _mm512_permutexvar_epi16(dm, raw);
        const __m512  dw = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
#        pragma GCC   unroll 4
        for (int r = 0; r < R; ++r) {
            const __m512i start = L::o != 0 ? _mm512_loadu_si512(x[r].corr + 8 * i) : _mm512_setzero_si512();
            const __m512i s     = _mm512_dpbusd_epi32(start, u, _mm512_loadu_si512(x[r].q + QK * i));
            const __m512  sc    = _mm512_mul_ps(dw, _mm512_loadu_ps(x[r].dx + 8 * i));
            acc[r]              = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[r]);
            if constexpr (L::m >= 0) {
                const __m512 m = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
                mins[r]        = _mm512_fmadd_ps(m, _mm512_loadu_ps(x[r].sx + 8 * i), mins[r]);
            }
        }
    };
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 4) {
        _mm_prefetch(reinterpret_cast<const char *>(w + ib) + PREFETCH, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(w + ib + 2) + PREFETCH, _MM_HINT_T0);
        pair(ib, acc0, mins0);
        pair(ib + 2, acc1, mins1);
    }
    if (ib + 2 <= nb) {
        pair(ib, acc0, mins0);
        ib += 2;
    }
    for (int r = 0; r < R; ++r) {
        const __m512 all  = _mm512_add_ps(_mm512_add_ps(acc0[r], acc1[r]), _mm512_add_ps(mins0[r], mins1[r]));
        __m256       half = _mm256_add_ps(_mm512_castps512_ps256(all),
                                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(all), 1)));
        float        bias = 0.0f;
        if (ib < nb) { // an odd last block through the 256-bit kernel
            q8_block<Q, 1>(w[ib], &xb[r], ib, &half, &bias);
        }
        out[r] = hsum256(half) + bias;
    }
}

constexpr int RN = 4; // b rows per nibble-pairs tile: 4 x 4 accumulators of the 32 registers

using NibbleFn = void (*)(const void *, const PairedRow *, const BlockQ8 * const *, int64_t, float *);

template <class Q, int R>
void nibble_rows_erased(const void * w, const PairedRow * x, const BlockQ8 * const * xb, int64_t nb, float * out) {
    nibble_rows_pairs<Q, R>(static_cast<const typename Q::Block *>(w), x, xb, nb, out);
}

template <class Q, size_t... I>
constexpr std::array<NibbleFn, RN> make_nibble_tiles(std::index_sequence<I...>) {
    return { { &nibble_rows_erased<Q, (int) I + 1>... } };
}

// weight rows [i0, i1) of a batch against its M b rows laid out for the paired kernels (rows, 3 K
// bytes each), RN at a time; at M = 1 the one-row kernel is called directly (Note [one-row stream],
// mul_mat_dot.cpp)
template <class Q>
void nibble_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx, const char * rows) {
    static constexpr auto tiles = make_nibble_tiles<Q>(std::make_index_sequence<RN>());
    const int64_t         nb    = g.K / QK;
    PairedRow             x[RN];
    const BlockQ8 *       xb[RN];
    if (g.M == 1) {
        x[0]  = paired_row(rows, nb);
        xb[0] = qx + batch * nb;
        for_rows(g, batch, i0, i1, [&](const char * w, float * out) {
            nibble_rows_pairs<Q, 1>(reinterpret_cast<const typename Q::Block *>(w), x, xb, nb, out);
        });
        return;
    }
    const char * a0   = g.a_row(0, batch);
    char *       d0   = g.dst_row(0, batch);
    const size_t a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0], d_nb1 = g.dst->nb[1];
    float        out[RN];
    for (int64_t i = i0; i < i1; ++i) {
        for (int64_t m = 0; m < g.M; m += RN) {
            const int r = (int) (g.M - m < RN ? g.M - m : RN);
            for (int q = 0; q < r; ++q) {
                const int64_t row = batch * g.M + m + q;
                x[q]              = paired_row(rows + (m + q) * 3 * g.K, nb);
                xb[q]             = qx + row * nb;
            }
            tiles[(size_t) r - 1](a0 + i * a_nb, x, xb, nb, out);
            for (int q = 0; q < r; ++q) {
                *reinterpret_cast<float *>(d0 + (m + q) * d_nb1 + i * d_nb0) = out[q];
            }
        }
    }
}
#    endif

// the o of Note [nibble pairs] for the paired rows of a node, or -1: the node takes the general
// tile (Note [paired rows by M], mul_mat_path.h)
int paired_offset(const Geometry & g) {
    if (g.M > paired_max_rows(g.a->type, g.K)) {
        return -1;
    }
    switch (g.a->type) {
        case WSP_GGML_TYPE_Q8_0: return 128;
#    if WSP_MM_NIBBLE_PAIRS
        case WSP_GGML_TYPE_Q4_0: return NibbleLayout<block_q4_0>::o;
        case WSP_GGML_TYPE_Q4_1: return NibbleLayout<block_q4_1>::o;
        case WSP_GGML_TYPE_Q5_0: return NibbleLayout<block_q5_0>::o;
        case WSP_GGML_TYPE_Q5_1: return NibbleLayout<block_q5_1>::o;
#    endif
        default: return -1;
    }
}

// weight rows [i0, i1) of a batch with the paired kernels
void paired_rows(const Geometry & g, int64_t batch, int64_t i0, int64_t i1, const BlockQ8 * qx, const char * rows) {
    switch (g.a->type) {
#    if WSP_MM_NIBBLE_PAIRS
        case WSP_GGML_TYPE_Q4_0: nibble_rows<Q4_0>(g, batch, i0, i1, qx, rows); break;
        case WSP_GGML_TYPE_Q4_1: nibble_rows<Q4_1>(g, batch, i0, i1, qx, rows); break;
        case WSP_GGML_TYPE_Q5_0: nibble_rows<Q5_0>(g, batch, i0, i1, qx, rows); break;
        case WSP_GGML_TYPE_Q5_1: nibble_rows<Q5_1>(g, batch, i0, i1, qx, rows); break;
#    endif
        default: { // Q8_0, M = 1
            const int64_t   nb = g.K / QK;
            const PairedRow x  = paired_row(rows, nb);
            const BlockQ8 * xb = qx + batch * nb;
            // two streams (Note [two streams], mul_mat_repack.cpp): rows i and i + half side by side
            const char *  a0   = g.a_row(0, batch);
            char *        d0   = g.dst_row(0, batch);
            const size_t  a_nb = g.a->nb[1], d_nb0 = g.dst->nb[0];
            const int64_t rest = two_streams(i0, i1, [&](int64_t i, int64_t j) {
                q8_0_two_rows(reinterpret_cast<const block_q8_0 *>(a0 + i * a_nb),
                              reinterpret_cast<const block_q8_0 *>(a0 + j * a_nb), x, xb, nb,
                              reinterpret_cast<float *>(d0 + i * d_nb0), reinterpret_cast<float *>(d0 + j * d_nb0));
            });
            for_rows(g, batch, rest, i1, [&](const char * w, float * out) {
                *out = q8_0_row_pairs(reinterpret_cast<const block_q8_0 *>(w), x, xb, nb);
            });
        }
    }
}
#endif

#if WSP_MM_Q8_0_PAIRS

// Each task lays out the node's b rows for the paired kernels itself, in a region of its own after
// phase 1's (at most 32 KiB: Note [paired rows by M]): rows written by the other task would reach
// this task's cache line by line from the other core's (measured: M = 1 about 8% slower shared).
size_t paired_task_bytes(const Geometry & g) {
    return align_up((size_t) (g.M * 3 * g.K));
}

size_t paired_size(const Geometry & g, int nth) {
    return paired_offset(g) >= 0 ? ALIGN + (size_t) nth * paired_task_bytes(g) : 0;
}

// this task's rows, on a cache line (a 64-byte load of a row never straddles two)
char * paired_rows_at(const ComputeParams & p, const Geometry & g) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p.wdata) + q8_activations_work_size(g, p.nth);
    return reinterpret_cast<char *>((at + ALIGN - 1) / ALIGN * ALIGN) + (size_t) p.ith * paired_task_bytes(g);
}

// the M b rows of a batch in the lanes' order
void write_paired_rows(const Geometry & g, const BlockQ8 * qx, int64_t batch, char * rows, int o) {
    const int64_t nb = g.K / QK;
    for (int64_t m = 0; m < g.M; ++m) {
        const BlockQ8 * blocks = qx + (batch * g.M + m) * nb;
        for (int64_t b = 0; b < nb; ++b) {
            write_paired(blocks[b], b, nb, rows + m * 3 * g.K, o);
        }
    }
}

#endif

} // namespace

size_t dot_q8_paired_work_size(const Geometry & g, int nth) {
#if WSP_MM_Q8_0_PAIRS
    return paired_size(g, nth);
#else
    (void) g;
    (void) nth;
    return 0;
#endif
}

bool dot_q8_paired_compute(const ComputeParams & p, const Geometry & g) {
#if WSP_MM_Q8_0_PAIRS
    const int o = paired_offset(g);
    if (o < 0) {
        return false;
    }
    // phase 1: every b row to 8-bit blocks
    const BlockQ8 * qx       = quantize_activations(p, g);
    char *          rows     = paired_rows_at(p, g);
    int64_t         prepared = -1;
    // phase 2: guided ranges of the weight rows of all batches, one batch after another, each
    // batch's rows laid out for the paired kernels when the task first meets it
    for_claimed_rows(p, g, dot_rows_per_item(g, p.nth), [&](int64_t batch, int64_t i0, int64_t i1) {
        if (batch != prepared) {
            write_paired_rows(g, qx, batch, rows, o);
            prepared = batch;
        }
        paired_rows(g, batch, i0, i1, qx, rows);
    });
    return true;
#else
    (void) p;
    (void) g;
    return false;
#endif
}

} // namespace wsp::cpu::mm
