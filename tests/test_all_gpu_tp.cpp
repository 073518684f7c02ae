// Tensor parallelism in the all-GPU device over sims (Note [tensor parallelism] in
// src/allgpu/tp.h): a whisper-shaped encoder (tools/model) whose weights live whole in the
// all-GPU device's buffer type runs Megatron-style, heads and MLP columns per member. Its result
// equals the double-precision reference, over 2, 3 and 4 sims, with head counts that do not
// divide by the member count and with uneven tensor_split; the bytes that move between sims per
// evaluation are exactly two all-reduces of [n_state, n_ctx] per layer plus the input's copies,
// and the row split (WSP_GGML_ALL_GPU_TP=0) moves more. Each case runs in a process of its own
// (ctest), so each registers the sims it needs and sets its environment first.

#include "sim_util.h"
#include "test_util.h"
#include "model/whisper_encoder.h"

#include "ggml-all-gpu.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace wsp::test {
namespace {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

struct Encoded {
    std::vector<float> out;
    size_t             moved = 0; // bytes between devices in the second evaluation
};

// the encoder on the all-GPU device of n sims (scheduler [all-GPU, CPU], as a client runs it)
Encoded encode_on_all_sims(const EncoderConfig & cfg, int n_sims) {
    Encoded run;
    EXPECT_NE(wsp_ggml_backend_sim_register(n_sims, 512), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    EXPECT_NE(all, nullptr);
    if (all == nullptr) {
        return run;
    }
    for (size_t i = 0; i < wsp_ggml_backend_all_gpu_member_count(all); ++i) {
        wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_all_gpu_member(all, i), 0);
    }
    wsp_ggml_backend_t backend = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t cpu     = wsp_ggml_backend_cpu_init();
    EncoderWeights     w(cfg);
    EXPECT_TRUE(w.allocate(wsp_ggml_backend_dev_buffer_type(all)));
    w.randomize(7);

    wsp_ggml_init_params     params = { wsp::model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                            wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg), false),
                                        nullptr, true };
    wsp_ggml_context *       ctx    = wsp_ggml_init(params);
    wsp_ggml_tensor *        mel    = nullptr;
    wsp_ggml_cgraph *        g      = wsp::model::build_encoder_graph(w, ctx, &mel);
    wsp_ggml_backend_t       bs[2]  = { backend, cpu };
    wsp_ggml_backend_sched_t sched =
        wsp_ggml_backend_sched_new(bs, nullptr, 2, wsp::model::encoder_graph_size(cfg), false, true);
    EXPECT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    const std::vector<float> input = wsp::model::random_mel(cfg, 3);
    wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
    EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS); // makes the pieces
    const size_t before = wsp_ggml_backend_sim_bytes_copied();
    EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
    run.moved = wsp_ggml_backend_sim_bytes_copied() - before;
    // memory: every member but the main one holds its share of the layers' mat-mul weights and a
    // copy of the small ones (norms, biases, the front end, the positional table)
    size_t spread = 0, total = 0;
    for (const wsp::model::EncoderLayer & l : w.layers()) {
        for (const wsp_ggml_tensor * t : { l.q_w, l.k_w, l.v_w, l.o_w, l.mlp0_w, l.mlp1_w }) {
            spread += wsp_ggml_nbytes(t);
        }
    }
    for (const wsp_ggml_tensor * t : w.all()) {
        total += wsp_ggml_nbytes(t);
    }
    for (int m = 1; m < n_sims; ++m) {
        const size_t held = wsp_ggml_backend_all_gpu_weight_bytes(all, (size_t) m);
        EXPECT_LE(held, spread / 2 + (total - spread) + 256 * w.all().size()) << "member " << m;
        EXPECT_GE(held, spread / (size_t) (2 * n_sims)) << "member " << m;
    }
    const wsp_ggml_tensor * y = wsp_ggml_graph_node(g, -1);
    run.out.resize((size_t) wsp_ggml_nelements(y));
    wsp_ggml_backend_tensor_get(y, run.out.data(), 0, run.out.size() * sizeof(float));
    const std::vector<double> ref = wsp::model::reference_encoder(w, input);
    double                    err = 0.0, norm = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        err += (run.out[i] - ref[i]) * (run.out[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    EXPECT_LT(err / norm, 1e-6) << "NMSE against the double-precision reference";
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
    return run;
}

EncoderConfig small(int n_state, int n_head, bool flash = false, wsp_ggml_type wtype = WSP_GGML_TYPE_F16) {
    EncoderConfig cfg;
    cfg.n_mels     = 16;
    cfg.n_ctx      = 48;
    cfg.n_state    = n_state;
    cfg.n_head     = n_head;
    cfg.n_layer    = 2;
    cfg.wtype      = wtype;
    cfg.flash_attn = flash;
    return cfg;
}

// two all-reduces per layer, each 2 (N-1) chunks' worth of the activations in all, plus the mel
// input: the scheduler copies it from the CPU (inputs live there) to the main member, which
// copies it to each other member (the front end runs on every member)
size_t expected_bytes(const EncoderConfig & cfg, int n) {
    const size_t act = (size_t) cfg.n_ctx * cfg.n_state * sizeof(float);
    const size_t mel = (size_t) 2 * cfg.n_ctx * cfg.n_mels * sizeof(float);
    return (size_t) cfg.n_layer * 2 * 2 * (n - 1) * act + n * mel;
}

void expect_tensor_parallel(const EncoderConfig & cfg, int n_sims) {
    LogCapture    log;
    const Encoded run = encode_on_all_sims(cfg, n_sims);
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    EXPECT_EQ(run.moved, expected_bytes(cfg, n_sims)) << cfg.describe() << " over " << n_sims << " sims";
}

TEST(AllGpuTensorParallel, TwoSimsSixHeads) {
    expect_tensor_parallel(small(96, 6), 2);
}

TEST(AllGpuTensorParallel, ThreeSimsEightHeadsUneven) {
    expect_tensor_parallel(small(128, 8), 3); // 3 + 3 + 2 heads
}

TEST(AllGpuTensorParallel, FourSimsSixHeadsUneven) {
    expect_tensor_parallel(small(96, 6), 4); // 2 + 1 + 2 + 1 heads
}

TEST(AllGpuTensorParallel, FlashAttentionOnTwoSims) {
    expect_tensor_parallel(small(96, 6, true), 2);
}

TEST(AllGpuTensorParallel, QuantizedWeightsSplitInWholeBlocks) {
    expect_tensor_parallel(small(128, 4, false, WSP_GGML_TYPE_Q8_0), 3); // columns in blocks of 32
}

TEST(AllGpuTensorParallel, UnevenTensorSplit) {
    setenv("WSP_GGML_TENSOR_SPLIT", "3,1", 1); // before the sims register: read then
    expect_tensor_parallel(small(96, 6), 2);
}

TEST(AllGpuTensorParallel, RowSplitMovesMoreForTheSameResult) {
    setenv("WSP_GGML_ALL_GPU_TP", "0", 1);
    const EncoderConfig cfg = small(96, 6);
    const Encoded       run = encode_on_all_sims(cfg, 2);
    EXPECT_GT(run.moved, 2 * expected_bytes(cfg, 2)) << "the row split gathers after every mat-mul";
}

} // namespace
} // namespace wsp::test
