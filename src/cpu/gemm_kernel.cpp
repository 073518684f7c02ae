// The GEMM micro-kernel (see gemm_kernel.h) for AVX-512, AVX2+FMA and plain C++. The row count
// is a template parameter so that every accumulator lives in a register; a table maps the
// run-time row count of an edge panel to its instantiation.

#include "gemm_kernel.h"

#include <array>
#include <utility>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#    include <immintrin.h>
#endif

namespace wsp::cpu::gemm {

namespace {

inline float * row_ptr(float * c, size_t ldc_bytes, int r) {
    return reinterpret_cast<float *>(reinterpret_cast<char *>(c) + (size_t) r * ldc_bytes);
}

#if defined(__AVX512F__)

template <int R>
void kernel(int64_t kc, const float * a, const float * b, float * c, size_t ldc, bool accumulate) {
    __m512      acc0[R], acc1[R];
#    pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        acc0[r] = _mm512_setzero_ps();
        acc1[r] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; ++k) {
        const __m512  a0 = _mm512_load_ps(a + k * NR);
        const __m512  a1 = _mm512_load_ps(a + k * NR + 16);
        const float * bk = b + k * MR;
#    pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512 br = _mm512_set1_ps(bk[r]);
            acc0[r]         = _mm512_fmadd_ps(a0, br, acc0[r]);
            acc1[r]         = _mm512_fmadd_ps(a1, br, acc1[r]);
        }
    }
#    pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float * cr = row_ptr(c, ldc, r);
        if (accumulate) {
            acc0[r] = _mm512_add_ps(_mm512_loadu_ps(cr), acc0[r]);
            acc1[r] = _mm512_add_ps(_mm512_loadu_ps(cr + 16), acc1[r]);
        }
        _mm512_storeu_ps(cr, acc0[r]);
        _mm512_storeu_ps(cr + 16, acc1[r]);
    }
}

#elif defined(__AVX2__) && defined(__FMA__)

template <int R>
void kernel(int64_t kc, const float * a, const float * b, float * c, size_t ldc, bool accumulate) {
    __m256 acc0[R], acc1[R];
#    pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        acc0[r] = _mm256_setzero_ps();
        acc1[r] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kc; ++k) {
        const __m256  a0 = _mm256_load_ps(a + k * NR);
        const __m256  a1 = _mm256_load_ps(a + k * NR + 8);
        const float * bk = b + k * MR;
#    pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m256 br = _mm256_broadcast_ss(bk + r);
            acc0[r]         = _mm256_fmadd_ps(a0, br, acc0[r]);
            acc1[r]         = _mm256_fmadd_ps(a1, br, acc1[r]);
        }
    }
#    pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        float * cr = row_ptr(c, ldc, r);
        if (accumulate) {
            acc0[r] = _mm256_add_ps(_mm256_loadu_ps(cr), acc0[r]);
            acc1[r] = _mm256_add_ps(_mm256_loadu_ps(cr + 8), acc1[r]);
        }
        _mm256_storeu_ps(cr, acc0[r]);
        _mm256_storeu_ps(cr + 8, acc1[r]);
    }
}

#else

template <int R>
void kernel(int64_t kc, const float * a, const float * b, float * c, size_t ldc, bool accumulate) {
    float acc[R][NR] = {};
    for (int64_t k = 0; k < kc; ++k) {
        const float * ak = a + k * NR;
        const float * bk = b + k * MR;
        for (int r = 0; r < R; ++r) {
            for (int j = 0; j < NR; ++j) {
                acc[r][j] += ak[j] * bk[r];
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        float * cr = row_ptr(c, ldc, r);
        for (int j = 0; j < NR; ++j) {
            cr[j] = accumulate ? cr[j] + acc[r][j] : acc[r][j];
        }
    }
}

#endif

using KernelFn = void (*)(int64_t, const float *, const float *, float *, size_t, bool);

template <size_t... I>
constexpr auto make_table(std::index_sequence<I...>) {
    return std::array<KernelFn, sizeof...(I)>{ { &kernel<(int) I + 1>... } };
}

} // namespace

void micro_kernel(int rows, int64_t kc, const float * a, const float * b, float * c, size_t ldc_bytes,
                  bool accumulate) {
    static constexpr auto table = make_table(std::make_index_sequence<MR>());
    table[(size_t) rows - 1](kc, a, b, c, ldc_bytes, accumulate);
}

} // namespace wsp::cpu::gemm
