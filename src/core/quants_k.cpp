// Dequantizers of the super-block types (quants.h): the K-quants, Q8_K, the ternary TQ1_0/TQ2_0
// and the non-linear IQ4_NL/IQ4_XS. Each keeps the client's order of operations (built without FMA
// contraction, as quants.cpp), so its values are bit for bit the client's reference dequantization.

#include "fp16.h"
#include "quants.h"

#include <cstring>

namespace wsp {

void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float     d   = fp16_to_fp32(x[i].d);
        const float     min = fp16_to_fp32(x[i].dmin);
        const uint8_t * q   = x[i].qs;
        int             is  = 0;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                for (int half = 0; half < 2; ++half) { // the 16 values of q[0..15], then of q[16..31]
                    const uint8_t sc = x[i].scales[is++];
                    const float   dl = d * (sc & 0xF);
                    const float   ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) {
                        *y++ = dl * ((int8_t) ((q[l + 16 * half] >> shift) & 3)) - ml;
                    }
                }
                shift += 2;
            }
            q += 32;
        }
    }
}

void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k) {
    constexpr uint32_t kmask1 = 0x03030303;
    constexpr uint32_t kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d_all = fp16_to_fp32(x[i].d);
        // the 16 6-bit scales: low 4 bits in bytes 0..7 (two a byte), high 2 bits in bytes 8..11
        uint32_t aux[4];
        std::memcpy(aux, x[i].scales, 12);
        const uint32_t tmp     = aux[2];
        aux[2]                 = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3]                 = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0]                 = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1]                 = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        const int8_t *  scales = reinterpret_cast<const int8_t *>(aux);
        const uint8_t * q      = x[i].qs;
        const uint8_t * hm     = x[i].hmask;
        uint8_t         m      = 1;
        int             is     = 0;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                for (int half = 0; half < 2; ++half) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        *y++ = dl * ((int8_t) ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
                shift += 2;
                m <<= 1;
            }
            q += 32;
        }
    }
}

namespace {

// Q4_K and Q5_K: 8 groups of 32 values, group g scaled by d times its 6-bit scale and lowered by
// dmin times its 6-bit min; quant(block, g, l) is value l of group g as an integer
template <typename Block, typename Quant>
void dequantize_scaled_groups(const Block * x, float * y, int64_t k, Quant quant) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d   = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        for (int g = 0; g < QK_K / 32; ++g) {
            uint8_t sc, m;
            scale_min_k4(g, x[i].scales, sc, m);
            const float dg = d * sc, mg = min * m;
            for (int l = 0; l < 32; ++l) {
                *y++ = dg * quant(x[i], g, l) - mg;
            }
        }
    }
}

// the low 4 bits of value l of group g: groups 2j and 2j + 1 share bytes 32j.., low and high nibbles
inline int nibble(const uint8_t * qs, int g, int l) {
    const uint8_t b = qs[32 * (g / 2) + l];
    return g % 2 == 0 ? (b & 0xF) : (b >> 4);
}

} // namespace

void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k) {
    dequantize_scaled_groups(x, y, k, [](const block_q4_K & b, int g, int l) { return nibble(b.qs, g, l); });
}

void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k) {
    // the fifth bit of value l of group g is bit g of qh[l]
    dequantize_scaled_groups(
        x, y, k, [](const block_q5_K & b, int g, int l) { return nibble(b.qs, g, l) + ((b.qh[l] >> g) & 1 ? 16 : 0); });
}

void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float     d  = fp16_to_fp32(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t *  sc = x[i].scales;
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; ++l) {
                const int    is = l / 16;
                const int8_t q1 = (int8_t) ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t) ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t) ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t) ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0]        = d * sc[is + 0] * q1;
                y[l + 32]       = d * sc[is + 2] * q2;
                y[l + 64]       = d * sc[is + 4] * q3;
                y[l + 96]       = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        for (int j = 0; j < QK_K; ++j) {
            *y++ = x[i].d * x[i].qs[j];
        }
    }
}

void dequantize_row_tq1_0(const block_tq1_0 * x, float * y, int64_t k) {
    constexpr uint8_t pow3[6] = { 1, 3, 9, 27, 81, 243 };
    // a byte holds digits as a fixed-point fraction of 3^5: multiplying by 3^n brings digit n to
    // the top, and (q * 3) >> 8 reads it
    auto digit = [&](uint8_t byte, int n) {
        const uint8_t q = (uint8_t) (byte * pow3[n]);
        return (int16_t) (((uint16_t) q * 3) >> 8);
    };
    constexpr int n_qs   = (int) sizeof(block_tq1_0::qs);
    constexpr int n_wide = n_qs - n_qs % 32; // bytes read 32 at a time, the rest 16 at a time
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < n_wide; j += 32) {
            for (int n = 0; n < 5; ++n) {
                for (int m = 0; m < 32; ++m) {
                    *y++ = (float) (digit(x[i].qs[j + m], n) - 1) * d;
                }
            }
        }
        for (int j = n_wide; j < n_qs; j += 16) {
            for (int n = 0; n < 5; ++n) {
                for (int m = 0; m < 16; ++m) {
                    *y++ = (float) (digit(x[i].qs[j + m], n) - 1) * d;
                }
            }
        }
        for (int n = 0; n < 4; ++n) {
            for (int j = 0; j < (int) sizeof(block_tq1_0::qh); ++j) {
                *y++ = (float) (digit(x[i].qh[j], n) - 1) * d;
            }
        }
    }
}

void dequantize_row_tq2_0(const block_tq2_0 * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < (int) sizeof(block_tq2_0::qs); j += 32) {
            for (int l = 0; l < 4; ++l) {
                for (int m = 0; m < 32; ++m) {
                    const int8_t q = (x[i].qs[j + m] >> (l * 2)) & 3;
                    *y++           = (float) (q - 1) * d;
                }
            }
        }
    }
}

void dequantize_row_iq4_nl(const block_iq4_nl * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK4_NL; ++i, y += QK4_NL) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; ++j) {
            y[j]              = d * kvalues_iq4nl[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

void dequantize_row_iq4_xs(const block_iq4_xs * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const uint8_t * qs = x[i].qs;
        const float     d  = fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int   ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j + 0]  = dl * kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

} // namespace wsp
