#pragma once

// The arithmetic of the host cuBLAS (cublas.cpp validates and queues, cublas_gemm.cpp computes):
// a validated GEMM as the queued work carries it, and the product of one batch entry, numerics
// as Note [host cuBLAS] in cublas.cpp tells.

#include "cublas.h"

#include <cstddef>
#include <string>
#include <vector>

namespace wsp::host_target::blas {

// what the compute type does to A and B before they are multiplied
enum class Rounding { NONE, TF32, F16, BF16 };

inline size_t type_size(cudaDataType_t t) {
    return t == CUDA_R_32F ? 4 : 2;
}

// everything a GEMM needs once validated, copied into the queued work
struct Gemm {
    std::string    call;
    int            device;
    bool           ta, tb; // op is a transpose (C is T for real types)
    int            m, n, k;
    cudaDataType_t ab_type, c_type;
    int            lda, ldb, ldc;
    Rounding       rounding;
    bool           f16_accumulate;
    float          alpha, beta;
    void *         workspace;
    size_t         workspace_size;

    int    a_rows() const { return ta ? k : m; }
    int    a_cols() const { return ta ? m : k; }
    int    b_rows() const { return tb ? n : k; }
    int    b_cols() const { return tb ? k : n; }
    bool   reads_ab() const { return k > 0 && alpha != 0.0f; }
    bool   empty() const { return m == 0 || n == 0; }
    size_t a_bytes() const { return extent(a_rows(), a_cols(), lda, type_size(ab_type)); }
    size_t b_bytes() const { return extent(b_rows(), b_cols(), ldb, type_size(ab_type)); }
    size_t c_bytes() const { return extent(m, n, ldc, type_size(c_type)); }

    // from the first to one past the last byte of a column-major matrix
    static size_t extent(int rows, int cols, int ld, size_t es) {
        return rows == 0 || cols == 0 ? 0 : ((size_t) (cols - 1) * (size_t) ld + (size_t) rows) * es;
    }
};

// one GEMM of a batch; a and b are packed again only when they change (broadcast batches)
struct Packs {
    const void *       a = nullptr;
    const void *       b = nullptr;
    std::vector<float> pa, pb;
};

// C = alpha op(A) op(B) + beta C for one batch entry
void run_one(const Gemm & g, const void * A, const void * B, void * C, Packs & packs);

} // namespace wsp::host_target::blas
