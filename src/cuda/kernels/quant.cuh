#pragma once

// Device side of the quantized block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (and Q8_1 for mul_mat
// activations), and the dequantizers (element by element) of the K-quants, IQ4_NL, IQ4_XS, TQ1_0
// and TQ2_0. The block structs are those
// of src/core/quants.h, so host and device share one layout. Quantizing a block is bit-exact with
// the CPU reference (Note [quantizer rounding]). The names below are an interface shared with the
// quantized mul_mat and flash-attention kernels: keep them stable.

#include "../../core/quants.h"
#include "common.cuh"

namespace wsp::cuda {

using wsp::block_q4_0;
using wsp::block_q4_1;
using wsp::block_q5_0;
using wsp::block_q5_1;
using wsp::block_q8_0;
using wsp::block_q8_1;

// every block type here holds 32 elements
constexpr int QK = 32;

// Note [quantizer rounding]: the CPU reference (src/core/quants.cpp) is compiled with
// -ffp-contract=off, so `x * id + 8.5f`, `(x - mn) * id + 0.5f` and the dequantizers'
// `q * d + m` round after the multiply and after the add on every CPU and with every -march
// (upstream's portable rounding; a fused multiply-add would move the rare element whose
// x * id + 8.5 lies within an ulp of an integer). The device code rounds every step as written
// (__fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn), so nvcc's own contraction cannot move a bit
// either; test_cuda_ops compares the quantized bytes.

// true for the five types that CPY, GET_ROWS and the copies below handle
inline bool is_block_quant(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_Q4_0 || t == WSP_GGML_TYPE_Q4_1 || t == WSP_GGML_TYPE_Q5_0 || t == WSP_GGML_TYPE_Q5_1 ||
           t == WSP_GGML_TYPE_Q8_0;
}

__device__ __forceinline__ float fp16_bits_to_float(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t float_to_fp16_bits(float f) {
    return __half_as_ushort(__float2half_rn(f));
}

// fifth bit of element j (0..31) of a Q5 block: bit j of qh read as a little-endian uint32
__device__ __forceinline__ int q5_high_bit(const uint8_t * qh, int j) {
    return (qh[j >> 3] >> (j & 7)) & 1;
}

// the 4-bit field of element j: elements j < 16 in the low nibbles, j + 16 in the high ones
__device__ __forceinline__ int nibble(const uint8_t * qs, int j) {
    return j < QK / 2 ? qs[j] & 0x0f : qs[j - QK / 2] >> 4;
}

// ---- dequantize element j (0..31) of one block

__device__ __forceinline__ float dequantize_q4_0(const block_q4_0 * b, int j) {
    return (float) (nibble(b->qs, j) - 8) * fp16_bits_to_float(b->d);
}

__device__ __forceinline__ float dequantize_q4_1(const block_q4_1 * b, int j) {
    return __fadd_rn(__fmul_rn((float) nibble(b->qs, j), fp16_bits_to_float(b->d)), fp16_bits_to_float(b->m));
}

__device__ __forceinline__ float dequantize_q5_0(const block_q5_0 * b, int j) {
    const int q = nibble(b->qs, j) | (q5_high_bit(b->qh, j) << 4);
    return (float) (q - 16) * fp16_bits_to_float(b->d);
}

__device__ __forceinline__ float dequantize_q5_1(const block_q5_1 * b, int j) {
    const int q = nibble(b->qs, j) | (q5_high_bit(b->qh, j) << 4);
    return __fadd_rn(__fmul_rn((float) q, fp16_bits_to_float(b->d)), fp16_bits_to_float(b->m));
}

__device__ __forceinline__ float dequantize_q8_0(const block_q8_0 * b, int j) {
    return (float) b->qs[j] * fp16_bits_to_float(b->d);
}

__device__ __forceinline__ float dequantize_q8_1(const block_q8_1 * b, int j) {
    return (float) b->qs[j] * fp16_bits_to_float(b->d);
}

// element j of a block of compile-time type T (a wsp_ggml_type), for templated kernels
template <int T>
__device__ __forceinline__ float dequantize(const void * block, int j) {
    if constexpr (T == WSP_GGML_TYPE_Q4_0) {
        return dequantize_q4_0(static_cast<const block_q4_0 *>(block), j);
    } else if constexpr (T == WSP_GGML_TYPE_Q4_1) {
        return dequantize_q4_1(static_cast<const block_q4_1 *>(block), j);
    } else if constexpr (T == WSP_GGML_TYPE_Q5_0) {
        return dequantize_q5_0(static_cast<const block_q5_0 *>(block), j);
    } else if constexpr (T == WSP_GGML_TYPE_Q5_1) {
        return dequantize_q5_1(static_cast<const block_q5_1 *>(block), j);
    } else if constexpr (T == WSP_GGML_TYPE_Q8_0) {
        return dequantize_q8_0(static_cast<const block_q8_0 *>(block), j);
    } else {
        static_assert(T == WSP_GGML_TYPE_Q8_1, "dequantize: not a block type of quant.cuh");
        return dequantize_q8_1(static_cast<const block_q8_1 *>(block), j);
    }
}

// element i of a row of blocks whose type, one of is_block_quant's, is known at run time: what
// dequantize_row_elem does for these types, without the cases of the others, for kernels that
// inline it in several places (flash attention's K and V reads)
__device__ __forceinline__ float dequantize_block_row_elem(int type, const char * row, int64_t i) {
    const int j = (int) (i % QK);
    switch (type) {
        case WSP_GGML_TYPE_Q4_0: return dequantize_q4_0(reinterpret_cast<const block_q4_0 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q4_1: return dequantize_q4_1(reinterpret_cast<const block_q4_1 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q5_0: return dequantize_q5_0(reinterpret_cast<const block_q5_0 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q5_1: return dequantize_q5_1(reinterpret_cast<const block_q5_1 *>(row) + i / QK, j);
        default: return dequantize_q8_0(reinterpret_cast<const block_q8_0 *>(row) + i / QK, j);
    }
}

// ---- the K-quants (super-blocks of QK_K = 256): element j of one block, bit for bit the CPU's
// to_float (src/core/quants_k.cpp: the same products, rounded as written)

using wsp::block_q2_K;
using wsp::block_q3_K;
using wsp::block_q4_K;
using wsp::block_q5_K;
using wsp::block_q6_K;
using wsp::QK_K;

// Q2_K ... Q6_K: GET_ROWS, MUL_MAT (mul_mat_q.cu) and MUL_MAT_ID read them element by element
inline bool is_k_quant(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_Q2_K || t == WSP_GGML_TYPE_Q3_K || t == WSP_GGML_TYPE_Q4_K || t == WSP_GGML_TYPE_Q5_K ||
           t == WSP_GGML_TYPE_Q6_K;
}

// IQ4_NL, IQ4_XS and the ternary TQ1_0, TQ2_0: read element by element as the K-quants are
inline bool is_other_elem_quant(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_IQ4_NL || t == WSP_GGML_TYPE_IQ4_XS || t == WSP_GGML_TYPE_TQ1_0 ||
           t == WSP_GGML_TYPE_TQ2_0;
}

// the types MUL_MAT reads element by element (no 8-bit activation path): the K-quants and the others
inline bool is_elem_quant(wsp_ggml_type t) {
    return is_k_quant(t) || is_other_elem_quant(t);
}

// the types dequantize_row_elem reads: every type the CPU converts to float but the float types
inline bool is_dequantizable(wsp_ggml_type t) {
    return is_block_quant(t) || is_elem_quant(t);
}

// Q2_K / Q3_K / Q6_K value j sits at half n = j / 128, shift group s = (j % 128) / 32, byte l = j % 32
// of its half; its 16-value scale is number 8 n + 2 s + l / 16
__device__ __forceinline__ float dequantize_q2_K(const block_q2_K * b, int j) {
    const int     n = j / 128, s = (j % 128) / 32, l = j % 32;
    const uint8_t sc = b->scales[8 * n + 2 * s + l / 16];
    const int     q  = (b->qs[32 * n + l] >> (2 * s)) & 3;
    const float   dl = __fmul_rn(fp16_bits_to_float(b->d), (float) (sc & 0xF));
    const float   ml = __fmul_rn(fp16_bits_to_float(b->dmin), (float) (sc >> 4));
    return __fsub_rn(__fmul_rn(dl, (float) q), ml);
}

__device__ __forceinline__ float dequantize_q3_K(const block_q3_K * b, int j) {
    const int n = j / 128, s = (j % 128) / 32, l = j % 32, is = 8 * n + 2 * s + l / 16;
    // the 6-bit scale: the low 4 bits in bytes 0..7, the high 2 in bytes 8..11
    const int   low  = is < 8 ? b->scales[is] & 0xF : b->scales[is - 8] >> 4;
    const int   high = (b->scales[8 + is % 4] >> (2 * (is / 4))) & 3;
    const float dl   = __fmul_rn(fp16_bits_to_float(b->d), (float) ((low | (high << 4)) - 32));
    const int   hbit = (b->hmask[l] >> (4 * n + s)) & 1;
    const int   q    = ((b->qs[32 * n + l] >> (2 * s)) & 3) - (hbit ? 0 : 4);
    return __fmul_rn(dl, (float) q);
}

// Q4_K / Q5_K: group g = j / 32 has a 6-bit scale and min (the CPU's scale_min_k4)
__device__ __forceinline__ void scale_min_k4_dev(int g, const uint8_t * q, int & d, int & m) {
    if (g < 4) {
        d = q[g] & 63;
        m = q[g + 4] & 63;
    } else {
        d = (q[g + 4] & 0xF) | ((q[g - 4] >> 6) << 4);
        m = (q[g + 4] >> 4) | ((q[g] >> 6) << 4);
    }
}

template <typename Block>
__device__ __forceinline__ float dequantize_k4_group(const Block * b, int j, int q) {
    int sc, m;
    scale_min_k4_dev(j / 32, b->scales, sc, m);
    const float dg = __fmul_rn(fp16_bits_to_float(b->d), (float) sc);
    const float mg = __fmul_rn(fp16_bits_to_float(b->dmin), (float) m);
    return __fsub_rn(__fmul_rn(dg, (float) q), mg);
}

// groups 2i and 2i + 1 share bytes 32i .., low and high nibbles
__device__ __forceinline__ int k4_nibble(const uint8_t * qs, int j) {
    const int     g = j / 32;
    const uint8_t v = qs[32 * (g / 2) + j % 32];
    return g % 2 == 0 ? (v & 0xF) : (v >> 4);
}

__device__ __forceinline__ float dequantize_q4_K(const block_q4_K * b, int j) {
    return dequantize_k4_group(b, j, k4_nibble(b->qs, j));
}

__device__ __forceinline__ float dequantize_q5_K(const block_q5_K * b, int j) {
    const int high = (b->qh[j % 32] >> (j / 32)) & 1;
    return dequantize_k4_group(b, j, k4_nibble(b->qs, j) | (high << 4));
}

__device__ __forceinline__ float dequantize_q6_K(const block_q6_K * b, int j) {
    const int       n = j / 128, t = (j % 128) / 32, l = j % 32;
    const uint8_t * ql  = b->ql + 64 * n + 32 * (t % 2);
    const int       low = t < 2 ? ql[l] & 0xF : ql[l] >> 4;
    const int       q   = (low | (((b->qh[32 * n + l] >> (2 * t)) & 3) << 4)) - 32;
    const float     dsc = __fmul_rn(fp16_bits_to_float(b->d), (float) b->scales[8 * n + l / 16 + 2 * t]);
    return __fmul_rn(dsc, (float) q);
}

// ---- IQ4_NL / IQ4_XS (non-linear 4-bit levels) and TQ1_0 / TQ2_0 (ternary): element j of one
// block, bit for bit the CPU's to_float (src/core/quants_k.cpp)

using wsp::block_iq4_nl;
using wsp::block_iq4_xs;
using wsp::block_tq1_0;
using wsp::block_tq2_0;
using wsp::QK4_NL;

static __device__ __constant__ int8_t kvalues_iq4nl_dev[16] = WSP_KVALUES_IQ4NL;

// value j of 32 packed in 16 bytes: the low nibbles first, then the high ones
__device__ __forceinline__ int iq4_level(const uint8_t * qs, int j) {
    return kvalues_iq4nl_dev[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4];
}

__device__ __forceinline__ float dequantize_iq4_nl(const block_iq4_nl * b, int j) {
    return __fmul_rn(fp16_bits_to_float(b->d), (float) iq4_level(b->qs, j));
}

// 8 groups of 32, each with a 6-bit scale (low 4 bits in scales_l, high 2 in scales_h) less 32
__device__ __forceinline__ float dequantize_iq4_xs(const block_iq4_xs * b, int j) {
    const int   g  = j / 32;
    const int   ls = ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((b->scales_h >> (2 * g)) & 3) << 4);
    const float dl = __fmul_rn(fp16_bits_to_float(b->d), (float) (ls - 32));
    return __fmul_rn(dl, (float) iq4_level(b->qs + 16 * g, j % 32));
}

// 2 bits a value; bytes in two halves of 32, each byte's pairs of bits 32 values apart
__device__ __forceinline__ float dequantize_tq2_0(const block_tq2_0 * b, int j) {
    const int q = (b->qs[32 * (j / 128) + j % 32] >> (2 * ((j % 128) / 32))) & 3;
    return __fmul_rn((float) (q - 1), fp16_bits_to_float(b->d));
}

// base-3 digit n (0..4) of a byte holding them as a fraction of 3^5 (the CPU's digit())
__device__ __forceinline__ int tq1_digit(uint8_t byte, int n) {
    constexpr uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
    return (int) (((unsigned) (uint8_t) (byte * pow3[n]) * 3u) >> 8);
}

// the first 32 bytes give 5 x 32 values, the next 16 bytes 5 x 16, the 4 bytes of qh 4 x 4
__device__ __forceinline__ float dequantize_tq1_0(const block_tq1_0 * b, int j) {
    int digit = 0;
    if (j < 160) {
        digit = tq1_digit(b->qs[j % 32], j / 32);
    } else if (j < 240) {
        digit = tq1_digit(b->qs[32 + (j - 160) % 16], (j - 160) / 16);
    } else {
        digit = tq1_digit(b->qh[(j - 240) % 4], (j - 240) / 4);
    }
    return __fmul_rn((float) (digit - 1), fp16_bits_to_float(b->d));
}

// element i of a row of blocks whose type is known at run time (a uniform branch); type must be
// one of is_dequantizable's
__device__ __forceinline__ float dequantize_row_elem(int type, const char * row, int64_t i) {
    const int j = (int) (i % QK);
    switch (type) {
        case WSP_GGML_TYPE_Q2_K:
            return dequantize_q2_K(reinterpret_cast<const block_q2_K *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_Q3_K:
            return dequantize_q3_K(reinterpret_cast<const block_q3_K *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_Q4_K:
            return dequantize_q4_K(reinterpret_cast<const block_q4_K *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_Q5_K:
            return dequantize_q5_K(reinterpret_cast<const block_q5_K *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_Q6_K:
            return dequantize_q6_K(reinterpret_cast<const block_q6_K *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_IQ4_NL:
            return dequantize_iq4_nl(reinterpret_cast<const block_iq4_nl *>(row) + i / QK4_NL, (int) (i % QK4_NL));
        case WSP_GGML_TYPE_IQ4_XS:
            return dequantize_iq4_xs(reinterpret_cast<const block_iq4_xs *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_TQ1_0:
            return dequantize_tq1_0(reinterpret_cast<const block_tq1_0 *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_TQ2_0:
            return dequantize_tq2_0(reinterpret_cast<const block_tq2_0 *>(row) + i / QK_K, (int) (i % QK_K));
        case WSP_GGML_TYPE_Q4_0: return dequantize_q4_0(reinterpret_cast<const block_q4_0 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q4_1: return dequantize_q4_1(reinterpret_cast<const block_q4_1 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q5_0: return dequantize_q5_0(reinterpret_cast<const block_q5_0 *>(row) + i / QK, j);
        case WSP_GGML_TYPE_Q5_1: return dequantize_q5_1(reinterpret_cast<const block_q5_1 *>(row) + i / QK, j);
        default: return dequantize_q8_0(reinterpret_cast<const block_q8_0 *>(row) + i / QK, j);
    }
}

// ---- quantize one block of 32 values; x stays in registers when the caller's loops unroll

// the element of largest magnitude, sign kept; the first one wins ties, as on the CPU
__device__ __forceinline__ float signed_absmax(const float (&x)[QK]) {
    float amax = 0.0f, vmax = 0.0f;
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            vmax = x[j];
        }
    }
    return vmax;
}

// min and max with std::min / std::max's comparisons, from FLT_MAX / -FLT_MAX
__device__ __forceinline__ void block_min_max(const float (&x)[QK], float & mn, float & mx) {
    mn = 3.402823466e+38f;
    mx = -3.402823466e+38f;
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        mn = x[j] < mn ? x[j] : mn;
        mx = mx < x[j] ? x[j] : mx;
    }
}

__device__ __forceinline__ float inverse_or_zero(float d) {
    return d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
}

// q = min(top, trunc(v)) as the reference's integer casts do for v in [0, top + 1]
__device__ __forceinline__ int level(float v, int top) {
    return min(top, (int) v);
}

__device__ __forceinline__ void quantize_q4_0(const float (&x)[QK], block_q4_0 * y) {
    const float d  = __fdiv_rn(signed_absmax(x), -8.0f);
    const float id = inverse_or_zero(d);
    y->d           = float_to_fp16_bits(d);
#pragma unroll
    for (int j = 0; j < QK / 2; ++j) {
        const int q0 = level(__fadd_rn(__fmul_rn(x[j], id), 8.5f), 15);
        const int q1 = level(__fadd_rn(__fmul_rn(x[j + QK / 2], id), 8.5f), 15);
        y->qs[j]     = (uint8_t) (q0 | (q1 << 4));
    }
}

__device__ __forceinline__ void quantize_q4_1(const float (&x)[QK], block_q4_1 * y) {
    float mn, mx;
    block_min_max(x, mn, mx);
    const float d  = __fdiv_rn(__fsub_rn(mx, mn), 15.0f);
    const float id = inverse_or_zero(d);
    y->d           = float_to_fp16_bits(d);
    y->m           = float_to_fp16_bits(mn);
#pragma unroll
    for (int j = 0; j < QK / 2; ++j) {
        const int q0 = level(__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f), 15);
        const int q1 = level(__fadd_rn(__fmul_rn(__fsub_rn(x[j + QK / 2], mn), id), 0.5f), 15);
        y->qs[j]     = (uint8_t) (q0 | (q1 << 4));
    }
}

// the fifth bits go to qh as one little-endian uint32, written byte by byte (qh is unaligned)
__device__ __forceinline__ void store_qh(uint8_t * qh, uint32_t bits) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        qh[k] = (uint8_t) (bits >> (8 * k));
    }
}

__device__ __forceinline__ void quantize_q5_0(const float (&x)[QK], block_q5_0 * y) {
    const float d  = __fdiv_rn(signed_absmax(x), -16.0f);
    const float id = inverse_or_zero(d);
    y->d           = float_to_fp16_bits(d);
    uint32_t qh    = 0;
#pragma unroll
    for (int j = 0; j < QK / 2; ++j) {
        const int q0 = level(__fadd_rn(__fmul_rn(x[j], id), 16.5f), 31);
        const int q1 = level(__fadd_rn(__fmul_rn(x[j + QK / 2], id), 16.5f), 31);
        y->qs[j]     = (uint8_t) ((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= (uint32_t) ((q0 >> 4) & 1) << j;
        qh |= (uint32_t) ((q1 >> 4) & 1) << (j + QK / 2);
    }
    store_qh(y->qh, qh);
}

__device__ __forceinline__ void quantize_q5_1(const float (&x)[QK], block_q5_1 * y) {
    float mn, mx;
    block_min_max(x, mn, mx);
    const float d  = __fdiv_rn(__fsub_rn(mx, mn), 31.0f);
    const float id = inverse_or_zero(d);
    y->d           = float_to_fp16_bits(d);
    y->m           = float_to_fp16_bits(mn);
    uint32_t qh    = 0;
#pragma unroll
    for (int j = 0; j < QK / 2; ++j) {
        const int q0 = level(__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f), 31);
        const int q1 = level(__fadd_rn(__fmul_rn(__fsub_rn(x[j + QK / 2], mn), id), 0.5f), 31);
        y->qs[j]     = (uint8_t) ((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= (uint32_t) ((q0 >> 4) & 1) << j;
        qh |= (uint32_t) ((q1 >> 4) & 1) << (j + QK / 2);
    }
    store_qh(y->qh, qh);
}

__device__ __forceinline__ float block_absmax(const float (&x)[QK]) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        amax = amax < fabsf(x[j]) ? fabsf(x[j]) : amax;
    }
    return amax;
}

// round() halves away from zero, as std::round on the CPU
__device__ __forceinline__ void quantize_q8_0(const float (&x)[QK], block_q8_0 * y) {
    const float d  = __fdiv_rn(block_absmax(x), 127.0f);
    const float id = inverse_or_zero(d);
    y->d           = float_to_fp16_bits(d);
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        y->qs[j] = (int8_t) roundf(__fmul_rn(x[j], id));
    }
}

// Q8_1 for mul_mat activations (not a CPY target, as on the CPU): s = fp16(d * sum(qs))
__device__ __forceinline__ void quantize_q8_1(const float (&x)[QK], block_q8_1 * y) {
    const float d   = __fdiv_rn(block_absmax(x), 127.0f);
    const float id  = inverse_or_zero(d);
    int         sum = 0;
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        const int q = (int) roundf(__fmul_rn(x[j], id));
        y->qs[j]    = (int8_t) q;
        sum += q;
    }
    y->d = float_to_fp16_bits(d);
    y->s = float_to_fp16_bits(__fmul_rn((float) sum, d));
}

// one block of a run-time type (one of is_block_quant's) at dst
__device__ __forceinline__ void quantize_block(int type, const float (&x)[QK], char * dst) {
    switch (type) {
        case WSP_GGML_TYPE_Q4_0: quantize_q4_0(x, reinterpret_cast<block_q4_0 *>(dst)); break;
        case WSP_GGML_TYPE_Q4_1: quantize_q4_1(x, reinterpret_cast<block_q4_1 *>(dst)); break;
        case WSP_GGML_TYPE_Q5_0: quantize_q5_0(x, reinterpret_cast<block_q5_0 *>(dst)); break;
        case WSP_GGML_TYPE_Q5_1: quantize_q5_1(x, reinterpret_cast<block_q5_1 *>(dst)); break;
        default: quantize_q8_0(x, reinterpret_cast<block_q8_0 *>(dst)); break;
    }
}

// ---- row converters (quant.cu), enqueued on ctx's stream. Row r of src goes to row r of dst,
// each unravelled with its own shape (as the CPU's row copy), so the shapes may differ beyond
// dim 0; ne0 is the same on both sides and a multiple of QK, and the quantized side has its
// blocks packed along dim 0 (nb[0] == type size).

// dst (quantized) = src (F32/F16/BF16, any strides, or quantized of another type)
bool quantize_rows(LaunchCtx & ctx, const TensorView & src, const TensorView & dst, int64_t rows);
// dst (F32/F16/BF16, any strides) = src (quantized)
bool dequantize_rows(LaunchCtx & ctx, const TensorView & src, const TensorView & dst, int64_t rows);

} // namespace wsp::cuda
