// The all-GPU buffer type (Note [all-GPU device]): the main member's buffers, watched: a tensor
// written, cleared or freed loses its spread copies, and a sharded cache read from outside is
// made whole first.

#include "all_gpu.h"

namespace wsp::allgpu {

namespace {

// the buffers made with an all-GPU buffer type: their device and their own interface, which the
// watching interface below calls
struct Watched {
    Device *                  device;
    wsp_ggml_backend_buffer_i original;
};

std::mutex & watched_mutex() {
    static std::mutex m;
    return m;
}

std::unordered_map<wsp_ggml_backend_buffer_t, Watched> & watched() {
    static auto & w = *new std::unordered_map<wsp_ggml_backend_buffer_t, Watched>; // lives until exit
    return w;
}

Watched watched_of(wsp_ggml_backend_buffer_t b) {
    std::lock_guard<std::mutex> lock(watched_mutex());
    return watched().at(b);
}

//
// the watching buffer interface: the main member's own, and a written tensor loses its pieces
//

void w_free(wsp_ggml_backend_buffer_t b) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget_buffer(b); // pieces were made of this memory: they go first
    {
        std::lock_guard<std::mutex> lock(watched_mutex());
        watched().erase(b);
    }
    if (w.original.free_buffer != nullptr) {
        w.original.free_buffer(b);
    }
}

void w_memset(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, uint8_t v, size_t offset, size_t size) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget(t);
    w.original.memset_tensor(b, t, v, offset, size);
}

void w_set(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, const void * data, size_t offset, size_t size) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget(t);
    w.original.set_tensor(b, t, data, offset, size);
}

bool w_cpy(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget(dst);
    return w.original.cpy_tensor != nullptr && w.original.cpy_tensor(b, src, dst);
}

void w_get(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * t, void * data, size_t offset, size_t size) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->unshard(storage_of(t), false); // a sharded cache read from outside: made whole first
    w.original.get_tensor(b, t, data, offset, size);
}

void w_clear(wsp_ggml_backend_buffer_t b, uint8_t v) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->clear_caches(b, v); // a cleared cache stays sharded: its parts cleared alike
    w.device->forget_buffer(b, false);
    w.original.clear(b, v);
}

void w_reset(wsp_ggml_backend_buffer_t b) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget_buffer(b);
    if (w.original.reset != nullptr) {
        w.original.reset(b);
    }
}

//
// buffer type: the main member's, watched
//

Device & dev_of_buft(wsp_ggml_backend_buffer_type_t buft) {
    return *static_cast<Device *>(buft->context);
}

wsp_ggml_backend_buffer_type_t main_buft(wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_dev_buffer_type(dev_of_buft(buft).main());
}

const char * buft_name(wsp_ggml_backend_buffer_type_t buft) {
    return dev_of_buft(buft).name.c_str();
}

wsp_ggml_backend_buffer_t buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    MemberWork                work(dev_of_buft(buft));
    wsp_ggml_backend_buffer_t b = wsp_ggml_backend_buft_alloc_buffer(main_buft(buft), size);
    if (b == nullptr) {
        return nullptr; // logged by the member
    }
    Watched w{ &dev_of_buft(buft), b->iface };
    {
        std::lock_guard<std::mutex> lock(watched_mutex());
        watched()[b] = w;
    }
    b->iface.free_buffer   = w_free;
    b->iface.set_tensor    = w.original.set_tensor ? w_set : nullptr;
    b->iface.get_tensor    = w.original.get_tensor ? w_get : nullptr;
    b->iface.memset_tensor = w.original.memset_tensor ? w_memset : nullptr;
    b->iface.cpy_tensor    = w_cpy;
    b->iface.clear         = w.original.clear ? w_clear : nullptr;
    b->iface.reset         = w_reset;
    return b;
}

size_t buft_alignment(wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_buft_get_alignment(main_buft(buft));
}

size_t buft_max_size(wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_buft_get_max_size(main_buft(buft));
}

size_t buft_alloc_size(wsp_ggml_backend_buffer_type_t buft, const wsp_ggml_tensor * t) {
    return wsp_ggml_backend_buft_get_alloc_size(main_buft(buft), t);
}

bool buft_is_host(wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_buft_is_host(main_buft(buft));
}

} // namespace

wsp_ggml_backend_buffer_type_i watched_buffer_type_iface() {
    return { buft_name, buft_alloc, buft_alignment, buft_max_size, buft_alloc_size, buft_is_host };
}

bool Device::owns(wsp_ggml_backend_buffer_t b) {
    std::lock_guard<std::mutex> lock(watched_mutex());
    auto                        it = watched().find(b);
    return it != watched().end() && it->second.device == this;
}

void set_unwatched(const wsp_ggml_tensor * t, const void * data, size_t size) {
    wsp_ggml_backend_buffer_t b = t->buffer;
    watched_of(b).original.set_tensor(b, const_cast<wsp_ggml_tensor *>(t), data, 0, size);
}

size_t main_weight_bytes(const Device & d) {
    std::lock_guard<std::mutex> lock(watched_mutex());
    size_t                      bytes = 0;
    for (const auto & [b, w] : watched()) {
        if (w.device == &d && wsp_ggml_backend_buffer_get_usage(b) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            bytes += wsp_ggml_backend_buffer_get_size(b);
        }
    }
    return bytes;
}

} // namespace wsp::allgpu
