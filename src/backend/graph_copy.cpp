// graph_copy duplicates a graph onto another backend: every tensor is copied with its metadata
// (op, params, flags, name, layout), tensors that had data get memory in one buffer of the target
// backend and their values copied, views are re-initialised over their copied sources.
// compare_graph_backend runs a graph node by node on two backends and shows each pair of results
// to a callback.

#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <unordered_map>

namespace {

struct Copier {
    wsp_ggml_context *                                             ctx_allocated;
    wsp_ggml_context *                                             ctx_unallocated;
    std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *> map;

    wsp_ggml_tensor * dup(wsp_ggml_tensor * src) {
        if (src == nullptr) {
            return nullptr;
        }
        auto it = map.find(src);
        if (it != map.end()) {
            return it->second;
        }
        wsp_ggml_context * ctx = (src->data != nullptr && src->view_src == nullptr) ? ctx_allocated : ctx_unallocated;
        wsp_ggml_tensor *  dst = wsp_ggml_new_tensor(ctx, src->type, WSP_GGML_MAX_DIMS, src->ne);
        for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
            dst->nb[i] = src->nb[i];
        }
        map[src] = dst;
        if (src->view_src != nullptr) {
            dst->view_src  = dup(src->view_src);
            dst->view_offs = src->view_offs;
        }
        dst->op = src->op;
        std::memcpy(dst->op_params, src->op_params, sizeof(dst->op_params));
        dst->flags = src->flags;
        wsp_ggml_set_name(dst, src->name);
        for (int i = 0; i < WSP_GGML_MAX_SRC; ++i) {
            dst->src[i] = dup(src->src[i]);
        }
        return dst;
    }

    // views after their sources; data copied for tensors that own memory
    bool init(wsp_ggml_tensor * src, std::unordered_map<const wsp_ggml_tensor *, bool> & done) {
        if (src == nullptr || done[src]) {
            return true;
        }
        done[src]             = true;
        wsp_ggml_tensor * dst = map.at(src);
        if (src->view_src != nullptr && !init(src->view_src, done)) {
            return false;
        }
        if (dst->view_src != nullptr) {
            if (dst->view_src->buffer != nullptr && wsp_ggml_backend_view_init(dst) != WSP_GGML_STATUS_SUCCESS) {
                return false;
            }
        } else if (src->data != nullptr) {
            wsp_ggml_backend_tensor_copy(src, dst);
        }
        for (wsp_ggml_tensor * s : src->src) {
            if (!init(s, done)) {
                return false;
            }
        }
        return true;
    }
};

struct wsp_ggml_backend_graph_copy failed_copy() {
    return { nullptr, nullptr, nullptr, nullptr };
}

// a tensor the graph reaches that is neither allocated nor a view: its copy would have no values
// and could not be computed from
const wsp_ggml_tensor * unallocated(wsp_ggml_cgraph * graph) {
    for (int i = 0; i < graph->n_nodes; ++i) {
        const wsp_ggml_tensor * n = graph->nodes[i];
        if (n->data == nullptr && n->view_src == nullptr && !wsp_ggml_is_empty(n)) {
            return n;
        }
        for (const wsp_ggml_tensor * src : n->src) {
            if (src != nullptr && src->data == nullptr && src->view_src == nullptr && !wsp_ggml_is_empty(src)) {
                return src;
            }
        }
    }
    return nullptr;
}

} // namespace

extern "C" {

struct wsp_ggml_backend_graph_copy wsp_ggml_backend_graph_copy(wsp_ggml_backend_t       backend,
                                                               struct wsp_ggml_cgraph * graph) {
    if (const wsp_ggml_tensor * t = unallocated(graph)) {
        WSP_LOG_ERROR("%s: %s has no memory (allocate the graph before copying it); nothing was copied\n", __func__,
                      wsp::describe(t).c_str());
        return failed_copy();
    }
    const size_t         max_tensors = graph->visited_hash_set.size + (size_t) graph->n_nodes + (size_t) graph->n_leafs;
    wsp_ggml_init_params params      = { max_tensors * wsp_ggml_tensor_overhead() +
                                             wsp_ggml_graph_overhead_custom((size_t) graph->size, false),
                                         nullptr, true };
    Copier               c;
    c.ctx_allocated   = wsp_ggml_init(params);
    c.ctx_unallocated = wsp_ggml_init(params);
    if (c.ctx_allocated == nullptr || c.ctx_unallocated == nullptr) {
        WSP_LOG_ERROR("%s: cannot create the contexts of the copy\n", __func__);
        wsp_ggml_free(c.ctx_allocated);
        wsp_ggml_free(c.ctx_unallocated);
        return failed_copy();
    }
    for (int i = 0; i < graph->n_nodes; ++i) {
        c.dup(graph->nodes[i]);
    }
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_alloc_ctx_tensors(c.ctx_allocated, backend);
    if (buffer == nullptr && wsp_ggml_get_first_tensor(c.ctx_allocated) != nullptr) {
        WSP_LOG_ERROR("%s: cannot allocate the tensors of the copy on %s\n", __func__, wsp_ggml_backend_name(backend));
        wsp_ggml_free(c.ctx_allocated);
        wsp_ggml_free(c.ctx_unallocated);
        return failed_copy();
    }
    std::unordered_map<const wsp_ggml_tensor *, bool> done;
    for (int i = 0; i < graph->n_nodes; ++i) {
        if (!c.init(graph->nodes[i], done)) {
            WSP_LOG_ERROR("%s: cannot initialise the views of the copy\n", __func__);
            wsp_ggml_backend_buffer_free(buffer);
            wsp_ggml_free(c.ctx_allocated);
            wsp_ggml_free(c.ctx_unallocated);
            return failed_copy();
        }
    }
    wsp_ggml_cgraph * copy = wsp_ggml_new_graph_custom(c.ctx_allocated, (size_t) graph->size, false);
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_graph_add_node(copy, c.map.at(graph->nodes[i]));
    }
    return { buffer, c.ctx_allocated, c.ctx_unallocated, copy };
}

void wsp_ggml_backend_graph_copy_free(struct wsp_ggml_backend_graph_copy copy) {
    wsp_ggml_backend_buffer_free(copy.buffer);
    wsp_ggml_free(copy.ctx_allocated);
    wsp_ggml_free(copy.ctx_unallocated);
}

bool wsp_ggml_backend_compare_graph_backend(wsp_ggml_backend_t backend1, wsp_ggml_backend_t backend2,
                                            struct wsp_ggml_cgraph * graph, wsp_ggml_backend_eval_callback callback,
                                            void * user_data) {
    struct wsp_ggml_backend_graph_copy copy = wsp_ggml_backend_graph_copy(backend2, graph);
    if (copy.graph == nullptr) {
        return false;
    }
    wsp_ggml_cgraph * g1 = graph;
    wsp_ggml_cgraph * g2 = copy.graph;
    bool              ok = g1->n_nodes == g2->n_nodes;
    for (int i = 0; ok && i < g1->n_nodes; ++i) {
        wsp_ggml_tensor * t1 = g1->nodes[i];
        wsp_ggml_tensor * t2 = g2->nodes[i];
        wsp_ggml_cgraph   v1 = wsp::graph_view(g1, i, i + 1);
        wsp_ggml_cgraph   v2 = wsp::graph_view(g2, i, i + 1);
        if (wsp_ggml_backend_graph_compute(backend1, &v1) != WSP_GGML_STATUS_SUCCESS ||
            wsp_ggml_backend_graph_compute(backend2, &v2) != WSP_GGML_STATUS_SUCCESS) {
            WSP_LOG_ERROR("%s: node %d (%s) failed to compute\n", __func__, i, wsp::describe(t1).c_str());
            ok = false;
            break;
        }
        if (!callback(i, t1, t2, user_data)) {
            break;
        }
    }
    wsp_ggml_backend_graph_copy_free(copy);
    return ok;
}

} // extern "C"
