// Backends (streams) through the generic API on the CPU and on sim devices: identity (guid,
// name, device), their default buffer type, asynchronous transfers (really asynchronous on a
// sim stream, held by a gate to observe it; synchronous fallbacks on the CPU), synchronize,
// graph plans, graph compute with its status (including an injected kernel fault), and the
// op / buffer-type questions the scheduler asks. Devices and the registry are in
// test_backend_registry.cpp.

#include "backend_util.h"
#include "test_util.h"

#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

namespace wsp::test {
namespace {

// a + b -> out, all [n] floats, allocated in one buffer of `backend`
struct AddGraph {
    TensorSet         s;
    wsp_ggml_tensor * a;
    wsp_ggml_tensor * b;
    wsp_ggml_tensor * out;
    wsp_ggml_cgraph * graph;

    AddGraph(wsp_ggml_backend_t backend, int64_t n) {
        a     = s.f32({ n }, "a");
        b     = s.f32({ n }, "b");
        out   = wsp_ggml_add(s.ctx.get(), a, b);
        graph = wsp_ggml_new_graph(s.ctx.get());
        wsp_ggml_build_forward_expand(graph, out);
        EXPECT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(backend)));
        upload(a, filled((size_t) n, 1.0f, 1.0f));
        upload(b, filled((size_t) n, 100.0f, -2.0f));
        upload(out, std::vector<float>((size_t) n, 0.0f));
    }

    std::vector<float> expected() const {
        const size_t       n = (size_t) wsp_ggml_nelements(out);
        std::vector<float> e(n);
        for (size_t i = 0; i < n; ++i) {
            e[i] = (1.0f + (float) i) + (100.0f - 2.0f * (float) i);
        }
        return e;
    }
};

struct Backends {
    wsp_ggml_backend_ptr cpu{ wsp_ggml_backend_cpu_init() };
    wsp_ggml_backend_ptr sim0{ wsp_ggml_backend_dev_init(sim_device(0), nullptr) };
    wsp_ggml_backend_ptr sim1{ wsp_ggml_backend_dev_init(sim_device(1), nullptr) };
};

TEST(Backend, GuidsIdentifyTheKindOfBackend) {
    Backends             b;
    wsp_ggml_backend_ptr cpu2(wsp_ggml_backend_cpu_init());
    wsp_ggml_guid_t      g_cpu = wsp_ggml_backend_guid(b.cpu.get());
    ASSERT_NE(g_cpu, nullptr);
    ASSERT_NE(wsp_ggml_backend_guid(b.sim0.get()), nullptr);
    EXPECT_TRUE(wsp_ggml_guid_matches(g_cpu, wsp_ggml_backend_guid(cpu2.get())));
    EXPECT_TRUE(wsp_ggml_guid_matches(wsp_ggml_backend_guid(b.sim0.get()), wsp_ggml_backend_guid(b.sim1.get())));
    EXPECT_FALSE(wsp_ggml_guid_matches(g_cpu, wsp_ggml_backend_guid(b.sim0.get())));
    // stable: the same bytes on every call
    wsp_ggml_guid before;
    std::memcpy(before, g_cpu, sizeof(before));
    EXPECT_EQ(std::memcmp(before, wsp_ggml_backend_guid(b.cpu.get()), sizeof(before)), 0);
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(b.cpu.get()));
    EXPECT_FALSE(wsp_ggml_backend_is_cpu(b.sim0.get()));
    EXPECT_TRUE(wsp_ggml_backend_is_sim(b.sim0.get()));
    EXPECT_FALSE(wsp_ggml_backend_is_sim(b.cpu.get()));
}

TEST(Backend, NamesDevicesAndDefaultBufferTypes) {
    Backends b;
    EXPECT_STREQ(wsp_ggml_backend_name(b.cpu.get()), "CPU");
    EXPECT_STREQ(wsp_ggml_backend_name(b.sim0.get()), "SIM0");
    EXPECT_STREQ(wsp_ggml_backend_name(b.sim1.get()), "SIM1");

    EXPECT_EQ(wsp_ggml_backend_get_device(b.cpu.get()), cpu_device());
    EXPECT_EQ(wsp_ggml_backend_get_device(b.sim0.get()), sim_device(0));
    EXPECT_EQ(wsp_ggml_backend_get_device(b.sim1.get()), sim_device(1));

    EXPECT_EQ(wsp_ggml_backend_get_default_buffer_type(b.cpu.get()), wsp_ggml_backend_cpu_buffer_type());
    EXPECT_EQ(wsp_ggml_backend_get_default_buffer_type(b.sim1.get()), wsp_ggml_backend_dev_buffer_type(sim_device(1)));

    EXPECT_EQ(wsp_ggml_backend_get_alignment(b.cpu.get()), 32u);
    EXPECT_EQ(wsp_ggml_backend_get_alignment(b.sim0.get()), 64u);
    EXPECT_EQ(wsp_ggml_backend_get_max_size(b.cpu.get()), SIZE_MAX);
    EXPECT_EQ(wsp_ggml_backend_get_max_size(b.sim0.get()), API_SIM_MEMORY_MB * 1024 * 1024);
}

TEST(Backend, AllocBufferUsesTheDefaultBufferType) {
    Backends b;
    for (wsp_ggml_backend_t be : { b.cpu.get(), b.sim0.get(), b.sim1.get() }) {
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(be, 4096);
        ASSERT_NE(buf, nullptr) << wsp_ggml_backend_name(be);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_type(buf), wsp_ggml_backend_get_default_buffer_type(be));
        EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), 4096u);
        EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), wsp_ggml_backend_name(be));
        wsp_ggml_backend_buffer_free(buf);
    }
    // beyond the device's memory: refused with a message
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_alloc_buffer(b.sim0.get(), API_SIM_MEMORY_MB * 1024 * 1024 + 1), nullptr);
    EXPECT_TRUE(log.contains("maximum buffer size")) << log.text();
}

TEST(Backend, FreeDrainsTheQueuedWorkOfASimStream) {
    wsp_ggml_backend_t sim = wsp_ggml_backend_dev_init(sim_device(0), nullptr);
    ASSERT_NE(sim, nullptr);
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 64 }, "t");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(sim)));
    upload(t, std::vector<float>(64, 0.0f));
    const std::vector<float> values = filled(64, 3.0f, 0.25f);
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 5000);
    wsp_ggml_backend_tensor_set_async(sim, t, values.data(), 0, wsp_ggml_nbytes(t));
    wsp_ggml_backend_free(sim); // must drain the queue: the data is there as soon as it returns
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_EQ(download(t), values);
    wsp_ggml_backend_free(nullptr); // freeing nothing is allowed
}

// a kernel still queued when its backend is freed runs to the end with the backend's scratch
// alive: an F16 mat-mul converts its F32 operand in that scratch, grown by the first kernel that
// needs it (freed before the stream had drained, it leaked under AddressSanitizer in CI)
TEST(Backend, FreeRunsQueuedKernelsWithTheirScratchAlive) {
    wsp_ggml_backend_t sim = wsp_ggml_backend_dev_init(sim_device(0), nullptr);
    ASSERT_NE(sim, nullptr);
    constexpr int64_t K = 64, N = 3, M = 2;
    TensorSet         s;
    wsp_ggml_tensor * w   = wsp_ggml_new_tensor_2d(s.ctx.get(), WSP_GGML_TYPE_F16, K, N);
    wsp_ggml_tensor * x   = s.f32({ K, M }, "x");
    wsp_ggml_tensor * out = wsp_ggml_mul_mat(s.ctx.get(), w, x);
    wsp_ggml_cgraph * g   = wsp_ggml_new_graph(s.ctx.get());
    wsp_ggml_build_forward_expand(g, out);
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(sim)));
    // small integers: exact in F16 and in every sum, so the result is known exactly
    std::vector<float>           wf((size_t) (K * N)), xf((size_t) (K * M)), want((size_t) (N * M), 0.0f);
    std::vector<wsp_ggml_fp16_t> wh(wf.size());
    for (int64_t i = 0; i < K * N; ++i) {
        wf[(size_t) i] = (float) (i % 7 - 3);
    }
    for (int64_t i = 0; i < K * M; ++i) {
        xf[(size_t) i] = (float) (i % 5 - 2);
    }
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t k = 0; k < K; ++k) {
                want[(size_t) (m * N + n)] += wf[(size_t) (n * K + k)] * xf[(size_t) (m * K + k)];
            }
        }
    }
    wsp_ggml_fp32_to_fp16_row(wf.data(), wh.data(), K * N);
    wsp_ggml_backend_tensor_set(w, wh.data(), 0, wsp_ggml_nbytes(w));
    upload(x, xf);
    upload(out, std::vector<float>((size_t) (N * M), 0.0f));
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 5000); // the kernel starts after the free has begun
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(sim, g), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_free(sim);
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_EQ(download(out), want);
}

TEST(Backend, SimTensorSetAndGetAsyncHappenOnTheStream) {
    RacesAllowed      allow; // looks at bytes that queued work has not written yet
    Backends          b;
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 32 }, "t");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim0.get())));
    upload(t, std::vector<float>(32, -1.0f));

    const std::vector<float> values = filled(32, 0.0f, 0.5f);
    std::vector<float>       back(32, 7.0f);
    {
        StreamGate gate(b.sim0.get());
        gate.close();
        wsp_ggml_backend_tensor_set_async(b.sim0.get(), t, values.data(), 0, wsp_ggml_nbytes(t));
        wsp_ggml_backend_tensor_get_async(b.sim0.get(), t, back.data(), 0, wsp_ggml_nbytes(t));
        // held behind the gate: neither transfer can have run
        EXPECT_EQ(download(t), std::vector<float>(32, -1.0f));
        EXPECT_EQ(back, std::vector<float>(32, 7.0f));
        gate.open();
        wsp_ggml_backend_synchronize(b.sim0.get());
        EXPECT_TRUE(gate.reached());
    }
    EXPECT_EQ(download(t), values);
    EXPECT_EQ(back, values); // the get ran after the set, in stream order

    // part of a tensor, at an offset
    std::vector<float> part(4, 0.0f);
    wsp_ggml_backend_tensor_get_async(b.sim0.get(), t, part.data(), 8 * sizeof(float), sizeof(float) * 4);
    wsp_ggml_backend_synchronize(b.sim0.get());
    EXPECT_EQ(part, std::vector<float>({ 4.0f, 4.5f, 5.0f, 5.5f }));
}

TEST(Backend, AsyncTransfersOutOfRangeAreRefused) {
    Backends          b;
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 8 }, "t");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim0.get())));
    upload(t, std::vector<float>(8, 1.0f));
    std::vector<float> v(16, 5.0f);
    LogCapture         log;
    wsp_ggml_backend_tensor_set_async(b.sim0.get(), t, v.data(), 4, 32);
    wsp_ggml_backend_tensor_get_async(b.sim0.get(), t, v.data(), 0, 36);
    wsp_ggml_backend_synchronize(b.sim0.get());
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 2) << log.text();
    EXPECT_TRUE(log.contains("out of the bounds")) << log.text();
    EXPECT_EQ(download(t), std::vector<float>(8, 1.0f));
    EXPECT_EQ(v, std::vector<float>(16, 5.0f));
}

TEST(Backend, CpuAsyncTransfersAreSynchronous) {
    Backends          b;
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 16 }, "t");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(b.cpu.get())));
    std::vector<float> values = filled(16, 2.0f, 2.0f);
    wsp_ggml_backend_tensor_set_async(b.cpu.get(), t, values.data(), 0, wsp_ggml_nbytes(t));
    values.assign(16, 0.0f); // done already: the source may change before any synchronize
    EXPECT_EQ(download(t), filled(16, 2.0f, 2.0f));
    std::vector<float> back(16, 0.0f);
    wsp_ggml_backend_tensor_get_async(b.cpu.get(), t, back.data(), 0, wsp_ggml_nbytes(t));
    EXPECT_EQ(back, filled(16, 2.0f, 2.0f));
    wsp_ggml_backend_synchronize(b.cpu.get()); // nothing queued: returns at once
}

TEST(Backend, TensorCopyAsyncSimToSimRunsAfterTheSourceStream) {
    RacesAllowed      allow; // looks at bytes that queued work has not written yet
    Backends          b;
    TensorSet         s0, s1;
    wsp_ggml_tensor * src = s0.f32({ 24 }, "src");
    wsp_ggml_tensor * dst = s1.f32({ 24 }, "dst");
    ASSERT_TRUE(s0.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim0.get())));
    ASSERT_TRUE(s1.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim1.get())));
    const std::vector<float> values = random_values(24, 11);
    upload(src, values);
    upload(dst, std::vector<float>(24, 0.0f));
    std::vector<float> seen_by_sim1(24, -5.0f);
    {
        StreamGate gate(b.sim0.get());
        gate.close();
        wsp_ggml_backend_tensor_copy_async(b.sim0.get(), b.sim1.get(), src, dst);
        // work queued on SIM1 after the copy waits for it
        wsp_ggml_backend_tensor_get_async(b.sim1.get(), dst, seen_by_sim1.data(), 0, wsp_ggml_nbytes(dst));
        EXPECT_EQ(download(dst), std::vector<float>(24, 0.0f)) << "the copy ran before the source stream's work";
        gate.open();
        wsp_ggml_backend_synchronize(b.sim1.get());
    }
    EXPECT_EQ(seen_by_sim1, values);
    EXPECT_EQ(download(dst), values);
}

TEST(Backend, TensorCopyAsyncFromTheCpuFallsBackToASynchronousCopy) {
    Backends          b;
    TensorSet         sc, ss;
    wsp_ggml_tensor * src = sc.f32({ 16 }, "src");
    wsp_ggml_tensor * dst = ss.f32({ 16 }, "dst");
    ASSERT_TRUE(sc.alloc(wsp_ggml_backend_get_default_buffer_type(b.cpu.get())));
    ASSERT_TRUE(ss.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim0.get())));
    upload(src, filled(16, 1.0f, 3.0f));
    // earlier work queued on the destination stream finishes first, then the copy overwrites it
    const std::vector<float> earlier(16, 9.0f);
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 2000);
    wsp_ggml_backend_tensor_set_async(b.sim0.get(), dst, earlier.data(), 0, wsp_ggml_nbytes(dst));
    wsp_ggml_backend_tensor_copy_async(b.cpu.get(), b.sim0.get(), src, dst);
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_EQ(download(dst), filled(16, 1.0f, 3.0f)); // complete on return, no synchronize needed

    // and back: sim -> CPU
    TensorSet         sc2;
    wsp_ggml_tensor * back = sc2.f32({ 16 }, "back");
    ASSERT_TRUE(sc2.alloc(wsp_ggml_backend_get_default_buffer_type(b.cpu.get())));
    wsp_ggml_backend_tensor_copy_async(b.sim0.get(), b.cpu.get(), dst, back);
    EXPECT_EQ(download(back), filled(16, 1.0f, 3.0f));
}

TEST(Backend, SynchronizeWaitsForQueuedWorkAndReportsFailures) {
    Backends          b;
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 8 }, "t");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(b.sim1.get())));
    upload(t, std::vector<float>(8, 0.0f));
    const std::vector<float> values = filled(8, 1.0f, 1.0f);
    const int                delay  = 10000;
    wsp_ggml_backend_sim_set_delay_us(sim_device(1), delay);
    const auto start = std::chrono::steady_clock::now();
    wsp_ggml_backend_tensor_set_async(b.sim1.get(), t, values.data(), 0, wsp_ggml_nbytes(t));
    wsp_ggml_backend_synchronize(b.sim1.get());
    const auto waited = std::chrono::steady_clock::now() - start;
    wsp_ggml_backend_sim_set_delay_us(sim_device(1), 0);
    EXPECT_GE(waited, std::chrono::microseconds(delay));
    EXPECT_EQ(download(t), values);

    // a failed asynchronous command is reported by the next synchronize, once
    const std::vector<float> other(8, 4.0f);
    wsp_ggml_backend_sim_inject_fault(sim_device(1), WSP_GGML_SIM_FAULT_COPY);
    wsp_ggml_backend_tensor_set_async(b.sim1.get(), t, other.data(), 0, wsp_ggml_nbytes(t));
    LogCapture log;
    wsp_ggml_backend_synchronize(b.sim1.get());
    EXPECT_TRUE(log.contains("injected copy fault")) << log.text();
    EXPECT_EQ(download(t), values);
    log.clear();
    wsp_ggml_backend_synchronize(b.sim1.get());
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
}

TEST(Backend, GraphPlansOnTheCpu) {
    Backends                      b;
    AddGraph                      g(b.cpu.get(), 37);
    wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(b.cpu.get(), g.graph);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(wsp_ggml_backend_graph_plan_compute(b.cpu.get(), plan), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(g.out), g.expected());
    // the plan computes the graph's current inputs each time
    upload(g.a, std::vector<float>(37, 0.0f));
    EXPECT_EQ(wsp_ggml_backend_graph_plan_compute(b.cpu.get(), plan), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(g.out), filled(37, 100.0f, -2.0f));
    wsp_ggml_backend_graph_plan_free(b.cpu.get(), plan);
}

TEST(Backend, GraphPlansAreRefusedOnASimBackend) {
    Backends   b;
    AddGraph   g(b.sim0.get(), 5);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_graph_plan_create(b.sim0.get(), g.graph), nullptr);
    EXPECT_TRUE(log.contains("has no graph plans")) << log.text();
    log.clear();
    EXPECT_EQ(wsp_ggml_backend_graph_plan_compute(b.sim0.get(), nullptr), WSP_GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("has no graph plans")) << log.text();
    wsp_ggml_backend_graph_plan_free(b.sim0.get(), nullptr); // nothing to free
}

TEST(Backend, GraphComputeReturnsTheStatus) {
    Backends b;
    for (wsp_ggml_backend_t be : { b.cpu.get(), b.sim0.get(), b.sim1.get() }) {
        AddGraph g(be, 100);
        EXPECT_EQ(wsp_ggml_backend_graph_compute(be, g.graph), WSP_GGML_STATUS_SUCCESS) << wsp_ggml_backend_name(be);
        EXPECT_EQ(download(g.out), g.expected()) << wsp_ggml_backend_name(be);
    }
    // an injected kernel fault fails the compute, once
    AddGraph   g(b.sim1.get(), 10);
    LogCapture log;
    wsp_ggml_backend_sim_inject_fault(sim_device(1), WSP_GGML_SIM_FAULT_KERNEL);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(b.sim1.get(), g.graph), WSP_GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("injected kernel fault")) << log.text();
    EXPECT_EQ(download(g.out), std::vector<float>(10, 0.0f));
    EXPECT_EQ(wsp_ggml_backend_graph_compute(b.sim1.get(), g.graph), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(g.out), g.expected());
}

TEST(Backend, GraphComputeAsyncReturnsBeforeTheWorkIsDone) {
    RacesAllowed allow; // looks at bytes that queued work has not written yet
    Backends     b;
    AddGraph     g(b.sim0.get(), 50);
    {
        StreamGate gate(b.sim0.get());
        gate.close();
        EXPECT_EQ(wsp_ggml_backend_graph_compute_async(b.sim0.get(), g.graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(download(g.out), std::vector<float>(50, 0.0f));
        gate.open();
        wsp_ggml_backend_synchronize(b.sim0.get());
    }
    EXPECT_EQ(download(g.out), g.expected());

    // a kernel fault in asynchronous work surfaces at the next synchronize
    upload(g.out, std::vector<float>(50, 0.0f));
    wsp_ggml_backend_sim_inject_fault(sim_device(0), WSP_GGML_SIM_FAULT_KERNEL);
    EXPECT_EQ(wsp_ggml_backend_graph_compute_async(b.sim0.get(), g.graph), WSP_GGML_STATUS_SUCCESS);
    LogCapture log;
    wsp_ggml_backend_synchronize(b.sim0.get());
    EXPECT_TRUE(log.contains("injected kernel fault")) << log.text();
    EXPECT_EQ(download(g.out), std::vector<float>(50, 0.0f));

    // the CPU computes synchronously through the same call
    AddGraph c(b.cpu.get(), 9);
    EXPECT_EQ(wsp_ggml_backend_graph_compute_async(b.cpu.get(), c.graph), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(c.out), c.expected());
}

TEST(Backend, SupportsOpFollowsTheDevice) {
    Backends b;
    AddGraph g(b.sim0.get(), 4);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(b.sim0.get(), g.out));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(b.sim1.get(), g.out));
    wsp_ggml_backend_sim_set_op_supported(sim_device(0), WSP_GGML_OP_ADD, false);
    EXPECT_FALSE(wsp_ggml_backend_supports_op(b.sim0.get(), g.out));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(b.sim1.get(), g.out)) << "only SIM0 refuses ADD";
    wsp_ggml_backend_sim_set_op_supported(sim_device(0), WSP_GGML_OP_ADD, true);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(b.sim0.get(), g.out));
    // the CPU cannot read the sources of this add: they live in SIM0's memory
    EXPECT_FALSE(wsp_ggml_backend_supports_op(b.cpu.get(), g.out));
    AddGraph h(b.cpu.get(), 4);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(b.cpu.get(), h.out));
}

TEST(Backend, SupportsBuftOnlyForMemoryItCanUse) {
    Backends                       b;
    wsp_ggml_backend_buffer_type_t cpu  = wsp_ggml_backend_cpu_buffer_type();
    wsp_ggml_backend_buffer_type_t sim0 = wsp_ggml_backend_dev_buffer_type(sim_device(0));
    wsp_ggml_backend_buffer_type_t sim1 = wsp_ggml_backend_dev_buffer_type(sim_device(1));
    EXPECT_TRUE(wsp_ggml_backend_supports_buft(b.cpu.get(), cpu));
    EXPECT_FALSE(wsp_ggml_backend_supports_buft(b.cpu.get(), sim0));
    EXPECT_TRUE(wsp_ggml_backend_supports_buft(b.sim0.get(), sim0));
    EXPECT_FALSE(wsp_ggml_backend_supports_buft(b.sim0.get(), sim1));
    EXPECT_FALSE(wsp_ggml_backend_supports_buft(b.sim0.get(), cpu));
    EXPECT_TRUE(wsp_ggml_backend_supports_buft(b.sim1.get(), sim1));
}

TEST(Backend, OffloadOpAsksForLargeBatchesOnly) {
    Backends          b;
    TensorSet         s;
    wsp_ggml_tensor * w     = s.f32({ 64, 16 }, "w");
    wsp_ggml_tensor * big   = wsp_ggml_mul_mat(s.ctx.get(), w, s.f32({ 64, 32 }, "x32"));
    wsp_ggml_tensor * small = wsp_ggml_mul_mat(s.ctx.get(), w, s.f32({ 64, 8 }, "x8"));
    wsp_ggml_tensor * add   = wsp_ggml_add(s.ctx.get(), w, w);
    EXPECT_TRUE(wsp_ggml_backend_offload_op(b.sim0.get(), big));
    EXPECT_FALSE(wsp_ggml_backend_offload_op(b.sim0.get(), small));
    EXPECT_FALSE(wsp_ggml_backend_offload_op(b.sim0.get(), add));
    EXPECT_FALSE(wsp_ggml_backend_offload_op(b.cpu.get(), big)) << "the CPU has no offload_op";
}

} // namespace
} // namespace wsp::test
