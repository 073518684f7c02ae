#pragma once

// Block layouts of the quantized types we compute with, bit-exact with upstream ggml
// (SPEC.md), and their reference (scalar) quantize / dequantize rows.

#include "ggml.h"
#include "log.h"

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

// The super-block types (QK_K = 256 values a block; quants_k.cpp): their layouts and dequantizers,
// in the client's order of operations (the file is built without FMA contraction, as quants.cpp),
// so that every value comes out bit for bit as the client's reference dequantization gives it.
struct block_q2_K {
    uint8_t  scales[QK_K / 16]; // low nibble: scale, high nibble: min, of each 16 values
    uint8_t  qs[QK_K / 4];      // 2-bit quants
    uint16_t d;                 // fp16 super-block scale of the scales
    uint16_t dmin;              // fp16 super-block scale of the mins
};
static_assert(sizeof(block_q2_K) == 84, "wrong q2_K block size");

struct block_q3_K {
    uint8_t  hmask[QK_K / 8]; // the high bit of each quant
    uint8_t  qs[QK_K / 4];    // the low 2 bits
    uint8_t  scales[12];      // 16 scales of 6 bits
    uint16_t d;
};
static_assert(sizeof(block_q3_K) == 110, "wrong q3_K block size");

struct block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[12]; // 8 scales and 8 mins of 6 bits
    uint8_t  qs[QK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "wrong q4_K block size");

struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[12];
    uint8_t  qh[QK_K / 8]; // the fifth bit
    uint8_t  qs[QK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176, "wrong q5_K block size");

struct block_q6_K {
    uint8_t  ql[QK_K / 2];      // the low 4 bits
    uint8_t  qh[QK_K / 4];      // the high 2 bits
    int8_t   scales[QK_K / 16]; // 8-bit scales of each 16 values
    uint16_t d;
};
static_assert(sizeof(block_q6_K) == 210, "wrong q6_K block size");

struct block_q8_K {
    float   d; // an f32 scale
    int8_t  qs[QK_K];
    int16_t bsums[QK_K / 16]; // sums of each 16 quants
};
static_assert(sizeof(block_q8_K) == 292, "wrong q8_K block size");

struct block_tq1_0 {
    uint8_t  qs[(QK_K - 4 * QK_K / 64) / 5]; // 5 ternary digits a byte (base 3, scaled to 0..255)
    uint8_t  qh[QK_K / 64];                  // 4 ternary digits a byte
    uint16_t d;
};
static_assert(sizeof(block_tq1_0) == 54, "wrong tq1_0 block size");

struct block_tq2_0 {
    uint8_t  qs[QK_K / 4]; // 2 bits a value: 0, 1, 2 for -1, 0, 1
    uint16_t d;
};
static_assert(sizeof(block_tq2_0) == 66, "wrong tq2_0 block size");

constexpr int QK4_NL = 32;

struct block_iq4_nl {
    uint16_t d;
    uint8_t  qs[QK4_NL / 2]; // indices into the non-linear table kvalues_iq4nl
};
static_assert(sizeof(block_iq4_nl) == 18, "wrong iq4_nl block size");

struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;            // the high 2 bits of each of the 8 scales
    uint8_t  scales_l[QK_K / 64]; // the low 4 bits
    uint8_t  qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs) == 136, "wrong iq4_xs block size");

// The grid i-quants (Note [client codebooks] in cmake/iq_grids.cmake): groups of 8 (or 4) weights
// as indices into a codebook, with signs and scales per 32 weights
struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[QK_K / 8]; // per 32 weights: 4 codebook bytes, then 4 x 7 sign bits and a 4-bit scale
};
static_assert(sizeof(block_iq2_xxs) == 66, "wrong iq2_xxs block size");

struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[QK_K / 8]; // per 8 weights: a 9-bit codebook index and 7 sign bits
    uint8_t  scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_xs) == 74, "wrong iq2_xs block size");

struct block_iq2_s {
    uint16_t d;
    uint8_t  qs[QK_K / 4]; // the codebook indices' low 8 bits, then the sign bytes
    uint8_t  qh[QK_K / 32];
    uint8_t  scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_s) == 82, "wrong iq2_s block size");

struct block_iq3_xxs {
    uint16_t d;
    uint8_t  qs[3 * QK_K / 8]; // 64 codebook bytes, then per 32 weights 4 x 7 sign bits and a 4-bit scale
};
static_assert(sizeof(block_iq3_xxs) == 98, "wrong iq3_xxs block size");

struct block_iq3_s {
    uint16_t d;
    uint8_t  qs[QK_K / 4];
    uint8_t  qh[QK_K / 32];
    uint8_t  signs[QK_K / 8];
    uint8_t  scales[QK_K / 64];
};
static_assert(sizeof(block_iq3_s) == 110, "wrong iq3_s block size");

struct block_iq1_s {
    uint16_t d;
    uint8_t  qs[QK_K / 8];
    uint16_t qh[QK_K / 32]; // per 32 weights: 4 x 3 high index bits, a 3-bit scale, the delta's sign
};
static_assert(sizeof(block_iq1_s) == 50, "wrong iq1_s block size");

struct block_iq1_m {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];     // per 8 weights: 3 high index bits and the delta's sign
    uint8_t scales[QK_K / 32]; // 3-bit scales; the fp16 d in the top nibbles of its four 16-bit words
};
static_assert(sizeof(block_iq1_m) == 56, "wrong iq1_m block size");

// the 6-bit scale and min j (0..7) of a Q4_K / Q5_K block: j < 4 in the low 6 bits of bytes j and
// j + 4; the others' low 4 bits in byte j + 4, their high 2 bits in the top bits of bytes j - 4, j
inline void scale_min_k4(int j, const uint8_t * q, uint8_t & d, uint8_t & m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (uint8_t) ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = (uint8_t) ((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// IQ4_NL's and IQ4_XS's 16 levels (the initializer is shared with the CUDA kernels' table)
#define WSP_KVALUES_IQ4NL \
    { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 }
inline constexpr int8_t kvalues_iq4nl[16] = WSP_KVALUES_IQ4NL;

void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k);
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k);
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k);
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k);
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k);
void dequantize_row_tq1_0(const block_tq1_0 * x, float * y, int64_t k);
void dequantize_row_tq2_0(const block_tq2_0 * x, float * y, int64_t k);
void dequantize_row_iq4_nl(const block_iq4_nl * x, float * y, int64_t k);
void dequantize_row_iq4_xs(const block_iq4_xs * x, float * y, int64_t k);

// Note [even signs]: IQ2 and IQ3_XXS keep 7 of each 8 weights' sign bits; the eighth makes the
// count of negative weights even. Sign byte of the 7-bit index i: i, with bit 7 its parity.
constexpr uint8_t iq_even_signs(uint32_t i) {
    uint32_t p = i ^ (i >> 4); // the parity of i's 7 bits, folded (no builtin: nvcc includes this)
    p ^= p >> 2;
    p ^= p >> 1;
    return (uint8_t) (i | ((p & 1) << 7));
}

// the grid i-quants' codebooks (quants_iq.cpp, Note [client codebooks]), for the CPU kernels
struct IqCodebooks {
    const uint64_t * iq2xxs; // 256 points of 8 bytes
    const uint64_t * iq2xs;  // 512
    const uint64_t * iq2s;   // 1024
    const uint32_t * iq3xxs; // 256 points of 4 bytes
    const uint32_t * iq3s;   // 512
    const uint64_t * iq1s;   // 2048 points of 8 signed bytes (-1, 0, 1)
};
// null where the build has no codebooks
WSP_INTERNAL_API const IqCodebooks * iq_codebooks();

// the grid i-quants' dequantizers (quants_iq.cpp), defined where the build has the client's
// codebooks (WSP_GGML_IQ_GRIDS); without them the types are storage-only
void dequantize_row_iq2_xxs(const block_iq2_xxs * x, float * y, int64_t k);
void dequantize_row_iq2_xs(const block_iq2_xs * x, float * y, int64_t k);
void dequantize_row_iq2_s(const block_iq2_s * x, float * y, int64_t k);
void dequantize_row_iq3_xxs(const block_iq3_xxs * x, float * y, int64_t k);
void dequantize_row_iq3_s(const block_iq3_s * x, float * y, int64_t k);
void dequantize_row_iq1_s(const block_iq1_s * x, float * y, int64_t k);
void dequantize_row_iq1_m(const block_iq1_m * x, float * y, int64_t k);

// Their reference quantizers (quantize_k.cpp), bit for bit the client's reference quantization
// (from_float_ref of its type traits). IQ4_NL's reference tries no scales beyond its first fit;
// wsp_ggml_quantize_chunk, as the client's, quantizes IQ4_NL with ntry = 7 (15 more).
void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k);
void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k);
void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k);
void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k);
void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k);
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k);
void quantize_row_tq1_0_ref(const float * x, block_tq1_0 * y, int64_t k);
void quantize_row_tq2_0_ref(const float * x, block_tq2_0 * y, int64_t k);
void quantize_row_iq4_nl_ref(const float * x, block_iq4_nl * y, int64_t k);
void quantize_row_iq4_nl(const float * x, block_iq4_nl * y, int64_t k, int ntry);
void quantize_row_iq4_xs_ref(const float * x, block_iq4_xs * y, int64_t k);

} // namespace wsp
