// The all-GPU reg, device and buffer type, and the weights' shadows (Note [all-GPU device]).

#include "all_gpu.h"

#include "../split/partition.h"
#include "../split/split_buffer.h"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

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
// the watching buffer interface: the main member's own, and a written tensor loses its shadow
//

void w_free(wsp_ggml_backend_buffer_t b) {
    const Watched w = watched_of(b);
    MemberWork    work(*w.device);
    w.device->forget_buffer(b); // shadows read this memory: they go first
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
    w.device->unshard(tp::root_of(t), false); // a sharded cache read from outside: made whole first
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

//
// device
//

Device & dev_ctx(wsp_ggml_backend_dev_t dev) {
    return *static_cast<Device *>(dev->context);
}

const char * dev_name(wsp_ggml_backend_dev_t dev) {
    return dev_ctx(dev).name.c_str();
}

const char * dev_description(wsp_ggml_backend_dev_t dev) {
    Device &                              d = dev_ctx(dev);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    return d.descriptions.back().c_str();
}

void dev_memory(wsp_ggml_backend_dev_t dev, size_t * free_mem, size_t * total) {
    *free_mem = *total = 0;
    for (wsp_ggml_backend_dev_t m : dev_ctx(dev).members) {
        size_t f = 0, t = 0;
        wsp_ggml_backend_dev_memory(m, &f, &t);
        *free_mem += f;
        *total += t;
    }
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_props(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_dev_props * props) {
    Device & d         = dev_ctx(dev);
    props->name        = d.name.c_str();
    props->description = dev_description(dev);
    props->type        = WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->caps.async                = true;
    props->caps.host_buffer          = wsp_ggml_backend_dev_host_buffer_type(d.main()) != nullptr;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events               = false; // the scheduler waits for it on the host
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t dev, const char *) {
    return backend_init(dev_ctx(dev));
}

wsp_ggml_backend_buffer_type_t dev_buft(wsp_ggml_backend_dev_t dev) {
    return &dev_ctx(dev).buft;
}

wsp_ggml_backend_buffer_type_t dev_host_buft(wsp_ggml_backend_dev_t dev) {
    return wsp_ggml_backend_dev_host_buffer_type(dev_ctx(dev).main());
}

bool dev_supports_op(wsp_ggml_backend_dev_t dev, const wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_supports_op(dev_ctx(dev).main(), op);
}

bool dev_supports_buft(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_buffer_type_t buft) {
    return buft == &dev_ctx(dev).buft || wsp_ggml_backend_dev_supports_buft(dev_ctx(dev).main(), buft);
}

bool dev_offload_op(wsp_ggml_backend_dev_t dev, const wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_offload_op(dev_ctx(dev).main(), op);
}

const wsp_ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buft,
    /* .get_host_buffer_type = */ dev_host_buft,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

//
// reg: one device
//

const char * reg_name(wsp_ggml_backend_reg_t reg) {
    return static_cast<Device *>(reg->context)->name.c_str();
}

size_t reg_count(wsp_ggml_backend_reg_t) {
    return 1;
}

wsp_ggml_backend_dev_t reg_get(wsp_ggml_backend_reg_t reg, size_t i) {
    return i == 0 ? &static_cast<Device *>(reg->context)->dev : nullptr;
}

// Note [all-GPU counters]
void read_counters(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_counters * out) {
    *out = dev_ctx(dev).counters.read();
}

void * reg_proc(wsp_ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, COUNTERS_PROC) == 0) {
        GetCountersFn fn = &read_counters; // the signature the public function calls
        return reinterpret_cast<void *>(fn);
    }
    return nullptr;
}

// WSP_GGML_TENSOR_SPLIT=3,1: shares per member (partition::parse); otherwise, or where it cannot
// be read (one warning), partition::default_shares: by free memory
std::vector<float> split_proportions(const std::vector<wsp_ggml_backend_dev_t> & members) {
    if (const char * env = std::getenv("WSP_GGML_TENSOR_SPLIT")) {
        std::vector<float> p;
        std::string        why;
        if (partition::parse(env, members.size(), &p, &why)) {
            return p;
        }
        WSP_LOG_WARN("WSP_GGML_TENSOR_SPLIT: %s; splitting by free memory instead\n", why.c_str());
    }
    return partition::default_shares(members);
}

// "all of SIM0 (75%), SIM1 (25%) of the mat-mul weights' rows"
std::string description_of(const Device & d) {
    double sum = 0.0;
    for (float p : d.tensor_split) {
        sum += p;
    }
    std::string desc = "all of";
    for (size_t i = 0; i < d.members.size(); ++i) {
        char part[96];
        std::snprintf(part, sizeof(part), "%s %s (%.0f%%)", i == 0 ? "" : ",", wsp_ggml_backend_dev_name(d.members[i]),
                      100.0 * d.tensor_split[i] / sum);
        desc += part;
    }
    return desc + " of the mat-mul weights' rows";
}

} // namespace

Device & device_of(wsp_ggml_backend_dev_t dev) {
    return dev_ctx(dev);
}

bool spreadable(const Device & d, const wsp_ggml_tensor * w) {
    return w != nullptr && w->view_src == nullptr && w->op == WSP_GGML_OP_NONE && w->buffer != nullptr &&
           wsp_ggml_backend_buffer_get_usage(w->buffer) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
           wsp_ggml_backend_buffer_get_type(w->buffer) == wsp_ggml_backend_dev_buffer_type(d.main()) && w->ne[2] == 1 &&
           w->ne[3] == 1 && w->ne[1] >= (int64_t) d.members.size() && wsp_ggml_is_contiguous(w);
}

wsp_ggml_tensor * Device::shadow_of(const wsp_ggml_tensor * w) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    auto                                  it = shadows.find(w);
    if (it != shadows.end()) {
        const wsp_ggml_tensor * t = it->second.tensor.get();
        if (it->second.weight_data == w->data && t->type == w->type && t->ne[0] == w->ne[0] && t->ne[1] == w->ne[1]) {
            race::checker().acquire(race::checker().host_agent(), it->second.made);
            return it->second.tensor.get();
        }
        wsp_ggml_backend_buffer_free(it->second.buffer); // another tensor now: made again
        shadows.erase(it);
    }
    using split_buft_fn = wsp_ggml_backend_buffer_type_t (*)(int, const float *);
    auto make_buft      = reinterpret_cast<split_buft_fn>(
        wsp_ggml_backend_reg_get_proc_address(member_reg, "wsp_ggml_backend_split_buffer_type"));
    wsp_ggml_backend_buffer_type_t buft = make_buft ? make_buft(0, tensor_split.data()) : nullptr;
    if (buft == nullptr) {
        WSP_LOG_ERROR("%s: %s has no split buffer type; %s's mat-muls stay on %s\n", name.c_str(),
                      wsp_ggml_backend_reg_name(member_reg), w->name, wsp_ggml_backend_dev_name(main()));
        return nullptr;
    }
    Shadow s;
    s.tensor = std::make_unique<wsp_ggml_tensor>();
    s.buffer = wsp_ggml_backend_buft_alloc_buffer(buft, wsp_ggml_nbytes(w)); // handles; slices come per device
    if (s.buffer == nullptr || !split::init_shadow(s.buffer, s.tensor.get(), w)) {
        if (s.buffer != nullptr) {
            wsp_ggml_backend_buffer_free(s.buffer);
        }
        WSP_LOG_ERROR("%s: cannot spread %s over the members; its mat-muls stay on %s\n", name.c_str(), w->name,
                      wsp_ggml_backend_dev_name(main()));
        return nullptr;
    }
    wsp_ggml_backend_buffer_set_usage(s.buffer, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    s.weight_data       = w->data;
    s.made              = race::checker().release_host();
    wsp_ggml_tensor * t = s.tensor.get();
    shadows.emplace(w, std::move(s));
    return t;
}

namespace {

void free_piece(Piece & p) {
    wsp_ggml_backend_buffer_free(p.buffer);
    wsp_ggml_free(p.ctx);
}

// the bytes of w's piece, read through the host: rows [b, e), columns [b, e) of every row, or all
bool piece_bytes(const wsp_ggml_tensor * w, PieceKind kind, int64_t b, int64_t e, std::vector<uint8_t> & out) {
    if (kind == PieceKind::ROWS) {
        out.resize((size_t) (e - b) * w->nb[1]);
        wsp_ggml_backend_tensor_get(w, out.data(), (size_t) b * w->nb[1], out.size());
        return true;
    }
    std::vector<uint8_t> all(wsp_ggml_nbytes(w));
    wsp_ggml_backend_tensor_get(w, all.data(), 0, all.size());
    if (kind == PieceKind::WHOLE) {
        out = std::move(all);
        return true;
    }
    const int64_t blck = wsp_ggml_blck_size(w->type);
    if (b % blck != 0 || e % blck != 0) {
        return false;
    }
    const size_t first = wsp_ggml_row_size(w->type, b), len = wsp_ggml_row_size(w->type, e - b);
    out.resize(len * (size_t) w->ne[1]);
    for (int64_t r = 0; r < w->ne[1]; ++r) {
        std::memcpy(out.data() + (size_t) r * len, all.data() + (size_t) r * w->nb[1] + first, len);
    }
    return true;
}

const char * kind_name(PieceKind k) {
    return k == PieceKind::WHOLE ? "whole" : k == PieceKind::ROWS ? "rows" : "columns";
}

} // namespace

wsp_ggml_tensor * Device::piece_of(const wsp_ggml_tensor * w, int m, PieceKind kind, int64_t begin, int64_t end) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    const auto                            key = std::make_tuple(w, m, kind, begin, end);
    auto                                  it  = pieces.find(key);
    if (it != pieces.end()) {
        if (it->second.weight_data == w->data && it->second.tensor->type == w->type) {
            race::checker().acquire(race::checker().host_agent(), it->second.made);
            return it->second.tensor;
        }
        free_piece(it->second); // another tensor at that address now: made again
        pieces.erase(it);
        ++generation;
    }
    int64_t ne[WSP_GGML_MAX_DIMS]          = { w->ne[0], w->ne[1], w->ne[2], w->ne[3] };
    ne[kind == PieceKind::COLUMNS ? 0 : 1] = kind == PieceKind::WHOLE ? w->ne[1] : end - begin;
    Piece                p;
    std::vector<uint8_t> bytes;
    p.ctx = wsp_ggml_init({ wsp_ggml_tensor_overhead(), nullptr, true });
    if (p.ctx != nullptr && piece_bytes(w, kind, begin, end, bytes)) {
        p.tensor = wsp_ggml_new_tensor(p.ctx, w->type, WSP_GGML_MAX_DIMS, ne);
        wsp_ggml_format_name(p.tensor, "%s (%s %lld-%lld)", w->name, kind_name(kind), (long long) begin,
                             (long long) end);
        p.buffer = wsp_ggml_backend_alloc_ctx_tensors_from_buft(p.ctx, wsp_ggml_backend_dev_buffer_type(members[m]));
    }
    if (p.buffer == nullptr || bytes.size() != wsp_ggml_nbytes(p.tensor)) {
        WSP_LOG_ERROR("%s: cannot place %s's %s %lld-%lld on %s\n", name.c_str(), w->name, kind_name(kind),
                      (long long) begin, (long long) end, wsp_ggml_backend_dev_name(members[m]));
        if (p.buffer != nullptr) {
            wsp_ggml_backend_buffer_free(p.buffer);
        }
        wsp_ggml_free(p.ctx);
        return nullptr;
    }
    wsp_ggml_backend_buffer_set_usage(p.buffer, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    wsp_ggml_backend_tensor_set(p.tensor, bytes.data(), 0, bytes.size());
    p.weight_data       = w->data;
    p.weight_buffer     = w->buffer;
    p.member            = m;
    p.made              = race::checker().release_host();
    wsp_ggml_tensor * t = p.tensor;
    pieces.emplace(key, std::move(p));
    return t;
}

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

bool Device::owns(wsp_ggml_backend_buffer_t b) {
    std::lock_guard<std::mutex> lock(watched_mutex());
    auto                        it = watched().find(b);
    return it != watched().end() && it->second.device == this;
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
        wsp_ggml_backend_buffer_t buf = r->buffer;
        watched_of(buf).original.set_tensor(buf, const_cast<wsp_ggml_tensor *>(r), whole.data(), 0, whole.size());
    }
    if (drop) {
        for (Piece & p : c.pieces) {
            free_piece(p);
        }
    }
}

// Note [new shares]: the shares decide which rows each member's shadow slice, weight piece and
// cache part holds, and those are made once and then kept: new shares that kept them would
// compute with the old layout, and ones laid out anew beside them would hold the memory twice.
// So they all go here and are made again, by the new shares, when the next graph needs them:
// a sharded cache is first made whole in the main member's copy (its latest bytes are in the
// parts), as unshard(r, true) does. Every piece or cache that goes bumps the generation, which
// drops the runner's kept builds (Note [kept member graphs]); so does a shadow, for good measure.
// The members' queued work must be done (the caller synchronized the device's backends), and no
// graph may be computing on them: the backend reads tensor_split without the mutex.
void Device::set_shares(const std::vector<float> & shares) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (shares == tensor_split) {
        return;
    }
    std::vector<const wsp_ggml_tensor *> roots;
    for (const auto & [r, c] : caches) {
        roots.push_back(r);
    }
    for (const wsp_ggml_tensor * r : roots) {
        unshard(r, true);
    }
    for (auto & [w, sh] : shadows) {
        wsp_ggml_backend_buffer_free(sh.buffer);
    }
    shadows.clear();
    for (auto & [key, p] : pieces) {
        free_piece(p);
    }
    pieces.clear();
    tensor_split = shares;
    descriptions.push_back(description_of(*this));
    ++generation;
}

void Device::say_once(const std::string & msg) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (said.insert(msg).second) {
        WSP_LOG_INFO("%s: %s\n", name.c_str(), msg.c_str());
    }
}

void Device::forget(const wsp_ggml_tensor * w) {
    unshard(tp::root_of(w), true); // a write to a sharded cache: whole again first, then written
    std::lock_guard<std::recursive_mutex> lock(mutex);
    auto                                  it = shadows.find(w);
    if (it != shadows.end()) {
        wsp_ggml_backend_buffer_free(it->second.buffer);
        shadows.erase(it);
    }
    for (auto p = pieces.lower_bound(std::make_tuple(w, INT32_MIN, PieceKind::WHOLE, INT64_MIN, INT64_MIN));
         p != pieces.end() && std::get<0>(p->first) == w;) {
        free_piece(p->second);
        p = pieces.erase(p);
        ++generation;
    }
}

void Device::forget_buffer(wsp_ggml_backend_buffer_t b, bool with_caches) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    for (auto it = shadows.begin(); it != shadows.end();) {
        // the main rows of a shadow are the weight's memory: the slice on the main member says where
        bool in_b = false;
        for (const split::Slice & s : split::split_of(it->second.tensor.get())->slices) {
            in_b = in_b || s.buffer == b;
        }
        if (in_b) {
            wsp_ggml_backend_buffer_free(it->second.buffer);
            it = shadows.erase(it);
        } else {
            ++it;
        }
    }
    for (auto c = caches.begin(); c != caches.end();) { // the buffer goes: no write-back
        if (with_caches && c->second.buffer == b) {
            for (Piece & p : c->second.pieces) {
                free_piece(p);
            }
            c = caches.erase(c);
            ++generation;
        } else {
            ++c;
        }
    }
    for (auto p = pieces.begin(); p != pieces.end();) {
        if (p->second.weight_buffer == b) {
            free_piece(p->second);
            p = pieces.erase(p);
            ++generation;
        } else {
            ++p;
        }
    }
}

wsp_ggml_backend_reg_t make_reg(wsp_ggml_backend_reg_t reg) {
    if (reg == nullptr || is_all_gpu_reg(reg)) {
        return nullptr;
    }
    std::vector<wsp_ggml_backend_dev_t> gpus;
    for (size_t i = 0; i < wsp_ggml_backend_reg_dev_count(reg); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, i);
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            gpus.push_back(dev);
        }
    }
    if (gpus.size() < 2 || gpus.size() != wsp_ggml_backend_reg_dev_count(reg)) {
        return nullptr; // the split buffer type spans every device of a reg: a GPU-only reg is needed
    }
    // lives until exit, like every device, and stays reachable (not a leak to LeakSanitizer)
    static auto & all_devices = *new std::vector<Device *>;
    auto *        d           = new Device;
    all_devices.push_back(d);
    d->member_reg    = reg;
    d->members       = gpus;
    d->tensor_split  = split_proportions(gpus);
    d->default_split = d->tensor_split;
    d->name          = std::string(wsp_ggml_backend_reg_name(reg)) + "_All";
    d->descriptions.push_back(description_of(*d));
    d->reg  = { WSP_GGML_BACKEND_API_VERSION, { reg_name, reg_count, reg_get, reg_proc }, d };
    d->dev  = { device_iface, &d->reg, d };
    d->buft = { { buft_name, buft_alloc, buft_alignment, buft_max_size, buft_alloc_size, buft_is_host }, &d->dev, d };
    return &d->reg;
}

bool is_all_gpu_reg(wsp_ggml_backend_reg_t reg) {
    return reg != nullptr && reg->iface.get_name == reg_name;
}

wsp_ggml_backend_reg_t member_reg(wsp_ggml_backend_reg_t all_reg) {
    return static_cast<Device *>(all_reg->context)->member_reg;
}

} // namespace wsp::allgpu

using wsp::allgpu::Device;

extern "C" {

bool wsp_ggml_backend_dev_is_all_gpu(wsp_ggml_backend_dev_t dev) {
    return dev != nullptr && wsp::allgpu::is_all_gpu_reg(dev->reg);
}

size_t wsp_ggml_backend_all_gpu_member_count(wsp_ggml_backend_dev_t dev) {
    return wsp_ggml_backend_dev_is_all_gpu(dev) ? wsp::allgpu::device_of(dev).members.size() : 0;
}

wsp_ggml_backend_dev_t wsp_ggml_backend_all_gpu_member(wsp_ggml_backend_dev_t dev, size_t i) {
    if (i >= wsp_ggml_backend_all_gpu_member_count(dev)) {
        WSP_LOG_ERROR("%s: member %zu of %s does not exist\n", __func__, i,
                      dev ? wsp_ggml_backend_dev_name(dev) : "NULL");
        return nullptr;
    }
    return wsp::allgpu::device_of(dev).members[i];
}

wsp_ggml_backend_all_gpu_traffic wsp_ggml_backend_all_gpu_get_traffic(wsp_ggml_backend_dev_t dev) {
    if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
        return {};
    }
    Device &                              d = wsp::allgpu::device_of(dev);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    return d.traffic;
}

bool wsp_ggml_backend_all_gpu_set_tensor_split(wsp_ggml_backend_dev_t dev, const float * shares) {
    if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
        WSP_LOG_ERROR("%s: %s is not an all-GPU device; no shares were set\n", __func__,
                      dev ? wsp_ggml_backend_dev_name(dev) : "NULL");
        return false;
    }
    Device &           d = wsp::allgpu::device_of(dev);
    std::vector<float> s = d.default_split;
    if (shares != nullptr) {
        std::string why;
        if (!wsp::partition::check(shares, d.members.size(), &why)) {
            WSP_LOG_ERROR("%s: %s: %s; the shares stay as they were\n", __func__, d.name.c_str(), why.c_str());
            return false;
        }
        s.assign(shares, shares + d.members.size());
    }
    wsp::allgpu::MemberWork work(d); // making caches whole reads the members
    d.set_shares(s);
    return true;
}

size_t wsp_ggml_backend_all_gpu_weight_bytes(wsp_ggml_backend_dev_t dev, size_t i) {
    if (i >= wsp_ggml_backend_all_gpu_member_count(dev)) {
        return 0;
    }
    Device & d     = wsp::allgpu::device_of(dev);
    size_t   bytes = 0;
    if (i == 0) {
        std::lock_guard<std::mutex> lock(wsp::allgpu::watched_mutex());
        for (const auto & [b, w] : wsp::allgpu::watched()) {
            if (w.device == &d && wsp_ggml_backend_buffer_get_usage(b) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
                bytes += wsp_ggml_backend_buffer_get_size(b);
            }
        }
    }
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    for (const auto & [w, s] : d.shadows) {
        bytes += wsp::split::device_bytes(s.buffer, (int) i);
    }
    for (const auto & [key, p] : d.pieces) {
        bytes += p.member == (int) i ? wsp_ggml_backend_buffer_get_size(p.buffer) : 0;
    }
    return bytes;
}

} // extern "C"
