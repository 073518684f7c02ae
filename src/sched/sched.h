#pragma once

// The backend scheduler: runs one graph over several backends (priority order, CPU last).
// alloc_graph assigns every tensor a backend (assign.cpp), cuts the graph into splits at backend
// changes and gives each split copies of the inputs that live elsewhere (split.cpp), and
// allocates each backend's compute buffer (alloc.cpp); compute walks the splits, copying inputs
// and ordering backends with events (compute.cpp). With `parallel`, every split input has
// n_copies copies used in rotation, so consecutive evaluations can overlap across devices.
// Per-tensor state lives in an open-addressing table keyed by tensor pointer.

#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <vector>

namespace wsp::sched {

constexpr int MAX_BACKENDS = 16;

struct Split {
    int                            backend_id = -1;
    int                            i_start    = 0; // node range [i_start, i_end) of the user's graph
    int                            i_end      = 0;
    std::vector<wsp_ggml_tensor *> inputs;  // tensors of other backends this split reads
    wsp_ggml_cgraph                graph{}; // the split's nodes, as a view of the graph copy
};

// Tensor structs the scheduler creates (input copies, dependency views), in contexts that are
// added as needed and reused after a reset.
class TensorPool {
public:
    ~TensorPool();
    void              reset();
    wsp_ggml_tensor * dup_layout(const wsp_ggml_tensor * t); // same type, shape and strides, no data
    wsp_ggml_tensor * view_of(wsp_ggml_tensor * t);          // a view of t with op NONE
    wsp_ggml_tensor * new_tensor(wsp_ggml_type type, const int64_t * ne);

private:
    wsp_ggml_context * room_for_one();

    std::vector<wsp_ggml_context *> ctxs_;
    size_t                          cur_ = 0;
};

} // namespace wsp::sched

struct wsp_ggml_backend_sched {
    int                            n_backends = 0;
    wsp_ggml_backend_t             backends[wsp::sched::MAX_BACKENDS];
    wsp_ggml_backend_buffer_type_t bufts[wsp::sched::MAX_BACKENDS];
    wsp_ggml_gallocr_t             galloc     = nullptr;
    bool                           op_offload = false;

    int                                   n_copies = 1;
    int                                   cur_copy = 0;
    std::vector<wsp_ggml_backend_event_t> events; // [backend * n_copies + copy], NULL where unsupported

    // per-tensor state, indexed by hash slot
    std::vector<wsp_ggml_tensor *> hash_keys;
    std::vector<uint32_t>          hash_used;
    wsp::HashSet                   hash{};
    std::vector<int>               tensor_backend; // backend id, -1 when unassigned
    std::vector<wsp_ggml_tensor *> tensor_copies;  // [slot][backend][copy]
    std::vector<size_t>            slots_with_copies;

    // hash slots of the graph being split, looked up once: nodes, leafs, and each node's sources
    // (NO_SLOT where a source is NULL)
    static constexpr size_t NO_SLOT = (size_t) -1;
    std::vector<size_t>     node_slots, leaf_slots, src_slots;
    size_t & src_slot(int node, int j) { return src_slots[(size_t) node * WSP_GGML_MAX_SRC + (size_t) j]; }

    // the graph as it is computed: input dependencies and copies woven in before each split
    std::vector<wsp_ggml_tensor *> copy_nodes;
    std::vector<wsp_ggml_tensor *> copy_leafs;
    std::vector<int>               node_backend_ids, leaf_backend_ids;
    std::vector<int>               prev_node_backend_ids, prev_leaf_backend_ids;
    wsp_ggml_cgraph                graph{};

    std::vector<wsp::sched::Split> splits;
    int                            n_splits = 0;
    std::vector<wsp_ggml_tensor *> graph_inputs; // user inputs that rotate through copies

    wsp::sched::TensorPool pool;

    // Note [graph edits]: the scheduler edits the user's nodes (sources redirected to input copies,
    // a split mul_mat rewritten as a gather) only while it needs them: during allocation, and from
    // compute until synchronize. Otherwise the graph is as the user built it, so that reset and
    // freeing the user's context in any order are safe.
    struct SrcSwap {
        wsp_ggml_tensor * node;
        int               index;
        wsp_ggml_tensor * original;
        size_t            slot;    // the original's slot
        int               backend; // the node's backend: the copy it reads is copy_of(slot, backend, cur_copy)
    };
    std::vector<SrcSwap> swaps;

    struct Rewrite {
        wsp_ggml_tensor * node;
        wsp_ggml_op       op[2]; // [0] as built, [1] as the scheduler computes it
        wsp_ggml_tensor * src[2][WSP_GGML_MAX_SRC];
        int32_t           op_params[2][WSP_GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    };
    std::vector<Rewrite>           rewrites;
    std::vector<wsp_ggml_tensor *> expanded_nodes;
    wsp_ggml_cgraph                expanded{};
    bool                           edited = false; // the user's nodes carry the edits now

    void apply_edits(); // for the current copy
    void restore_edits();

    bool              is_reset        = false; // no graph's state since the last reset
    bool              is_alloc        = false; // allocated_graph is split and allocated
    wsp_ggml_cgraph * allocated_graph = nullptr;

    wsp_ggml_backend_sched_eval_callback callback_eval      = nullptr;
    void *                               callback_eval_data = nullptr;

    //
    // state access
    //
    size_t             slot(const wsp_ggml_tensor * t); // inserts t when absent
    int &              backend_of(const wsp_ggml_tensor * t) { return tensor_backend[slot(t)]; }
    int &              node_backend(int i) { return tensor_backend[node_slots[(size_t) i]]; }
    void               index_graph(wsp_ggml_cgraph * graph);
    wsp_ggml_tensor *& copy_of(size_t s, int backend, int copy) {
        return tensor_copies[(s * (size_t) n_backends + (size_t) backend) * (size_t) n_copies + (size_t) copy];
    }
    void ensure_capacity(size_t n_tensors);
    void clear_state(); // forget the last graph: assignments, copies, source redirections

    int backend_index(wsp_ggml_backend_t backend) const;
    // can backend_id read t (at hash slot s) where it is or will be allocated
    bool buffer_supported(const wsp_ggml_tensor * t, size_t s, int backend_id) const;
    int  backend_from_buffer(const wsp_ggml_tensor * t, const wsp_ggml_tensor * op) const;

    //
    // passes
    //
    wsp_ggml_cgraph * expand_split(wsp_ggml_cgraph * graph);    // expand_split.cpp (NULL on error)
    bool              assign_backends(wsp_ggml_cgraph * graph); // assign.cpp
    bool              split_graph(wsp_ggml_cgraph * graph);     // split.cpp
    bool              alloc_splits();                           // alloc.cpp
    wsp_ggml_status   compute_splits();                         // compute.cpp
    wsp_ggml_status   synchronize_all();                        // compute.cpp
    // wait for one backend; a failure of its async work is kept for synchronize_all to report
    void            sync_backend(int b);
    wsp_ggml_status pending_status = WSP_GGML_STATUS_SUCCESS;
};
