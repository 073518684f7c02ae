#pragma once

// The backend scheduler: runs one graph over several backends (priority order, CPU last).
// alloc_graph expands mul_mats with split weights into one mul_mat per device (expand_split.cpp),
// assigns every tensor a backend (assign.cpp), cuts the graph into splits at backend changes and
// gives each split copies of the inputs that live elsewhere and the waits that order it
// (split.cpp), and allocates each backend's compute buffer (alloc.cpp); compute walks the
// splits, copying inputs, landing split mul_mat slices and ordering backends with events
// (compute.cpp). With `parallel`, every split input has n_copies copies used in rotation, so
// consecutive evaluations overlap across devices. Per-tensor state lives in an open-addressing
// table keyed by tensor pointer.

#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace wsp::sched {

constexpr int MAX_BACKENDS = 16;

// One device's rows of a split mul_mat's result, computed on that device into a tensor of its
// own and landing in the rows of the user's node (a strided view of it) by a 2-D copy.
struct Gather {
    wsp_ggml_tensor * slice   = nullptr; // the device's mul_mat
    int               backend = -1;      // where the slice is computed
    wsp_ggml_tensor * rows    = nullptr; // its rows in the user's node
};

struct Split {
    int                            backend_id = -1;
    int                            i_start    = 0; // node range [i_start, i_end) of the expanded graph
    int                            i_end      = 0;
    std::vector<wsp_ggml_tensor *> inputs;  // tensors of other backends this split reads (copied first)
    std::vector<int>               waits;   // backends whose work so far this split waits for (split.cpp)
    std::vector<wsp_ggml_tensor *> nodes;   // what the backend computes
    wsp_ggml_cgraph                graph{}; // over nodes
    // a split mul_mat's node that this split completes: the main device's rows are among the
    // nodes, the other devices' land after them (gathers); then the node is complete
    wsp_ggml_tensor *   gathered = nullptr;
    std::vector<Gather> gathers;
};

// a user's mul_mat with a split weight, as expand_split made it
struct SplitMulMat {
    wsp_ggml_tensor *   node;
    wsp_ggml_tensor *   own = nullptr; // the main device's mul_mat, into its rows of node (NULL: no rows)
    std::vector<Gather> gathers;
};

// the pinned memory user inputs of one backend and copy slot are staged in (Note [staged inputs])
struct Stage {
    wsp_ggml_backend_buffer_t buffer     = nullptr; // the device's host buffer type; owned
    size_t                    used       = 0;       // bytes handed out in `evaluation`
    uint64_t                  evaluation = 0;       // the evaluation `used` counts for
    bool                      busy       = false;   // copies read it that no synchronize has seen end
};

// Tensor structs the scheduler creates (input copies, dependency views), in contexts that are
// added as needed and reused after a reset.
class TensorPool {
public:
    ~TensorPool();
    void              reset();
    wsp_ggml_tensor * dup_layout(const wsp_ggml_tensor * t); // same type, shape and strides, no data
    wsp_ggml_tensor * view_of(wsp_ggml_tensor * t);          // a view of t with op NONE
    // rows [r0, r1) of t's dim 0 as a strided view, op NONE
    wsp_ggml_tensor * rows_of(wsp_ggml_tensor * t, int64_t r0, int64_t r1);
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

    int n_copies = 1;
    int cur_copy = 0; // rotates with every compute; back to 0 after a synchronize (Note [copy rotation])

    // Note [split events] (compute.cpp); NULL where a device has no events
    std::vector<wsp_ggml_backend_event_t> progress; // [backend]: after every split
    std::vector<wsp_ggml_backend_event_t> ready;    // [backend]: before a split's copies and compute
    std::vector<wsp_ggml_backend_event_t> done;     // [backend * n_copies + copy]: end of an evaluation

    // Note [staged inputs] (stage.cpp)
    std::vector<wsp::sched::Stage> stages;          // [backend * n_copies + copy]
    uint64_t                       evaluations = 0; // compute_splits calls so far

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

    // Note [graph edits]: the scheduler edits the user's nodes (sources redirected to input copies)
    // only while it needs them: during allocation, and from compute until synchronize. Otherwise
    // the graph is as the user built it, so that reset and freeing the user's context in any
    // order are safe. Backends bind nodes when work is queued, so later edits never reach work
    // in flight.
    struct SrcSwap {
        wsp_ggml_tensor * node;
        int               index;
        wsp_ggml_tensor * original;
        size_t            slot;    // the original's slot
        int               backend; // the node's backend: the copy it reads is copy_of(slot, backend, cur_copy)
    };
    std::vector<SrcSwap> swaps;
    bool                 edited = false; // the user's nodes carry the edits now

    // expand_split.cpp: the graph with each split mul_mat preceded by its per-device mul_mats
    std::vector<wsp_ggml_tensor *>       expanded_nodes;
    wsp_ggml_cgraph                      expanded{};
    std::vector<wsp::sched::SplitMulMat> split_mul_mats;
    // tensors the scheduler made (per-device mul_mats, row views): never shown to the eval callback
    std::unordered_set<const wsp_ggml_tensor *> internal;
    const wsp::sched::SplitMulMat *             split_mul_mat_of(const wsp_ggml_tensor * node) const;

    // Note [pins]: set_tensor_backend pins hold until the user's reset (reserve and alloc_graph
    // keep them); the scheduler's own state of a graph is cleared more often
    std::unordered_map<wsp_ggml_tensor *, int> pins;
    std::vector<uint8_t>                       tensor_pinned; // by slot: pinned by the caller

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
    void apply_pins();
    void clear_state(); // forget the last graph: assignments (but pins), copies, source redirections

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
    bool              reserve_stages();                         // stage.cpp: pinned memory for the user inputs
    // the user input's bytes copied into cpy on backend b through pinned memory (Note [staged
    // inputs]); false when it cannot be, and nothing was done
    bool            stage_input(int b, wsp_ggml_tensor * input, wsp_ggml_tensor * cpy);
    void            stages_settled(); // every backend synchronized: nothing reads the stages
    void            free_stages();
    wsp_ggml_status synchronize_all(); // compute.cpp
    // wait for one backend; a failure of its async work is kept for synchronize_all to report
    void            sync_backend(int b);
    wsp_ggml_status pending_status = WSP_GGML_STATUS_SUCCESS;
};
