// The whisper-shaped encoder with its layers spread over 2, 3 and 4 sim devices (delays on),
// scheduled with parallel off and on, equals the double reference over many consecutive
// evaluations with changing inputs: the same graph recomputed, a new graph per evaluation, and
// asynchronous evaluations whose input is overwritten as soon as compute returns.

#include "sched_encoder.h"

#include <gtest/gtest.h>

#include <string>

namespace wsp::test {
namespace {

struct Case {
    int  n_sim;
    bool parallel;
    bool flash;
};

class SchedEncoderTest : public ::testing::TestWithParam<Case> {};

constexpr double TOLERANCE = 1e-8; // F32 accumulation against double; a missing copy gives ~1
constexpr int    DELAY_US  = 30;

TEST_P(SchedEncoderTest, SameGraphManyEvaluations) {
    const Case &       c = GetParam();
    ForeignAccessGuard guard;
    SimBackends        be(c.n_sim, DELAY_US);
    SchedEncoder       enc(small_encoder(c.flash), be, c.parallel);
    wsp_ggml_tensor *  mel   = nullptr;
    wsp_ggml_cgraph *  graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    EXPECT_GE(wsp_ggml_backend_sched_get_n_splits(enc.sched()), c.n_sim + 1);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_copies(enc.sched()), c.parallel ? 4 : 1);
    for (int it = 0; it < 6; ++it) {
        const std::vector<float> x = enc.random_input(100 + (uint32_t) it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), TOLERANCE) << "evaluation " << it;
    }
}

TEST_P(SchedEncoderTest, NewGraphPerEvaluation) {
    const Case &       c = GetParam();
    ForeignAccessGuard guard;
    SimBackends        be(c.n_sim, DELAY_US);
    SchedEncoder       enc(small_encoder(c.flash), be, c.parallel);
    for (int it = 0; it < 5; ++it) {
        wsp_ggml_tensor * mel   = nullptr;
        wsp_ggml_cgraph * graph = enc.build(&mel);
        wsp_ggml_backend_sched_reset(enc.sched());
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
        const std::vector<float> x = enc.random_input(200 + (uint32_t) it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), TOLERANCE) << "evaluation " << it;
    }
}

// The caller may overwrite its input as soon as compute_async returns, although the input feeds
// a device (the front end's weights are on SIM0) whose work is still queued.
TEST_P(SchedEncoderTest, InputReusableWhenComputeReturns) {
    const Case &       c = GetParam();
    ForeignAccessGuard guard;
    SimBackends        be(c.n_sim, DELAY_US);
    SchedEncoder       enc(small_encoder(c.flash, 2), be, c.parallel, true, true);
    wsp_ggml_tensor *  mel   = nullptr;
    wsp_ggml_cgraph *  graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    for (int it = 0; it < 4; ++it) {
        const std::vector<float> x = enc.random_input(300 + (uint32_t) it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        set_input(mel, enc.random_input(999)); // garbage for this evaluation
        wsp_ggml_backend_sched_synchronize(enc.sched());
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), TOLERANCE) << "evaluation " << it;
    }
}

std::string case_name(const ::testing::TestParamInfo<Case> & info) {
    return std::to_string(info.param.n_sim) + "sim_" + (info.param.parallel ? "parallel" : "serial") +
           (info.param.flash ? "_flash" : "");
}

INSTANTIATE_TEST_SUITE_P(Sched, SchedEncoderTest,
                         ::testing::Values(Case{ 2, false, false }, Case{ 2, true, false }, Case{ 3, false, true },
                                           Case{ 3, true, false }, Case{ 4, false, false }, Case{ 4, true, true }),
                         case_name);

} // namespace
} // namespace wsp::test
