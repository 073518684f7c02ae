// Creation of the RAII owners (see handles.cuh).

#include "handles.cuh"

#include "counters.cuh"
#include "device.cuh"

namespace wsp::cuda {

Stream make_stream(int physical) {
    DeviceGuard  guard(physical);
    cudaStream_t s = nullptr;
    if (!WSP_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), physical)) {
        return {};
    }
    return Stream(physical, s);
}

Event make_event(int physical) {
    DeviceGuard guard(physical);
    cudaEvent_t e = nullptr;
    if (!WSP_CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), physical)) {
        return {};
    }
    return Event(physical, e);
}

#if WSP_GPU_HAS_BLAS
BlasHandle make_blas(int physical, cudaStream_t stream) {
    DeviceGuard    guard(physical);
    cublasHandle_t h = nullptr;
    if (!WSP_CUBLAS_OK(cublasCreate(&h), physical)) {
        return {};
    }
    BlasHandle owner(physical, h);
    if (!WSP_CUBLAS_OK(cublasSetStream(h, stream), physical)) {
        return {};
    }
    return owner;
}
#endif

void configure_pool(int physical) {
    static bool configured[16] = {};
    if (physical < 0 || physical >= 16 || configured[physical] || !pools_supported(physical)) {
        return;
    }
    configured[physical] = true;
    DeviceGuard   guard(physical);
    cudaMemPool_t pool = nullptr;
    if (WSP_CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, physical), physical)) {
        uint64_t keep = UINT64_MAX;
        WSP_CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), physical);
    }
}

Scratch::Scratch(int physical, cudaStream_t stream, size_t size) : device_(physical), stream_(stream), size_(size) {
    if (size == 0) {
        return;
    }
    configure_pool(physical);
    DeviceGuard guard(physical);
    ++counters(index_of_physical(physical)).device_allocs;
    const cudaError_t err = pools_supported(physical) ? cudaMallocAsync(&ptr_, size, stream) : cudaMalloc(&ptr_, size);
    if (err != cudaSuccess) {
        (void) cudaGetLastError();
        ptr_ = nullptr;
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME ": out of memory on device %d: cannot allocate %zu bytes of scratch\n",
                      physical, size);
    }
}

Scratch::~Scratch() {
    if (ptr_ != nullptr) {
        DeviceGuard guard(device_);
        // without pools, cudaFree waits for the device (the kernels that use the scratch) first
        WSP_CUDA_OK(pools_supported(device_) ? cudaFreeAsync(ptr_, stream_) : cudaFree(ptr_), device_);
    }
}

DeviceMemory alloc_device(int physical, size_t size, const char * what) {
    configure_pool(physical);
    DeviceGuard guard(physical);
    void *      p     = nullptr;
    const int   index = index_of_physical(physical);
    if (size > 0) {
        ++counters(index).device_allocs;
    }
    if (size > 0 && !pools_supported(physical)) {
        (void) cudaMalloc(&p, size);
    } else if (size > 0 && cudaMallocAsync(&p, size, nullptr) == cudaSuccess &&
               !WSP_CUDA_WAIT(cudaStreamSynchronize(nullptr), index)) {
        // from the pool on the legacy stream, finished before the memory is handed out
        (void) cudaFree(p); // allocated but not usable
        p = nullptr;
    }
    if (size > 0 && p == nullptr) {
        (void) cudaGetLastError();
        size_t free_mem = 0, total = 0;
        (void) cudaMemGetInfo(&free_mem, &total);
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME
                      ": out of memory on device %d: cannot allocate %zu bytes (%.1f MiB) for %s; %.1f MiB free\n",
                      physical, size, size / 1048576.0, what, free_mem / 1048576.0);
        return {};
    }
    return DeviceMemory(physical, p);
}

PinnedMemory alloc_pinned(size_t size) {
    void * p = nullptr;
    if (cudaMallocHost(&p, size) != cudaSuccess) {
        (void) cudaGetLastError();
        return {};
    }
    int dev = 0;
    (void) cudaGetDevice(&dev);
    return PinnedMemory(dev, p);
}

} // namespace wsp::cuda
