// Type traits of every wsp_ggml_type (name, block size, bytes per block, quantized or not,
// row converters) and fp16/bf16 row conversions (quantize.cpp has wsp_ggml_quantize_chunk).

#include "fp16.h"
#include "log.h"
#include "quants.h"

#include <cstring>

namespace {

using wsp::QK_K;

template <typename Block, void (*Fn)(const Block *, float *, int64_t)>
void to_float_fn(const void * x, float * y, int64_t k) {
    Fn(static_cast<const Block *>(x), y, k);
}

template <typename Block, void (*Fn)(const float *, Block *, int64_t)>
void from_float_fn(const float * x, void * y, int64_t k) {
    Fn(x, static_cast<Block *>(y), k);
}

template <typename Block, void (*To)(const Block *, float *, int64_t), void (*From)(const float *, Block *, int64_t)>
wsp_ggml_type_traits converters(const char * name, int64_t block_size) {
    return { name, block_size, 0, sizeof(Block), true, to_float_fn<Block, To>, from_float_fn<Block, From> };
}

// a grid i-quant: its dequantizer where the build read the codebooks (WSP_GGML_IQ_GRIDS), else
// storage-only
// clang-format off
#if WSP_GGML_IQ_GRIDS
#    define WSP_GRID_TYPE(block, name) \
        { #name, QK_K, 0, sizeof(block), true, to_float_fn<block, dequantize_row_##name>, nullptr }
#else
#    define WSP_GRID_TYPE(block, name) { #name, QK_K, 0, sizeof(block), true, nullptr, nullptr }
#endif
// clang-format on

void f32_to_float(const void * x, float * y, int64_t k) {
    std::memcpy(y, x, (size_t) k * sizeof(float));
}

void f32_from_float(const float * x, void * y, int64_t k) {
    std::memcpy(y, x, (size_t) k * sizeof(float));
}

void f16_to_float(const void * x, float * y, int64_t k) {
    wsp_ggml_fp16_to_fp32_row(static_cast<const wsp_ggml_fp16_t *>(x), y, k);
}

void f16_from_float(const float * x, void * y, int64_t k) {
    wsp_ggml_fp32_to_fp16_row(x, static_cast<wsp_ggml_fp16_t *>(y), k);
}

void bf16_to_float(const void * x, float * y, int64_t k) {
    wsp_ggml_bf16_to_fp32_row(static_cast<const wsp_ggml_bf16_t *>(x), y, k);
}

void bf16_from_float(const float * x, void * y, int64_t k) {
    wsp_ggml_fp32_to_bf16_row_ref(x, static_cast<wsp_ggml_bf16_t *>(y), k);
}

constexpr wsp_ggml_type_traits removed_type = { "(removed)", 0, 0, 0, false, nullptr, nullptr };

wsp_ggml_type_traits make_table_entry(int t) {
    using namespace wsp;
    switch (t) {
        case WSP_GGML_TYPE_F32: return { "f32", 1, 0, 4, false, f32_to_float, f32_from_float };
        case WSP_GGML_TYPE_F16: return { "f16", 1, 0, 2, false, f16_to_float, f16_from_float };
        case WSP_GGML_TYPE_Q4_0:
            return { "q4_0",
                     QK4_0,
                     0,
                     sizeof(block_q4_0),
                     true,
                     to_float_fn<block_q4_0, dequantize_row_q4_0>,
                     from_float_fn<block_q4_0, quantize_row_q4_0_ref> };
        case WSP_GGML_TYPE_Q4_1:
            return { "q4_1",
                     QK4_1,
                     0,
                     sizeof(block_q4_1),
                     true,
                     to_float_fn<block_q4_1, dequantize_row_q4_1>,
                     from_float_fn<block_q4_1, quantize_row_q4_1_ref> };
        case WSP_GGML_TYPE_Q5_0:
            return { "q5_0",
                     QK5_0,
                     0,
                     sizeof(block_q5_0),
                     true,
                     to_float_fn<block_q5_0, dequantize_row_q5_0>,
                     from_float_fn<block_q5_0, quantize_row_q5_0_ref> };
        case WSP_GGML_TYPE_Q5_1:
            return { "q5_1",
                     QK5_1,
                     0,
                     sizeof(block_q5_1),
                     true,
                     to_float_fn<block_q5_1, dequantize_row_q5_1>,
                     from_float_fn<block_q5_1, quantize_row_q5_1_ref> };
        case WSP_GGML_TYPE_Q8_0:
            return { "q8_0",
                     QK8_0,
                     0,
                     sizeof(block_q8_0),
                     true,
                     to_float_fn<block_q8_0, dequantize_row_q8_0>,
                     from_float_fn<block_q8_0, quantize_row_q8_0_ref> };
        case WSP_GGML_TYPE_Q8_1:
            return { "q8_1",
                     QK8_1,
                     0,
                     sizeof(block_q8_1),
                     true,
                     to_float_fn<block_q8_1, dequantize_row_q8_1>,
                     from_float_fn<block_q8_1, quantize_row_q8_1_ref> };
        // the super-block types: dequantizers (quants_k.cpp) and reference quantizers (quantize_k.cpp)
        case WSP_GGML_TYPE_Q2_K:
            return converters<block_q2_K, dequantize_row_q2_K, quantize_row_q2_K_ref>("q2_K", QK_K);
        case WSP_GGML_TYPE_Q3_K:
            return converters<block_q3_K, dequantize_row_q3_K, quantize_row_q3_K_ref>("q3_K", QK_K);
        case WSP_GGML_TYPE_Q4_K:
            return converters<block_q4_K, dequantize_row_q4_K, quantize_row_q4_K_ref>("q4_K", QK_K);
        case WSP_GGML_TYPE_Q5_K:
            return converters<block_q5_K, dequantize_row_q5_K, quantize_row_q5_K_ref>("q5_K", QK_K);
        case WSP_GGML_TYPE_Q6_K:
            return converters<block_q6_K, dequantize_row_q6_K, quantize_row_q6_K_ref>("q6_K", QK_K);
        case WSP_GGML_TYPE_Q8_K:
            return converters<block_q8_K, dequantize_row_q8_K, quantize_row_q8_K_ref>("q8_K", QK_K);
        case WSP_GGML_TYPE_TQ1_0:
            return converters<block_tq1_0, dequantize_row_tq1_0, quantize_row_tq1_0_ref>("tq1_0", QK_K);
        case WSP_GGML_TYPE_TQ2_0:
            return converters<block_tq2_0, dequantize_row_tq2_0, quantize_row_tq2_0_ref>("tq2_0", QK_K);
        case WSP_GGML_TYPE_IQ4_NL:
            return converters<block_iq4_nl, dequantize_row_iq4_nl, quantize_row_iq4_nl_ref>("iq4_nl", QK4_NL);
        case WSP_GGML_TYPE_IQ4_XS:
            return converters<block_iq4_xs, dequantize_row_iq4_xs, quantize_row_iq4_xs_ref>("iq4_xs", QK_K);
        // the i-quants of grids (quants_iq.cpp): dequantized where the build has the client's
        // codebooks (Note [client codebooks]), storage-only otherwise, so that every backend refuses
        // to compute with them; no reference quantizer (the client's searches its codebook)
        case WSP_GGML_TYPE_IQ2_XXS: return WSP_GRID_TYPE(block_iq2_xxs, iq2_xxs);
        case WSP_GGML_TYPE_IQ2_XS: return WSP_GRID_TYPE(block_iq2_xs, iq2_xs);
        case WSP_GGML_TYPE_IQ3_XXS: return WSP_GRID_TYPE(block_iq3_xxs, iq3_xxs);
        case WSP_GGML_TYPE_IQ1_S: return WSP_GRID_TYPE(block_iq1_s, iq1_s);
        case WSP_GGML_TYPE_IQ3_S: return WSP_GRID_TYPE(block_iq3_s, iq3_s);
        case WSP_GGML_TYPE_IQ2_S: return WSP_GRID_TYPE(block_iq2_s, iq2_s);
        case WSP_GGML_TYPE_I8: return { "i8", 1, 0, 1, false, nullptr, nullptr };
        case WSP_GGML_TYPE_I16: return { "i16", 1, 0, 2, false, nullptr, nullptr };
        case WSP_GGML_TYPE_I32: return { "i32", 1, 0, 4, false, nullptr, nullptr };
        case WSP_GGML_TYPE_I64: return { "i64", 1, 0, 8, false, nullptr, nullptr };
        case WSP_GGML_TYPE_F64: return { "f64", 1, 0, 8, false, nullptr, nullptr };
        case WSP_GGML_TYPE_IQ1_M: return WSP_GRID_TYPE(block_iq1_m, iq1_m);
        case WSP_GGML_TYPE_BF16: return { "bf16", 1, 0, 2, false, bf16_to_float, bf16_from_float };
        default: return removed_type;
    }
}

struct TypeTable {
    wsp_ggml_type_traits entries[WSP_GGML_TYPE_COUNT];

    TypeTable() {
        for (int t = 0; t < WSP_GGML_TYPE_COUNT; ++t) {
            entries[t] = make_table_entry(t);
        }
    }
};

const TypeTable & table() {
    static const TypeTable t;
    return t;
}

bool valid_type(int type) {
    return type >= 0 && type < WSP_GGML_TYPE_COUNT;
}

void check_type(enum wsp_ggml_type type, const char * fn) {
    if (!valid_type(type)) {
        WSP_GGML_ABORT("%s: invalid type id %d", fn, (int) type);
    }
}

} // namespace

extern "C" {

const struct wsp_ggml_type_traits * wsp_ggml_get_type_traits(enum wsp_ggml_type type) {
    check_type(type, __func__);
    return &table().entries[type];
}

int64_t wsp_ggml_blck_size(enum wsp_ggml_type type) {
    check_type(type, __func__);
    return table().entries[type].blck_size;
}

size_t wsp_ggml_type_size(enum wsp_ggml_type type) {
    check_type(type, __func__);
    return table().entries[type].type_size;
}

// bytes per element; 0 for the ids of removed types (they have no layout)
double wsp_ggml_type_sizef(enum wsp_ggml_type type) {
    const int64_t bs = wsp_ggml_blck_size(type);
    return bs == 0 ? 0.0 : (double) wsp_ggml_type_size(type) / (double) bs;
}

size_t wsp_ggml_row_size(enum wsp_ggml_type type, int64_t ne) {
    const int64_t bs = wsp_ggml_blck_size(type);
    if (bs == 0) {
        WSP_GGML_ABORT("wsp_ggml_row_size: type %d was removed and has no layout", (int) type);
    }
    if (ne % bs != 0) {
        WSP_GGML_ABORT("wsp_ggml_row_size: %lld elements is not a multiple of the %s block size %lld", (long long) ne,
                       wsp_ggml_type_name(type), (long long) bs);
    }
    return wsp_ggml_type_size(type) * (size_t) (ne / bs);
}

const char * wsp_ggml_type_name(enum wsp_ggml_type type) {
    return valid_type(type) ? table().entries[type].type_name : "NONE";
}

bool wsp_ggml_is_quantized(enum wsp_ggml_type type) {
    check_type(type, __func__);
    return table().entries[type].is_quantized;
}

enum wsp_ggml_type wsp_ggml_ftype_to_wsp_ggml_type(enum wsp_ggml_ftype ftype) {
    switch (ftype) {
        case WSP_GGML_FTYPE_ALL_F32: return WSP_GGML_TYPE_F32;
        case WSP_GGML_FTYPE_MOSTLY_F16: return WSP_GGML_TYPE_F16;
        case WSP_GGML_FTYPE_MOSTLY_BF16: return WSP_GGML_TYPE_BF16;
        case WSP_GGML_FTYPE_MOSTLY_Q4_0: return WSP_GGML_TYPE_Q4_0;
        case WSP_GGML_FTYPE_MOSTLY_Q4_1: return WSP_GGML_TYPE_Q4_1;
        case WSP_GGML_FTYPE_MOSTLY_Q5_0: return WSP_GGML_TYPE_Q5_0;
        case WSP_GGML_FTYPE_MOSTLY_Q5_1: return WSP_GGML_TYPE_Q5_1;
        case WSP_GGML_FTYPE_MOSTLY_Q8_0: return WSP_GGML_TYPE_Q8_0;
        case WSP_GGML_FTYPE_MOSTLY_Q2_K: return WSP_GGML_TYPE_Q2_K;
        case WSP_GGML_FTYPE_MOSTLY_Q3_K: return WSP_GGML_TYPE_Q3_K;
        case WSP_GGML_FTYPE_MOSTLY_Q4_K: return WSP_GGML_TYPE_Q4_K;
        case WSP_GGML_FTYPE_MOSTLY_Q5_K: return WSP_GGML_TYPE_Q5_K;
        case WSP_GGML_FTYPE_MOSTLY_Q6_K: return WSP_GGML_TYPE_Q6_K;
        case WSP_GGML_FTYPE_MOSTLY_IQ2_XXS: return WSP_GGML_TYPE_IQ2_XXS;
        case WSP_GGML_FTYPE_MOSTLY_IQ2_XS: return WSP_GGML_TYPE_IQ2_XS;
        case WSP_GGML_FTYPE_MOSTLY_IQ3_XXS: return WSP_GGML_TYPE_IQ3_XXS;
        case WSP_GGML_FTYPE_MOSTLY_IQ1_S: return WSP_GGML_TYPE_IQ1_S;
        case WSP_GGML_FTYPE_MOSTLY_IQ1_M: return WSP_GGML_TYPE_IQ1_M;
        case WSP_GGML_FTYPE_MOSTLY_IQ4_NL: return WSP_GGML_TYPE_IQ4_NL;
        case WSP_GGML_FTYPE_MOSTLY_IQ4_XS: return WSP_GGML_TYPE_IQ4_XS;
        case WSP_GGML_FTYPE_MOSTLY_IQ3_S: return WSP_GGML_TYPE_IQ3_S;
        case WSP_GGML_FTYPE_MOSTLY_IQ2_S: return WSP_GGML_TYPE_IQ2_S;
        case WSP_GGML_FTYPE_UNKNOWN:
        case WSP_GGML_FTYPE_MOSTLY_Q4_1_SOME_F16: break;
    }
    return WSP_GGML_TYPE_COUNT;
}

float wsp_ggml_fp16_to_fp32(wsp_ggml_fp16_t h) {
    return wsp::fp16_to_fp32(h);
}

wsp_ggml_fp16_t wsp_ggml_fp32_to_fp16(float f) {
    return wsp::fp32_to_fp16(f);
}

void wsp_ggml_fp16_to_fp32_row(const wsp_ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i));
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; ++i) {
        y[i] = wsp::fp16_to_fp32(x[i]);
    }
}

void wsp_ggml_fp32_to_fp16_row(const float * x, wsp_ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), h);
    }
#endif
    for (; i < n; ++i) {
        y[i] = wsp::fp32_to_fp16(x[i]);
    }
}

wsp_ggml_bf16_t wsp_ggml_fp32_to_bf16(float f) {
    return wsp_ggml_bf16_t{ wsp::fp32_to_bf16(f) };
}

float wsp_ggml_bf16_to_fp32(wsp_ggml_bf16_t b) {
    return wsp::bf16_to_fp32(b.bits);
}

void wsp_ggml_bf16_to_fp32_row(const wsp_ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = wsp::bf16_to_fp32(x[i].bits);
    }
}

void wsp_ggml_fp32_to_bf16_row_ref(const float * x, wsp_ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i].bits = wsp::fp32_to_bf16(x[i]);
    }
}

void wsp_ggml_fp32_to_bf16_row(const float * x, wsp_ggml_bf16_t * y, int64_t n) {
    wsp_ggml_fp32_to_bf16_row_ref(x, y, n);
}

} // extern "C"
