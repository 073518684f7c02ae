// The CUDA devices' counters (Note [counters] in src/backend/counters.h) against what each test
// asks of the device: kernels launched one by one or recorded into CUDA graphs and replayed
// (Note [CUDA graphs]), host waits, allocations (the scratch arena, Note [scratch arena]) and the
// scheduler's staged user inputs (Note [staged inputs]), with the results checked too. On the
// host target the counts are exact; a GPU runs the same code paths.

#include "ggml-alloc.h"
#include "ggml-counters.h"
#include "ggml-cuda.h"
#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

wsp_ggml_backend_dev_t cuda0() {
    return wsp_ggml_backend_reg_dev_get(wsp_ggml_backend_cuda_reg(), 0);
}

wsp_ggml_backend_counters read() {
    wsp_ggml_backend_counters c{};
    wsp_ggml_backend_dev_get_counters(cuda0(), &c);
    return c;
}

// what the device was asked to do since `from`
wsp_ggml_backend_counters since(const wsp_ggml_backend_counters & from) {
    const wsp_ggml_backend_counters now = read();
    return { now.graph_computes - from.graph_computes, now.kernel_launches - from.kernel_launches,
             now.graph_captures - from.graph_captures, now.graph_replays - from.graph_replays,
             now.host_syncs - from.host_syncs,         now.device_allocs - from.device_allocs,
             now.plans_built - from.plans_built };
}

struct BackendFree {
    void operator()(wsp_ggml_backend_t b) const { wsp_ggml_backend_free(b); }
};
using BackendPtr = std::unique_ptr<wsp_ggml_backend, BackendFree>;

// e = (a + b) * a * 2 over n floats on CUDA0: three kernels (add, mul, scale), each launched once
struct Elementwise {
    // inputs: another's a and b to read (a decoder's next step reads the same memory), else its own
    explicit Elementwise(int64_t n, const Elementwise * inputs = nullptr) {
        wsp_ggml_init_params params{ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
        ctx   = wsp_ggml_init(params);
        a     = inputs != nullptr ? inputs->a : wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n);
        b     = inputs != nullptr ? inputs->b : wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n);
        e     = wsp_ggml_scale(ctx, wsp_ggml_mul(ctx, wsp_ggml_add(ctx, a, b), a), 2.0f);
        graph = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(graph, e);
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cuda_buffer_type(0));
    }
    ~Elementwise() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
    // sets a and b from the seed and checks e after `compute`
    void check(uint32_t seed, const std::function<void()> & compute) const {
        const std::vector<float> va = random_values((size_t) wsp_ggml_nelements(a), seed);
        const std::vector<float> vb = random_values(va.size(), seed + 1);
        set_values(a, va);
        set_values(b, vb);
        compute();
        const std::vector<float> got = get_values(e);
        for (size_t i = 0; i < va.size(); ++i) {
            ASSERT_FLOAT_EQ(got[i], (va[i] + vb[i]) * va[i] * 2.0f) << "element " << i << ", seed " << seed;
        }
    }

    wsp_ggml_context *        ctx;
    wsp_ggml_tensor *         a, *b, *e;
    wsp_ggml_cgraph *         graph;
    wsp_ggml_backend_buffer_t buf;
};

TEST(CudaCounters, DirectLaunchesCountEachKernel) {
    REQUIRE_GPU();
    GraphsSetting off("0");
    BackendPtr    backend(wsp_ggml_backend_cuda_init(0));
    ASSERT_NE(backend, nullptr);
    Elementwise g(1000);
    for (uint32_t step = 0; step < 2; ++step) {
        g.check(step * 10, [&] {
            const auto c0 = read();
            ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend.get(), g.graph), WSP_GGML_STATUS_SUCCESS);
            const auto c = since(c0);
            EXPECT_EQ(c.graph_computes, 1u);
            EXPECT_EQ(c.kernel_launches, 3u);
            EXPECT_EQ(c.graph_captures, 0u);
            EXPECT_EQ(c.graph_replays, 0u);
            EXPECT_EQ(c.host_syncs, 0u); // nothing waits until the synchronize
            // the first graph of a backend makes its cuBLAS workspace (where the BLAS takes one)
            EXPECT_LE(c.device_allocs, step == 0 ? 1u : 0u);
            wsp_ggml_backend_synchronize(backend.get());
            EXPECT_EQ(since(c0).host_syncs, 1u);
        });
    }
}

TEST(CudaCounters, ARepeatedGraphReplaysItsRecording) {
    REQUIRE_GPU();
    GraphsSetting on("1");
    BackendPtr    backend(wsp_ggml_backend_cuda_init(0));
    ASSERT_NE(backend, nullptr);
    Elementwise g(1000);
    for (uint32_t step = 0; step < 3; ++step) {
        g.check(step * 10, [&] {
            const auto c0 = read();
            ASSERT_EQ(wsp_ggml_backend_graph_compute(backend.get(), g.graph), WSP_GGML_STATUS_SUCCESS);
            const auto c = since(c0);
            EXPECT_EQ(c.graph_computes, 1u);
            EXPECT_EQ(c.kernel_launches, 0u) << "step " << step;
            EXPECT_EQ(c.graph_captures, step == 0 ? 1u : 0u) << "step " << step;
            EXPECT_EQ(c.graph_replays, 1u);
            EXPECT_EQ(c.host_syncs, 1u);                     // the synchronize of graph_compute
            EXPECT_LE(c.device_allocs, step == 0 ? 1u : 0u); // the cuBLAS workspace, if any
        });
    }
}

// Note [CUDA graphs]: a graph that replaces the one computed at its slot in the evaluation before
// (same ops, other addresses, that one never replayed) is recorded into it; graphs computed in one
// evaluation are kept apart, and one that was replayed is never replaced
TEST(CudaCounters, AGraphThatReplacesTheOneBeforeIsRecordedIntoIt) {
    REQUIRE_GPU();
    GraphsSetting on("1");
    BackendPtr    backend(wsp_ggml_backend_cuda_init(0));
    ASSERT_NE(backend, nullptr);
    // the same ops: 1 reads 0's inputs (a step and the next: the same weights and caches, the
    // results elsewhere); 2 and 3 read memory of their own (two splits, other weights)
    std::vector<std::unique_ptr<Elementwise>> graphs;
    graphs.push_back(std::make_unique<Elementwise>(257));
    graphs.push_back(std::make_unique<Elementwise>(257, graphs[0].get()));
    graphs.push_back(std::make_unique<Elementwise>(257));
    graphs.push_back(std::make_unique<Elementwise>(257));
    // the graphs `which` computed as one evaluation (then a synchronize); the recordings it made
    uint32_t seed     = 100;
    auto     evaluate = [&](std::vector<int> which) {
        uint64_t captures = 0;
        for (int i : which) {
            const auto c0 = read();
            graphs[(size_t) i]->check(seed++, [&] {
                ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend.get(), graphs[(size_t) i]->graph),
                              WSP_GGML_STATUS_SUCCESS);
                wsp_ggml_backend_synchronize(backend.get());
            });
            const auto c = since(c0);
            EXPECT_EQ(c.kernel_launches, 0u) << "graph " << i;
            EXPECT_EQ(c.graph_replays, 1u) << "graph " << i;
            captures += c.graph_captures;
        }
        return captures;
    };
    // check() synchronizes after each graph: to compute several as one evaluation, the slots must
    // not be reset in between, so those graphs are checked one per evaluation first, then timed
    EXPECT_EQ(evaluate({ 0 }), 1u);
    EXPECT_EQ(evaluate({ 1 }), 1u); // replaces 0: recorded into its graph
    EXPECT_EQ(evaluate({ 1 }), 0u); // replays
    EXPECT_EQ(evaluate({ 0 }), 1u); // 0's recording became 1's: recorded again, apart (1 was replayed)
    EXPECT_EQ(evaluate({ 0 }), 0u);
    EXPECT_EQ(evaluate({ 1 }), 0u); // both kept
    // a scheduler that waits between two splits: the second reads other memory, so it does not
    // replace the first (by ops alone it would, and the first would be recorded again next time)
    EXPECT_EQ(evaluate({ 2 }), 1u);
    EXPECT_EQ(evaluate({ 3 }), 1u); // a recording of its own
    EXPECT_EQ(evaluate({ 2 }), 0u); // 2 was kept
    EXPECT_EQ(evaluate({ 3 }), 0u);

    // several graphs in one evaluation, each at its own slot, then the same evaluation again
    auto run_together = [&](std::vector<int> which) {
        const auto c0 = read();
        for (int i : which) {
            EXPECT_EQ(wsp_ggml_backend_graph_compute_async(backend.get(), graphs[(size_t) i]->graph),
                      WSP_GGML_STATUS_SUCCESS);
        }
        wsp_ggml_backend_synchronize(backend.get());
        const auto c = since(c0);
        EXPECT_EQ(c.kernel_launches, 0u);
        EXPECT_EQ(c.graph_replays, which.size());
        return c.graph_captures;
    };
    EXPECT_EQ(run_together({ 2, 3, 0, 1 }), 0u); // every one replays: none replaced another
    EXPECT_EQ(run_together({ 2, 3, 0, 1 }), 0u);
}

TEST(CudaCounters, TransfersAndWaitsAreCounted) {
    REQUIRE_GPU();
    BackendPtr backend(wsp_ggml_backend_cuda_init(0));
    ASSERT_NE(backend, nullptr);
    auto        c0 = read();
    Elementwise g(64); // one buffer
    EXPECT_EQ(since(c0).device_allocs, 1u);
    std::vector<float> v(64, 1.5f), out(64);
    c0 = read();
    wsp_ggml_backend_tensor_set(g.a, v.data(), 0, sizeof(float) * v.size());
    EXPECT_EQ(since(c0).host_syncs, 1u);
    wsp_ggml_backend_tensor_get(g.a, out.data(), 0, sizeof(float) * out.size());
    EXPECT_EQ(since(c0).host_syncs, 2u);
    EXPECT_EQ(out, v);
    wsp_ggml_backend_tensor_memset(g.a, 0, 0, wsp_ggml_nbytes(g.a));
    EXPECT_EQ(since(c0).host_syncs, 3u);
    wsp_ggml_backend_buffer_clear(g.buf, 0);
    EXPECT_EQ(since(c0).host_syncs, 4u);
    // asynchronous transfers wait for nothing until the synchronize
    wsp_ggml_backend_tensor_set_async(backend.get(), g.a, v.data(), 0, sizeof(float) * v.size());
    EXPECT_EQ(since(c0).host_syncs, 4u);
    wsp_ggml_backend_synchronize(backend.get());
    EXPECT_EQ(since(c0).host_syncs, 5u);
    wsp_ggml_backend_event_t e = wsp_ggml_backend_event_new(cuda0());
    ASSERT_NE(e, nullptr);
    wsp_ggml_backend_event_record(e, backend.get());
    wsp_ggml_backend_event_synchronize(e);
    EXPECT_EQ(since(c0).host_syncs, 6u);
    wsp_ggml_backend_event_free(e);
    const auto c = since(c0);
    EXPECT_EQ(c.kernel_launches + c.graph_computes + c.device_allocs + c.graph_captures + c.graph_replays, 0u);
}

// Note [scratch arena]: a float mat-mul whose activations are converted takes scratch; the first
// recording finds the arena too small, which grows outside the recording (one allocation) before
// the graph is recorded again; later computes allocate nothing
TEST(CudaCounters, ScratchGrowsOnceOutsideTheRecording) {
    REQUIRE_GPU();
    GraphsSetting on("1");
    BackendPtr    backend(wsp_ggml_backend_cuda_init(0));
    ASSERT_NE(backend, nullptr);
    {
        Elementwise warm(8); // the backend's cuBLAS workspace is made with its first graph
        warm.check(
            1, [&] { ASSERT_EQ(wsp_ggml_backend_graph_compute(backend.get(), warm.graph), WSP_GGML_STATUS_SUCCESS); });
    }
    const int64_t        K = 96, N = 40, M = 7;
    wsp_ggml_init_params params{ 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx   = wsp_ggml_init(params);
    wsp_ggml_tensor *    w     = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F16, K, N);
    wsp_ggml_tensor *    x     = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
    wsp_ggml_tensor *    y     = wsp_ggml_mul_mat(ctx, w, x);
    wsp_ggml_cgraph *    graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, y);
    wsp_ggml_backend_buffer_t buf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cuda_buffer_type(0));
    ASSERT_NE(buf, nullptr);
    const std::vector<float> vw = round_trip(WSP_GGML_TYPE_F16, random_values((size_t) (K * N), 5));
    set_values(w, vw);
    for (int step = 0; step < 3; ++step) {
        const std::vector<float> vx = random_values((size_t) (K * M), 10 + (uint32_t) step);
        set_values(x, vx);
        const auto c0 = read();
        ASSERT_EQ(wsp_ggml_backend_graph_compute(backend.get(), graph), WSP_GGML_STATUS_SUCCESS);
        const auto c = since(c0);
        EXPECT_EQ(c.device_allocs, step == 0 ? 1u : 0u) << "step " << step;
        EXPECT_EQ(c.graph_captures, step == 0 ? 1u : 0u) << "step " << step;
        EXPECT_EQ(c.graph_replays, 1u) << "step " << step;
        EXPECT_EQ(c.kernel_launches, 0u) << "step " << step; // the dropped recording launched nothing
        // against a double reference of the F16-rounded activations (the GEMM's inputs)
        const std::vector<float> x16 = round_trip(WSP_GGML_TYPE_F16, vx);
        std::vector<double>      ref((size_t) (N * M));
        for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
                double s = 0.0;
                for (int64_t k = 0; k < K; ++k) {
                    s += (double) vw[(size_t) (n * K + k)] * x16[(size_t) (m * K + k)];
                }
                ref[(size_t) (m * N + n)] = s;
            }
        }
        EXPECT_LT(nmse(get_values(y), ref), 1e-8) << "step " << step;
    }
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
}

// Note [staged inputs]: the scheduler copies a user input through pinned memory on the device's
// stream, so a compute waits on the host once (its synchronize); evaluations queued back to back
// wait for the pinned memory of the one before
TEST(CudaCounters, SchedulerStagesUserInputs) {
    REQUIRE_GPU();
    GraphsSetting on("1");
    BackendPtr    backend(wsp_ggml_backend_cuda_init(0));
    BackendPtr    cpu(wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
    ASSERT_NE(backend, nullptr);
    ASSERT_NE(cpu, nullptr);
    const int64_t             n = 300;
    wsp_ggml_init_params      wparams{ 4 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *        wctx = wsp_ggml_init(wparams);
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, n);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_cuda_buffer_type(0));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> vw = random_values((size_t) n, 3);
    set_values(w, vw);

    wsp_ggml_init_params params{ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(params);
    wsp_ggml_tensor *    x   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * y = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, x, w), w);
    wsp_ggml_set_output(y);
    wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, y);

    wsp_ggml_backend_t       backends[2] = { backend.get(), cpu.get() };
    wsp_ggml_backend_sched_t sched       = wsp_ggml_backend_sched_new(backends, nullptr, 2, 64, false, true);
    ASSERT_NE(sched, nullptr);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, graph));
    ASSERT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, y), backend.get());
    auto expect = [&](const std::vector<float> & vx) {
        const std::vector<float> got = get_values(y);
        for (size_t i = 0; i < vx.size(); ++i) {
            ASSERT_FLOAT_EQ(got[i], vx[i] * vw[i] + vw[i]) << "element " << i;
        }
    };
    for (int step = 0; step < 4; ++step) {
        const std::vector<float> vx = random_values((size_t) n, 20 + (uint32_t) step);
        set_values(x, vx); // host memory: the CPU's compute buffer
        const auto c0 = read();
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, graph), WSP_GGML_STATUS_SUCCESS);
        const auto c = since(c0);
        if (step > 0) { // after the warm-up
            EXPECT_EQ(c.host_syncs, 1u) << "step " << step;
            EXPECT_EQ(c.device_allocs, 0u) << "step " << step;
            EXPECT_EQ(c.kernel_launches, 0u) << "step " << step;
            EXPECT_EQ(c.graph_replays, 1u) << "step " << step;
        }
        expect(vx);
    }
    // back to back: the second evaluation waits for the pinned memory the first one's copy reads
    const std::vector<float> v1 = random_values((size_t) n, 40), v2 = random_values((size_t) n, 41);
    const auto               c0 = read();
    set_values(x, v1);
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(sched, graph), WSP_GGML_STATUS_SUCCESS);
    set_values(x, v2);
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(sched, graph), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(since(c0).host_syncs, 1u);
    wsp_ggml_backend_sched_synchronize(sched);
    EXPECT_EQ(since(c0).host_syncs, 2u);
    expect(v2);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
}

TEST(CudaCounters, OtherDevicesReadZeros) {
    wsp_ggml_backend_counters c;
    std::memset(&c, 0xff, sizeof(c));
    wsp_ggml_backend_dev_get_counters(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU), &c);
    EXPECT_EQ(c.graph_computes + c.kernel_launches + c.graph_captures + c.graph_replays + c.host_syncs +
                  c.device_allocs + c.plans_built,
              0u);
    std::memset(&c, 0xff, sizeof(c));
    wsp_ggml_backend_dev_get_counters(nullptr, &c);
    EXPECT_EQ(c.host_syncs, 0u);
    wsp_ggml_backend_dev_get_counters(cuda0(), nullptr); // no crash
}

} // namespace
} // namespace wsp::test
