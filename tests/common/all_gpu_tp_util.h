#pragma once

// Helpers of the all-GPU device's tensor-parallel suites over sims (test_all_gpu_tp.cpp,
// test_all_gpu_conv.cpp, test_all_gpu_replicas.cpp).

#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "ggml-counters.h"
#include "ggml-sim.h"

#include <gtest/gtest.h>

namespace wsp::test {

// the device's counters now
inline wsp_ggml_backend_counters counters_of(wsp_ggml_backend_dev_t dev) {
    wsp_ggml_backend_counters c{};
    wsp_ggml_backend_dev_get_counters(dev, &c);
    return c;
}

// SIM_All over 3 sims with shares 2, 1, 1; NULL (failed) where it cannot be made
inline wsp_ggml_backend_dev_t three_sims_two_one_one() {
    const float shares[3] = { 2, 1, 1 };
    EXPECT_NE(wsp_ggml_backend_sim_register(3, 256), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    if (all == nullptr || !wsp_ggml_backend_all_gpu_set_tensor_split(all, shares)) {
        ADD_FAILURE() << "no SIM_All over 3 sims with shares 2, 1, 1";
        return nullptr;
    }
    return all;
}

} // namespace wsp::test
