// Allocation of the scheduled graph: one compute buffer per backend (buffer ids = backend ids).
// The previous plan is reused when every tensor still fits and no tensor changed buffer type;
// otherwise the graph is planned anew, after the backends have finished using the old buffers.

#include "sched.h"

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
        return true;
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
    return true;
}
