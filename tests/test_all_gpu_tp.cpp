// Tensor parallelism in the all-GPU device over sims (Note [tensor parallelism] in
// src/allgpu/plan.h): a whisper-shaped encoder (tools/model) whose weights live whole in the
// all-GPU device's buffer type runs Megatron-style, heads and MLP columns per member. Its result
// equals the double-precision reference, over 2, 3 and 4 sims, with head counts that do not
// divide by the member count and with uneven tensor_split; the bytes that move between sims per
// evaluation are exactly two all-reduces of [n_state, n_ctx] per layer plus the input's copies,
// and the row split (WSP_GGML_ALL_GPU_TP=0) moves more. Each case runs in a process of its own
// (ctest), so each registers the sims it needs and sets its environment first.

#include "all_gpu_tp_util.h"
#include "sim_util.h"
#include "test_util.h"
#include "model/whisper_encoder.h"

#include "ggml-all-gpu.h"
#include "ggml-counters.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace wsp::test {
namespace {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

struct Encoded {
    std::vector<float>               out;
    size_t                           moved = 0; // bytes between devices in the second evaluation
    wsp_ggml_backend_all_gpu_traffic tp{};      // the device's own count of it
    // its graph callback's calls in the second evaluation: each graph's traffic, and its node count
    std::vector<wsp_ggml_backend_all_gpu_traffic> per_graph;
    std::vector<int>                              graph_nodes;
};

// the calls of wsp_ggml_backend_all_gpu_set_graph_callback's callback into an Encoded
void record_graph(const wsp_ggml_cgraph * g, const wsp_ggml_backend_all_gpu_traffic * moved, void * ud) {
    auto * run = static_cast<Encoded *>(ud);
    run->per_graph.push_back(*moved);
    run->graph_nodes.push_back(wsp_ggml_graph_n_nodes(const_cast<wsp_ggml_cgraph *>(g)));
}

// the sum of the per-graph records
wsp_ggml_backend_all_gpu_traffic sum_of(const std::vector<wsp_ggml_backend_all_gpu_traffic> & per_graph) {
    wsp_ggml_backend_all_gpu_traffic s{};
    for (const auto & t : per_graph) {
        s.all_reduce += t.all_reduce;
        s.n_all_reduces += t.n_all_reduces;
        s.sent += t.sent;
        s.gathered += t.gathered;
        s.n_graphs += t.n_graphs;
    }
    return s;
}

void expect_same_traffic(const wsp_ggml_backend_all_gpu_traffic & a, const wsp_ggml_backend_all_gpu_traffic & b) {
    EXPECT_EQ(a.all_reduce, b.all_reduce);
    EXPECT_EQ(a.n_all_reduces, b.n_all_reduces);
    EXPECT_EQ(a.sent, b.sent);
    EXPECT_EQ(a.gathered, b.gathered);
    EXPECT_EQ(a.n_graphs, b.n_graphs);
}

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
    const auto   tp0    = wsp_ggml_backend_all_gpu_get_traffic(all);
    EXPECT_TRUE(wsp_ggml_backend_all_gpu_set_graph_callback(all, record_graph, &run));
    EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_TRUE(wsp_ggml_backend_all_gpu_set_graph_callback(all, nullptr, nullptr));
    run.moved      = wsp_ggml_backend_sim_bytes_copied() - before;
    const auto tp1 = wsp_ggml_backend_all_gpu_get_traffic(all);
    run.tp         = { tp1.all_reduce - tp0.all_reduce, tp1.n_all_reduces - tp0.n_all_reduces, tp1.sent - tp0.sent,
                       tp1.gathered - tp0.gathered, tp1.n_graphs - tp0.n_graphs };
    // memory: every member but the main one holds its share of the layers' mat-mul weights and of
    // the front end's kernels (none holds a kernel whole), and a copy of the small ones (norms,
    // biases, the positional table)
    size_t spread = wsp_ggml_nbytes(w.conv1_w) + wsp_ggml_nbytes(w.conv2_w), total = 0;
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

// the all-reduces: one for the front end (Note [split convolutions] in src/allgpu/plan.cpp: the
// second convolution's terms by input channel) and two per layer
int expected_all_reduces(const EncoderConfig & cfg) {
    return 1 + 2 * cfg.n_layer;
}

// the all-reduces, each 2 (N-1) chunks' worth of the activations [n_state, n_ctx] in all, plus the
// mel input: the scheduler copies it from the CPU (inputs live there) to the main member, which
// copies it to each other member (the first convolution reads it whole on every member)
size_t expected_bytes(const EncoderConfig & cfg, int n) {
    const size_t act = (size_t) cfg.n_ctx * cfg.n_state * sizeof(float);
    const size_t mel = (size_t) 2 * cfg.n_ctx * cfg.n_mels * sizeof(float);
    return (size_t) expected_all_reduces(cfg) * 2 * (n - 1) * act + n * mel;
}

void expect_tensor_parallel(const EncoderConfig & cfg, int n_sims) {
    LogCapture    log;
    const Encoded run = encode_on_all_sims(cfg, n_sims);
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    EXPECT_EQ(run.moved, expected_bytes(cfg, n_sims)) << cfg.describe() << " over " << n_sims << " sims";
    // the device's own count: the all-reduces, the mel sent to the others (the scheduler's copy
    // from the CPU is not the device's)
    const size_t act = (size_t) cfg.n_ctx * cfg.n_state * sizeof(float);
    EXPECT_EQ(run.tp.n_graphs, 1u);
    EXPECT_EQ(run.tp.n_all_reduces, (size_t) expected_all_reduces(cfg));
    EXPECT_EQ(run.tp.all_reduce, (size_t) expected_all_reduces(cfg) * 2 * (n_sims - 1) * act);
    EXPECT_EQ(run.tp.sent, (size_t) (n_sims - 1) * 2 * cfg.n_ctx * cfg.n_mels * sizeof(float));
    EXPECT_EQ(run.tp.gathered, 0u);
    // graph by graph (the scheduler gives the device one split, the encoder but its input copy)
    ASSERT_EQ(run.per_graph.size(), 1u);
    EXPECT_GT(run.graph_nodes[0], 0);
    expect_same_traffic(run.per_graph[0], run.tp);
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
    // graph by graph: the row split's bytes, none of its graphs tensor-parallel
    ASSERT_FALSE(run.per_graph.empty());
    EXPECT_EQ(sum_of(run.per_graph).n_graphs, 0u);
    EXPECT_GT(sum_of(run.per_graph).gathered, 0u);
    expect_same_traffic(sum_of(run.per_graph), run.tp);
}

TEST(AllGpuTensorParallel, GraphCallbackOnlyOnAllGpuDevices) {
    LogCapture log;
    ASSERT_NE(wsp_ggml_backend_sim_register(2, 512), nullptr);
    wsp_ggml_backend_dev_t sim0 = wsp_ggml_backend_dev_by_name("SIM0");
    ASSERT_NE(sim0, nullptr);
    EXPECT_FALSE(wsp_ggml_backend_all_gpu_set_graph_callback(sim0, record_graph, nullptr));
    EXPECT_TRUE(log.contains("SIM0 is not an all-GPU device; no callback was set")) << log.text();
    EXPECT_FALSE(wsp_ggml_backend_all_gpu_set_graph_callback(nullptr, record_graph, nullptr));
}

} // namespace
} // namespace wsp::test

namespace wsp::test {
namespace {

// Note [sharded caches]: a graph that writes the split rows of W x into a cache (memory of the
// device's buffer type outside the graph) keeps the cache sharded on the members; a read from
// outside (tensor_get) sees every write of every graph, and a clear clears every part.
// Note [kept member graphs] (src/allgpu/runner.h): a graph seen before runs what was built for it,
// with no plan, member graph or allocation, and computes the same bits; a weight written anew
// (its pieces on the members go) is not read from what was built before it
TEST(AllGpuTensorParallel, KeptBuildsRunAgainUntilAWeightChanges) {
    const EncoderConfig cfg = small(128, 8); // 3 + 3 + 2 heads
    ASSERT_NE(wsp_ggml_backend_sim_register(3, 512), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    ASSERT_NE(all, nullptr);
    wsp_ggml_backend_t backend = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t cpu     = wsp_ggml_backend_cpu_init();
    EncoderWeights     w(cfg);
    ASSERT_TRUE(w.allocate(wsp_ggml_backend_dev_buffer_type(all)));
    w.randomize(7);
    wsp_ggml_context * ctx =
        wsp_ggml_init({ wsp::model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                            wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg), false),
                        nullptr, true });
    wsp_ggml_tensor *        mel   = nullptr;
    wsp_ggml_cgraph *        g     = wsp::model::build_encoder_graph(w, ctx, &mel);
    wsp_ggml_backend_t       bs[2] = { backend, cpu };
    wsp_ggml_backend_sched_t sched =
        wsp_ggml_backend_sched_new(bs, nullptr, 2, wsp::model::encoder_graph_size(cfg), false, true);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    const std::vector<float> input = wsp::model::random_mel(cfg, 3);
    wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
    const wsp_ggml_tensor * y    = wsp_ggml_graph_node(g, -1);
    auto                    eval = [&] {
        EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
        std::vector<float> out((size_t) wsp_ggml_nelements(y));
        wsp_ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
        return out;
    };
    auto nmse_to_reference = [&](const std::vector<float> & out) {
        const std::vector<double> ref = wsp::model::reference_encoder(w, input);
        double                    err = 0.0, norm = 0.0;
        for (size_t i = 0; i < ref.size(); ++i) {
            err += (out[i] - ref[i]) * (out[i] - ref[i]);
            norm += ref[i] * ref[i];
        }
        return err / norm;
    };

    const auto               c0    = counters_of(all);
    const std::vector<float> first = eval();
    const auto               c1    = counters_of(all);
    EXPECT_EQ(c1.plans_built - c0.plans_built, 1u + 3u) << "one plan, a member graph on each of 3 sims";
    EXPECT_LT(nmse_to_reference(first), 1e-6);
    for (int run = 0; run < 3; ++run) {
        const auto               a    = counters_of(all);
        const std::vector<float> same = eval();
        const auto               b    = counters_of(all);
        EXPECT_EQ(b.plans_built - a.plans_built, 0u) << "run " << run << " planned or built again";
        EXPECT_EQ(b.device_allocs - a.device_allocs, 0u) << "run " << run << " allocated";
        EXPECT_EQ(same, first) << "run " << run << " computed other bits";
    }

    // new weights: the members' pieces of the old ones go, and so does what was built over them
    w.randomize(8);
    const auto               a     = counters_of(all);
    const std::vector<float> fresh = eval();
    const auto               b     = counters_of(all);
    EXPECT_EQ(b.plans_built - a.plans_built, 1u + 3u) << "planned and built anew";
    EXPECT_NE(fresh, first);
    EXPECT_LT(nmse_to_reference(fresh), 1e-6) << "the new weights' result";

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
}

TEST(AllGpuTensorParallel, CacheWrittenSplitReadsBackWhole) {
    ASSERT_NE(wsp_ggml_backend_sim_register(3, 256), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    ASSERT_NE(all, nullptr);
    constexpr int64_t  K = 32, N = 48, SLOTS = 4; // the cache holds SLOTS vectors of N
    wsp_ggml_context * wctx = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  W    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, N),
                    *W2     = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, K);
    wsp_ggml_set_name(W, "W");
    wsp_ggml_set_name(W2, "W2");
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_dev_buffer_type(all));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> w = random_values((size_t) (K * N), 1), w2 = random_values((size_t) (K * N), 2);
    wsp_ggml_backend_tensor_set(W, w.data(), 0, w.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(W2, w2.data(), 0, w2.size() * sizeof(float));
    wsp_ggml_context * cctx  = wsp_ggml_init({ 2 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  cache = wsp_ggml_new_tensor_1d(cctx, WSP_GGML_TYPE_F32, N * SLOTS);
    wsp_ggml_set_name(cache, "cache");
    wsp_ggml_backend_buffer_t cbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(cctx, wsp_ggml_backend_dev_buffer_type(all));
    wsp_ggml_backend_buffer_clear(cbuf, 0);

    wsp_ggml_backend_t backend = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t cpu     = wsp_ggml_backend_cpu_init();
    std::vector<float> expect((size_t) (N * SLOTS), 0.0f);
    LogCapture         log;
    // each slot is a graph of its own, made as whisper.cpp makes a decoder step (a context in the
    // same memory, one scheduler reset after each step): the same key, its write at another
    // offset of the cache (Note [moved nodes]); the second graph finds what the first built and
    // follows it, and nothing is planned again
    std::vector<uint8_t>     meta(16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead());
    wsp_ggml_backend_t       bs[2] = { backend, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(bs, nullptr, 2, 64, false, true);
    const auto               c0    = counters_of(all);
    for (int slot : { 2, 0, 3, 1 }) {
        const auto         before = counters_of(all);
        wsp_ggml_context * ctx    = wsp_ggml_init({ meta.size(), meta.data(), true });
        wsp_ggml_tensor *  x      = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, K);
        wsp_ggml_set_input(x);
        wsp_ggml_tensor * h = wsp_ggml_mul_mat(ctx, W, x);
        wsp_ggml_tensor * put =
            wsp_ggml_cpy(ctx, h, wsp_ggml_view_1d(ctx, cache, N, (size_t) slot * N * sizeof(float)));
        wsp_ggml_tensor * out = wsp_ggml_mul_mat(ctx, W2, h);
        wsp_ggml_set_output(out);
        wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, put);
        wsp_ggml_build_forward_expand(g, out);
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
        const std::vector<float> xv = random_values((size_t) K, 10 + slot);
        wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> hv((size_t) N, 0.0), ov((size_t) K, 0.0);
        for (int64_t r = 0; r < N; ++r) {
            for (int64_t c = 0; c < K; ++c) {
                hv[(size_t) r] += (double) w[(size_t) (r * K + c)] * xv[(size_t) c];
            }
            expect[(size_t) (slot * N + r)] = (float) hv[(size_t) r];
        }
        for (int64_t r = 0; r < K; ++r) {
            for (int64_t c = 0; c < N; ++c) {
                ov[(size_t) r] += (double) w2[(size_t) (r * N + c)] * hv[(size_t) c];
            }
        }
        std::vector<float> got((size_t) K);
        wsp_ggml_backend_tensor_get(out, got.data(), 0, got.size() * sizeof(float));
        EXPECT_TRUE(all_close(got, ov, 1e-4, 1e-4, "W2 (W x)"));
        if (slot != 2) {
            EXPECT_EQ(counters_of(all).plans_built - before.plans_built, 0u) << "slot " << slot << " planned anew";
        }
        wsp_ggml_backend_sched_reset(sched);
        wsp_ggml_free(ctx);
    }
    wsp_ggml_backend_sched_free(sched);
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    EXPECT_EQ(counters_of(all).plans_built - c0.plans_built, 1u + 3u) << "one plan, a member graph on each of 3 sims";
    std::vector<float> got((size_t) (N * SLOTS));
    wsp_ggml_backend_tensor_get(cache, got.data(), 0, got.size() * sizeof(float)); // made whole from the parts
    EXPECT_TRUE(all_close(got, std::vector<double>(expect.begin(), expect.end()), 1e-5, 1e-5, "the cache"));
    wsp_ggml_backend_buffer_clear(cbuf, 0); // clears the parts too
    wsp_ggml_backend_tensor_get(cache, got.data(), 0, got.size() * sizeof(float));
    EXPECT_TRUE(all_close(got, std::vector<double>(got.size(), 0.0), 0.0, 0.0, "the cleared cache"));
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_backend_buffer_free(cbuf);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(cctx);
    wsp_ggml_free(wctx);
}

// Note [all-gathered sources] (src/allgpu/plan.h): ops with no rule for a split source (sum_rows),
// or whose rule refuses how it is split (soft_max along the split rows), read it all-gathered:
// the graph still runs tensor-parallel, on 3 sims, equal to the reference; a second run builds
// nothing and computes the same bits
TEST(AllGpuTensorParallel, OpsWithoutARuleReadTheirSourcesAllGathered) {
    ASSERT_NE(wsp_ggml_backend_sim_register(3, 256), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    ASSERT_NE(all, nullptr);
    constexpr int64_t         K = 32, N = 48, T = 5;
    wsp_ggml_context *        wctx = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *         W    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, N);
    wsp_ggml_tensor *         W2   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, K);
    wsp_ggml_tensor *         W3   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, N);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_dev_buffer_type(all));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> w = random_values((size_t) (K * N), 1), w2 = random_values((size_t) (K * N), 2),
                             w3 = random_values((size_t) (K * N), 3), xv = random_values((size_t) (K * T), 4);
    wsp_ggml_backend_tensor_set(W, w.data(), 0, w.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(W2, w2.data(), 0, w2.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(W3, w3.data(), 0, w3.size() * sizeof(float));

    wsp_ggml_context * ctx =
        wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, T);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * h   = wsp_ggml_mul_mat(ctx, W, x);                          // [N, T], rows per member
    wsp_ggml_tensor * p   = wsp_ggml_soft_max(ctx, h);                            // along the split rows
    wsp_ggml_tensor * out = wsp_ggml_mul_mat(ctx, W2, p);                         // [K, T]
    wsp_ggml_tensor * s   = wsp_ggml_sum_rows(ctx, wsp_ggml_mul_mat(ctx, W3, x)); // [1, T]: no rule
    wsp_ggml_set_output(out);
    wsp_ggml_set_output(s);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, out);
    wsp_ggml_build_forward_expand(g, s);

    // the reference, in double precision
    std::vector<double> ref_out((size_t) (K * T)), ref_s((size_t) T);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> hv((size_t) N), pv((size_t) N);
        double              mx = -1e300, sum = 0.0;
        for (int64_t r = 0; r < N; ++r) {
            double a = 0.0, b = 0.0;
            for (int64_t c = 0; c < K; ++c) {
                a += (double) w[(size_t) (r * K + c)] * xv[(size_t) (t * K + c)];
                b += (double) w3[(size_t) (r * K + c)] * xv[(size_t) (t * K + c)];
            }
            hv[(size_t) r] = a;
            mx             = std::max(mx, a);
            ref_s[(size_t) t] += b;
        }
        for (int64_t r = 0; r < N; ++r) {
            pv[(size_t) r] = std::exp(hv[(size_t) r] - mx);
            sum += pv[(size_t) r];
        }
        for (int64_t k = 0; k < K; ++k) {
            double o = 0.0;
            for (int64_t r = 0; r < N; ++r) {
                o += (double) w2[(size_t) (k * N + r)] * pv[(size_t) r] / sum;
            }
            ref_out[(size_t) (t * K + k)] = o;
        }
    }

    wsp_ggml_backend_t       backend = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t       cpu     = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t       bs[2]   = { backend, cpu };
    wsp_ggml_backend_sched_t sched   = wsp_ggml_backend_sched_new(bs, nullptr, 2, 64, false, true);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    LogCapture log;
    auto       eval = [&](std::vector<float> & o, std::vector<float> & so) {
        EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
        o.resize((size_t) (K * T));
        so.resize((size_t) T);
        wsp_ggml_backend_tensor_get(out, o.data(), 0, o.size() * sizeof(float));
        wsp_ggml_backend_tensor_get(s, so.data(), 0, so.size() * sizeof(float));
    };
    const auto         c0  = counters_of(all);
    const auto         tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
    std::vector<float> o1, s1, o2, s2;
    eval(o1, s1);
    const auto c1  = counters_of(all);
    const auto tp1 = wsp_ggml_backend_all_gpu_get_traffic(all);
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    EXPECT_EQ(c1.plans_built - c0.plans_built, 1u + 3u) << "one plan, a member graph on each of 3 sims";
    EXPECT_TRUE(all_close(o1, ref_out, 1e-4, 1e-4, "W2 soft_max(W x)"));
    EXPECT_TRUE(all_close(s1, ref_s, 1e-4, 1e-4, "sum_rows(W3 x)"));
    // h and W3 x all-gathered: each member receives the others' parts of both, (3 - 1) wholes in
    // all for each; then the output's parts from the 2 other members to the main one
    const size_t whole = (size_t) (N * T) * sizeof(float);
    EXPECT_GE(tp1.gathered - tp0.gathered, 2 * 2 * whole);
    EXPECT_LT(tp1.gathered - tp0.gathered, 2 * 2 * whole + (size_t) (K * T) * sizeof(float));
    EXPECT_EQ(tp1.n_all_reduces - tp0.n_all_reduces, 0u);

    eval(o2, s2);
    EXPECT_EQ(counters_of(all).plans_built - c1.plans_built, 0u) << "the second run built again";
    EXPECT_EQ(o2, o1);
    EXPECT_EQ(s2, s1);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
}

} // namespace
} // namespace wsp::test

namespace wsp::test {
namespace {

// Note [grown shapes] (src/allgpu/reshape.cpp): a decoder's steps as whisper.cpp builds them
// without flash attention, the cache read one position longer each step. One device's weights and
// caches, and the graph of step t over them.
struct DecoderLayer {
    static constexpr int64_t  HD = 8, HEADS = 4, E = HD * HEADS, CTX = 40;
    wsp_ggml_context *        wctx = nullptr;
    wsp_ggml_tensor *         wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr, *kc = nullptr, *vc = nullptr;
    wsp_ggml_backend_buffer_t wbuf = nullptr, cbuf = nullptr;

    explicit DecoderLayer(wsp_ggml_backend_buffer_type_t buft) {
        wctx                    = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
        wsp_ggml_tensor ** ws[] = { &wq, &wk, &wv, &wo };
        for (int i = 0; i < 4; ++i) {
            *ws[i] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);
            wsp_ggml_set_name(*ws[i], ("w" + std::to_string(i)).c_str());
        }
        wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
        wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (int i = 0; i < 4; ++i) {
            const std::vector<float> v = random_values((size_t) (E * E), 20 + i);
            wsp_ggml_backend_tensor_set(*ws[i], v.data(), 0, v.size() * sizeof(float));
        }
        wsp_ggml_context * cctx = wsp_ggml_init({ 2 * wsp_ggml_tensor_overhead(), nullptr, true });
        kc                      = wsp_ggml_new_tensor_1d(cctx, WSP_GGML_TYPE_F32, E * CTX);
        vc                      = wsp_ggml_new_tensor_1d(cctx, WSP_GGML_TYPE_F32, E * CTX);
        wsp_ggml_set_name(kc, "cache_k");
        wsp_ggml_set_name(vc, "cache_v");
        cbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(cctx, buft);
        wsp_ggml_backend_buffer_clear(cbuf, 0);
        cache_ctx = cctx;
    }
    ~DecoderLayer() {
        wsp_ggml_backend_buffer_free(wbuf);
        wsp_ggml_backend_buffer_free(cbuf);
        wsp_ggml_free(wctx);
        wsp_ggml_free(cache_ctx);
    }

    // step t: the n tokens x at positions t.. written into the caches, attention over positions
    // 0..t + n - 1 (the mask an input of zeros, as whisper.cpp's shape), the output projection
    wsp_ggml_cgraph * step(wsp_ggml_context * ctx, int64_t t, int64_t n, wsp_ggml_tensor ** x, wsp_ggml_tensor ** mask,
                           wsp_ggml_tensor ** out) const {
        const int64_t n_kv = t + n;
        *x                 = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, n);
        *mask              = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, n_kv, n);
        wsp_ggml_set_input(*x);
        wsp_ggml_set_input(*mask);
        wsp_ggml_cgraph * g  = wsp_ggml_new_graph(ctx);
        wsp_ggml_tensor * q  = wsp_ggml_mul_mat(ctx, wq, *x);
        wsp_ggml_tensor * k  = wsp_ggml_mul_mat(ctx, wk, *x);
        wsp_ggml_tensor * v  = wsp_ggml_transpose(ctx, wsp_ggml_reshape_2d(ctx, wsp_ggml_mul_mat(ctx, wv, *x), E, n));
        const size_t      es = sizeof(float);
        wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(ctx, k, wsp_ggml_view_1d(ctx, kc, E * n, (size_t) (t * E) * es)));
        wsp_ggml_build_forward_expand(g,
                                      wsp_ggml_cpy(ctx, v, wsp_ggml_view_2d(ctx, vc, n, E, CTX * es, (size_t) t * es)));
        wsp_ggml_tensor * Q   = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, q, HD, HEADS, n), 0, 2, 1, 3);
        wsp_ggml_tensor * K   = wsp_ggml_view_3d(ctx, kc, HD, n_kv, HEADS, E * es, HD * es, 0);
        wsp_ggml_tensor * KQ  = wsp_ggml_soft_max_ext(ctx, wsp_ggml_mul_mat(ctx, K, Q), *mask, 0.35f, 0.0f);
        wsp_ggml_tensor * V   = wsp_ggml_view_3d(ctx, vc, n_kv, HD, HEADS, CTX * es, CTX * HD * es, 0);
        wsp_ggml_tensor * kqv = wsp_ggml_permute(ctx, wsp_ggml_mul_mat(ctx, V, KQ), 0, 2, 1, 3);
        wsp_ggml_tensor * cur = wsp_ggml_cont_2d(ctx, kqv, E, n);
        *out                  = wsp_ggml_mul_mat(ctx, wo, cur);
        wsp_ggml_set_output(*out);
        wsp_ggml_build_forward_expand(g, *out);
        return g;
    }

    wsp_ggml_context * cache_ctx = nullptr;
};

// 30 steps of a decoder layer on SIM_All (3 sims, 2 + 1 + 1 heads) and on the CPU, each step's
// graph made anew in the same memory, after one step at the last positions (as whisper.cpp's
// encoder sizes the members' buffers before its decoder runs): once the second step has built
// what it runs, every later step, its cache one position longer, reshapes that build and runs it
// (no plan, no member graph, no allocation) and equals the CPU's. A step of two tokens is alike
// but its all-reduces are not: it is planned and built, and the next step of one token finds its
// own build again.
TEST(AllGpuTensorParallel, GrowingCacheReadsKeepTheBuild) {
    wsp_ggml_backend_dev_t all = three_sims_two_one_one();
    ASSERT_NE(all, nullptr);
    DecoderLayer             on_all(wsp_ggml_backend_dev_buffer_type(all));
    DecoderLayer             on_cpu(wsp_ggml_backend_cpu_buffer_type());
    wsp_ggml_backend_t       backend   = wsp_ggml_backend_dev_init(all, nullptr);
    wsp_ggml_backend_t       cpu       = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t       cpu2      = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t       bs[2]     = { backend, cpu };
    wsp_ggml_backend_sched_t sched     = wsp_ggml_backend_sched_new(bs, nullptr, 2, 64, false, true);
    wsp_ggml_backend_sched_t sched_cpu = wsp_ggml_backend_sched_new(&cpu2, nullptr, 1, 64, false, true);
    std::vector<uint8_t>     meta(40 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead()), meta_cpu(meta.size());
    LogCapture               log;
    uint64_t                 built_after_warmup = 0, allocs_after_warmup = 0;
    // (position, tokens): one step of two tokens at the last positions, 30 steps of a token, then a step of two
    // tokens (its all-reduces change shape: planned and built) and a token again (the kept build
    // of one token reshaped)
    std::vector<std::pair<int64_t, int64_t>> steps = { { DecoderLayer::CTX - 2, 2 } };
    for (int64_t t = 0; t < 30; ++t) {
        steps.emplace_back(t, 1);
    }
    steps.emplace_back(30, 2);
    steps.emplace_back(32, 1);
    for (size_t i = 0; i < steps.size(); ++i) {
        const auto [t, n]                     = steps[i];
        const bool               after_warmup = i >= 3 && i != 31;
        std::vector<float>       got, want;
        const std::vector<float> xv = random_values((size_t) (DecoderLayer::E * n), 100 + (int) t);
        const std::vector<float> zeros((size_t) ((t + n) * n), 0.0f);
        for (DecoderLayer * layer : { &on_all, &on_cpu }) {
            const bool               dev = layer == &on_all;
            wsp_ggml_context *       ctx = wsp_ggml_init({ meta.size(), (dev ? meta : meta_cpu).data(), true });
            wsp_ggml_tensor *        x = nullptr, *mask = nullptr, *out = nullptr;
            wsp_ggml_cgraph *        g = layer->step(ctx, t, n, &x, &mask, &out);
            wsp_ggml_backend_sched_t s = dev ? sched : sched_cpu;
            ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
            wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
            wsp_ggml_backend_tensor_set(mask, zeros.data(), 0, zeros.size() * sizeof(float));
            const auto before = counters_of(all);
            ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
            const auto after = counters_of(all);
            if (dev && after_warmup) {
                built_after_warmup += after.plans_built - before.plans_built;
                allocs_after_warmup += after.device_allocs - before.device_allocs;
            }
            if (dev && !after_warmup && i == 31) {
                EXPECT_EQ(after.plans_built - before.plans_built, 1u + 3u) << "the step of two tokens, planned anew";
            }
            std::vector<float> & o = dev ? got : want;
            o.resize((size_t) (DecoderLayer::E * n));
            wsp_ggml_backend_tensor_get(out, o.data(), 0, o.size() * sizeof(float));
            wsp_ggml_backend_sched_reset(s);
            wsp_ggml_free(ctx);
        }
        EXPECT_TRUE(all_close(got, std::vector<double>(want.begin(), want.end()), 1e-4, 1e-4, "step output"))
            << "step " << t;
    }
    EXPECT_FALSE(log.contains("does not fit tensor parallelism")) << log.text();
    EXPECT_EQ(built_after_warmup, 0u) << "a step of one token after the second planned or built its member graphs";
    EXPECT_EQ(allocs_after_warmup, 0u) << "a step of one token after the second allocated device memory";
    // the cache as each step wrote it, read back whole from the members' parts
    std::vector<float> k_all((size_t) (DecoderLayer::E * DecoderLayer::CTX)), k_cpu(k_all.size());
    wsp_ggml_backend_tensor_get(on_all.kc, k_all.data(), 0, k_all.size() * sizeof(float));
    wsp_ggml_backend_tensor_get(on_cpu.kc, k_cpu.data(), 0, k_cpu.size() * sizeof(float));
    EXPECT_TRUE(all_close(k_all, std::vector<double>(k_cpu.begin(), k_cpu.end()), 1e-5, 1e-5, "the K cache"));
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_backend_sched_free(sched_cpu);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_backend_free(cpu2);
}

} // namespace
} // namespace wsp::test
