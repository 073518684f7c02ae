// The all-GPU device over sim devices (Note [all-GPU device]): listed after the single devices
// (first among GPUs with WSP_GGML_ALL_GPUS=1), and used as a client that picks one GPU uses it
// (whisper.cpp: weights in the device's buffer type, a scheduler over its backend and the CPU),
// a whisper-shaped graph (an embedding read by get_rows and by the logits mat-mul, a positional
// table read through a view, mat-mul weights and biases) equals the CPU's, with the mat-mul
// weights' rows spread over every member by tensor_split, and a weight written again spread anew.
// Each test case runs in a process of its own (ctest), so each registers the sims it needs.

#include "all_gpu_util.h"
#include "sim_util.h"
#include "split_util.h"

#include "ggml-all-gpu.h"

#include "race/race.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace wsp::test {
namespace {

wsp_ggml_backend_dev_t all_device() {
    return wsp_ggml_backend_dev_by_name("SIM_All");
}

// the all-GPU device over n sims registered with the given shares (WSP_GGML_TENSOR_SPLIT)
wsp_ggml_backend_dev_t all_over_sims(int n, const char * shares) {
    ::setenv("WSP_GGML_TENSOR_SPLIT", shares, 1);
    const bool registered = wsp_ggml_backend_sim_register(n, 256) != nullptr;
    ::unsetenv("WSP_GGML_TENSOR_SPLIT");
    return registered ? all_device() : nullptr;
}

TEST(AllGpuDevice, ListedAfterTheSingleDevicesWithItsMembers) {
    ASSERT_NE(wsp_ggml_backend_sim_register(2, 256), nullptr);
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_dev_is_all_gpu(all));
    EXPECT_EQ(wsp_ggml_backend_dev_type(all), WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
    EXPECT_NE(wsp_ggml_backend_reg_by_name("SIM_All"), nullptr);
    ASSERT_EQ(wsp_ggml_backend_all_gpu_member_count(all), 2u);
    EXPECT_STREQ(wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(all, 0)), "SIM0");
    EXPECT_STREQ(wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(all, 1)), "SIM1");
    EXPECT_EQ(wsp_ggml_backend_all_gpu_member(all, 2), nullptr); // logged
    const std::string desc = wsp_ggml_backend_dev_description(all);
    EXPECT_NE(desc.find("SIM0"), std::string::npos) << desc;
    EXPECT_NE(desc.find("SIM1"), std::string::npos) << desc;
    // after its members; a one-device reg (the CPU's) has none; other devices are not all-GPU
    size_t i_all = 0, i_sim1 = 0;
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        const std::string name = wsp_ggml_backend_dev_name(wsp_ggml_backend_dev_get(i));
        i_all                  = name == "SIM_All" ? i : i_all;
        i_sim1                 = name == "SIM1" ? i : i_sim1;
    }
    EXPECT_GT(i_all, i_sim1);
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("CPU_All"), nullptr);
    EXPECT_FALSE(wsp_ggml_backend_dev_is_all_gpu(wsp_ggml_backend_dev_by_name("SIM0")));
    EXPECT_EQ(wsp_ggml_backend_all_gpu_member_count(wsp_ggml_backend_dev_by_name("SIM0")), 0u);
    // its memory is its members'
    size_t free_all = 0, total_all = 0, free0 = 0, total0 = 0;
    wsp_ggml_backend_dev_memory(all, &free_all, &total_all);
    wsp_ggml_backend_dev_memory(wsp_ggml_backend_dev_by_name("SIM0"), &free0, &total0);
    EXPECT_EQ(total_all, 2 * total0);
}

TEST(AllGpuDevice, FirstAmongTheGpusWithAllGpus) {
    ::setenv("WSP_GGML_ALL_GPUS", "1", 1);
    ASSERT_NE(wsp_ggml_backend_sim_register(2, 256), nullptr);
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_get(i);
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            EXPECT_STREQ(wsp_ggml_backend_dev_name(dev), "SIM_All"); // what a client's "first GPU" is
            break;
        }
    }
    ::unsetenv("WSP_GGML_ALL_GPUS");
}

struct ComputeCase {
    int           n_sims;
    wsp_ggml_type type;
};

class AllGpuCompute : public ::testing::TestWithParam<ComputeCase> {};

TEST_P(AllGpuCompute, WhisperShapedGraphEqualsTheCpuWithWeightsSpread) {
    const ComputeCase & c = GetParam();
    ASSERT_NE(wsp_ggml_backend_sim_register(c.n_sims, 256), nullptr);
    ForeignAccessGuard     guard;
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_name(gpu), "SIM_All");

    // the mat-mul kernels each member runs
    std::vector<int> mul_mats((size_t) c.n_sims, 0);
    for (int i = 0; i < c.n_sims; ++i) {
        wsp_ggml_backend_sim_set_kernel_hook(
            wsp_ggml_backend_all_gpu_member(all, (size_t) i),
            [](const wsp_ggml_tensor * node, void * count) {
                *static_cast<int *>(count) += node->op == WSP_GGML_OP_MUL_MAT;
            },
            &mul_mats[(size_t) i]);
    }
    Model      ref_model(c.type, wsp_ggml_backend_cpu_buffer_type(), 7);
    Model      model(c.type, wsp_ggml_backend_dev_buffer_type(all), 7);
    const auto ref = logits(ref_model, cpu, cpu);
    const auto out = logits(model, gpu, cpu);
    for (int i = 0; i < c.n_sims; ++i) {
        EXPECT_EQ(mul_mats[(size_t) i], 2) << "member " << i << " computes its rows of both mat-muls";
    }
    // the same kernels on the same values; the split only changes which device sums which row
    EXPECT_LT(nmse(out, ref), 1e-10) << wsp_ggml_type_name(c.type);

    // the main member holds the weights; every member holds rows of the mat-mul weights E and W
    EXPECT_GE(wsp_ggml_backend_all_gpu_weight_bytes(all, 0), wsp_ggml_backend_buffer_get_size(model.buf));
    size_t others = 0;
    for (int i = 1; i < c.n_sims; ++i) {
        EXPECT_GT(wsp_ggml_backend_all_gpu_weight_bytes(all, (size_t) i), 0u) << "member " << i;
        others += wsp_ggml_backend_all_gpu_weight_bytes(all, (size_t) i);
    }
    // the others' rows of E and W (each slice padded to 256 bytes), nothing of P and b
    EXPECT_GE(others, model.spread_bytes() * (size_t) (c.n_sims - 1) / (size_t) c.n_sims / 2);
    EXPECT_LE(others, model.spread_bytes() + 2 * 256 * (size_t) c.n_sims);

    // weights written again are spread again: the result follows them
    ref_model.set(100);
    model.set(100);
    EXPECT_LT(nmse(logits(model, gpu, cpu), logits(ref_model, cpu, cpu)), 1e-10);

    for (int i = 0; i < c.n_sims; ++i) {
        wsp_ggml_backend_sim_set_kernel_hook(wsp_ggml_backend_all_gpu_member(all, (size_t) i), nullptr, nullptr);
    }
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

INSTANTIATE_TEST_SUITE_P(Sims, AllGpuCompute,
                         ::testing::Values(ComputeCase{ 2, WSP_GGML_TYPE_F16 }, ComputeCase{ 2, WSP_GGML_TYPE_F32 },
                                           ComputeCase{ 4, WSP_GGML_TYPE_F16 }, ComputeCase{ 4, WSP_GGML_TYPE_Q8_0 }),
                         [](const ::testing::TestParamInfo<ComputeCase> & i) {
                             return std::to_string(i.param.n_sims) + "sims_" + wsp_ggml_type_name(i.param.type);
                         });

// two clients' contexts on the device at once (a batch transcriber's threads), sharing one set of
// weights: their first graphs race to spread the same weights, and both equal the CPU
TEST(AllGpuCompute, TwoBackendsAtOnceShareTheWeights) {
    ASSERT_NE(wsp_ggml_backend_sim_register(2, 256), nullptr);
    ForeignAccessGuard     guard;
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    Model              ref_model(WSP_GGML_TYPE_F16, wsp_ggml_backend_cpu_buffer_type(), 9);
    Model              model(WSP_GGML_TYPE_F16, wsp_ggml_backend_dev_buffer_type(all), 9);
    const auto         ref = logits(ref_model, cpu, cpu);
    std::vector<float> outs[2];
    std::thread        threads[2];
    // starting a thread orders what this one wrote (the weights) before the thread's work; the
    // happens-before checker cannot see thread creation, so it is told
    const wsp::race::VectorClock start = wsp::race::checker().release_host();
    for (int t = 0; t < 2; ++t) {
        threads[t] = std::thread([&, t] {
            wsp::race::checker().acquire(wsp::race::checker().host_agent(), start);
            wsp_ggml_backend_t own_cpu = wsp_ggml_backend_cpu_init();
            wsp_ggml_backend_t gpu     = wsp_ggml_backend_dev_init(all, nullptr);
            for (int run = 0; run < 3; ++run) {
                outs[t] = logits(model, gpu, own_cpu);
            }
            wsp_ggml_backend_free(gpu);
            wsp_ggml_backend_free(own_cpu);
        });
    }
    for (std::thread & th : threads) {
        th.join();
    }
    for (const auto & out : outs) {
        EXPECT_LT(nmse(out, ref), 1e-10);
    }
    EXPECT_GT(wsp_ggml_backend_all_gpu_weight_bytes(all, 1), 0u);
    wsp_ggml_backend_free(cpu);
}

// the row split, which serves graphs tensor parallelism does not fit (test_all_gpu_tp.cpp has
// the shares of the Megatron-style split)
TEST(AllGpuCompute, TensorSplitSetsTheSharesAndFreedWeightsLeaveNothing) {
    ::setenv("WSP_GGML_ALL_GPU_TP", "0", 1);
    wsp_ggml_backend_dev_t all = all_over_sims(2, "3,1");
    ASSERT_NE(all, nullptr);
    ForeignAccessGuard guard;
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    {
        Model model(WSP_GGML_TYPE_F32, wsp_ggml_backend_dev_buffer_type(all), 3);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 1), 0u) << "nothing spreads before a graph uses it";
        (void) logits(model, gpu, cpu);
        // SIM1 holds a quarter of the rows of E and W
        const std::vector<int64_t> e_rows = expected_rows({ 3, 1 }, Model::V, 1);
        const std::vector<int64_t> w_rows = expected_rows({ 3, 1 }, Model::K, 1);
        const size_t               row    = Model::K * sizeof(float);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 1), (size_t) (e_rows[1] + w_rows[1]) * row)
            << "its rows of E and W, each once";
    }
    EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 0), 0u) << "the freed weights' buffer is no longer counted";
    EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 1), 0u) << "its spread rows went with it";
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

// Note [row split plan]: a member without a share computes nothing, holds no weight and receives
// nothing; the others compute their rows of each mat-mul, and the logits equal the CPU's
TEST(AllGpuCompute, AMemberWithoutAShareIsLeftOut) {
    wsp_ggml_backend_dev_t all = all_over_sims(3, "1,0,1");
    ASSERT_NE(all, nullptr);
    ForeignAccessGuard guard;
    // counts[i]: the kernels member i ran, counts[3 + i] its mat-muls (the hook's pointer is &counts[i])
    std::vector<int> counts(6, 0);
    for (size_t i = 0; i < 3; ++i) {
        wsp_ggml_backend_sim_set_kernel_hook(
            wsp_ggml_backend_all_gpu_member(all, i),
            [](const wsp_ggml_tensor * node, void * count) {
                static_cast<int *>(count)[0] += 1;
                static_cast<int *>(count)[3] += node->op == WSP_GGML_OP_MUL_MAT;
            },
            &counts[i]);
    }
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    {
        Model                    ref_model(WSP_GGML_TYPE_F32, wsp_ggml_backend_cpu_buffer_type(), 11);
        Model                    model(WSP_GGML_TYPE_F32, wsp_ggml_backend_dev_buffer_type(all), 11);
        const auto               t0  = wsp_ggml_backend_all_gpu_get_traffic(all);
        const std::vector<float> out = logits(model, gpu, cpu);
        EXPECT_LT(nmse(out, logits(ref_model, cpu, cpu)), 1e-10);
        EXPECT_EQ(counts[1], 0) << "member 1 has no share: no kernel";
        EXPECT_EQ(counts[3 + 0], 2) << "the main member computes its rows of both mat-muls";
        EXPECT_EQ(counts[3 + 2], 2) << "so does member 2";
        const std::vector<int64_t> e_rows = expected_rows({ 1, 0, 1 }, Model::V, 1);
        const std::vector<int64_t> w_rows = expected_rows({ 1, 0, 1 }, Model::K, 1);
        const size_t               row    = Model::K * sizeof(float);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 1), 0u);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 2), (size_t) (e_rows[2] + w_rows[2]) * row);
        // member 2 gets each mat-mul's input and gives back its rows of each result
        const auto   t1 = wsp_ggml_backend_all_gpu_get_traffic(all);
        const size_t in = (size_t) (Model::K * Model::T) * sizeof(float);
        EXPECT_EQ(t1.sent - t0.sent, 2 * in);
        EXPECT_EQ(t1.gathered - t0.gathered, (size_t) ((w_rows[2] + e_rows[2]) * Model::T) * sizeof(float));
        EXPECT_EQ(t1.n_graphs, t0.n_graphs) << "not tensor-parallel";
    }
    for (size_t i = 0; i < 3; ++i) {
        wsp_ggml_backend_sim_set_kernel_hook(wsp_ggml_backend_all_gpu_member(all, i), nullptr, nullptr);
    }
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

} // namespace
} // namespace wsp::test
