#pragma once

// Activations quantized to 8-bit blocks of 32 for the integer dot-product paths (dot_q8 in
// mul_mat_q8.cpp, the repacked Q4_0 kernel in mul_mat_repack.cpp): d = amax / 127,
// q = round(x / d), s = d * sum(q), as ggml's Q8_1; d and s stay F32 since the blocks never
// leave the work buffer.

#include "mul_mat_common.h"
#include "vec.h"

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
size_t q8_activations_work_size(const Geometry & g, int nth);

// The body of such a phase 1: the tasks split the blocks of qk values of all b rows (not the rows:
// at M = 1 every task takes a share of the one row), each run of a row's blocks converted to F32 in
// scratch where b is not contiguous F32, then quantize(values, first block, count of values); the
// caller waits at the barrier. Blocks of b row r of a batch start at (batch * M + r) * (K / qk).
template <class Block, class Quantize>
void quantize_b_rows(const ComputeParams & p, const Geometry & g, int64_t qk, Block * qx, float * scratch,
                     Quantize && quantize) {
    const int64_t nb = g.K / qk;
    int64_t       j0, j1;
    split_range(g.n_batch * g.M * nb, p.ith, p.nth, j0, j1);
    for (int64_t j = j0; j < j1;) {
        const int64_t r = j / nb, b0 = j % nb, b1 = b0 + (j1 - j) < nb ? b0 + (j1 - j) : nb;
        const char *  src = g.b_row(r % g.M, r / g.M) + b0 * qk * g.b->nb[0];
        if (g.b->type == WSP_GGML_TYPE_F32 && g.b->nb[0] == sizeof(float)) {
            quantize(reinterpret_cast<const float *>(src), qx + r * nb + b0, (b1 - b0) * qk); // in place
        } else {
            strided_row_to_f32(g.b->type, src, g.b->nb[0], scratch, (b1 - b0) * qk);
            quantize(scratch, qx + r * nb + b0, (b1 - b0) * qk);
        }
        j += b1 - b0;
    }
}
const BlockQ8 * quantize_activations(const ComputeParams & p, const Geometry & g);

} // namespace wsp::cpu::mm
