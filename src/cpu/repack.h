#pragma once

// Note [Q4_0x8 repack]: the CPU device's extra buffer type "CPU_REPACK" keeps Q4_0 and Q4_1
// weights with rows in groups of 8, so one vector lane holds one weight row and a mat-mul step
// works on 8 rows at once: 8 scales convert in one instruction, and each activation load is shared
// by 8 rows. Per group and block of 32 columns (exactly the 8 rows' plain bytes: 144 for Q4_0,
// 160 for Q4_1):
//   bytes   0..15   the 8 rows' fp16 scales d, row r at 2r
//   bytes  16..31   Q4_1 only: the 8 rows' fp16 mins m, row r at 16 + 2r
//   then 4 chunks of 32 bytes; byte 4r + i of chunk t is the plain qs[4t + i] of row r
//                   (low nibble: element 4t + i, high nibble: element 16 + 4t + i)
// Each group occupies the same bytes as its 8 plain rows, and the layout only moves whole bytes:
// sizes, offsets and memset are those of the plain tensor. Tensors of the buffer that do not
// fit the layout (see fits_repack) are stored plain. set/get_tensor convert, so the bytes seen
// from outside are always the plain ones; the buffer is not host memory to anyone but these
// kernels, and the CPU refuses every op reading a repacked tensor except MUL_MAT's weight.
// Q4_1 joined Q4_0 because its one-row kernel on plain rows (Note [nibble pairs]) is bound by
// its instructions (about 150 GFLOP/s with the weights in cache or not), and in this layout its
// mins cost one conversion and one FMA per group block.

#include "ggml-backend-impl.h"

#include "mul_mat_common.h"

namespace wsp::cpu {

constexpr int64_t REPACK_ROWS = 8;

// the buffer type (its device is the CPU device)
wsp_ggml_backend_buffer_type_t repack_buffer_type();

// a Q4_0 or Q4_1 tensor of whole row groups, stored contiguous, not a view
bool fits_repack(const wsp_ggml_tensor * t);
// t's bytes are in the 8-row layout (t, or the tensor it views, lives in a CPU_REPACK buffer)
bool stored_repacked(const wsp_ggml_tensor * t);
// the CPU can compute this node: no source is stored repacked, or it is the weight of a MUL_MAT
// with F32 activations and output
bool repack_allows(const wsp_ggml_tensor * node);

// the bytes of one group block (8 rows by 32 columns) of type (Q4_0 or Q4_1), and the offset of
// its nibbles in it
constexpr size_t repack_group_block(wsp_ggml_type type) {
    return type == WSP_GGML_TYPE_Q4_1 ? 160 : 144;
}
constexpr size_t repack_nibbles_at(wsp_ggml_type type) {
    return type == WSP_GGML_TYPE_Q4_1 ? 32 : 16;
}

// groups of 8 rows of blocks_per_row blocks of type, plain <-> the 8-row layout
void pack_x8(wsp_ggml_type type, const void * plain, void * packed, int64_t groups, int64_t blocks_per_row);
void unpack_x8(wsp_ggml_type type, const void * packed, void * plain, int64_t groups, int64_t blocks_per_row);

namespace mm {

// MUL_MAT with a repacked weight (mul_mat_repack.cpp): activations quantized to 8 bits, every M
size_t repack_work_size(const Geometry & g, int nth);
void   repack_compute(const ComputeParams & p, const Geometry & g);

} // namespace mm

} // namespace wsp::cpu
