// Splits and input copies. Consecutive nodes on one backend form a split; a source that lives on
// another backend, in memory this backend cannot read, gets a copy on this backend (one per
// pipeline copy with `parallel`), created once per graph and shared by every later user on the
// same backend. The user's nodes are redirected to the copies (undone on reset), and the graph
// that gets allocated and computed weaves, before each split, a dependency on every input's
// source (so it stays alive until the copy) and the input copies themselves.

#include "sched.h"

namespace {

using Sched = wsp_ggml_backend_sched;

bool is_view_op(const wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_VIEW || t->op == WSP_GGML_OP_RESHAPE || t->op == WSP_GGML_OP_PERMUTE ||
           t->op == WSP_GGML_OP_TRANSPOSE;
}

// copies of t for backend b, made on first need
void make_copies(Sched & s, wsp_ggml_tensor * t, size_t slot, int b, bool keep_original_as_current) {
    if (s.copy_of(slot, b, 0) != nullptr) {
        return;
    }
    s.slots_with_copies.push_back(slot);
    for (int c = 0; c < s.n_copies; ++c) {
        wsp_ggml_tensor * cpy;
        if (keep_original_as_current && c == s.cur_copy) {
            cpy = t;
        } else {
            cpy = s.pool.dup_layout(t);
            wsp_ggml_format_name(cpy, "%s#%s#%d", wsp_ggml_backend_name(s.backends[b]), t->name, c);
        }
        if (s.n_copies > 1) {
            // a copy in use by an earlier evaluation must not be overwritten by this one
            wsp_ggml_set_input(cpy);
            wsp_ggml_set_output(cpy);
        }
        s.copy_of(slot, b, c) = cpy;
    }
}

wsp_ggml_backend_buffer_t buffer_of(const wsp_ggml_tensor * t) {
    return t->view_src ? t->view_src->buffer : t->buffer;
}

// a weight on another backend that this one cannot read: a new split lets the weights of the
// finished part be dropped from this backend's memory
bool foreign_weight(Sched & s, wsp_ggml_cgraph * g, int i, int cur) {
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        const size_t              slot = s.src_slot(i, j);
        const wsp_ggml_tensor *   src  = g->nodes[i]->src[j];
        wsp_ggml_backend_buffer_t buf  = slot != Sched::NO_SLOT ? buffer_of(src) : nullptr;
        if (buf != nullptr && wsp_ggml_backend_buffer_get_usage(buf) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
            s.tensor_backend[slot] != cur && !s.buffer_supported(src, slot, cur)) {
            return true;
        }
    }
    return false;
}

void start_split(Sched & s, int backend_id, int i_start) {
    if ((size_t) s.n_splits == s.splits.size()) {
        s.splits.resize(s.splits.size() * 2);
    }
    wsp::sched::Split & sp = s.splits[(size_t) s.n_splits++];
    sp.backend_id          = backend_id;
    sp.i_start             = i_start;
    sp.i_end               = i_start;
    sp.inputs.clear();
}

void route_inputs(Sched & s, wsp_ggml_tensor * node, int i, wsp::sched::Split & sp) {
    const int cur = sp.backend_id;
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        const size_t slot = s.src_slot(i, j);
        if (slot == Sched::NO_SLOT) {
            continue;
        }
        wsp_ggml_tensor * src    = node->src[j];
        const int         src_id = s.tensor_backend[slot];
        if ((src->flags & WSP_GGML_TENSOR_FLAG_INPUT) && s.n_copies > 1 && s.copy_of(slot, src_id, 0) == nullptr) {
            make_copies(s, src, slot, src_id, true);
            s.graph_inputs.push_back(src);
        }
        if (src_id == cur || s.buffer_supported(src, slot, cur)) {
            continue;
        }
        if (s.copy_of(slot, cur, 0) == nullptr) {
            make_copies(s, src, slot, cur, false);
            sp.inputs.push_back(src);
        }
        s.swaps.push_back({ node, j, src, slot, cur });
        node->src[j] = s.copy_of(slot, cur, s.cur_copy);
        s.edited     = true;
    }
}

void cut_splits(Sched & s, wsp_ggml_cgraph * g) {
    s.n_splits = 0;
    s.graph_inputs.clear();
    int i = 0;
    while (i < g->n_nodes && is_view_op(g->nodes[i])) {
        ++i;
    }
    start_split(s, i < g->n_nodes ? s.node_backend(i) : s.n_backends - 1, 0);
    for (; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        if (is_view_op(node)) {
            continue;
        }
        const int           id = s.node_backend(i);
        wsp::sched::Split * sp = &s.splits[(size_t) s.n_splits - 1];
        if (id != sp->backend_id || (!sp->inputs.empty() && foreign_weight(s, g, i, id))) {
            sp->i_end = i;
            start_split(s, id, i);
            sp = &s.splits[(size_t) s.n_splits - 1];
        }
        route_inputs(s, node, i, *sp);
    }
    s.splits[(size_t) s.n_splits - 1].i_end = g->n_nodes;
}

void push_node(Sched & s, wsp_ggml_tensor * t, int backend_id) {
    s.copy_nodes.push_back(t);
    s.node_backend_ids.push_back(backend_id);
}

void push_leaf(Sched & s, wsp_ggml_tensor * t, int backend_id) {
    s.copy_leafs.push_back(t);
    s.leaf_backend_ids.push_back(backend_id);
}

void build_copy_graph(Sched & s, wsp_ggml_cgraph * g) {
    s.copy_nodes.clear();
    s.node_backend_ids.clear();
    s.copy_leafs.clear();
    s.leaf_backend_ids.clear();
    std::vector<int> own_start((size_t) s.n_splits);
    for (int k = 0; k < s.n_splits; ++k) {
        wsp::sched::Split & sp = s.splits[(size_t) k];
        for (wsp_ggml_tensor * input : sp.inputs) {
            const size_t      slot = s.slot(input);
            wsp_ggml_tensor * dep  = s.pool.view_of(input);
            dep->src[0]            = input; // keeps the source alive until the copy is made
            push_node(s, dep, s.tensor_backend[slot]);
            push_node(s, s.copy_of(slot, sp.backend_id, s.cur_copy), sp.backend_id);
        }
        own_start[(size_t) k] = (int) s.copy_nodes.size();
        for (int j = sp.i_start; j < sp.i_end; ++j) {
            push_node(s, g->nodes[j], s.node_backend(j));
        }
    }
    if (s.n_copies > 1) {
        // every copy is a leaf, so that each gets its own memory from the start
        for (wsp_ggml_tensor * input : s.graph_inputs) {
            const size_t slot = s.slot(input);
            const int    b    = s.tensor_backend[slot];
            for (int c = 0; c < s.n_copies; ++c) {
                push_leaf(s, s.copy_of(slot, b, c), b);
            }
        }
        for (int k = 0; k < s.n_splits; ++k) {
            const wsp::sched::Split & sp = s.splits[(size_t) k];
            for (wsp_ggml_tensor * input : sp.inputs) {
                for (int c = 0; c < s.n_copies; ++c) {
                    push_leaf(s, s.copy_of(s.slot(input), sp.backend_id, c), sp.backend_id);
                }
            }
        }
    }
    for (int i = 0; i < g->n_leafs; ++i) {
        push_leaf(s, g->leafs[i], s.tensor_backend[s.leaf_slots[(size_t) i]]);
    }
    s.graph         = {};
    s.graph.size    = (int) std::max(s.copy_nodes.size(), s.copy_leafs.size());
    s.graph.n_nodes = (int) s.copy_nodes.size();
    s.graph.n_leafs = (int) s.copy_leafs.size();
    s.graph.nodes   = s.copy_nodes.data();
    s.graph.leafs   = s.copy_leafs.data();
    for (int k = 0; k < s.n_splits; ++k) {
        wsp::sched::Split & sp = s.splits[(size_t) k];
        const int           n  = sp.i_end - sp.i_start;
        sp.graph               = wsp::graph_view(&s.graph, own_start[(size_t) k], own_start[(size_t) k] + n);
    }
}

} // namespace

bool wsp_ggml_backend_sched::split_graph(wsp_ggml_cgraph * user_graph) {
    wsp_ggml_cgraph * g = expand_split(user_graph);
    if (g == nullptr) {
        return false;
    }
    ensure_capacity(2 * (size_t) (g->n_nodes + g->n_leafs) + 64);
    index_graph(g);
    if (!assign_backends(g)) {
        return false;
    }
    cut_splits(*this, g);
    build_copy_graph(*this, g);
    return true;
}
