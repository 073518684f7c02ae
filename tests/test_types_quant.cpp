// Quantized block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: expected bytes derived here from the
// layout rules (SPEC.md) and the reference rounding rules, dequantization against the value
// formulas, per-element round-trip error bounds, and wsp_ggml_quantize_chunk.

#include "test_util.h"

#include "../src/cpu/mul_mat_path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace wsp::test {
namespace {

constexpr int QK = 32;

// what the reference quantizer decides for one block, in exact arithmetic
struct RefBlock {
    double d = 0.0; // scale before fp16 storage
    double m = 0.0; // min (Q4_1, Q5_1)
    int    q[QK];
    double qv[QK]; // the quantity that was rounded, to detect ties
};

// element with the largest magnitude (the first one on ties), sign kept
double signed_absmax(const float * x) {
    double amax = 0.0, vmax = 0.0;
    for (int j = 0; j < QK; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            vmax = x[j];
        }
    }
    return vmax;
}

// the scale as the quantizer computes it in float (a correctly rounded float division)
double float_div(double num, double den) {
    return (double) (float) (num / den);
}

RefBlock ref_quantize(wsp_ggml_type type, const float * x) {
    RefBlock b;
    double   mn = x[0], mx = x[0], amax = 0.0;
    for (int j = 0; j < QK; ++j) {
        mn   = std::min(mn, (double) x[j]);
        mx   = std::max(mx, (double) x[j]);
        amax = std::max(amax, std::fabs((double) x[j]));
    }
    for (int j = 0; j < QK; ++j) {
        switch (type) {
            case WSP_GGML_TYPE_Q4_0: // d = vmax / -8, q = floor(x / d + 8.5) in [0, 15]
                b.d     = float_div(signed_absmax(x), -8.0);
                b.qv[j] = b.d != 0.0 ? x[j] / b.d + 8.5 : 8.5;
                b.q[j]  = std::min(15, (int) std::floor(b.qv[j]));
                break;
            case WSP_GGML_TYPE_Q5_0: // d = vmax / -16, q = floor(x / d + 16.5) in [0, 31]
                b.d     = float_div(signed_absmax(x), -16.0);
                b.qv[j] = b.d != 0.0 ? x[j] / b.d + 16.5 : 16.5;
                b.q[j]  = std::min(31, (int) std::floor(b.qv[j]));
                break;
            case WSP_GGML_TYPE_Q4_1: // d = (max - min) / 15, q = floor((x - min) / d + 0.5)
            case WSP_GGML_TYPE_Q5_1: {
                const int levels = type == WSP_GGML_TYPE_Q4_1 ? 15 : 31;
                b.m              = mn;
                b.d              = float_div((double) ((float) mx - (float) mn), levels);
                b.qv[j]          = b.d != 0.0 ? (x[j] - mn) / b.d + 0.5 : 0.5;
                b.q[j]           = std::min(levels, (int) std::floor(b.qv[j]));
                break;
            }
            default: // Q8_0: d = amax / 127, q = round(x / d), halves away from zero
                b.d     = float_div(amax, 127.0);
                b.qv[j] = b.d != 0.0 ? x[j] / b.d : 0.0;
                b.q[j]  = (int) std::round(b.qv[j]);
                break;
        }
    }
    return b;
}

void put_u16(std::vector<uint8_t> & out, uint16_t v) {
    out.push_back((uint8_t) (v & 0xff));
    out.push_back((uint8_t) (v >> 8));
}

// the block's bytes from the layout rules: fp16 fields little-endian; nibbles: element j low,
// element j+16 high; fifth bits: bit j of a little-endian uint32
std::vector<uint8_t> ref_block_bytes(wsp_ggml_type type, const RefBlock & b) {
    std::vector<uint8_t> out;
    put_u16(out, ieee_fp16_bits((float) b.d));
    if (type == WSP_GGML_TYPE_Q4_1 || type == WSP_GGML_TYPE_Q5_1) {
        put_u16(out, ieee_fp16_bits((float) b.m));
    }
    if (type == WSP_GGML_TYPE_Q8_0) {
        for (int j = 0; j < QK; ++j) {
            out.push_back((uint8_t) (int8_t) b.q[j]);
        }
        return out;
    }
    if (type == WSP_GGML_TYPE_Q5_0 || type == WSP_GGML_TYPE_Q5_1) {
        uint32_t qh = 0;
        for (int j = 0; j < QK; ++j) {
            qh |= (uint32_t) ((b.q[j] >> 4) & 1) << j;
        }
        for (int k = 0; k < 4; ++k) {
            out.push_back((uint8_t) (qh >> (8 * k)));
        }
    }
    for (int j = 0; j < QK / 2; ++j) {
        out.push_back((uint8_t) ((b.q[j] & 0x0f) | ((b.q[j + QK / 2] & 0x0f) << 4)));
    }
    return out;
}

// a fixed vector is only a valid oracle if no rounded quantity sits next to a rounding boundary
// (float and exact arithmetic could then disagree)
void expect_no_near_ties(wsp_ggml_type type, const RefBlock & b, const char * name) {
    for (int j = 0; j < QK; ++j) {
        const double boundary = type == WSP_GGML_TYPE_Q8_0 ? std::floor(b.qv[j]) + 0.5 : std::round(b.qv[j]);
        const double dist     = std::fabs(b.qv[j] - boundary);
        const bool   exact    = dist == 0.0 && b.qv[j] == std::floor(b.qv[j]) && type != WSP_GGML_TYPE_Q8_0;
        EXPECT_TRUE(exact || dist > 1e-4) << name << ": element " << j << " rounds at a tie (" << b.qv[j] << ")";
    }
}

std::vector<float> fixed_vector(const char * name) {
    std::vector<float> x(QK);
    for (int j = 0; j < QK; ++j) {
        if (std::strcmp(name, "ramp") == 0) {
            x[j] = (float) (2 * j - 31) * 0.25f; // -7.75 .. 7.75, step 0.5
        } else if (std::strcmp(name, "constant") == 0) {
            x[j] = 0.75f;
        } else if (std::strcmp(name, "zeros") == 0) {
            x[j] = 0.0f;
        } else { // outlier: small values and one large negative element
            x[j] = 0.05f * (float) ((j * 7) % 11) - 0.23f;
        }
    }
    if (std::strcmp(name, "outlier") == 0) {
        x[13] = -40.0f;
    }
    return x;
}

std::vector<uint8_t> quantize_row(wsp_ggml_type type, const std::vector<float> & x) {
    std::vector<uint8_t> out(wsp_ggml_row_size(type, (int64_t) x.size()));
    wsp_ggml_get_type_traits(type)->from_float_ref(x.data(), out.data(), (int64_t) x.size());
    return out;
}

class QuantTest : public ::testing::TestWithParam<wsp_ggml_type> {};

TEST_P(QuantTest, FixedVectorsGiveTheDerivedBytes) {
    const wsp_ggml_type  type = GetParam();
    std::vector<float>   row;
    std::vector<uint8_t> expect;
    for (const char * name : { "ramp", "constant", "zeros", "outlier" }) {
        const std::vector<float> x = fixed_vector(name);
        const RefBlock           b = ref_quantize(type, x.data());
        expect_no_near_ties(type, b, name);
        const std::vector<uint8_t> bytes = ref_block_bytes(type, b);
        ASSERT_EQ(bytes.size(), wsp_ggml_type_size(type));
        EXPECT_EQ(quantize_row(type, x), bytes) << name;
        row.insert(row.end(), x.begin(), x.end());
        expect.insert(expect.end(), bytes.begin(), bytes.end());
    }
    // the same blocks as one row of four blocks
    EXPECT_EQ(quantize_row(type, row), expect);
}

TEST_P(QuantTest, KnownBlocksHaveTheExpectedLevels) {
    const wsp_ggml_type      type = GetParam();
    const std::vector<float> ramp = fixed_vector("ramp");
    const RefBlock           b    = ref_quantize(type, ramp.data());
    switch (type) {
        case WSP_GGML_TYPE_Q4_0: // d = 31/32: every level from 0 to 15 is used, the top one clamped
            EXPECT_EQ(b.d, 0.96875);
            EXPECT_EQ(b.q[0], 0);
            EXPECT_EQ(b.q[31], 15);
            break;
        case WSP_GGML_TYPE_Q5_1: // d = 0.5 exactly: element j is level j
            EXPECT_EQ(b.d, 0.5);
            for (int j = 0; j < QK; ++j) {
                EXPECT_EQ(b.q[j], j);
            }
            break;
        case WSP_GGML_TYPE_Q8_0:
            EXPECT_EQ(b.q[0], -127);
            EXPECT_EQ(b.q[31], 127);
            break;
        default: break;
    }
    const std::vector<float> zeros = fixed_vector("zeros");
    const std::vector<float> deq   = [&] {
        std::vector<uint8_t> q = quantize_row(type, zeros);
        std::vector<float>   y(QK);
        wsp_ggml_get_type_traits(type)->to_float(q.data(), y.data(), QK);
        return y;
    }();
    for (float v : deq) {
        EXPECT_EQ(v, 0.0f);
    }
}

// value of element j of a block from the bytes, by the SPEC formulas
double ref_dequant(wsp_ggml_type type, const uint8_t * blk, int j) {
    auto         f16 = [&](int off) { return ieee_fp16_value((uint16_t) (blk[off] | (blk[off + 1] << 8))); };
    const double d   = f16(0);
    switch (type) {
        case WSP_GGML_TYPE_Q8_0: return (int8_t) blk[2 + j] * d;
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q4_1: {
            const int off = type == WSP_GGML_TYPE_Q4_0 ? 2 : 4;
            const int q   = j < 16 ? (blk[off + j] & 0x0f) : (blk[off + j - 16] >> 4);
            return type == WSP_GGML_TYPE_Q4_0 ? (q - 8) * d : q * d + f16(2);
        }
        default: { // Q5_0, Q5_1
            const int off = type == WSP_GGML_TYPE_Q5_0 ? 2 : 4;
            uint32_t  qh  = 0;
            std::memcpy(&qh, blk + off, 4);
            const int lo = j < 16 ? (blk[off + 4 + j] & 0x0f) : (blk[off + 4 + j - 16] >> 4);
            const int q  = lo | (int) (((qh >> j) & 1u) << 4);
            return type == WSP_GGML_TYPE_Q5_0 ? (q - 16) * d : q * d + f16(2);
        }
    }
}

TEST_P(QuantTest, DequantizationFollowsTheValueFormula) {
    const wsp_ggml_type  type  = GetParam();
    const size_t         bsize = wsp_ggml_type_size(type);
    const int            nblk  = 37;
    std::vector<uint8_t> bytes(bsize * nblk);
    std::mt19937         rng(77);
    for (uint8_t & v : bytes) {
        v = (uint8_t) rng();
    }
    // finite scales: replace the fp16 fields with halves of random values in [-2, 2)
    const std::vector<float> scales = random_values(2 * nblk, 78, -2.0f, 2.0f);
    for (int b = 0; b < nblk; ++b) {
        const uint16_t d = ieee_fp16_bits(scales[2 * b]);
        const uint16_t m = ieee_fp16_bits(scales[2 * b + 1]);
        std::memcpy(&bytes[b * bsize], &d, 2);
        if (type == WSP_GGML_TYPE_Q4_1 || type == WSP_GGML_TYPE_Q5_1) {
            std::memcpy(&bytes[b * bsize + 2], &m, 2);
        }
    }
    std::vector<float> y(QK * nblk);
    wsp_ggml_get_type_traits(type)->to_float(bytes.data(), y.data(), (int64_t) y.size());
    for (int b = 0; b < nblk; ++b) {
        for (int j = 0; j < QK; ++j) {
            const double expect = ref_dequant(type, &bytes[b * bsize], j);
            ASSERT_NEAR(y[b * QK + j], expect, 1e-5 + 1e-6 * std::fabs(expect)) << "block " << b << " element " << j;
        }
    }
}

// Round-trip bound per element. With d the float scale and dh its fp16 value:
//  - symmetric types (Q4_0: L = 8, Q5_0: L = 16): q - L = clamp(round(x / d)) and |x / d| <= L, so
//    |x - (q - L) d| <= |d| / 2, except where x / d > L - 0.5 is clamped to L - 1: then
//    |x - (q - L) d| = (x / d - (L - 1)) |d| <= |d|. Storing d as dh adds |q - L| |d - dh| <= L |d - dh|.
//  - Q4_1 / Q5_1 (levels N): |x - (q d + m)| <= d / 2, plus N |d - dh| and |m - mh| from storage.
//  - Q8_0: |x - q d| <= d / 2 plus 127 |d - dh|.
// A small slack covers the quantizer's float arithmetic near rounding boundaries.
double error_bound(wsp_ggml_type type, const float * x, int j) {
    const RefBlock b     = ref_quantize(type, x);
    const double   d     = std::fabs(b.d);
    const double   dh    = std::fabs(ieee_fp16_value(ieee_fp16_bits((float) b.d)));
    const double   mh    = ieee_fp16_value(ieee_fp16_bits((float) b.m));
    const double   slack = 1e-5 * d + 1e-7 * std::fabs(x[j]);
    switch (type) {
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q5_0: {
            const double L     = type == WSP_GGML_TYPE_Q4_0 ? 8.0 : 16.0;
            const double ratio = b.d != 0.0 ? x[j] / b.d : 0.0;
            return d * std::max(0.5, ratio - (L - 1.0)) + L * std::fabs(d - dh) + slack;
        }
        case WSP_GGML_TYPE_Q4_1: return d / 2 + 15 * std::fabs(d - dh) + std::fabs(b.m - mh) + slack;
        case WSP_GGML_TYPE_Q5_1: return d / 2 + 31 * std::fabs(d - dh) + std::fabs(b.m - mh) + slack;
        default: return d / 2 + 127 * std::fabs(d - dh) + slack;
    }
}

TEST_P(QuantTest, RoundTripErrorIsWithinTheDerivedBound) {
    const wsp_ggml_type type = GetParam();
    const int           nblk = 400;
    std::vector<float>  x    = random_values((size_t) QK * nblk, 31, -1.0f, 1.0f);
    for (int b = 0; b < nblk; ++b) { // vary the scale by blocks, and the sign balance
        const float scale = std::ldexp(1.0f, b % 17 - 8);
        for (int j = 0; j < QK; ++j) {
            x[b * QK + j] = x[b * QK + j] * scale + (b % 3 == 0 ? 0.5f * scale : 0.0f);
        }
        if (b % 5 == 0) {
            x[b * QK + b % QK] = -x[b * QK + (b + 1) % QK]; // two elements of equal magnitude
        }
    }
    const std::vector<uint8_t> q = quantize_row(type, x);
    std::vector<float>         y(x.size());
    wsp_ggml_get_type_traits(type)->to_float(q.data(), y.data(), (int64_t) y.size());
    double worst = 0.0; // largest error relative to the scale: the bound must not be loose by 2x
    for (int b = 0; b < nblk; ++b) {
        const RefBlock rb = ref_quantize(type, &x[b * QK]);
        for (int j = 0; j < QK; ++j) {
            const double err = std::fabs((double) x[b * QK + j] - y[b * QK + j]);
            ASSERT_LE(err, error_bound(type, &x[b * QK], j)) << "block " << b << " element " << j;
            if (rb.d != 0.0) {
                worst = std::max(worst, err / std::fabs(rb.d));
            }
        }
    }
    EXPECT_GT(worst, 0.4);
}

TEST_P(QuantTest, QuantizeChunkWritesRowsFromStart) {
    const wsp_ggml_type      type      = GetParam();
    const int64_t            n_per_row = 96, nrows_total = 5, start_row = 2, nrows = 3;
    const std::vector<float> x        = random_values((size_t) (n_per_row * nrows_total), 4, -2.0f, 2.0f);
    const size_t             row_size = wsp_ggml_row_size(type, n_per_row);
    std::vector<uint8_t>     dst(row_size * nrows_total + 16, 0xab);

    const size_t n =
        wsp_ggml_quantize_chunk(type, x.data(), dst.data(), start_row * n_per_row, nrows, n_per_row, nullptr);
    EXPECT_EQ(n, (size_t) nrows * row_size);
    for (int64_t r = 0; r < nrows_total; ++r) {
        const uint8_t * got = dst.data() + r * row_size;
        if (r < start_row) {
            for (size_t k = 0; k < row_size; ++k) {
                ASSERT_EQ(got[k], 0xab) << "row " << r << " was written";
            }
            continue;
        }
        const std::vector<float>   xr(x.begin() + r * n_per_row, x.begin() + (r + 1) * n_per_row);
        const std::vector<uint8_t> expect = quantize_row(type, xr);
        EXPECT_EQ(std::vector<uint8_t>(got, got + row_size), expect) << "row " << r;
    }
    for (size_t k = row_size * nrows_total; k < dst.size(); ++k) {
        ASSERT_EQ(dst[k], 0xab) << "written past the last row";
    }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantTest, ::testing::ValuesIn(quant_types()),
                         [](const auto & info) { return std::string(wsp_ggml_type_name(info.param)); });

TEST(QuantizeChunk, FloatTypesAreStoredAsIs) {
    const std::vector<float> x = random_values(40, 8);
    std::vector<uint16_t>    h(40);
    EXPECT_EQ(wsp_ggml_quantize_chunk(WSP_GGML_TYPE_F16, x.data(), h.data(), 0, 4, 10, nullptr), 80u);
    for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(h[i], ieee_fp16_bits(x[i]));
    }
    std::vector<uint16_t> b(40);
    EXPECT_EQ(wsp_ggml_quantize_chunk(WSP_GGML_TYPE_BF16, x.data(), b.data(), 10, 3, 10, nullptr), 60u);
    for (size_t i = 10; i < x.size(); ++i) {
        EXPECT_EQ(b[i], ieee_bf16_bits(x[i]));
    }
}

TEST(QuantizeChunk, RefusesTypesItCannotProduce) {
    const std::vector<float> x = random_values(512, 8);
    std::vector<uint8_t>     dst(4096, 0x5a);
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_M, WSP_GGML_TYPE_Q8_1, WSP_GGML_TYPE_I32 }) {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_quantize_chunk(t, x.data(), dst.data(), 0, 2, 256, nullptr), 0u) << wsp_ggml_type_name(t);
        EXPECT_TRUE(log.contains("not supported")) << log.text();
        EXPECT_TRUE(log.contains(wsp_ggml_type_name(t))) << log.text();
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 1);
    }
    for (uint8_t v : dst) {
        ASSERT_EQ(v, 0x5a);
    }
    LogCapture log; // a row that is not a whole number of blocks
    EXPECT_EQ(wsp_ggml_quantize_chunk(WSP_GGML_TYPE_Q4_0, x.data(), dst.data(), 0, 2, 48, nullptr), 0u);
    EXPECT_TRUE(log.contains("block size")) << log.text();
}

TEST(QuantizeChunk, InitAndImatrixQueries) {
    wsp_ggml_quantize_init(WSP_GGML_TYPE_Q4_0);
    wsp_ggml_quantize_init(WSP_GGML_TYPE_Q4_0);
    EXPECT_FALSE(wsp_ggml_quantize_requires_imatrix(WSP_GGML_TYPE_Q4_0));
    EXPECT_FALSE(wsp_ggml_quantize_requires_imatrix(WSP_GGML_TYPE_Q8_0));
    EXPECT_TRUE(wsp_ggml_quantize_requires_imatrix(WSP_GGML_TYPE_IQ2_XXS));
    EXPECT_TRUE(wsp_ggml_quantize_requires_imatrix(WSP_GGML_TYPE_IQ1_S));
    wsp_ggml_quantize_free();
}

} // namespace
} // namespace wsp::test

namespace wsp::test {
namespace {

struct OwnedCtx {
    explicit OwnedCtx(size_t size) : ctx(wsp_ggml_init({ size, nullptr, false })) {}
    ~OwnedCtx() { wsp_ggml_free(ctx); }
    wsp_ggml_context * ctx;
};

} // namespace

// The super-block types have a dequantizer and a reference quantizer (both bit for bit the client's:
// Types.ConvertAsTheClient): the CPU backend computes MUL_MAT and GET_ROWS with such weights. A
// K-quant weight at few b rows takes the dot_q8 path (mul_mat_kq.cpp), which quantizes the b rows
// to Q8_K as the client's kernels do, and is held to the product of the dequantized weights with the
// Q8_K round trip of the activations (so its integer sums must be exact); every other case to the
// product with the activations as they are. M covers the tiles of 1 to 4 rows, the four-row stream
// of one b row and the GEMM. The grid
// i-quants take part where the build has their codebooks (TypeTraits.EveryTypeConvertsOrIsStorageOnly
// says which builds must).
TEST(SuperBlockTypes, MulMatAndGetRowsComputeThroughTheDequantizer) {
    const auto * q8k = wsp_ggml_get_type_traits(WSP_GGML_TYPE_Q8_K);
    for (wsp_ggml_type type :
         { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q6_K,
           WSP_GGML_TYPE_TQ1_0, WSP_GGML_TYPE_TQ2_0, WSP_GGML_TYPE_IQ4_NL, WSP_GGML_TYPE_IQ4_XS, WSP_GGML_TYPE_IQ2_XXS,
           WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ2_S, WSP_GGML_TYPE_IQ3_XXS, WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_S,
           WSP_GGML_TYPE_IQ1_M }) {
        const bool grid = type == WSP_GGML_TYPE_IQ2_XXS || type == WSP_GGML_TYPE_IQ2_XS ||
                          type == WSP_GGML_TYPE_IQ2_S || type == WSP_GGML_TYPE_IQ3_XXS || type == WSP_GGML_TYPE_IQ3_S ||
                          type == WSP_GGML_TYPE_IQ1_S || type == WSP_GGML_TYPE_IQ1_M;
        if (grid && wsp_ggml_get_type_traits(type)->to_float == nullptr) {
            continue; // a grid i-quant in a build without the codebooks
        }
        for (int64_t M : { 1, 3, 6, 9, 150 }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " M=" + std::to_string(M));
            const auto * tr = wsp_ggml_get_type_traits(type);
            // at M = 1 each task takes its rows four at a time, a quarter of its range apart (Note
            // [four-row stream]): 37 rows give the two tasks 20 and 17, with one left over
            const int64_t     K = 1280, N = M == 1 ? 37 : 6;
            OwnedCtx          c(1 << 23);
            wsp_ggml_tensor * w    = wsp_ggml_new_tensor_2d(c.ctx, type, K, N);
            wsp_ggml_tensor * x    = wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F32, K, M);
            wsp_ggml_tensor * ids  = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_I32, 2);
            wsp_ggml_tensor * y    = wsp_ggml_mul_mat(c.ctx, w, x);
            wsp_ggml_tensor * rows = wsp_ggml_get_rows(c.ctx, w, ids);
            wsp_ggml_cgraph * g    = wsp_ggml_new_graph(c.ctx);
            wsp_ggml_build_forward_expand(g, y);
            wsp_ggml_build_forward_expand(g, rows);
            const std::vector<uint8_t> blocks = random_blocks(type, K * N / tr->blck_size, 7);
            std::memcpy(w->data, blocks.data(), blocks.size());
            const std::vector<float> xs = random_values((size_t) (K * M), 11, -1.0f, 1.0f);
            std::memcpy(x->data, xs.data(), xs.size() * sizeof(float));
            const int32_t which[2] = { 4, 1 };
            std::memcpy(ids->data, which, sizeof(which));
            ASSERT_EQ(wsp_ggml_graph_compute_with_ctx(c.ctx, g, 2), WSP_GGML_STATUS_SUCCESS);

            std::vector<float> wf((size_t) (K * N));
            tr->to_float(blocks.data(), wf.data(), K * N);
            std::vector<float> vx   = get_values(x);
            const bool         q8_k = cpu::mm::choose_path(type, N, M) == cpu::mm::Path::dot_q8;
            if (q8_k) {
                std::vector<uint8_t> q(wsp_ggml_row_size(WSP_GGML_TYPE_Q8_K, K * M));
                q8k->from_float_ref(vx.data(), q.data(), K * M);
                q8k->to_float(q.data(), vx.data(), K * M);
            }
            // each output to within float rounding of its sum of |products| (the random blocks' weights
            // reach hundreds, so the sums cancel a lot): an error of the integer sums would be far more
            const std::vector<float> vy = get_values(y), vr = get_values(rows);
            int                      n_bad = 0;
            for (int64_t m = 0; m < M; ++m) {
                for (int64_t n = 0; n < N; ++n) {
                    double ref = 0.0, mag = 0.0;
                    for (int64_t k = 0; k < K; ++k) {
                        const double p = (double) wf[(size_t) (n * K + k)] * vx[(size_t) (m * K + k)];
                        ref += p;
                        mag += std::fabs(p);
                    }
                    const float got = vy[(size_t) (m * N + n)];
                    if (!(std::fabs(got - ref) <= 2e-5 * mag) && n_bad++ < 4) {
                        ADD_FAILURE() << (q8_k ? "against the dequantized weights and Q8_K activations"
                                               : "against the dequantized weights")
                                      << ": [" << m << ", " << n << "] got " << got << ", expected " << ref
                                      << " (sum of |products| " << mag << ")";
                    }
                }
            }
            for (int r = 0; r < 2; ++r) {
                for (int64_t k = 0; k < K; ++k) {
                    ASSERT_EQ(vr[(size_t) (r * K + k)], wf[(size_t) (which[r] * K + k)]) << "get_rows row " << r;
                }
            }
        }
    }
}

// the root mean square of x - y over that of x
double relative_rms_error(const std::vector<float> & x, const std::vector<float> & y) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num += ((double) x[i] - y[i]) * ((double) x[i] - y[i]);
        den += (double) x[i] * x[i];
    }
    return std::sqrt(num / den);
}

std::vector<float> gaussian_values(size_t n, uint32_t seed) {
    std::mt19937                    rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f); // a weight matrix's spread
    std::vector<float>              v(n);
    for (float & x : v) {
        x = normal(rng);
    }
    return v;
}

// Each quantizer's round trip stays within its type's error on gaussian weights (the bounds are a
// little above what the client's reference gives, and each K-quant bit halves the error), an
// all-zero block comes back zero, and quantize_chunk writes the reference's bytes, except IQ4_NL's,
// which (as the client's) tries 15 more scales a block and so comes out at least as close
TEST(SuperBlockTypes, QuantizersRoundTripWithinTheirTypesError) {
    struct Bound {
        wsp_ggml_type type;
        double        max_error;
    };
    const Bound bounds[] = {
        { WSP_GGML_TYPE_Q2_K, 0.36 },   { WSP_GGML_TYPE_Q3_K, 0.18 },  { WSP_GGML_TYPE_Q4_K, 0.09 },
        { WSP_GGML_TYPE_Q5_K, 0.045 },  { WSP_GGML_TYPE_Q6_K, 0.022 }, { WSP_GGML_TYPE_Q8_K, 0.008 },
        { WSP_GGML_TYPE_TQ1_0, 0.85 },  { WSP_GGML_TYPE_TQ2_0, 0.85 }, { WSP_GGML_TYPE_IQ4_NL, 0.09 },
        { WSP_GGML_TYPE_IQ4_XS, 0.09 },
    };
    const int64_t            n_per_row = 1024, rows = 8;
    const std::vector<float> x        = gaussian_values((size_t) (n_per_row * rows), 5);
    double                   previous = 1.0;
    for (const Bound & b : bounds) {
        SCOPED_TRACE(wsp_ggml_type_name(b.type));
        const auto *         tr = wsp_ggml_get_type_traits(b.type);
        std::vector<uint8_t> q(wsp_ggml_row_size(b.type, n_per_row) * rows);
        tr->from_float_ref(x.data(), q.data(), (int64_t) x.size());
        std::vector<float> y(x.size());
        tr->to_float(q.data(), y.data(), (int64_t) y.size());
        const double error = relative_rms_error(x, y);
        std::printf("%-7s relative RMS error %.4f (bound %.4f)\n", wsp_ggml_type_name(b.type), error, b.max_error);
        EXPECT_LT(error, b.max_error);
        if (b.type <= WSP_GGML_TYPE_Q8_K) { // the K-quants in order of bits: each one closer
            EXPECT_LT(error, previous);
            previous = error;
        }

        std::vector<uint8_t> chunk(q.size());
        ASSERT_EQ(wsp_ggml_quantize_chunk(b.type, x.data(), chunk.data(), 0, rows, n_per_row, nullptr),
                  b.type == WSP_GGML_TYPE_Q8_K ? q.size() : chunk.size());
        if (b.type == WSP_GGML_TYPE_IQ4_NL) {
            std::vector<float> yc(x.size());
            tr->to_float(chunk.data(), yc.data(), (int64_t) yc.size());
            EXPECT_LE(relative_rms_error(x, yc), error);
            EXPECT_NE(chunk, q); // the further scales found a closer fit somewhere
        } else {
            EXPECT_EQ(chunk, q);
        }

        const std::vector<float> zeros((size_t) n_per_row, 0.0f);
        tr->from_float_ref(zeros.data(), q.data(), n_per_row);
        tr->to_float(q.data(), y.data(), n_per_row);
        for (int64_t i = 0; i < n_per_row; ++i) {
            ASSERT_EQ(y[(size_t) i], 0.0f) << i;
        }
    }
}

// CPY from f32 to a super-block type is the reference quantizer, row by row (into a strided
// destination), and back from it the dequantizer
TEST(SuperBlockTypes, CopyConvertsAsTheTraits) {
    for (wsp_ggml_type type : { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q6_K, WSP_GGML_TYPE_IQ4_XS }) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        const int64_t     K = 512, N = 3;
        OwnedCtx          c(1 << 22);
        wsp_ggml_tensor * src  = wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F32, K, N);
        wsp_ggml_tensor * q    = wsp_ggml_new_tensor_2d(c.ctx, type, K, N);
        wsp_ggml_tensor * back = wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F32, K, N);
        wsp_ggml_cgraph * g    = wsp_ggml_new_graph(c.ctx);
        wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(c.ctx, src, q));
        wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(c.ctx, q, back));
        const std::vector<float> xs = gaussian_values((size_t) (K * N), 9);
        std::memcpy(src->data, xs.data(), xs.size() * sizeof(float));
        ASSERT_EQ(wsp_ggml_graph_compute_with_ctx(c.ctx, g, 2), WSP_GGML_STATUS_SUCCESS);

        const auto *         tr = wsp_ggml_get_type_traits(type);
        std::vector<uint8_t> ref(wsp_ggml_nbytes(q));
        tr->from_float_ref(xs.data(), ref.data(), K * N);
        EXPECT_EQ(std::memcmp(q->data, ref.data(), ref.size()), 0);
        std::vector<float> y((size_t) (K * N));
        tr->to_float(ref.data(), y.data(), K * N);
        EXPECT_EQ(get_values(back), y);
    }
}

} // namespace wsp::test
