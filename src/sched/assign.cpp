// Backend assignment, in four passes over the graph:
//  1. tensors with memory decide first (their buffer's backend), graph inputs go to the CPU,
//     and an op goes where its weights are (or, with op_offload, to a higher-priority backend
//     whose offload_op asks for it);
//  2. assignments expand to unassigned neighbours, GPU backends first, down then up the graph;
//  3. nodes move to a higher-priority backend that shares the buffer type and can read all their
//     sources (unless pinned by set_tensor_backend); nodes still unassigned take the backend that
//     supports them with most sources at hand;
//  4. views take their source's backend and unassigned sources their user's.
// A backend that does not support an op never gets it. The passes read per-tensor state through
// the slots of index_graph, so each tensor is hashed once per graph.

#include "sched.h"

namespace {

using wsp::buffer_of;
using wsp::is_view_op;

constexpr int ASSIGN_ERROR = -2;

} // namespace

bool wsp_ggml_backend_sched::buffer_supported(const wsp_ggml_tensor * t, size_t s, int backend_id) const {
    wsp_ggml_backend_buffer_t buf = buffer_of(t);
    if (buf != nullptr) {
        return wsp_ggml_backend_supports_buft(backends[backend_id], buf->buft);
    }
    // no memory yet: it will be allocated where it is assigned
    const int b = tensor_backend[s];
    return b == backend_id || (b >= 0 && bufts[b] == bufts[backend_id]);
}

int wsp_ggml_backend_sched::backend_from_buffer(const wsp_ggml_tensor * t, const wsp_ggml_tensor * op) const {
    wsp_ggml_backend_buffer_t buf = buffer_of(t);
    if (buf == nullptr) {
        return -1;
    }
    for (int i = 0; i < n_backends; ++i) {
        if (wsp_ggml_backend_supports_buft(backends[i], buf->buft) && wsp_ggml_backend_supports_op(backends[i], op)) {
            return i;
        }
    }
    return -1;
}

namespace {

using Sched = wsp_ggml_backend_sched;

// pass 1 for one tensor: -1 when nothing decides yet, ASSIGN_ERROR when it cannot run anywhere
int backend_from_tensor(Sched & s, const wsp_ggml_tensor * t) {
    int id = s.backend_from_buffer(t, t);
    if (id >= 0) {
        return id;
    }
    if (buffer_of(t) != nullptr) {
        WSP_LOG_ERROR("sched: %s is allocated in a %s buffer, but no backend that can use that buffer can run %s\n",
                      wsp::describe(t).c_str(), wsp_ggml_backend_buffer_name(buffer_of(t)), wsp_ggml_op_desc(t));
        return ASSIGN_ERROR;
    }
    if (t->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
        return s.n_backends - 1; // user inputs are filled from the host
    }
    for (const wsp_ggml_tensor * src : t->src) {
        wsp_ggml_backend_buffer_t buf = src ? buffer_of(src) : nullptr;
        if (buf == nullptr || wsp_ggml_backend_buffer_get_usage(buf) != WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            continue;
        }
        const int w = s.backend_from_buffer(src, t);
        if (s.op_offload && w == s.n_backends - 1 && wsp_ggml_backend_buffer_is_host(buf)) {
            for (int b = 0; b < w; ++b) {
                if (wsp_ggml_backend_supports_op(s.backends[b], t) && wsp_ggml_backend_offload_op(s.backends[b], t)) {
                    return b;
                }
            }
        }
        return w;
    }
    return -1;
}

bool pass1_preassigned(Sched & s, wsp_ggml_cgraph * g) {
    auto assign = [&](const wsp_ggml_tensor * t, size_t slot) {
        int & id = s.tensor_backend[slot];
        if (id == -1) {
            id = backend_from_tensor(s, t);
        }
        return id != ASSIGN_ERROR;
    };
    for (int i = 0; i < g->n_leafs; ++i) {
        if (!assign(g->leafs[i], s.leaf_slots[(size_t) i])) {
            return false;
        }
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        if (!assign(g->nodes[i], s.node_slots[(size_t) i])) {
            return false;
        }
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            const size_t slot = s.src_slot(i, j);
            if (slot != Sched::NO_SLOT && !assign(g->nodes[i]->src[j], slot)) {
                return false;
            }
        }
    }
    return true;
}

// one expansion sweep; with gpu_only the lowest-priority backend (the CPU) does not spread
void expand(Sched & s, wsp_ggml_cgraph * g, bool down, bool gpu_only) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; ++k) {
        const int         i    = down ? k : g->n_nodes - 1 - k;
        wsp_ggml_tensor * node = g->nodes[i];
        if (is_view_op(node)) {
            continue;
        }
        int & id = s.node_backend(i);
        if (id != -1) {
            cur = (gpu_only && id == s.n_backends - 1) ? -1 : id;
        } else if (cur != -1 && wsp_ggml_backend_supports_op(s.backends[cur], node)) {
            id = cur;
        }
    }
}

// can backend b read every source of node i
bool reads_all_sources(Sched & s, wsp_ggml_cgraph * g, int i, int b) {
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        const size_t slot = s.src_slot(i, j);
        if (slot != Sched::NO_SLOT && !s.buffer_supported(g->nodes[i]->src[j], slot, b)) {
            return false;
        }
    }
    return true;
}

int best_backend(Sched & s, wsp_ggml_cgraph * g, int i) {
    int best = -1, best_inputs = -1;
    for (int b = 0; b < s.n_backends; ++b) {
        if (!wsp_ggml_backend_supports_op(s.backends[b], g->nodes[i])) {
            continue;
        }
        int n = 0;
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            const size_t slot = s.src_slot(i, j);
            n += slot != Sched::NO_SLOT && s.buffer_supported(g->nodes[i]->src[j], slot, b);
        }
        if (n > best_inputs) {
            best        = b;
            best_inputs = n;
        }
    }
    return best;
}

void pass3_upgrade(Sched & s, wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        if (is_view_op(node)) {
            continue;
        }
        int & id = s.node_backend(i);
        if (id == -1) {
            id = best_backend(s, g, i);
            continue;
        }
        if (s.tensor_pinned[s.node_slots[(size_t) i]]) {
            continue; // the user's choice stands
        }
        for (int b = 0; b < id; ++b) {
            if (s.bufts[b] == s.bufts[id] && wsp_ggml_backend_supports_op(s.backends[b], node) &&
                reads_all_sources(s, g, i, b)) {
                id = b;
                break;
            }
        }
    }
}

void pass4_sources(Sched & s, wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        int &             id   = s.node_backend(i);
        if (node->view_src != nullptr && id == -1) {
            id = s.backend_of(node->view_src);
        }
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            const size_t slot = s.src_slot(i, j);
            if (slot == Sched::NO_SLOT || s.tensor_backend[slot] != -1) {
                continue;
            }
            const wsp_ggml_tensor * src = node->src[j];
            s.tensor_backend[slot]      = src->view_src ? s.backend_of(src->view_src) : id;
        }
    }
}

} // namespace

bool wsp_ggml_backend_sched::assign_backends(wsp_ggml_cgraph * g) {
    if (!pass1_preassigned(*this, g)) {
        return false;
    }
    expand(*this, g, true, true);
    expand(*this, g, false, true);
    expand(*this, g, true, false);
    expand(*this, g, false, false);
    pass3_upgrade(*this, g);
    pass4_sources(*this, g);
    for (int i = 0; i < g->n_nodes; ++i) {
        if (node_backend(i) < 0) {
            const wsp_ggml_tensor * node = g->nodes[i];
            WSP_LOG_ERROR("sched: no backend can run %s (%s)\n", wsp::describe(node).c_str(), wsp_ggml_op_desc(node));
            return false;
        }
    }
    return true;
}
