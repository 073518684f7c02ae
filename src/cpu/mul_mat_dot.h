#pragma once

// The dot-product MUL_MAT paths (few b rows, or few weight rows; mul_mat_path.h): each weight row
// dotted with the b rows, items of weight rows split over the tasks. dot_float keeps weights and
// activations exact with F32 accumulation; dot_q8 quantizes the activations to 8 bits for
// integer block dot products (mul_mat_q8.cpp, mul_mat_q8_pairs.cpp).

#include "mul_mat_common.h"

namespace wsp::cpu::mm {

size_t dot_float_work_size(const Geometry & g, int nth);
void   dot_float_compute(const ComputeParams & p, const Geometry & g);

size_t dot_q8_work_size(const Geometry & g, int nth);
void   dot_q8_compute(const ComputeParams & p, const Geometry & g);
// its paired kernels (mul_mat_q8_pairs.cpp): the work they need beyond phase 1's (0: the node is
// not theirs), and the node computed by them, or false (nothing done) where it is not theirs
size_t dot_q8_paired_work_size(const Geometry & g, int nth);
bool   dot_q8_paired_compute(const ComputeParams & p, const Geometry & g);

// weight rows per dynamically scheduled item: small enough to balance, large enough that
// next_chunk() traffic stays negligible
int64_t dot_rows_per_item(const Geometry & g, int nth);

} // namespace wsp::cpu::mm
