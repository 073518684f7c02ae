#pragma once

// The large-batch MUL_MAT path: a packed, cache-blocked GEMM over F32 panels (gemm_kernel.h,
// gemm_pack.h). Weights of every type are used exactly as stored; accumulation is F32.

#include "mul_mat_common.h"

namespace wsp::cpu::mm {

size_t gemm_work_size(const Geometry & g, int nth);
void   gemm_compute(const ComputeParams & p, const Geometry & g);

} // namespace wsp::cpu::mm
