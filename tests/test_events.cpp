// Events on sim devices: creation and release, record / synchronize / wait, and the ordering
// they give. Stream A computes y from x and records an event; stream B waits for it and then
// reads y (directly on the same device, or through a copy it makes after the wait on another
// device). The control cases hold A behind a gate so that B provably runs first without the
// wait and provably cannot run first with it; values are checked in every case.

#include "backend_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace wsp::test {
namespace {

constexpr int64_t N = 48;

std::vector<float> x_values() {
    return filled(N, 1.0f, 0.5f);
}

std::vector<float> times(const std::vector<float> & v, float k) {
    std::vector<float> r(v);
    for (float & e : r) {
        e *= k;
    }
    return r;
}

// A's graph writes y = 2 x into the plain tensor y (through a cpy), so that y is a leaf of B's
// graph z = 10 y: B cannot recompute y itself, it can only read what is in memory.
struct Producer {
    wsp_ggml_tensor * x;
    wsp_ggml_tensor * y;
    wsp_ggml_cgraph * graph;

    Producer(TensorSet & s, const char * suffix) {
        x                   = s.f32({ N }, (std::string("x") + suffix).c_str());
        y                   = s.f32({ N }, (std::string("y") + suffix).c_str());
        wsp_ggml_tensor * w = wsp_ggml_cpy(s.ctx.get(), wsp_ggml_scale(s.ctx.get(), x, 2.0f), y);
        graph               = wsp_ggml_new_graph(s.ctx.get());
        wsp_ggml_build_forward_expand(graph, w);
    }
};

struct Consumer {
    wsp_ggml_tensor * in;
    wsp_ggml_tensor * z;
    wsp_ggml_cgraph * graph;

    Consumer(TensorSet & s, wsp_ggml_tensor * input) : in(input) {
        z     = wsp_ggml_scale(s.ctx.get(), in, 10.0f);
        graph = wsp_ggml_new_graph(s.ctx.get());
        wsp_ggml_build_forward_expand(graph, z);
    }
};

// A and B are two streams of SIM0, sharing its memory
struct SameDevice {
    wsp_ggml_backend_ptr a{ wsp_ggml_backend_dev_init(sim_device(0), nullptr) };
    wsp_ggml_backend_ptr b{ wsp_ggml_backend_dev_init(sim_device(0), nullptr) };
    TensorSet            s{ 32, 2 }; // A's graph and B's
    Producer             p{ s, "" };
    Consumer             c{ s, p.y };

    SameDevice() {
        EXPECT_TRUE(s.alloc(wsp_ggml_backend_dev_buffer_type(sim_device(0))));
        EXPECT_EQ(wsp_ggml_graph_n_nodes(c.graph), 1) << "y must be a leaf of B's graph";
        upload(p.x, x_values());
        upload(p.y, std::vector<float>(N, 0.0f));
        upload(c.z, std::vector<float>(N, -1.0f));
    }

    // queued work uses the tensors and graphs: drain it before they go, also when a check failed
    ~SameDevice() {
        wsp_ggml_backend_synchronize(a.get());
        wsp_ggml_backend_synchronize(b.get());
    }
};

TEST(Event, NewAndFree) {
    for (int i = 0; i < API_SIM_DEVICES; ++i) {
        wsp_ggml_backend_event_t e = wsp_ggml_backend_event_new(sim_device(i));
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(e->device, sim_device(i));
        wsp_ggml_backend_event_synchronize(e); // never recorded: nothing to wait for
        wsp_ggml_backend_event_free(e);
    }
    wsp_ggml_backend_event_free(nullptr);
}

TEST(Event, CpuHasNoEvents) {
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_event_new(cpu_device()), nullptr);
    EXPECT_TRUE(log.contains("does not support events")) << log.text();
    wsp_ggml_backend_ptr       cpu(wsp_ggml_backend_cpu_init());
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    log.clear();
    wsp_ggml_backend_event_record(e.get(), cpu.get());
    EXPECT_TRUE(log.contains("cannot record events")) << log.text();
    wsp_ggml_backend_event_wait(cpu.get(), e.get());
    EXPECT_TRUE(log.contains("cannot wait for events")) << log.text();
}

TEST(Event, SynchronizeBlocksTheHostUntilTheRecordedWorkIsDone) {
    const std::vector<float>   x2 = times(x_values(), 3.0f); // outlives the streams that read it
    SameDevice                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    const int                  delay_us = 4000;
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), delay_us);
    const auto start = std::chrono::steady_clock::now();
    // three commands before the record, each after the device's delay
    wsp_ggml_backend_tensor_set_async(d.a.get(), d.p.x, x2.data(), 0, wsp_ggml_nbytes(d.p.x));
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    wsp_ggml_backend_event_synchronize(e.get());
    const auto waited = std::chrono::steady_clock::now() - start;
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_GE(waited, std::chrono::microseconds(3 * delay_us));
    EXPECT_EQ(download(d.p.y), times(x2, 2.0f));
}

TEST(Event, SynchronizeDoesNotWaitForWorkQueuedAfterTheRecord) {
    SameDevice                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    StreamGate                 gate(d.a.get());
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    gate.close(); // A is blocked after the record; the host must still get through
    wsp_ggml_backend_event_synchronize(e.get());
    EXPECT_EQ(download(d.p.y), times(x_values(), 2.0f));
    gate.open();
}

TEST(Event, SynchronizeWaitsForTheLatestRecord) {
    SameDevice                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    wsp_ggml_backend_event_synchronize(e.get()); // the first record completes
    StreamGate gate(d.a.get());
    gate.close();
    wsp_ggml_backend_event_record(e.get(), d.a.get()); // queued behind the gate
    std::atomic<bool> returned{ false };
    std::thread       host([&] {
        wsp_ggml_backend_event_synchronize(e.get());
        returned.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(returned.load()) << "synchronize returned before the second record was reached";
    gate.open();
    host.join();
    EXPECT_TRUE(returned.load());
}

TEST(Event, WaitOrdersASecondStreamOfTheSameDevice) {
    const std::vector<float>   x_new = times(x_values(), -1.0f); // outlives the streams that read it
    SameDevice                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    // every command of the device waits 3 ms first: A's y is ready after its upload and its graph
    // (about 6 ms), while B's graph alone would run after about 3 ms; the wait must hold B back
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 3000);
    wsp_ggml_backend_tensor_set_async(d.a.get(), d.p.x, x_new.data(), 0, wsp_ggml_nbytes(d.p.x));
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    wsp_ggml_backend_event_wait(d.b.get(), e.get());
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.b.get(), d.c.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_synchronize(d.b.get());
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_EQ(download(d.c.z), times(x_new, 20.0f));
}

TEST(Event, WithoutAWaitTheSecondStreamRunsFirst) {
    RacesAllowed allow; // looks at bytes that queued work has not written yet
    // control: A is held before computing y, and B, not told to wait, reads y as it was
    SameDevice d;
    StreamGate gate(d.a.get());
    gate.close();
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.b.get(), d.c.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_synchronize(d.b.get()); // B finishes while A is still held
    EXPECT_EQ(download(d.c.z), std::vector<float>(N, 0.0f));
    gate.open();
    wsp_ggml_backend_synchronize(d.a.get());
    EXPECT_EQ(download(d.p.y), times(x_values(), 2.0f));
}

TEST(Event, WithAWaitTheSecondStreamCannotRunFirst) {
    RacesAllowed               allow; // looks at bytes that queued work has not written yet
    SameDevice                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    StreamGate                 gate(d.a.get());
    gate.close();
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    wsp_ggml_backend_event_wait(d.b.get(), e.get());
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.b.get(), d.c.graph), WSP_GGML_STATUS_SUCCESS);
    // A cannot pass the gate, so neither can B: z keeps its old value however long we look
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(download(d.c.z), std::vector<float>(N, -1.0f));
    gate.open();
    wsp_ggml_backend_synchronize(d.b.get());
    EXPECT_EQ(download(d.c.z), times(x_values(), 20.0f));
}

// A on SIM0 computes y; B on SIM1 copies y into its own memory after the wait and computes from the copy
struct TwoDevices {
    wsp_ggml_backend_ptr a{ wsp_ggml_backend_dev_init(sim_device(0), nullptr) };
    wsp_ggml_backend_ptr b{ wsp_ggml_backend_dev_init(sim_device(1), nullptr) };
    TensorSet            s0, s1;
    Producer             p{ s0, "0" };
    wsp_ggml_tensor *    y1 = s1.f32({ N }, "y1");
    Consumer             c{ s1, y1 };

    TwoDevices() {
        EXPECT_TRUE(s0.alloc(wsp_ggml_backend_dev_buffer_type(sim_device(0))));
        EXPECT_TRUE(s1.alloc(wsp_ggml_backend_dev_buffer_type(sim_device(1))));
        upload(p.x, x_values());
        upload(p.y, std::vector<float>(N, 0.0f));
        upload(y1, std::vector<float>(N, -3.0f));
        upload(c.z, std::vector<float>(N, -1.0f));
    }

    ~TwoDevices() {
        wsp_ggml_backend_synchronize(a.get());
        wsp_ggml_backend_synchronize(b.get());
    }

    // B's part: copy y (SIM0) into y1 (SIM1) on B's own stream, then z = 10 y1
    void consume() {
        wsp_ggml_backend_tensor_copy_async(b.get(), b.get(), p.y, y1);
        ASSERT_EQ(wsp_ggml_backend_graph_compute_async(b.get(), c.graph), WSP_GGML_STATUS_SUCCESS);
    }
};

TEST(Event, WaitOrdersACopyOnAnotherDevice) {
    TwoDevices                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(0)));
    const size_t               foreign = wsp_ggml_backend_sim_foreign_accesses();
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 3000); // A is slow, B is not
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_event_record(e.get(), d.a.get());
    wsp_ggml_backend_event_wait(d.b.get(), e.get());
    d.consume();
    wsp_ggml_backend_synchronize(d.b.get());
    wsp_ggml_backend_sim_set_delay_us(sim_device(0), 0);
    EXPECT_EQ(download(d.y1), times(x_values(), 2.0f));
    EXPECT_EQ(download(d.c.z), times(x_values(), 20.0f));
    EXPECT_EQ(wsp_ggml_backend_sim_foreign_accesses(), foreign) << "B's kernel must read only SIM1 memory";
}

TEST(Event, WithoutAWaitTheCopyOnAnotherDeviceReadsStaleData) {
    TwoDevices d;
    StreamGate gate(d.a.get());
    gate.close();
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.a.get(), d.p.graph), WSP_GGML_STATUS_SUCCESS);
    d.consume();
    wsp_ggml_backend_synchronize(d.b.get());
    EXPECT_EQ(download(d.y1), std::vector<float>(N, 0.0f)) << "B copied y before A computed it";
    EXPECT_EQ(download(d.c.z), std::vector<float>(N, 0.0f));
    gate.open();
}

TEST(Event, WaitForAnEventNeverRecordedDoesNotBlock) {
    TwoDevices                 d;
    wsp_ggml_backend_event_ptr e(wsp_ggml_backend_event_new(sim_device(1)));
    upload(d.y1, filled(N, 0.0f, 1.0f));
    wsp_ggml_backend_event_wait(d.b.get(), e.get());
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(d.b.get(), d.c.graph), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_synchronize(d.b.get());
    EXPECT_EQ(download(d.c.z), filled(N, 0.0f, 10.0f));
}

} // namespace
} // namespace wsp::test
