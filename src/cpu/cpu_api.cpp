// The CPU type traits of ggml-cpu.h (wsp_ggml_get_type_traits_cpu: from_float, vec_dot,
// vec_dot_type, nrows) and the fp16 / bf16 / fp32 row converters. The dot products follow
// upstream's scalar reference: integer sums per block, scaled by the blocks' fp16 scales in float
// (Q4_1 / Q5_1 add the min times Q8_1's s); the float types accumulate in double (f32 by the
// vector kernel); the K-quants against Q8_K use the dot_q8 path's kernel. Types the CPU backend
// does not compute with get an all-NULL entry.

#include "ggml-cpu.h"

#include "../core/fp16.h"
#include "../core/log.h"
#include "../core/quants.h"
#include "mul_mat_kq.h"
#include "vec.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace {

using namespace wsp;

// one dot product of n values: x of the type, y of its vec_dot_type
template <typename Dot>
void for_rows(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc, Dot dot) {
    if (nrc <= 1) {
        s[0] = dot(n, x, y);
        return;
    }
    const char * xc = static_cast<const char *>(x);
    const char * yc = static_cast<const char *>(y);
    for (int j = 0; j < nrc; ++j) {
        for (int i = 0; i < nrc; ++i) {
            s[(size_t) j * bs + i] = dot(n, xc + (size_t) i * bx, yc + (size_t) j * by);
        }
    }
}

// a row length that is not whole blocks has no dot product: NaN, and the message says why
bool whole_blocks(int n, int qk, const char * type, float * s) {
    if (n >= 0 && n % qk == 0) {
        return true;
    }
    WSP_LOG_ERROR("wsp_ggml_type_traits_cpu vec_dot (%s): n = %d is not a multiple of the block size %d\n", type, n,
                  qk);
    s[0] = std::numeric_limits<float>::quiet_NaN();
    return false;
}

float dot_f32(int n, const void * x, const void * y) {
    return cpu::vec_dot_f32(static_cast<const float *>(x), static_cast<const float *>(y), n);
}

float dot_f16(int n, const void * x, const void * y) {
    const uint16_t * a   = static_cast<const uint16_t *>(x);
    const uint16_t * b   = static_cast<const uint16_t *>(y);
    double           sum = 0.0;
    for (int i = 0; i < n; ++i) {
        sum += (double) (fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]));
    }
    return (float) sum;
}

float dot_bf16(int n, const void * x, const void * y) {
    const uint16_t * a   = static_cast<const uint16_t *>(x);
    const uint16_t * b   = static_cast<const uint16_t *>(y);
    double           sum = 0.0;
    for (int i = 0; i < n; ++i) {
        sum += (double) (bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]));
    }
    return (float) sum;
}

float dot_q4_0_q8_0(int n, const void * vx, const void * vy) {
    const block_q4_0 * x    = static_cast<const block_q4_0 *>(vx);
    const block_q8_0 * y    = static_cast<const block_q8_0 *>(vy);
    float              sumf = 0.0f;
    for (int ib = 0; ib < n / QK4_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const int v0 = (x[ib].qs[j] & 0x0f) - 8;
            const int v1 = (x[ib].qs[j] >> 4) - 8;
            sumi += v0 * y[ib].qs[j] + v1 * y[ib].qs[j + QK4_0 / 2];
        }
        sumf += (float) sumi * fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d);
    }
    return sumf;
}

float dot_q4_1_q8_1(int n, const void * vx, const void * vy) {
    const block_q4_1 * x    = static_cast<const block_q4_1 *>(vx);
    const block_q8_1 * y    = static_cast<const block_q8_1 *>(vy);
    float              sumf = 0.0f;
    for (int ib = 0; ib < n / QK4_1; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; ++j) {
            sumi += (x[ib].qs[j] & 0x0f) * y[ib].qs[j] + (x[ib].qs[j] >> 4) * y[ib].qs[j + QK4_1 / 2];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * (float) sumi +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

// the 5-bit value j of a Q5 block (0..31): 4 bits from qs, the fifth from qh
template <typename Block>
int q5_value(const Block & b, int j) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    const int lo = j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4);
    return lo | (int) (((qh >> j) & 1u) << 4);
}

float dot_q5_0_q8_0(int n, const void * vx, const void * vy) {
    const block_q5_0 * x    = static_cast<const block_q5_0 *>(vx);
    const block_q8_0 * y    = static_cast<const block_q8_0 *>(vy);
    float              sumf = 0.0f;
    for (int ib = 0; ib < n / QK5_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK5_0; ++j) {
            sumi += (q5_value(x[ib], j) - 16) * y[ib].qs[j];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * (float) sumi;
    }
    return sumf;
}

float dot_q5_1_q8_1(int n, const void * vx, const void * vy) {
    const block_q5_1 * x    = static_cast<const block_q5_1 *>(vx);
    const block_q8_1 * y    = static_cast<const block_q8_1 *>(vy);
    float              sumf = 0.0f;
    for (int ib = 0; ib < n / QK5_1; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK5_1; ++j) {
            sumi += q5_value(x[ib], j) * y[ib].qs[j];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * (float) sumi +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

float dot_q8_0_q8_0(int n, const void * vx, const void * vy) {
    const block_q8_0 * x    = static_cast<const block_q8_0 *>(vx);
    const block_q8_0 * y    = static_cast<const block_q8_0 *>(vy);
    float              sumf = 0.0f;
    for (int ib = 0; ib < n / QK8_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; ++j) {
            sumi += x[ib].qs[j] * y[ib].qs[j];
        }
        sumf += (float) sumi * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

void vec_dot_f32(int n, float * WSP_GGML_RESTRICT s, size_t bs, const void * WSP_GGML_RESTRICT x, size_t bx,
                 const void * WSP_GGML_RESTRICT y, size_t by, int nrc) {
    for_rows(n, s, bs, x, bx, y, by, nrc, dot_f32);
}

void vec_dot_f16(int n, float * WSP_GGML_RESTRICT s, size_t bs, const void * WSP_GGML_RESTRICT x, size_t bx,
                 const void * WSP_GGML_RESTRICT y, size_t by, int nrc) {
    for_rows(n, s, bs, x, bx, y, by, nrc, dot_f16);
}

void vec_dot_bf16(int n, float * WSP_GGML_RESTRICT s, size_t bs, const void * WSP_GGML_RESTRICT x, size_t bx,
                  const void * WSP_GGML_RESTRICT y, size_t by, int nrc) {
    for_rows(n, s, bs, x, bx, y, by, nrc, dot_bf16);
}

#define WSP_QUANT_VEC_DOT(name, qk, type_name)                                                                      \
    void vec_dot_##name(int n, float * WSP_GGML_RESTRICT s, size_t bs, const void * WSP_GGML_RESTRICT x, size_t bx, \
                        const void * WSP_GGML_RESTRICT y, size_t by, int nrc) {                                     \
        if (whole_blocks(n, qk, type_name, s)) {                                                                    \
            for_rows(n, s, bs, x, bx, y, by, nrc, dot_##name);                                                      \
        }                                                                                                           \
    }

WSP_QUANT_VEC_DOT(q4_0_q8_0, QK4_0, "q4_0")
WSP_QUANT_VEC_DOT(q4_1_q8_1, QK4_1, "q4_1")
WSP_QUANT_VEC_DOT(q5_0_q8_0, QK5_0, "q5_0")
WSP_QUANT_VEC_DOT(q5_1_q8_1, QK5_1, "q5_1")
WSP_QUANT_VEC_DOT(q8_0_q8_0, QK8_0, "q8_0")

// the K-quants against Q8_K: the dot_q8 path's kernel (mul_mat_kq.cpp), whose integer sums are exact
#define WSP_K_VEC_DOT(name, type)                                                      \
    float dot_##name##_q8_K(int n, const void * x, const void * y) {                   \
        return cpu::mm::kq_dot(type, x, static_cast<const block_q8_K *>(y), n / QK_K); \
    }                                                                                  \
    WSP_QUANT_VEC_DOT(name##_q8_K, QK_K, #name)

WSP_K_VEC_DOT(q2_K, WSP_GGML_TYPE_Q2_K)
WSP_K_VEC_DOT(q3_K, WSP_GGML_TYPE_Q3_K)
WSP_K_VEC_DOT(q4_K, WSP_GGML_TYPE_Q4_K)
WSP_K_VEC_DOT(q5_K, WSP_GGML_TYPE_Q5_K)
WSP_K_VEC_DOT(q6_K, WSP_GGML_TYPE_Q6_K)

#undef WSP_K_VEC_DOT
#undef WSP_QUANT_VEC_DOT

void from_float_f32(const float * WSP_GGML_RESTRICT x, void * WSP_GGML_RESTRICT y, int64_t n) {
    wsp_ggml_cpu_fp32_to_fp32(x, static_cast<float *>(y), n);
}

void from_float_f16(const float * WSP_GGML_RESTRICT x, void * WSP_GGML_RESTRICT y, int64_t n) {
    wsp_ggml_cpu_fp32_to_fp16(x, static_cast<wsp_ggml_fp16_t *>(y), n);
}

void from_float_bf16(const float * WSP_GGML_RESTRICT x, void * WSP_GGML_RESTRICT y, int64_t n) {
    wsp_ggml_cpu_fp32_to_bf16(x, static_cast<wsp_ggml_bf16_t *>(y), n);
}

struct TraitsTable {
    wsp_ggml_type_traits_cpu entries[WSP_GGML_TYPE_COUNT] = {};

    TraitsTable() {
        entries[WSP_GGML_TYPE_F32]  = { from_float_f32, vec_dot_f32, WSP_GGML_TYPE_F32, 1 };
        entries[WSP_GGML_TYPE_F16]  = { from_float_f16, vec_dot_f16, WSP_GGML_TYPE_F16, 1 };
        entries[WSP_GGML_TYPE_BF16] = { from_float_bf16, vec_dot_bf16, WSP_GGML_TYPE_BF16, 1 };
        // the quantizers are the reference ones of the base library (bit-exact with upstream)
        quant(WSP_GGML_TYPE_Q4_0, vec_dot_q4_0_q8_0, WSP_GGML_TYPE_Q8_0);
        quant(WSP_GGML_TYPE_Q4_1, vec_dot_q4_1_q8_1, WSP_GGML_TYPE_Q8_1);
        quant(WSP_GGML_TYPE_Q5_0, vec_dot_q5_0_q8_0, WSP_GGML_TYPE_Q8_0);
        quant(WSP_GGML_TYPE_Q5_1, vec_dot_q5_1_q8_1, WSP_GGML_TYPE_Q8_1);
        quant(WSP_GGML_TYPE_Q8_0, vec_dot_q8_0_q8_0, WSP_GGML_TYPE_Q8_0);
        // as upstream: Q8_1 is only ever the other operand, so it has no dot product of its own
        quant(WSP_GGML_TYPE_Q8_1, nullptr, WSP_GGML_TYPE_Q8_1);
        quant(WSP_GGML_TYPE_Q2_K, vec_dot_q2_K_q8_K, WSP_GGML_TYPE_Q8_K);
        quant(WSP_GGML_TYPE_Q3_K, vec_dot_q3_K_q8_K, WSP_GGML_TYPE_Q8_K);
        quant(WSP_GGML_TYPE_Q4_K, vec_dot_q4_K_q8_K, WSP_GGML_TYPE_Q8_K);
        quant(WSP_GGML_TYPE_Q5_K, vec_dot_q5_K_q8_K, WSP_GGML_TYPE_Q8_K);
        quant(WSP_GGML_TYPE_Q6_K, vec_dot_q6_K_q8_K, WSP_GGML_TYPE_Q8_K);
        quant(WSP_GGML_TYPE_Q8_K, nullptr, WSP_GGML_TYPE_Q8_K); // the K-quants' other operand
    }

    void quant(wsp_ggml_type t, wsp_ggml_vec_dot_t dot, wsp_ggml_type dot_type) {
        entries[t] = { wsp_ggml_get_type_traits(t)->from_float_ref, dot, dot_type, 1 };
    }
};

} // namespace

extern "C" {

const struct wsp_ggml_type_traits_cpu * wsp_ggml_get_type_traits_cpu(enum wsp_ggml_type type) {
    static const TraitsTable              table;
    static const wsp_ggml_type_traits_cpu none = {};
    if ((int) type < 0 || (int) type >= WSP_GGML_TYPE_COUNT) {
        WSP_LOG_ERROR("%s: invalid type id %d\n", __func__, (int) type);
        return &none;
    }
    return &table.entries[type];
}

void wsp_ggml_cpu_fp32_to_fp32(const float * x, float * y, int64_t n) {
    if (n > 0) {
        std::memmove(y, x, (size_t) n * sizeof(float));
    }
}

void wsp_ggml_cpu_fp32_to_fp16(const float * x, wsp_ggml_fp16_t * y, int64_t n) {
    wsp_ggml_fp32_to_fp16_row(x, y, n);
}

void wsp_ggml_cpu_fp16_to_fp32(const wsp_ggml_fp16_t * x, float * y, int64_t n) {
    wsp_ggml_fp16_to_fp32_row(x, y, n);
}

void wsp_ggml_cpu_fp32_to_bf16(const float * x, wsp_ggml_bf16_t * y, int64_t n) {
    wsp_ggml_fp32_to_bf16_row_ref(x, y, n);
}

void wsp_ggml_cpu_bf16_to_fp32(const wsp_ggml_bf16_t * x, float * y, int64_t n) {
    wsp_ggml_bf16_to_fp32_row(x, y, n);
}

} // extern "C"
