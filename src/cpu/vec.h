#pragma once

// Element access for the float storage types and the vectorised math the kernels share
// (exp, tanh, gelu, sigmoid). simd::VecF is one machine vector of floats (AVX-512, AVX2+FMA, or
// a 4-lane portable struct): kernels are written once against it and every build computes the
// same functions; only the lane count differs.

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
// f32 -> strided row of a float type (stride in bytes)
void strided_row_from_f32(wsp_ggml_type t, const float * src, char * dst, size_t stride, int64_t n);

// y = exp(x), n values; relative error < 3e-7 where the result is a normal float, correct
// subnormals below, +inf above ln(FLT_MAX); x == y is allowed (as for every map below)
void vec_exp(const float * x, float * y, int64_t n);
// y = exp(x - m) and returns the sum of y (soft_max's inner loop)
float vec_exp_sub_sum(const float * x, float * y, int64_t n, float m);
void  vec_tanh(const float * x, float * y, int64_t n);
void  vec_sigmoid(const float * x, float * y, int64_t n);
// gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void vec_gelu(const float * x, float * y, int64_t n);
// x * sigmoid(1.702 x)
void vec_gelu_quick(const float * x, float * y, int64_t n);
void vec_silu(const float * x, float * y, int64_t n);
void vec_sqrt(const float * x, float * y, int64_t n);

float vec_max(const float * x, int64_t n);
void  vec_scale(float * y, int64_t n, float s);
float vec_dot_f32(const float * x, const float * y, int64_t n);
// y += a * x
void vec_axpy(float * y, const float * x, int64_t n, float a);
// y = a * x + b
void vec_scale_bias(const float * x, float * y, int64_t n, float a, float b);

// ALiBi slope of `head` among n_head heads (1 when max_bias <= 0): heads below
// n_head_log2 = 2^floor(log2 n_head) get m0^(h+1), the rest m1^(2(h - n_head_log2) + 1)
float alibi_slope(float max_bias, int64_t head, int64_t n_head);

inline float gelu_scalar(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

namespace simd {

// Note [exp range]: arguments are clamped to [EXP_MIN, EXP_MAX] (NaN passes through). EXP_MAX is
// past ln(FLT_MAX) so its 2^k overflows to +inf; EXP_MIN is past the last subnormal so its
// result rounds to exactly 0, which keeps exp(-inf) == 0 for masked scores.
constexpr float EXP_MAX = 89.0f;
constexpr float EXP_MIN = -110.0f;
constexpr float LOG2E   = 1.44269504088896341f;
// ln 2 in two parts (Cody-Waite): k * LN2_HI is exact for |k| < 2^15
constexpr float LN2_HI = 0.693359375f;
constexpr float LN2_LO = -2.12194440e-4f;
// minimax polynomial of (exp(r) - 1 - r) / r^2 on [-ln2/2, ln2/2] (Cephes expf)
constexpr float EXP_P0 = 1.9875691500e-4f;
constexpr float EXP_P1 = 1.3981999507e-3f;
constexpr float EXP_P2 = 8.3334519073e-3f;
constexpr float EXP_P3 = 4.1665795894e-2f;
constexpr float EXP_P4 = 1.6666665459e-1f;
constexpr float EXP_P5 = 5.0000001201e-1f;

#if defined(__AVX512F__)

constexpr int LANES = 16;
using VecF          = __m512;

inline __mmask16 lane_mask(int n) {
    return (__mmask16) ((1u << n) - 1u);
}
inline VecF vload(const float * p) {
    return _mm512_loadu_ps(p);
}
inline VecF vload_n(const float * p, int n) {
    return _mm512_maskz_loadu_ps(lane_mask(n), p);
}
inline void vstore(float * p, VecF v) {
    _mm512_storeu_ps(p, v);
}
inline void vstore_n(float * p, VecF v, int n) {
    _mm512_mask_storeu_ps(p, lane_mask(n), v);
}
inline VecF vset1(float x) {
    return _mm512_set1_ps(x);
}
inline VecF vzero() {
    return _mm512_setzero_ps();
}
inline VecF vadd(VecF a, VecF b) {
    return _mm512_add_ps(a, b);
}
inline VecF vsub(VecF a, VecF b) {
    return _mm512_sub_ps(a, b);
}
inline VecF vmul(VecF a, VecF b) {
    return _mm512_mul_ps(a, b);
}
inline VecF vdiv(VecF a, VecF b) {
    return _mm512_div_ps(a, b);
}
inline VecF vfma(VecF a, VecF b, VecF c) {
    return _mm512_fmadd_ps(a, b, c);
}
// max/min return the second operand when either is NaN: callers pass x second to keep NaN
inline VecF vmax(VecF a, VecF b) {
    return _mm512_max_ps(a, b);
}
inline VecF vmin(VecF a, VecF b) {
    return _mm512_min_ps(a, b);
}
inline VecF vsqrt(VecF a) {
    return _mm512_sqrt_ps(a);
}
inline VecF vabs(VecF a) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
// a < b ? t : f per lane
inline VecF vselect_lt(VecF a, VecF b, VecF t, VecF f) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t);
}
inline float vhsum(VecF v) {
    return hsum512(v);
}
inline float vhmax(VecF v) {
    return hmax512(v);
}
inline VecF vexp(VecF x) {
    x             = vmin(vset1(EXP_MAX), vmax(vset1(EXP_MIN), x));
    const VecF k  = _mm512_roundscale_ps(vmul(x, vset1(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    VecF       r  = _mm512_fnmadd_ps(k, vset1(LN2_HI), x);
    r             = _mm512_fnmadd_ps(k, vset1(LN2_LO), r);
    VecF p        = vfma(vset1(EXP_P0), r, vset1(EXP_P1));
    p             = vfma(p, r, vset1(EXP_P2));
    p             = vfma(p, r, vset1(EXP_P3));
    p             = vfma(p, r, vset1(EXP_P4));
    p             = vfma(p, r, vset1(EXP_P5));
    const VecF er = vadd(vfma(p, vmul(r, r), r), vset1(1.0f));
    // scalef gives er * 2^k with IEEE overflow and gradual underflow in one rounding
    return _mm512_scalef_ps(er, k);
}

#elif defined(__AVX2__) && defined(__FMA__)

constexpr int LANES = 8;
using VecF          = __m256;

inline __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline VecF vload(const float * p) {
    return _mm256_loadu_ps(p);
}
inline VecF vload_n(const float * p, int n) {
    return _mm256_maskload_ps(p, lane_mask(n));
}
inline void vstore(float * p, VecF v) {
    _mm256_storeu_ps(p, v);
}
inline void vstore_n(float * p, VecF v, int n) {
    _mm256_maskstore_ps(p, lane_mask(n), v);
}
inline VecF vset1(float x) {
    return _mm256_set1_ps(x);
}
inline VecF vzero() {
    return _mm256_setzero_ps();
}
inline VecF vadd(VecF a, VecF b) {
    return _mm256_add_ps(a, b);
}
inline VecF vsub(VecF a, VecF b) {
    return _mm256_sub_ps(a, b);
}
inline VecF vmul(VecF a, VecF b) {
    return _mm256_mul_ps(a, b);
}
inline VecF vdiv(VecF a, VecF b) {
    return _mm256_div_ps(a, b);
}
inline VecF vfma(VecF a, VecF b, VecF c) {
    return _mm256_fmadd_ps(a, b, c);
}
inline VecF vmax(VecF a, VecF b) {
    return _mm256_max_ps(a, b);
}
inline VecF vmin(VecF a, VecF b) {
    return _mm256_min_ps(a, b);
}
inline VecF vsqrt(VecF a) {
    return _mm256_sqrt_ps(a);
}
inline VecF vabs(VecF a) {
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
inline VecF vselect_lt(VecF a, VecF b, VecF t, VecF f) {
    return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
inline float vhsum(VecF v) {
    return hsum256(v);
}
inline float vhmax(VecF v) {
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q        = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q        = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
inline VecF vexp(VecF x) {
    x             = vmin(vset1(EXP_MAX), vmax(vset1(EXP_MIN), x));
    const VecF k  = _mm256_round_ps(vmul(x, vset1(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    VecF       r  = _mm256_fnmadd_ps(k, vset1(LN2_HI), x);
    r             = _mm256_fnmadd_ps(k, vset1(LN2_LO), r);
    VecF p        = vfma(vset1(EXP_P0), r, vset1(EXP_P1));
    p             = vfma(p, r, vset1(EXP_P2));
    p             = vfma(p, r, vset1(EXP_P3));
    p             = vfma(p, r, vset1(EXP_P4));
    p             = vfma(p, r, vset1(EXP_P5));
    const VecF er = vadd(vfma(p, vmul(r, r), r), vset1(1.0f));
    // 2^k as two normal factors (k spans [-159, 128]); the second product rounds once into
    // the subnormal range or overflows to inf
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1);
    const __m256i k2 = _mm256_sub_epi32(ki, k1);
    const VecF    s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    const VecF    s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    return vmul(vmul(er, s1), s2);
}

#else

// portable fallback: four lanes the compiler may or may not vectorise
constexpr int LANES = 4;
struct VecF {
    float v[LANES];
};

template <typename F>
inline VecF vmap(F f) {
    VecF r;
    for (int i = 0; i < LANES; ++i) {
        r.v[i] = f(i);
    }
    return r;
}
inline VecF vload(const float * p) {
    return vmap([&](int i) { return p[i]; });
}
inline VecF vload_n(const float * p, int n) {
    return vmap([&](int i) { return i < n ? p[i] : 0.0f; });
}
inline void vstore(float * p, VecF v) {
    for (int i = 0; i < LANES; ++i) {
        p[i] = v.v[i];
    }
}
inline void vstore_n(float * p, VecF v, int n) {
    for (int i = 0; i < n; ++i) {
        p[i] = v.v[i];
    }
}
inline VecF vset1(float x) {
    return vmap([&](int) { return x; });
}
inline VecF vzero() {
    return vset1(0.0f);
}
inline VecF vadd(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] + b.v[i]; });
}
inline VecF vsub(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] - b.v[i]; });
}
inline VecF vmul(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] * b.v[i]; });
}
inline VecF vdiv(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] / b.v[i]; });
}
inline VecF vfma(VecF a, VecF b, VecF c) {
    return vmap([&](int i) { return std::fma(a.v[i], b.v[i], c.v[i]); });
}
// same NaN rule as the x86 instructions: the second operand wins
inline VecF vmax(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; });
}
inline VecF vmin(VecF a, VecF b) {
    return vmap([&](int i) { return a.v[i] < b.v[i] ? a.v[i] : b.v[i]; });
}
inline VecF vsqrt(VecF a) {
    return vmap([&](int i) { return std::sqrt(a.v[i]); });
}
inline VecF vabs(VecF a) {
    return vmap([&](int i) { return std::fabs(a.v[i]); });
}
inline VecF vselect_lt(VecF a, VecF b, VecF t, VecF f) {
    return vmap([&](int i) { return a.v[i] < b.v[i] ? t.v[i] : f.v[i]; });
}
inline float vhsum(VecF v) {
    return (v.v[0] + v.v[1]) + (v.v[2] + v.v[3]);
}
inline float vhmax(VecF v) {
    const float a = v.v[0] > v.v[1] ? v.v[0] : v.v[1];
    const float b = v.v[2] > v.v[3] ? v.v[2] : v.v[3];
    return a > b ? a : b;
}
inline float exp_lane(float x) {
    if (std::isnan(x)) {
        return x;
    }
    x              = x > EXP_MAX ? EXP_MAX : (x < EXP_MIN ? EXP_MIN : x);
    const float k  = std::nearbyint(x * LOG2E);
    float       r  = std::fma(-k, LN2_HI, x);
    r              = std::fma(-k, LN2_LO, r);
    float p        = std::fma(EXP_P0, r, EXP_P1);
    p              = std::fma(p, r, EXP_P2);
    p              = std::fma(p, r, EXP_P3);
    p              = std::fma(p, r, EXP_P4);
    p              = std::fma(p, r, EXP_P5);
    const float er = std::fma(p, r * r, r) + 1.0f;
    const int   ki = (int) k;
    const int   k1 = ki >> 1; // two normal factors, as in the AVX2 path
    const float s1 = bits_f32((uint32_t) (k1 + 127) << 23);
    const float s2 = bits_f32((uint32_t) (ki - k1 + 127) << 23);
    return er * s1 * s2;
}
inline VecF vexp(VecF x) {
    return vmap([&](int i) { return exp_lane(x.v[i]); });
}

#endif

// Note [register operands]: GCC folds a vector load that several FMAs share into each FMA as a
// memory operand, which in a micro-kernel turns one load per vector into one per FMA and makes
// the loop load-bound. An empty asm that claims to modify the value keeps it in a register.
inline void keep_in_register(VecF & v) {
#if defined(__GNUC__) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
    __asm__("" : "+v"(v));
#else
    (void) v;
#endif
}

} // namespace simd

} // namespace wsp::cpu
