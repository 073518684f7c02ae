// Allocation of the scheduled graph: one compute buffer per backend (buffer ids = backend ids).
// The previous plan is reused when every tensor still fits and no tensor changed buffer type;
// otherwise the graph is planned anew, after the backends have finished using the old buffers.

#include "sched.h"

#include "../split/split_buffer.h"

namespace {

// a node that already had memory from an earlier allocation keeps it (as in any gallocr); if its
// backend changed since, that memory may be out of its reach
bool placed_where_computed(wsp_ggml_backend_sched & s) {
    for (size_t i = 0; i < s.copy_nodes.size(); ++i) {
        const wsp_ggml_tensor *   t   = s.copy_nodes[i];
        wsp_ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
        if (buf != nullptr && wsp::split::split_of(t) == nullptr &&
            !wsp_ggml_backend_supports_buft(s.backends[s.node_backend_ids[i]], buf->buft)) {
            WSP_LOG_ERROR("sched: %s was allocated in a %s buffer by an earlier allocation, but now runs on %s, "
                          "which cannot use it; build the graph again (or reset before changing assignments)\n",
                          wsp::describe(t).c_str(), wsp_ggml_backend_buffer_name(buf),
                          wsp_ggml_backend_name(s.backends[s.node_backend_ids[i]]));
            return false;
        }
    }
    return true;
}

} // namespace

bool wsp_ggml_backend_sched::alloc_splits() {
    bool changed = prev_node_backend_ids.size() != node_backend_ids.size() ||
                   prev_leaf_backend_ids.size() != leaf_backend_ids.size();
    for (size_t i = 0; !changed && i < node_backend_ids.size(); ++i) {
        changed = node_backend_ids[i] != prev_node_backend_ids[i] &&
                  bufts[node_backend_ids[i]] != bufts[prev_node_backend_ids[i]];
    }
    for (size_t i = 0; !changed && i < leaf_backend_ids.size(); ++i) {
        changed = leaf_backend_ids[i] != prev_leaf_backend_ids[i] &&
                  bufts[leaf_backend_ids[i]] != bufts[prev_leaf_backend_ids[i]];
    }
    prev_node_backend_ids = node_backend_ids;
    prev_leaf_backend_ids = leaf_backend_ids;

    if (!changed && wsp_ggml_gallocr_alloc_graph(galloc, &graph)) {
        return placed_where_computed(*this) && reserve_stages();
    }
    // a new plan may move the inputs of work still queued: let every backend finish first
    for (int b = 0; b < n_backends; ++b) {
        sync_backend(b);
    }
    if (!wsp_ggml_gallocr_reserve_n(galloc, &graph, node_backend_ids.data(), leaf_backend_ids.data()) ||
        !wsp_ggml_gallocr_alloc_graph(galloc, &graph)) {
        WSP_LOG_ERROR("sched: failed to allocate the compute buffers of the graph\n");
        prev_node_backend_ids.clear(); // plan again next time
        return false;
    }
    return placed_where_computed(*this) && reserve_stages();
}
