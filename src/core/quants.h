#pragma once

// Block layouts of the quantized types we compute with, bit-exact with upstream ggml
// (SPEC.md), and their reference (scalar) quantize / dequantize rows.

#include "ggml.h"

#include <cstdint>

namespace wsp {

constexpr int QK4_0 = 32;
constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK8_1 = 32;
constexpr int QK_K  = 256;

struct block_q4_0 {
    uint16_t d;             // fp16 delta
    uint8_t  qs[QK4_0 / 2]; // element j in the low nibble of qs[j], element j+16 in the high nibble
};
static_assert(sizeof(block_q4_0) == 18, "wrong q4_0 block size");

struct block_q4_1 {
    uint16_t d; // fp16 delta
    uint16_t m; // fp16 min
    uint8_t  qs[QK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "wrong q4_1 block size");

struct block_q5_0 {
    uint16_t d;
    uint8_t  qh[4]; // fifth bit of element j is bit j of the little-endian uint32
    uint8_t  qs[QK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "wrong q5_0 block size");

struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t  qh[4];
    uint8_t  qs[QK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "wrong q5_1 block size");

struct block_q8_0 {
    uint16_t d;
    int8_t   qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "wrong q8_0 block size");

struct block_q8_1 {
    uint16_t d; // fp16 delta
    uint16_t s; // fp16 d * sum(qs)
    int8_t   qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "wrong q8_1 block size");

// reference quantization: k must be a multiple of the block size
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k);
void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k);
void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k);

void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k);
void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k);
void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k);

} // namespace wsp
