// Counters of what a device was asked to do (ggml-counters.h, Note [counters]) on the sims (Note
// [sim counters]) and the all-GPU device over two sims (Note [all-GPU counters]): every figure is
// checked against what the test itself asked, exactly. Every case registers the same two sims, so
// the suite runs in one process as well as one process per case (ctest).

#include "sim_util.h"
#include "test_util.h"

#include "ggml-all-gpu.h"
#include "ggml-backend-impl.h"
#include "ggml-counters.h"

#include "race/race.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace wsp::test {
namespace {

constexpr int N_SIMS = 2;

wsp_ggml_backend_dev_t sim(int i) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_sim_register(N_SIMS, 256);
    return reg ? wsp_ggml_backend_reg_dev_get(reg, (size_t) i) : nullptr;
}

wsp_ggml_backend_counters read(wsp_ggml_backend_dev_t dev) {
    wsp_ggml_backend_counters c;
    std::memset(&c, 0xAB, sizeof(c)); // what the call does not write shows
    wsp_ggml_backend_dev_get_counters(dev, &c);
    return c;
}

// what was counted from a to b
struct Diff {
    uint64_t graph_computes, kernel_launches, graph_captures, graph_replays, host_syncs, device_allocs, plans_built;
};

Diff since(const wsp_ggml_backend_counters & a, const wsp_ggml_backend_counters & b) {
    return { b.graph_computes - a.graph_computes, b.kernel_launches - a.kernel_launches,
             b.graph_captures - a.graph_captures, b.graph_replays - a.graph_replays,
             b.host_syncs - a.host_syncs,         b.device_allocs - a.device_allocs,
             b.plans_built - a.plans_built };
}

Diff since(wsp_ggml_backend_dev_t dev, const wsp_ggml_backend_counters & a) {
    return since(a, read(dev));
}

bool operator==(const Diff & a, const Diff & b) {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
}

std::ostream & operator<<(std::ostream & os, const Diff & d) {
    return os << "{computes " << d.graph_computes << ", kernels " << d.kernel_launches << ", captures "
              << d.graph_captures << ", replays " << d.graph_replays << ", host syncs " << d.host_syncs << ", allocs "
              << d.device_allocs << ", plans " << d.plans_built << "}";
}

// counts the kernels a sim device runs (its kernel hook), from the stream thread
struct KernelCount {
    wsp_ggml_backend_dev_t dev;
    std::atomic<int>       n{ 0 };
    explicit KernelCount(wsp_ggml_backend_dev_t d) : dev(d) {
        wsp_ggml_backend_sim_set_kernel_hook(
            dev, [](const wsp_ggml_tensor *, void * n) { ++*static_cast<std::atomic<int> *>(n); }, &n);
    }
    ~KernelCount() { wsp_ggml_backend_sim_set_kernel_hook(dev, nullptr, nullptr); }
};

// a graph of KERNELS kernels in one buffer of a device: add, mul, scale; a reshape and a view
// (no-op nodes, no kernels) and an empty add (nothing to compute) among them
struct KernelGraph {
    static constexpr int      KERNELS = 3;
    wsp_ggml_context *        ctx     = nullptr;
    wsp_ggml_backend_buffer_t buf     = nullptr;
    wsp_ggml_tensor *         a = nullptr, *b = nullptr, *out = nullptr;
    wsp_ggml_cgraph *         g = nullptr;

    explicit KernelGraph(wsp_ggml_backend_buffer_type_t buft) {
        ctx = wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
        a   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 16);
        b   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 16);
        wsp_ggml_tensor * e0    = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 0);
        wsp_ggml_tensor * e1    = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 0);
        wsp_ggml_tensor * m     = wsp_ggml_mul(ctx, wsp_ggml_add(ctx, a, b), b);
        wsp_ggml_tensor * s     = wsp_ggml_scale(ctx, wsp_ggml_reshape_2d(ctx, m, 4, 4), 2.0f);
        out                     = wsp_ggml_view_1d(ctx, s, 8, 0);
        wsp_ggml_tensor * empty = wsp_ggml_add(ctx, e0, e1);
        g                       = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        wsp_ggml_build_forward_expand(g, empty);
        buf                         = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
        const std::vector<float> va = random_values(16, 1), vb = random_values(16, 2);
        wsp_ggml_backend_tensor_set(a, va.data(), 0, sizeof(float) * 16);
        wsp_ggml_backend_tensor_set(b, vb.data(), 0, sizeof(float) * 16);
    }
    ~KernelGraph() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

TEST(SimCounters, TheCpuAndNoDeviceReadZeros) {
    ASSERT_NE(sim(0), nullptr);
    wsp_ggml_backend_dev_t cpu = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    ASSERT_NE(cpu, nullptr);
    // work on the CPU, so that zeros are not merely nothing done yet
    wsp_ggml_backend_t cpu_backend = wsp_ggml_backend_dev_init(cpu, nullptr);
    {
        KernelGraph kg(wsp_ggml_backend_dev_buffer_type(cpu));
        EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu_backend, kg.g), WSP_GGML_STATUS_SUCCESS);
    }
    wsp_ggml_backend_free(cpu_backend);
    const Diff zero{};
    EXPECT_EQ(since({}, read(cpu)), zero);
    EXPECT_EQ(since({}, read(nullptr)), zero);
    wsp_ggml_backend_dev_get_counters(sim(0), nullptr); // nowhere to write: nothing happens
}

TEST(SimCounters, AllocationsCountWhatTheArenaIsAskedFor) {
    wsp_ggml_backend_dev_t         dev  = sim(0);
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(dev);
    ASSERT_NE(dev, nullptr);
    auto                      c0 = read(dev);
    wsp_ggml_backend_buffer_t b  = wsp_ggml_backend_buft_alloc_buffer(buft, 1000);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(since(dev, c0), (Diff{ 0, 0, 0, 0, 0, 1, 0 }));
    wsp_ggml_backend_buffer_free(b); // freeing asks nothing of the device's allocator count
    EXPECT_EQ(since(dev, c0), (Diff{ 0, 0, 0, 0, 0, 1, 0 }));

    // an empty buffer asks for no memory; a buffer of the whole arena does not fit beside a small
    // one, but the arena was asked; an injected fault refuses before it is asked
    auto c1 = read(dev);
    b       = wsp_ggml_backend_buft_alloc_buffer(buft, 0);
    wsp_ggml_backend_buffer_free(b);
    EXPECT_EQ(since(dev, c1).device_allocs, 0u);
    wsp_ggml_backend_buffer_t small = wsp_ggml_backend_buft_alloc_buffer(buft, 1000);
    ASSERT_NE(small, nullptr);
    {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_buft_alloc_buffer(buft, wsp_ggml_backend_buft_get_max_size(buft)), nullptr);
        EXPECT_NE(log.text().find("out of memory"), std::string::npos) << log.text();
        wsp_ggml_backend_sim_inject_fault(dev, WSP_GGML_SIM_FAULT_ALLOC);
        EXPECT_EQ(wsp_ggml_backend_buft_alloc_buffer(buft, 1000), nullptr);
    }
    wsp_ggml_backend_buffer_free(small);
    EXPECT_EQ(since(dev, c1), (Diff{ 0, 0, 0, 0, 0, 2, 0 }));
}

TEST(SimCounters, AGraphOfKKernelsIsOneComputeAndKLaunches) {
    wsp_ggml_backend_dev_t dev = sim(0);
    ASSERT_NE(dev, nullptr);
    ForeignAccessGuard guard;
    KernelGraph        kg(wsp_ggml_backend_dev_buffer_type(dev));
    ASSERT_EQ(wsp_ggml_graph_n_nodes(kg.g), 6) << "add, mul, reshape, scale, view, empty add";
    wsp_ggml_backend_t backend = wsp_ggml_backend_dev_init(dev, nullptr);
    KernelCount        ran(dev);

    // queued: counted at once, as a launch is; no wait
    auto c0 = read(dev);
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend, kg.g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(since(dev, c0), (Diff{ 1, KernelGraph::KERNELS, 0, 0, 0, 0, 0 }));
    wsp_ggml_backend_synchronize(backend);
    EXPECT_EQ(since(dev, c0), (Diff{ 1, KernelGraph::KERNELS, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(ran.n.load(), KernelGraph::KERNELS) << "the kernels the stream ran are the ones counted";

    // the synchronous compute: the same, and its wait
    auto c1 = read(dev);
    ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, kg.g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(since(dev, c1), (Diff{ 1, KernelGraph::KERNELS, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(ran.n.load(), 2 * KernelGraph::KERNELS);

    // freeing the backend drains its stream: a wait
    auto c2 = read(dev);
    wsp_ggml_backend_free(backend);
    EXPECT_EQ(since(dev, c2), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
}

TEST(SimCounters, SynchronizeAndEventSynchronizeWaitOnceEach) {
    wsp_ggml_backend_dev_t d0 = sim(0), d1 = sim(1);
    ASSERT_NE(d1, nullptr);
    wsp_ggml_backend_t b0 = wsp_ggml_backend_dev_init(d0, nullptr);
    wsp_ggml_backend_t b1 = wsp_ggml_backend_dev_init(d1, nullptr);

    auto c0 = read(d0), c1 = read(d1);
    wsp_ggml_backend_synchronize(b0);
    wsp_ggml_backend_synchronize(b0);
    EXPECT_EQ(since(d0, c0), (Diff{ 0, 0, 0, 0, 2, 0, 0 }));

    // an event of SIM0: recorded, waited for by SIM1's stream (no host wait), then by the host
    wsp_ggml_backend_event_t e = wsp_ggml_backend_event_new(d0);
    ASSERT_NE(e, nullptr);
    c0 = read(d0);
    wsp_ggml_backend_event_record(e, b0);
    wsp_ggml_backend_event_wait(b1, e);
    EXPECT_EQ(since(d0, c0), Diff{});
    EXPECT_EQ(since(d1, c1), Diff{});
    wsp_ggml_backend_event_synchronize(e);
    EXPECT_EQ(since(d0, c0), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(since(d1, c1), Diff{}) << "the host waited for SIM0, not SIM1";
    wsp_ggml_backend_event_free(e);

    wsp_ggml_backend_free(b1);
    wsp_ggml_backend_free(b0);
}

// an event of a device that is not a sim: a sim stream cannot wait for it, the host does, in the
// sim backend's event_wait
TEST(SimCounters, WaitingForAnotherKindOfEventIsAHostWait) {
    wsp_ggml_backend_dev_t dev = sim(0);
    ASSERT_NE(dev, nullptr);
    static std::atomic<int> host_waits;
    host_waits = 0;
    wsp_ggml_backend_device other{};
    other.iface.event_synchronize = [](wsp_ggml_backend_dev_t, wsp_ggml_backend_event_t) { ++host_waits; };
    wsp_ggml_backend_event foreign{ &other, nullptr };
    wsp_ggml_backend_t     b = wsp_ggml_backend_dev_init(dev, nullptr);

    auto c0 = read(dev);
    wsp_ggml_backend_event_wait(b, &foreign);
    EXPECT_EQ(host_waits.load(), 1);
    EXPECT_EQ(since(dev, c0), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
    wsp_ggml_backend_free(b);
}

// a sim's synchronous buffer calls move the bytes at once, without waiting for its streams: they
// count nothing; asynchronous ones are queued and count nothing either until a synchronize
TEST(SimCounters, TensorSetGetWaitForNothing) {
    wsp_ggml_backend_dev_t d0 = sim(0), d1 = sim(1);
    ASSERT_NE(d1, nullptr);
    ForeignAccessGuard guard;
    KernelGraph        on0(wsp_ggml_backend_dev_buffer_type(d0)), on1(wsp_ggml_backend_dev_buffer_type(d1));
    wsp_ggml_backend_t b0 = wsp_ggml_backend_dev_init(d0, nullptr);
    std::vector<float> v(16, 1.5f), back(16);

    auto c0 = read(d0), c1 = read(d1);
    wsp_ggml_backend_tensor_set(on0.a, v.data(), 0, sizeof(float) * 16);
    wsp_ggml_backend_tensor_get(on0.a, back.data(), 0, sizeof(float) * 16);
    wsp_ggml_backend_tensor_memset(on0.b, 0, 0, sizeof(float) * 16);
    wsp_ggml_backend_tensor_copy(on0.a, on1.a); // SIM0 -> SIM1
    wsp_ggml_backend_buffer_clear(on0.buf, 0);
    EXPECT_EQ(back, v);
    EXPECT_EQ(since(d0, c0), Diff{});
    EXPECT_EQ(since(d1, c1), Diff{});

    wsp_ggml_backend_tensor_set_async(b0, on0.a, v.data(), 0, sizeof(float) * 16);
    wsp_ggml_backend_tensor_get_async(b0, on0.a, back.data(), 0, sizeof(float) * 16);
    EXPECT_EQ(since(d0, c0), Diff{});
    wsp_ggml_backend_synchronize(b0);
    EXPECT_EQ(since(d0, c0), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(since(d1, c1), Diff{});
    wsp_ggml_backend_free(b0);
}

TEST(SimCounters, TwoDevicesCountApart) {
    wsp_ggml_backend_dev_t d0 = sim(0), d1 = sim(1);
    ASSERT_NE(d1, nullptr);
    ForeignAccessGuard guard;
    auto               c0 = read(d0), c1 = read(d1);
    {
        KernelGraph        on0(wsp_ggml_backend_dev_buffer_type(d0));
        KernelGraph        on1(wsp_ggml_backend_dev_buffer_type(d1));
        wsp_ggml_backend_t b0 = wsp_ggml_backend_dev_init(d0, nullptr);
        wsp_ggml_backend_t b1 = wsp_ggml_backend_dev_init(d1, nullptr);
        for (int i = 0; i < 3; ++i) {
            ASSERT_EQ(wsp_ggml_backend_graph_compute_async(b0, on0.g), WSP_GGML_STATUS_SUCCESS);
        }
        ASSERT_EQ(wsp_ggml_backend_graph_compute(b1, on1.g), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_free(b0); // its wait
        wsp_ggml_backend_free(b1);
    }
    // SIM0: a buffer, three computes, the free's wait; SIM1: a buffer, one compute, its wait and the free's
    EXPECT_EQ(since(d0, c0), (Diff{ 3, 3 * KernelGraph::KERNELS, 0, 0, 1, 1, 0 }));
    EXPECT_EQ(since(d1, c1), (Diff{ 1, KernelGraph::KERNELS, 0, 0, 2, 1, 0 }));
}

// two threads at once on one device, each with its own stream: no count is lost
TEST(SimCounters, ConcurrentUseAddsUpExactly) {
    wsp_ggml_backend_dev_t dev = sim(0);
    ASSERT_NE(dev, nullptr);
    ForeignAccessGuard guard;
    constexpr int      RUNS = 50;
    const auto         c0   = read(dev);
    std::thread        threads[2];
    for (std::thread & t : threads) {
        t = std::thread([dev] {
            KernelGraph        kg(wsp_ggml_backend_dev_buffer_type(dev));
            wsp_ggml_backend_t b = wsp_ggml_backend_dev_init(dev, nullptr);
            for (int i = 0; i < RUNS; ++i) {
                (void) wsp_ggml_backend_graph_compute_async(b, kg.g);
                wsp_ggml_backend_synchronize(b);
                wsp_ggml_backend_event_t e = wsp_ggml_backend_event_new(dev);
                wsp_ggml_backend_event_record(e, b);
                wsp_ggml_backend_event_synchronize(e);
                wsp_ggml_backend_event_free(e);
            }
            wsp_ggml_backend_free(b);
        });
    }
    for (std::thread & t : threads) {
        t.join();
    }
    // per thread: a buffer, RUNS computes, two waits per run and the free's
    EXPECT_EQ(since(dev, c0), (Diff{ 2 * RUNS, 2 * RUNS * KernelGraph::KERNELS, 0, 0, 2 * (2 * RUNS + 1), 2, 0 }));
}

//
// the all-GPU device over the two sims
//

wsp_ggml_backend_dev_t all_device() {
    return sim(0) != nullptr ? wsp_ggml_backend_dev_by_name("SIM_All") : nullptr;
}

// the members' counters, added up (their graph computes and plans left out: the device counts
// its own)
Diff members_since(wsp_ggml_backend_dev_t all, const std::vector<wsp_ggml_backend_counters> & was) {
    Diff sum{};
    for (size_t m = 0; m < was.size(); ++m) {
        const Diff d = since(wsp_ggml_backend_all_gpu_member(all, m), was[m]);
        sum.kernel_launches += d.kernel_launches;
        sum.graph_captures += d.graph_captures;
        sum.graph_replays += d.graph_replays;
        sum.host_syncs += d.host_syncs;
        sum.device_allocs += d.device_allocs;
    }
    return sum;
}

std::vector<wsp_ggml_backend_counters> read_members(wsp_ggml_backend_dev_t all) {
    std::vector<wsp_ggml_backend_counters> c;
    for (size_t m = 0; m < wsp_ggml_backend_all_gpu_member_count(all); ++m) {
        c.push_back(read(wsp_ggml_backend_all_gpu_member(all, m)));
    }
    return c;
}

// d's member fields, with its own graph computes and plans
Diff with_own(Diff d, uint64_t computes, uint64_t plans) {
    d.graph_computes = computes;
    d.plans_built    = plans;
    return d;
}

// a mat-mul weight, whole in the all-GPU device's buffer type, as a client's weights are
struct Weight {
    static constexpr int64_t  K = 32, N = 24;
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;
    wsp_ggml_tensor *         w   = nullptr;

    explicit Weight(wsp_ggml_backend_dev_t all) {
        ctx = wsp_ggml_init({ 2 * wsp_ggml_tensor_overhead(), nullptr, true });
        w   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, N);
        wsp_ggml_set_name(w, "weight");
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_dev_buffer_type(all));
        wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        const std::vector<float> v = random_values((size_t) (K * N), 5);
        wsp_ggml_backend_tensor_set(w, v.data(), 0, v.size() * sizeof(float));
    }
    ~Weight() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

// out = W x on the all-GPU device: its rows spread over the members (tensor parallelism)
struct MatMul {
    static constexpr int64_t  T   = 5;
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;
    wsp_ggml_tensor *         x = nullptr, *out = nullptr;
    wsp_ggml_cgraph *         g = nullptr;

    MatMul(wsp_ggml_backend_dev_t all, const Weight & w) {
        ctx = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
        x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, Weight::K, T);
        wsp_ggml_set_name(x, "x");
        wsp_ggml_set_input(x);
        out = wsp_ggml_mul_mat(ctx, w.w, x);
        wsp_ggml_set_name(out, "out");
        wsp_ggml_set_output(out);
        g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_dev_buffer_type(all));
        const std::vector<float> v = random_values((size_t) (Weight::K * T), 6);
        wsp_ggml_backend_tensor_set(x, v.data(), 0, v.size() * sizeof(float));
    }
    ~MatMul() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

TEST(AllGpuCounters, AComputeIsItsOwnAndItsMembersWorkShowsInIt) {
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    const size_t n = wsp_ggml_backend_all_gpu_member_count(all);
    ASSERT_EQ(n, (size_t) N_SIMS);
    ForeignAccessGuard guard;

    // a buffer of its type is one of its main member's
    auto   a0 = read(all);
    auto   m0 = read_members(all);
    Weight w(all);
    EXPECT_EQ(since(all, a0), with_own(members_since(all, m0), 0, 0));
    EXPECT_EQ(since(all, a0).device_allocs, 1u);

    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    MatMul mm(all, w);

    // the first compute: one plan, one graph per member; the members compute their rows, and the
    // main member's memory gets the result
    a0 = read(all);
    m0 = read_members(all);
    std::vector<std::unique_ptr<KernelCount>> ran;
    for (size_t m = 0; m < n; ++m) {
        ran.push_back(std::make_unique<KernelCount>(wsp_ggml_backend_all_gpu_member(all, m)));
    }
    const auto tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
    ASSERT_EQ(wsp_ggml_backend_graph_compute(gpu, mm.g), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_backend_all_gpu_get_traffic(all).n_graphs, tp0.n_graphs + 1) << "ran tensor-parallel";
    const Diff first = since(all, a0);
    EXPECT_EQ(first, with_own(members_since(all, m0), 1, 1 + n)) << first;
    int kernels = 0;
    for (size_t m = 0; m < n; ++m) {
        EXPECT_GT(ran[m]->n.load(), 0) << "member " << m << " computed its rows";
        kernels += ran[m]->n.load();
    }
    EXPECT_EQ(first.kernel_launches, (uint64_t) kernels);
    EXPECT_GE(first.host_syncs, n) << "the compute waits for every member";
    for (size_t m = 0; m < n; ++m) {
        const Diff member = since(wsp_ggml_backend_all_gpu_member(all, m), m0[m]);
        EXPECT_GE(member.graph_computes, 1u) << "member " << m << "'s own computes are its, not the device's";
    }

    // the result is W x
    std::vector<float> wv(Weight::K * Weight::N), xv(Weight::K * MatMul::T), out(Weight::N * MatMul::T);
    wsp_ggml_backend_tensor_get(w.w, wv.data(), 0, wv.size() * sizeof(float));
    wsp_ggml_backend_tensor_get(mm.x, xv.data(), 0, xv.size() * sizeof(float));
    wsp_ggml_backend_tensor_get(mm.out, out.data(), 0, out.size() * sizeof(float));
    std::vector<double> ref(out.size(), 0.0);
    for (int64_t t = 0; t < MatMul::T; ++t) {
        for (int64_t r = 0; r < Weight::N; ++r) {
            for (int64_t k = 0; k < Weight::K; ++k) {
                ref[(size_t) (t * Weight::N + r)] +=
                    (double) wv[(size_t) (r * Weight::K + k)] * xv[(size_t) (t * Weight::K + k)];
            }
        }
    }
    EXPECT_LT(nmse(out, ref), 1e-10);

    // the same graph again, and again: the runner runs what it built (Note [kept member graphs]):
    // no plan, no member graph, no allocation, the same kernels, and one host wait, as on one
    // device: the compute's synchronize waits for the main member, which the others joined
    // (Note [joined members])
    for (int run = 0; run < 3; ++run) {
        a0 = read(all);
        m0 = read_members(all);
        ASSERT_EQ(wsp_ggml_backend_graph_compute(gpu, mm.g), WSP_GGML_STATUS_SUCCESS);
        const Diff again = since(all, a0);
        EXPECT_EQ(again, with_own(members_since(all, m0), 1, 0)) << again;
        EXPECT_EQ(again.kernel_launches, first.kernel_launches);
        EXPECT_EQ(again.device_allocs, 0u) << again;
        EXPECT_EQ(again.host_syncs, 1u) << again;
        std::vector<float> out_again(out.size());
        wsp_ggml_backend_tensor_get(mm.out, out_again.data(), 0, out_again.size() * sizeof(float));
        EXPECT_EQ(out_again, out) << "the kept build computes the same bits";
    }

    // after a run, a synchronize is one wait: the main member's
    a0 = read(all);
    m0 = read_members(all);
    wsp_ggml_backend_synchronize(gpu);
    EXPECT_EQ(since(all, a0), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(members_since(all, m0), (Diff{ 0, 0, 0, 0, 1, 0, 0 }));
    EXPECT_EQ(since(wsp_ggml_backend_all_gpu_member(all, 0), m0[0]).host_syncs, 1u);
    ran.clear();
    // freeing the backend waits for the members (its scheduler's, and each member's stream drains)
    a0 = read(all);
    m0 = read_members(all);
    wsp_ggml_backend_free(gpu);
    const Diff freed = since(all, a0);
    EXPECT_EQ(freed, members_since(all, m0)) << freed;
    EXPECT_GE(freed.host_syncs, n);
}

// a graph without a mat-mul to spread runs by the row split's plan (Note [row split plan]): every
// node on the main member, whose memory holds every tensor; planned once (the plan and a member
// graph per member), then its build is kept: the second run plans nothing
TEST(AllGpuCounters, AGraphWithoutAMatMulRunsOnTheMainMemberPlannedOnce) {
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    ForeignAccessGuard guard;
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    wsp_ggml_backend_dev_t main_member = wsp_ggml_backend_all_gpu_member(all, 0);
    KernelGraph            kg(wsp_ggml_backend_dev_buffer_type(all));
    KernelCount            ran(main_member);
    const auto             tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
    for (int run = 0; run < 2; ++run) {
        const auto a0 = read(all);
        const auto m0 = read_members(all);
        const auto k0 = ran.n.load();
        ASSERT_EQ(wsp_ggml_backend_graph_compute(gpu, kg.g), WSP_GGML_STATUS_SUCCESS);
        const Diff     d     = since(all, a0);
        const uint64_t plans = run == 0 ? 1 + wsp_ggml_backend_all_gpu_member_count(all) : 0;
        EXPECT_EQ(d, with_own(members_since(all, m0), 1, plans)) << d;
        EXPECT_EQ(d.device_allocs, 0u);
        EXPECT_EQ(d.kernel_launches, (uint64_t) KernelGraph::KERNELS);
        EXPECT_EQ(ran.n.load() - k0, KernelGraph::KERNELS);
        EXPECT_EQ(since(main_member, m0[0]).kernel_launches, (uint64_t) KernelGraph::KERNELS) << "on the main member";
    }
    EXPECT_EQ(wsp_ggml_backend_all_gpu_get_traffic(all).n_graphs, tp0.n_graphs) << "not tensor-parallel";
    wsp_ggml_backend_free(gpu);
}

// a member used directly, outside the device's calls, is not the device's work
TEST(AllGpuCounters, AMembersOwnWorkIsNotTheDevices) {
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    ForeignAccessGuard     guard;
    wsp_ggml_backend_dev_t member = wsp_ggml_backend_all_gpu_member(all, 1);
    const auto             a0     = read(all);
    const auto             m0     = read(member);
    {
        KernelGraph        kg(wsp_ggml_backend_dev_buffer_type(member));
        wsp_ggml_backend_t b = wsp_ggml_backend_dev_init(member, nullptr);
        ASSERT_EQ(wsp_ggml_backend_graph_compute(b, kg.g), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_free(b);
    }
    EXPECT_EQ(since(member, m0), (Diff{ 1, KernelGraph::KERNELS, 0, 0, 2, 1, 0 }));
    EXPECT_EQ(since(all, a0), Diff{});
}

// two clients' backends computing at once (a batch transcriber's threads), sharing the weight: the
// members' work is counted once, not once per overlapping call
TEST(AllGpuCounters, OverlappingCallsCountTheMembersWorkOnce) {
    wsp_ggml_backend_dev_t all = all_device();
    ASSERT_NE(all, nullptr);
    const size_t       n = wsp_ggml_backend_all_gpu_member_count(all);
    ForeignAccessGuard guard;
    // each command takes a while, so that the two threads' calls overlap
    for (size_t m = 0; m < n; ++m) {
        wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_all_gpu_member(all, m), 300);
    }
    Weight        w(all);
    constexpr int RUNS = 4;
    const auto    a0   = read(all);
    const auto    m0   = read_members(all);
    // starting a thread orders what this one wrote (the weight) before the thread's work; the
    // happens-before checker cannot see thread creation, so it is told
    const wsp::race::VectorClock start = wsp::race::checker().release_host();
    std::thread                  threads[2];
    for (std::thread & t : threads) {
        t = std::thread([&] {
            wsp::race::checker().acquire(wsp::race::checker().host_agent(), start);
            wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
            MatMul             mm(all, w);
            for (int run = 0; run < RUNS; ++run) {
                EXPECT_EQ(wsp_ggml_backend_graph_compute(gpu, mm.g), WSP_GGML_STATUS_SUCCESS);
            }
            wsp_ggml_backend_free(gpu);
        });
    }
    for (std::thread & t : threads) {
        t.join();
    }
    for (size_t m = 0; m < n; ++m) {
        wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_all_gpu_member(all, m), 0);
    }
    // each backend plans its graph and builds its member graphs once, then runs them
    const Diff d = since(all, a0);
    EXPECT_EQ(d, with_own(members_since(all, m0), 2 * RUNS, 2 * (1 + n))) << d;
    EXPECT_GT(d.kernel_launches, 0u);
}

} // namespace
} // namespace wsp::test
