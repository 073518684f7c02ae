// Device memory and pinned host memory: each device's arena, the record of live allocations
// (what copies and kernels are checked against), cudaMalloc / cudaFree, pinned host memory, and
// the ownership check of Note [ownership].

#include "runtime_impl.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>

namespace wsp::host_target {

Arena::Arena(size_t capacity) : capacity_(capacity), blocks_(capacity) {
    void * a = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a != MAP_FAILED) {
        base_ = static_cast<char *>(a);
    }
}

Arena::~Arena() {
    if (base_ != nullptr) {
        munmap(base_, capacity_);
    }
}

void * Arena::allocate(size_t size) {
    // every block starts and ends on ALIGNMENT
    const size_t                need = (std::max<size_t>(size, 1) + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t                off = blocks_.allocate(need, ALIGNMENT);
    return off == alloc::FirstFit::NONE ? nullptr : base_ + off;
}

void Arena::release(void * p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t                start = (size_t) (static_cast<char *>(p) - base_);
    const size_t                size  = blocks_.release(start);
    alloc::release_pages(base_, start, size); // refilled when handed out again
}

size_t Arena::used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.used();
}

const char * kind_name(AllocKind kind) {
    switch (kind) {
        case AllocKind::MALLOC: return "cudaMalloc";
        case AllocKind::POOL: return "cudaMallocAsync pool";
        case AllocKind::GRAPH: return "graph";
    }
    return "?";
}

namespace {

// the live allocation holding p (or ending at p when allow_end), under alloc_mutex
const Allocation * find_locked(uintptr_t p, bool allow_end) {
    auto & allocs = rt().allocs;
    auto   it     = allocs.upper_bound(p);
    if (it == allocs.begin()) {
        return nullptr;
    }
    const Allocation & a = std::prev(it)->second;
    return p < a.begin + a.size || (allow_end && p == a.begin + a.size) ? &a : nullptr;
}

std::string describe(const Allocation & a) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "[%#" PRIxPTR ", +%zu) of device %d (%s)", a.begin, a.size, a.device,
                  kind_name(a.kind));
    return buf;
}

// the pinned range holding [p, p + n), under alloc_mutex
bool pinned_locked(uintptr_t p, size_t n) {
    auto & pinned = rt().pinned;
    auto   it     = pinned.upper_bound(p);
    if (it == pinned.begin()) {
        return false;
    }
    --it;
    return p >= it->first && p + n <= it->first + it->second;
}

} // namespace

cudaError_t allocate(int device, size_t size, AllocKind kind, void ** out) {
    Device & d = *rt().devices[(size_t) device];
    void *   p = d.arena->allocate(size);
    if (p == nullptr) {
        return fail(cudaErrorMemoryAllocation, "device %d: cannot allocate %zu bytes (%s): %zu of %zu bytes in use",
                    device, size, kind_name(kind), d.arena->used(), d.arena->capacity());
    }
    // Fresh memory holds NaN (f32 and f16) rather than a plausible zero, as the sim devices'
    std::memset(p, FILL_BYTE, size);
    race::checker().forget({ (uintptr_t) p, (uintptr_t) p + size });
    {
        std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
        rt().allocs[(uintptr_t) p] = Allocation{ (uintptr_t) p, size, device, kind };
    }
    *out = p;
    return cudaSuccess;
}

bool release(void * p, AllocKind * kind) {
    Allocation a;
    {
        std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
        auto                                it = rt().allocs.find((uintptr_t) p);
        if (it == rt().allocs.end()) {
            return false;
        }
        a = it->second;
        rt().allocs.erase(it);
    }
    if (kind != nullptr) {
        *kind = a.kind;
    }
    race::checker().forget({ a.begin, a.begin + a.size });
    rt().devices[(size_t) a.device]->arena->release(p);
    return true;
}

cudaError_t locate(const void * p, size_t n, const char * role, Place * place, std::string * message) {
    const uintptr_t u      = (uintptr_t) p;
    const int       device = arena_device(u);
    place->device          = device;
    if (device < 0) {
        if (p == nullptr && n > 0) {
            *message = std::string(role) + " is a null pointer";
            return cudaErrorInvalidValue;
        }
        return cudaSuccess;
    }
    std::shared_lock<std::shared_mutex> lock(rt().alloc_mutex);
    const Allocation *                  a = find_locked(u, n == 0);
    char                                buf[256];
    if (a == nullptr) {
        std::snprintf(buf, sizeof(buf),
                      "%s [%p, +%zu) of device %d is not in a live allocation (freed or never allocated)", role, p, n,
                      device);
        *message = buf;
        return cudaErrorInvalidValue;
    }
    if (u + n > a->begin + a->size) {
        std::snprintf(buf, sizeof(buf), "%s [%p, +%zu) runs %zu bytes past the end of allocation ", role, p, n,
                      (size_t) (u + n - (a->begin + a->size)));
        *message = buf + describe(*a);
        return cudaErrorInvalidValue;
    }
    place->alloc = *a;
    return cudaSuccess;
}

bool is_pinned(const void * p, size_t n) {
    std::shared_lock<std::shared_mutex> lock(rt().alloc_mutex);
    return pinned_locked((uintptr_t) p, n);
}

int device_of(const void * p) {
    const uintptr_t u = (uintptr_t) p;
    if (arena_device(u) < 0) {
        return -1;
    }
    std::shared_lock<std::shared_mutex> lock(rt().alloc_mutex);
    const Allocation *                  a = find_locked(u, false);
    return a != nullptr ? a->device : -1;
}

// Note [ownership]: a kernel may touch its own device's memory; another device's cudaMalloc
// memory only after cudaDeviceEnablePeerAccess from the kernel's device; another device's pool
// (and graph) memory only after cudaMemPoolSetAccess granted the kernel's device read-write on
// that pool, which peer access alone does not (CUDA keeps pool access apart: memory from a pool
// is reachable by other devices only as the pool says). Read-only grants are not enough: the
// check cannot tell a kernel's reads from its writes. Pinned host memory is reachable from every
// device. Any other address, or a range that runs past its allocation, is an illegal address.
cudaError_t check_access(int device, const void * p, size_t n, std::string * message) {
    Runtime &       r = rt();
    const uintptr_t u = (uintptr_t) p;
    char            buf[512];
    auto            deny = [&](const std::string & why) {
        if (message != nullptr) {
            *message = why;
        }
        return cudaErrorIllegalAddress;
    };
    if (!valid_device(device)) {
        std::snprintf(buf, sizeof(buf), "access from invalid device %d", device);
        return deny(buf);
    }
    const int owner = arena_device(u);
    if (owner < 0) {
        if (is_pinned(p, std::max<size_t>(n, 1))) {
            return cudaSuccess;
        }
        std::snprintf(buf, sizeof(buf),
                      "device %d touches [%p, +%zu), which is neither device memory nor pinned host memory", device, p,
                      n);
        return deny(buf);
    }
    Allocation a;
    {
        std::shared_lock<std::shared_mutex> lock(r.alloc_mutex);
        const Allocation *                  found = find_locked(u, n == 0);
        if (found == nullptr) {
            std::snprintf(buf, sizeof(buf), "device %d touches [%p, +%zu) of device %d outside every live allocation",
                          device, p, n, owner);
            return deny(buf);
        }
        a = *found;
    }
    if (u + n > a.begin + a.size) {
        std::snprintf(buf, sizeof(buf), "device %d touches [%p, +%zu), past the end of allocation ", device, p, n);
        return deny(buf + describe(a));
    }
    if (a.device == device) {
        return cudaSuccess;
    }
    bool allowed = false;
    if (a.kind == AllocKind::MALLOC) {
        std::lock_guard<std::mutex> lock(r.mutex);
        allowed = r.peer_enabled[(size_t) device][(size_t) a.device];
    } else {
        CUmemPoolHandle_st &        pool = r.devices[(size_t) a.device]->pool;
        std::lock_guard<std::mutex> lock(pool.mutex);
        allowed = pool.access[(size_t) device] == cudaMemAccessFlagsProtReadWrite;
    }
    if (allowed) {
        return cudaSuccess;
    }
    std::snprintf(buf, sizeof(buf), "device %d touches %p in allocation %s without %s (Note [ownership])", device, p,
                  describe(a).c_str(),
                  a.kind == AllocKind::MALLOC ? "peer access (cudaDeviceEnablePeerAccess)"
                                              : "access to its pool (cudaMemPoolSetAccess)");
    return deny(buf);
}

} // namespace wsp::host_target

using namespace wsp::host_target;

cudaError_t cudaMalloc(void ** ptr, size_t size) {
    if (ptr == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    const int device = current_device();
    rt();
    if (const cudaError_t e = check_capture_safe("cudaMalloc"); e != cudaSuccess) {
        return e;
    }
    *ptr = nullptr;
    if (size == 0) {
        return cudaSuccess;
    }
    return allocate(device, size, AllocKind::MALLOC, ptr);
}

cudaError_t cudaFree(void * ptr) {
    if (ptr == nullptr) {
        return cudaSuccess;
    }
    if (const cudaError_t e = check_capture_safe("cudaFree"); e != cudaSuccess) {
        return e;
    }
    Place       place;
    std::string message;
    if (locate(ptr, 0, "cudaFree pointer", &place, &message) != cudaSuccess || place.device < 0 ||
        place.alloc.begin != (uintptr_t) ptr) {
        return fail(cudaErrorInvalidValue, "cudaFree(%p): not the start of a live device allocation", ptr);
    }
    if (place.alloc.kind == AllocKind::GRAPH) {
        return fail(cudaErrorInvalidValue, "cudaFree(%p): graph memory belongs to its graph (Note [graph memory])",
                    ptr);
    }
    // cudaFree waits for the device: work in flight may still use the memory
    (void) synchronize_device(place.device);
    release(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t * free, size_t * total) {
    if (free == nullptr || total == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    const Arena & a = *rt().devices[(size_t) current_device()]->arena;
    *total          = a.capacity();
    *free           = a.capacity() - a.used();
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void ** ptr, size_t size) {
    if (ptr == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    rt();
    if (const cudaError_t e = check_capture_safe("cudaMallocHost"); e != cudaSuccess) {
        return e;
    }
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    const size_t n    = (std::max<size_t>(size, 1) + page - 1) / page * page;
    void *       p    = std::aligned_alloc(page, n);
    if (p == nullptr) {
        *ptr = nullptr;
        return fail(cudaErrorMemoryAllocation, "cudaMallocHost: cannot allocate %zu bytes", size);
    }
    std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
    rt().pinned[(uintptr_t) p]           = n;
    rt().pinned_by_malloc[(uintptr_t) p] = true;
    *ptr                                 = p;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void * ptr) {
    if (ptr == nullptr) {
        return cudaSuccess;
    }
    {
        std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
        if (rt().pinned_by_malloc.erase((uintptr_t) ptr) == 0) {
            lock.unlock();
            return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not memory from cudaMallocHost", ptr);
        }
        rt().pinned.erase((uintptr_t) ptr);
    }
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void * ptr, size_t size, unsigned int flags) {
    if (ptr == nullptr || size == 0 || (flags & ~0xFu) != 0) {
        return set_last(cudaErrorInvalidValue);
    }
    rt();
    if (const cudaError_t e = check_capture_safe("cudaHostRegister"); e != cudaSuccess) {
        return e;
    }
    const uintptr_t                     u = (uintptr_t) ptr;
    std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
    auto &                              pinned        = rt().pinned;
    auto                                next          = pinned.lower_bound(u);
    const bool                          overlaps_next = next != pinned.end() && next->first < u + size;
    const bool overlaps_prev = next != pinned.begin() && std::prev(next)->first + std::prev(next)->second > u;
    if (overlaps_next || overlaps_prev || arena_device(u) >= 0) {
        return set_last(cudaErrorHostMemoryAlreadyRegistered);
    }
    pinned[u] = size;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void * ptr) {
    std::unique_lock<std::shared_mutex> lock(rt().alloc_mutex);
    const uintptr_t                     u = (uintptr_t) ptr;
    if (rt().pinned_by_malloc.count(u) != 0 || rt().pinned.erase(u) == 0) {
        return set_last(cudaErrorHostMemoryNotRegistered);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
    Runtime & r      = rt();
    const int device = current_device();
    (void) synchronize_device(device);
    std::vector<void *> owned;
    {
        std::shared_lock<std::shared_mutex> lock(r.alloc_mutex);
        for (const auto & [begin, a] : r.allocs) {
            if (a.device == device && a.kind != AllocKind::GRAPH) {
                owned.push_back((void *) begin);
            }
        }
    }
    for (void * p : owned) {
        release(p);
    }
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        std::fill(r.peer_enabled[(size_t) device].begin(), r.peer_enabled[(size_t) device].end(), false);
    }
    CUmemPoolHandle_st &        pool = r.devices[(size_t) device]->pool;
    std::lock_guard<std::mutex> lock(pool.mutex);
    std::fill(pool.access.begin(), pool.access.end(), cudaMemAccessFlagsProtNone);
    pool.access[(size_t) device] = cudaMemAccessFlagsProtReadWrite;
    pool.release_threshold       = 0;
    return cudaSuccess;
}
