// The quantization entry points of ggml.h, under our names (wsp_ggml_quantize_*) and under the
// doubled-prefix names whisper.rn's header declares (wsp_ggml_wsp_quantize_*), and
// wsp_ggml_validate_row_data. quantize_chunk writes upstream's reference rounding, bit for bit.
// An importance matrix (imatrix) is not used: upstream searches Q4/Q5 scales by its weights, which
// this library does not implement; the rows are then rounded as without one, and a warning says so
// once. Errors are logged and answered with 0 / false, never an abort.

#include "fp16.h"
#include "log.h"
#include "quants.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

namespace {

using namespace wsp;

bool valid_type(enum wsp_ggml_type type) {
    return (int) type >= 0 && (int) type < WSP_GGML_TYPE_COUNT && wsp_ggml_blck_size(type) != 0;
}

// the types quantize_chunk writes
bool quantizable(enum wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_F32:
        case WSP_GGML_TYPE_F16:
        case WSP_GGML_TYPE_BF16:
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_0:
        case WSP_GGML_TYPE_Q5_1:
        case WSP_GGML_TYPE_Q8_0:
        case WSP_GGML_TYPE_Q2_K:
        case WSP_GGML_TYPE_Q3_K:
        case WSP_GGML_TYPE_Q4_K:
        case WSP_GGML_TYPE_Q5_K:
        case WSP_GGML_TYPE_Q6_K:
        case WSP_GGML_TYPE_Q8_K:
        case WSP_GGML_TYPE_TQ1_0:
        case WSP_GGML_TYPE_TQ2_0:
        case WSP_GGML_TYPE_IQ4_NL:
        case WSP_GGML_TYPE_IQ4_XS: return true;
        default: return false;
    }
}

constexpr const char * QUANTIZABLE =
    "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, tq1_0, tq2_0, iq4_nl, iq4_xs";

//
// validate_row_data
//

// where a block keeps its scales: one or two fp16 (d, and m / dmin / s), or one f32 d
struct ScaleLayout {
    int          d_offset;      // -1: nothing to check (integer types)
    int          second_offset; // -1: no second fp16 scale
    const char * second_name;
    bool         d_is_f32;
};

ScaleLayout scale_layout(enum wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q5_0:
        case WSP_GGML_TYPE_Q8_0:
        case WSP_GGML_TYPE_IQ1_S:
        case WSP_GGML_TYPE_IQ2_XXS:
        case WSP_GGML_TYPE_IQ2_XS:
        case WSP_GGML_TYPE_IQ2_S:
        case WSP_GGML_TYPE_IQ3_XXS:
        case WSP_GGML_TYPE_IQ3_S:
        case WSP_GGML_TYPE_IQ4_NL:
        case WSP_GGML_TYPE_IQ4_XS: return { 0, -1, nullptr, false };
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_1: return { 0, 2, "m", false };
        case WSP_GGML_TYPE_Q8_1: return { 0, 2, "s", false };
        case WSP_GGML_TYPE_Q4_K:
        case WSP_GGML_TYPE_Q5_K: return { 0, 2, "dmin", false };
        case WSP_GGML_TYPE_Q2_K: return { 80, 82, "dmin", false };
        case WSP_GGML_TYPE_Q3_K: return { 108, -1, nullptr, false };
        case WSP_GGML_TYPE_Q6_K: return { 208, -1, nullptr, false };
        case WSP_GGML_TYPE_TQ1_0: return { 52, -1, nullptr, false };
        case WSP_GGML_TYPE_TQ2_0: return { 64, -1, nullptr, false };
        case WSP_GGML_TYPE_Q8_K: return { 0, -1, nullptr, true };
        default: return { -1, -1, nullptr, false };
    }
}

uint16_t load_u16(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

// NaN / Inf of an fp16 or bf16 by its exponent bits
const char * fp16_problem(uint16_t h) {
    if ((h & 0x7c00) != 0x7c00) {
        return nullptr;
    }
    return (h & 0x03ff) != 0 ? "NaN" : "infinite";
}

const char * bf16_problem(uint16_t b) {
    if ((b & 0x7f80) != 0x7f80) {
        return nullptr;
    }
    return (b & 0x007f) != 0 ? "NaN" : "infinite";
}

const char * float_problem(double v) {
    return std::isnan(v) ? "NaN" : std::isinf(v) ? "infinite" : nullptr;
}

// a float type's blocks are single values: "f16 block 7: the value is NaN"
bool report(enum wsp_ggml_type type, size_t block, const char * what, const char * problem, unsigned bits) {
    WSP_LOG_ERROR("wsp_ggml_validate_row_data: %s block %zu: %s is %s (bits 0x%x)\n", wsp_ggml_type_name(type), block,
                  what, problem, bits);
    return false;
}

bool validate_values(enum wsp_ggml_type type, const uint8_t * p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const char * problem = nullptr;
        unsigned     bits    = 0;
        if (type == WSP_GGML_TYPE_F32) {
            float v;
            std::memcpy(&v, p + i * 4, 4);
            std::memcpy(&bits, &v, 4);
            problem = float_problem(v);
        } else if (type == WSP_GGML_TYPE_F64) {
            double v;
            std::memcpy(&v, p + i * 8, 8);
            problem = float_problem(v);
            uint64_t b64;
            std::memcpy(&b64, &v, 8);
            bits = (unsigned) (b64 >> 32);
        } else {
            bits    = load_u16(p + i * 2);
            problem = type == WSP_GGML_TYPE_F16 ? fp16_problem((uint16_t) bits) : bf16_problem((uint16_t) bits);
        }
        if (problem != nullptr) {
            return report(type, i, "the value", problem, bits);
        }
    }
    return true;
}

// IQ1_M keeps its fp16 scale in the top nibbles of its four 16-bit scale words
uint16_t iq1_m_scale(const uint8_t * block) {
    const uint8_t * sc = block + 48;
    const uint16_t  s0 = load_u16(sc), s1 = load_u16(sc + 2), s2 = load_u16(sc + 4), s3 = load_u16(sc + 6);
    return (uint16_t) ((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000));
}

bool validate_blocks(enum wsp_ggml_type type, const uint8_t * p, size_t nb, size_t block_size) {
    if (type == WSP_GGML_TYPE_IQ1_M) {
        for (size_t i = 0; i < nb; ++i) {
            const uint16_t d = iq1_m_scale(p + i * block_size);
            if (const char * problem = fp16_problem(d)) {
                return report(type, i, "the scale", problem, d);
            }
        }
        return true;
    }
    const ScaleLayout l = scale_layout(type);
    if (l.d_offset < 0) {
        return true; // integer types: every bit pattern is a value
    }
    for (size_t i = 0; i < nb; ++i) {
        const uint8_t * b = p + i * block_size;
        if (l.d_is_f32) {
            float d;
            std::memcpy(&d, b + l.d_offset, sizeof(d));
            if (const char * problem = float_problem(d)) {
                unsigned bits;
                std::memcpy(&bits, &d, sizeof(bits));
                return report(type, i, "the scale d", problem, bits);
            }
            continue;
        }
        const uint16_t d = load_u16(b + l.d_offset);
        if (const char * problem = fp16_problem(d)) {
            return report(type, i, "the scale d", problem, d);
        }
        if (l.second_offset >= 0) {
            const uint16_t m = load_u16(b + l.second_offset);
            if (const char * problem = fp16_problem(m)) {
                const std::string what = std::string("the scale ") + l.second_name;
                return report(type, i, what.c_str(), problem, m);
            }
        }
    }
    return true;
}

} // namespace

extern "C" {

void wsp_ggml_quantize_init(enum wsp_ggml_type type) {
    // The types quantize_chunk writes need no tables (upstream allocates grids for the IQ types
    // alone), so there is nothing to initialise; an unknown or unsupported type is reported here.
    if (!valid_type(type)) {
        WSP_LOG_ERROR("%s: invalid type id %d\n", __func__, (int) type);
    } else if (!quantizable(type)) {
        WSP_LOG_ERROR("%s: quantizing to %s is not supported (supported: %s)\n", __func__, wsp_ggml_type_name(type),
                      QUANTIZABLE);
    }
}

void wsp_ggml_quantize_free(void) {
    // wsp_ggml_quantize_init allocates nothing (see there): nothing to free
}

bool wsp_ggml_quantize_requires_imatrix(enum wsp_ggml_type type) {
    // upstream's list (IQ1_M is commented out of it there)
    return type == WSP_GGML_TYPE_IQ2_XXS || type == WSP_GGML_TYPE_IQ2_XS || type == WSP_GGML_TYPE_IQ1_S;
}

size_t wsp_ggml_quantize_chunk(enum wsp_ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                               int64_t n_per_row, const float * imatrix) {
    if (!valid_type(type) || !quantizable(type)) {
        WSP_LOG_ERROR("wsp_ggml_quantize_chunk: quantizing to type %s is not supported (supported: %s)\n",
                      valid_type(type) ? wsp_ggml_type_name(type) : "(invalid)", QUANTIZABLE);
        return 0;
    }
    const int64_t bs = wsp_ggml_blck_size(type);
    if (n_per_row <= 0 || nrows < 0 || start < 0 || n_per_row % bs != 0 || start % n_per_row != 0) {
        WSP_LOG_ERROR("wsp_ggml_quantize_chunk: n_per_row %lld must be a positive multiple of the %s block size %lld, "
                      "start %lld a multiple of n_per_row and nrows %lld not negative\n",
                      (long long) n_per_row, wsp_ggml_type_name(type), (long long) bs, (long long) start,
                      (long long) nrows);
        return 0;
    }
    if (src == nullptr || dst == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_quantize_chunk: src and dst must not be NULL\n");
        return 0;
    }
    const size_t             row_size  = wsp_ggml_row_size(type, n_per_row);
    const int64_t            start_row = start / n_per_row;
    const float *            in        = src + start;
    char *                   out       = static_cast<char *>(dst) + (size_t) start_row * row_size;
    static std::atomic<bool> said_imatrix{ false };
    if (imatrix != nullptr && wsp_ggml_is_quantized(type) && !said_imatrix.exchange(true)) {
        WSP_LOG_WARN("wsp_ggml_quantize_chunk: importance matrices are not used by this library: %s rows get the "
                     "reference rounding, as without one\n",
                     wsp_ggml_type_name(type));
    }
    // the reference converter: the rows are contiguous, so all of them at once. IQ4_NL is the one
    // type the client quantizes here otherwise than its reference does: 15 more scales tried a block
    if (type == WSP_GGML_TYPE_IQ4_NL) {
        quantize_row_iq4_nl(in, reinterpret_cast<block_iq4_nl *>(out), nrows * n_per_row, 7);
    } else {
        wsp_ggml_get_type_traits(type)->from_float_ref(in, out, nrows * n_per_row);
    }
    return (size_t) nrows * row_size;
}

void wsp_ggml_wsp_quantize_init(enum wsp_ggml_type type) {
    wsp_ggml_quantize_init(type);
}

void wsp_ggml_wsp_quantize_free(void) {
    wsp_ggml_quantize_free();
}

bool wsp_ggml_wsp_quantize_requires_imatrix(enum wsp_ggml_type type) {
    return wsp_ggml_quantize_requires_imatrix(type);
}

size_t wsp_ggml_wsp_quantize_chunk(enum wsp_ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                                   int64_t n_per_row, const float * imatrix) {
    return wsp_ggml_quantize_chunk(type, src, dst, start, nrows, n_per_row, imatrix);
}

bool wsp_ggml_validate_row_data(enum wsp_ggml_type type, const void * data, size_t nbytes) {
    if (!valid_type(type)) {
        WSP_LOG_ERROR("wsp_ggml_validate_row_data: invalid type %d\n", (int) type);
        return false;
    }
    const size_t block_size = wsp_ggml_type_size(type);
    if (nbytes % block_size != 0) {
        WSP_LOG_ERROR("wsp_ggml_validate_row_data: %s: %zu bytes is not a whole number of blocks of %zu bytes (block "
                      "%zu is cut short)\n",
                      wsp_ggml_type_name(type), nbytes, block_size, nbytes / block_size);
        return false;
    }
    if (nbytes > 0 && data == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_validate_row_data: %s: data is NULL\n", wsp_ggml_type_name(type));
        return false;
    }
    const uint8_t * p  = static_cast<const uint8_t *>(data);
    const size_t    nb = nbytes / block_size;
    switch (type) {
        case WSP_GGML_TYPE_F32:
        case WSP_GGML_TYPE_F16:
        case WSP_GGML_TYPE_BF16:
        case WSP_GGML_TYPE_F64: return validate_values(type, p, nb);
        default: return validate_blocks(type, p, nb, block_size);
    }
}

} // extern "C"
