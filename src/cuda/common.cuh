#pragma once

// Shared by every CUDA source: the vendor's names (Note [vendors]), the check macros that turn a failed call into a
// logged message naming the call, the device and the place, and DeviceGuard, which makes a device current and restores
// the previous. Failures never abort: callers turn a false check into NULL / false / a status.

#include "ggml-cuda.h"
#include "ggml.h"
#include "vendor.cuh"

#include "../core/log.h"

#include <cstddef>
#include <cstdint>

namespace wsp::cuda {

// logs and returns false when err is not success; clears the sticky "last error"
bool check_cuda(cudaError_t err, const char * call, int device, const char * file, int line);
#if WSP_GPU_HAS_BLAS
bool check_blas(cublasStatus_t status, const char * call, int device, const char * file, int line);
#endif

// the current device, restored on scope exit
class DeviceGuard {
public:
    explicit DeviceGuard(int physical_device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard &)             = delete;
    DeviceGuard & operator=(const DeviceGuard &) = delete;

private:
    int previous_ = -1;
};

// the warp of the target (32, or 64 on AMD's CDNA and the host target built so), and the mask of
// every lane of it
constexpr int             WARP_SIZE = WSP_GPU_WARP_SIZE;
constexpr wsp_lane_mask_t FULL_MASK = WSP_GPU_FULL_MASK;

} // namespace wsp::cuda

#define WSP_CUDA_OK(call, device)   ::wsp::cuda::check_cuda((call), #call, (device), __FILE__, __LINE__)
#define WSP_CUBLAS_OK(call, device) ::wsp::cuda::check_blas((call), #call, (device), __FILE__, __LINE__)
// after every kernel launch
#define WSP_CUDA_LAUNCH_OK(device) \
    ::wsp::cuda::check_cuda(cudaGetLastError(), "kernel launch", (device), __FILE__, __LINE__)
