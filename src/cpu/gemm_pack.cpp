// GEMM packing (see gemm_pack.h): conversion of row segments to F32, then a transpose into the
// panel layout, in 8 x 8 blocks with AVX where the panel width allows and element by element
// otherwise. Padding rows read a zero row, so edge panels need no special case in the kernel.

#include "gemm_pack.h"

#include "gemm_kernel.h"

#include "../core/fp16.h"

#include <cstring>

#if defined(__AVX__) || defined(__AVX512F__)
#    include <immintrin.h>
#endif

namespace wsp::cpu::gemm {

namespace {

constexpr int MAX_P = MR > NR ? MR : NR;

void f16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i))));
    }
#elif defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i))));
    }
#endif
    for (; i < n; ++i) {
        y[i] = fp16_to_fp32(x[i]);
    }
}

void bf16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i)));
        _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
#elif defined(__AVX2__)
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
#endif
    for (; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

float load_strided(wsp_ggml_type t, const char * p) {
    uint16_t h;
    switch (t) {
        case WSP_GGML_TYPE_F16: std::memcpy(&h, p, 2); return fp16_to_fp32(h);
        case WSP_GGML_TYPE_BF16: std::memcpy(&h, p, 2); return bf16_to_fp32(h);
        default: {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
    }
}

#if defined(__AVX__)
// out[i * ldo + r] = rows[r][k + i] for r, i < 8
inline void transpose_8x8(const float * const * rows, int64_t k, float * out, int64_t ldo) {
    const __m256 r0 = _mm256_loadu_ps(rows[0] + k), r1 = _mm256_loadu_ps(rows[1] + k);
    const __m256 r2 = _mm256_loadu_ps(rows[2] + k), r3 = _mm256_loadu_ps(rows[3] + k);
    const __m256 r4 = _mm256_loadu_ps(rows[4] + k), r5 = _mm256_loadu_ps(rows[5] + k);
    const __m256 r6 = _mm256_loadu_ps(rows[6] + k), r7 = _mm256_loadu_ps(rows[7] + k);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(out + 0 * ldo, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(out + 1 * ldo, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(out + 2 * ldo, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(out + 3 * ldo, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(out + 4 * ldo, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(out + 5 * ldo, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(out + 6 * ldo, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(out + 7 * ldo, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

// panel[k * P + r] = rows[r][k]
void transpose_rows(const float * const * rows, int P, int64_t kc, float * panel) {
    int64_t k = 0;
#if defined(__AVX__)
    const int full = P / 8 * 8;
    for (; k + 8 <= kc; k += 8) {
        for (int rb = 0; rb < full; rb += 8) {
            transpose_8x8(rows + rb, k, panel + k * P + rb, P);
        }
        for (int r = full; r < P; ++r) {
            for (int64_t i = 0; i < 8; ++i) {
                panel[(k + i) * P + r] = rows[r][k + i];
            }
        }
    }
#endif
    for (; k < kc; ++k) {
        for (int r = 0; r < P; ++r) {
            panel[k * P + r] = rows[r][k];
        }
    }
}

} // namespace

void row_segment_to_f32(const RowSource & src, const char * row, int64_t k0, int64_t n, float * out) {
    const size_t es = src.elem_stride;
    switch (src.type) {
        case WSP_GGML_TYPE_F32:
        case WSP_GGML_TYPE_F16:
        case WSP_GGML_TYPE_BF16: {
            const char * p = row + (size_t) k0 * es;
            if (es != wsp_ggml_type_size(src.type)) {
                for (int64_t i = 0; i < n; ++i) {
                    out[i] = load_strided(src.type, p + (size_t) i * es);
                }
            } else if (src.type == WSP_GGML_TYPE_F32) {
                std::memcpy(out, p, (size_t) n * sizeof(float));
            } else if (src.type == WSP_GGML_TYPE_F16) {
                f16_to_f32(reinterpret_cast<const uint16_t *>(p), out, n);
            } else {
                bf16_to_f32(reinterpret_cast<const uint16_t *>(p), out, n);
            }
            return;
        }
        default: {
            const int64_t bs = wsp_ggml_blck_size(src.type);
            wsp_ggml_get_type_traits(src.type)->to_float(row + (size_t) (k0 / bs) * wsp_ggml_type_size(src.type), out,
                                                         n);
            return;
        }
    }
}

void pack_panel(const RowSource & src, int64_t r0, int n_rows, int P, int64_t k0, int64_t kc, float * panel,
                float * scratch) {
    const float * rows[MAX_P];
    const bool    direct = src.type == WSP_GGML_TYPE_F32 && src.elem_stride == sizeof(float);
    for (int r = 0; r < n_rows; ++r) {
        const char * row = src.base + (size_t) (r0 + r) * src.row_stride;
        if (direct) {
            rows[r] = reinterpret_cast<const float *>(row) + k0;
        } else {
            float * t = scratch + (size_t) r * kc;
            row_segment_to_f32(src, row, k0, kc, t);
            rows[r] = t;
        }
    }
    if (n_rows < P) {
        float * zero = scratch + (size_t) P * kc;
        std::memset(zero, 0, (size_t) kc * sizeof(float));
        for (int r = n_rows; r < P; ++r) {
            rows[r] = zero;
        }
    }
    transpose_rows(rows, P, kc, panel);
}

} // namespace wsp::cpu::gemm
