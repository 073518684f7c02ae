#pragma once

// The CUDA devices' counters (Note [counters] in src/backend/counters.h), bumped where the backend
// asks the runtime for the work: kernels at their launch (gpu::launch, and each cuBLAS or NCCL
// call), device graphs at capture and launch, host waits at every synchronize, allocations at the
// allocator. Work is counted for a device index, so that virtual devices on one GPU count apart:
// the index named by the calling thread's CountFor scope, else the first device on the current GPU.

#include "../backend/counters.h"
#include "device.cuh"

#include <utility>

namespace wsp::cuda {

// the counters of device index `index` (a sink that nobody reads for an index out of range)
Counters & counters(int index);

// the device index the calling thread's work is counted for while the scope lives (scopes nest)
class CountFor {
public:
    explicit CountFor(int index);
    ~CountFor();
    CountFor(const CountFor &)             = delete;
    CountFor & operator=(const CountFor &) = delete;

private:
    int previous_;
};

// while the scope lives, the calling thread's launches are recorded into a device graph (stream
// capture): they are counted as the graph's capture and replays, not one by one
class Capturing {
public:
    Capturing();
    ~Capturing();
    Capturing(const Capturing &)             = delete;
    Capturing & operator=(const Capturing &) = delete;

private:
    bool previous_;
};

// one kernel (or library call) enqueued by the calling thread: counted unless it is capturing
void count_launch();
// the same, for a device index named by the caller (NCCL's ranks)
void count_launch(int index);
// the device index of physical device `physical` (the first virtual device on it), -1 for none
int index_of_physical(int physical);

} // namespace wsp::cuda

namespace wsp::gpu {

// the one kernel launch of the sources: counted, then queued by the vendor's enqueue_kernel
template <typename... P, typename... A>
inline void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream, A &&... args) {
    ::wsp::cuda::count_launch();
    enqueue_kernel(kernel, grid, block, shmem, stream, std::forward<A>(args)...);
}

} // namespace wsp::gpu

// a host wait for device `index` (cudaStreamSynchronize, cudaEventSynchronize, ...): counted, then
// checked as WSP_CUDA_OK
#define WSP_CUDA_WAIT(call, index)              \
    (++::wsp::cuda::counters(index).host_syncs, \
     ::wsp::cuda::check_cuda((call), #call, ::wsp::cuda::physical_of(index), __FILE__, __LINE__))
