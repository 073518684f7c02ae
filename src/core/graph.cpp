// Compute graphs: nodes in a valid evaluation order (sources before users), leafs (tensors
// without an op), and a hash set of every tensor already visited. All arrays live in the
// context arena right after the graph struct, so a graph's footprint is known from its size.

#include "impl.h"

#include <vector>

namespace wsp {

size_t HashSet::capacity_for(size_t min_elems) {
    size_t cap = 16;
    while (cap < 2 * min_elems) {
        cap <<= 1;
    }
    return cap;
}

size_t HashSet::insert(wsp_ggml_tensor * key, bool & inserted) {
    const size_t i = find(key);
    if (i == FULL) {
        WSP_GGML_ABORT("graph hash set is full (%zu slots)", size);
    }
    inserted = !is_used(i);
    if (inserted) {
        set_used(i);
        keys[i] = key;
    }
    return i;
}

wsp_ggml_cgraph graph_view(wsp_ggml_cgraph * g, int i0, int i1) {
    wsp_ggml_cgraph view  = {};
    view.size             = i1 - i0;
    view.n_nodes          = i1 - i0;
    view.n_leafs          = 0;
    view.nodes            = g->nodes + i0;
    view.grads            = nullptr;
    view.grad_accs        = nullptr;
    view.leafs            = nullptr;
    view.visited_hash_set = g->visited_hash_set;
    return view;
}

} // namespace wsp

namespace {

struct GraphLayout {
    size_t hash_size;
    size_t bytes;
};

GraphLayout graph_layout(size_t size, bool grads) {
    const size_t hash_size = wsp::HashSet::capacity_for(size);
    size_t       bytes     = sizeof(wsp_ggml_cgraph);
    bytes += 2 * size * sizeof(wsp_ggml_tensor *);                     // nodes, leafs
    bytes += hash_size * sizeof(wsp_ggml_tensor *);                    // hash keys
    bytes += (grads ? 2 * hash_size * sizeof(wsp_ggml_tensor *) : 0);  // grads, grad_accs
    bytes += wsp::HashSet::bitset_words(hash_size) * sizeof(uint32_t); // hash used bits
    return { hash_size, bytes };
}

void add_node(wsp_ggml_cgraph * g, wsp_ggml_tensor * t) {
    if (g->n_nodes >= g->size) {
        WSP_GGML_ABORT("graph is full: it holds %d nodes and cannot take %s (op %s); create it with "
                       "wsp_ggml_new_graph_custom and a larger size",
                       g->size, wsp::describe(t).c_str(), wsp_ggml_op_desc(t));
    }
    g->nodes[g->n_nodes++] = t;
}

void add_leaf(wsp_ggml_cgraph * g, wsp_ggml_tensor * t) {
    if (g->n_leafs >= g->size) {
        WSP_GGML_ABORT("graph is full: it holds %d leafs and cannot take %s; create it with "
                       "wsp_ggml_new_graph_custom and a larger size",
                       g->size, wsp::describe(t).c_str());
    }
    if (t->name[0] == '\0') {
        wsp_ggml_format_name(t, "leaf_%d", g->n_leafs);
    }
    g->leafs[g->n_leafs++] = t;
}

// Depth-first visit that emits sources (in src order) before their users, without recursion
// so that long chains cannot exhaust the stack.
void visit(wsp_ggml_cgraph * g, wsp_ggml_tensor * root) {
    struct Frame {
        wsp_ggml_tensor * t;
        int               next_src;
    };
    bool inserted = false;
    g->visited_hash_set.insert(root, inserted);
    if (!inserted) {
        return;
    }
    std::vector<Frame> stack;
    stack.push_back({ root, 0 });
    while (!stack.empty()) {
        Frame & f = stack.back();
        if (f.next_src < WSP_GGML_MAX_SRC) {
            wsp_ggml_tensor * src = f.t->src[f.next_src++];
            if (src != nullptr) {
                g->visited_hash_set.insert(src, inserted);
                if (inserted) {
                    stack.push_back({ src, 0 });
                }
            }
            continue;
        }
        wsp_ggml_tensor * t = f.t;
        stack.pop_back();
        if (t->op == WSP_GGML_OP_NONE && !(t->flags & WSP_GGML_TENSOR_FLAG_PARAM)) {
            add_leaf(g, t);
        } else {
            if (t->name[0] == '\0') {
                wsp_ggml_format_name(t, "node_%d", g->n_nodes);
            }
            add_node(g, t);
        }
    }
}

} // namespace

extern "C" {

size_t wsp_ggml_graph_overhead_custom(size_t size, bool grads) {
    return WSP_GGML_OBJECT_SIZE + WSP_GGML_PAD(graph_layout(size, grads).bytes, (size_t) WSP_GGML_MEM_ALIGN);
}

size_t wsp_ggml_graph_overhead(void) {
    return wsp_ggml_graph_overhead_custom(WSP_GGML_DEFAULT_GRAPH_SIZE, false);
}

struct wsp_ggml_cgraph * wsp_ggml_new_graph_custom(struct wsp_ggml_context * ctx, size_t size, bool grads) {
    const GraphLayout layout = graph_layout(size, grads);
    char *            mem    = static_cast<char *>(wsp::context_alloc(ctx, WSP_GGML_OBJECT_TYPE_GRAPH, layout.bytes));

    auto * g    = reinterpret_cast<wsp_ggml_cgraph *>(mem);
    char * p    = mem + sizeof(wsp_ggml_cgraph);
    auto   take = [&p](size_t n) {
        auto * arr = reinterpret_cast<wsp_ggml_tensor **>(p);
        p += n * sizeof(wsp_ggml_tensor *);
        return arr;
    };
    g->size                  = (int) size;
    g->n_nodes               = 0;
    g->n_leafs               = 0;
    g->nodes                 = take(size);
    g->leafs                 = take(size);
    g->visited_hash_set.size = layout.hash_size;
    g->visited_hash_set.keys = take(layout.hash_size);
    g->grads                 = grads ? take(layout.hash_size) : nullptr;
    g->grad_accs             = grads ? take(layout.hash_size) : nullptr;
    g->visited_hash_set.used = reinterpret_cast<uint32_t *>(p);
    g->visited_hash_set.reset();
    if (grads) {
        std::memset(g->grads, 0, layout.hash_size * sizeof(wsp_ggml_tensor *));
        std::memset(g->grad_accs, 0, layout.hash_size * sizeof(wsp_ggml_tensor *));
    }
    return g;
}

struct wsp_ggml_cgraph * wsp_ggml_new_graph(struct wsp_ggml_context * ctx) {
    return wsp_ggml_new_graph_custom(ctx, WSP_GGML_DEFAULT_GRAPH_SIZE, false);
}

void wsp_ggml_graph_cpy(struct wsp_ggml_cgraph * src, struct wsp_ggml_cgraph * dst) {
    WSP_GGML_ASSERT(dst->size >= src->n_leafs);
    WSP_GGML_ASSERT(dst->size >= src->n_nodes);
    dst->n_leafs = src->n_leafs;
    dst->n_nodes = src->n_nodes;
    std::memcpy(dst->leafs, src->leafs, (size_t) src->n_leafs * sizeof(wsp_ggml_tensor *));
    std::memcpy(dst->nodes, src->nodes, (size_t) src->n_nodes * sizeof(wsp_ggml_tensor *));
    dst->visited_hash_set.reset();
    bool inserted = false;
    for (int i = 0; i < src->n_leafs; ++i) {
        dst->visited_hash_set.insert(src->leafs[i], inserted);
    }
    for (int i = 0; i < src->n_nodes; ++i) {
        dst->visited_hash_set.insert(src->nodes[i], inserted);
    }
}

struct wsp_ggml_cgraph * wsp_ggml_graph_dup(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * cgraph,
                                            bool force_grads) {
    wsp_ggml_cgraph * result =
        wsp_ggml_new_graph_custom(ctx, (size_t) cgraph->size, cgraph->grads != nullptr || force_grads);
    wsp_ggml_graph_cpy(cgraph, result);
    return result;
}

void wsp_ggml_graph_clear(struct wsp_ggml_cgraph * cgraph) {
    cgraph->n_leafs = 0;
    cgraph->n_nodes = 0;
    cgraph->visited_hash_set.reset();
}

int wsp_ggml_graph_size(struct wsp_ggml_cgraph * cgraph) {
    return cgraph->size;
}

struct wsp_ggml_tensor * wsp_ggml_graph_node(struct wsp_ggml_cgraph * cgraph, int i) {
    if (i < 0) {
        i += cgraph->n_nodes;
    }
    if (i < 0 || i >= cgraph->n_nodes) {
        WSP_GGML_ABORT("wsp_ggml_graph_node: index out of range (the graph has %d nodes)", cgraph->n_nodes);
    }
    return cgraph->nodes[i];
}

struct wsp_ggml_tensor ** wsp_ggml_graph_nodes(struct wsp_ggml_cgraph * cgraph) {
    return cgraph->nodes;
}

int wsp_ggml_graph_n_nodes(struct wsp_ggml_cgraph * cgraph) {
    return cgraph->n_nodes;
}

void wsp_ggml_graph_add_node(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_tensor * tensor) {
    add_node(cgraph, tensor);
}

void wsp_ggml_build_forward_expand(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_tensor * tensor) {
    visit(cgraph, tensor);
}

struct wsp_ggml_tensor * wsp_ggml_graph_get_tensor(const struct wsp_ggml_cgraph * cgraph, const char * name) {
    for (int i = 0; i < cgraph->n_leafs; ++i) {
        if (std::strcmp(cgraph->leafs[i]->name, name) == 0) {
            return cgraph->leafs[i];
        }
    }
    for (int i = 0; i < cgraph->n_nodes; ++i) {
        if (std::strcmp(cgraph->nodes[i]->name, name) == 0) {
            return cgraph->nodes[i];
        }
    }
    return nullptr;
}

void wsp_ggml_graph_print(const struct wsp_ggml_cgraph * cgraph) {
    WSP_LOG_INFO("=== GRAPH ===\n");
    WSP_LOG_INFO("n_nodes = %d\n", cgraph->n_nodes);
    for (int i = 0; i < cgraph->n_nodes; ++i) {
        const wsp_ggml_tensor * n = cgraph->nodes[i];
        WSP_LOG_INFO(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %16s %-6s %s\n", i, (long long) n->ne[0],
                     (long long) n->ne[1], (long long) n->ne[2], (long long) n->ne[3], wsp_ggml_op_desc(n),
                     wsp_ggml_type_name(n->type), n->name);
    }
    WSP_LOG_INFO("n_leafs = %d\n", cgraph->n_leafs);
    for (int i = 0; i < cgraph->n_leafs; ++i) {
        const wsp_ggml_tensor * n = cgraph->leafs[i];
        WSP_LOG_INFO(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %8s %-6s %s\n", i, (long long) n->ne[0],
                     (long long) n->ne[1], (long long) n->ne[2], (long long) n->ne[3], wsp_ggml_op_name(n->op),
                     wsp_ggml_type_name(n->type), n->name);
    }
    WSP_LOG_INFO("========================================\n");
}

} // extern "C"
