// The host target's CUDA runtime (src/host_target/runtime.h, target.h) against expected values:
// devices and their configuration, memory and ownership, copies against a host reference,
// streams, events, errors (capture, graphs, the happens-before checker and kernel launches are in
// test_host_graphs.cpp). Tests of another machine configuration run in a child process (a death
// test): the configuration is fixed at the runtime's first use.

#include "host_runtime_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ht = wsp::host_target;

namespace {

using namespace wsp::test::host;

constexpr size_t MiB = (size_t) 1 << 20;

// in a child process: a failed check ends it with status 1 and the condition on stderr
#define CHILD_CHECK(cond)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "child check failed at line %d: %s\n", __LINE__, #cond); \
            std::_Exit(1);                                                                \
        }                                                                                 \
    } while (0)

TEST_F(HostRuntime, DevicesAndProperties) {
    int n = 0;
    ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT_EQ(n, ht::machine().devices);
    EXPECT_EQ(n, 2); // MachineConfig's default
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
    EXPECT_EQ(prop.major, 8);
    EXPECT_EQ(prop.minor, 0);
    EXPECT_EQ(prop.multiProcessorCount, 4);
    EXPECT_EQ(prop.totalGlobalMem, (size_t) 4096 * MiB);
    EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
    EXPECT_EQ(prop.memoryPoolsSupported, 1);
    EXPECT_EQ(prop.sharedMemPerBlock, (size_t) 48 << 10);
    EXPECT_NE(std::strstr(prop.name, "host target"), nullptr);

    EXPECT_EQ(cudaSetDevice(1), cudaSuccess);
    int d = -1;
    EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
    EXPECT_EQ(d, 1);
    std::thread([] {
        int other = -1;
        EXPECT_EQ(cudaGetDevice(&other), cudaSuccess);
        EXPECT_EQ(other, 0); // the current device is per host thread
    }).join();
    EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetDeviceProperties(&prop, -1), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    char bus[32];
    EXPECT_EQ(cudaDeviceGetPCIBusId(bus, sizeof(bus), 1), cudaSuccess);
    EXPECT_STREQ(bus, "0000:02:00.0");

    ht::MachineConfig c;
    EXPECT_FALSE(ht::configure(c)); // the runtime is in use
}

// another machine: 3 devices of sm_90 with 8 SMs and 64 MiB, peer access only 0 -> 1
TEST(HostRuntimeConfig, ConfiguredMachine) {
    GTEST_FLAG_SET(death_test_style, "threadsafe"); // the child re-runs only this test, with no runtime yet
    auto child = [] {
        ht::MachineConfig c;
        c.devices  = 3;
        c.cc_major = 9;
        c.sm_count = 8;
        c.memory   = 64 * MiB;
        c.peer     = { { false, true, false }, { false, false, false }, { false, false, false } };
        CHILD_CHECK(ht::configure(c));
        int n = 0;
        CHILD_CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 3);
        cudaDeviceProp prop{};
        CHILD_CHECK(cudaGetDeviceProperties(&prop, 2) == cudaSuccess);
        CHILD_CHECK(prop.major == 9 && prop.minor == 0 && prop.multiProcessorCount == 8);
        CHILD_CHECK(prop.totalGlobalMem == 64 * MiB);
        CHILD_CHECK(!ht::configure(c));

        int can = -1;
        CHILD_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess && can == 1);
        CHILD_CHECK(cudaDeviceCanAccessPeer(&can, 1, 0) == cudaSuccess && can == 0);
        CHILD_CHECK(cudaDeviceCanAccessPeer(&can, 0, 0) == cudaSuccess && can == 0);

        // out of memory is an error code, and the memory of a failed call stays free
        void * big = nullptr;
        CHILD_CHECK(cudaMalloc(&big, 65 * MiB) == cudaErrorMemoryAllocation);
        CHILD_CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
        void *a = nullptr, *b = nullptr;
        CHILD_CHECK(cudaMalloc(&a, 40 * MiB) == cudaSuccess);
        CHILD_CHECK(cudaMalloc(&b, 40 * MiB) == cudaErrorMemoryAllocation);
        CHILD_CHECK(cudaFree(a) == cudaSuccess);
        CHILD_CHECK(cudaMalloc(&b, 40 * MiB) == cudaSuccess);
        (void) cudaGetLastError();

        // 1 -> 0 is not allowed: enabling fails, a kernel's access fails, a copy goes through the host
        CHILD_CHECK(cudaSetDevice(1) == cudaSuccess);
        CHILD_CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorPeerAccessUnsupported);
        void * on1 = nullptr;
        CHILD_CHECK(cudaMalloc(&on1, 4096) == cudaSuccess);
        CHILD_CHECK(ht::check_access(1, b, 16, nullptr) == cudaErrorIllegalAddress);
        std::vector<uint8_t> src(4096), back(4096);
        for (size_t i = 0; i < src.size(); ++i) {
            src[i] = (uint8_t) (i * 7);
        }
        CHILD_CHECK(cudaMemcpy(on1, src.data(), 4096, cudaMemcpyHostToDevice) == cudaSuccess);
        CHILD_CHECK(cudaMemcpyPeer(b, 0, on1, 1, 4096) == cudaSuccess);
        CHILD_CHECK(cudaMemcpy(back.data(), b, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHILD_CHECK(back == src);
        CHILD_CHECK(cudaSetDevice(0) == cudaSuccess);
        CHILD_CHECK(ht::check_access(0, on1, 16, nullptr) == cudaErrorIllegalAddress);
        CHILD_CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
        CHILD_CHECK(ht::check_access(0, on1, 16, nullptr) == cudaSuccess);
        CHILD_CHECK(cudaDeviceEnablePeerAccess(2, 0) == cudaErrorPeerAccessUnsupported);
        // the pool of device 2 cannot be opened to device 1 either
        cudaMemPool_t     pool = nullptr;
        cudaMemAccessDesc desc{ { cudaMemLocationTypeDevice, 1 }, cudaMemAccessFlagsProtReadWrite };
        CHILD_CHECK(cudaDeviceGetDefaultMemPool(&pool, 2) == cudaSuccess);
        CHILD_CHECK(cudaMemPoolSetAccess(pool, &desc, 1) == cudaErrorInvalidDevice);
        std::_Exit(0);
    };
    EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

TEST_F(HostRuntime, AllocationFillAndInfo) {
    size_t free0 = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    EXPECT_EQ(total, (size_t) 4096 * MiB);
    void * p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
    EXPECT_EQ((uintptr_t) p % 256, 0u);
    EXPECT_EQ(ht::device_of(p), 0);
    EXPECT_EQ(ht::device_of((char *) p + 999), 0);
    const auto * bytes = static_cast<const uint8_t *>(p);
    for (int i = 0; i < 1000; ++i) {
        ASSERT_EQ(bytes[i], 0xFF) << "fresh memory holds NaN bytes";
    }
    size_t free1 = 0;
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free0 - free1, 1024u); // 1000 bytes in a 256-byte-aligned block
    void * big = nullptr;
    EXPECT_EQ(cudaMalloc(&big, 5000 * MiB), cudaErrorMemoryAllocation);
    EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaFree(p), cudaSuccess);
    EXPECT_EQ(ht::device_of(p), -1);
    EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue); // freed already
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    int host = 0;
    EXPECT_EQ(ht::device_of(&host), -1);
    void * zero = &host;
    EXPECT_EQ(cudaMalloc(&zero, 0), cudaSuccess);
    EXPECT_EQ(zero, nullptr);
}

TEST_F(HostRuntime, CopiesOfEveryKind) {
    const size_t         n = 5000;
    std::vector<uint8_t> ref(n), out(n, 0);
    for (size_t i = 0; i < n; ++i) {
        ref[i] = (uint8_t) (i * 31 + 7);
    }
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(cudaMalloc(&a, n), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b, n), cudaSuccess);
    TestStream s;
    EXPECT_EQ(cudaMemcpyAsync(a, ref.data(), n, cudaMemcpyHostToDevice, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), b, n, cudaMemcpyDefault, s.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    EXPECT_EQ(out, ref);
    std::vector<uint8_t> host2(n);
    EXPECT_EQ(cudaMemcpy(host2.data(), ref.data(), n, cudaMemcpyHostToHost), cudaSuccess);
    EXPECT_EQ(host2, ref);

    // a kind that contradicts the pointers, a range past the end, freed memory, a bad direction
    EXPECT_EQ(cudaMemcpyAsync(a, ref.data(), n, cudaMemcpyDeviceToHost, s.s), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), (char *) a + 8, n, cudaMemcpyDeviceToHost, s.s), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), a, n, (cudaMemcpyKind) 9, s.s), cudaErrorInvalidMemcpyDirection);
    EXPECT_EQ(cudaFree(b), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(b, a, 16, cudaMemcpyDeviceToDevice, s.s), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

    // memset
    EXPECT_EQ(cudaMemsetAsync((char *) a + 10, 0x5A, 100, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), a, n, cudaMemcpyDeviceToHost, s.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], i >= 10 && i < 110 ? 0x5A : ref[i]) << i;
    }
    EXPECT_EQ(cudaMemset(a, 0, n + 1), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFree(a), cudaSuccess);
}

TEST_F(HostRuntime, PitchedAndPeerCopies) {
    // a 7 x 13 box out of a 40-byte-pitch matrix on device 0 into a 24-byte-pitch one on device 1
    const size_t         rows = 19, spitch = 40, dpitch = 24, width = 13, height = 7;
    std::vector<uint8_t> src(rows * spitch), got(rows * dpitch), ref(rows * dpitch, 0xFF);
    for (size_t i = 0; i < src.size(); ++i) {
        src[i] = (uint8_t) (i * 13 + 1);
    }
    void *d0 = nullptr, *d1 = nullptr;
    ASSERT_EQ(cudaMalloc(&d0, src.size()), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d1, got.size()), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    TestStream s;
    ASSERT_EQ(cudaMemcpyAsync(d0, src.data(), src.size(), cudaMemcpyHostToDevice, s.s), cudaSuccess);

    cudaMemcpy3DPeerParms p{};
    p.srcPtr    = make_cudaPitchedPtr(d0, spitch, spitch, rows);
    p.srcPos    = make_cudaPos(3, 2, 0);
    p.srcDevice = 0;
    p.dstPtr    = make_cudaPitchedPtr(d1, dpitch, dpitch, rows);
    p.dstPos    = make_cudaPos(5, 4, 0);
    p.dstDevice = 1;
    p.extent    = make_cudaExtent(width, height, 1);
    ASSERT_EQ(cudaMemcpy3DPeerAsync(&p, s.s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), d1, got.size(), cudaMemcpyDeviceToHost, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    for (size_t y = 0; y < height; ++y) {
        for (size_t x = 0; x < width; ++x) {
            ref[(4 + y) * dpitch + 5 + x] = src[(2 + y) * spitch + 3 + x];
        }
    }
    EXPECT_EQ(got, ref);

    // cudaMemcpy2DAsync back from device 1 to a host matrix
    std::vector<uint8_t> back(height * 16, 0);
    ASSERT_EQ(cudaMemcpy2DAsync(back.data(), 16, (char *) d1 + 4 * dpitch + 5, dpitch, width, height,
                                cudaMemcpyDeviceToHost, s.s),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    for (size_t y = 0; y < height; ++y) {
        for (size_t x = 0; x < width; ++x) {
            ASSERT_EQ(back[y * 16 + x], src[(2 + y) * spitch + 3 + x]) << y << "," << x;
        }
    }

    // pitch below the width, a box past the end, devices that do not match the pointers
    EXPECT_EQ(cudaMemcpy2DAsync(back.data(), 8, d1, dpitch, width, 2, cudaMemcpyDeviceToHost, s.s),
              cudaErrorInvalidPitchValue);
    p.extent = make_cudaExtent(width, rows, 1);
    EXPECT_EQ(cudaMemcpy3DPeerAsync(&p, s.s), cudaErrorInvalidValue);
    p.extent    = make_cudaExtent(width, height, 1);
    p.dstDevice = 0;
    EXPECT_EQ(cudaMemcpy3DPeerAsync(&p, s.s), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpyPeerAsync(d1, 0, d0, 0, 16, s.s), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpyPeerAsync(d1, 1, d0, 0, 16, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyPeerAsync(d1, 5, d0, 0, 16, s.s), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    (void) cudaGetLastError();
    EXPECT_EQ(cudaFree(d0), cudaSuccess);
    EXPECT_EQ(cudaFree(d1), cudaSuccess);
}

TEST_F(HostRuntime, PeerAccessRules) {
    void * on1 = nullptr;
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&on1, 1024), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    std::string why;
    EXPECT_EQ(ht::check_access(1, on1, 1024, nullptr), cudaSuccess);
    EXPECT_EQ(ht::check_access(0, on1, 1024, &why), cudaErrorIllegalAddress);
    EXPECT_NE(why.find("device 0"), std::string::npos) << why;
    EXPECT_NE(why.find("device 1"), std::string::npos) << why;
    int can = 0;
    EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    EXPECT_EQ(can, 1);
    EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    EXPECT_EQ(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
    EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_EQ(ht::check_access(0, on1, 1024, nullptr), cudaSuccess);
    EXPECT_EQ(ht::check_access(0, on1, 1025, &why), cudaErrorIllegalAddress); // past the allocation
    EXPECT_NE(why.find("past the end"), std::string::npos) << why;
    EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
    EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    EXPECT_EQ(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);
    EXPECT_EQ(ht::check_access(0, on1, 1024, nullptr), cudaErrorIllegalAddress);
    EXPECT_EQ(cudaFree(on1), cudaSuccess);
    EXPECT_EQ(ht::check_access(1, on1, 16, nullptr), cudaErrorIllegalAddress); // freed
}

TEST_F(HostRuntime, PoolMemoryNeedsPoolAccess) {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    void *        p     = nullptr;
    cudaMemPool_t pool1 = nullptr;
    ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool1, 1), cudaSuccess);
    uint64_t keep = UINT64_MAX, got = 0;
    EXPECT_EQ(cudaMemPoolSetAttribute(pool1, cudaMemPoolAttrReleaseThreshold, &keep), cudaSuccess);
    EXPECT_EQ(cudaMemPoolGetAttribute(pool1, cudaMemPoolAttrReleaseThreshold, &got), cudaSuccess);
    EXPECT_EQ(got, UINT64_MAX);
    {
        TestStream s; // on device 1
        ASSERT_EQ(cudaMallocAsync(&p, 4096, s.s), cudaSuccess);
        EXPECT_EQ(ht::device_of(p), 1);
        ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
        // peer access does not open pool memory (Note [ownership])
        ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
        EXPECT_EQ(ht::check_access(0, p, 4096, nullptr), cudaErrorIllegalAddress);
        cudaMemAccessFlags flags = cudaMemAccessFlagsProtReadWrite;
        cudaMemLocation    where{ cudaMemLocationTypeDevice, 0 };
        EXPECT_EQ(cudaMemPoolGetAccess(&flags, pool1, &where), cudaSuccess);
        EXPECT_EQ(flags, cudaMemAccessFlagsProtNone);
        cudaMemAccessDesc desc{ { cudaMemLocationTypeDevice, 0 }, cudaMemAccessFlagsProtReadWrite };
        EXPECT_EQ(cudaMemPoolSetAccess(pool1, &desc, 1), cudaSuccess);
        EXPECT_EQ(cudaMemPoolGetAccess(&flags, pool1, &where), cudaSuccess);
        EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);
        EXPECT_EQ(ht::check_access(0, p, 4096, nullptr), cudaSuccess);
        // the owner keeps its access
        cudaMemAccessDesc own{ { cudaMemLocationTypeDevice, 1 }, cudaMemAccessFlagsProtNone };
        EXPECT_EQ(cudaMemPoolSetAccess(pool1, &own, 1), cudaErrorInvalidValue);
        EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
        desc.flags = cudaMemAccessFlagsProtNone;
        EXPECT_EQ(cudaMemPoolSetAccess(pool1, &desc, 1), cudaSuccess);
        EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
        // freed when the stream reaches the free
        EXPECT_EQ(cudaFreeAsync(p, s.s), cudaSuccess);
        EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
        EXPECT_EQ(ht::device_of(p), -1);
    }
    void * m = nullptr;
    ASSERT_EQ(cudaMalloc(&m, 256), cudaSuccess);
    EXPECT_EQ(cudaFreeAsync(m, nullptr), cudaErrorInvalidValue); // cudaMalloc memory
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFree(m), cudaSuccess);
}

TEST_F(HostRuntime, PinnedHostMemory) {
    void * pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, 10000), cudaSuccess);
    EXPECT_EQ(ht::check_access(1, pinned, 10000, nullptr), cudaSuccess);
    std::vector<char> pageable(8192);
    EXPECT_EQ(ht::check_access(0, pageable.data(), 16, nullptr), cudaErrorIllegalAddress);
    EXPECT_EQ(cudaHostRegister(pageable.data(), 4096, cudaHostRegisterPortable), cudaSuccess);
    EXPECT_EQ(ht::check_access(0, pageable.data(), 4096, nullptr), cudaSuccess);
    EXPECT_EQ(ht::check_access(0, pageable.data(), 4097, nullptr), cudaErrorIllegalAddress);
    EXPECT_EQ(cudaHostRegister(pageable.data() + 100, 16, 0), cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_EQ(cudaHostUnregister(pageable.data() + 100), cudaErrorHostMemoryNotRegistered);
    EXPECT_EQ(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);
    EXPECT_EQ(cudaHostUnregister(pageable.data()), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(pageable.data()), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(HostRuntime, StreamsRunInOrder) {
    TestStream       s;
    std::vector<int> seen;
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(ht::enqueue(s.s, "append",
                              [&seen, i](std::string &) {
                                  seen.push_back(i);
                                  return cudaSuccess;
                              }),
                  cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    ASSERT_EQ(seen.size(), 200u);
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(seen[(size_t) i], i);
    }
    EXPECT_EQ(ht::stream_device(s.s), 0);
    EXPECT_EQ(ht::stream_device(cudaStreamPerThread), 0);

    // cudaStreamDestroy returns, and the work still completes
    std::atomic<bool> done{ false };
    cudaStream_t      t = nullptr;
    ASSERT_EQ(cudaStreamCreate(&t), cudaSuccess);
    ht::enqueue(t, "slow", [&done](std::string &) {
        sleep_ms(30);
        done = true;
        return cudaSuccess;
    });
    EXPECT_EQ(cudaStreamDestroy(t), cudaSuccess);
    EXPECT_TRUE(done.load());
    EXPECT_EQ(cudaStreamDestroy(t), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST_F(HostRuntime, EventsOrderStreams) {
    TestStream       a, b;
    cudaEvent_t      e = nullptr;
    std::atomic<int> flag{ 0 };
    int              seen = -1;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaSuccess);              // never recorded
    EXPECT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess); // a no-op, as in CUDA
    ht::enqueue(a.s, "slow", [&flag](std::string &) {
        sleep_ms(60);
        flag = 1;
        return cudaSuccess;
    });
    ASSERT_EQ(cudaEventRecord(e, a.s), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess); // not ready is not an error
    EXPECT_EQ(cudaStreamQuery(a.s), cudaErrorNotReady);
    // a stream of the other device waits too
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    TestStream c;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    int seen_c = -1;
    ASSERT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(c.s, e, 0), cudaSuccess);
    ht::enqueue(b.s, "read", [&](std::string &) {
        seen = flag.load();
        return cudaSuccess;
    });
    ht::enqueue(c.s, "read", [&](std::string &) {
        seen_c = flag.load();
        return cudaSuccess;
    });
    EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(c.s), cudaSuccess);
    EXPECT_EQ(seen, 1);
    EXPECT_EQ(seen_c, 1);
    EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(a.s), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST_F(HostRuntime, FailuresReportedOnce) {
    TestStream s;
    bool       later_ran = false;
    ht::enqueue(s.s, "failing work", [](std::string & message) {
        message = "made to fail";
        return cudaErrorIllegalAddress;
    });
    ht::enqueue(s.s, "later", [&](std::string &) {
        later_ran = true;
        return cudaSuccess;
    });
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaErrorIllegalAddress);
    EXPECT_TRUE(later_ran);
    EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    ht::enqueue(s.s, "failing work", [](std::string &) { return cudaErrorLaunchFailure; });
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    (void) cudaGetLastError();
}

TEST_F(HostRuntime, LastErrorSemantics) {
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
    EXPECT_EQ(cudaSetDevice(42), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess); // success does not clear it
    EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    std::thread([] { EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess); }).join(); // per thread
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
    EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureInvalidated), "cudaErrorStreamCaptureInvalidated");
    EXPECT_EQ((int) cudaErrorStreamCaptureIsolation, 905);
    EXPECT_EQ((int) cudaErrorIllegalAddress, 700);
    int v = 0;
    EXPECT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
    EXPECT_GE(v, 12000);
}

} // namespace
