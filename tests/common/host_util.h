#pragma once

// Helpers of the host target's cuBLAS and NCCL suites: the emulated machine they run on (4
// devices, configured before any CUDA call: ctest runs each test in its own process), device
// buffers that free themselves, uploads and downloads, streams.

#include "host_target/runtime.h"
#include "host_target/target.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace wsp::test::host {

inline constexpr int DEVICES = 4;

// ctest runs each test in its own process: every process configures the machine first
inline const bool machine_configured = [] {
    wsp::host_target::MachineConfig c;
    c.devices = DEVICES;
    c.memory  = (size_t) 512 << 20;
    return wsp::host_target::configure(c);
}();

class DeviceBuffer {
public:
    DeviceBuffer(int device, size_t bytes) : device_(device) {
        EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
        EXPECT_EQ(cudaMalloc(&ptr_, bytes), cudaSuccess);
    }
    ~DeviceBuffer() { release(); }
    DeviceBuffer(const DeviceBuffer &)             = delete;
    DeviceBuffer & operator=(const DeviceBuffer &) = delete;

    void release() {
        if (ptr_ != nullptr) {
            cudaSetDevice(device_);
            EXPECT_EQ(cudaFree(ptr_), cudaSuccess);
            ptr_ = nullptr;
        }
    }
    template <typename T = void>
    T * get() const {
        return static_cast<T *>(ptr_);
    }

private:
    int    device_;
    void * ptr_ = nullptr;
};

template <typename T>
void upload(const DeviceBuffer & d, const std::vector<T> & h) {
    ASSERT_EQ(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}

template <typename T>
std::vector<T> download(const DeviceBuffer & d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
}

inline cudaStream_t make_stream(int device) {
    cudaStream_t s = nullptr;
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
    return s;
}

inline void destroy_stream(cudaStream_t s) {
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

} // namespace wsp::test::host
