// The quantization entry points as a quantizer tool calls them, under whisper.rn's names
// (wsp_ggml_wsp_quantize_*) and ours: blocks worked out by hand from the layouts of SPEC.md,
// an imatrix ignored, chunk offsets and argument checks,
// requires_imatrix, init/free, and wsp_ggml_validate_row_data on good and damaged data.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes from_hex(const std::string & hex) {
    Bytes b;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        b.push_back((uint8_t) std::stoul(hex.substr(i, 2), nullptr, 16));
    }
    return b;
}

std::string to_hex(const Bytes & b) {
    static const char * digits = "0123456789abcdef";
    std::string         s;
    for (uint8_t v : b) {
        s += digits[v >> 4];
        s += digits[v & 15];
    }
    return s;
}

// one row through whisper.rn's name and through ours: both must write the same bytes
Bytes quantize_row(wsp_ggml_type type, const std::vector<float> & x, const float * imatrix = nullptr) {
    const int64_t n = (int64_t) x.size();
    Bytes         a(wsp_ggml_row_size(type, n)), b(a.size());
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(type, x.data(), a.data(), 0, 1, n, imatrix), a.size());
    EXPECT_EQ(wsp_ggml_quantize_chunk(type, x.data(), b.data(), 0, 1, n, imatrix), b.size());
    EXPECT_EQ(a, b) << wsp_ggml_type_name(type);
    return a;
}

// Q4_0 of x[j] = j - 16: the value of largest magnitude is -16, so d = -16 / -8 = 2 (fp16 0x4000)
// and q_j = min(15, (int8) ((j - 16) / 2 + 8.5)) = min(15, (j + 1) / 2); element j in the low
// nibble of byte j, element j + 16 in the high nibble
TEST(QuantizeApi, Q4_0BlockByHand) {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) {
        x[j] = (float) (j - 16);
    }
    const Bytes want = { 0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3,
                         0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8 };
    EXPECT_EQ(to_hex(quantize_row(WSP_GGML_TYPE_Q4_0, x)), to_hex(want));
}

// Q4_1 of x[j] = j mod 16: min 0, max 15, d = 15 / 15 = 1 (0x3c00), m = 0; q_j = x_j, so byte j
// holds j in both nibbles
TEST(QuantizeApi, Q4_1BlockByHand) {
    std::vector<float> x(32);
    Bytes              want = { 0x00, 0x3c, 0x00, 0x00 };
    for (int j = 0; j < 32; ++j) {
        x[j] = (float) (j % 16);
    }
    for (int j = 0; j < 16; ++j) {
        want.push_back((uint8_t) (j | (j << 4)));
    }
    EXPECT_EQ(to_hex(quantize_row(WSP_GGML_TYPE_Q4_1, x)), to_hex(want));
}

// Q5_0 of x[j] = j - 16: d = -16 / -16 = 1, q_j = (int8) (j - 16 + 16.5) = j: low nibbles j | j << 4,
// fifth bits set for elements 16..31 (qh = 0xffff0000, little-endian)
TEST(QuantizeApi, Q5_0BlockByHand) {
    std::vector<float> x(32);
    Bytes              want = { 0x00, 0x3c, 0x00, 0x00, 0xff, 0xff };
    for (int j = 0; j < 32; ++j) {
        x[j] = (float) (j - 16);
    }
    for (int j = 0; j < 16; ++j) {
        want.push_back((uint8_t) (j | (j << 4)));
    }
    EXPECT_EQ(to_hex(quantize_row(WSP_GGML_TYPE_Q5_0, x)), to_hex(want));
}

// Q5_1 of x[j] = j: min 0, max 31, d = 1, m = 0, q_j = j
TEST(QuantizeApi, Q5_1BlockByHand) {
    std::vector<float> x(32);
    Bytes              want = { 0x00, 0x3c, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff };
    for (int j = 0; j < 32; ++j) {
        x[j] = (float) j;
    }
    for (int j = 0; j < 16; ++j) {
        want.push_back((uint8_t) (j | (j << 4)));
    }
    EXPECT_EQ(to_hex(quantize_row(WSP_GGML_TYPE_Q5_1, x)), to_hex(want));
}

// Q8_0 of x[j] = j - 16 (amax 16): d = 16/127 (fp16 0x3008), id = 127/16 exactly, q_j = round((j - 16)
// * 127 / 16) with halves away from zero (j = 8 and 24: -63.5 -> -64, 63.5 -> 64); a block of zeros
// is d = 0 and all-zero quants
TEST(QuantizeApi, Q8_0BlocksByHand) {
    std::vector<float> x(64, 0.0f);
    Bytes              want = { 0x08, 0x30 };
    for (int j = 0; j < 32; ++j) {
        x[j] = (float) (j - 16);
        want.push_back((uint8_t) (int8_t) std::round((j - 16) * 127.0 / 16.0));
    }
    want.insert(want.end(), 34, 0x00);
    EXPECT_EQ(want[2 + 8], (uint8_t) (int8_t) -64);
    EXPECT_EQ(want[2 + 24], 64);
    EXPECT_EQ(to_hex(quantize_row(WSP_GGML_TYPE_Q8_0, x)), to_hex(want));
}

// An importance matrix is accepted and not used (src/core/quantize.cpp): the rows are rounded as
// without one, for every type, chunk by chunk as row by row
TEST(QuantizeApi, ImatrixGivesTheReferenceRounding) {
    const int64_t            n = 96, rows = 5;
    const std::vector<float> x = random_values((size_t) (n * rows), 7, -3.0f, 3.0f);
    const std::vector<float> w = random_values((size_t) n, 8, 0.1f, 4.0f);
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 }) {
        const size_t rs = wsp_ggml_row_size(t, n);
        Bytes        weighted(rs * rows), plain(rs * rows);
        ASSERT_EQ(wsp_ggml_wsp_quantize_chunk(t, x.data(), weighted.data(), 0, rows, n, w.data()), rs * rows);
        ASSERT_EQ(wsp_ggml_wsp_quantize_chunk(t, x.data(), plain.data(), 0, rows, n, nullptr), rs * rows);
        EXPECT_EQ(weighted, plain) << wsp_ggml_type_name(t);
    }
}

// start selects the first row: source values from start, destination from row start / n_per_row;
// rows outside the chunk are not written
TEST(QuantizeApi, ChunkOffsetsAndUntouchedRows) {
    const int64_t            n = 64, rows = 6;
    const std::vector<float> x = random_values((size_t) (n * rows), 3);
    for (wsp_ggml_type t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                             WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 }) {
        const size_t rs = wsp_ggml_row_size(t, n);
        Bytes        whole(rs * rows), part(rs * rows, 0xee);
        ASSERT_EQ(wsp_ggml_wsp_quantize_chunk(t, x.data(), whole.data(), 0, rows, n, nullptr), rs * rows);
        ASSERT_EQ(wsp_ggml_wsp_quantize_chunk(t, x.data(), part.data(), 2 * n, 3, n, nullptr), 3 * rs);
        for (size_t i = 0; i < part.size(); ++i) {
            const bool inside = i >= 2 * rs && i < 5 * rs;
            ASSERT_EQ(part[i], inside ? whole[i] : 0xee) << wsp_ggml_type_name(t) << " byte " << i;
        }
    }
}

// float types: the row converters (f16 and bf16 round to nearest even), no weights
TEST(QuantizeApi, FloatTypesAreTheRowConverters) {
    const std::vector<float> x = { 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, -65504.0f, 1e-8f, 3.14159f };
    Bytes                    h(x.size() * 2), b(x.size() * 2), f(x.size() * 4);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_F16, x.data(), h.data(), 0, 1, 5, nullptr), 10u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_BF16, x.data(), b.data(), 0, 1, 5, nullptr), 10u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_F32, x.data(), f.data(), 0, 1, 5, x.data()), 20u);
    for (size_t i = 0; i < x.size(); ++i) {
        uint16_t hv, bv;
        std::memcpy(&hv, &h[i * 2], 2);
        std::memcpy(&bv, &b[i * 2], 2);
        EXPECT_EQ(hv, ieee_fp16_bits(x[i])) << i;
        EXPECT_EQ(bv, ieee_bf16_bits(x[i])) << i;
    }
    EXPECT_EQ(std::memcmp(f.data(), x.data(), f.size()), 0);
}

TEST(QuantizeApi, BadArgumentsWriteNothingAndSaySo) {
    LogCapture         log;
    std::vector<float> x(128, 1.0f);
    Bytes              dst(1024, 0xee);
    // not whole blocks, start not at a row, a type we cannot write, a negative row count
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_Q4_0, x.data(), dst.data(), 0, 1, 48, nullptr), 0u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_Q8_0, x.data(), dst.data(), 32, 1, 64, nullptr), 0u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_IQ3_S, x.data(), dst.data(), 0, 1, 256, nullptr), 0u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk(WSP_GGML_TYPE_Q8_0, x.data(), dst.data(), 0, -1, 32, nullptr), 0u);
    EXPECT_EQ(wsp_ggml_wsp_quantize_chunk((wsp_ggml_type) 63, x.data(), dst.data(), 0, 1, 32, nullptr), 0u);
    EXPECT_EQ(dst, Bytes(1024, 0xee));
    EXPECT_TRUE(log.contains("block size 32"));
    EXPECT_TRUE(log.contains("iq3_s is not supported"));
    EXPECT_GE(log.count(WSP_GGML_LOG_LEVEL_ERROR), 5);
}

TEST(QuantizeApi, RequiresImatrixAsUpstream) {
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1,
           WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_IQ1_M }) {
        EXPECT_FALSE(wsp_ggml_wsp_quantize_requires_imatrix(t)) << wsp_ggml_type_name(t);
        EXPECT_FALSE(wsp_ggml_quantize_requires_imatrix(t)) << wsp_ggml_type_name(t);
    }
    for (wsp_ggml_type t : { WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ1_S }) {
        EXPECT_TRUE(wsp_ggml_wsp_quantize_requires_imatrix(t)) << wsp_ggml_type_name(t);
    }
}

// init needs no tables for the types we write (nothing logged), says so for the ones we do not;
// free may be called any number of times, and quantizing works after it
TEST(QuantizeApi, InitAndFree) {
    LogCapture log;
    for (int t : { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0,
                   WSP_GGML_TYPE_F16 }) {
        wsp_ggml_wsp_quantize_init((wsp_ggml_type) t);
        wsp_ggml_wsp_quantize_init((wsp_ggml_type) t);
    }
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    wsp_ggml_wsp_quantize_free();
    wsp_ggml_wsp_quantize_free();
    wsp_ggml_wsp_quantize_init(WSP_GGML_TYPE_IQ2_XXS);
    EXPECT_TRUE(log.contains("iq2_xxs is not supported")) << log.text();
    std::vector<float> x(32, 0.5f);
    EXPECT_EQ(quantize_row(WSP_GGML_TYPE_Q8_0, x).size(), 34u);
}

//
// validate_row_data
//

void put_u16(Bytes & b, size_t offset, uint16_t v) {
    std::memcpy(&b[offset], &v, 2);
}

TEST(ValidateRowData, GoodDataOfEveryQuantizedTypePasses) {
    const std::vector<float> x = random_values(256 * 3, 11, -4.0f, 4.0f);
    for (wsp_ggml_type t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                             WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 }) {
        Bytes q(wsp_ggml_row_size(t, (int64_t) x.size()));
        ASSERT_EQ(wsp_ggml_quantize_chunk(t, x.data(), q.data(), 0, 3, 256, nullptr), q.size());
        EXPECT_TRUE(wsp_ggml_validate_row_data(t, q.data(), q.size())) << wsp_ggml_type_name(t);
    }
    // zero bytes are valid blocks of every type (zero scales), integers are never invalid
    for (int t = 0; t < WSP_GGML_TYPE_COUNT; ++t) {
        if (wsp_ggml_blck_size((wsp_ggml_type) t) == 0) {
            continue; // removed type ids
        }
        Bytes zeros(wsp_ggml_type_size((wsp_ggml_type) t) * 4, 0);
        EXPECT_TRUE(wsp_ggml_validate_row_data((wsp_ggml_type) t, zeros.data(), zeros.size()))
            << wsp_ggml_type_name((wsp_ggml_type) t);
    }
    Bytes ints(64, 0xff);
    EXPECT_TRUE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_I32, ints.data(), ints.size()));
    EXPECT_TRUE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_Q4_0, nullptr, 0));
}

TEST(ValidateRowData, NonFiniteFloatsAreNamed) {
    LogCapture         log;
    std::vector<float> f(20, 1.0f);
    f[13] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F32, f.data(), f.size() * 4));
    EXPECT_TRUE(log.contains("f32 block 13: the value is NaN")) << log.text();
    f[13] = 1.0f;
    f[19] = -std::numeric_limits<float>::infinity();
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F32, f.data(), f.size() * 4));
    EXPECT_TRUE(log.contains("f32 block 19: the value is infinite")) << log.text();

    std::vector<uint16_t> h(40, 0x3c00);
    h[33] = 0x7c00; // +inf
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F16, h.data(), h.size() * 2));
    EXPECT_TRUE(log.contains("f16 block 33: the value is infinite")) << log.text();
    h[33] = 0xfe01; // NaN
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F16, h.data(), h.size() * 2));
    h[33] = 0x7bff; // the largest finite fp16
    EXPECT_TRUE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F16, h.data(), h.size() * 2));

    std::vector<uint16_t> b(10, 0x3f80);
    b[4] = 0x7fc0; // NaN
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_BF16, b.data(), b.size() * 2));
    EXPECT_TRUE(log.contains("bf16 block 4: the value is NaN")) << log.text();
    b[4] = 0xff80; // -inf
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_BF16, b.data(), b.size() * 2));
    b[4] = 0x7f7f; // the largest finite bf16
    EXPECT_TRUE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_BF16, b.data(), b.size() * 2));
}

// a NaN or infinite fp16 scale in block 2 of each layout (SPEC.md: d first, then m for the _1
// types; the K types keep theirs after the quants) is found and named
TEST(ValidateRowData, BadBlockScalesAreNamed) {
    struct Case {
        wsp_ggml_type type;
        size_t        offset; // of the damaged scale in its block
        const char *  what;
    };
    const Case cases[] = {
        { WSP_GGML_TYPE_Q4_0, 0, "the scale d" },   { WSP_GGML_TYPE_Q4_1, 0, "the scale d" },
        { WSP_GGML_TYPE_Q4_1, 2, "the scale m" },   { WSP_GGML_TYPE_Q5_0, 0, "the scale d" },
        { WSP_GGML_TYPE_Q5_1, 2, "the scale m" },   { WSP_GGML_TYPE_Q8_0, 0, "the scale d" },
        { WSP_GGML_TYPE_Q8_1, 2, "the scale s" },   { WSP_GGML_TYPE_Q2_K, 82, "the scale dmin" },
        { WSP_GGML_TYPE_Q3_K, 108, "the scale d" }, { WSP_GGML_TYPE_Q4_K, 2, "the scale dmin" },
        { WSP_GGML_TYPE_Q5_K, 0, "the scale d" },   { WSP_GGML_TYPE_Q6_K, 208, "the scale d" },
        { WSP_GGML_TYPE_TQ2_0, 64, "the scale d" }, { WSP_GGML_TYPE_IQ4_NL, 0, "the scale d" },
    };
    for (const Case & c : cases) {
        for (uint16_t bad : { (uint16_t) 0x7e00, (uint16_t) 0xfc00 }) {
            LogCapture   log;
            const size_t bs = wsp_ggml_type_size(c.type);
            Bytes        data(bs * 4, 0);
            put_u16(data, 2 * bs + c.offset, bad);
            EXPECT_FALSE(wsp_ggml_validate_row_data(c.type, data.data(), data.size())) << wsp_ggml_type_name(c.type);
            const std::string want = std::string(wsp_ggml_type_name(c.type)) + " block 2: " + c.what + " is " +
                                     (bad == 0x7e00 ? "NaN" : "infinite");
            EXPECT_TRUE(log.contains(want)) << "want \"" << want << "\" in: " << log.text();
        }
    }
    // Q8_K's scale is an f32
    LogCapture  log;
    Bytes       q8k(wsp_ggml_type_size(WSP_GGML_TYPE_Q8_K) * 2, 0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(&q8k[wsp_ggml_type_size(WSP_GGML_TYPE_Q8_K)], &nan, 4);
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_Q8_K, q8k.data(), q8k.size()));
    EXPECT_TRUE(log.contains("q8_K block 1: the scale d is NaN")) << log.text();
}

TEST(ValidateRowData, PartialBlocksAndBadTypesAreRefused) {
    LogCapture log;
    Bytes      data(18 * 3 + 5, 0);
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_Q4_0, data.data(), data.size()));
    EXPECT_TRUE(log.contains("q4_0: 59 bytes is not a whole number of blocks of 18 bytes (block 3 is cut short)"))
        << log.text();
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_F32, data.data(), 6));
    EXPECT_FALSE(wsp_ggml_validate_row_data((wsp_ggml_type) 4, data.data(), 18)); // a removed type id
    EXPECT_FALSE(wsp_ggml_validate_row_data(WSP_GGML_TYPE_COUNT, data.data(), 18));
    EXPECT_TRUE(log.contains("invalid type")) << log.text();
}

} // namespace
} // namespace wsp::test
