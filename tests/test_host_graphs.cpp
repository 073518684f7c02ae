// The host target's CUDA runtime, continued (see test_host_runtime.cpp): stream capture and graph
// replay with CUDA's restrictions, graph memory, the happens-before checker watching streams, and
// kernel launches (configuration, ownership of pointer parameters, faults, replay).

#include "host_runtime_util.h"

#include "host_target/device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ht = wsp::host_target;

namespace {

using namespace wsp::test::host;

void count_up(void * counter) {
    ++*static_cast<std::atomic<int> *>(counter);
}

TEST_F(HostRuntime, CaptureAndReplay) {
    const size_t n = 1024;
    TestStream   s;
    int *        in = nullptr, *out = nullptr;
    ASSERT_EQ(cudaMallocHost((void **) &in, n * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost((void **) &out, n * sizeof(int)), cudaSuccess);
    void * dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 2 * n * sizeof(int)), cudaSuccess);
    std::atomic<int> counter{ 0 };

    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(s.s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive);
    EXPECT_EQ(cudaMemcpyAsync(dev, in, n * sizeof(int), cudaMemcpyHostToDevice, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync((int *) dev + n, 0x01, n * sizeof(int), s.s), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(s.s, count_up, &counter), cudaSuccess);
    EXPECT_EQ(ht::enqueue(s.s, "add",
                          [dev, n](std::string &) {
                              int * d = (int *) dev;
                              for (size_t i = 0; i < n; ++i) {
                                  d[i] += d[n + i];
                              }
                              return cudaSuccess;
                          },
                          { { (uintptr_t) dev, (uintptr_t) dev + 2 * n * sizeof(int) } },
                          { { (uintptr_t) dev, (uintptr_t) dev + n * sizeof(int) } }),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(out, dev, n * sizeof(int), cudaMemcpyDeviceToHost, s.s), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    ASSERT_NE(graph, nullptr);
    EXPECT_EQ(cudaStreamIsCapturing(s.s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    EXPECT_EQ(counter.load(), 0) << "captured work does not run";

    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
        for (size_t i = 0; i < n; ++i) {
            in[i] = (int) i * (replay + 1);
        }
        ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
        for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[i], (int) i * (replay + 1) + 0x01010101) << "replay " << replay << " element " << i;
        }
    }
    EXPECT_EQ(counter.load(), 3);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaFree(dev), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(in), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(out), cudaSuccess);
}

TEST_F(HostRuntime, CaptureRestrictions) {
    TestStream  s, other;
    cudaGraph_t graph = nullptr;
    void *      dev   = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 256), cudaSuccess);

    // synchronizing the capturing stream
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(dev, 0, 256, s.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(s.s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(cudaMemsetAsync(dev, 0, 256, s.s), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    (void) cudaGetLastError();

    // an unsafe call from the capturing thread, in thread-local mode
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    void * p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, 256), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaErrorStreamCaptureInvalidated);
    (void) cudaGetLastError();
    // ... allowed from another thread in thread-local mode
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    std::thread([] {
        std::vector<char> host(16);
        void *            q = nullptr;
        EXPECT_EQ(cudaMalloc(&q, 16), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(q, host.data(), 16, cudaMemcpyHostToDevice), cudaSuccess);
        EXPECT_EQ(cudaFree(q), cudaSuccess);
    }).join();
    // and the other stream, not capturing, can still be synchronized by another thread
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    ASSERT_NE(graph, nullptr);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    // ... but not in global mode
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal), cudaSuccess);
    std::thread([] {
        void * q = nullptr;
        EXPECT_EQ(cudaMalloc(&q, 16), cudaErrorStreamCaptureUnsupported);
        (void) cudaGetLastError();
    }).join();
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaErrorStreamCaptureInvalidated);
    (void) cudaGetLastError();
    // relaxed mode permits it
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess);
    EXPECT_EQ(cudaFree(p), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(other.s), cudaSuccess);
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);

    // a wait on an event recorded outside the capture
    cudaEvent_t e = nullptr;
    ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, other.s), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(cudaStreamWaitEvent(s.s, e, 0), cudaErrorStreamCaptureIsolation);
    EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaErrorStreamCaptureInvalidated);
    (void) cudaGetLastError();

    // fork and join through events: the other stream's work joins the graph
    std::atomic<int> counter{ 0 };
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, s.s), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaErrorCapturedEvent);
    EXPECT_EQ(cudaStreamWaitEvent(other.s, e, 0), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(other.s, count_up, &counter), cudaSuccess);
    cudaEvent_t back = nullptr;
    ASSERT_EQ(cudaEventCreate(&back), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(back, other.s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(s.s, back, 0), cudaSuccess);
    EXPECT_EQ(cudaStreamEndCapture(other.s, &graph), cudaErrorStreamCaptureUnmatched);
    ASSERT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    EXPECT_EQ(cudaStreamIsCapturing(other.s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone);
    EXPECT_EQ(cudaStreamSynchronize(other.s), cudaSuccess);
    EXPECT_EQ(counter.load(), 0);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, other.s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess); // after the first launch, whatever the stream
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    EXPECT_EQ(counter.load(), 2);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(back), cudaSuccess);
    // the legacy stream cannot be captured
    EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeRelaxed), cudaErrorStreamCaptureUnsupported);
    (void) cudaGetLastError();
    EXPECT_EQ(cudaStreamSynchronize(other.s), cudaSuccess);
    EXPECT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(HostRuntime, GraphMemory) {
    TestStream s;
    size_t     free0 = 0, total = 0, free1 = 0;
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    int * out = nullptr;
    ASSERT_EQ(cudaMallocHost((void **) &out, 4096), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    void * tmp = nullptr;
    ASSERT_EQ(cudaMallocAsync(&tmp, 4096, s.s), cudaSuccess);
    EXPECT_EQ(ht::device_of(tmp), 0);
    EXPECT_EQ(cudaMemsetAsync(tmp, 0x7F, 4096, s.s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(out, tmp, 4096, cudaMemcpyDeviceToHost, s.s), cudaSuccess);
    EXPECT_EQ(cudaFreeAsync(tmp, s.s), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    EXPECT_EQ(cudaFreeAsync(tmp, s.s), cudaErrorInvalidValue); // the graph's
    EXPECT_EQ(cudaFree(tmp), cudaErrorInvalidValue);
    (void) cudaGetLastError();
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
        std::memset(out, 0, 4096);
        ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
        EXPECT_EQ(out[0], 0x7F7F7F7F);
        EXPECT_EQ(out[1023], 0x7F7F7F7F);
    }
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free0 - free1, 4096u); // held by the exec
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free1, free0);
    EXPECT_EQ(ht::device_of(tmp), -1);
    EXPECT_EQ(cudaFreeHost(out), cudaSuccess);
}

TEST_F(HostRuntime, RaceCheckerWatchesStreams) {
    wsp::race::Checker & checker = wsp::race::checker();
    TestStream           a, b;
    void *               dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, 1024), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    // ordered by an event: no race
    size_t      before = checker.races();
    cudaEvent_t e      = nullptr;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 1, 1024, a.s), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, a.s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 2, 512, b.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
    EXPECT_EQ(checker.races(), before);
    // the host synchronized with both: its next copy is ordered too
    std::vector<char> host(1024);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), dev, 1024, cudaMemcpyDeviceToHost, a.s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
    EXPECT_EQ(checker.races(), before);
    EXPECT_EQ(host[0], 2);
    EXPECT_EQ(host[1000], 1);

    // unordered writes of the same bytes on two streams: reported whatever the timing
    ASSERT_EQ(cudaMemsetAsync(dev, 3, 256, a.s), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync((char *) dev + 128, 4, 256, b.s), cudaSuccess);
    const cudaError_t ea = cudaStreamSynchronize(a.s), eb = cudaStreamSynchronize(b.s);
    EXPECT_TRUE(ea == cudaErrorLaunchFailure || eb == cudaErrorLaunchFailure);
    EXPECT_EQ(checker.races(), before + 1);
    (void) cudaGetLastError();

    // note_accesses: the kernel that follows is covered at its stream's clock
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    before = checker.races();
    ASSERT_EQ(
        ht::note_accesses(a.s, {}, { { (uintptr_t) dev, (uintptr_t) dev + 64 } }, wsp::race::text_label("noted write")),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), dev, 64, cudaMemcpyDeviceToHost, b.s), cudaSuccess);
    const cudaError_t na = cudaStreamSynchronize(a.s), nb = cudaStreamSynchronize(b.s);
    EXPECT_TRUE(na == cudaErrorLaunchFailure || nb == cudaErrorLaunchFailure);
    EXPECT_EQ(checker.races(), before + 1);
    (void) cudaGetLastError();

    // noted bytes are checked for ownership: device 1's memory, not reachable from device 0's
    // stream without peer access, nor is pageable host memory
    void * other = nullptr;
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&other, 64), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(ht::note_accesses(a.s, { { (uintptr_t) other, (uintptr_t) other + 64 } }, {},
                                wsp::race::text_label("peer read")),
              cudaErrorIllegalAddress);
    EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_EQ(ht::note_accesses(a.s, {}, { { (uintptr_t) host.data(), (uintptr_t) host.data() + 64 } },
                                wsp::race::text_label("pageable write")),
              cudaErrorIllegalAddress);
    (void) cudaGetLastError();
    // two tensors in touching allocations: each is within its own (the ranges merge only later)
    void * next = nullptr;
    ASSERT_EQ(cudaMalloc(&next, 256), cudaSuccess);
    EXPECT_EQ(ht::note_accesses(
                  a.s, { { (uintptr_t) dev, (uintptr_t) dev + 1024 }, { (uintptr_t) next, (uintptr_t) next + 256 } },
                  {}, wsp::race::text_label("own reads")),
              cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaFree(next), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
    EXPECT_EQ(cudaFree(other), cudaSuccess);

    EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
    EXPECT_EQ(cudaFree(dev), cudaSuccess);
}

// Note [graph update]: an exec takes the parameters of a graph of the same nodes (kernels may
// change their arguments, copies theirs) and its next launches run them; launches queued before
// keep what they had; a graph of other nodes, or one holding graph memory, is refused
TEST_F(HostRuntime, GraphExecUpdate) {
    const unsigned n = 64;
    TestStream     s;
    int *          out = nullptr;
    ASSERT_EQ(cudaMalloc((void **) &out, 2 * n * sizeof(int)), cudaSuccess);
    // records "fill out[base..base+n) with value, then copy it to the host"
    auto record = [&](int * base, int value, int * host, bool extra) {
        const void * pointers[] = { base };
        auto         body       = [base, value] { base[blockIdx.x * blockDim.x + threadIdx.x] = value; };
        EXPECT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        EXPECT_EQ(ht::launch_kernel(s.s, dim3(2), dim3(n / 2), 0, pointers, 1, body, "fill"), cudaSuccess);
        if (extra) {
            EXPECT_EQ(ht::launch_kernel(s.s, dim3(2), dim3(n / 2), 0, pointers, 1, body, "fill"), cudaSuccess);
        }
        EXPECT_EQ(cudaMemcpyAsync(host, base, n * sizeof(int), cudaMemcpyDeviceToHost, s.s), cudaSuccess);
        cudaGraph_t g = nullptr;
        EXPECT_EQ(cudaStreamEndCapture(s.s, &g), cudaSuccess);
        return g;
    };
    int * host_a = nullptr;
    int * host_b = nullptr;
    ASSERT_EQ(cudaMallocHost((void **) &host_a, n * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost((void **) &host_b, n * sizeof(int)), cudaSuccess);
    cudaGraph_t     first = record(out, 1, host_a, false);
    cudaGraphExec_t exec  = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, first, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess); // queued before the update: fills with 1

    cudaGraph_t                   second = record(out + n, 2, host_b, false);
    cudaGraphExecUpdateResultInfo info{};
    ASSERT_EQ(cudaGraphExecUpdate(exec, second, &info), cudaSuccess);
    EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(host_a[i], 1) << i;
        ASSERT_EQ(host_b[i], 2) << i;
    }

    cudaGraph_t other = record(out, 3, host_a, true); // one more kernel: another topology
    EXPECT_EQ(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
    EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
    EXPECT_EQ(cudaGetLastError(), cudaErrorGraphExecUpdateFailure);
    EXPECT_EQ(cudaGraphExecUpdate(exec, second, nullptr), cudaErrorInvalidValue);
    (void) cudaGetLastError();
    // the refused update left the exec as it was
    std::memset(host_b, 0, n * sizeof(int));
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    EXPECT_EQ(host_b[0], 2);

    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    for (cudaGraph_t g : { first, second, other }) {
        EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
    }
    EXPECT_EQ(cudaFree(out), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(host_a), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(host_b), cudaSuccess);
}

TEST_F(HostRuntime, KernelLaunches) {
    const unsigned blocks = 3, threads = 64, n = blocks * threads;
    TestStream     s;
    int *          out = nullptr;
    ASSERT_EQ(cudaMalloc((void **) &out, n * sizeof(int)), cudaSuccess);
    struct Args {
        int * out;
        int   scale;
    } args{ out, 3 };
    const void * args_pointers[] = { args.out }; // the kernel's pointer parameters
    auto         body            = [args] {
        const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        args.out[i]      = (int) i * args.scale;
    };
    ASSERT_EQ(ht::launch_kernel(s.s, dim3(blocks), dim3(threads), 0, args_pointers, 1, body, "scale"), cudaSuccess);
    std::vector<int> host(n);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(host[i], (int) i * 3) << i;
    }

    // configurations a GPU refuses
    EXPECT_EQ(ht::launch_kernel(s.s, dim3(1), dim3(1025), 0, args_pointers, 1, body, "scale"),
              cudaErrorInvalidConfiguration);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(ht::launch_kernel(s.s, dim3(1), dim3(1, 1, 65), 0, args_pointers, 1, body, "scale"),
              cudaErrorInvalidConfiguration);
    EXPECT_EQ(ht::launch_kernel(s.s, dim3(1, 65536), dim3(1), 0, args_pointers, 1, body, "scale"),
              cudaErrorInvalidConfiguration);
    EXPECT_EQ(ht::launch_kernel(s.s, dim3(0), dim3(1), 0, args_pointers, 1, body, "scale"),
              cudaErrorInvalidConfiguration);
    EXPECT_EQ(ht::launch_kernel(s.s, dim3(1), dim3(32), 49 << 10, args_pointers, 1, body, "scale"),
              cudaErrorInvalidConfiguration);
    (void) cudaGetLastError();

    // an argument in another device's memory without peer access
    int * other = nullptr;
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void **) &other, 64), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const void * foreign[] = { other };
    EXPECT_EQ(ht::launch_kernel(
                  s.s, dim3(1), dim3(1), 0, foreign, 1, [] {}, "foreign"),
              cudaErrorIllegalAddress);
    EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
    // an end pointer is a valid argument
    const void * end[] = { out + n };
    EXPECT_EQ(ht::launch_kernel(
                  s.s, dim3(1), dim3(1), 0, end, 1, [] {}, "end"),
              cudaSuccess);

    // a fault in the kernel: the next synchronize reports a launch failure
    EXPECT_EQ(ht::launch_kernel(
                  s.s, dim3(2), dim3(32), 0, args_pointers, 1,
                  [] {
                      if (blockIdx.x == 1 && threadIdx.x == 5) {
                          __trap();
                      }
                  },
                  "trap"),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaErrorLaunchFailure);
    EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    (void) cudaGetLastError();

    // a captured kernel re-runs at each replay
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(out, 0, n * sizeof(int), s.s), cudaSuccess);
    ASSERT_EQ(ht::launch_kernel(s.s, dim3(blocks), dim3(threads), 0, args_pointers, 1, body, "scale"), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
        std::fill(host.begin(), host.end(), -1);
        ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(host.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost, s.s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
        EXPECT_EQ(host[n - 1], (int) (n - 1) * 3);
    }
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    EXPECT_EQ(cudaFree(out), cudaSuccess);
    EXPECT_EQ(cudaSetDevice(1), cudaSuccess);
    EXPECT_EQ(cudaFree(other), cudaSuccess);
}

} // namespace
