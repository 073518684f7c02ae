#pragma once

// The op entries, one per file in this folder.

#include "../ops.cuh"

namespace wsp::cuda {

const OpEntry & op_binary();         // ADD, SUB, MUL, DIV (binary.cu)
const OpEntry & op_scale();          // SCALE (scale.cu)
const OpEntry & op_cpy();            // CPY, CONT, DUP (cpy.cu)
const OpEntry & op_concat();         // CONCAT (concat.cu)
const OpEntry & op_mul_mat();        // MUL_MAT (mul_mat.cu)
const OpEntry & op_flash_attn_ext(); // FLASH_ATTN_EXT (flash_attn.cu)

const OpEntry & op_unary();       // UNARY, SQR, SQRT (unary.cu)
const OpEntry & op_norm();        // NORM (norm.cu)
const OpEntry & op_soft_max();    // SOFT_MAX (soft_max.cu)
const OpEntry & op_mean();        // MEAN (mean.cu)
const OpEntry & op_get_rows();    // GET_ROWS (get_rows.cu)
const OpEntry & op_im2col();      // IM2COL (im2col.cu)
const OpEntry & op_pad_reflect(); // PAD_REFLECT_1D (pad_reflect.cu)

// y = src converted to `type`, contiguous, on ctx's stream (used by mul_mat for its activations)
bool convert_contiguous(LaunchCtx & ctx, const wsp_ggml_tensor * src, void * dst, wsp_ggml_type type);

// MUL_MAT of a float weight through cuBLAS, or our own GEMM (mul_mat.cu); the quantized GEMM path
// hands its F16 slabs to it as float-weight nodes
bool mul_mat_float(LaunchCtx & ctx, wsp_ggml_tensor * t);

// our own tiled GEMM for float weights (gemm.cu), used instead of cuBLAS with
// WSP_GGML_CUDA_OWN_GEMM=1 (and always where the vendor has no BLAS)
bool own_gemm_wanted();
bool mul_mat_own_gemm(LaunchCtx & ctx, wsp_ggml_tensor * t);

} // namespace wsp::cuda
