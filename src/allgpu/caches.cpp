// The all-GPU device's sharded caches (Note [sharded caches] in plan.h): memory outside the graph
// that graphs write with split data, kept as parts on the members and made whole in the main
// member's copy only when something else reads it.

#include "all_gpu.h"

#include <cstring>

namespace wsp::allgpu {

void Device::clear_caches(wsp_ggml_backend_buffer_t b, uint8_t v) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    for (auto & [r, c] : caches) {
        if (c.buffer == b) {
            for (Piece & p : c.pieces) {
                wsp_ggml_backend_buffer_clear(p.buffer, v);
            }
        }
    }
}

const tp::Layout * Device::cache_layout(const wsp_ggml_tensor * r) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    auto                                  it = caches.find(r);
    if (it == caches.end()) {
        return nullptr;
    }
    if (it->second.data != r->data) { // another tensor at that address now: the parts are not its
        for (Piece & p : it->second.pieces) {
            free_piece(p);
        }
        caches.erase(it);
        ++generation;
        return nullptr;
    }
    return &it->second.layout;
}

wsp_ggml_tensor * Device::cache_piece(const wsp_ggml_tensor * r, int m) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    auto                                  it = caches.find(r);
    if (it == caches.end()) {
        return nullptr;
    }
    race::checker().acquire(race::checker().host_agent(), it->second.pieces[m].made);
    return it->second.pieces[m].tensor;
}

bool Device::shard(const wsp_ggml_tensor * r, const tp::Layout & L) {
    const size_t         es = wsp_ggml_type_size(r->type);
    const int64_t        n  = wsp_ggml_nelements(r);
    const int64_t        nb = (n + L.W - 1) / L.W; // blocks, the last one maybe cut short
    std::vector<uint8_t> whole(wsp_ggml_nbytes(r)), part;
    wsp_ggml_backend_tensor_get(r, whole.data(), 0, whole.size());
    ShardedCache c;
    c.layout        = L;
    c.layout.origin = -1;
    c.data          = r->data;
    c.buffer        = r->buffer;
    for (size_t m = 0; m < members.size(); ++m) {
        const int64_t lo = L.parts[m].first, w = L.parts[m].second - lo;
        Piece         p;
        p.member = (int) m;
        p.ctx    = wsp_ggml_init({ wsp_ggml_tensor_overhead(), nullptr, true });
        p.tensor = p.ctx ? wsp_ggml_new_tensor_1d(p.ctx, r->type, nb * w) : nullptr;
        p.buffer =
            p.tensor ? wsp_ggml_backend_alloc_ctx_tensors_from_buft(p.ctx, wsp_ggml_backend_dev_buffer_type(members[m]))
                     : nullptr;
        if (p.buffer == nullptr) {
            WSP_LOG_ERROR("%s: no room for %s's part on %s\n", name.c_str(), r->name,
                          wsp_ggml_backend_dev_name(members[m]));
            wsp_ggml_free(p.ctx);
            for (Piece & q : c.pieces) {
                free_piece(q);
            }
            return false;
        }
        wsp_ggml_format_name(p.tensor, "%s (part %zu)", r->name, m);
        part.resize((size_t) (nb * w) * es);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t len = std::max<int64_t>(0, std::min(w, n - (b * L.W + lo)));
            std::memcpy(part.data() + (size_t) (b * w) * es, whole.data() + (size_t) (b * L.W + lo) * es,
                        (size_t) len * es);
        }
        wsp_ggml_backend_tensor_set(p.tensor, part.data(), 0, part.size());
        p.made = race::checker().release_host();
        c.pieces.push_back(std::move(p));
    }
    std::lock_guard<std::recursive_mutex> lock(mutex);
    caches[r] = std::move(c);
    ++generation;
    return true;
}

void Device::unshard(const wsp_ggml_tensor * r, bool drop) {
    ShardedCache c; // drop: taken out; otherwise the layout and the parts' tensors, still owned
    {
        std::lock_guard<std::recursive_mutex> lock(mutex);
        auto                                  it = caches.find(r);
        if (it == caches.end()) {
            return;
        }
        if (drop) {
            c = std::move(it->second);
            caches.erase(it);
            ++generation;
        } else {
            c.layout = it->second.layout;
            c.data   = it->second.data;
            for (const Piece & p : it->second.pieces) {
                c.pieces.push_back(Piece{ nullptr, nullptr, p.tensor });
            }
        }
    }
    if (c.data == r->data) { // the parts hold the cache's latest bytes: the main copy from them
        const size_t         es = wsp_ggml_type_size(r->type);
        const int64_t        n  = wsp_ggml_nelements(r);
        const int64_t        nb = (n + c.layout.W - 1) / c.layout.W;
        std::vector<uint8_t> whole(wsp_ggml_nbytes(r)), part;
        for (size_t m = 0; m < c.pieces.size(); ++m) {
            const int64_t lo = c.layout.parts[m].first, w = c.layout.parts[m].second - lo;
            part.resize(wsp_ggml_nbytes(c.pieces[m].tensor));
            wsp_ggml_backend_tensor_get(c.pieces[m].tensor, part.data(), 0, part.size());
            for (int64_t b = 0; b < nb; ++b) {
                const int64_t len = std::max<int64_t>(0, std::min(w, n - (b * c.layout.W + lo)));
                std::memcpy(whole.data() + (size_t) (b * c.layout.W + lo) * es, part.data() + (size_t) (b * w) * es,
                            (size_t) len * es);
            }
        }
        // around the watch: this write is the cache's own bytes coming home
        set_unwatched(r, whole.data(), whole.size());
    }
    if (drop) {
        for (Piece & p : c.pieces) {
            free_piece(p);
        }
    }
}

} // namespace wsp::allgpu
