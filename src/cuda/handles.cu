// Creation of the RAII owners (see handles.cuh).

#include "handles.cuh"

#include "counters.cuh"
#include "device.cuh"

#include <algorithm>
#include <cstdlib>
#include <mutex>

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

bool pools_wanted(int physical) {
    static const bool off = [] {
        const char * env = std::getenv("WSP_GGML_CUDA_POOLS");
        return env != nullptr && std::atoi(env) == 0;
    }();
    return !off && pools_supported(physical);
}

void configure_pool(int physical) {
    static std::once_flag configured[16];
    if (physical < 0 || physical >= 16 || !pools_wanted(physical)) {
        return;
    }
    std::call_once(configured[physical], [physical] {
        DeviceGuard   guard(physical);
        cudaMemPool_t pool = nullptr;
        if (WSP_CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, physical), physical)) {
            uint64_t keep = POOL_KEEP;
            WSP_CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), physical);
        }
    });
}

bool ScratchArena::grow(size_t size, cudaStream_t stream) {
    constexpr size_t MIN_BLOCK = (size_t) 1 << 20;
    size_t           want      = std::max({ size, capacity_ * 2, MIN_BLOCK });
    want                       = (want + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
    configure_pool(physical_);
    DeviceGuard guard(physical_);
    void *      p     = nullptr;
    const bool  pools = pools_wanted(physical_);
    ++counters(index_).device_allocs;
    if ((pools ? cudaMallocAsync(&p, want, stream) : cudaMalloc(&p, want)) != cudaSuccess) {
        (void) cudaGetLastError();
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME ": out of memory on device %d: cannot allocate %zu bytes of scratch\n", index_,
                      want);
        return false;
    }
    const int physical = physical_;
    // in stream order: after the kernels queued with its pieces and the replays of the graphs
    // recorded with it (cudaFree waits for the device)
    auto release = [physical, pools, stream](void * q) {
        DeviceGuard g(physical);
        WSP_CUDA_OK(pools ? cudaFreeAsync(q, stream) : cudaFree(q), physical);
    };
    if (block_ != nullptr && !live_.empty()) {
        retired_.push_back(block_);
        for (Piece & piece : live_) {
            piece.current = false;
        }
    }
    block_    = std::shared_ptr<void>(p, release);
    capacity_ = want;
    return true;
}

void * ScratchArena::take(size_t size, cudaStream_t stream) {
    constexpr size_t ALIGN = 256;
    size_t           top   = 0;
    for (const Piece & piece : live_) {
        top = piece.current ? std::max(top, piece.end) : top;
    }
    const size_t offset = (top + ALIGN - 1) / ALIGN * ALIGN;
    if (offset + size > capacity_) {
        if (recording_) {
            short_ = std::max(short_, offset + size);
            return nullptr;
        }
        if (!grow(size, stream)) {
            return nullptr;
        }
        return take(size, stream);
    }
    void * p = static_cast<char *>(block_.get()) + offset;
    live_.push_back({ p, offset, offset + size, true });
    return p;
}

void ScratchArena::release(void * p) {
    for (size_t i = 0; i < live_.size(); ++i) {
        if (live_[i].p == p) {
            live_.erase(live_.begin() + (std::ptrdiff_t) i);
            break;
        }
    }
    if (live_.empty()) {
        retired_.clear();
    }
}

void ScratchArena::set_recording(bool recording) {
    recording_ = recording;
    if (recording) {
        short_ = 0;
    }
}

bool ScratchArena::grow_for_capture(cudaStream_t stream) {
    const size_t need = short_;
    short_            = 0;
    return need <= capacity_ || grow(need, stream);
}

DeviceMemory alloc_device(int index, size_t size, const char * what) {
    const int   physical = physical_of(index);
    DeviceGuard guard(physical);
    void *      p = nullptr;
    if (size > 0) {
        ++counters(index).device_allocs;
        (void) cudaMalloc(&p, size);
    }
    if (size > 0 && p == nullptr) {
        (void) cudaGetLastError();
        size_t free_mem = 0, total = 0;
        (void) cudaMemGetInfo(&free_mem, &total);
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME
                      ": out of memory on device %d: cannot allocate %zu bytes (%.1f MiB) for %s; %.1f MiB free\n",
                      index, size, size / 1048576.0, what, free_mem / 1048576.0);
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
