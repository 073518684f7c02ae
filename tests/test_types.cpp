// Type system: the traits table of every type id, fp16 / bf16 conversions against references
// written here from the IEEE 754 definition (round to nearest, ties to even), and the
// conversion rows. The quantized block formats are checked in test_types_quant.cpp.

#include "test_util.h"

#include "../src/core/fp16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

namespace wsp::test {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// floats that exercise every rounding path: random bit patterns plus hand-picked edge cases
std::vector<float> conversion_inputs(size_t n_random, uint32_t seed) {
    std::vector<float> v = {
        0.0f,      -0.0f,         1.0f,          -1.0f,         65504.0f,      -65504.0f,     65519.996f,
        65520.0f,  -65520.0f,     65536.0f,      1e10f,         FLT_MAX,       -FLT_MAX,      INFINITY,
        -INFINITY, 6.1035156e-5f, 6.0975552e-5f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 8.940697e-8f,
        1e-10f,    -1e-10f,       FLT_MIN,       1e-45f,        1.0009766f,    1.0004883f,    1.0014648f,
        2049.0f,   2051.0f,       4097.0f,       0.1f,          -0.3f,         3.14159265f,
    };
    std::mt19937                            rng(seed);
    std::uniform_int_distribution<uint32_t> bits;
    for (size_t i = 0; i < n_random; ++i) {
        const uint32_t u = bits(rng);
        if (i % 2 == 0) {
            // half-range values: exponents where fp16 is finite, so mantissa rounding is exercised
            const uint32_t exp = 0x67 + (u % 0x1c); // 2^-24 .. 2^3
            v.push_back(float_of((u & 0x807fffffu) | (exp << 23)));
        } else {
            v.push_back(float_of(u));
        }
    }
    // exact ties: the dropped 13 bits are exactly half, with even and odd kept mantissas
    for (uint32_t m = 0; m < 64; ++m) {
        v.push_back(float_of((0x3f800000u | (m << 13)) + 0x1000u));
        v.push_back(float_of((0x33000000u | (m << 13)) + 0x1000u)); // fp16 subnormal range
    }
    return v;
}

TEST(TypeTraits, EveryTypeHasTheUpstreamLayout) {
    struct Expect {
        wsp_ggml_type type;
        const char *  name;
        int64_t       blck;
        size_t        size;
        bool          quantized;
    };
    const Expect expect[] = {
        { WSP_GGML_TYPE_F32, "f32", 1, 4, false },
        { WSP_GGML_TYPE_F16, "f16", 1, 2, false },
        { WSP_GGML_TYPE_Q4_0, "q4_0", 32, 18, true },
        { WSP_GGML_TYPE_Q4_1, "q4_1", 32, 20, true },
        { WSP_GGML_TYPE_Q5_0, "q5_0", 32, 22, true },
        { WSP_GGML_TYPE_Q5_1, "q5_1", 32, 24, true },
        { WSP_GGML_TYPE_Q8_0, "q8_0", 32, 34, true },
        { WSP_GGML_TYPE_Q8_1, "q8_1", 32, 36, true },
        { WSP_GGML_TYPE_Q2_K, "q2_K", 256, 84, true },
        { WSP_GGML_TYPE_Q3_K, "q3_K", 256, 110, true },
        { WSP_GGML_TYPE_Q4_K, "q4_K", 256, 144, true },
        { WSP_GGML_TYPE_Q5_K, "q5_K", 256, 176, true },
        { WSP_GGML_TYPE_Q6_K, "q6_K", 256, 210, true },
        { WSP_GGML_TYPE_Q8_K, "q8_K", 256, 292, true },
        { WSP_GGML_TYPE_IQ2_XXS, "iq2_xxs", 256, 66, true },
        { WSP_GGML_TYPE_IQ2_XS, "iq2_xs", 256, 74, true },
        { WSP_GGML_TYPE_IQ3_XXS, "iq3_xxs", 256, 98, true },
        { WSP_GGML_TYPE_IQ1_S, "iq1_s", 256, 50, true },
        { WSP_GGML_TYPE_IQ4_NL, "iq4_nl", 32, 18, true },
        { WSP_GGML_TYPE_IQ3_S, "iq3_s", 256, 110, true },
        { WSP_GGML_TYPE_IQ2_S, "iq2_s", 256, 82, true },
        { WSP_GGML_TYPE_IQ4_XS, "iq4_xs", 256, 136, true },
        { WSP_GGML_TYPE_I8, "i8", 1, 1, false },
        { WSP_GGML_TYPE_I16, "i16", 1, 2, false },
        { WSP_GGML_TYPE_I32, "i32", 1, 4, false },
        { WSP_GGML_TYPE_I64, "i64", 1, 8, false },
        { WSP_GGML_TYPE_F64, "f64", 1, 8, false },
        { WSP_GGML_TYPE_IQ1_M, "iq1_m", 256, 56, true },
        { WSP_GGML_TYPE_BF16, "bf16", 1, 2, false },
        { WSP_GGML_TYPE_TQ1_0, "tq1_0", 256, 54, true },
        { WSP_GGML_TYPE_TQ2_0, "tq2_0", 256, 66, true },
    };
    for (const Expect & e : expect) {
        SCOPED_TRACE(e.name);
        const wsp_ggml_type_traits * tr = wsp_ggml_get_type_traits(e.type);
        EXPECT_STREQ(wsp_ggml_type_name(e.type), e.name);
        EXPECT_STREQ(tr->type_name, e.name);
        EXPECT_EQ(wsp_ggml_blck_size(e.type), e.blck);
        EXPECT_EQ(tr->blck_size, e.blck);
        EXPECT_EQ(wsp_ggml_type_size(e.type), e.size);
        EXPECT_EQ(tr->type_size, e.size);
        EXPECT_EQ(wsp_ggml_is_quantized(e.type), e.quantized);
        EXPECT_EQ(tr->is_quantized, e.quantized);
        EXPECT_EQ(wsp_ggml_row_size(e.type, 4 * e.blck), 4 * e.size);
    }
    EXPECT_EQ(sizeof(expect) / sizeof(expect[0]), (size_t) WSP_GGML_TYPE_COUNT - 8);
}

TEST(TypeTraits, RemovedIdsHaveNoLayout) {
    for (int id : { 4, 5, 31, 32, 33, 36, 37, 38 }) {
        SCOPED_TRACE(id);
        EXPECT_EQ(wsp_ggml_blck_size((wsp_ggml_type) id), 0);
        EXPECT_EQ(wsp_ggml_get_type_traits((wsp_ggml_type) id)->blck_size, 0);
        EXPECT_EQ(wsp_ggml_get_type_traits((wsp_ggml_type) id)->from_float_ref, nullptr);
    }
    EXPECT_STREQ(wsp_ggml_type_name(WSP_GGML_TYPE_COUNT), "NONE");
}

TEST(TypeTraits, ConvertersExistForTheComputeTypes) {
    for (wsp_ggml_type t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                             WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 }) {
        EXPECT_NE(wsp_ggml_get_type_traits(t)->to_float, nullptr) << wsp_ggml_type_name(t);
        EXPECT_NE(wsp_ggml_get_type_traits(t)->from_float_ref, nullptr) << wsp_ggml_type_name(t);
    }
}

// Every type converts both ways, except the ones documented storage-only (types.cpp): the integer
// and f64 types (none in the client's either) and, in a build without the client's codebooks (Note
// [client codebooks]: WSP_TEST_IQ_GRIDS is set where the build has them), the grid i-quants, which
// with them are dequantized only (their client's quantizers search the codebook: not here)
TEST(TypeTraits, EveryTypeConvertsOrIsStorageOnly) {
    const std::vector<wsp_ggml_type> grids = {
        WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ3_XXS, WSP_GGML_TYPE_IQ1_S,
        WSP_GGML_TYPE_IQ3_S,   WSP_GGML_TYPE_IQ2_S,  WSP_GGML_TYPE_IQ1_M,
    };
    const std::vector<wsp_ggml_type> storage_only = {
        WSP_GGML_TYPE_I8, WSP_GGML_TYPE_I16, WSP_GGML_TYPE_I32, WSP_GGML_TYPE_I64, WSP_GGML_TYPE_F64,
    };
#ifdef WSP_TEST_IQ_GRIDS
    const bool have_grids = true;
#else
    const bool have_grids = false;
#endif
    auto listed = [](const std::vector<wsp_ggml_type> & list, wsp_ggml_type t) {
        return std::find(list.begin(), list.end(), t) != list.end();
    };
    int converting = 0, dequantizing = 0;
    for (int id = 0; id < WSP_GGML_TYPE_COUNT; ++id) {
        const wsp_ggml_type t = (wsp_ggml_type) id;
        if (wsp_ggml_blck_size(t) == 0) {
            continue; // removed ids
        }
        SCOPED_TRACE(wsp_ggml_type_name(t));
        const auto * tr = wsp_ggml_get_type_traits(t);
        if (listed(grids, t)) {
            EXPECT_EQ(tr->to_float != nullptr, have_grids);
            EXPECT_EQ(tr->from_float_ref, nullptr);
            dequantizing += tr->to_float != nullptr ? 1 : 0;
            continue;
        }
        const bool storage = listed(storage_only, t);
        EXPECT_EQ(tr->to_float == nullptr, storage);
        EXPECT_EQ(tr->from_float_ref == nullptr, storage);
        converting += storage ? 0 : 1;
    }
    EXPECT_EQ(converting, 19); // f32, f16, bf16, 6 legacy quants, 5 K-quants, q8_K, 2 ternary, 2 iq4
    EXPECT_EQ(dequantizing, have_grids ? 7 : 0);
}

TEST(TypeTraits, RowSizeCountsWholeBlocks) {
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_F32, 7), 28u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_F16, 7), 14u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_BF16, 3), 6u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_Q4_0, 96), 3u * 18u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_Q8_0, 32), 34u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_Q4_K, 512), 288u);
    EXPECT_EQ(wsp_ggml_row_size(WSP_GGML_TYPE_F32, 0), 0u);
}

TEST(TypeTraits, FtypeMapsToTheMainTensorType) {
    const std::pair<wsp_ggml_ftype, wsp_ggml_type> map[] = {
        { WSP_GGML_FTYPE_ALL_F32, WSP_GGML_TYPE_F32 },
        { WSP_GGML_FTYPE_MOSTLY_F16, WSP_GGML_TYPE_F16 },
        { WSP_GGML_FTYPE_MOSTLY_BF16, WSP_GGML_TYPE_BF16 },
        { WSP_GGML_FTYPE_MOSTLY_Q4_0, WSP_GGML_TYPE_Q4_0 },
        { WSP_GGML_FTYPE_MOSTLY_Q4_1, WSP_GGML_TYPE_Q4_1 },
        { WSP_GGML_FTYPE_MOSTLY_Q5_0, WSP_GGML_TYPE_Q5_0 },
        { WSP_GGML_FTYPE_MOSTLY_Q5_1, WSP_GGML_TYPE_Q5_1 },
        { WSP_GGML_FTYPE_MOSTLY_Q8_0, WSP_GGML_TYPE_Q8_0 },
        { WSP_GGML_FTYPE_MOSTLY_Q2_K, WSP_GGML_TYPE_Q2_K },
        { WSP_GGML_FTYPE_MOSTLY_Q6_K, WSP_GGML_TYPE_Q6_K },
        { WSP_GGML_FTYPE_MOSTLY_IQ4_NL, WSP_GGML_TYPE_IQ4_NL },
        { WSP_GGML_FTYPE_MOSTLY_IQ1_M, WSP_GGML_TYPE_IQ1_M },
        { WSP_GGML_FTYPE_UNKNOWN, WSP_GGML_TYPE_COUNT },
        { WSP_GGML_FTYPE_MOSTLY_Q4_1_SOME_F16, WSP_GGML_TYPE_COUNT },
    };
    for (const auto & [ftype, type] : map) {
        EXPECT_EQ(wsp_ggml_ftype_to_wsp_ggml_type(ftype), type) << "ftype " << (int) ftype;
    }
}

TEST(Fp16, EveryHalfRoundTripsBitExact) {
    int n_nan = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float    f    = wsp_ggml_fp16_to_fp32((wsp_ggml_fp16_t) h);
        const uint16_t back = wsp_ggml_fp32_to_fp16(f);
        const bool     nan  = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
        if (nan) {
            ++n_nan;
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << h;
            ASSERT_NE(back & 0x3ff, 0) << "NaN became inf: " << std::hex << h;
            continue;
        }
        ASSERT_EQ((double) f, ieee_fp16_value((uint16_t) h)) << std::hex << h;
        ASSERT_EQ(back, h) << std::hex << h;
    }
    EXPECT_EQ(n_nan, 2 * 1023);
}

TEST(Fp16, RoundsToNearestEvenLikeTheIeeeDefinition) {
    const std::vector<float> in        = conversion_inputs(400000, 11);
    size_t                   n_checked = 0;
    for (float f : in) {
        if (std::isnan(f)) {
            const uint16_t h = wsp_ggml_fp32_to_fp16(f);
            ASSERT_TRUE((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) << "NaN not kept: " << std::hex << bits_of(f);
            continue;
        }
        ASSERT_EQ(wsp_ggml_fp32_to_fp16(f), ieee_fp16_bits(f)) << "f = " << f << " bits " << std::hex << bits_of(f);
        ++n_checked;
    }
    EXPECT_GT(n_checked, 390000u);
}

TEST(Fp16, EdgeCases) {
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(65519.99f), 0x7bff);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(65520.0f), 0x7c00);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(-65520.0f), 0xfc00);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);    // tie to even (zero)
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);    // tie to even (two)
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400); // subnormal rounding up to normal
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(1e-30f), 0x0000);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(-1e-30f), 0x8000);
    EXPECT_EQ(wsp_ggml_fp32_to_fp16(INFINITY), 0x7c00);
    EXPECT_EQ(wsp_ggml_fp16_to_fp32(0x3c00), 1.0f);
    EXPECT_EQ(wsp_ggml_fp16_to_fp32(0xc000), -2.0f);
    EXPECT_TRUE(std::signbit(wsp_ggml_fp16_to_fp32(0x8000)));
}

// the portable conversion (used when the build has no F16C) must give the same bits
TEST(Fp16, PortablePathMatchesTheReference) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = wsp::fp16_to_fp32_soft((uint16_t) h);
        if (std::isnan(f)) {
            ASSERT_TRUE(((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0);
            continue;
        }
        ASSERT_EQ((double) f, ieee_fp16_value((uint16_t) h)) << std::hex << h;
    }
    for (float f : conversion_inputs(200000, 12)) {
        const uint16_t h = wsp::fp32_to_fp16_soft(f);
        if (std::isnan(f)) {
            ASSERT_TRUE((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0);
            continue;
        }
        ASSERT_EQ(h, ieee_fp16_bits(f)) << "f = " << f << " bits " << std::hex << bits_of(f);
    }
}

TEST(Fp16, RowsMatchScalarConversions) {
    // odd length: vector bodies and scalar tails both run
    std::vector<float> in = random_values(1003, 5, -70000.0f, 70000.0f);
    for (size_t i = 0; i < in.size(); i += 7) {
        in[i] *= 1e-6f; // small and subnormal halves too
    }
    std::vector<wsp_ggml_fp16_t> h(in.size());
    wsp_ggml_fp32_to_fp16_row(in.data(), h.data(), (int64_t) in.size());
    std::vector<float> back(in.size());
    wsp_ggml_fp16_to_fp32_row(h.data(), back.data(), (int64_t) in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(h[i], ieee_fp16_bits(in[i])) << i;
        ASSERT_EQ((double) back[i], ieee_fp16_value(h[i])) << i;
    }
}

TEST(Bf16, RoundsToNearestEvenLikeTheDefinition) {
    std::vector<float> in = conversion_inputs(400000, 13);
    for (uint32_t m = 0; m < 256; ++m) { // exact ties on the 16 dropped bits
        in.push_back(float_of((0x40000000u | (m << 16)) + 0x8000u));
        in.push_back(float_of((0x00000000u | (m << 16)) + 0x8000u)); // float subnormals
    }
    in.push_back(float_of(0x7f7fffffu)); // FLT_MAX rounds to inf
    for (float f : in) {
        const wsp_ggml_bf16_t b = wsp_ggml_fp32_to_bf16(f);
        if (std::isnan(f)) {
            ASSERT_EQ(b.bits & 0x7f80, 0x7f80);
            ASSERT_NE(b.bits & 0x0040, 0) << "NaN must be quiet: " << std::hex << bits_of(f);
            ASSERT_EQ(b.bits & 0x8000, (bits_of(f) >> 16) & 0x8000);
            continue;
        }
        ASSERT_EQ(b.bits, ieee_bf16_bits(f)) << "f = " << f << " bits " << std::hex << bits_of(f);
    }
}

TEST(Bf16, NanStaysQuietNanAndRowsAgree) {
    for (uint32_t u : { 0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7f80ffffu, 0x7fbf0000u }) {
        const wsp_ggml_bf16_t b = wsp_ggml_fp32_to_bf16(float_of(u));
        EXPECT_TRUE(std::isnan(wsp_ggml_bf16_to_fp32(b))) << std::hex << u;
        EXPECT_NE(b.bits & 0x0040, 0) << std::hex << u;
    }
    for (uint32_t h = 0; h < 65536; ++h) { // every bf16 widens exactly
        const wsp_ggml_bf16_t b = { (uint16_t) h };
        const float           f = wsp_ggml_bf16_to_fp32(b);
        if (!std::isnan(f)) {
            ASSERT_EQ(bits_of(f), h << 16);
            ASSERT_EQ(wsp_ggml_fp32_to_bf16(f).bits, h);
        }
    }
    const std::vector<float>     in = random_values(517, 9, -1e5f, 1e5f);
    std::vector<wsp_ggml_bf16_t> a(in.size()), b(in.size());
    wsp_ggml_fp32_to_bf16_row(in.data(), a.data(), (int64_t) in.size());
    wsp_ggml_fp32_to_bf16_row_ref(in.data(), b.data(), (int64_t) in.size());
    std::vector<float> back(in.size());
    wsp_ggml_bf16_to_fp32_row(a.data(), back.data(), (int64_t) in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(a[i].bits, ieee_bf16_bits(in[i])) << i;
        ASSERT_EQ(b[i].bits, a[i].bits) << i;
        ASSERT_EQ(bits_of(back[i]), (uint32_t) a[i].bits << 16) << i;
    }
}

TEST(TypeTraits, FloatTraitsConvertRows) {
    const std::vector<float> in = random_values(67, 21, -3.0f, 3.0f);
    for (wsp_ggml_type t : float_types()) {
        const wsp_ggml_type_traits * tr = wsp_ggml_get_type_traits(t);
        std::vector<uint8_t>         buf(wsp_ggml_row_size(t, (int64_t) in.size()));
        std::vector<float>           out(in.size());
        tr->from_float_ref(in.data(), buf.data(), (int64_t) in.size());
        tr->to_float(buf.data(), out.data(), (int64_t) in.size());
        for (size_t i = 0; i < in.size(); ++i) {
            const double expect = t == WSP_GGML_TYPE_F32   ? (double) in[i]
                                  : t == WSP_GGML_TYPE_F16 ? ieee_fp16_value(ieee_fp16_bits(in[i]))
                                                           : (double) float_of((uint32_t) ieee_bf16_bits(in[i]) << 16);
            ASSERT_EQ((double) out[i], expect) << wsp_ggml_type_name(t) << " " << i;
        }
    }
}

} // namespace
} // namespace wsp::test
