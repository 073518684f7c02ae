#pragma once

// Helpers of the host target's runtime suites: the machine they are written for (configured
// before the runtime's first use, whatever the environment says: ctest runs each test in a
// process of its own), streams that free themselves, the fixture that checks no error is left.

#include "host_target/runtime.h"
#include "host_target/target.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace wsp::test::host {

// 2 devices of compute capability 8.0, every peer pair possible
inline const bool runtime_machine_configured = [] {
    wsp::host_target::MachineConfig c;
    return wsp::host_target::configure(c);
}();

// a stream of the current device that frees itself
struct TestStream {
    cudaStream_t s = nullptr;
    TestStream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
    ~TestStream() { EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess); }
};

inline void sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class HostRuntime : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe"); // the child re-runs only its test
        ASSERT_TRUE(runtime_machine_configured);
        ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
        (void) cudaGetLastError();
    }
    void TearDown() override { EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a test left an error behind"; }
};

} // namespace wsp::test::host
