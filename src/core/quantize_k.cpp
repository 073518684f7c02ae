// Reference quantizers of the super-block types (quants.h): Q2_K ... Q6_K, Q8_K, TQ1_0, TQ2_0,
// IQ4_NL and IQ4_XS, each giving bit for bit the bytes of the client's reference quantization
// (whisper.rn 0.4.3's ggml, checked by Types.ConvertAsTheClient).
//
// The K-quants search each group's scale (and min) for the least weighted error, then round the
// scales themselves to 4, 6 or 8 bits under one fp16 super-block scale, and round every value again
// against the scale it will be read back with. Being bit-exact means keeping the client's order of
// float operations, including where a sum could be written more accurately: this file is built
// without FMA contraction (src/CMakeLists.txt), as quants.cpp and quants_k.cpp.

#include "fp16.h"
#include "quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace wsp {

namespace {

// groups whose largest magnitude is below this are all zero
constexpr float GROUP_MAX_EPS = 1e-15f;

// round to the nearest integer, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits
inline int nearest_int(float v) {
    const float shifted = v + 12582912.f;
    int32_t     bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) {
    return std::max(lo, std::min(hi, v));
}

// the value of largest magnitude, with its sign (the first of equal magnitudes)
inline float signed_max(const float * x, int n, float & amax) {
    float max = 0;
    amax      = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    return max;
}

// the signed value of largest magnitude of a group, or false with L zeroed for an all-zero group
// (every magnitude below GROUP_MAX_EPS: its quants and scale are 0)
bool group_max(const float * x, int n, int8_t * L, float & max) {
    float amax;
    max = signed_max(x, n, amax);
    if (amax < GROUP_MAX_EPS) {
        std::fill(L, L + n, int8_t(0));
        return false;
    }
    return true;
}

// Symmetric quants L[i] in 0 .. 2 nmax - 1 (an offset of nmax) of n values, weighted by x^2: the
// scale -max / nmax, then 18 nearby scales (nmax +- 0.1 .. 0.9), keeping the one whose least-squares
// fit explains most. Returns the fitted scale. (The client's make_qx_quants with rmse_type 1.)
float symmetric_quants(int n, int nmax, const float * x, int8_t * L) {
    float max;
    if (!group_max(x, n, L, max)) {
        return 0.f;
    }
    // the weighted sums of x l and l^2 for the quants at iscale, writing them to L when asked
    auto fit = [&](float iscale, float & sumlx, float & suml2, bool write) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (write) {
                L[i] = (int8_t) (l + nmax);
            }
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
    };
    float sumlx, suml2;
    fit(-nmax / max, sumlx, suml2, true);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best  = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) {
            continue;
        }
        const float iscale = -(nmax + 0.1f * is) / max;
        fit(iscale, sumlx, suml2, false);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            fit(iscale, sumlx, suml2, true);
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's group quants L[i] in 0 .. 2 nmax - 1: rounded at -max / nmax, then up to 5 passes that
// move single quants where that improves the x^2-weighted fit. Returns the fitted scale.
float q3_quants(int n, int nmax, const float * x, int8_t * L) {
    float max;
    if (!group_max(x, n, L, max)) {
        return 0.f;
    }
    const float iscale = -nmax / max;
    float       sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l   = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i]          = (int8_t) l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w   = x[i] * x[i];
            float       slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float     sl2 = suml2 - w * L[i] * L[i];
                const int l   = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (l != L[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i]  = (int8_t) l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) {
            break;
        }
    }
    for (int i = 0; i < n; ++i) {
        L[i] = (int8_t) (L[i] + nmax);
    }
    return sumlx / suml2;
}

// Asymmetric quants L[i] in 0 .. nmax of n values as scale * L[i] - the_min (the_min >= 0, so the
// range always holds zero): from the plain range fit, nstep + 1 scales (nmax + rmin + rdelta * step)
// each refitted by weighted least squares, keeping the least weighted error (absolute with use_mad,
// else squared). Returns the scale. (The client's make_qkx2_quants.)
float min_scale_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L, float & the_min,
                       uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        min           = std::min(min, x[i]);
        max           = std::max(max, x[i]);
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) {
        min = 0;
    }
    if (max == min) {
        std::fill(L, L + n, uint8_t(0));
        the_min = -min;
        return 0.f;
    }
    auto  error_of   = [&](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
    float iscale     = nmax / (max - min);
    float scale      = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t) clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
        best_error += weights[i] * error_of(scale * L[i] + min - x[i]);
    }
    if (nstep < 1) {
        the_min = -min;
        return scale;
    }
    for (int step = 0; step <= nstep; ++step) {
        iscale      = (rmin + rdelta * step + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l   = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i]       = (uint8_t) l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min   = 0;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0;
            for (int i = 0; i < n; ++i) {
                error += weights[i] * error_of(this_scale * Laux[i] + this_min - x[i]);
            }
            if (error < best_error) {
                std::copy(Laux, Laux + n, L);
                best_error = error;
                scale      = this_scale;
                min        = this_min;
            }
        }
    }
    the_min = -min;
    return scale;
}

// Q3_K and Q6_K: each group of 16's scale (and its quants in L) from quants(x, L), and the scale of
// largest magnitude, with its sign (the first of equal magnitudes)
template <class Quants>
float scales_of_16(const float * x, int8_t * L, float * scales, Quants && quants) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = quants(x + 16 * j, L + 16 * j);
        if (std::fabs(scales[j]) > amax) {
            amax      = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    return max_scale;
}

// Q2_K and Q3_K keep 128 values 4 to a byte: value j + 32 s of each half-block in bits 2s of byte j
void pack_2bit(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = (uint8_t) (L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

// Q4_K and Q5_K: the 8 groups' 6-bit scales and mins of a block, with d and dmin, and every value's
// quant L in 0 .. nmax against the rounded scales (groups whose scale rounds to zero keep the search's)
void quantize_scaled_groups(const float * x, int nmax, float rmin, int nstep, uint16_t & d_out, uint16_t & dmin_out,
                            uint8_t * packed_scales, uint8_t * L) {
    uint8_t Laux[32];
    float   weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float   max_scale = 0, max_min = 0; // the mins are subtracted, so the scales are never negative
    for (int j = 0; j < QK_K / 32; ++j) {
        const float * xg     = x + 32 * j;
        float         sum_x2 = 0;
        for (int l = 0; l < 32; ++l) {
            sum_x2 += xg[l] * xg[l];
        }
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) {
            weights[l] = av_x + std::fabs(xg[l]);
        }
        scales[j] = min_scale_quants(32, nmax, xg, weights, L + 32 * j, mins[j], Laux, rmin, 0.1f, nstep, false);
        max_scale = std::max(max_scale, scales[j]);
        max_min   = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min   = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        const uint8_t ls = std::min<uint8_t>(63, (uint8_t) nearest_int(inv_scale * scales[j]));
        const uint8_t lm = std::min<uint8_t>(63, (uint8_t) nearest_int(inv_min * mins[j]));
        // the layout scale_min_k4 reads (quants_k.cpp)
        if (j < 4) {
            packed_scales[j]     = ls;
            packed_scales[j + 4] = lm;
        } else {
            packed_scales[j + 4] = (uint8_t) ((ls & 0xF) | ((lm & 0xF) << 4));
            packed_scales[j - 4] |= (uint8_t) ((ls >> 4) << 6);
            packed_scales[j - 0] |= (uint8_t) ((lm >> 4) << 6);
        }
    }
    d_out    = fp32_to_fp16(max_scale / 63.f);
    dmin_out = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, packed_scales, sc, m);
        const float d = fp16_to_fp32(d_out) * sc;
        if (!d) {
            continue;
        }
        const float dm = fp16_to_fp32(dmin_out) * m;
        for (int l = 0; l < 32; ++l) {
            L[32 * j + l] = (uint8_t) clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
        }
    }
}

// IQ4_NL's 16 levels, and the index of the level nearest v (the lower one of a tie)
int nearest_level(float v) {
    const int8_t * values = kvalues_iq4nl;
    if (v <= values[0]) {
        return 0;
    }
    if (v >= values[15]) {
        return 15;
    }
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < values[mid]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return v - values[hi - 1] < values[hi] - v ? hi - 1 : hi;
}

// IQ4_NL / IQ4_XS: the quants L (level indices) of n_sub sub-blocks of 32 values, and each
// sub-block's scale. A sub-block's scale starts at max / -127 (the largest magnitude on the lowest
// level, sign flipped when ntry > 0) and is refitted by x^2-weighted least squares; with ntry > 0,
// 2 ntry + 1 further scales near it are tried for the fit alone (the quants stay the first's).
// Returns the scale of largest magnitude; an all-zero sub-block has scale 0 and the level nearest 0.
float nonlinear_sub_blocks(const float * x, int n_sub, int ntry, float * scales, uint8_t * L) {
    const int8_t * values     = kvalues_iq4nl;
    float          max_scale  = 0;
    float          amax_scale = 0;
    for (int ib = 0; ib < n_sub; ++ib) {
        const float * xb = x + 32 * ib;
        uint8_t *     Lb = L + 32 * ib;
        float         amax;
        const float   max = signed_max(xb, 32, amax);
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            std::fill(Lb, Lb + 32, (uint8_t) nearest_level(0.f));
            continue;
        }
        float d     = ntry > 0 ? -max / values[0] : max / values[0];
        float id    = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const int l   = nearest_level(id * xb[j]);
            Lb[j]         = (uint8_t) l;
            const float q = values[l];
            const float w = xb[j] * xb[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d          = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id    = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; ++j) {
                const float q = values[nearest_level(id * xb[j])];
                const float w = xb[j] * xb[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d    = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (std::fabs(d) > amax_scale) {
            amax_scale = std::fabs(d);
            max_scale  = d;
        }
    }
    return max_scale;
}

// IQ4_NL / IQ4_XS keep 32 values in 16 bytes: value j in the low nibble of byte j, j + 16 in the high
void pack_nibbles_32(const uint8_t * L, uint8_t * qs, int n_sub) {
    for (int i = 0; i < n_sub; ++i) {
        for (int j = 0; j < 16; ++j) {
            qs[16 * i + j] = (uint8_t) (L[32 * i + j] | (L[32 * i + 16 + j] << 4));
        }
    }
}

} // namespace

void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k) {
    constexpr float q4scale = 15.f;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K], Laux[16];
        float   weights[16], mins[QK_K / 16], scales[QK_K / 16];
        float   max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) {
                weights[l] = std::fabs(x[16 * j + l]);
            }
            scales[j] = min_scale_quants(16, 3, x + 16 * j, weights, L + 16 * j, mins[j], Laux, -0.5f, 0.1f, 15, true);
            max_scale = std::max(max_scale, scales[j]);
            max_min   = std::max(max_min, mins[j]);
        }
        // 4-bit scales in the low nibbles, 4-bit mins in the high ones
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        y[i].d = fp32_to_fp16(0.f);
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                y[i].scales[j] = (uint8_t) nearest_int(iscale * scales[j]);
            }
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        }
        y[i].dmin = fp32_to_fp16(0.f);
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                y[i].scales[j] |= (uint8_t) (nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) {
                continue;
            }
            const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int l = 0; l < 16; ++l) {
                L[16 * j + l] = (uint8_t) clamp_int(nearest_int((x[16 * j + l] + dm) / d), 0, 3);
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        int8_t      L[QK_K];
        float       scales[QK_K / 16];
        const float max_scale =
            scales_of_16(x, L, scales, [](const float * xg, int8_t * Lg) { return q3_quants(16, 4, xg, Lg); });
        // 16 scales of 6 bits (offset 32): the low 4 bits two to a byte in bytes 0..7, the high 2
        // bits four to a byte in bytes 8..11 (scale j in bits 2 (j / 4) of byte 8 + j % 4)
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        y[i].d = fp32_to_fp16(0.f);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                const int l = clamp_int((int8_t) nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) {
                    y[i].scales[j] = (uint8_t) (l & 0xF);
                } else {
                    y[i].scales[j - 8] |= (uint8_t) ((l & 0xF) << 4);
                }
                y[i].scales[j % 4 + 8] |= (uint8_t) ((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const int   low = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            const int   sc  = (low | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d   = fp16_to_fp32(y[i].d) * (int8_t) sc;
            if (!d) {
                continue;
            }
            for (int l = 0; l < 16; ++l) {
                L[16 * j + l] = (int8_t) (clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
            }
        }
        // the high bit of value j in bit j / 32 of hmask[j % 32]; the low 2 bits packed as Q2_K's
        std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
        uint8_t low2[QK_K];
        for (int j = 0; j < QK_K; ++j) {
            int l = L[j];
            if (l > 3) {
                y[i].hmask[j % (QK_K / 8)] |= (uint8_t) (1 << (j / (QK_K / 8)));
                l -= 4;
            }
            low2[j] = (uint8_t) l;
        }
        pack_2bit(low2, y[i].qs);
    }
}

void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K];
        quantize_scaled_groups(x, 15, -1.f, 20, y[i].d, y[i].dmin, y[i].scales, L);
        // groups 2j and 2j + 1 share bytes 32j .. 32j + 31, low and high nibbles
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[32 * j + l] = (uint8_t) (L[64 * j + l] | (L[64 * j + l + 32] << 4));
            }
        }
    }
}

void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K];
        quantize_scaled_groups(x, 31, -0.5f, 15, y[i].d, y[i].dmin, y[i].scales, L);
        // the low 4 bits as Q4_K's; the fifth bit of value l of group g is bit g of qh[l]
        std::memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) {
                const int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
                y[i].qh[l] |= (uint8_t) (((l1 >> 4) << (2 * j)) | ((l2 >> 4) << (2 * j + 1)));
                y[i].qs[32 * j + l] = (uint8_t) ((l1 & 0xF) | ((l2 & 0xF) << 4));
            }
        }
    }
}

void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        int8_t      L[QK_K];
        float       scales[QK_K / 16];
        const float max_scale =
            scales_of_16(x, L, scales, [](const float * xg, int8_t * Lg) { return symmetric_quants(16, 32, xg, Lg); });
        if (std::fabs(max_scale) < GROUP_MAX_EPS) {
            std::memset(&y[i], 0, sizeof(block_q6_K));
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d             = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            y[i].scales[ib] = (int8_t) std::min(127, nearest_int(iscale * scales[ib]));
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) {
                continue;
            }
            for (int l = 0; l < 16; ++l) {
                L[16 * j + l] = (int8_t) (clamp_int(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
            }
        }
        // each 128 values: the low 4 bits of j and j + 64 in ql[j], of j + 32 and j + 96 in
        // ql[j + 32]; the high 2 bits of j + 32 s in bits 2 s of qh[j]
        uint8_t * ql = y[i].ql;
        uint8_t * qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l]      = (uint8_t) ((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t) ((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l]      = (uint8_t) ((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        float       amax;
        const float max = signed_max(x, QK_K, amax);
        if (!amax) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, sizeof(y[i].qs));
            std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        const float iscale = -127.f / max; // 127, not 128: the largest magnitude is exactly +-127
        for (int j = 0; j < QK_K; ++j) {
            y[i].qs[j] = (int8_t) std::min(127, nearest_int(iscale * x[j]));
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) {
                sum += y[i].qs[16 * j + l];
            }
            y[i].bsums[j] = (int16_t) sum;
        }
        y[i].d = 1 / iscale;
    }
}

namespace {

// TQ1_0 / TQ2_0: the block's scale (its largest magnitude), and value v as a trit 0, 1, 2 for -1, 0, 1
float ternary_scale(const float * x, uint16_t & d) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
        amax = std::max(amax, std::fabs(x[j]));
    }
    d = fp32_to_fp16(amax);
    return amax ? 1.0f / amax : 0.0f;
}

inline int trit(float v, float id) {
    return (int) std::lround(v * id) + 1;
}

// n trits of x[0], x[stride], ... as a base-3 fraction of 3^5 scaled to a byte, rounded up, so that
// dequantize_row_tq1_0 reads digit m back as the top of (byte * 3^m * 3) >> 8
uint8_t pack_trits(const float * x, int n, int stride, float id) {
    uint8_t q = 0;
    for (int m = 0; m < n; ++m) {
        q = (uint8_t) (q * 3 + trit(x[m * stride], id));
    }
    for (int m = n; m < 5; ++m) {
        q = (uint8_t) (q * 3); // fewer than 5 trits: the first still goes to the top
    }
    return (uint8_t) (((uint16_t) q * 256 + (243 - 1)) / 243);
}

} // namespace

void quantize_row_tq1_0_ref(const float * x, block_tq1_0 * y, int64_t k) {
    constexpr int n_qs   = (int) sizeof(block_tq1_0::qs);
    constexpr int n_wide = n_qs - n_qs % 32;
    constexpr int n_qh   = (int) sizeof(block_tq1_0::qh);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float id = ternary_scale(x, y[i].d);
        // 5 trits a byte, 32 bytes at a time, then 16 at a time; then 4 trits a byte in qh
        for (int j = 0; j < n_wide; j += 32, x += 5 * 32) {
            for (int m = 0; m < 32; ++m) {
                y[i].qs[j + m] = pack_trits(x + m, 5, 32, id);
            }
        }
        for (int j = n_wide; j < n_qs; j += 16, x += 5 * 16) {
            for (int m = 0; m < 16; ++m) {
                y[i].qs[j + m] = pack_trits(x + m, 5, 16, id);
            }
        }
        for (int j = 0; j < n_qh; ++j) {
            y[i].qh[j] = pack_trits(x + j, 4, n_qh, id);
        }
        x += 4 * n_qh;
    }
}

void quantize_row_tq2_0_ref(const float * x, block_tq2_0 * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float id = ternary_scale(x, y[i].d);
        // 4 trits a byte, value m + 32 n of each 128 in bits 2 n of byte m
        for (int j = 0; j < (int) sizeof(block_tq2_0::qs); j += 32, x += 4 * 32) {
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int n = 0; n < 4; ++n) {
                    q = (uint8_t) (q + ((trit(x[m + n * 32], id) & 3) << (2 * n)));
                }
                y[i].qs[j + m] = q;
            }
        }
    }
}

void quantize_row_iq4_nl(const float * x, block_iq4_nl * y, int64_t k, int ntry) {
    for (int64_t i = 0; i < k / QK4_NL; ++i, x += QK4_NL) {
        uint8_t L[QK4_NL];
        float   scale;
        nonlinear_sub_blocks(x, 1, ntry, &scale, L);
        y[i].d = fp32_to_fp16(scale);
        if (ntry > 0) { // the quants again against the fitted scale
            const float id = scale ? 1 / scale : 0;
            for (int j = 0; j < QK4_NL; ++j) {
                L[j] = (uint8_t) nearest_level(id * x[j]);
            }
        }
        pack_nibbles_32(L, y[i].qs, 1);
    }
}

void quantize_row_iq4_nl_ref(const float * x, block_iq4_nl * y, int64_t k) {
    quantize_row_iq4_nl(x, y, k, -1);
}

void quantize_row_iq4_xs_ref(const float * x, block_iq4_xs * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t     L[QK_K];
        float       scales[QK_K / 32];
        const float max_scale = nonlinear_sub_blocks(x, QK_K / 32, 7, scales, L);
        // the sub-block scales as 6-bit multiples (offset 32) of d = -max_scale / 32, and the quants
        // again against them
        const float d  = -max_scale / 32;
        const float id = d ? 1 / d : 0.f;
        y[i].d         = fp32_to_fp16(d);
        y[i].scales_h  = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            int         l   = clamp_int(nearest_int(id * scales[ib]), -32, 31);
            const float dl  = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; ++j) {
                L[32 * ib + j] = (uint8_t) nearest_level(idl * x[32 * ib + j]);
            }
            l += 32;
            if (ib % 2 == 0) {
                y[i].scales_l[ib / 2] = (uint8_t) (l & 0xF);
            } else {
                y[i].scales_l[ib / 2] |= (uint8_t) ((l & 0xF) << 4);
            }
            y[i].scales_h |= (uint16_t) ((l >> 4) << (2 * ib));
        }
        pack_nibbles_32(L, y[i].qs, QK_K / 32);
    }
}

} // namespace wsp
