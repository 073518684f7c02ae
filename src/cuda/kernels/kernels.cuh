#pragma once

// The op entries, one per file in this folder.

#include "../ops.cuh"

namespace wsp::cuda {

extern const OpEntry op_binary;  // ADD, SUB, MUL, DIV (binary.cu)
extern const OpEntry op_scale;   // SCALE (scale.cu)
extern const OpEntry op_cpy;     // CPY, CONT, DUP (cpy.cu)
extern const OpEntry op_concat;  // CONCAT (concat.cu)
extern const OpEntry op_mul_mat; // MUL_MAT (mul_mat.cu)

// y = src converted to `type`, contiguous, on ctx's stream (used by mul_mat for its activations)
bool convert_contiguous(LaunchCtx & ctx, const wsp_ggml_tensor * src, void * dst, wsp_ggml_type type);

} // namespace wsp::cuda
