// Check helpers and DeviceGuard (see common.cuh).

#include "common.cuh"

namespace wsp::cuda {

bool check_cuda(cudaError_t err, const char * call, int device, const char * file, int line) {
    if (err == cudaSuccess) {
        return true;
    }
    (void) cudaGetLastError(); // a non-sticky error must not be reported again by a later call
    WSP_LOG_ERROR(WSP_GGML_CUDA_NAME " error %d (%s) on device %d in %s at %s:%d\n", (int) err, cudaGetErrorString(err),
                  device, call, file, line);
    return false;
}

#if WSP_GPU_HAS_BLAS
bool check_blas(cublasStatus_t status, const char * call, int device, const char * file, int line) {
    if (status == CUBLAS_STATUS_SUCCESS) {
        return true;
    }
    WSP_LOG_ERROR(WSP_GGML_CUBLAS_NAME " error %d on device %d in %s at %s:%d\n", (int) status, device, call, file,
                  line);
    return false;
}
#endif

DeviceGuard::DeviceGuard(int physical_device) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != physical_device) {
        previous_ = current;
        WSP_CUDA_OK(cudaSetDevice(physical_device), physical_device);
    }
}

DeviceGuard::~DeviceGuard() {
    if (previous_ >= 0) {
        (void) cudaSetDevice(previous_);
    }
}

} // namespace wsp::cuda
