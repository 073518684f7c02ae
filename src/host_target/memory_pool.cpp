// Peer access and stream-ordered pools: what cudaDeviceCanAccessPeer allows (the machine's
// matrix), what each device enabled, each device's default pool with its access table, and
// cudaMallocAsync / cudaFreeAsync in stream order (or as graph memory under capture).

#include "runtime_impl.h"

namespace wsp::host_target {

namespace {

CUmemPoolHandle_st * pool_of(cudaMemPool_t pool) {
    for (const auto & d : rt().devices) {
        if (&d->pool == pool) {
            return pool;
        }
    }
    return nullptr;
}

} // namespace

} // namespace wsp::host_target

using namespace wsp::host_target;
namespace race = wsp::race;

cudaError_t cudaDeviceCanAccessPeer(int * can_access, int device, int peer_device) {
    if (can_access == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(device) || !valid_device(peer_device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    *can_access = device != peer_device && rt().config.peer[(size_t) device][(size_t) peer_device] ? 1 : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned int flags) {
    const int device = current_device();
    if (flags != 0) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(peer_device) || peer_device == device) {
        return set_last(cudaErrorInvalidDevice);
    }
    Runtime & r = rt();
    if (!r.config.peer[(size_t) device][(size_t) peer_device]) {
        return set_last(cudaErrorPeerAccessUnsupported);
    }
    std::lock_guard<std::mutex>  lock(r.mutex);
    std::vector<bool>::reference enabled = r.peer_enabled[(size_t) device][(size_t) peer_device];
    if (enabled) {
        return set_last(cudaErrorPeerAccessAlreadyEnabled);
    }
    enabled = true;
    return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer_device) {
    const int device = current_device();
    if (!valid_device(peer_device) || peer_device == device) {
        return set_last(cudaErrorInvalidDevice);
    }
    Runtime &                    r = rt();
    std::lock_guard<std::mutex>  lock(r.mutex);
    std::vector<bool>::reference enabled = r.peer_enabled[(size_t) device][(size_t) peer_device];
    if (!enabled) {
        return set_last(cudaErrorPeerAccessNotEnabled);
    }
    enabled = false;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t * pool, int device) {
    if (pool == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    if (!rt().config.pools) {
        return set_last(cudaErrorNotSupported); // a device without memory pools
    }
    *pool = &rt().devices[(size_t) device]->pool;
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void * value) {
    CUmemPoolHandle_st * p = pool_of(pool);
    if (p == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    if (value == nullptr || attr != cudaMemPoolAttrReleaseThreshold) {
        return set_last(cudaErrorInvalidValue);
    }
    std::lock_guard<std::mutex> lock(p->mutex);
    p->release_threshold = *static_cast<const uint64_t *>(value);
    return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void * value) {
    CUmemPoolHandle_st * p = pool_of(pool);
    if (p == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    if (value == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    uint64_t & out = *static_cast<uint64_t *>(value);
    if (attr == cudaMemPoolAttrReleaseThreshold) {
        std::lock_guard<std::mutex> lock(p->mutex);
        out = p->release_threshold;
        return cudaSuccess;
    }
    if (attr == cudaMemPoolAttrUsedMemCurrent || attr == cudaMemPoolAttrReservedMemCurrent) {
        // nothing is kept back after a free: reserved and used are the live pool allocations
        std::shared_lock<std::shared_mutex> lock(rt().alloc_mutex);
        out = 0;
        for (const auto & [begin, a] : rt().allocs) {
            if (a.device == p->device && a.kind == AllocKind::POOL) {
                out += a.size;
            }
        }
        return cudaSuccess;
    }
    return set_last(cudaErrorInvalidValue);
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc * desc_list, size_t count) {
    CUmemPoolHandle_st * p = pool_of(pool);
    if (p == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    if (desc_list == nullptr && count > 0) {
        return set_last(cudaErrorInvalidValue);
    }
    // all checked before any is applied
    for (size_t i = 0; i < count; ++i) {
        const cudaMemAccessDesc & d = desc_list[i];
        if (d.location.type != cudaMemLocationTypeDevice ||
            (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
             d.flags != cudaMemAccessFlagsProtReadWrite)) {
            return set_last(cudaErrorInvalidValue);
        }
        if (!valid_device(d.location.id)) {
            return set_last(cudaErrorInvalidDevice);
        }
        if (d.location.id == p->device && d.flags != cudaMemAccessFlagsProtReadWrite) {
            return fail(cudaErrorInvalidValue, "cudaMemPoolSetAccess: device %d cannot lose access to its own pool",
                        p->device);
        }
        if (d.location.id != p->device && d.flags != cudaMemAccessFlagsProtNone &&
            !rt().config.peer[(size_t) d.location.id][(size_t) p->device]) {
            return fail(cudaErrorInvalidDevice, "cudaMemPoolSetAccess: device %d cannot reach device %d (peer matrix)",
                        d.location.id, p->device);
        }
    }
    std::lock_guard<std::mutex> lock(p->mutex);
    for (size_t i = 0; i < count; ++i) {
        p->access[(size_t) desc_list[i].location.id] = desc_list[i].flags;
    }
    return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags * flags, cudaMemPool_t pool,
                                 struct cudaMemLocation * location) {
    CUmemPoolHandle_st * p = pool_of(pool);
    if (p == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    if (flags == nullptr || location == nullptr || location->type != cudaMemLocationTypeDevice) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(location->id)) {
        return set_last(cudaErrorInvalidDevice);
    }
    std::lock_guard<std::mutex> lock(p->mutex);
    *flags = p->access[(size_t) location->id];
    return cudaSuccess;
}

// Note [graph memory]: cudaMallocAsync on a capturing stream allocates at once, as graph memory
// owned by the capture's graph and every exec made from it (GraphMemory, shared); it is freed
// when the last of them, and the last replay in flight, is gone. Each replay reaches an alloc
// node that starts the memory's access history anew (its contents are undefined again, as on a
// GPU); a cudaFreeAsync of it in the same capture becomes a node that only ends the history, so
// every replay finds the memory in place. Outside its capture, graph memory cannot be freed.
cudaError_t cudaMallocAsync(void ** ptr, size_t size, cudaStream_t stream) {
    if (ptr == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    *ptr = nullptr;
    if (!rt().config.pools) {
        return set_last(cudaErrorNotSupported); // a device without memory pools
    }
    if (size == 0) {
        return cudaSuccess;
    }
    std::shared_ptr<Capture> capture;
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        capture = s->capture;
    }
    if (capture == nullptr) {
        return allocate(s->device, size, AllocKind::POOL, ptr);
    }
    if (const cudaError_t e = allocate(s->device, size, AllocKind::GRAPH, ptr); e != cudaSuccess) {
        invalidate(capture, "cudaMallocAsync failed");
        return e;
    }
    {
        std::lock_guard<std::mutex> lock(capture->memory->mutex);
        capture->memory->blocks.push_back(*ptr);
    }
    const race::Range range{ (uintptr_t) *ptr, (uintptr_t) *ptr + size };
    return set_last(s->submit({ "graph memory alloc node", [range](const Exec &, std::string &) {
                                   race::checker().forget(range);
                                   return cudaSuccess;
                               } }));
}

cudaError_t cudaFreeAsync(void * ptr, cudaStream_t stream) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (ptr == nullptr) {
        return cudaSuccess;
    }
    Place       place;
    std::string message;
    if (locate(ptr, 0, "cudaFreeAsync pointer", &place, &message) != cudaSuccess || place.device < 0 ||
        place.alloc.begin != (uintptr_t) ptr) {
        return fail(cudaErrorInvalidValue, "cudaFreeAsync(%p): not the start of a live device allocation", ptr);
    }
    const Allocation a = place.alloc;
    if (a.kind == AllocKind::MALLOC) {
        return fail(cudaErrorInvalidValue, "cudaFreeAsync(%p): memory from cudaMalloc is freed by cudaFree", ptr);
    }
    if (a.kind == AllocKind::GRAPH) {
        std::shared_ptr<Capture> capture;
        {
            std::lock_guard<std::mutex> lock(s->mutex);
            capture = s->capture;
        }
        bool owned = false;
        if (capture != nullptr) {
            std::lock_guard<std::mutex> lock(capture->memory->mutex);
            for (void * b : capture->memory->blocks) {
                owned = owned || b == ptr;
            }
        }
        if (!owned) {
            return fail(cudaErrorInvalidValue,
                        "cudaFreeAsync(%p): graph memory is freed with its graph (Note [graph memory])", ptr);
        }
        const race::Range range{ a.begin, a.begin + a.size };
        return set_last(s->submit({ "graph memory free node", [range](const Exec &, std::string &) {
                                       race::checker().forget(range);
                                       return cudaSuccess;
                                   } }));
    }
    return set_last(s->submit({ "cudaFreeAsync", [ptr](const Exec &, std::string & msg) {
                                   if (!release(ptr)) {
                                       msg = "cudaFreeAsync: the memory was freed already";
                                       return cudaErrorInvalidValue;
                                   }
                                   return cudaSuccess;
                               } }));
}
