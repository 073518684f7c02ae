// Reference quantize / dequantize of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1 rows.
// The rounding steps (the +8.5f / +16.5f offsets, truncating casts, roundf) are those of the
// upstream reference so that files quantized here are byte-identical to upstream's. This file
// is compiled with -ffp-contract=off: `x * id + 8.5f` rounds after the multiply and after the
// add, as upstream's portable C does, whatever the target's FMA support.

#include "quants.h"

#include "fp16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace wsp {

namespace {

// value with the largest magnitude, sign kept
float signed_absmax(const float * x, int n) {
    float amax = 0.0f;
    float vmax = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            vmax = x[j];
        }
    }
    return vmax;
}

void min_max(const float * x, int n, float & mn, float & mx) {
    mn = FLT_MAX;
    mx = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        mn = std::min(mn, x[j]);
        mx = std::max(mx, x[j]);
    }
}

uint32_t load_qh(const uint8_t * qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof(v));
    return v;
}

} // namespace

void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k) {
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
        const float d  = signed_absmax(x, QK4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const uint8_t q0 = (uint8_t) std::min<int>(15, (int8_t) (x[j] * id + 8.5f));
            const uint8_t q1 = (uint8_t) std::min<int>(15, (int8_t) (x[QK4_0 / 2 + j] * id + 8.5f));
            y[i].qs[j]       = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k) {
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
        float mn, mx;
        min_max(x, QK4_1, mn, mx);
        const float d  = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        y[i].m         = fp32_to_fp16(mn);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            const uint8_t q0 = (uint8_t) std::min<int>(15, (int8_t) ((x[j] - mn) * id + 0.5f));
            const uint8_t q1 = (uint8_t) std::min<int>(15, (int8_t) ((x[QK4_1 / 2 + j] - mn) * id + 0.5f));
            y[i].qs[j]       = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k) {
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
        const float d  = signed_absmax(x, QK5_0) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        uint32_t qh    = 0;
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const uint8_t q0 = (uint8_t) std::min<int>(31, (int8_t) (x[j] * id + 16.5f));
            const uint8_t q1 = (uint8_t) std::min<int>(31, (int8_t) (x[QK5_0 / 2 + j] * id + 16.5f));
            y[i].qs[j]       = (uint8_t) ((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((uint32_t) (q0 & 0x10u) >> 4) << j;
            qh |= ((uint32_t) (q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k) {
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
        float mn, mx;
        min_max(x, QK5_1, mn, mx);
        const float d  = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        y[i].m         = fp32_to_fp16(mn);
        uint32_t qh    = 0;
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const uint8_t q0 = (uint8_t) std::min<int>(31, (uint8_t) ((x[j] - mn) * id + 0.5f));
            const uint8_t q1 = (uint8_t) std::min<int>(31, (uint8_t) ((x[QK5_1 / 2 + j] - mn) * id + 0.5f));
            y[i].qs[j]       = (uint8_t) ((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((uint32_t) (q0 & 0x10u) >> 4) << j;
            qh |= ((uint32_t) (q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) {
            amax = std::max(amax, std::fabs(x[j]));
        }
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; ++j) {
            y[i].qs[j] = (int8_t) std::round(x[j] * id);
        }
    }
}

void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k) {
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; ++j) {
            amax = std::max(amax, std::fabs(x[j]));
        }
        const float d   = amax / 127.0f;
        const float id  = d != 0.0f ? 1.0f / d : 0.0f;
        int         sum = 0;
        for (int j = 0; j < QK8_1; ++j) {
            y[i].qs[j] = (int8_t) std::round(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16((float) sum * d);
    }
}

void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k) {
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[j]             = (float) ((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = (float) ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k) {
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            y[j]             = (float) (x[i].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (float) (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k) {
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
        const float    d  = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const int h0     = (int) ((qh >> j) & 1u) << 4;
            const int h1     = (int) ((qh >> (j + QK5_0 / 2)) & 1u) << 4;
            y[j]             = (float) (((x[i].qs[j] & 0x0f) | h0) - 16) * d;
            y[j + QK5_0 / 2] = (float) (((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k) {
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
        const float    d  = fp16_to_fp32(x[i].d);
        const float    m  = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const int h0     = (int) ((qh >> j) & 1u) << 4;
            const int h1     = (int) ((qh >> (j + QK5_1 / 2)) & 1u) << 4;
            y[j]             = (float) ((x[i].qs[j] & 0x0f) | h0) * d + m;
            y[j + QK5_1 / 2] = (float) ((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; ++j) {
            y[j] = (float) x[i].qs[j] * d;
        }
    }
}

void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k) {
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; ++j) {
            y[j] = (float) x[i].qs[j] * d;
        }
    }
}

} // namespace wsp
