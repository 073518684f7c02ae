// Note [member replicas]: a result every member computed whole (REPL) that the graph gives out
// (whisper's front end output, its encoder output) is written on each member into memory of its
// own that outlives the graph, beside the caller's copy on the main member. A later graph run by
// the same backend that reads those bytes from outside reads the member's replica, and the copy
// from the main member that would feed it is skipped while the replica is current:
//  - current: `of` is the caller's memory whose bytes the copies equal. The run that wrote them
//    sets it (Runner::wrote), as does a copy into them from the main member.
//  - stale: any write to those bytes makes `of` NULL. Writes through the device's buffers (set,
//    memset, copy, clear, reset, free: Device::forget, forget_buffer) and every node a
//    graph of this device writes (Runner::wrote) are seen; nothing else can write that memory.
//  - one backend's: the copies are written and read on that backend's member streams, so stream
//    order is their only ordering; another backend's graphs do not use them (they are sent).
// What it costs: each replica holds the result's bytes on every member but the main one, at most
// MAX_REPLICAS per device.

#include "all_gpu.h"

namespace wsp::allgpu {

Replica * Device::replica_for(const void * owner, const wsp_ggml_tensor * t, bool create) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    for (Replica & r : replicas) {
        if (r.owner == owner && r.made_for == t->data && r.bytes == wsp_ggml_nbytes(t) && r.type == t->type &&
            std::equal(r.ne, r.ne + WSP_GGML_MAX_DIMS, t->ne)) {
            return &r;
        }
    }
    if (!create || replicas.size() >= MAX_REPLICAS || !wsp_ggml_is_contiguous(t)) {
        return nullptr;
    }
    Replica r;
    r.owner    = owner;
    r.made_for = t->data;
    r.bytes    = wsp_ggml_nbytes(t);
    r.type     = t->type;
    std::copy(t->ne, t->ne + WSP_GGML_MAX_DIMS, r.ne);
    r.copies.resize(members.size());
    for (size_t m = 1; m < members.size(); ++m) {
        Piece & p = r.copies[m];
        p.member  = (int) m;
        p.ctx     = wsp_ggml_init({ wsp_ggml_tensor_overhead(), nullptr, true });
        if (p.ctx != nullptr) {
            p.tensor = wsp_ggml_new_tensor(p.ctx, t->type, WSP_GGML_MAX_DIMS, t->ne);
            wsp_ggml_format_name(p.tensor, "%s (replica)", t->name);
            p.buffer =
                wsp_ggml_backend_alloc_ctx_tensors_from_buft(p.ctx, wsp_ggml_backend_dev_buffer_type(members[m]));
        }
        if (p.buffer == nullptr) {
            WSP_LOG_WARN("%s: no room for a replica of %s on %s: it is sent instead\n", name.c_str(), t->name,
                         wsp_ggml_backend_dev_name(members[m]));
            for (Piece & q : r.copies) {
                if (q.buffer != nullptr) {
                    free_piece(q);
                } else if (q.ctx != nullptr) {
                    wsp_ggml_free(q.ctx);
                }
            }
            return nullptr;
        }
    }
    replicas.push_back(std::move(r));
    return &replicas.back();
}

bool Device::current(const Replica * r, const void * data) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    return r != nullptr && r->of == data;
}

void Device::stale(const void * lo, size_t n) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    const char *                          a = static_cast<const char *>(lo);
    for (Replica & r : replicas) {
        const char * b = static_cast<const char *>(r.of);
        if (b != nullptr && a < b + r.bytes && b < a + n) {
            r.of = nullptr;
        }
    }
}

void Device::drop_replicas(const void * owner) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    for (auto it = replicas.begin(); it != replicas.end();) {
        if (it->owner == owner) {
            for (Piece & p : it->copies) {
                if (p.buffer != nullptr) {
                    free_piece(p);
                }
            }
            it = replicas.erase(it);
        } else {
            ++it;
        }
    }
}

} // namespace wsp::allgpu
