// The host cuBLAS's arithmetic (Note [host cuBLAS] in cublas.cpp): op(A) and op(B) converted
// once to float with the compute type's rounding, then a blocked product that keeps every output
// element's accumulation in k order, so that the blocking never changes a result.

#include "cublas_gemm.h"

#include "../core/fp16.h"

#include <algorithm>
#include <cstdint>

namespace wsp::host_target::blas {
namespace {

float round_tf32(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        return x; // inf and NaN stay
    }
    u += 0x0fffu + ((u >> 13) & 1u); // nearest even at bit 13; a carry into the exponent is right
    return bits_f32(u & ~0x1fffu);
}

float round_half(float x) {
    return fp16_to_fp32(fp32_to_fp16(x));
}

float apply(Rounding r, float x) {
    switch (r) {
        case Rounding::TF32: return round_tf32(x);
        case Rounding::F16: return round_half(x);
        case Rounding::BF16: return bf16_to_fp32(fp32_to_bf16(x));
        case Rounding::NONE: break;
    }
    return x;
}

float load(cudaDataType_t t, const void * base, size_t i) {
    switch (t) {
        case CUDA_R_16F: return fp16_to_fp32(static_cast<const uint16_t *>(base)[i]);
        case CUDA_R_16BF: return bf16_to_fp32(static_cast<const uint16_t *>(base)[i]);
        default: return static_cast<const float *>(base)[i];
    }
}

void store(cudaDataType_t t, void * base, size_t i, float v) {
    switch (t) {
        case CUDA_R_16F: static_cast<uint16_t *>(base)[i] = fp32_to_fp16(v); break;
        case CUDA_R_16BF: static_cast<uint16_t *>(base)[i] = fp32_to_bf16(v); break;
        default: static_cast<float *>(base)[i] = v; break;
    }
}

// op(A) as k rows of m floats: the innermost loop of the product runs along a row
void pack_a(const Gemm & g, const void * A, std::vector<float> & out) {
    out.resize((size_t) g.m * g.k);
    const size_t m = (size_t) g.m, lda = (size_t) g.lda;
    if (g.ta) { // op(A)(i, l) = A[l + i lda]: read along A's columns
        for (size_t i = 0; i < m; ++i) {
            for (size_t l = 0; l < (size_t) g.k; ++l) {
                out[l * m + i] = apply(g.rounding, load(g.ab_type, A, l + i * lda));
            }
        }
    } else {
        for (size_t l = 0; l < (size_t) g.k; ++l) {
            for (size_t i = 0; i < m; ++i) {
                out[l * m + i] = apply(g.rounding, load(g.ab_type, A, i + l * lda));
            }
        }
    }
}

// op(B) as n columns of k floats
void pack_b(const Gemm & g, const void * B, std::vector<float> & out) {
    out.resize((size_t) g.k * g.n);
    const size_t k = (size_t) g.k, ldb = (size_t) g.ldb;
    if (g.tb) { // op(B)(l, j) = B[j + l ldb]
        for (size_t l = 0; l < k; ++l) {
            for (size_t j = 0; j < (size_t) g.n; ++j) {
                out[j * k + l] = apply(g.rounding, load(g.ab_type, B, j + l * ldb));
            }
        }
    } else {
        for (size_t j = 0; j < (size_t) g.n; ++j) {
            for (size_t l = 0; l < k; ++l) {
                out[j * k + l] = apply(g.rounding, load(g.ab_type, B, l + j * ldb));
            }
        }
    }
}

void write_c(const Gemm & g, void * C, size_t i, size_t j, float acc) {
    const size_t at = i + j * (size_t) g.ldc;
    float        v;
    if (g.f16_accumulate) {
        v = round_half(g.alpha * acc);
        if (g.beta != 0.0f) {
            v = round_half(v + round_half(g.beta * load(g.c_type, C, at)));
        }
    } else {
        v = g.alpha * acc;
        if (g.beta != 0.0f) {
            v += g.beta * load(g.c_type, C, at);
        }
    }
    store(g.c_type, C, at, v);
}

// float accumulation in k order per element; blocks of C columns x rows keep the accumulators
// in L1 and reuse each row of packed A for several columns
void product_f32(const Gemm & g, const float * pa, const float * pb, void * C) {
    constexpr int IB = 64, JB = 4;
    const size_t  m = (size_t) g.m, k = (size_t) g.k;
    for (int i0 = 0; i0 < g.m; i0 += IB) {
        const int ib = std::min(IB, g.m - i0);
        for (int j0 = 0; j0 < g.n; j0 += JB) {
            const int jb          = std::min(JB, g.n - j0);
            float     acc[JB][IB] = {};
            for (size_t l = 0; l < k; ++l) {
                const float * a = pa + l * m + (size_t) i0;
                for (int jj = 0; jj < jb; ++jj) {
                    const float b   = pb[(size_t) (j0 + jj) * k + l];
                    float *     row = acc[jj];
                    for (int ii = 0; ii < ib; ++ii) {
                        row[ii] += a[ii] * b;
                    }
                }
            }
            for (int jj = 0; jj < jb; ++jj) {
                for (int ii = 0; ii < ib; ++ii) {
                    write_c(g, C, (size_t) (i0 + ii), (size_t) (j0 + jj), acc[jj][ii]);
                }
            }
        }
    }
}

// CUBLAS_COMPUTE_16F: each product and each partial sum rounded to half (a product of two
// halves is exact in float, so rounding the float product once is the half product)
void product_f16(const Gemm & g, const float * pa, const float * pb, void * C) {
    const size_t m = (size_t) g.m, k = (size_t) g.k;
    for (size_t j = 0; j < (size_t) g.n; ++j) {
        for (size_t i = 0; i < m; ++i) {
            float acc = 0.0f;
            for (size_t l = 0; l < k; ++l) {
                acc = round_half(acc + round_half(pa[l * m + i] * pb[j * k + l]));
            }
            write_c(g, C, i, j, acc);
        }
    }
}

} // namespace

void run_one(const Gemm & g, const void * A, const void * B, void * C, Packs & packs) {
    if (g.empty()) {
        return;
    }
    if (!g.reads_ab()) { // C = beta C: A and B are not read
        for (size_t j = 0; j < (size_t) g.n; ++j) {
            for (size_t i = 0; i < (size_t) g.m; ++i) {
                write_c(g, C, i, j, 0.0f);
            }
        }
        return;
    }
    if (packs.a != A || packs.pa.empty()) {
        pack_a(g, A, packs.pa);
        packs.a = A;
    }
    if (packs.b != B || packs.pb.empty()) {
        pack_b(g, B, packs.pb);
        packs.b = B;
    }
    (g.f16_accumulate ? product_f16 : product_f32)(g, packs.pa.data(), packs.pb.data(), C);
}

} // namespace wsp::host_target::blas
