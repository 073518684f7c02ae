// Block path of the flash attention (see flash_attn_tile.h). Q.K^T keeps QK_ROWS queries x
// QK_COLS vectors of keys in registers and streams Kt rows (one load per key vector, one
// broadcast per query); P.V is the shared tile of flash_attn_simd.h over V converted to F32.
// Tile sizes fit the register file of each instruction set.

#include "flash_attn_simd.h"

#include <cstring>

namespace wsp::cpu::fa {

using namespace simd;

namespace {

#if defined(__AVX512F__)
constexpr int QK_COLS = 4; // 32 zmm: 16 accumulators, 4 key vectors, broadcasts
#else
constexpr int QK_COLS = 2; // 16 ymm: 8 accumulators, 2 key vectors, broadcasts
#endif
constexpr int     QK_ROWS  = 4;
constexpr int64_t KEY_TILE = (int64_t) QK_COLS * LANES;
static_assert(BLOCK_K % KEY_TILE == 0, "a key block is a whole number of key tiles");

template <int R>
void qk_tile(const float * q, int64_t ldq, const float * kt, int64_t D, float * s) {
    VecF acc[R][QK_COLS];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < QK_COLS; ++c) {
            acc[r][c] = vzero();
        }
    }
    for (int64_t d = 0; d < D; ++d) {
        VecF kv[QK_COLS];
        for (int c = 0; c < QK_COLS; ++c) {
            kv[c] = vload(kt + d * BLOCK_K + c * LANES);
            keep_in_register(kv[c]); // Note [register operands] in vec.h
        }
        for (int r = 0; r < R; ++r) {
            const VecF qb = vset1(q[r * ldq + d]);
            for (int c = 0; c < QK_COLS; ++c) {
                acc[r][c] = vfma(qb, kv[c], acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < QK_COLS; ++c) {
            vstore(s + r * BLOCK_K + c * LANES, acc[r][c]);
        }
    }
}

// run the tile instance for rows (1..QK_ROWS) chosen at run time
template <int R>
void qk_rows(int rows, const float * q, int64_t ldq, const float * kt, int64_t D, float * s) {
    if constexpr (R > 1) {
        if (rows < R) {
            qk_rows<R - 1>(rows, q, ldq, kt, D, s);
            return;
        }
    }
    qk_tile<R>(q, ldq, kt, D, s);
}

#if defined(__AVX512F__)
// in-register transpose of a 16x16 block: r[i] holds row i before, column i after
inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c
    __m512 u[16];
    for (int g = 0; g < 4; ++g) {
        const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g]     = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; ++c) {
        const __m512 e0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88); // lanes 0, 2
        const __m512 e1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const __m512 o0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd); // lanes 1, 3
        const __m512 o1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        r[c]            = _mm512_shuffle_f32x4(e0, e1, 0x88);
        r[8 + c]        = _mm512_shuffle_f32x4(e0, e1, 0xdd);
        r[4 + c]        = _mm512_shuffle_f32x4(o0, o1, 0x88);
        r[12 + c]       = _mm512_shuffle_f32x4(o0, o1, 0xdd);
    }
}

template <class L>
void load_k_transposed_avx512(const char * k0, size_t nb1, int64_t nk, int64_t D, float * kt) {
    __m512 r[16];
    for (int64_t j0 = 0; j0 < BLOCK_K; j0 += 16) {
        for (int64_t d0 = 0; d0 < D; d0 += 16) {
            const int    nd = (int) (D - d0 < 16 ? D - d0 : 16);
            const char * e0 = k0 + j0 * nb1 + (size_t) d0 * L::SIZE;
            for (int i = 0; i < 16; ++i) {
                const char * e = e0 + i * nb1;
                r[i]           = j0 + i >= nk ? _mm512_setzero_ps() : nd == 16 ? L::load(e) : L::load_n(e, nd);
            }
            transpose16(r);
            for (int c = 0; c < nd; ++c) {
                _mm512_storeu_ps(kt + (d0 + c) * BLOCK_K + j0, r[c]);
            }
        }
    }
}
#endif

template <class L>
void add_mask(const char * m, float slope, float * s, int64_t n) {
    const VecF vs = vset1(slope);
    int64_t    j  = 0;
    for (; j + LANES <= n; j += LANES) {
        vstore(s + j, vfma(vs, L::load(m + (size_t) j * L::SIZE), vload(s + j)));
    }
    if (j < n) {
        const int r = (int) (n - j);
        vstore_n(s + j, vfma(vs, L::load_n(m + (size_t) j * L::SIZE, r), vload_n(s + j, r)), r);
    }
}

// bit pattern of -inf in a mask row of type U (the loop has no early exit, so it vectorises)
template <typename U>
bool row_all(const char * row, int64_t n, U pattern) {
    U diff = 0;
    for (int64_t j = 0; j < n; ++j) {
        U u;
        std::memcpy(&u, row + (size_t) j * sizeof(U), sizeof(U));
        diff |= (U) (u ^ pattern);
    }
    return diff == 0;
}

// rows of n elements -> F32 rows of ld floats (ld a whole number of vectors, zero past n)
template <class L>
void convert_rows(const char * src, size_t nb1, int64_t rows, int64_t n, int64_t ld, float * dst) {
    const int64_t full = n / LANES * LANES;
    for (int64_t j = 0; j < rows; ++j) {
        const char * s = src + j * nb1;
        float *      d = dst + j * ld;
        int64_t      i = 0;
        for (; i < full; i += LANES) {
            vstore(d + i, L::load(s + (size_t) i * L::SIZE));
        }
        if (i < ld) {
            vstore(d + i, i < n ? L::load_n(s + (size_t) i * L::SIZE, (int) (n - i)) : vzero());
            for (i += LANES; i < ld; i += LANES) {
                vstore(d + i, vzero());
            }
        }
    }
}

} // namespace

void load_k_transposed(wsp_ggml_type type, const char * k0, size_t nb0, size_t nb1, int64_t nk, int64_t D, float * kt,
                       float * tmp) {
#if defined(__AVX512F__)
    if (nb0 == wsp_ggml_type_size(type)) {
        switch (type) {
            case WSP_GGML_TYPE_F16: load_k_transposed_avx512<Rows<WSP_GGML_TYPE_F16>>(k0, nb1, nk, D, kt); return;
            case WSP_GGML_TYPE_BF16: load_k_transposed_avx512<Rows<WSP_GGML_TYPE_BF16>>(k0, nb1, nk, D, kt); return;
            case WSP_GGML_TYPE_F32: load_k_transposed_avx512<Rows<WSP_GGML_TYPE_F32>>(k0, nb1, nk, D, kt); return;
            default: break;
        }
    }
#endif
    for (int64_t j = 0; j < nk; ++j) {
        strided_row_to_f32(type, k0 + j * nb1, nb0, tmp, D);
        for (int64_t d = 0; d < D; ++d) {
            kt[d * BLOCK_K + j] = tmp[d];
        }
    }
    for (int64_t d = 0; d < D; ++d) {
        for (int64_t j = nk; j < BLOCK_K; ++j) {
            kt[d * BLOCK_K + j] = 0.0f;
        }
    }
}

void load_v_rows(wsp_ggml_type type, const char * v0, size_t nb0, size_t nb1, int64_t nk, int64_t Dv, int64_t ldv,
                 float * vb) {
    if (nb0 == wsp_ggml_type_size(type)) {
        switch (type) {
            case WSP_GGML_TYPE_F16: convert_rows<Rows<WSP_GGML_TYPE_F16>>(v0, nb1, nk, Dv, ldv, vb); return;
            case WSP_GGML_TYPE_BF16: convert_rows<Rows<WSP_GGML_TYPE_BF16>>(v0, nb1, nk, Dv, ldv, vb); return;
            case WSP_GGML_TYPE_F32: convert_rows<Rows<WSP_GGML_TYPE_F32>>(v0, nb1, nk, Dv, ldv, vb); return;
            default: break;
        }
    }
    for (int64_t j = 0; j < nk; ++j) {
        float * row = vb + j * ldv;
        strided_row_to_f32(type, v0 + j * nb1, nb0, row, Dv);
        for (int64_t d = Dv; d < ldv; ++d) {
            row[d] = 0.0f;
        }
    }
}

void add_mask_row(wsp_ggml_type type, const char * m, float slope, float * s, int64_t n) {
    switch (type) {
        case WSP_GGML_TYPE_F16: add_mask<Rows<WSP_GGML_TYPE_F16>>(m, slope, s, n); break;
        case WSP_GGML_TYPE_BF16: add_mask<Rows<WSP_GGML_TYPE_BF16>>(m, slope, s, n); break;
        default: add_mask<Rows<WSP_GGML_TYPE_F32>>(m, slope, s, n); break;
    }
}

bool mask_block_all_inf(wsp_ggml_type type, const char * mask0, size_t nb1, int64_t nq, int64_t kb, int64_t nk) {
    const size_t es = wsp_ggml_type_size(type);
    for (int64_t i = 0; i < nq; ++i) {
        const char * row = mask0 + i * nb1 + (size_t) kb * es;
        const bool   all = type == WSP_GGML_TYPE_F32   ? row_all<uint32_t>(row, nk, 0xff800000u)
                           : type == WSP_GGML_TYPE_F16 ? row_all<uint16_t>(row, nk, (uint16_t) 0xfc00u)
                                                       : row_all<uint16_t>(row, nk, (uint16_t) 0xff80u);
        if (!all) {
            return false;
        }
    }
    return true;
}

void qk_block(const float * q, int64_t ldq, int64_t nq, const float * kt, int64_t D, float * s) {
    // key tiles outside: one tile of Kt (D x KEY_TILE) stays in L1 while all queries pass
    for (int64_t j0 = 0; j0 < BLOCK_K; j0 += KEY_TILE) {
        for (int64_t i0 = 0; i0 < nq; i0 += QK_ROWS) {
            const int rows = (int) (nq - i0 < QK_ROWS ? nq - i0 : QK_ROWS);
            qk_rows<QK_ROWS>(rows, q + i0 * ldq, ldq, kt + j0, D, s + i0 * BLOCK_K + j0);
        }
    }
}

void pv_block(const float * p, int64_t nq, const float * vb, int64_t ldv, int64_t nk, const float * alpha, float * o) {
    pv_rows<Rows<WSP_GGML_TYPE_F32>>(p, nq, reinterpret_cast<const char *>(vb), (size_t) ldv * sizeof(float), nk, ldv,
                                     alpha, o, ldv);
}

float online_softmax_row(float * s, float & m, float & l) {
    const float m_new = std::fmax(m, vec_max(s, BLOCK_K));
    if (m_new == -INFINITY) {
        // every key so far is masked: nothing to accumulate (and exp(-inf - -inf) would be NaN)
        std::memset(s, 0, BLOCK_K * sizeof(float));
        return 1.0f;
    }
    const float alpha = std::exp(m - m_new); // 0 on the first attended block (m = -inf)
    l                 = l * alpha + vec_exp_sub_sum(s, s, BLOCK_K, m_new);
    m                 = m_new;
    return alpha;
}

} // namespace wsp::cpu::fa
