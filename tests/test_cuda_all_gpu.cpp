// The all-GPU device over CUDA devices ("CUDA_All"; the host target's emulated GPUs in CI): with
// two or more devices, the whisper-shaped graph of all_gpu_util.h with its weights in the
// device's buffer type equals the CPU's, the devices holding their rows of the mat-mul weights;
// with one device there is no all-GPU device. A whisper-shaped encoder (tools/model) runs
// tensor-parallel on it (Note [tensor parallelism] in src/allgpu/plan.h): the reference's result,
// two all-reduces per layer, each through NCCL where the reg has it, else peer copies.

#include "all_gpu_util.h"
#include "cuda_util.h"
#include "model/whisper_encoder.h"

#include "ggml-all-gpu.h"

namespace wsp::test {
namespace {

TEST(CudaAllGpu, SpreadsTheMatMulWeightsOverEveryDevice) {
    REQUIRE_GPU();
    const int              n   = wsp_ggml_backend_cuda_get_device_count();
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name(WSP_GGML_CUDA_NAME "_All");
    if (n < 2) {
        EXPECT_EQ(all, nullptr) << "one device needs no all-GPU device";
        return;
    }
    ASSERT_NE(all, nullptr);
    ASSERT_EQ(wsp_ggml_backend_all_gpu_member_count(all), (size_t) n);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q8_0 }) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        Model ref_model(type, wsp_ggml_backend_cpu_buffer_type(), 5);
        Model model(type, wsp_ggml_backend_dev_buffer_type(all), 5);
        // cuBLAS and the CPU sum in different orders; F16 and Q8_0 activations are rounded alike
        EXPECT_LT(nmse(logits(model, gpu, cpu), logits(ref_model, cpu, cpu)), 1e-6);
        // quantized rows go in blocks of 64 (the CUDA split's granularity): with 4 devices and 64
        // to 96 rows some hold none; float rows go one by one, so every device holds some
        size_t others = 0;
        for (int i = 1; i < n; ++i) {
            const size_t bytes = wsp_ggml_backend_all_gpu_weight_bytes(all, (size_t) i);
            others += bytes;
            if (!wsp_ggml_is_quantized(type)) {
                EXPECT_GT(bytes, 0u) << "device " << i;
            }
        }
        EXPECT_GT(others, 0u) << "the mat-mul weights' rows spread beyond the main device";
    }
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

TEST(CudaAllGpu, EncoderRunsTensorParallel) {
    REQUIRE_GPU();
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name(WSP_GGML_CUDA_NAME "_All");
    if (wsp_ggml_backend_cuda_get_device_count() < 2) {
        EXPECT_EQ(all, nullptr) << "one device needs no all-GPU device";
        return;
    }
    ASSERT_NE(all, nullptr);
    model::EncoderConfig cfg;
    cfg.n_mels  = 16;
    cfg.n_ctx   = 64;
    cfg.n_state = 256; // heads of 64, which the CUDA flash attention takes
    cfg.n_head  = 4;
    cfg.n_layer = 2;
    for (bool flash : { false, true }) {
        SCOPED_TRACE(flash ? "flash_attn_ext" : "soft_max_ext");
        cfg.flash_attn = flash;
        model::EncoderWeights w(cfg);
        ASSERT_TRUE(w.allocate(wsp_ggml_backend_dev_buffer_type(all)));
        w.randomize(11);
        wsp_ggml_backend_t       backend = wsp_ggml_backend_dev_init(all, nullptr);
        wsp_ggml_backend_t       cpu     = wsp_ggml_backend_cpu_init();
        wsp_ggml_init_params     params  = { model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                                 wsp_ggml_graph_overhead_custom(model::encoder_graph_size(cfg), false),
                                             nullptr, true };
        wsp_ggml_context *       ctx     = wsp_ggml_init(params);
        wsp_ggml_tensor *        mel     = nullptr;
        wsp_ggml_cgraph *        g       = model::build_encoder_graph(w, ctx, &mel);
        wsp_ggml_backend_t       bs[2]   = { backend, cpu };
        wsp_ggml_backend_sched_t sched =
            wsp_ggml_backend_sched_new(bs, nullptr, 2, model::encoder_graph_size(cfg), false, true);
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
        const std::vector<float> x = model::random_mel(cfg, 5);
        wsp_ggml_backend_tensor_set(mel, x.data(), 0, x.size() * sizeof(float));
        const auto before = wsp_ggml_backend_all_gpu_get_traffic(all);
        for (int it = 0; it < 2; ++it) { // the second reuses the pieces the first placed
            ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
        }
        const auto after = wsp_ggml_backend_all_gpu_get_traffic(all);
        EXPECT_EQ(after.n_graphs - before.n_graphs, 2u) << "both evaluations tensor-parallel";
        // per evaluation, the front end's one (Note [split convolutions]) and two per layer
        EXPECT_EQ(after.n_all_reduces - before.n_all_reduces, (size_t) (2 * (1 + 2 * cfg.n_layer)));
        const wsp_ggml_tensor * y = wsp_ggml_graph_node(g, -1);
        std::vector<float>      out((size_t) wsp_ggml_nelements(y));
        wsp_ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
        EXPECT_LT(nmse(out, model::reference_encoder(w, x)), 1e-4);
        wsp_ggml_backend_sched_free(sched);
        wsp_ggml_free(ctx);
        wsp_ggml_backend_free(backend);
        wsp_ggml_backend_free(cpu);
    }
}

} // namespace
} // namespace wsp::test
