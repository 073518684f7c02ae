#pragma once

// The host target's own API, beside the CUDA names of runtime.h: the emulated machine's
// configuration (for tests), and the hooks through which the launch helper, cuBLAS and NCCL
// put work on streams. See Note [host target] in runtime.cpp.

#include "../race/race.h"
#include "grid.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

// the CUDA handle types (runtime.h has the rest of the CUDA names)
enum cudaError : int; // defined in runtime.h
typedef struct CUstream_st * cudaStream_t;
typedef enum cudaError       cudaError_t;

namespace wsp::host_target {

// Note [host devices]: the machine the runtime emulates, fixed at its first use. Defaults come
// from the environment: WSP_GGML_CUDA_HOST_DEVICES (2), WSP_GGML_CUDA_HOST_CC (80: 8.0),
// WSP_GGML_CUDA_HOST_SMS (4), WSP_GGML_CUDA_HOST_MEMORY_MB (4096 per device),
// WSP_GGML_CUDA_HOST_PEER ("all", "none", or pairs "0-1,1-0": what cudaDeviceCanAccessPeer allows),
// WSP_GGML_CUDA_HOST_POOLS (1; 0: devices without stream-ordered pools, cudaMallocAsync refused).
struct MachineConfig {
    int                            devices  = 2;
    int                            cc_major = 8, cc_minor = 0;
    int                            sm_count = 4;
    size_t                         memory   = (size_t) 4096 << 20; // bytes per device
    bool                           pools    = true;                // cudaMallocAsync and memory pools
    std::vector<std::vector<bool>> peer;                           // [a][b]; empty: every pair
};

// the configuration in force (read from the environment on first use)
const MachineConfig & machine();
// replaces the configuration; false (logged) once any CUDA call has used the runtime
bool configure(const MachineConfig & config);

// the device whose memory (cudaMalloc, cudaMallocAsync or a graph's) holds p; -1 otherwise
int device_of(const void * p);

// Can a kernel or cuBLAS call running on `device` touch [p, p + n)? Its own memory, a peer's
// whose access it enabled (cudaDeviceEnablePeerAccess for cudaMalloc memory, cudaMemPoolSetAccess
// for pool memory), pinned host memory. Anything else: cudaErrorIllegalAddress with a message.
cudaError_t check_access(int device, const void * p, size_t n, std::string * message);

// The device of a stream (the current device for the legacy and per-thread default streams).
int stream_device(cudaStream_t stream);

// Host work in stream order: runs on the stream's worker after the work queued before it, or is
// recorded into the graph when the stream is capturing (and runs at each replay). A failure
// (work returns an error and fills message) is logged and reported by the stream's next
// synchronize, as a failed kernel. reads / writes: device bytes the work touches, for the
// happens-before checker (Note [happens-before checker]).
using Work = std::function<cudaError_t(std::string & message)>;
cudaError_t enqueue(cudaStream_t stream, std::string what, Work work, std::vector<race::Range> reads = {},
                    std::vector<race::Range> writes = {});

// A kernel launch (the launch helper of src/cuda/vendor/host.cuh): checks the configuration (as
// cudaErrorInvalidConfiguration) and the kernel's pointer parameters (Note [argument check]: each
// in a live allocation the launching device may touch, or one past its end; as
// cudaErrorIllegalAddress), then enqueues run_grid. The error is also the thread's last error,
// as a launch's is.
cudaError_t launch_kernel(cudaStream_t stream, dim3 grid, dim3 block, size_t dynamic_shared,
                          const void * const * pointers, size_t n_pointers, std::function<void()> thread_body,
                          const char * kernel_name);

// The bytes the next kernels on a stream read and write (the CUDA backend names them per node:
// kernels take raw pointers, and structs of them). Each range must be memory the stream's device
// may touch (check_access): otherwise cudaErrorIllegalAddress, logged, and nothing is queued.
// Checked in stream order for races like any other access.
cudaError_t note_accesses(cudaStream_t stream, std::vector<race::Range> reads, std::vector<race::Range> writes,
                          race::What what);

} // namespace wsp::host_target
