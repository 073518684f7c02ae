#pragma once

// The dot_q8 path of K-quant weights (Q2_K ... Q6_K; mul_mat_kq.cpp, Note [K-quant groups]): the
// b rows quantized to Q8_K, then each weight super-block dotted with them in integers.

#include "mul_mat_common.h"
#include "mul_mat_path.h"

#include "../core/quants.h"

namespace wsp::cpu::mm {

bool is_k_quant(wsp_ggml_type t);
// one weight row of nsb super-blocks of K-quant type t with one Q8_K row (the CPU type traits' vec_dot)
float  kq_dot(wsp_ggml_type t, const void * x, const block_q8_K * y, int64_t nsb);
size_t kq_work_size(const Geometry & g, int nth); // also the grid i-quants' (mul_mat_iq.cpp)
void   kq_compute(const ComputeParams & p, const Geometry & g);
// phase 1 of both: every b row to Q8_K blocks in the work buffer, then the barrier
const block_q8_K * quantize_activations_q8_k(const ComputeParams & p, const Geometry & g);

// The dot_q8 path of the grid i-quants (IQ1_S ... IQ3_S; mul_mat_iq.cpp, Note [grid dots])
void iq_compute(const ComputeParams & p, const Geometry & g);

} // namespace wsp::cpu::mm
