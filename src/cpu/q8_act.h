#pragma once

// Activations quantized to 8-bit blocks of 32 for the integer dot-product paths (dot_q8 in
// mul_mat_q8.cpp, the repacked Q4_0 kernel in mul_mat_repack.cpp): d = amax / 127,
// q = round(x / d), s = d * sum(q), as ggml's Q8_1; d and s stay F32 since the blocks never
// leave the work buffer.

#include "mul_mat_common.h"

#include <cstdint>

namespace wsp::cpu::mm {

constexpr int QK8 = 32;

struct BlockQ8 {
    float  d; // scale
    float  s; // d * sum(qs)
    int8_t qs[QK8];
};

// K / 32 blocks of the row x (K a multiple of 32); exported for the tests
WSP_INTERNAL_API void quantize_row_q8(const float * x, BlockQ8 * y, int64_t K);

// Phase 1 of a node whose b rows are quantized: the tasks quantize every b row (batch-major, as
// b_row numbers them) into the start of the work buffer, then wait for each other. The work
// buffer needs q8_activations_work_size bytes; the blocks of b row r of a batch start at
// (batch * M + r) * (K / 32).
size_t          q8_activations_work_size(const Geometry & g, int nth);
const BlockQ8 * quantize_activations(const ComputeParams & p, const Geometry & g);

} // namespace wsp::cpu::mm
