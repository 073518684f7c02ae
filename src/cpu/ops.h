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
extern const OpKernel kernel_concat;      // CONCAT (concat.cpp)
extern const OpKernel kernel_custom1;     // MAP_CUSTOM1 (custom.cpp)

} // namespace wsp::cpu
