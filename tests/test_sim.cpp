// Sim devices: registration and properties, the memory arena and its limit, buffers, async
// copies, compute with CPU kernels, the foreign-memory check, fault injection and delays; and
// what makes them stricter than a GPU: device addresses fault on the host, new memory is NaN,
// kernels bind their nodes when queued, unordered accesses are caught and named, seeded delays.

#include "backend_util.h"
#include "sim/stream.h"
#include "sim_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

namespace wsp::test {
namespace {

// a context of small F32 tensors allocated in one buffer type
struct Tensors {
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;
    explicit Tensors(size_t n = 16, size_t n_graphs = 4) {
        n += 8;
        wsp_ggml_init_params p = { n * wsp_ggml_tensor_overhead() + n_graphs * wsp_ggml_graph_overhead(), nullptr,
                                   true };
        ctx                    = wsp_ggml_init(p);
    }
    wsp_ggml_tensor * vec(int64_t n) { return wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n); }
    void alloc(wsp_ggml_backend_buffer_type_t buft) { buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft); }
    ~Tensors() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

std::vector<float> read(const wsp_ggml_tensor * t) {
    std::vector<float> v((size_t) wsp_ggml_nelements(t));
    wsp_ggml_backend_tensor_get(t, v.data(), 0, wsp_ggml_nbytes(t));
    return v;
}

TEST(Sim, RegistrationAndProperties) {
    wsp_ggml_backend_reg_t reg = sim_reg();
    ASSERT_NE(reg, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_reg_name(reg), "SIM");
    EXPECT_EQ(wsp_ggml_backend_reg_dev_count(reg), (size_t) SIM_DEVICES);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("sim"), reg);
    for (int i = 0; i < SIM_DEVICES; ++i) {
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(sim_dev(i), &props);
        EXPECT_EQ(std::string(props.name), "SIM" + std::to_string(i));
        EXPECT_EQ(props.type, WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
        EXPECT_EQ(props.memory_total, (size_t) 256 << 20);
        EXPECT_TRUE(props.caps.async);
        EXPECT_TRUE(props.caps.events);
        EXPECT_EQ(wsp_ggml_backend_dev_by_name(props.name), sim_dev(i));
        wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(sim_dev(i));
        EXPECT_STREQ(wsp_ggml_backend_buft_name(buft), props.name);
        EXPECT_FALSE(wsp_ggml_backend_buft_is_host(buft));
        EXPECT_EQ(wsp_ggml_backend_buft_get_device(buft), sim_dev(i));
        EXPECT_EQ(wsp_ggml_backend_buft_get_max_size(buft), (size_t) 256 << 20);
    }
    // registering again gives the same devices; another count is refused with a message
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_sim_register(SIM_DEVICES, 256), reg);
    EXPECT_EQ(wsp_ggml_backend_sim_register(2, 256), reg);
    EXPECT_NE(log.text().find("already exist"), std::string::npos);
}

TEST(Sim, MemoryArenaHasALimit) {
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(sim_dev(2));
    const size_t                   used = wsp_ggml_backend_sim_memory_used(sim_dev(2));
    wsp_ggml_backend_buffer_t      a    = wsp_ggml_backend_buft_alloc_buffer(buft, 100u << 20);
    wsp_ggml_backend_buffer_t      b    = wsp_ggml_backend_buft_alloc_buffer(buft, 100u << 20);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_GE(wsp_ggml_backend_sim_memory_used(sim_dev(2)), used + (200u << 20));
    {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_buft_alloc_buffer(buft, 100u << 20), nullptr);
        EXPECT_NE(log.text().find("out of memory"), std::string::npos) << log.text();
    }
    size_t free_mem = 0, total = 0;
    wsp_ggml_backend_dev_memory(sim_dev(2), &free_mem, &total);
    EXPECT_EQ(total - free_mem, wsp_ggml_backend_sim_memory_used(sim_dev(2)));
    wsp_ggml_backend_buffer_free(a);
    wsp_ggml_backend_buffer_free(b);
    EXPECT_EQ(wsp_ggml_backend_sim_memory_used(sim_dev(2)), used);
    // the freed room is usable again, in one piece
    wsp_ggml_backend_buffer_t c = wsp_ggml_backend_buft_alloc_buffer(buft, 200u << 20);
    EXPECT_NE(c, nullptr);
    wsp_ggml_backend_buffer_free(c);
}

// Freeing a buffer must not disturb a live neighbour that shares one of its memory pages
// (regression: the arena once zero-filled every page the freed block touched).
TEST(Sim, FreeingABufferKeepsItsNeighboursBytes) {
    wsp_ggml_backend_buffer_type_t         buft = wsp_ggml_backend_dev_buffer_type(sim_dev(3));
    std::vector<wsp_ggml_backend_buffer_t> bufs;
    Tensors                                t(16);
    std::vector<wsp_ggml_tensor *>         bytes;
    for (int i = 0; i < 16; ++i) {
        bufs.push_back(wsp_ggml_backend_buft_alloc_buffer(buft, 1000)); // well under a page each
        ASSERT_NE(bufs.back(), nullptr);
        bytes.push_back(wsp_ggml_new_tensor_1d(t.ctx, WSP_GGML_TYPE_I8, 960));
        wsp_ggml_tallocr ta = wsp_ggml_tallocr_new(bufs.back());
        ASSERT_EQ(wsp_ggml_tallocr_alloc(&ta, bytes.back()), WSP_GGML_STATUS_SUCCESS);
    }
    std::vector<uint8_t> pattern(960);
    for (size_t i = 0; i < pattern.size(); ++i) {
        pattern[i] = (uint8_t) (i * 7 + 1);
    }
    for (int i = 1; i < 16; i += 2) {
        wsp_ggml_backend_tensor_set(bytes[(size_t) i], pattern.data(), 0, pattern.size());
    }
    for (int i = 0; i < 16; i += 2) {
        wsp_ggml_backend_buffer_free(bufs[(size_t) i]);
    }
    for (int i = 1; i < 16; i += 2) {
        std::vector<uint8_t> back(pattern.size());
        wsp_ggml_backend_tensor_get(bytes[(size_t) i], back.data(), 0, back.size());
        EXPECT_EQ(back, pattern) << "buffer " << i;
        wsp_ggml_backend_buffer_free(bufs[(size_t) i]);
    }
}

TEST(Sim, AsyncCopiesAndCompute) {
    ForeignAccessGuard guard;
    SimBackends        be(2, 0);
    Tensors            t;
    wsp_ggml_tensor *  x = t.vec(37);
    wsp_ggml_tensor *  y = t.vec(37);
    wsp_ggml_tensor *  z = wsp_ggml_mul(t.ctx, wsp_ggml_add(t.ctx, x, y), y);
    t.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(0)));
    ASSERT_NE(t.buf, nullptr);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, z);

    const std::vector<float> vx = random_values(37, 1), vy = random_values(37, 2);
    wsp_ggml_backend_tensor_set_async(be.sim(0), x, vx.data(), 0, wsp_ggml_nbytes(x));
    wsp_ggml_backend_tensor_set_async(be.sim(0), y, vy.data(), 0, wsp_ggml_nbytes(y));
    EXPECT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> out(37);
    wsp_ggml_backend_tensor_get_async(be.sim(0), z, out.data(), 0, wsp_ggml_nbytes(z));
    wsp_ggml_backend_synchronize(be.sim(0));
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_FLOAT_EQ(out[i], (vx[i] + vy[i]) * vy[i]);
    }

    // device to device: z on SIM0 -> w on SIM1
    Tensors           t1;
    wsp_ggml_tensor * w = t1.vec(37);
    t1.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(1)));
    wsp_ggml_backend_tensor_copy_async(be.sim(0), be.sim(1), z, w);
    wsp_ggml_backend_synchronize(be.sim(1));
    EXPECT_EQ(read(w), out);
}

TEST(Sim, ForeignMemoryIsCaughtAndNamed) {
    SimBackends       be(2, 0);
    Tensors           t0, t1, th;
    wsp_ggml_tensor * b = t1.vec(8);
    t1.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(1)));
    wsp_ggml_tensor * h = th.vec(8);
    th.alloc(wsp_ggml_backend_cpu_buffer_type());
    // nodes with memory on SIM0 that read b (on SIM1) and h (host): missing copies
    wsp_ggml_tensor * a       = t0.vec(8);
    wsp_ggml_tensor * reads_b = wsp_ggml_add(t0.ctx, a, b);
    wsp_ggml_tensor * reads_h = wsp_ggml_add(t0.ctx, a, h);
    t0.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(0)));

    const size_t before = wsp_ggml_backend_sim_foreign_accesses();
    {
        LogCapture        log;
        wsp_ggml_cgraph * g = wsp_ggml_new_graph(t0.ctx);
        wsp_ggml_build_forward_expand(g, reads_b);
        EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_FAILED);
        EXPECT_NE(log.text().find("on SIM0 reads"), std::string::npos) << log.text();
        EXPECT_NE(log.text().find("lives in SIM1"), std::string::npos) << log.text();
    }
    EXPECT_EQ(wsp_ggml_backend_sim_foreign_accesses(), before + 1);
    {
        LogCapture        log;
        wsp_ggml_cgraph * g = wsp_ggml_new_graph(t0.ctx);
        wsp_ggml_build_forward_expand(g, reads_h);
        EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_FAILED);
        EXPECT_NE(log.text().find("lives in host memory"), std::string::npos) << log.text();
    }
    EXPECT_EQ(wsp_ggml_backend_sim_foreign_accesses(), before + 2);
}

TEST(Sim, InjectedFaultsFailOnceThenWork) {
    ForeignAccessGuard             guard;
    SimBackends                    be(1, 0);
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_get_default_buffer_type(be.sim(0));

    wsp_ggml_backend_sim_inject_fault(sim_dev(0), WSP_GGML_SIM_FAULT_ALLOC);
    EXPECT_EQ(wsp_ggml_backend_buft_alloc_buffer(buft, 1024), nullptr);
    wsp_ggml_backend_buffer_t ok = wsp_ggml_backend_buft_alloc_buffer(buft, 1024);
    EXPECT_NE(ok, nullptr);
    wsp_ggml_backend_buffer_free(ok);

    Tensors           t;
    wsp_ggml_tensor * x = t.vec(16);
    wsp_ggml_tensor * y = wsp_ggml_scale(t.ctx, x, 3.0f);
    t.alloc(buft);
    const std::vector<float> ones(16, 1.0f), twos(16, 2.0f);
    wsp_ggml_backend_tensor_set(x, ones.data(), 0, wsp_ggml_nbytes(x));
    wsp_ggml_backend_sim_inject_fault(sim_dev(0), WSP_GGML_SIM_FAULT_COPY);
    wsp_ggml_backend_tensor_set(x, twos.data(), 0, wsp_ggml_nbytes(x)); // fails: nothing written
    EXPECT_EQ(read(x), ones);
    wsp_ggml_backend_tensor_set(x, twos.data(), 0, wsp_ggml_nbytes(x));
    EXPECT_EQ(read(x), twos);

    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sim_inject_fault(sim_dev(0), WSP_GGML_SIM_FAULT_KERNEL);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_FAILED);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(read(y), std::vector<float>(16, 6.0f));
}

// silent data corruption: the compute reports success, one value of the result is wrong, once
TEST(Sim, CorruptFaultChangesOneValueOfTheResultOnce) {
    SimBackends       be(1, 0);
    Tensors           t;
    wsp_ggml_tensor * x = t.vec(8);
    wsp_ggml_tensor * h = wsp_ggml_scale(t.ctx, x, 2.0f);
    wsp_ggml_tensor * y = wsp_ggml_add(t.ctx, h, x);
    t.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(0)));
    const std::vector<float> v = { 1, 2, 3, 4, 5, 6, 7, 8 };
    wsp_ggml_backend_tensor_set(x, v.data(), 0, wsp_ggml_nbytes(x));
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, y);

    wsp_ggml_backend_sim_inject_fault(sim_dev(0), WSP_GGML_SIM_FAULT_CORRUPT);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(read(h), (std::vector<float>{ 2, 4, 6, 8, 10, 12, 14, 16 })) << "only the last result";
    EXPECT_EQ(read(y), (std::vector<float>{ -7, 6, 9, 12, 15, 18, 21, 24 })) << "3 became -2 * 3 - 1";
    EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(read(y), (std::vector<float>{ 3, 6, 9, 12, 15, 18, 21, 24 }));
}

TEST(Sim, DelayMakesWorkAsynchronous) {
    SimBackends       be(1, 20000); // 20 ms per command
    Tensors           t;
    wsp_ggml_tensor * x = t.vec(4);
    wsp_ggml_tensor * y = wsp_ggml_scale(t.ctx, x, 2.0f);
    t.alloc(wsp_ggml_backend_get_default_buffer_type(be.sim(0)));
    const std::vector<float> v = { 1, 2, 3, 4 };
    wsp_ggml_backend_tensor_set(x, v.data(), 0, sizeof(float) * 4);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, y);

    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    const auto queued = std::chrono::steady_clock::now();
    wsp_ggml_backend_synchronize(be.sim(0));
    const auto   done     = std::chrono::steady_clock::now();
    const double queue_ms = std::chrono::duration<double, std::milli>(queued - t0).count();
    const double total_ms = std::chrono::duration<double, std::milli>(done - t0).count();
    EXPECT_LT(queue_ms, 15.0);
    EXPECT_GE(total_ms, 19.0);
    EXPECT_EQ(read(y), (std::vector<float>{ 2, 4, 6, 8 }));
}

// Device addresses are not host memory: host code that dereferences one faults, as it would on
// a GPU (the bytes are reached through the buffer and backend interfaces only)
TEST(SimStrict, DeviceAddressesFaultOnTheHost) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Tensors           t;
    wsp_ggml_tensor * x = t.vec(16);
    t.alloc(wsp_ggml_backend_dev_buffer_type(sim_dev(0)));
    const std::vector<float> v(16, 1.5f);
    wsp_ggml_backend_tensor_set(x, v.data(), 0, wsp_ggml_nbytes(x));
    EXPECT_EQ(read(x), v);
    EXPECT_DEATH(
        {
            volatile float f = *static_cast<const volatile float *>(x->data);
            (void) f;
        },
        "");
}

// new memory, and memory another buffer had, reads as NaN until written
TEST(SimStrict, NewAndReusedMemoryIsNaN) {
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(sim_dev(2));
    for (int round = 0; round < 2; ++round) {
        Tensors           t;
        wsp_ggml_tensor * x = t.vec(1000);
        t.alloc(buft);
        for (float f : read(x)) {
            ASSERT_TRUE(std::isnan(f)) << "round " << round;
        }
        const std::vector<float> v(1000, 2.0f);
        wsp_ggml_backend_tensor_set(x, v.data(), 0, wsp_ggml_nbytes(x)); // then freed: the next round reuses it
    }
}

// A kernel binds its nodes when queued: changing the graph afterwards (a source, a parameter)
// does not change what the queued kernel computes, as with a CUDA launch
TEST(SimStrict, KernelsBindTheirNodesWhenQueued) {
    ForeignAccessGuard guard;
    SimBackends        be(1, 0);
    Tensors            t;
    wsp_ggml_tensor *  x = t.vec(8);
    wsp_ggml_tensor *  w = t.vec(8);
    wsp_ggml_tensor *  y = wsp_ggml_scale(t.ctx, x, 2.0f);
    t.alloc(wsp_ggml_backend_dev_buffer_type(sim_dev(0)));
    const std::vector<float> vx(8, 1.0f), vw(8, 10.0f);
    wsp_ggml_backend_tensor_set(x, vx.data(), 0, wsp_ggml_nbytes(x));
    wsp_ggml_backend_tensor_set(w, vw.data(), 0, wsp_ggml_nbytes(w));
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, y);
    {
        StreamGate gate(be.sim(0));
        gate.close();
        ASSERT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
        y->src[0]         = w; // after the launch: not seen by it
        const float three = 3.0f;
        std::memcpy(y->op_params, &three, sizeof(three));
        gate.open();
        wsp_ggml_backend_synchronize(be.sim(0));
    }
    EXPECT_EQ(read(y), std::vector<float>(8, 2.0f));
    ASSERT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_SUCCESS); // a new launch sees them
    EXPECT_EQ(read(y), std::vector<float>(8, 30.0f));
}

// Two streams of one device: a kernel on the second reads what a kernel on the first writes.
// Without an event between them the checker fails the second command, naming both; with a
// record and a wait it passes. Either way the kernels ran. (The unordered pair is made to run one
// after the other in fact, the consumer held by a gate until a flag set behind the producer is
// seen, so that the process itself has no data race: only the program's ordering is missing.)
TEST(SimStrict, UnorderedAccessesAreCaughtAndNamed) {
    SimBackends       be({ 1, 1 }, 0, 1);
    Tensors           t(16, 8);
    wsp_ggml_tensor * x = t.vec(64);
    wsp_ggml_tensor * y = wsp_ggml_scale(t.ctx, x, 2.0f);
    wsp_ggml_tensor * z = wsp_ggml_scale(t.ctx, y, 5.0f);
    wsp_ggml_set_name(y, "producer");
    wsp_ggml_set_name(z, "consumer");
    t.alloc(wsp_ggml_backend_dev_buffer_type(sim_dev(1)));
    const std::vector<float> vx = random_values(64, 3);
    wsp_ggml_backend_tensor_set(x, vx.data(), 0, wsp_ggml_nbytes(x));
    wsp_ggml_cgraph * gy = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(gy, y);
    wsp_ggml_cgraph * gz = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_graph_add_node(gz, z);
    {
        const size_t      races = wsp_ggml_backend_sim_races();
        LogCapture        log;
        std::atomic<bool> produced{ false };
        wsp_ggml_tensor * flag = wsp_ggml_map_custom1(
            t.ctx, x,
            [](wsp_ggml_tensor *, const wsp_ggml_tensor *, int, int, void * ud) {
                static_cast<std::atomic<bool> *>(ud)->store(true);
            },
            1, &produced);
        wsp_ggml_cgraph * gf = wsp_ggml_new_graph(t.ctx);
        wsp_ggml_graph_add_node(gf, flag);
        {
            StreamGate gate(be.sim(1));
            gate.close();
            ASSERT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(1), gz), WSP_GGML_STATUS_SUCCESS);
            ASSERT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), gy), WSP_GGML_STATUS_SUCCESS);
            ASSERT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), gf), WSP_GGML_STATUS_SUCCESS);
            while (!produced.load()) {
                std::this_thread::yield();
            }
            gate.open();
        }
        wsp_ggml_backend_synchronize(be.sim(0));
        EXPECT_EQ(wsp_ggml_backend_sim_races(), races + 1);
        // the consumer's stream failed: its synchronize (the gate's) reported the race
        EXPECT_TRUE(log.contains(": race: ")) << log.text();
        EXPECT_TRUE(log.contains("'producer'")) << log.text();
        EXPECT_TRUE(log.contains("'consumer'")) << log.text();
        EXPECT_TRUE(log.contains("not ordered")) << log.text();
    }
    ForeignAccessGuard         guard; // from here on: no race
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_dev(1)));
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(be.sim(0), gy), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), be.sim(0));
    wsp_ggml_backend_event_wait(be.sim(1), e.get());
    ASSERT_EQ(wsp_ggml_backend_graph_compute(be.sim(1), gz), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_synchronize(be.sim(0));
    std::vector<float> out = read(z);
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_FLOAT_EQ(out[i], 10.0f * vx[i]);
    }
}

// the host reading device bytes that queued work writes, without a synchronize, is a race too
TEST(SimStrict, AHostReadBeforeTheWriteIsDoneIsARace) {
    SimBackends       be(1, 0);
    Tensors           t;
    wsp_ggml_tensor * x = t.vec(32);
    t.alloc(wsp_ggml_backend_dev_buffer_type(sim_dev(0)));
    const std::vector<float> v(32, 4.0f);
    const size_t             races = wsp_ggml_backend_sim_races();
    {
        StreamGate gate(be.sim(0));
        gate.close();
        wsp_ggml_backend_tensor_set_async(be.sim(0), x, v.data(), 0, wsp_ggml_nbytes(x));
        LogCapture log;
        (void) read(x); // the write is still queued
        gate.open();
        wsp_ggml_backend_synchronize(be.sim(0));
        EXPECT_TRUE(log.contains("host thread: tensor_get")) << log.text();
    }
    EXPECT_EQ(wsp_ggml_backend_sim_races(), races + 1);
    EXPECT_EQ(read(x), v); // after the synchronize: ordered
    EXPECT_EQ(wsp_ggml_backend_sim_races(), races + 1);
}

// Note [seeded delays]: the random delays of a stream are a sequence fixed by the seed and the
// stream: the same again for the same pair, another for another seed or stream, within bounds
TEST(SimStrict, SeededDelaysRepeatForASeed) {
    auto draw = [](uint32_t seed, int stream) {
        sim::DelaySequence d(seed, stream);
        std::vector<int>   v;
        for (int i = 0; i < 64; ++i) {
            v.push_back(d.next(1000));
        }
        return v;
    };
    const std::vector<int> a = draw(7, 0);
    EXPECT_EQ(draw(7, 0), a);
    EXPECT_NE(draw(8, 0), a);
    EXPECT_NE(draw(7, 1), a);
    EXPECT_EQ(*std::min_element(a.begin(), a.end()) >= 0 && *std::max_element(a.begin(), a.end()) <= 1000, true);
    EXPECT_GT(*std::max_element(a.begin(), a.end()), *std::min_element(a.begin(), a.end()));
    sim::DelaySequence none(7, 0);
    EXPECT_EQ(none.next(0), 0);

    // with delays on, the device still computes right
    SimBackends       be(std::vector<int>{ 3 }, 0, 1);
    Tensors           t;
    wsp_ggml_tensor * x = t.vec(4);
    wsp_ggml_tensor * y = wsp_ggml_scale(t.ctx, x, 2.0f);
    t.alloc(wsp_ggml_backend_dev_buffer_type(sim_dev(3)));
    const std::vector<float> v = { 1, 2, 3, 4 };
    wsp_ggml_backend_tensor_set(x, v.data(), 0, sizeof(float) * 4);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(t.ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sim_set_jitter_us(sim_dev(3), 500, 11);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(be.sim(0), g), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_sim_set_jitter_us(sim_dev(3), 0, 0);
    EXPECT_EQ(read(y), (std::vector<float>{ 2, 4, 6, 8 }));
}

} // namespace
} // namespace wsp::test
