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

const OpEntry & op_unary();              // UNARY, SQR, SQRT (unary.cu)
const OpEntry & op_norm();               // NORM (norm.cu)
const OpEntry & op_soft_max();           // SOFT_MAX (soft_max.cu)
const OpEntry & op_mean();               // MEAN (mean.cu)
const OpEntry & op_get_rows();           // GET_ROWS (get_rows.cu)
const OpEntry & op_im2col();             // IM2COL (im2col.cu)
const OpEntry & op_pad_reflect();        // PAD_REFLECT_1D (pad_reflect.cu)
const OpEntry & op_repeat();             // REPEAT (repeat.cu)
const OpEntry & op_pad();                // PAD (repeat.cu)
const OpEntry & op_roll();               // ROLL (repeat.cu)
const OpEntry & op_win_part();           // WIN_PART (window.cu)
const OpEntry & op_win_unpart();         // WIN_UNPART (window.cu)
const OpEntry & op_get_rel_pos();        // GET_REL_POS (window.cu)
const OpEntry & op_add_rel_pos();        // ADD_REL_POS (window.cu)
const OpEntry & op_upscale();            // UPSCALE (upscale.cu)
const OpEntry & op_arange();             // ARANGE (upscale.cu)
const OpEntry & op_timestep_embedding(); // TIMESTEP_EMBEDDING (upscale.cu)
const OpEntry & op_argsort();            // ARGSORT (argsort.cu)
const OpEntry & op_rope();               // ROPE (rope.cu)

const OpEntry & op_pool();           // POOL_1D, POOL_2D (pool.cu)
const OpEntry & op_conv_2d_dw();     // CONV_2D_DW (conv_2d_dw.cu)
const OpEntry & op_conv_transpose(); // CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D (conv_transpose.cu)
const OpEntry & op_mul_mat_id();     // MUL_MAT_ID (mul_mat_id.cu)
const OpEntry & op_out_prod();       // OUT_PROD (out_prod.cu)

const OpEntry & op_ssm_conv();    // SSM_CONV (ssm.cu)
const OpEntry & op_ssm_scan();    // SSM_SCAN (ssm.cu)
const OpEntry & op_rwkv();        // RWKV_WKV6, RWKV_WKV7, GATED_LINEAR_ATTN (rwkv.cu)
const OpEntry & op_math();        // LOG, SIN, COS, CLAMP, LEAKY_RELU, ADD1 (math.cu)
const OpEntry & op_math_reduce(); // SUM, SUM_ROWS, ARGMAX, COUNT_EQUAL (math_reduce.cu)
const OpEntry & op_rms_norm();    // RMS_NORM, L2_NORM, GROUP_NORM (rms_norm.cu)
const OpEntry & op_set();         // ACC, SET (set.cu)
const OpEntry & op_diag();        // DIAG, DIAG_MASK_INF, DIAG_MASK_ZERO (diag.cu)

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
