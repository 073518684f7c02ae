// whisper's conv front end on the all-GPU device over sims, split by channels (Note [split
// convolutions] in src/allgpu/plan.cpp). Each case runs in a process of its own (ctest).

#include "all_gpu_tp_util.h"
#include "test_util.h"

#include "ggml-alloc.h"
#include "ggml-all-gpu.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <vector>

namespace wsp::test {
namespace {

// whisper.cpp's front end as its own graph (whisper_build_graph_conv): two convolutions of width
// 3, the second of stride 2, each with a bias and GELU
struct FrontEnd {
    static constexpr int64_t  L = 40, IC = 8, OC = 24, K = 3;
    wsp_ggml_context *        wctx = nullptr;
    wsp_ggml_backend_buffer_t wbuf = nullptr;
    wsp_ggml_tensor *         w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr;

    explicit FrontEnd(wsp_ggml_backend_buffer_type_t buft) {
        wctx = wsp_ggml_init({ 4 * wsp_ggml_tensor_overhead(), nullptr, true });
        w1   = wsp_ggml_new_tensor_3d(wctx, WSP_GGML_TYPE_F16, K, IC, OC);
        b1   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 1, OC);
        w2   = wsp_ggml_new_tensor_3d(wctx, WSP_GGML_TYPE_F16, K, OC, OC);
        b2   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 1, OC);
        wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
        wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        int seed = 40;
        for (wsp_ggml_tensor * t : { w1, b1, w2, b2 }) {
            const std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed++);
            if (t->type == WSP_GGML_TYPE_F16) {
                std::vector<wsp_ggml_fp16_t> h(v.size());
                wsp_ggml_fp32_to_fp16_row(v.data(), h.data(), (int64_t) v.size());
                wsp_ggml_backend_tensor_set(t, h.data(), 0, h.size() * sizeof(wsp_ggml_fp16_t));
            } else {
                wsp_ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
            }
        }
    }
    ~FrontEnd() {
        wsp_ggml_backend_buffer_free(wbuf);
        wsp_ggml_free(wctx);
    }

    wsp_ggml_cgraph * graph(wsp_ggml_context * ctx, wsp_ggml_tensor ** mel, wsp_ggml_tensor ** out) const {
        *mel = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, L, IC);
        wsp_ggml_set_input(*mel);
        wsp_ggml_tensor * cur = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_conv_1d_ph(ctx, w1, *mel, 1, 1), b1));
        *out = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_conv_1d_ph(ctx, w2, cur, 2, 1), b2)); // [L/2, OC]
        wsp_ggml_set_output(*out);
        wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, *out);
        return g;
    }
};

// Note [split convolutions] (src/allgpu/plan.cpp): the front end over 3 sims with shares 2, 1, 1
// runs tensor-parallel and equals the CPU's. The first convolution's output channels and the
// second's input channels go 12, 6, 6 to the members, which read the mel whole (sent to the two
// others) and end in one all-reduce of [L/2, OC]. Each member but the main one holds exactly its
// rows of the first kernel, its columns of the second and the two biases: no kernel whole. A
// second run builds nothing.
TEST(AllGpuTensorParallel, ConvFrontEndSplitsByChannels) {
    wsp_ggml_backend_dev_t all = three_sims_two_one_one();
    ASSERT_NE(all, nullptr);
    FrontEnd                 on_all(wsp_ggml_backend_dev_buffer_type(all));
    FrontEnd                 on_cpu(wsp_ggml_backend_cpu_buffer_type());
    wsp_ggml_backend_t       backend = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t       cpu     = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t       bs[2]   = { backend, cpu };
    wsp_ggml_backend_sched_t sched   = wsp_ggml_backend_sched_new(bs, nullptr, 2, 64, false, true);
    std::vector<uint8_t>     meta(32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead()), meta_cpu(meta.size());
    const std::vector<float> mel_v = random_values((size_t) (FrontEnd::L * FrontEnd::IC), 5);

    // the CPU's result
    wsp_ggml_context * cctx = wsp_ggml_init({ meta_cpu.size(), meta_cpu.data(), true });
    wsp_ggml_tensor *  cmel = nullptr, *cout_t = nullptr;
    wsp_ggml_cgraph *  cg = on_cpu.graph(cctx, &cmel, &cout_t);
    wsp_ggml_gallocr_t ga = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(ga, cg));
    wsp_ggml_backend_tensor_set(cmel, mel_v.data(), 0, mel_v.size() * sizeof(float));
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu, cg), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> want((size_t) wsp_ggml_nelements(cout_t));
    wsp_ggml_backend_tensor_get(cout_t, want.data(), 0, want.size() * sizeof(float));

    LogCapture         log;
    wsp_ggml_context * ctx = wsp_ggml_init({ meta.size(), meta.data(), true });
    wsp_ggml_tensor *  mel = nullptr, *out = nullptr;
    wsp_ggml_cgraph *  g = on_all.graph(ctx, &mel, &out);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    wsp_ggml_backend_tensor_set(mel, mel_v.data(), 0, mel_v.size() * sizeof(float));
    for (int run = 0; run < 2; ++run) {
        const auto c0  = counters_of(all);
        const auto tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
        const auto         c1  = counters_of(all);
        const auto         tp1 = wsp_ggml_backend_all_gpu_get_traffic(all);
        std::vector<float> got(want.size());
        wsp_ggml_backend_tensor_get(out, got.data(), 0, got.size() * sizeof(float));
        EXPECT_TRUE(all_close(got, std::vector<double>(want.begin(), want.end()), 1e-4, 1e-4, "front end"))
            << "run " << run;
        const size_t out_bytes = wsp_ggml_nbytes(out), mel_bytes = wsp_ggml_nbytes(mel);
        EXPECT_EQ(tp1.n_graphs - tp0.n_graphs, 1u) << "run " << run << ": the graph ran tensor-parallel";
        EXPECT_EQ(tp1.n_all_reduces - tp0.n_all_reduces, 1u) << "run " << run;
        EXPECT_EQ(tp1.all_reduce - tp0.all_reduce, 2 * 2 * out_bytes) << "2 (N - 1) chunks of [L/2, OC]";
        EXPECT_EQ(tp1.sent - tp0.sent, 2 * mel_bytes) << "the mel, to each member but the main one";
        EXPECT_EQ(tp1.gathered - tp0.gathered, 0u);
        EXPECT_EQ(c1.plans_built - c0.plans_built, run == 0 ? 1u + 3u : 0u) << "run " << run;
    }
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    // weights held: the main member the weights' buffer (its 12 channels, rows of the first kernel
    // and columns of the second, are read there); member m its 6 of the 24 channels of each kernel
    // and the two biases
    const size_t biases = 2 * FrontEnd::OC * sizeof(float);
    EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, 0), wsp_ggml_backend_buffer_get_size(on_all.wbuf));
    for (size_t m = 1; m < 3; ++m) {
        const size_t rows_w1 = (size_t) (FrontEnd::K * FrontEnd::IC * 6) * sizeof(wsp_ggml_fp16_t);
        const size_t cols_w2 = (size_t) (FrontEnd::K * 6 * FrontEnd::OC) * sizeof(wsp_ggml_fp16_t);
        EXPECT_EQ(wsp_ggml_backend_all_gpu_weight_bytes(all, m), rows_w1 + cols_w2 + biases) << "member " << m;
    }
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_gallocr_free(ga);
    wsp_ggml_free(cctx);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
}

} // namespace
} // namespace wsp::test
