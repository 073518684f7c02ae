// The all-GPU device's one store of weights' copies: a weight's piece per member (its rows, its
// columns or all of it, keyed by weight, member, kind and range), made on first use and gone
// when the weight is written, its buffer goes or the shares change. The main member reads the
// weight itself (its rows and columns are views of it), so no member holds a weight's bytes twice.

#include "all_gpu.h"

#include <climits>
#include <cstring>

namespace wsp::allgpu {

bool spreadable(const Device & d, const wsp_ggml_tensor * w) {
    if (w == nullptr || w->ne[2] != 1 || w->ne[3] != 1 || w->ne[1] < (int64_t) d.members.size() ||
        !wsp_ggml_is_contiguous(w)) {
        return false;
    }
    // the weight itself, or a reshape of all of it into a matrix (a convolution's kernel
    // [K, IC, OC] read as [K*IC, OC]: its rows and columns are bytes of the weight too)
    const wsp_ggml_tensor * r = storage_of(w);
    const bool              whole_reshape =
        w->view_src == nullptr || (w->op == WSP_GGML_OP_RESHAPE && w->src[0] == r && w->view_offs == 0 &&
                                   wsp_ggml_nbytes(w) == wsp_ggml_nbytes(r) && wsp_ggml_is_contiguous(r));
    return whole_reshape && r->op == WSP_GGML_OP_NONE && r->buffer != nullptr &&
           wsp_ggml_backend_buffer_get_usage(r->buffer) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
           wsp_ggml_backend_buffer_get_type(r->buffer) == wsp_ggml_backend_dev_buffer_type(d.main());
}

void free_piece(Piece & p) {
    wsp_ggml_backend_buffer_free(p.buffer);
    wsp_ggml_free(p.ctx);
}

namespace {

// the bytes of w's piece, read through the host from the weight w is all of (w's shape says
// what its rows and columns are): rows [b, e), columns [b, e) of every row, or all
bool piece_bytes(const wsp_ggml_tensor * w, PieceKind kind, int64_t b, int64_t e, std::vector<uint8_t> & out) {
    const wsp_ggml_tensor * r = storage_of(w);
    if (kind == PieceKind::ROWS) {
        out.resize((size_t) (e - b) * w->nb[1]);
        wsp_ggml_backend_tensor_get(r, out.data(), (size_t) b * w->nb[1], out.size());
        return true;
    }
    std::vector<uint8_t> all(wsp_ggml_nbytes(r));
    wsp_ggml_backend_tensor_get(r, all.data(), 0, all.size());
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
    // keyed by the weight itself: a reshape of all of it (spreadable) takes its pieces from there
    const wsp_ggml_tensor * root                  = storage_of(w);
    int64_t                 ne[WSP_GGML_MAX_DIMS] = { w->ne[0], w->ne[1], w->ne[2], w->ne[3] };
    ne[kind == PieceKind::COLUMNS ? 0 : 1]        = kind == PieceKind::WHOLE ? w->ne[1] : end - begin;
    const auto key                                = std::make_tuple(root, m, kind, begin, end);
    auto       it                                 = pieces.find(key);
    if (it != pieces.end()) {
        if (it->second.weight_data == root->data && it->second.tensor->type == w->type &&
            std::equal(ne, ne + WSP_GGML_MAX_DIMS, it->second.tensor->ne)) {
            race::checker().acquire(race::checker().host_agent(), it->second.made);
            return it->second.tensor;
        }
        free_piece(it->second); // another tensor at that address now, or another reading: made again
        pieces.erase(it);
        ++generation;
    }
    Piece                p;
    std::vector<uint8_t> bytes;
    p.ctx = wsp_ggml_init({ wsp_ggml_tensor_overhead(), nullptr, true });
    if (p.ctx != nullptr && piece_bytes(w, kind, begin, end, bytes)) {
        p.tensor = wsp_ggml_new_tensor(p.ctx, w->type, WSP_GGML_MAX_DIMS, ne);
        wsp_ggml_format_name(p.tensor, "%s (%s %lld-%lld)", root->name, kind_name(kind), (long long) begin,
                             (long long) end);
        p.buffer = wsp_ggml_backend_alloc_ctx_tensors_from_buft(p.ctx, wsp_ggml_backend_dev_buffer_type(members[m]));
    }
    if (p.buffer == nullptr || bytes.size() != wsp_ggml_nbytes(p.tensor)) {
        WSP_LOG_ERROR("%s: cannot place %s's %s %lld-%lld on %s\n", name.c_str(), root->name, kind_name(kind),
                      (long long) begin, (long long) end, wsp_ggml_backend_dev_name(members[m]));
        if (p.buffer != nullptr) {
            wsp_ggml_backend_buffer_free(p.buffer);
        }
        wsp_ggml_free(p.ctx);
        return nullptr;
    }
    wsp_ggml_backend_buffer_set_usage(p.buffer, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    wsp_ggml_backend_tensor_set(p.tensor, bytes.data(), 0, bytes.size());
    p.weight_data       = root->data;
    p.weight_buffer     = root->buffer;
    p.member            = m;
    p.made              = race::checker().release_host();
    wsp_ggml_tensor * t = p.tensor;
    pieces.emplace(key, std::move(p));
    return t;
}

void Device::forget(const wsp_ggml_tensor * w) {
    unshard(storage_of(w), true); // a write to a sharded cache: whole again first, then written
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (w->data != nullptr) {
        stale(w->data, wsp_ggml_nbytes(w)); // Note [member replicas]
    }
    const wsp_ggml_tensor * r = storage_of(w); // a write through a view changes the weight
    for (auto p = pieces.lower_bound(std::make_tuple(r, INT32_MIN, PieceKind::WHOLE, INT64_MIN, INT64_MIN));
         p != pieces.end() && std::get<0>(p->first) == r;) {
        free_piece(p->second);
        p = pieces.erase(p);
        ++generation;
    }
}

void Device::forget_buffer(wsp_ggml_backend_buffer_t b, bool with_caches) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    stale(wsp_ggml_backend_buffer_get_base(b), wsp_ggml_backend_buffer_get_size(b)); // Note [member replicas]
    for (auto c = caches.begin(); c != caches.end();) {                              // the buffer goes: no write-back
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

} // namespace wsp::allgpu

using wsp::allgpu::Device;

extern "C" {

size_t wsp_ggml_backend_all_gpu_weight_bytes(wsp_ggml_backend_dev_t dev, size_t i) {
    if (i >= wsp_ggml_backend_all_gpu_member_count(dev)) {
        return 0;
    }
    Device & d     = wsp::allgpu::device_of(dev);
    size_t   bytes = 0;
    if (i == 0) {
        bytes += wsp::allgpu::main_weight_bytes(d); // the weights themselves
    }
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    for (const auto & [key, p] : d.pieces) {
        bytes += p.member == (int) i ? wsp_ggml_nbytes(p.tensor) : 0; // the range it holds
    }
    return bytes;
}

} // extern "C"
