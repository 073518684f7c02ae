// Splits, input copies and waits. Consecutive nodes on one backend form a split; a source that
// lives on another backend, in memory this backend cannot read, gets a copy on this backend (one
// per pipeline copy with `parallel`), created once per graph and shared by every later user on
// the same backend. The user's nodes are redirected to the copies (Note [graph edits]). A split
// mul_mat's node ends its split: the slices of the other devices land after the split's compute
// (expand_split.cpp). Each split also gets the waits that order it (Note [split waits]). The
// graph that gets allocated weaves, before each split, a dependency on every input's source (so
// it stays alive until the copy) and the input copies themselves.

#include "sched.h"

#include <algorithm>

namespace {

using Sched = wsp_ggml_backend_sched;

using wsp::buffer_of;
using wsp::is_view_op;

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

// Note [split waits]: copies and events order what moves between backends; two more hazards
// remain where a backend reads another's memory in place (no copy: it can read that buffer type).
//  - Backends with the same buffer type share one compute buffer (gallocr), whose memory is
//    reused across them; so their splits run in one chain: each waits for the previous split of
//    its group if that ran on another backend, and the first split of an evaluation waits for
//    every backend of the group, as they stand when the evaluation starts (the memory is reused
//    across evaluations too, and the caller may have queued reads of outputs there since).
//  - A backend that reads a buffer of another group in place waits for that backend's work so
//    far (the producer), and that backend's next split waits for the reader (its memory may be
//    reused then), next evaluation included.
struct WaitState {
    std::vector<int>      group;       // [backend]: the first backend with the same buffer type
    std::vector<int>      last;        // [group]: backend of the group's last split, -1 if none
    std::vector<uint32_t> readers;     // [backend]: other backends reading its memory in place
    std::vector<int>      first_split; // [group]: index of the group's first split, -1 if none
};

void add_wait(wsp::sched::Split & sp, int b) {
    if (b != sp.backend_id && std::find(sp.waits.begin(), sp.waits.end(), b) == sp.waits.end()) {
        sp.waits.push_back(b);
    }
}

void take_readers(WaitState & w, wsp::sched::Split & sp) {
    const int b = sp.backend_id;
    for (int r = 0; w.readers[(size_t) b] != 0 && r < 32; ++r) {
        if (w.readers[(size_t) b] & (1u << r)) {
            add_wait(sp, r);
        }
    }
    w.readers[(size_t) b] = 0;
}

void start_split(Sched & s, WaitState & w, int backend_id, int i_start) {
    if ((size_t) s.n_splits == s.splits.size()) {
        s.splits.resize(s.splits.size() * 2);
    }
    wsp::sched::Split & sp = s.splits[(size_t) s.n_splits++];
    sp.backend_id          = backend_id;
    sp.i_start             = i_start;
    sp.i_end               = i_start;
    sp.inputs.clear();
    sp.waits.clear();
    sp.gathered = nullptr;
    sp.gathers.clear();
    const int g = w.group[(size_t) backend_id];
    if (w.last[(size_t) g] >= 0) {
        add_wait(sp, w.last[(size_t) g]);
    } else {
        w.first_split[(size_t) g] = s.n_splits - 1;
    }
    w.last[(size_t) g] = backend_id;
    take_readers(w, sp);
}

void route_inputs(Sched & s, WaitState & w, wsp_ggml_tensor * node, int i, wsp::sched::Split & sp) {
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
        if (src_id == cur) {
            continue;
        }
        if (s.buffer_supported(src, slot, cur)) {
            // read in place: ordered by the group chain, or by waits both ways (Note [split waits])
            if (src_id >= 0 && w.group[(size_t) src_id] != w.group[(size_t) cur]) {
                add_wait(sp, src_id);
                w.readers[(size_t) src_id] |= 1u << cur;
            }
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
    WaitState w;
    w.group.resize((size_t) s.n_backends);
    for (int b = 0; b < s.n_backends; ++b) {
        int first = 0;
        while (s.bufts[first] != s.bufts[b]) {
            ++first;
        }
        w.group[(size_t) b] = first;
    }
    w.last.assign((size_t) s.n_backends, -1);
    w.readers.assign((size_t) s.n_backends, 0);
    w.first_split.assign((size_t) s.n_backends, -1);

    int i = 0;
    while (i < g->n_nodes && is_view_op(g->nodes[i])) {
        ++i;
    }
    start_split(s, w, i < g->n_nodes ? s.node_backend(i) : s.n_backends - 1, 0);
    bool after_gather = false;
    for (; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        if (is_view_op(node)) {
            continue;
        }
        const int                       id  = s.node_backend(i);
        const wsp::sched::SplitMulMat * smm = s.split_mul_mat_of(node);
        wsp::sched::Split *             sp  = &s.splits[(size_t) s.n_splits - 1];
        // (a split mul_mat's node stays with the main device's rows just before it: they are a view of it)
        if (id != sp->backend_id || after_gather ||
            (smm == nullptr && !sp->inputs.empty() && foreign_weight(s, g, i, id))) {
            sp->i_end = i;
            start_split(s, w, id, i);
            sp           = &s.splits[(size_t) s.n_splits - 1];
            after_gather = false;
        }
        if (smm != nullptr) {
            // the node is complete once the other devices' rows land: nothing may follow in this split
            sp->gathered = node;
            sp->gathers  = smm->gathers;
            for (wsp::sched::Gather & gt : sp->gathers) {
                gt.backend = s.backend_of(gt.slice);
            }
            after_gather = true;
            continue;
        }
        route_inputs(s, w, node, i, *sp);
    }
    s.splits[(size_t) s.n_splits - 1].i_end = g->n_nodes;

    // an evaluation's first split of each group waits for every backend of the group (what the
    // evaluation before queued there, and what the caller queued since: reads of outputs), and
    // for the readers of its memory left from the end of the graph
    for (int gr = 0; gr < s.n_backends; ++gr) {
        const int k = w.first_split[(size_t) gr];
        if (k < 0) {
            continue;
        }
        wsp::sched::Split & sp = s.splits[(size_t) k];
        for (int b = 0; b < s.n_backends; ++b) {
            if (w.group[(size_t) b] == gr) {
                add_wait(sp, b);
            }
        }
        take_readers(w, sp);
    }
}

void push_node(Sched & s, wsp_ggml_tensor * t, int backend_id) {
    s.copy_nodes.push_back(t);
    s.node_backend_ids.push_back(backend_id);
}

void push_leaf(Sched & s, wsp_ggml_tensor * t, int backend_id) {
    s.copy_leafs.push_back(t);
    s.leaf_backend_ids.push_back(backend_id);
}

// a node that only keeps t alive in the allocator's plan until this point
void push_dependency(Sched & s, wsp_ggml_tensor * t, int backend_id) {
    wsp_ggml_tensor * dep = s.pool.view_of(t);
    dep->src[0]           = t;
    push_node(s, dep, backend_id);
}

void build_copy_graph(Sched & s, wsp_ggml_cgraph * g) {
    s.copy_nodes.clear();
    s.node_backend_ids.clear();
    s.copy_leafs.clear();
    s.leaf_backend_ids.clear();
    for (int k = 0; k < s.n_splits; ++k) {
        wsp::sched::Split & sp = s.splits[(size_t) k];
        for (wsp_ggml_tensor * input : sp.inputs) {
            const size_t slot = s.slot(input);
            push_dependency(s, input, s.tensor_backend[slot]);
            push_node(s, s.copy_of(slot, sp.backend_id, s.cur_copy), sp.backend_id);
        }
        if (sp.gathered != nullptr) {
            // the node's memory exists before the main device writes its rows into it
            push_node(s, sp.gathered, sp.backend_id);
            for (const wsp::sched::Gather & gt : sp.gathers) {
                push_node(s, gt.rows, sp.backend_id);
            }
        }
        sp.nodes.clear();
        for (int j = sp.i_start; j < sp.i_end; ++j) {
            if (g->nodes[j] != sp.gathered) {
                push_node(s, g->nodes[j], s.node_backend(j));
                sp.nodes.push_back(g->nodes[j]);
            }
        }
        if (sp.gathered != nullptr) {
            // the slices live until they have landed, the main device's rows until the node is whole
            for (const wsp::sched::Gather & gt : sp.gathers) {
                push_dependency(s, gt.slice, gt.backend);
            }
            if (const wsp::sched::SplitMulMat * smm = s.split_mul_mat_of(sp.gathered); smm && smm->own) {
                push_dependency(s, smm->own, sp.backend_id);
            }
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
        // a leaf no node reads and nothing placed (an unused input) goes with the CPU
        const int b = s.tensor_backend[s.leaf_slots[(size_t) i]];
        push_leaf(s, g->leafs[i], b >= 0 ? b : s.n_backends - 1);
    }
    s.graph         = {};
    s.graph.size    = (int) std::max(s.copy_nodes.size(), s.copy_leafs.size());
    s.graph.n_nodes = (int) s.copy_nodes.size();
    s.graph.n_leafs = (int) s.copy_leafs.size();
    s.graph.nodes   = s.copy_nodes.data();
    s.graph.leafs   = s.copy_leafs.data();
    for (int k = 0; k < s.n_splits; ++k) {
        wsp::sched::Split & sp = s.splits[(size_t) k];
        sp.graph               = {};
        sp.graph.size          = (int) sp.nodes.size();
        sp.graph.n_nodes       = (int) sp.nodes.size();
        sp.graph.nodes         = sp.nodes.data();
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
