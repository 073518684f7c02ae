#pragma once

// Note [Q4_0x8 repack]: the CPU device's extra buffer type "CPU_REPACK" keeps Q4_0 weights with
// rows in groups of 8, so one vector lane holds one weight row and a mat-mul step works on 8
// rows at once: 8 scales convert in one instruction, and each activation load is shared by 8
// rows. Per group and block of 32 columns (144 bytes, exactly the 8 rows' 8 * 18 plain bytes):
//   bytes   0..15   the 8 rows' fp16 scales, row r at 2r
//   bytes  16..143  4 chunks of 32 bytes; byte 4r + i of chunk t is the plain qs[4t + i] of row r
//                   (low nibble: element 4t + i, high nibble: element 16 + 4t + i)
// Each group occupies the same bytes as its 8 plain rows, and the layout only moves whole bytes:
// sizes, offsets and memset are those of the plain tensor. Tensors of the buffer that do not
// fit the layout (see fits_repack) are stored plain. set/get_tensor convert, so the bytes seen
// from outside are always the plain ones; the buffer is not host memory to anyone but these
// kernels, and the CPU refuses every op reading a repacked tensor except MUL_MAT's weight.

#include "ggml-backend-impl.h"

#include "mul_mat_common.h"

namespace wsp::cpu {

constexpr int64_t REPACK_ROWS = 8;

// the buffer type (its device is the CPU device)
wsp_ggml_backend_buffer_type_t repack_buffer_type();

// a Q4_0 tensor of whole row groups, stored contiguous, not a view
bool fits_repack(const wsp_ggml_tensor * t);
// t's bytes are in the Q4_0x8 layout (t, or the tensor it views, lives in a CPU_REPACK buffer)
bool stored_repacked(const wsp_ggml_tensor * t);
// the CPU can compute this node: no source is stored repacked, or it is the weight of a MUL_MAT
// with F32 activations and output
bool repack_allows(const wsp_ggml_tensor * node);

// groups of 8 rows of blocks_per_row Q4_0 blocks, plain <-> Q4_0x8
void pack_q4_0x8(const void * plain, void * packed, int64_t groups, int64_t blocks_per_row);
void unpack_q4_0x8(const void * packed, void * plain, int64_t groups, int64_t blocks_per_row);

namespace mm {

// MUL_MAT with a repacked weight (mul_mat_repack.cpp): activations quantized to 8 bits, every M
size_t repack_work_size(const Geometry & g, int nth);
void   repack_compute(const ComputeParams & p, const Geometry & g);

} // namespace mm

} // namespace wsp::cpu
