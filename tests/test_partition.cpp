// One partition (src/split/partition.h, Note [partition]): the parser of "A,B,..." and its one
// message per refusal, the same checks for C arrays, ranges against hand-computed boundaries,
// the default shares of sims (free memory, then total, then equal). Each case runs in a process
// of its own (ctest), so each registers its sims.

#include "sim_util.h"
#include "test_util.h"
#include "split/partition.h"

#include "ggml-backend-impl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace wsp::test {
namespace {

using partition::Range;

//
// parse and check
//

TEST(PartitionParse, Accepts) {
    std::vector<float> s;
    std::string        why;
    ASSERT_TRUE(partition::parse("3,1", 2, &s, &why)) << why;
    EXPECT_EQ(s, (std::vector<float>{ 3, 1 }));
    ASSERT_TRUE(partition::parse(" 0.5 , 0,1.5e0 ", 3, &s, &why)) << why;
    EXPECT_EQ(s, (std::vector<float>{ 0.5f, 0, 1.5f }));
    ASSERT_TRUE(partition::parse("1", 3, &s, &why)) << why; // the devices without a part get 0
    EXPECT_EQ(s, (std::vector<float>{ 1, 0, 0 }));
    ASSERT_TRUE(partition::parse("0,2", 2, &s, &why)) << why;
    EXPECT_EQ(s, (std::vector<float>{ 0, 2 }));
}

struct Refused {
    const char * text;
    size_t       n;
    const char * error;
};

TEST(PartitionParse, RefusesWithOneMessage) {
    const Refused cases[] = {
        { "", 2, "the split is empty; expected one share per device, A,B,..." },
        { "  ", 2, "the split is empty; expected one share per device, A,B,..." },
        { "3,,1", 3, "part 2 of \"3,,1\" is empty" },
        { "3,1,", 3, "part 3 of \"3,1,\" is empty" },
        { "3,a", 2, "part 2 of \"3,a\" (\"a\") is not a number" },
        { "3x,1", 2, "part 1 of \"3x,1\" (\"3x\") is not a number" },
        { "3,-1", 2, "part 2 of \"3,-1\" (-1) is negative" },
        { "inf,1", 2, "part 1 of \"inf,1\" (inf) is not a finite number" },
        { "1,nan", 2, "part 2 of \"1,nan\" (nan) is not a finite number" },
        { "1e39,1", 2, "part 1 of \"1e39,1\" (1e39) is not a finite number" }, // beyond a float
        { "0,0", 2, "\"0,0\" gives no device a share (every part is 0)" },
        { "1,1,1", 2, "\"1,1,1\" has 3 parts for 2 devices" },
        { "1,1", 1, "\"1,1\" has 2 parts for 1 device" },
    };
    for (const Refused & c : cases) {
        std::vector<float> s = { 7, 7 };
        std::string        why;
        EXPECT_FALSE(partition::parse(c.text, c.n, &s, &why)) << c.text;
        EXPECT_EQ(why, c.error) << c.text;
        EXPECT_EQ(s, (std::vector<float>{ 7, 7 })) << c.text << ": the shares changed";
    }
    std::vector<float> s;
    std::string        why;
    EXPECT_FALSE(partition::parse(nullptr, 2, &s, &why));
    EXPECT_EQ(why, "the split is empty; expected one share per device, A,B,...");
}

TEST(PartitionCheck, SameRulesForArrays) {
    std::string why;
    const float good[] = { 3, 1 }, zero_one[] = { 0, 1 }, negative[] = { 1, -2 }, zeros[] = { 0, 0 },
                nan[] = { NAN, 1 }, inf[] = { 1, INFINITY };
    EXPECT_TRUE(partition::check(good, 2, &why));
    EXPECT_TRUE(partition::check(zero_one, 2, nullptr));
    EXPECT_FALSE(partition::check(negative, 2, &why));
    EXPECT_EQ(why, "share 2 (-2) is negative");
    EXPECT_FALSE(partition::check(zeros, 2, &why));
    EXPECT_EQ(why, "every share is 0: no device would get any work");
    EXPECT_FALSE(partition::check(nan, 2, &why));
    EXPECT_EQ(why, "share 1 is not a finite number");
    EXPECT_FALSE(partition::check(inf, 2, &why));
    EXPECT_EQ(why, "share 2 is not a finite number");
    EXPECT_FALSE(partition::check(nullptr, 2, &why));
    EXPECT_EQ(why, "no shares were given");
}

//
// ranges (Note [partition]): each boundary at the multiple of the unit (or n) nearest the exact
// cumulative share, a tie to the larger
//

std::vector<Range> R(std::initializer_list<Range> r) {
    return r;
}

TEST(PartitionRanges, HandComputedBoundaries) {
    // 75 exactly
    EXPECT_EQ(partition::ranges({ 3, 1 }, 100, 1), R({ { 0, 75 }, { 75, 100 } }));
    // 33.3 -> 33, 66.7 -> 67 (rounding down gave 66)
    EXPECT_EQ(partition::ranges({ 1, 1, 1 }, 100, 1), R({ { 0, 33 }, { 33, 67 }, { 67, 100 } }));
    // units of 32: 75 lies between 64 (11 away) and 96 (21 away)
    EXPECT_EQ(partition::ranges({ 3, 1 }, 100, 32), R({ { 0, 64 }, { 64, 100 } }));
    // 0.7, 0.2, 0.1, 0 of 128 in units of 32: 89.6 -> 96, 115.2 -> 128 (12.8 away; 96 is 19.2)
    EXPECT_EQ(partition::ranges({ 0.7f, 0.2f, 0.1f, 0.0f }, 128, 32),
              R({ { 0, 96 }, { 96, 128 }, { 128, 128 }, { 128, 128 } }));
    // a device with share 0 gets an empty range where its neighbours meet
    EXPECT_EQ(partition::ranges({ 1, 0, 1 }, 64, 32), R({ { 0, 32 }, { 32, 32 }, { 32, 64 } }));
    EXPECT_EQ(partition::ranges({ 0, 1 }, 10, 1), R({ { 0, 0 }, { 0, 10 } }));
    // n not a multiple of the unit: the candidates are 0, 32 and 50; 25 -> 32 (7 away)
    EXPECT_EQ(partition::ranges({ 1, 1 }, 50, 32), R({ { 0, 32 }, { 32, 50 } }));
    // 36 of 40 in units of 32: 32 and 40 are both 4 away, the tie goes to the larger
    EXPECT_EQ(partition::ranges({ 9, 1 }, 40, 32), R({ { 0, 40 }, { 40, 40 } }));
    // 32 of 64 in units of 64: 0 and 64 tie, 64 wins
    EXPECT_EQ(partition::ranges({ 1, 1 }, 64, 64), R({ { 0, 64 }, { 64, 64 } }));
    // 6 heads of 16 over 3,1: 72 lies between 64 and 80, 8 away from each: 80, 5 heads and 1
    EXPECT_EQ(partition::ranges({ 3, 1 }, 96, 16), R({ { 0, 80 }, { 80, 96 } }));
    // nothing to cut; a unit below 1 counts as 1; all zeros (not expected) count as equal
    EXPECT_EQ(partition::ranges({ 1, 1 }, 0, 8), R({ { 0, 0 }, { 0, 0 } }));
    EXPECT_EQ(partition::ranges({ 1, 1 }, 9, 0), R({ { 0, 5 }, { 5, 9 } })); // 4.5 -> 5
    EXPECT_EQ(partition::ranges({ 0, 0 }, 10, 1), R({ { 0, 5 }, { 5, 10 } }));
}

// over many shares and sizes: contiguous, covering [0, n), boundaries multiples of the unit (or
// n), each no more than half a unit from the exact cumulative share
TEST(PartitionRanges, EveryBoundaryWithinHalfAUnit) {
    uint32_t seed = 1;
    auto     next = [&seed] {
        seed = seed * 1664525u + 1013904223u;
        return seed >> 8;
    };
    for (int t = 0; t < 2000; ++t) {
        const size_t       m    = 1 + next() % 5;
        const int64_t      unit = 1 + (int64_t) (next() % 40);
        const int64_t      n    = (int64_t) (next() % 700);
        std::vector<float> s(m);
        double             total = 0;
        for (float & x : s) {
            x = next() % 4 == 0 ? 0.0f : (float) (next() % 1000) / 7.0f;
            total += x;
        }
        if (total == 0) {
            continue;
        }
        const std::vector<Range> r   = partition::ranges(s, n, unit);
        double                   cum = 0;
        ASSERT_EQ(r.size(), m);
        ASSERT_EQ(r[0].first, 0);
        ASSERT_EQ(r[m - 1].second, n);
        for (size_t i = 0; i < m; ++i) {
            cum += s[i];
            ASSERT_LE(r[i].first, r[i].second);
            if (i + 1 < m) {
                ASSERT_EQ(r[i].second, r[i + 1].first);
                ASSERT_TRUE(r[i].second % unit == 0 || r[i].second == n) << r[i].second << " in units of " << unit;
                ASSERT_LE(std::fabs((double) r[i].second - (double) n * cum / total), unit / 2.0 + 1e-9)
                    << "n " << n << " unit " << unit << " device " << i;
            }
        }
    }
}

//
// default shares
//

TEST(PartitionDefaults, FreeMemoryOfSims) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_sim_register(2, 256);
    ASSERT_NE(reg, nullptr);
    std::vector<wsp_ggml_backend_dev_t> devs = { wsp_ggml_backend_reg_dev_get(reg, 0),
                                                 wsp_ggml_backend_reg_dev_get(reg, 1) };
    EXPECT_EQ(partition::default_shares(devs), (std::vector<float>{ 256 << 20, 256 << 20 }));
    // 64 MiB used on the second: free memory is 256 and 192 MiB
    wsp_ggml_backend_buffer_t b =
        wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_dev_buffer_type(devs[1]), (size_t) 64 << 20);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(partition::default_shares(devs), (std::vector<float>{ 256 << 20, 192 << 20 }));
    EXPECT_EQ(partition::ranges(partition::default_shares(devs), 448, 1), R({ { 0, 256 }, { 256, 448 } }));
    wsp_ggml_backend_buffer_free(b);
}

// a device that reports the memory it is given (a backend that knows none reports 0 and 0)
struct FakeMemory {
    size_t free_mem, total;
};

void fake_memory(wsp_ggml_backend_dev_t dev, size_t * free_mem, size_t * total) {
    const FakeMemory & m = *static_cast<FakeMemory *>(dev->context);
    *free_mem            = m.free_mem;
    *total               = m.total;
}

TEST(PartitionDefaults, TotalMemoryWhereNoneIsFreeThenEqual) {
    FakeMemory              mem[3] = { { 0, 4 }, { 0, 12 }, { 0, 0 } };
    wsp_ggml_backend_device dev[3] = {};
    for (int i = 0; i < 3; ++i) {
        dev[i].iface.get_memory = fake_memory;
        dev[i].context          = &mem[i];
    }
    EXPECT_EQ(partition::default_shares({ &dev[0], &dev[1], &dev[2] }), (std::vector<float>{ 4, 12, 0 }));
    mem[1].free_mem = 3; // one reports free memory: free memory it is, the full ones get none
    EXPECT_EQ(partition::default_shares({ &dev[0], &dev[1], &dev[2] }), (std::vector<float>{ 0, 3, 0 }));
    EXPECT_EQ(partition::default_shares({ &dev[2], &dev[2] }), (std::vector<float>{ 1, 1 }));
}

} // namespace
} // namespace wsp::test
