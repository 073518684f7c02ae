#pragma once

// RAII owners of CUDA and cuBLAS handles: move-only, noexcept moves, released on the device that
// made them (through DeviceGuard), and never throwing: a failed release is logged. A default-
// constructed owner holds nothing; creation failures leave it empty with a logged message.

#include "common.cuh"

#include <memory>
#include <utility>
#include <vector>

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

// Note [scratch arena]: the scratch memory of a backend's ops (converted activations, dequantized
// weight slabs, pointer arrays) comes from one device block per backend, reused by every op:
// the ops of a backend run one after another on its stream, so an op's pieces can be handed to
// the next op as soon as it has queued its kernels. A step allocates nothing once the block has
// grown to what the largest op needs (the warm-up). Growing takes a bigger block; the old one is
// freed in stream order once no piece of it is held and no device graph recorded with its
// addresses is kept (each holds block()). While a device graph is being recorded the block cannot
// grow (an allocation is not captured safely): take() fails, and the recording is retried after
// grow_for_capture() (Note [CUDA graphs]).
class ScratchArena {
public:
    ScratchArena(int index, int physical) : index_(index), physical_(physical) {}
    ScratchArena(const ScratchArena &)             = delete;
    ScratchArena & operator=(const ScratchArena &) = delete;

    // `size` bytes (256-aligned) on `stream` until released; NULL when out of memory (logged), or
    // during a recording when the block is too small (short_by() then says how much it needs)
    void * take(size_t size, cudaStream_t stream);
    void   release(void * p);

    void   set_recording(bool recording);
    size_t short_by() const { return short_; }
    // grows the block to what the failed recording asked for; false when out of memory (logged)
    bool grow_for_capture(cudaStream_t stream);
    // the current block, held by whatever keeps its addresses (a recorded device graph)
    std::shared_ptr<void> block() const { return block_; }

private:
    struct Piece {
        void * p;
        size_t offset, end;
        bool   current; // in block_ (else in a retired block)
    };
    bool grow(size_t size, cudaStream_t stream);

    int                                index_, physical_;
    std::shared_ptr<void>              block_; // freed in stream order by its last holder
    size_t                             capacity_ = 0;
    std::vector<Piece>                 live_;
    std::vector<std::shared_ptr<void>> retired_; // held while a piece of them is
    bool                               recording_ = false;
    size_t                             short_     = 0;
};

// one op's piece of its backend's scratch arena, released at the end of the scope
class Scratch {
public:
    Scratch(ScratchArena & arena, cudaStream_t stream, size_t size)
        : arena_(arena), ptr_(size > 0 ? arena.take(size, stream) : nullptr), size_(size) {}
    ~Scratch() {
        if (ptr_ != nullptr) {
            arena_.release(ptr_);
        }
    }
    Scratch(const Scratch &)             = delete;
    Scratch & operator=(const Scratch &) = delete;
    void *    get() const { return ptr_; }
    explicit  operator bool() const { return ptr_ != nullptr || size_ == 0; }

private:
    ScratchArena & arena_;
    void *         ptr_;
    size_t         size_;
};

// Note [memory pool]: scratch blocks come from each device's default CUDA memory pool
// (stream-ordered, cudaMallocAsync), which keeps up to POOL_KEEP bytes of freed memory cached and
// returns the rest to the driver, so that a device's free memory tells the truth. Device buffers
// come from cudaMalloc, ready for every stream and every peer at once (no stream to wait on).
// Devices without pools (cudaDevAttrMemoryPoolsSupported), and every device with
// WSP_GGML_CUDA_POOLS=0, use cudaMalloc / cudaFree for scratch too.
constexpr uint64_t POOL_KEEP = (uint64_t) 64 << 20;
void               configure_pool(int physical);
// pools supported by the device and not turned off (WSP_GGML_CUDA_POOLS=0)
bool pools_wanted(int physical);

// constructors that log and return an empty owner on failure
Stream make_stream(int physical);
Event  make_event(int physical);
// device memory for device index `index` (cudaMalloc), counted (Note [counters])
DeviceMemory alloc_device(int index, size_t size, const char * what);
PinnedMemory alloc_pinned(size_t size);
#if WSP_GPU_HAS_BLAS
BlasHandle make_blas(int physical, cudaStream_t stream);
#endif

} // namespace wsp::cuda
