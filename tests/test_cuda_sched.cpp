// The scheduler suites' encoder on CUDA devices instead of sim devices: layers spread over every
// CUDA device (real GPUs, or virtual ones with WSP_GGML_CUDA_VIRTUAL_DEVICES=N), ops CUDA does
// not have yet falling back to the CPU, parallel off and on, and a split weight over all devices.
// Skipped without a GPU.

#include "ggml-cuda.h"
#include "model/whisper_encoder.h"
#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

struct CudaBackends {
    std::vector<wsp_ggml_backend_t> all;
    CudaBackends() {
        for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
            all.push_back(wsp_ggml_backend_cuda_init(d));
        }
        all.push_back(wsp_ggml_backend_cpu_init());
    }
    ~CudaBackends() {
        for (wsp_ggml_backend_t b : all) {
            wsp_ggml_backend_free(b);
        }
    }
};

model::EncoderConfig config(bool flash) {
    model::EncoderConfig cfg;
    cfg.n_mels     = 16;
    cfg.n_ctx      = 96;
    cfg.n_state    = 128;
    cfg.n_head     = 4;
    cfg.n_layer    = 4;
    cfg.flash_attn = flash;
    return cfg;
}

void run_encoder(bool parallel, bool split_weights) {
    CudaBackends                                be;
    const int                                   n   = (int) be.all.size() - 1;
    model::EncoderConfig                        cfg = config(false);
    model::EncoderWeights                       w(cfg);
    std::vector<wsp_ggml_backend_buffer_type_t> layers;
    for (int d = 0; d < n; ++d) {
        layers.push_back(wsp_ggml_backend_cuda_buffer_type(d));
    }
    std::vector<float> split((size_t) n, 1.0f);
    ASSERT_TRUE(w.allocate(wsp_ggml_backend_cpu_buffer_type(), layers,
                           split_weights ? wsp_ggml_backend_cuda_split_buffer_type(0, split.data()) : nullptr));
    w.randomize(3);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all.data(), nullptr, (int) be.all.size(),
                                                            2 * model::encoder_graph_size(cfg), parallel, true);
    ASSERT_NE(s, nullptr);
    wsp_ggml_init_params p   = { model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                     wsp_ggml_graph_overhead_custom(model::encoder_graph_size(cfg), false),
                                 nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    mel = nullptr;
    wsp_ggml_cgraph *    g   = model::build_encoder_graph(w, ctx, &mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    for (uint32_t it = 0; it < 4; ++it) {
        const std::vector<float> x = model::random_mel(cfg, 70 + it);
        wsp_ggml_backend_tensor_set(mel, x.data(), 0, x.size() * sizeof(float));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
        // F16 weights, F16 activations on the tensor cores: the error is that rounding, ~1e-6
        EXPECT_LT(nmse(get_values(wsp_ggml_graph_node(g, -1)), model::reference_encoder(w, x)), 1e-4)
            << "evaluation " << it;
    }
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
}

TEST(CudaSched, EncoderSerial) {
    REQUIRE_GPU();
    run_encoder(false, false);
}

TEST(CudaSched, EncoderParallel) {
    REQUIRE_GPU();
    run_encoder(true, false);
}

TEST(CudaSched, EncoderSplitWeights) {
    REQUIRE_GPU();
    run_encoder(true, true);
}

} // namespace
} // namespace wsp::test
