// Vector math shared by the kernels (see vec.h).
// exp: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by a degree-6
// polynomial, 2^k built in the exponent bits; inputs beyond the float range saturate to 0/inf.

#include "vec.h"

#include <algorithm>
#include <cfloat>

namespace wsp::cpu {

namespace {

constexpr float LOG2E  = 1.44269504088896341f;
constexpr float LN2_HI = 0.693359375f;
constexpr float LN2_LO = -2.12194440e-4f;
constexpr float EXP_HI = 88.3762626647949f;
constexpr float EXP_LO = -88.3762626647949f;
// Taylor-like minimax coefficients of exp on [-ln2/2, ln2/2]
constexpr float P0 = 1.9875691500e-4f;
constexpr float P1 = 1.3981999507e-3f;
constexpr float P2 = 8.3334519073e-3f;
constexpr float P3 = 4.1665795894e-2f;
constexpr float P4 = 1.6666665459e-1f;
constexpr float P5 = 5.0000001201e-1f;

inline float exp_scalar(float x) {
    if (x > EXP_HI) {
        return INFINITY;
    }
    if (x < EXP_LO) {
        return 0.0f;
    }
    const float k  = std::nearbyint(x * LOG2E);
    float       r  = x - k * LN2_HI;
    r              = r - k * LN2_LO;
    float p        = P0;
    p              = p * r + P1;
    p              = p * r + P2;
    p              = p * r + P3;
    p              = p * r + P4;
    p              = p * r + P5;
    const float er = p * r * r + r + 1.0f;
    // 2^k, split in two factors so that k = 128 (x near EXP_HI) does not overflow the exponent
    const int   ki = (int) k;
    const float s1 = bits_f32((uint32_t) ((ki / 2) + 127) << 23);
    const float s2 = bits_f32((uint32_t) ((ki - ki / 2) + 127) << 23);
    return er * s1 * s2;
}

#if defined(__AVX512F__)
inline __m512 exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EXP_LO)), _mm512_set1_ps(EXP_HI));
    const __m512 k =
        _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r        = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_HI), x);
    r               = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_LO), r);
    __m512 p        = _mm512_set1_ps(P0);
    p               = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P1));
    p               = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
    p               = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
    p               = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
    p               = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
    const __m512 r2 = _mm512_mul_ps(r, r);
    const __m512 er = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
    // scalef computes er * 2^k without exponent overflow and flushes to 0 below the range
    return _mm512_scalef_ps(er, k);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
    const __m256 k =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r        = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_HI), x);
    r               = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_LO), r);
    __m256 p        = _mm256_set1_ps(P0);
    p               = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P1));
    p               = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P2));
    p               = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P3));
    p               = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P4));
    p               = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P5));
    const __m256 er = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    // 2^k in two halves (k may be 128 at the top of the range)
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1);
    const __m256i k2 = _mm256_sub_epi32(ki, k1);
    const __m256  s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    const __m256  s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    __m256        y  = _mm256_mul_ps(_mm256_mul_ps(er, s1), s2);
    // below the range the scale factors are meaningless: flush to 0
    return _mm256_and_ps(y, _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_GT_OQ));
}
#endif

// apply f (vector) / fs (scalar) over n values
template <typename VecFn, typename ScalarFn>
inline void map_values(const float * x, float * y, int64_t n, VecFn vf, ScalarFn sf) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, vf(_mm512_loadu_ps(x + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, vf(_mm512_maskz_loadu_ps(m, x + i)));
        i = n;
    }
#elif defined(__AVX2__) && defined(__FMA__)
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, vf(_mm256_loadu_ps(x + i)));
    }
#endif
    (void) vf;
    for (; i < n; ++i) {
        y[i] = sf(x[i]);
    }
}

inline float tanh_from_exp(float x) {
    // tanh(x) = 1 - 2 / (exp(2x) + 1), saturating for large |x|
    const float e = exp_scalar(2.0f * std::min(std::max(x, -9.0f), 9.0f));
    return 1.0f - 2.0f / (e + 1.0f);
}

} // namespace

void row_to_f32(wsp_ggml_type t, const void * src, float * dst, int64_t n) {
    wsp_ggml_get_type_traits(t)->to_float(src, dst, n);
}

void row_from_f32(wsp_ggml_type t, const float * src, void * dst, int64_t n) {
    wsp_ggml_get_type_traits(t)->from_float_ref(src, dst, n);
}

void strided_row_to_f32(wsp_ggml_type t, const char * src, size_t stride, float * dst, int64_t n) {
    if (stride == wsp_ggml_type_size(t)) {
        row_to_f32(t, src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = load_f(t, src + (size_t) i * stride);
    }
}

void vec_exp(const float * x, float * y, int64_t n) {
#if defined(__AVX512F__)
    map_values(x, y, n, exp_avx512, exp_scalar);
#elif defined(__AVX2__) && defined(__FMA__)
    map_values(x, y, n, exp_avx2, exp_scalar);
#else
    map_values(
        x, y, n, [](float v) { return v; }, exp_scalar);
#endif
}

float vec_exp_sub_sum(const float * x, float * y, int64_t n, float m) {
    int64_t i   = 0;
    double  sum = 0.0;
#if defined(__AVX512F__)
    const __m512 vm  = _mm512_set1_ps(m);
    __m512       acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    sum += hsum512(acc);
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256 vm  = _mm256_set1_ps(m);
    __m256       acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    sum += hsum256(acc);
#endif
    for (; i < n; ++i) {
        y[i] = exp_scalar(x[i] - m);
        sum += y[i];
    }
    return (float) sum;
}

void vec_tanh(const float * x, float * y, int64_t n) {
#if defined(__AVX512F__)
    map_values(
        x, y, n,
        [](__m512 v) {
            v              = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-9.0f)), _mm512_set1_ps(9.0f));
            const __m512 e = exp_avx512(_mm512_add_ps(v, v));
            return _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                 _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
        },
        tanh_from_exp);
#elif defined(__AVX2__) && defined(__FMA__)
    map_values(
        x, y, n,
        [](__m256 v) {
            v              = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-9.0f)), _mm256_set1_ps(9.0f));
            const __m256 e = exp_avx2(_mm256_add_ps(v, v));
            return _mm256_sub_ps(_mm256_set1_ps(1.0f),
                                 _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
        },
        tanh_from_exp);
#else
    map_values(
        x, y, n, [](float v) { return v; }, tanh_from_exp);
#endif
}

void vec_sigmoid(const float * x, float * y, int64_t n) {
    auto sf = [](float v) { return 1.0f / (1.0f + exp_scalar(-v)); };
#if defined(__AVX512F__)
    map_values(
        x, y, n,
        [](__m512 v) {
            const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v));
            return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
        },
        sf);
#elif defined(__AVX2__) && defined(__FMA__)
    map_values(
        x, y, n,
        [](__m256 v) {
            const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v));
            return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
        },
        sf);
#else
    map_values(
        x, y, n, [](float v) { return v; }, sf);
#endif
}

void vec_gelu(const float * x, float * y, int64_t n) {
    constexpr float C = 0.7978845608028654f;
    constexpr float A = 0.044715f;
    // 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u))
    auto sf = [](float v) {
        const float u = C * (v + A * v * v * v);
        return v / (1.0f + exp_scalar(-2.0f * u));
    };
#if defined(__AVX512F__)
    map_values(
        x, y, n,
        [](__m512 v) {
            const __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
            const __m512 u  = _mm512_mul_ps(_mm512_set1_ps(-2.0f * C), _mm512_fmadd_ps(_mm512_set1_ps(A), v3, v));
            const __m512 e  = exp_avx512(u);
            return _mm512_div_ps(v, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
        },
        sf);
#elif defined(__AVX2__) && defined(__FMA__)
    map_values(
        x, y, n,
        [](__m256 v) {
            const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
            const __m256 u  = _mm256_mul_ps(_mm256_set1_ps(-2.0f * C), _mm256_fmadd_ps(_mm256_set1_ps(A), v3, v));
            const __m256 e  = exp_avx2(u);
            return _mm256_div_ps(v, _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
        },
        sf);
#else
    map_values(
        x, y, n, [](float v) { return v; }, sf);
#endif
}

void vec_silu(const float * x, float * y, int64_t n) {
    auto sf = [](float v) { return v / (1.0f + exp_scalar(-v)); };
#if defined(__AVX512F__)
    map_values(
        x, y, n,
        [](__m512 v) {
            const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v));
            return _mm512_div_ps(v, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
        },
        sf);
#elif defined(__AVX2__) && defined(__FMA__)
    map_values(
        x, y, n,
        [](__m256 v) {
            const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v));
            return _mm256_div_ps(v, _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
        },
        sf);
#else
    map_values(
        x, y, n, [](float v) { return v; }, sf);
#endif
}

float vec_max(const float * x, int64_t n) {
    float   m = -INFINITY;
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (; i + 16 <= n; i += 16) {
        vm = _mm512_max_ps(vm, _mm512_loadu_ps(x + i));
    }
    m = hmax512(vm);
#endif
    for (; i < n; ++i) {
        m = std::max(m, x[i]);
    }
    return m;
}

void vec_scale(float * y, int64_t n, float s) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] *= s;
    }
}

float vec_dot_f32(const float * x, const float * y, int64_t n) {
    int64_t i = 0;
    float   s = 0.0f;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    }
    s = hsum512(_mm512_add_ps(a0, a1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a0 = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    }
    s = hsum256(a0);
#endif
    for (; i < n; ++i) {
        s += x[i] * y[i];
    }
    return s;
}

void vec_axpy(float * y, const float * x, int64_t n, float a) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] += a * x[i];
    }
}

} // namespace wsp::cpu
