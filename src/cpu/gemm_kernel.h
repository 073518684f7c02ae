#pragma once

// The F32 GEMM micro-kernel: an MR x NR tile of dst from packed panels. Weights are packed as
// NR-wide panels (for each k, NR consecutive weight rows), activations as MR-row panels (for
// each k, MR consecutive rows), both zero-padded; the tile's NR outputs of one activation row
// are contiguous in dst, so each tile row is one run of vector stores.

#include <cstddef>
#include <cstdint>

namespace wsp::cpu::gemm {

#if defined(__AVX512F__)
// 12 x 2 zmm accumulators + 2 weight vectors + broadcasts fit the 32 registers
constexpr int MR = 12;
constexpr int NR = 32;
#elif defined(__AVX2__) && defined(__FMA__)
// 6 x 2 ymm accumulators + 2 weight vectors + 1 broadcast of the 16 registers
constexpr int MR = 6;
constexpr int NR = 16;
#else
constexpr int MR = 4;
constexpr int NR = 8;
#endif

// For r < rows, j < NR:  c_r[j] = (accumulate ? c_r[j] : 0) + sum_{k < kc} a[k * NR + j] * b[k * MR + r]
// where c_r = (float *) ((char *) c + r * ldc_bytes). a and b are 64-byte aligned panels; every
// output is a sequential sum over k, so its value does not depend on rows or on the caller's tiling.
void micro_kernel(int rows, int64_t kc, const float * a, const float * b, float * c, size_t ldc_bytes, bool accumulate);

} // namespace wsp::cpu::gemm
