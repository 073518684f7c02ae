// The HIP vendor's own device helpers (src/hip/vendor.cuh), compiled as HIP and run on the host:
// the bf16 conversions the kernels use where HIP's bf16 types differ by version, and the portable
// dp4a (targets without a dot-product instruction). References: core/fp16.h, which the CPU
// backend rounds with, and a byte-by-byte sum. Built only with WSP_GGML_HIP.

#include "../src/core/fp16.h"
#include "cuda/vendor.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

float from_bits(uint32_t u) {
    return __builtin_bit_cast(float, u);
}

TEST(HipVendor, Bf16RoundsLikeTheCpu) {
    // every exponent and sign, with mantissas that probe the rounding bits (ties, just above and
    // below, odd and even kept bits) plus a random spread
    const uint32_t low[] = { 0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x17fffu, 0x18000u, 0x18001u };
    std::mt19937   rng(12);
    size_t         checked = 0;
    for (uint32_t high = 0; high < 0x10000u; ++high) {
        for (uint32_t l : low) {
            const uint32_t u = (high << 16) + l;
            const float    f = from_bits(u);
            EXPECT_EQ(__float2bfloat16_rn(f).bits, wsp::fp32_to_bf16(f)) << std::hex << "bits 0x" << u;
            ++checked;
        }
        const uint32_t r = (uint32_t) rng();
        EXPECT_EQ(__float2bfloat16_rn(from_bits(r)).bits, wsp::fp32_to_bf16(from_bits(r))) << std::hex << r;
    }
    EXPECT_GT(checked, 500000u);
    // back to float: exact, and NaN stays NaN
    for (uint32_t b = 0; b < 0x10000u; ++b) {
        const float f = __bfloat162float(__nv_bfloat16{ (uint16_t) b });
        if (std::isnan(wsp::bf16_to_fp32((uint16_t) b))) {
            EXPECT_TRUE(std::isnan(f));
        } else {
            EXPECT_EQ(f, wsp::bf16_to_fp32((uint16_t) b));
        }
    }
    EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_EQ(__float2bfloat16_rn(std::numeric_limits<float>::infinity()).bits, 0x7f80u);
}

TEST(HipVendor, Dp4aSumsSignedBytes) {
    std::mt19937 rng(7);
    for (int i = 0; i < 100000; ++i) {
        const int a = (int) rng(), b = (int) rng(), c = (int) (rng() % 2000001) - 1000000;
        int       want = c;
        for (int k = 0; k < 4; ++k) {
            want += (int) (int8_t) (a >> (8 * k)) * (int) (int8_t) (b >> (8 * k));
        }
        ASSERT_EQ(__dp4a(a, b, c), want) << a << " " << b << " " << c;
    }
    // the extremes: -128 * -128 four times
    EXPECT_EQ(__dp4a((int) 0x80808080u, (int) 0x80808080u, 0), 4 * 16384);
    EXPECT_EQ(__dp4a((int) 0x7f7f7f7fu, (int) 0x80808080u, 5), 5 - 4 * 127 * 128);
}

} // namespace
