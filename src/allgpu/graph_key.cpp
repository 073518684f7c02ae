// Note [graph keys] in graph_key.h: a graph's key, the words that tell two graphs apart.

#include "graph_key.h"

#include "../core/impl.h"

#include <cstring>
#include <unordered_map>

namespace wsp::allgpu::tp {

namespace {

constexpr uint64_t NODE = uint64_t(1) << 63; // a source that is the graph's node i: NODE | i

class KeyWriter {
public:
    KeyWriter(GraphKey & k, bool shapes) : k_(k), shapes_(shapes) {}

    void put(uint64_t v) { k_.words.push_back(v); }

    void put_ptr(const void * p) { put((uint64_t) (uintptr_t) p); }

    void put_shape(const wsp_ggml_tensor * t) {
        put((uint64_t) t->type | (uint64_t) t->flags << 32);
        for (int d = 0; d < WSP_GGML_MAX_DIMS && shapes_; ++d) {
            put((uint64_t) t->ne[d]);
            put((uint64_t) t->nb[d]);
        }
    }

    void put_memory(const wsp_ggml_tensor * t) {
        put_ptr(t->data);
        put_ptr(t->buffer);
        put((uint64_t) t->view_offs);
    }

    // a node's source or view source: its index, or the outside tensor (described the first time)
    void put_source(const wsp_ggml_tensor * s) {
        if (s == nullptr) {
            put(0);
            return;
        }
        if (auto it = nodes_.find(s); it != nodes_.end()) {
            put(NODE | (uint64_t) it->second);
            return;
        }
        put_ptr(s);
        if (outside_.emplace(s, (int) outside_.size()).second) {
            put_shape(s);
            if (shapes_) {
                put_memory(s);
            }
            put_ptr(s->view_src);
        }
    }

    void add_node(const wsp_ggml_tensor * n, int i) { nodes_.emplace(n, i); }

    bool is_node(const wsp_ggml_tensor * t) const { return nodes_.count(t) != 0; }

private:
    GraphKey &                                       k_;
    bool                                             shapes_;
    std::unordered_map<const wsp_ggml_tensor *, int> nodes_, outside_;
};

GraphKey key_with(const wsp_ggml_cgraph * g, const std::vector<float> & proportions, bool shapes) {
    GraphKey  k;
    KeyWriter w(k, shapes);
    k.words.reserve((size_t) g->n_nodes * 40 + proportions.size() + 1);
    w.put((uint64_t) g->n_nodes);
    for (float p : proportions) {
        uint32_t bits = 0;
        std::memcpy(&bits, &p, sizeof(bits));
        w.put(bits);
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = g->nodes[i];
        w.put((uint64_t) n->op);
        w.put_shape(n);
        // a view of memory outside the graph (a cache, an input) at another offset is the same
        // graph; a view into a node at another offset is not (its plan may differ)
        const bool outside_view = n->view_src != nullptr && !w.is_node(n->view_src);
        if (!outside_view) {
            w.put((uint64_t) n->view_offs);
        }
        constexpr size_t OP_WORDS = sizeof(n->op_params) / (sizeof(uint64_t));
        static_assert(OP_WORDS * sizeof(uint64_t) == sizeof(n->op_params), "op parameters in whole words");
        for (size_t p = 0; p < OP_WORDS && !(outside_view && n->op == WSP_GGML_OP_VIEW); ++p) { // a view's: its offset
            uint64_t v = 0;
            std::memcpy(&v, reinterpret_cast<const char *>(n->op_params) + p * sizeof(uint64_t), sizeof(v));
            w.put(v);
        }
        w.put_source(n->view_src);
        for (const wsp_ggml_tensor * s : n->src) {
            w.put_source(s);
        }
        w.add_node(n, i);
    }
    uint64_t h = 1469598103934665603ull; // FNV-1a over the words
    for (uint64_t v : k.words) {
        h = (h ^ v) * 1099511628211ull;
    }
    k.hash = h;
    return k;
}

} // namespace

GraphKey key_of(const wsp_ggml_cgraph * g, const std::vector<float> & proportions) {
    return key_with(g, proportions, true);
}

GraphKey alike_key_of(const wsp_ggml_cgraph * g, const std::vector<float> & proportions) {
    return key_with(g, proportions, false);
}

} // namespace wsp::allgpu::tp
