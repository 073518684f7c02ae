#pragma once

// The kernels of each op family, one file each; ops.cpp maps op ids to them.

#include "kernel.h"

namespace wsp::cpu {

extern const OpKernel kernel_binary;      // ADD, SUB, MUL, DIV (binary.cpp)
extern const OpKernel kernel_unary;       // UNARY, SQR, SQRT, SCALE (unary.cpp)
extern const OpKernel kernel_mean;        // MEAN (reduce.cpp)
extern const OpKernel kernel_norm;        // NORM (norm.cpp)
extern const OpKernel kernel_soft_max;    // SOFT_MAX (soft_max.cpp)
extern const OpKernel kernel_flash_attn;  // FLASH_ATTN_EXT (flash_attn.cpp)
extern const OpKernel kernel_mul_mat;     // MUL_MAT (mul_mat.cpp)
extern const OpKernel kernel_copy;        // DUP, CPY, CONT (copy.cpp)
extern const OpKernel kernel_get_rows;    // GET_ROWS (get_rows.cpp)
extern const OpKernel kernel_im2col;      // IM2COL (conv.cpp)
extern const OpKernel kernel_pad_reflect; // PAD_REFLECT_1D (conv.cpp)

extern const OpKernel kernel_pool;           // POOL_1D, POOL_2D (pool.cpp)
extern const OpKernel kernel_conv_2d_dw;     // CONV_2D_DW (conv_2d_dw.cpp)
extern const OpKernel kernel_conv_transpose; // CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D (conv_transpose.cpp)
extern const OpKernel kernel_mul_mat_id;     // MUL_MAT_ID (mul_mat_id.cpp)
extern const OpKernel kernel_out_prod;       // OUT_PROD (out_prod.cpp)

extern const OpKernel kernel_concat;            // CONCAT (concat.cpp)
extern const OpKernel kernel_custom1;           // MAP_CUSTOM1 (custom.cpp)
extern const OpKernel kernel_repeat;            // REPEAT (repeat.cpp)
extern const OpKernel kernel_pad;               // PAD (repeat.cpp)
extern const OpKernel kernel_roll;              // ROLL (repeat.cpp)
extern const OpKernel kernel_win_part;          // WIN_PART (window.cpp)
extern const OpKernel kernel_win_unpart;        // WIN_UNPART (window.cpp)
extern const OpKernel kernel_get_rel_pos;       // GET_REL_POS (window.cpp)
extern const OpKernel kernel_add_rel_pos;       // ADD_REL_POS (window.cpp)
extern const OpKernel kernel_upscale;           // UPSCALE (upscale.cpp)
extern const OpKernel kernel_arange;            // ARANGE (upscale.cpp)
extern const OpKernel kernel_timestep;          // TIMESTEP_EMBEDDING (upscale.cpp)
extern const OpKernel kernel_argsort;           // ARGSORT (argsort.cpp)
extern const OpKernel kernel_rope;              // ROPE (rope.cpp)
extern const OpKernel kernel_math_map;          // LOG, SIN, COS, CLAMP, LEAKY_RELU, ADD1 (math.cpp)
extern const OpKernel kernel_math_reduce;       // SUM, SUM_ROWS, ARGMAX, COUNT_EQUAL (math_reduce.cpp)
extern const OpKernel kernel_rms_norm;          // RMS_NORM, L2_NORM, GROUP_NORM (rms_norm.cpp)
extern const OpKernel kernel_set;               // ACC, SET (set.cpp)
extern const OpKernel kernel_diag;              // DIAG, DIAG_MASK_INF, DIAG_MASK_ZERO (diag.cpp)
extern const OpKernel kernel_custom2;           // MAP_CUSTOM2 (custom.cpp)
extern const OpKernel kernel_custom3;           // MAP_CUSTOM3 (custom.cpp)
extern const OpKernel kernel_custom;            // CUSTOM (custom.cpp)
extern const OpKernel kernel_ssm_conv;          // SSM_CONV (ssm.cpp)
extern const OpKernel kernel_ssm_scan;          // SSM_SCAN (ssm.cpp)
extern const OpKernel kernel_rwkv_wkv6;         // RWKV_WKV6 (rwkv.cpp)
extern const OpKernel kernel_rwkv_wkv7;         // RWKV_WKV7 (rwkv.cpp)
extern const OpKernel kernel_gated_linear_attn; // GATED_LINEAR_ATTN (rwkv.cpp)

} // namespace wsp::cpu
