// Injected faults on sim devices end in false or a failed status, and the next evaluation of
// the same scheduler succeeds with the right values.

#include "sched_encoder.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

class SchedFault : public ::testing::TestWithParam<wsp_ggml_sim_fault> {};

TEST_P(SchedFault, FailsOnceThenRecovers) {
    const wsp_ggml_sim_fault fault = GetParam();
    ForeignAccessGuard       guard;
    SimBackends              be(2, 20);
    SchedEncoder             enc(small_encoder(false, 2), be, true);
    wsp_ggml_tensor *        mel   = nullptr;
    wsp_ggml_cgraph *        graph = enc.build(&mel);

    if (fault == WSP_GGML_SIM_FAULT_ALLOC) {
        // the compute buffer of SIM1 cannot be allocated
        wsp_ggml_backend_sim_inject_fault(sim_dev(1), fault);
        EXPECT_FALSE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
        wsp_ggml_backend_sched_reset(enc.sched());
    }
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    std::vector<float> x = enc.random_input(1);
    set_input(mel, x);
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);

    if (fault != WSP_GGML_SIM_FAULT_ALLOC) {
        // SIM0 copies its layer's output to SIM1 (copy fault), SIM1 runs a split (kernel fault)
        wsp_ggml_backend_sim_inject_fault(sim_dev(fault == WSP_GGML_SIM_FAULT_COPY ? 0 : 1), fault);
        x = enc.random_input(2);
        set_input(mel, x);
        EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_FAILED);
    }
    for (uint32_t it = 3; it < 6; ++it) {
        x = enc.random_input(it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), 1e-8);
    }
}

std::string fault_name(const ::testing::TestParamInfo<wsp_ggml_sim_fault> & info) {
    switch (info.param) {
        case WSP_GGML_SIM_FAULT_ALLOC: return "alloc";
        case WSP_GGML_SIM_FAULT_COPY: return "copy";
        case WSP_GGML_SIM_FAULT_KERNEL: return "kernel";
    }
    return "unknown";
}

INSTANTIATE_TEST_SUITE_P(Sched, SchedFault,
                         ::testing::Values(WSP_GGML_SIM_FAULT_ALLOC, WSP_GGML_SIM_FAULT_COPY,
                                           WSP_GGML_SIM_FAULT_KERNEL),
                         fault_name);

} // namespace
} // namespace wsp::test
