// One partition (src/split/partition.h, Note [partition]): the parser of "A,B,..." and its one
// message per refusal, the same checks for C arrays, ranges against hand-computed boundaries,
// the default shares of sims (free memory, then total, then equal), and the all-GPU device's
// setter: new shares lay the weights out anew (the result still equals the reference), bad ones
// change nothing. Each case runs in a process of its own (ctest), so each registers its sims.

#include "sim_util.h"
#include "test_util.h"
#include "model/whisper_encoder.h"
#include "split/partition.h"

#include "ggml-all-gpu.h"
#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

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

//
// the all-GPU device's setter
//

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

// the encoder on SIM_All over 2 sims, run again after each change of the shares
class AllGpuShares : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(wsp_ggml_backend_sim_register(2, 512), nullptr);
        all_ = wsp_ggml_backend_dev_by_name("SIM_All");
        ASSERT_NE(all_, nullptr);
        cfg_.n_mels  = 16;
        cfg_.n_ctx   = 48;
        cfg_.n_state = 96;
        cfg_.n_head  = 6;
        cfg_.n_layer = 2;
        cfg_.wtype   = WSP_GGML_TYPE_F16;
        backend_     = wsp_ggml_backend_dev_init(all_, nullptr);
        cpu_         = wsp_ggml_backend_cpu_init();
        w_           = std::make_unique<EncoderWeights>(cfg_);
        ASSERT_TRUE(w_->allocate(wsp_ggml_backend_dev_buffer_type(all_)));
        w_->randomize(7);
        ctx_                  = wsp_ggml_init({ wsp::model::encoder_graph_tensors(cfg_) * wsp_ggml_tensor_overhead() +
                                                    wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg_), false),
                                                nullptr, true });
        wsp_ggml_tensor * mel = nullptr;
        g_                    = wsp::model::build_encoder_graph(*w_, ctx_, &mel);
        wsp_ggml_backend_t bs[2] = { backend_, cpu_ };
        sched_ = wsp_ggml_backend_sched_new(bs, nullptr, 2, wsp::model::encoder_graph_size(cfg_), false, true);
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched_, g_));
        input_ = wsp::model::random_mel(cfg_, 3);
        wsp_ggml_backend_tensor_set(mel, input_.data(), 0, input_.size() * sizeof(float));
        ref_ = wsp::model::reference_encoder(*w_, input_);
    }

    void TearDown() override {
        if (sched_ != nullptr) {
            wsp_ggml_backend_sched_free(sched_);
        }
        wsp_ggml_free(ctx_);
        w_.reset();
        if (backend_ != nullptr) {
            wsp_ggml_backend_free(backend_);
        }
        if (cpu_ != nullptr) {
            wsp_ggml_backend_free(cpu_);
        }
    }

    // runs the graph (tensor-parallel: checked by the device's count) and returns its result
    std::vector<float> encode() {
        const size_t before = wsp_ggml_backend_all_gpu_get_traffic(all_).n_graphs;
        EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched_, g_), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_sched_synchronize(sched_);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_get_traffic(all_).n_graphs, before + 1) << "not tensor-parallel";
        const wsp_ggml_tensor * y = wsp_ggml_graph_node(g_, -1);
        std::vector<float>      out((size_t) wsp_ggml_nelements(y));
        wsp_ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
        double err = 0.0, norm = 0.0;
        for (size_t i = 0; i < ref_.size(); ++i) {
            err += (out[i] - ref_[i]) * (out[i] - ref_[i]);
            norm += ref_[i] * ref_[i];
        }
        EXPECT_LT(err / norm, 1e-6) << "NMSE against the double-precision reference";
        return out;
    }

    size_t bytes(size_t m) { return wsp_ggml_backend_all_gpu_weight_bytes(all_, m); }

    wsp_ggml_backend_dev_t          all_ = nullptr;
    EncoderConfig                   cfg_;
    wsp_ggml_backend_t              backend_ = nullptr, cpu_ = nullptr;
    std::unique_ptr<EncoderWeights> w_;
    wsp_ggml_context *              ctx_   = nullptr;
    wsp_ggml_cgraph *               g_     = nullptr;
    wsp_ggml_backend_sched_t        sched_ = nullptr;
    std::vector<float>              input_;
    std::vector<double>             ref_;
};

TEST_F(AllGpuShares, NewSharesLayTheWeightsOutAnew) {
    LogCapture               log;
    const std::vector<float> even      = encode(); // the sims' free memory: equal shares
    const size_t             main_even = bytes(0), other_even = bytes(1);
    ASSERT_GT(other_even, 0u);

    const char * said_before = wsp_ggml_backend_dev_description(all_);
    EXPECT_NE(std::string(said_before).find("SIM0 (50%), SIM1 (50%)"), std::string::npos) << said_before;
    const float three_one[] = { 3, 1 };
    ASSERT_TRUE(wsp_ggml_backend_all_gpu_set_tensor_split(all_, three_one));
    EXPECT_EQ(bytes(1), 0u) << "the rows laid out by the old shares are let go";
    const std::string said = wsp_ggml_backend_dev_description(all_);
    EXPECT_NE(said.find("SIM0 (75%), SIM1 (25%)"), std::string::npos) << said;
    EXPECT_NE(std::string(said_before).find("(50%)"), std::string::npos) << "a description given out stays valid";
    (void) encode();
    const size_t main_uneven = bytes(0), other_uneven = bytes(1);
    EXPECT_EQ(main_uneven, main_even) << "the main member reads its 3 parts of 4, rows or columns, in the weights";
    EXPECT_LT(other_uneven, other_even);
    EXPECT_GT(other_uneven, 0u);
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();

    // the same shares again: nothing is let go
    ASSERT_TRUE(wsp_ggml_backend_all_gpu_set_tensor_split(all_, three_one));
    EXPECT_EQ(bytes(1), other_uneven);

    // back to the shares the device was made with: the same layout and the same bits as before
    ASSERT_TRUE(wsp_ggml_backend_all_gpu_set_tensor_split(all_, nullptr));
    EXPECT_EQ(encode(), even);
    EXPECT_EQ(bytes(0), main_even);
    EXPECT_EQ(bytes(1), other_even);
}

TEST_F(AllGpuShares, BadSharesChangeNothing) {
    const float three_one[] = { 3, 1 };
    ASSERT_TRUE(wsp_ggml_backend_all_gpu_set_tensor_split(all_, three_one));
    const std::vector<float> before = encode();
    const size_t             held   = bytes(1);

    struct Bad {
        std::vector<float> shares;
        const char *       why;
    };
    const Bad bad[] = {
        { { -1, 2 }, "share 1 (-1) is negative" },
        { { 0, 0 }, "every share is 0" },
        { { NAN, 1 }, "share 1 is not a finite number" },
        { { 1, INFINITY }, "share 2 is not a finite number" },
    };
    for (const Bad & b : bad) {
        LogCapture log;
        EXPECT_FALSE(wsp_ggml_backend_all_gpu_set_tensor_split(all_, b.shares.data()));
        EXPECT_TRUE(log.contains(b.why)) << log.text();
        EXPECT_TRUE(log.contains("the shares stay as they were")) << log.text();
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 1);
        EXPECT_EQ(bytes(1), held) << b.why << ": something was let go";
    }
    LogCapture log;
    EXPECT_FALSE(wsp_ggml_backend_all_gpu_set_tensor_split(wsp_ggml_backend_all_gpu_member(all_, 1), three_one));
    EXPECT_TRUE(log.contains("SIM1 is not an all-GPU device; no shares were set")) << log.text();
    EXPECT_FALSE(wsp_ggml_backend_all_gpu_set_tensor_split(nullptr, three_one));
    EXPECT_EQ(encode(), before) << "the shares changed";
    EXPECT_EQ(bytes(1), held);
}

} // namespace
} // namespace wsp::test
