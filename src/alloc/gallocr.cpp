// Graph allocator. reserve plans a graph: it walks the nodes in order, gives each tensor an
// offset from a DynAllocator per buffer, frees a tensor after its last user, and lets
// elementwise ops compute in place over a parent that nobody else reads. alloc_graph then
// places the tensors at the planned offsets, re-planning only when the graph no longer fits.
// Graph inputs are placed first and, like outputs, are never freed or overwritten.

#include "dyn_allocator.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace {

using wsp::alloc::DynAllocator;

struct TensorAlloc {
    int    buffer_id = -1;
    size_t offset    = SIZE_MAX;
    size_t size_max  = 0;
};

struct NodeAlloc {
    TensorAlloc dst;
    TensorAlloc src[WSP_GGML_MAX_SRC];
    int         op = WSP_GGML_OP_NONE;
};

struct HashNode {
    int    n_children = 0;
    int    n_views    = 0;
    int    buffer_id  = 0;
    size_t offset     = 0;
    bool   allocated  = false; // planned by this allocator and not yet freed
};

bool is_view(const wsp_ggml_tensor * t) {
    return t->view_src != nullptr;
}

bool same_layout(const wsp_ggml_tensor * a, const wsp_ggml_tensor * b) {
    return a->type == b->type && wsp_ggml_are_same_shape(a, b) && wsp_ggml_are_same_stride(a, b);
}

// which sources an op may overwrite with its result (element i read before element i is written)
bool can_inplace(const wsp_ggml_tensor * node, int src_index) {
    switch (node->op) {
        case WSP_GGML_OP_ADD:
        case WSP_GGML_OP_SUB:
        case WSP_GGML_OP_MUL:
        case WSP_GGML_OP_DIV: return true;
        case WSP_GGML_OP_SQR:
        case WSP_GGML_OP_SQRT:
        case WSP_GGML_OP_SCALE:
        case WSP_GGML_OP_UNARY:
        case WSP_GGML_OP_NORM:
        case WSP_GGML_OP_SOFT_MAX: return src_index == 0;
        default: return false;
    }
}

constexpr int32_t KEEP_FLAGS = WSP_GGML_TENSOR_FLAG_INPUT | WSP_GGML_TENSOR_FLAG_OUTPUT;

} // namespace

struct wsp_ggml_gallocr {
    std::vector<wsp_ggml_backend_buffer_type_t> bufts;
    std::vector<wsp_ggml_backend_buffer_t>      buffers; // NULL where owner[i] != i
    std::vector<int>                            owner;   // first index with the same buffer type
    std::vector<std::unique_ptr<DynAllocator>>  allocs;  // one per owner

    std::unordered_map<const wsp_ggml_tensor *, HashNode> hash;
    std::vector<NodeAlloc>                                node_allocs;
    std::vector<TensorAlloc>                              leaf_allocs;

    DynAllocator & alloc_of(int id) { return *allocs[owner[id]]; }

    HashNode & node(const wsp_ggml_tensor * t) { return hash[t]; }

    bool is_own(const wsp_ggml_tensor * t) {
        auto it = hash.find(t);
        return it != hash.end() && it->second.allocated;
    }

    bool is_allocated(const wsp_ggml_tensor * t) { return t->data != nullptr || is_own(t); }

    size_t alloc_size(int id, const wsp_ggml_tensor * t) const {
        return wsp_ggml_backend_buft_get_alloc_size(bufts[id], t);
    }

    bool        try_inplace(wsp_ggml_tensor * t, HashNode & hn, int buffer_id);
    void        allocate_node(wsp_ggml_tensor * t, int buffer_id);
    void        free_node(wsp_ggml_tensor * t);
    void        release_parent(wsp_ggml_tensor * parent);
    void        plan(wsp_ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids);
    void        record(wsp_ggml_cgraph * graph);
    TensorAlloc tensor_alloc_of(const wsp_ggml_tensor * t);
    bool        needs_realloc(wsp_ggml_cgraph * graph);
    bool        init_tensor(wsp_ggml_tensor * t, const TensorAlloc & ta);
};

bool wsp_ggml_gallocr::try_inplace(wsp_ggml_tensor * t, HashNode & hn, int buffer_id) {
    for (int i = 0; i < WSP_GGML_MAX_SRC; ++i) {
        wsp_ggml_tensor * parent = t->src[i];
        if (parent == nullptr || !can_inplace(t, i) || !same_layout(t, parent)) {
            continue;
        }
        HashNode & phn = node(parent);
        if (phn.n_children != 1 || phn.n_views != 0) {
            continue; // someone else still reads the parent
        }
        const wsp_ggml_tensor * storage = is_view(parent) ? parent->view_src : parent;
        if (owner[(size_t) node(storage).buffer_id] != owner[(size_t) buffer_id]) {
            continue; // the parent lives in another buffer
        }
        if (!is_view(parent)) {
            if (!is_own(parent) || (parent->flags & KEEP_FLAGS)) {
                continue;
            }
            hn.buffer_id  = phn.buffer_id;
            hn.offset     = phn.offset;
            phn.allocated = false; // ownership moves to t
            return true;
        }
        // a view parent: reuse its source when the view is the source's only reader and covers it from the start
        wsp_ggml_tensor * vsrc = parent->view_src;
        if (!is_own(vsrc) || (vsrc->flags & KEEP_FLAGS) || parent->view_offs != 0 ||
            alloc_size(buffer_id, vsrc) != alloc_size(buffer_id, t)) {
            continue;
        }
        HashNode & vhn = node(vsrc);
        if (vhn.n_views == 1 && vhn.n_children == 0) {
            hn.buffer_id   = vhn.buffer_id;
            hn.offset      = vhn.offset;
            vhn.allocated  = false;
            vhn.n_views    = 0;
            phn.n_children = 0; // the view is consumed by t; nothing left to release
            return true;
        }
    }
    return false;
}

void wsp_ggml_gallocr::allocate_node(wsp_ggml_tensor * t, int buffer_id) {
    if (is_allocated(t) || is_view(t)) {
        return;
    }
    HashNode & hn = node(t);
    hn.allocated  = true;
    if (try_inplace(t, hn, buffer_id)) {
        return;
    }
    hn.buffer_id = buffer_id;
    hn.offset    = alloc_of(buffer_id).allocate(alloc_size(buffer_id, t));
}

void wsp_ggml_gallocr::free_node(wsp_ggml_tensor * t) {
    if (t->flags & KEEP_FLAGS) {
        return;
    }
    HashNode & hn = node(t);
    alloc_of(hn.buffer_id).free(hn.offset, alloc_size(hn.buffer_id, t));
    hn.allocated = false;
}

void wsp_ggml_gallocr::release_parent(wsp_ggml_tensor * parent) {
    HashNode & phn = node(parent);
    if (phn.n_children == 0) {
        return; // consumed by an in-place view reuse
    }
    if (--phn.n_children != 0 || phn.n_views != 0) {
        return;
    }
    if (is_view(parent)) {
        HashNode & vhn = node(parent->view_src);
        vhn.n_views -= 1;
        if (vhn.n_views == 0 && vhn.n_children == 0 && vhn.allocated) {
            free_node(parent->view_src);
        }
    } else if (phn.allocated) {
        free_node(parent);
    }
}

void wsp_ggml_gallocr::plan(wsp_ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids) {
    auto node_buf = [&](int i) { return node_buffer_ids ? node_buffer_ids[i] : 0; };
    auto leaf_buf = [&](int i) { return leaf_buffer_ids ? leaf_buffer_ids[i] : 0; };

    hash.clear();
    hash.reserve((size_t) (graph->n_nodes + graph->n_leafs) * 2);
    for (size_t i = 0; i < allocs.size(); ++i) {
        if (allocs[i]) {
            allocs[i]->reset();
        }
    }

    // inputs first, in distinct memory, so that nothing computed can overwrite them
    for (int i = 0; i < graph->n_leafs; ++i) {
        if (graph->leafs[i]->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
            allocate_node(graph->leafs[i], leaf_buf(i));
        }
    }
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * n = graph->nodes[i];
        if (n->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
            allocate_node(n, node_buf(i));
        }
        for (wsp_ggml_tensor * src : n->src) {
            if (src != nullptr && (src->flags & WSP_GGML_TENSOR_FLAG_INPUT)) {
                allocate_node(src, node_buf(i));
            }
        }
    }
    // leafs without data live from the start until their last user
    for (int i = 0; i < graph->n_leafs; ++i) {
        allocate_node(graph->leafs[i], leaf_buf(i));
    }

    // count readers; an op NONE node only carries dependencies and is not a view user
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * n = graph->nodes[i];
        if (is_view(n) && n->op != WSP_GGML_OP_NONE) {
            node(n->view_src).n_views += 1;
        }
        for (wsp_ggml_tensor * src : n->src) {
            if (src != nullptr) {
                node(src).n_children += 1;
            }
        }
    }

    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * n = graph->nodes[i];
        for (wsp_ggml_tensor * src : n->src) {
            if (src != nullptr) {
                allocate_node(src, node_buf(i));
            }
        }
        allocate_node(n, node_buf(i));
        for (wsp_ggml_tensor * src : n->src) {
            if (src != nullptr) {
                release_parent(src);
            }
        }
    }
}

TensorAlloc wsp_ggml_gallocr::tensor_alloc_of(const wsp_ggml_tensor * t) {
    TensorAlloc ta;
    if (t->data != nullptr || t->view_src != nullptr) {
        return ta; // placed by someone else, or a view placed from its source
    }
    const HashNode & hn = hash[t];
    ta.buffer_id        = hn.buffer_id;
    ta.offset           = hn.offset;
    ta.size_max         = alloc_size(hn.buffer_id, t);
    return ta;
}

void wsp_ggml_gallocr::record(wsp_ggml_cgraph * graph) {
    node_allocs.assign((size_t) graph->n_nodes, NodeAlloc{});
    for (int i = 0; i < graph->n_nodes; ++i) {
        const wsp_ggml_tensor * n  = graph->nodes[i];
        NodeAlloc &             na = node_allocs[(size_t) i];
        na.dst                     = tensor_alloc_of(n);
        na.op                      = n->op;
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (n->src[j] != nullptr) {
                na.src[j] = tensor_alloc_of(n->src[j]);
            }
        }
    }
    leaf_allocs.assign((size_t) graph->n_leafs, TensorAlloc{});
    for (int i = 0; i < graph->n_leafs; ++i) {
        leaf_allocs[(size_t) i] = tensor_alloc_of(graph->leafs[i]);
    }
}

bool wsp_ggml_gallocr::needs_realloc(wsp_ggml_cgraph * graph) {
    if ((size_t) graph->n_nodes != node_allocs.size() || (size_t) graph->n_leafs != leaf_allocs.size()) {
        return true;
    }
    auto misfit = [&](const wsp_ggml_tensor * t, const TensorAlloc & ta) {
        if (t->data != nullptr || t->view_src != nullptr) {
            return false;
        }
        return ta.buffer_id < 0 || alloc_size(ta.buffer_id, t) > ta.size_max;
    };
    for (int i = 0; i < graph->n_nodes; ++i) {
        const wsp_ggml_tensor * n  = graph->nodes[i];
        const NodeAlloc &       na = node_allocs[(size_t) i];
        if (n->op != na.op || misfit(n, na.dst)) {
            return true;
        }
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (n->src[j] != nullptr && misfit(n->src[j], na.src[j])) {
                return true;
            }
        }
    }
    for (int i = 0; i < graph->n_leafs; ++i) {
        if (misfit(graph->leafs[i], leaf_allocs[(size_t) i])) {
            return true;
        }
    }
    return false;
}

bool wsp_ggml_gallocr::init_tensor(wsp_ggml_tensor * t, const TensorAlloc & ta) {
    if (t->view_src != nullptr) {
        if (t->buffer == nullptr) {
            return wsp_ggml_backend_view_init(t) == WSP_GGML_STATUS_SUCCESS;
        }
        return true;
    }
    if (t->data != nullptr) {
        return true;
    }
    wsp_ggml_backend_buffer_t buf  = buffers[(size_t) owner[(size_t) ta.buffer_id]];
    char *                    base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buf));
    return wsp_ggml_backend_tensor_alloc(buf, t, base + ta.offset) == WSP_GGML_STATUS_SUCCESS;
}

extern "C" {

wsp_ggml_gallocr_t wsp_ggml_gallocr_new_n(wsp_ggml_backend_buffer_type_t * bufts, int n_bufs) {
    if (bufts == nullptr || n_bufs <= 0) {
        WSP_LOG_ERROR("%s: at least one buffer type is needed\n", __func__);
        return nullptr;
    }
    auto * g = new wsp_ggml_gallocr();
    g->bufts.assign(bufts, bufts + n_bufs);
    g->buffers.assign((size_t) n_bufs, nullptr);
    g->owner.resize((size_t) n_bufs);
    g->allocs.resize((size_t) n_bufs);
    for (int i = 0; i < n_bufs; ++i) {
        g->owner[(size_t) i] = i;
        for (int j = 0; j < i; ++j) {
            if (bufts[j] == bufts[i]) {
                g->owner[(size_t) i] = g->owner[(size_t) j];
                break;
            }
        }
        if (g->owner[(size_t) i] == i) {
            g->allocs[(size_t) i] = std::make_unique<DynAllocator>(wsp_ggml_backend_buft_get_alignment(bufts[i]));
        }
    }
    return g;
}

wsp_ggml_gallocr_t wsp_ggml_gallocr_new(wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_gallocr_new_n(&buft, 1);
}

void wsp_ggml_gallocr_free(wsp_ggml_gallocr_t galloc) {
    if (galloc == nullptr) {
        return;
    }
    for (size_t i = 0; i < galloc->buffers.size(); ++i) {
        if (galloc->owner[i] == (int) i) {
            wsp_ggml_backend_buffer_free(galloc->buffers[i]);
        }
    }
    delete galloc;
}

bool wsp_ggml_gallocr_reserve_n(wsp_ggml_gallocr_t galloc, struct wsp_ggml_cgraph * graph, const int * node_buffer_ids,
                                const int * leaf_buffer_ids) {
    const int n_bufs = (int) galloc->bufts.size();
    for (int i = 0; node_buffer_ids && i < graph->n_nodes; ++i) {
        if (node_buffer_ids[i] < 0 || node_buffer_ids[i] >= n_bufs) {
            WSP_LOG_ERROR("%s: node %d has buffer id %d, outside [0, %d)\n", __func__, i, node_buffer_ids[i], n_bufs);
            return false;
        }
    }
    for (int i = 0; leaf_buffer_ids && i < graph->n_leafs; ++i) {
        if (leaf_buffer_ids[i] < 0 || leaf_buffer_ids[i] >= n_bufs) {
            WSP_LOG_ERROR("%s: leaf %d has buffer id %d, outside [0, %d)\n", __func__, i, leaf_buffer_ids[i], n_bufs);
            return false;
        }
    }
    galloc->plan(graph, node_buffer_ids, leaf_buffer_ids);
    galloc->record(graph);

    for (int i = 0; i < n_bufs; ++i) {
        if (galloc->owner[(size_t) i] != i) {
            continue;
        }
        const size_t              need = galloc->allocs[(size_t) i]->max_size();
        wsp_ggml_backend_buffer_t cur  = galloc->buffers[(size_t) i];
        if (cur != nullptr && wsp_ggml_backend_buffer_get_size(cur) >= need) {
            continue;
        }
        wsp_ggml_backend_buffer_free(cur);
        galloc->buffers[(size_t) i] = wsp_ggml_backend_buft_alloc_buffer(galloc->bufts[(size_t) i], need);
        if (galloc->buffers[(size_t) i] == nullptr) {
            WSP_LOG_ERROR("%s: failed to allocate %s buffer of size %zu\n", __func__,
                          wsp_ggml_backend_buft_name(galloc->bufts[(size_t) i]), need);
            galloc->node_allocs.clear(); // force a new plan next time
            return false;
        }
        wsp_ggml_backend_buffer_set_usage(galloc->buffers[(size_t) i], WSP_GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    }
    return true;
}

bool wsp_ggml_gallocr_reserve(wsp_ggml_gallocr_t galloc, struct wsp_ggml_cgraph * graph) {
    return wsp_ggml_gallocr_reserve_n(galloc, graph, nullptr, nullptr);
}

bool wsp_ggml_gallocr_alloc_graph(wsp_ggml_gallocr_t galloc, struct wsp_ggml_cgraph * graph) {
    if (galloc->needs_realloc(graph)) {
        if (galloc->bufts.size() != 1) {
            WSP_LOG_ERROR("%s: the graph changed and the allocator has %zu buffers; call wsp_ggml_gallocr_reserve_n "
                          "with the buffer ids first\n",
                          __func__, galloc->bufts.size());
            return false;
        }
        if (!wsp_ggml_gallocr_reserve(galloc, graph)) {
            return false;
        }
    }
    for (size_t i = 0; i < galloc->buffers.size(); ++i) {
        if (galloc->buffers[i] != nullptr) {
            wsp_ggml_backend_buffer_reset(galloc->buffers[i]);
        }
    }
    bool ok = true;
    for (int i = 0; i < graph->n_leafs; ++i) {
        ok = galloc->init_tensor(graph->leafs[i], galloc->leaf_allocs[(size_t) i]) && ok;
    }
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * n  = graph->nodes[i];
        const NodeAlloc & na = galloc->node_allocs[(size_t) i];
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (n->src[j] != nullptr) {
                ok = galloc->init_tensor(n->src[j], na.src[j]) && ok;
            }
        }
        ok = galloc->init_tensor(n, na.dst) && ok;
    }
    if (!ok) {
        WSP_LOG_ERROR("%s: some tensors could not be placed in their buffers\n", __func__);
    }
    return ok;
}

size_t wsp_ggml_gallocr_get_buffer_size(wsp_ggml_gallocr_t galloc, int buffer_id) {
    if (buffer_id < 0 || (size_t) buffer_id >= galloc->buffers.size()) {
        WSP_LOG_ERROR("%s: buffer id %d out of range\n", __func__, buffer_id);
        return 0;
    }
    // a buffer type used several times has one buffer, reported once
    if (galloc->owner[(size_t) buffer_id] != buffer_id || galloc->buffers[(size_t) buffer_id] == nullptr) {
        return 0;
    }
    return wsp_ggml_backend_buffer_get_size(galloc->buffers[(size_t) buffer_id]);
}

} // extern "C"
