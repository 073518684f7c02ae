// The scheduler suites' encoder on CUDA devices instead of sim devices: layers spread over every
// CUDA device (real GPUs, or virtual ones with WSP_GGML_CUDA_VIRTUAL_DEVICES=N), ops CUDA does
// not have yet falling back to the CPU, parallel off and on, a split weight over all devices,
// CUDA graphs replayed under the scheduler (synchronized and overlapped evaluations), and CUDA
// devices next to sim devices in one scheduler (each waits only on events it can wait on).
// Skipped without a GPU.

#include "ggml-counters.h"
#include "ggml-cuda.h"
#include "ggml-sim.h"
#include "model/whisper_encoder.h"
#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

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

// what the GPU devices of `be` were asked to do so far, summed (Note [counters])
wsp_ggml_backend_counters gpu_counters(const CudaBackends & be) {
    wsp_ggml_backend_counters sum{};
    for (size_t i = 0; i + 1 < be.all.size(); ++i) {
        wsp_ggml_backend_counters c{};
        wsp_ggml_backend_dev_get_counters(wsp_ggml_backend_get_device(be.all[i]), &c);
        for (size_t f = 0; f < sizeof(c) / sizeof(uint64_t); ++f) {
            (&sum.graph_computes)[f] += (&c.graph_computes)[f];
        }
    }
    return sum;
}

// the encoder's layers over the GPU backends of `be` (all but the CPU, last), in turn; with
// `counts`, what the GPUs did in each evaluation (synchronized ones)
void run_encoder(CudaBackends & be, bool parallel, bool split_weights, int evaluations = 4, bool overlapped = false,
                 std::vector<wsp_ggml_backend_counters> * counts = nullptr) {
    const int                                   n   = (int) be.all.size() - 1;
    model::EncoderConfig                        cfg = config(false);
    model::EncoderWeights                       w(cfg);
    std::vector<wsp_ggml_backend_buffer_type_t> layers;
    for (int d = 0; d < n; ++d) {
        layers.push_back(wsp_ggml_backend_get_default_buffer_type(be.all[(size_t) d]));
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
    wsp_ggml_tensor *               out = wsp_ggml_graph_node(g, -1);
    std::vector<std::vector<float>> xs, outs;
    for (uint32_t it = 0; it < (uint32_t) evaluations; ++it) {
        xs.push_back(model::random_mel(cfg, 70 + it));
        wsp_ggml_backend_tensor_set(mel, xs.back().data(), 0, xs.back().size() * sizeof(float));
        outs.emplace_back((size_t) wsp_ggml_nelements(out));
        if (overlapped) {
            // no synchronize in between: the output is read on its backend's stream, in order
            ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(s, g), WSP_GGML_STATUS_SUCCESS);
            wsp_ggml_backend_tensor_get_async(wsp_ggml_backend_sched_get_tensor_backend(s, out), out,
                                              outs.back().data(), 0, wsp_ggml_nbytes(out));
        } else {
            const wsp_ggml_backend_counters before = gpu_counters(be);
            ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
            if (counts != nullptr) {
                wsp_ggml_backend_counters c = gpu_counters(be);
                for (size_t f = 0; f < sizeof(c) / sizeof(uint64_t); ++f) {
                    (&c.graph_computes)[f] -= (&before.graph_computes)[f];
                }
                counts->push_back(c);
            }
            wsp_ggml_backend_tensor_get(out, outs.back().data(), 0, wsp_ggml_nbytes(out));
        }
    }
    wsp_ggml_backend_sched_synchronize(s);
    for (size_t it = 0; it < xs.size(); ++it) {
        // F16 weights, F16 activations on the tensor cores: the error is that rounding, ~1e-6
        EXPECT_LT(nmse(outs[it], model::reference_encoder(w, xs[it])), 1e-4) << "evaluation " << it;
    }
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
}

void run_encoder(bool parallel, bool split_weights) {
    CudaBackends be;
    run_encoder(be, parallel, split_weights);
}

int count_of(const LogCapture & log, const std::string & what) {
    const std::string text = log.text();
    int               n    = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
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

// Note [copy rotation]: a graph computed and synchronized again and again is recorded once per
// backend and then replayed; overlapped evaluations rotate through the copies, one recording each
TEST(CudaSched, CudaGraphsReplayUnderTheScheduler) {
    REQUIRE_GPU();
    CudaBackends be = [] {
        GraphsSetting on("1"); // read when a backend is made
        return CudaBackends();
    }();
    int once = 0;
    {
        LogCapture log;
        run_encoder(be, true, false, 1, false);
        once = count_of(log, "recorded a CUDA graph");
        EXPECT_GE(once, 1) << log.text();
    }
    {
        LogCapture log;
        run_encoder(be, true, false, 6, false);
        // a new scheduler and new weights: recorded again where their addresses differ from the
        // first run's (the allocator may hand out the same ones), then replayed
        EXPECT_LE(count_of(log, "recorded a CUDA graph"), once)
            << "evaluations 2 to 6 replay what the first recorded" << log.text();
    }
    {
        LogCapture log;
        run_encoder(be, true, false, 8, true);
        EXPECT_FALSE(log.contains("cannot be recorded")) << log.text();
    }
}

// whether a copy between GPUs 0 and 1 goes through NCCL (Note [NCCL transfers] in
// src/cuda/nccl.cu), a send kernel and a receive kernel counted as launches, rather than a peer
// copy: NCCL built in and not turned off, no virtual devices, and no peer access between the two
// (the host target's emulated devices refuse it under WSP_GGML_CUDA_HOST_PEER=none). Copies under
// WSP_GGML_NCCL_MIN_BYTES (4 MiB) take NCCL only then; this suite's tensors are all under it.
bool nccl_carries_transfers() {
    if (wsp_ggml_backend_cuda_get_device_count() < 2) {
        return false;
    }
    auto get = reinterpret_cast<wsp_ggml_backend_get_features_t>(
        wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_cuda_reg(), "wsp_ggml_backend_get_features"));
    bool built = false;
    for (wsp_ggml_backend_feature * f = get ? get(wsp_ggml_backend_cuda_reg()) : nullptr; f && f->name; ++f) {
        built = built || (std::strcmp(f->name, "NCCL") == 0 && std::strcmp(f->value, "1") == 0);
    }
    const char * off       = std::getenv("WSP_GGML_CUDA_NCCL");
    const char * virtual_n = std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES");
    const char * host_peer = std::getenv("WSP_GGML_CUDA_HOST_PEER");
    if (!built || (off != nullptr && std::atoi(off) == 0) || (virtual_n != nullptr && std::atoi(virtual_n) > 0)) {
        return false;
    }
    return (host_peer != nullptr && std::strcmp(host_peer, "none") == 0) || !peer_access_refused(0, 1).empty();
}

// Note [CUDA graphs]: with split weights every split calls its backend with a graph of its own,
// dozens per evaluation, in the same order every evaluation: the cache keeps them all, so from
// the second evaluation on every split replays its recording (the cache does not thrash); kernels
// launched one by one are only NCCL's transfers between splits, where NCCL carries them
TEST(CudaSched, EverySplitReplaysFromTheSecondEvaluation) {
    REQUIRE_GPU();
    CudaBackends be = [] {
        GraphsSetting on("1"); // read when a backend is made
        return CudaBackends();
    }();
    std::vector<wsp_ggml_backend_counters> counts;
    run_encoder(be, true, true, 4, false, &counts);
    ASSERT_EQ(counts.size(), 4u);
    EXPECT_GE(counts[0].graph_computes, 8u); // split weights: several graphs per evaluation
    for (size_t it = 1; it < counts.size(); ++it) {
        EXPECT_EQ(counts[it].graph_captures, 0u) << "evaluation " << it;
        if (nccl_carries_transfers()) {
            // the transfers between splits, the same every evaluation: a send and a receive each
            EXPECT_EQ(counts[it].kernel_launches, counts[1].kernel_launches) << "evaluation " << it;
            EXPECT_EQ(counts[it].kernel_launches % 2, 0u) << "evaluation " << it;
        } else {
            EXPECT_EQ(counts[it].kernel_launches, 0u) << "evaluation " << it;
        }
        EXPECT_EQ(counts[it].graph_replays, counts[it].graph_computes) << "evaluation " << it;
        EXPECT_EQ(counts[it].device_allocs, 0u) << "evaluation " << it;
    }
}

// CUDA devices and sim devices in one scheduler: a CUDA stream never waits on a sim event (the
// host does), a sim stream never on a CUDA one, and the results are right
TEST(CudaSched, NextToSimDevices) {
    REQUIRE_GPU();
    wsp_ggml_backend_reg_t sims = wsp_ggml_backend_sim_register(2, 256);
    ASSERT_NE(sims, nullptr);
    CudaBackends be;
    be.all.insert(be.all.end() - 1, wsp_ggml_backend_dev_init(wsp_ggml_backend_reg_dev_get(sims, 0), nullptr));
    be.all.insert(be.all.end() - 1, wsp_ggml_backend_dev_init(wsp_ggml_backend_reg_dev_get(sims, 1), nullptr));
    const size_t races = wsp_ggml_backend_sim_races();
    run_encoder(be, true, false, 6, true);
    run_encoder(be, false, false, 3, false);
    EXPECT_EQ(wsp_ggml_backend_sim_races(), races);
}

} // namespace
} // namespace wsp::test
