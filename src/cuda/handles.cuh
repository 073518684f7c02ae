#pragma once

// RAII owners of CUDA and cuBLAS handles: move-only, noexcept moves, released on the device that
// made them (through DeviceGuard), and never throwing: a failed release is logged. A default-
// constructed owner holds nothing; creation failures leave it empty with a logged message.

#include "common.cuh"

#include <utility>

namespace wsp::cuda {

template <typename Handle, typename Traits>
class Owner {
public:
    Owner() = default;
    Owner(int device, Handle h) : device_(device), handle_(h) {}
    ~Owner() { reset(); }

    Owner(const Owner &)             = delete;
    Owner & operator=(const Owner &) = delete;
    Owner(Owner && o) noexcept : device_(o.device_), handle_(std::exchange(o.handle_, Handle{})) {}
    Owner & operator=(Owner && o) noexcept {
        if (this != &o) {
            reset();
            device_ = o.device_;
            handle_ = std::exchange(o.handle_, Handle{});
        }
        return *this;
    }

    Handle   get() const { return handle_; }
    int      device() const { return device_; }
    explicit operator bool() const { return handle_ != Handle{}; }

    void reset() {
        if (handle_ != Handle{}) {
            DeviceGuard guard(device_);
            Traits::release(device_, handle_);
            handle_ = Handle{};
        }
    }

private:
    int    device_ = -1; // physical device
    Handle handle_{};
};

struct StreamTraits {
    static void release(int dev, cudaStream_t s) { WSP_CUDA_OK(cudaStreamDestroy(s), dev); }
};
struct EventTraits {
    static void release(int dev, cudaEvent_t e) { WSP_CUDA_OK(cudaEventDestroy(e), dev); }
};
#if WSP_GPU_HAS_BLAS
struct BlasTraits {
    static void release(int dev, cublasHandle_t h) { WSP_CUBLAS_OK(cublasDestroy(h), dev); }
};
using BlasHandle = Owner<cublasHandle_t, BlasTraits>;
#endif
struct DeviceMemoryTraits {
    static void release(int dev, void * p) { WSP_CUDA_OK(cudaFree(p), dev); }
};
struct PinnedMemoryTraits {
    static void release(int dev, void * p) { WSP_CUDA_OK(cudaFreeHost(p), dev); }
};

using Stream       = Owner<cudaStream_t, StreamTraits>;
using Event        = Owner<cudaEvent_t, EventTraits>;
using DeviceMemory = Owner<void *, DeviceMemoryTraits>;
using PinnedMemory = Owner<void *, PinnedMemoryTraits>;

// Scratch memory for one op, stream-ordered: taken from the device's memory pool on the op's
// stream and given back on the same stream, so it is reused as soon as the kernels are done.
class Scratch {
public:
    Scratch(int physical, cudaStream_t stream, size_t size);
    ~Scratch();
    Scratch(const Scratch &)             = delete;
    Scratch & operator=(const Scratch &) = delete;
    void *    get() const { return ptr_; }
    explicit  operator bool() const { return ptr_ != nullptr || size_ == 0; }

private:
    int          device_;
    cudaStream_t stream_;
    size_t       size_;
    void *       ptr_ = nullptr;
};

// Note [memory pool]: device buffers and scratch come from each device's default CUDA memory
// pool, configured once to keep freed memory cached (no return to the driver between graphs).
// Peers reach pool memory once the pool grants them access (Note [peer access]). Devices without
// pools (cudaDevAttrMemoryPoolsSupported) use cudaMalloc / cudaFree: slower, and not capturable.
void configure_pool(int physical);

// constructors that log and return an empty owner on failure
Stream       make_stream(int physical);
Event        make_event(int physical);
DeviceMemory alloc_device(int physical, size_t size, const char * what);
PinnedMemory alloc_pinned(size_t size);
#if WSP_GPU_HAS_BLAS
BlasHandle make_blas(int physical, cudaStream_t stream);
#endif

} // namespace wsp::cuda
