#pragma once

// Helpers of the backend API suites: the two sim devices every suite registers (the same count
// and size everywhere, since the sim reg keeps its first configuration for the process), owned
// tensor sets allocated in one buffer, float transfers through the backend API, and a gate that
// holds a sim stream inside a kernel until the test opens it, so that "not yet done" states can
// be observed without relying on timing.

#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-sim.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace wsp::test {

constexpr int    API_SIM_DEVICES   = 2;
constexpr size_t API_SIM_MEMORY_MB = 64;

// SIM0 or SIM1 (registers the sim devices on first use), found through the registry
inline wsp_ggml_backend_dev_t sim_device(int index) {
    if (wsp_ggml_backend_sim_register(API_SIM_DEVICES, API_SIM_MEMORY_MB) == nullptr) {
        return nullptr;
    }
    return wsp_ggml_backend_dev_by_name(("SIM" + std::to_string(index)).c_str());
}

inline wsp_ggml_backend_dev_t cpu_device() {
    return wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
}

// a no_alloc context with room for n tensors and n graphs; alloc() places every tensor in one buffer
struct TensorSet {
    wsp_ggml_context_ptr        ctx;
    wsp_ggml_backend_buffer_ptr buffer;

    explicit TensorSet(size_t n_tensors = 32, size_t n_graphs = 1)
        : ctx(wsp_ggml_init(
              { n_tensors * wsp_ggml_tensor_overhead() + n_graphs * wsp_ggml_graph_overhead(), nullptr, true })) {}

    wsp_ggml_tensor * f32(std::vector<int64_t> ne, const char * name) {
        ne.resize(4, 1);
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_4d(ctx.get(), WSP_GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        wsp_ggml_set_name(t, name);
        return t;
    }

    bool alloc(wsp_ggml_backend_buffer_type_t buft) {
        buffer.reset(wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
        return buffer != nullptr;
    }
};

// float data in and out of a tensor of any buffer, through the synchronous API
inline void upload(wsp_ggml_tensor * t, const std::vector<float> & v) {
    ASSERT_EQ(v.size() * sizeof(float), wsp_ggml_nbytes(t));
    wsp_ggml_backend_tensor_set(t, v.data(), 0, wsp_ggml_nbytes(t));
}

inline std::vector<float> download(const wsp_ggml_tensor * t) {
    std::vector<float> v(wsp_ggml_nbytes(t) / sizeof(float));
    wsp_ggml_backend_tensor_get(t, v.data(), 0, wsp_ggml_nbytes(t));
    return v;
}

inline std::vector<float> filled(size_t n, float first, float step) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = first + step * (float) i;
    }
    return v;
}

// Turns the happens-before checks off while a test looks at device bytes that queued work will
// change, on purpose (to show that the work has not run yet).
class RacesAllowed {
public:
    RacesAllowed() { wsp_ggml_backend_sim_set_race_checks(false); }
    ~RacesAllowed() { wsp_ggml_backend_sim_set_race_checks(true); }
    RacesAllowed(const RacesAllowed &)             = delete;
    RacesAllowed & operator=(const RacesAllowed &) = delete;
};

// Holds a backend's stream: close() queues a one-node graph whose custom kernel blocks until
// open() is called. Commands queued after close() cannot run before open(); that ordering is
// what the tests observe. The destructor opens the gate and drains the stream.
class StreamGate {
public:
    explicit StreamGate(wsp_ggml_backend_t backend) : backend_(backend), set_(4) {
        wsp_ggml_tensor * x = set_.f32({ 1 }, "gate_in");
        node_               = wsp_ggml_map_custom1(set_.ctx.get(), x, wait_fn, 1, this);
        wsp_ggml_set_name(node_, "gate");
        graph_ = wsp_ggml_new_graph(set_.ctx.get());
        wsp_ggml_build_forward_expand(graph_, node_);
        EXPECT_TRUE(set_.alloc(wsp_ggml_backend_get_default_buffer_type(backend)));
    }

    ~StreamGate() {
        open();
        wsp_ggml_backend_synchronize(backend_);
    }

    StreamGate(const StreamGate &)             = delete;
    StreamGate & operator=(const StreamGate &) = delete;

    void close() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = false;
        }
        ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend_, graph_), WSP_GGML_STATUS_SUCCESS);
    }

    void open() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }

    // the stream has reached the gate (it may still be waiting there)
    bool reached() const { return reached_.load(); }

private:
    static void wait_fn(wsp_ggml_tensor *, const wsp_ggml_tensor *, int, int, void * user_data) {
        auto * self = static_cast<StreamGate *>(user_data);
        self->reached_.store(true);
        std::unique_lock<std::mutex> lock(self->mutex_);
        self->cv_.wait(lock, [&] { return self->open_; });
    }

    wsp_ggml_backend_t      backend_;
    TensorSet               set_;
    wsp_ggml_tensor *       node_  = nullptr;
    wsp_ggml_cgraph *       graph_ = nullptr;
    std::mutex              mutex_;
    std::condition_variable cv_;
    bool                    open_ = true;
    std::atomic<bool>       reached_{ false };
};

} // namespace wsp::test
