#pragma once

// Note [Q4_0x8 repack]: the CPU device's extra buffer type "CPU_REPACK" keeps Q4_0, Q4_1, Q5_0,
// Q5_1 and Q8_0 weights with rows in groups of 8, so one vector lane holds one weight row and a mat-mul
// step works on 8 rows at once: 8 scales convert in one instruction, and each activation load is
// shared by 8 rows. Per group and block of 32 columns (exactly the 8 rows' plain bytes: 144, 160,
// 176 and 192), at the offsets of repack_layout:
//   d    the 8 rows' fp16 scales, row r at 2r
//   m    Q4_1 / Q5_1: the 8 rows' fp16 mins, row r at m + 2r
//   qh   Q5_0 / Q5_1: 8 words of 32 bits, the fifth bits as masks over the nibble vectors' bytes:
//        bit 4r + i of word t (t < 4) is the fifth bit of row r's element 4t + i, of word 4 + t
//        that of element 16 + 4t + i
//   qs   4 chunks of 32 bytes; byte 4r + i of chunk t is the plain qs[4t + i] of row r
//        (low nibble: element 4t + i, high nibble: element 16 + 4t + i)
//        Q8_0: 8 chunks; byte 4r + i of chunk t is row r's element 4t + i plus 128 (Note [Q8_0x8])
// Note [Q8_0x8]: Q8_0 joined for the one-row kernel: on plain rows (Note [Q8_0 pairs]) each pair
// of blocks costs two 256-bit loads (one of them split across cache lines), two scalar scale
// broadcasts and a merge of the halves, about 20 instructions per 68 bytes, so two threads read at
// most ~75 GB/s even from L3, the bandwidth of this machine's fast moments. In this layout a
// group block is 8 loads and 8 multiply-adds with one activation broadcast each, and one scale
// conversion for 8 rows. The bytes are stored as unsigned u = w + 128 (dpbusd multiplies unsigned
// by signed), so the sum takes the offset form of Q4_0 with o = 128. Measured against the plain
// layout (WSP_GGML_CPU_REPACK=0, interleaved, GFLOP/s): one thread, weights in L2, M = 1:
// 5120 x 256 75 -> 117, 1280 x 1024 103 -> 119; two threads from DRAM (a 43 GB/s moment), both
// whisper shapes: M = 1 the same (memory-bound), M = 2 137 -> 162-174, 4 175 -> 305, 8 200 -> 510-560,
// 16 190-210 -> 810-890; M = 32-1500 (the plain layout's F32 GEMM from 32 rows) 145-360 -> 550-930.
// From 32 rows the activations are thus quantized to 8 bits, as upstream ggml does for Q8_0 at
// every M (Note [numerics by M] holds: the weight's buffer and M decide, never N or the threads).
// Each group occupies the same bytes as its 8 plain rows: sizes and offsets are those of the plain
// tensor. Tensors of the buffer that do not fit the layout (see fits_repack) are stored plain.
// set/get_tensor and memset convert, so the bytes seen from outside are always the plain ones; the
// buffer is not host memory to anyone but these kernels, and the CPU refuses every op reading a
// repacked tensor except MUL_MAT's weight. Q4_1 and the Q5 types joined Q4_0 because their one-row
// kernels on plain rows (Note [nibble pairs]) are bound by their instructions (Q4_1 125-150 GFLOP/s
// with the weights in cache or not); in this layout a min costs one conversion and one FMA per
// group block, and a fifth-bit mask one masked add per nibble vector.

#include "ggml-backend-impl.h"

#include "mul_mat_common.h"

namespace wsp::cpu {

constexpr int64_t REPACK_ROWS = 8;

// the buffer type (its device is the CPU device)
wsp_ggml_backend_buffer_type_t repack_buffer_type();

// a Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 tensor of whole row groups, stored contiguous, not a view
bool fits_repack(const wsp_ggml_tensor * t);
// t's bytes are in the 8-row layout (t, or the tensor it views, lives in a CPU_REPACK buffer)
bool stored_repacked(const wsp_ggml_tensor * t);
// the CPU can compute this node: no source is stored repacked, or it is the weight of a MUL_MAT
// with F32 activations and output
bool repack_allows(const wsp_ggml_tensor * node);

// where the parts of a group block (8 rows by 32 columns) lie: bytes from its start, -1 for none
struct RepackLayout {
    size_t block; // the group block's bytes (8 plain blocks)
    int    m;     // the 8 fp16 mins
    int    qh;    // the 8 fifth-bit masks
    int    qs;    // the 4 chunks of nibbles
};

constexpr RepackLayout repack_layout(wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_Q4_1: return { 160, 16, -1, 32 };
        case WSP_GGML_TYPE_Q5_0: return { 176, -1, 16, 48 };
        case WSP_GGML_TYPE_Q5_1: return { 192, 16, 32, 64 };
        case WSP_GGML_TYPE_Q8_0: return { 272, -1, -1, 16 };
        default: return { 144, -1, -1, 16 }; // Q4_0
    }
}

// groups of 8 rows of blocks_per_row blocks of type (one fits_repack takes), plain <-> the 8-row layout
void pack_x8(wsp_ggml_type type, const void * plain, void * packed, int64_t groups, int64_t blocks_per_row);
void unpack_x8(wsp_ggml_type type, const void * packed, void * plain, int64_t groups, int64_t blocks_per_row);

namespace mm {

// MUL_MAT with a repacked weight (mul_mat_repack.cpp): activations quantized to 8 bits, every M
size_t repack_work_size(const Geometry & g, int nth);
void   repack_compute(const ComputeParams & p, const Geometry & g);

} // namespace mm

} // namespace wsp::cpu
