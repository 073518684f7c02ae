#pragma once

// Element access for the float storage types and the vectorised math the kernels share
// (exp, tanh, gelu, sigmoid), with AVX-512 / AVX2 paths and a scalar fallback that computes
// the same function.

#include "ggml.h"

#include "../core/fp16.h"

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#    include <immintrin.h>
#endif

namespace wsp::cpu {

#if defined(__AVX512F__)
// horizontal sum / max of 16 lanes (GCC 12's _mm512_reduce_* trip -Wuninitialized)
inline float hsum512(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q        = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q        = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

inline float hmax512(__m512 v) {
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q        = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q        = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
#endif

#if defined(__AVX2__)
inline float hsum256(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q        = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q        = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
#endif

inline bool is_float_type(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

inline float load_f(wsp_ggml_type t, const void * p) {
    switch (t) {
        case WSP_GGML_TYPE_F32: return *static_cast<const float *>(p);
        case WSP_GGML_TYPE_F16: return fp16_to_fp32(*static_cast<const uint16_t *>(p));
        case WSP_GGML_TYPE_BF16: return bf16_to_fp32(*static_cast<const uint16_t *>(p));
        default: return 0.0f;
    }
}

inline void store_f(wsp_ggml_type t, void * p, float v) {
    switch (t) {
        case WSP_GGML_TYPE_F32: *static_cast<float *>(p) = v; break;
        case WSP_GGML_TYPE_F16: *static_cast<uint16_t *>(p) = fp32_to_fp16(v); break;
        case WSP_GGML_TYPE_BF16: *static_cast<uint16_t *>(p) = fp32_to_bf16(v); break;
        default: break;
    }
}

// contiguous row of any type with a to_float converter -> f32
void row_to_f32(wsp_ggml_type t, const void * src, float * dst, int64_t n);
// f32 -> contiguous row of any type with a from_float converter
void row_from_f32(wsp_ggml_type t, const float * src, void * dst, int64_t n);
// strided row of a float type (stride in bytes) -> f32
void strided_row_to_f32(wsp_ggml_type t, const char * src, size_t stride, float * dst, int64_t n);

// y = exp(x), n values; |relative error| < 2e-7 over the float range
void vec_exp(const float * x, float * y, int64_t n);
// y = exp(x - m) and returns the sum of y (soft_max's inner loop)
float vec_exp_sub_sum(const float * x, float * y, int64_t n, float m);
void  vec_tanh(const float * x, float * y, int64_t n);
void  vec_sigmoid(const float * x, float * y, int64_t n);
// gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void vec_gelu(const float * x, float * y, int64_t n);
void vec_silu(const float * x, float * y, int64_t n);

float vec_max(const float * x, int64_t n);
void  vec_scale(float * y, int64_t n, float s);
float vec_dot_f32(const float * x, const float * y, int64_t n);
// y += a * x
void vec_axpy(float * y, const float * x, int64_t n, float a);

inline float gelu_scalar(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

} // namespace wsp::cpu
