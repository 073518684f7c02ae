#pragma once

// The runner's own types (Note [kept member graphs] in runner.h), shared by its four rooms:
// runner.cpp builds a graph's member graphs and runs them, boundaries.cpp makes tensors whole
// between segments (all-reduces, sends from the main member, all-gathers), kept.cpp keeps builds
// across runs and follows a graph's nodes to where they are now, reshape.cpp follows a graph
// alike but for its shapes (Note [grown shapes]). Internal to src/allgpu/.

#include "runner.h"

#include "../core/impl.h"

#include <algorithm>
#include <unordered_map>

namespace wsp::allgpu::tp {

struct Runner::Member {
    wsp_ggml_backend_t        backend = nullptr;
    wsp_ggml_gallocr_t        galloc  = nullptr; // every build's member graph on this member
    wsp_ggml_backend_buffer_t scratch = nullptr; // the all-reduces' receiving slots, every build's

    ~Member() {
        wsp_ggml_gallocr_free(galloc);
        if (scratch != nullptr) {
            wsp_ggml_backend_buffer_free(scratch);
        }
    }
};

// what each boundary makes whole: a PARTIAL tensor's parts (all-reduced), a MAIN tensor's
// copies (the main member's, sent to the others), one per member, or a SPLIT tensor's parts
// (all-gathered into each member's whole, Note [all-gathered sources] in plan.h)
struct Runner::Boundary {
    enum Kind : uint8_t { ALL_REDUCE, FROM_MAIN, ALL_GATHER };
    Kind                           kind = ALL_REDUCE;
    std::vector<wsp_ggml_tensor *> parts;
    // ALL_GATHER: into[e][d], where member d's part lands in member e's whole (NULL for d == e:
    // e's own part is copied by a node of its graph)
    std::vector<std::vector<wsp_ggml_tensor *>> into;
    // Note [all-reduce by copies], made with the build (a queued copy or sum may still read
    // them when the next run starts): piece[m][c] is chunk c of member m's part, slots[e]
    // what e receives (one per other member, in member order), add[e] e's sum of its chunk
    std::vector<std::vector<wsp_ggml_tensor *>> piece, slots;
    std::vector<wsp_ggml_cgraph *>              add;
};

struct Runner::Build {
    GraphKey key;
    bool     row_split = false; // by Note [row split plan]: reads sharded caches made whole first
    bool     once      = false; // a graph seen once: it goes when the next graph is built
    uint64_t hits      = 0;     // runs found by key
    struct PerMember {
        Block              mem;             // ctx's memory
        wsp_ggml_context * ctx   = nullptr; // the member graph's tensors
        wsp_ggml_cgraph *  graph = nullptr;
        std::vector<int>   ends; // graph->n_nodes at each all-reduce, then at the end
        // what the graph reads from outside: the main member's memory, its copy here; and the
        // outside root each mirrors
        std::vector<std::pair<wsp_ggml_tensor *, wsp_ggml_tensor *>> inputs;
        std::vector<const wsp_ggml_tensor *>                         input_roots;
        // per input, the replica its copy is (Note [member replicas]): not sent while current
        std::vector<Replica *>         input_replicas;
        std::vector<wsp_ggml_tensor *> placed; // the tensors the member's allocator placed (Note [grown shapes])
        Block                          ar_mem; // ar_ctx's memory
        wsp_ggml_context *             ar_ctx = nullptr; // the all-reduces' tensors and sums on this member
    };
    std::vector<PerMember>             members;
    std::vector<std::vector<Boundary>> boundaries; // per segment
    struct Gather {
        int               member;
        wsp_ggml_tensor * part; // its local result
        wsp_ggml_tensor * dst;  // its rows of the graph's own tensor, on the main member
    };
    std::vector<Gather> gathers;
    // Note [member replicas]: the nodes whose members' results are written into replicas
    std::vector<std::pair<int, Replica *>> produces;

    // Note [moved nodes]: what depends on where the graph's nodes are (their data and view
    // offsets are not in the key), so that a graph with this key whose nodes are elsewhere runs
    // this build: the member tensors that are a node's own memory, the member views at a node's
    // offset, and the members' views of a sharded cache at a node's offset (a decoder step's
    // write at its position). `seen` is where each node was when the build last ran.
    std::vector<std::pair<void *, size_t>> seen;
    struct Own {
        wsp_ggml_tensor * t;
        int               node;
    };
    struct ViewAt {
        wsp_ggml_tensor * t;    // a view of base
        wsp_ggml_tensor * base; // the member's local of the node's source
        int               node;
    };
    struct CacheAt {
        int                     node;
        bool                    write;
        const wsp_ggml_tensor * root;
        int64_t                 ne[WSP_GGML_MAX_DIMS];
        size_t                  nb[WSP_GGML_MAX_DIMS];
        ViewMap                 vm;
        // per member: its view of its part; for a write, also the copy (a view of the same bytes)
        std::vector<wsp_ggml_tensor *> view, copy;
    };
    std::vector<Own>     own;
    std::vector<ViewAt>  views;
    std::vector<CacheAt> caches;

    // Note [grown shapes] (reshape.cpp): what a graph alike but for its shapes needs to follow
    // this build: the key without shapes, the nodes and outside tensors with the shapes they
    // had, each node's state by the plan and whether its shape may change, and every member's
    // local tensor of each (the nodes' are keyed by the graph's node tensors, which a graph
    // alike must have at the same addresses)
    struct Shape {
        int64_t ne[WSP_GGML_MAX_DIMS];
        size_t  nb[WSP_GGML_MAX_DIMS];
        void *  data;
        size_t  view_offs;
        bool    operator==(const Shape & o) const {
               return std::equal(ne, ne + WSP_GGML_MAX_DIMS, o.ne) && std::equal(nb, nb + WSP_GGML_MAX_DIMS, o.nb) &&
                      data == o.data && view_offs == o.view_offs;
        }
    };
    GraphKey                             alike;
    std::vector<const wsp_ggml_tensor *> node_at;
    std::vector<Shape>                   node_shape;
    std::vector<State>                   node_out;
    std::vector<uint8_t>                 node_fixed;
    std::vector<int>                     node_cache; // its CacheAt, or -1
    std::vector<const wsp_ggml_tensor *> sliced;     // read cut by a split reader (Take::SLICE): its shape is fixed
    std::vector<std::pair<const wsp_ggml_tensor *, Shape>>                      outside;
    std::vector<std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *>> local; // per member

    std::vector<Block> * spare = nullptr; // the runner's, where the blocks go back

    ~Build() {
        for (PerMember & pm : members) {
            wsp_ggml_free(pm.ctx);
            wsp_ggml_free(pm.ar_ctx);
            for (Block * k : { &pm.mem, &pm.ar_mem }) {
                if (k->size > 0 && spare->size() < SPARE_BLOCKS) {
                    spare->push_back(std::move(*k));
                }
            }
        }
    }
};

// what a build maps while it is made: each member's local tensor for each tensor of the graph
// (and outside it) it has met
struct Runner::Building {
    Build &                                                                     b;
    std::vector<std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *>> local;     // per member
    int                                                                         node = -1; // being made
    const wsp_ggml_cgraph *                                                     g    = nullptr;
};

// member m computes the node: a MAIN node only the main member, a split one where it has indices
// (a member without a share has none in the row split, Note [row split plan])
inline bool on_member(const NodePlan & np, int m) {
    switch (np.out.kind) {
        case State::MAIN: return m == 0;
        case State::SPLIT: return np.out.ranges[(size_t) m].second > np.out.ranges[(size_t) m].first;
        default: return true;
    }
}

// a view node's offset in its source's bytes
inline size_t offset_in_source(const wsp_ggml_tensor * n) {
    return n->view_offs - (n->src[0]->view_src != nullptr ? n->src[0]->view_offs : 0);
}

// view of t with ne[dim] cut to r
inline wsp_ggml_tensor * cut(wsp_ggml_context * ctx, wsp_ggml_tensor * t, int dim, Range r) {
    int64_t ne[WSP_GGML_MAX_DIMS] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
    ne[dim]                       = r.second - r.first;
    return wsp_ggml_view_4d(ctx, t, ne[0], ne[1], ne[2], ne[3], t->nb[1], t->nb[2], t->nb[3],
                            (size_t) r.first * t->nb[dim]);
}

// the offset of a node's view of a sharded cache: its own (a read), its destination's (a write)
inline size_t cache_offset(const wsp_ggml_tensor * n, bool write) {
    if (!write) {
        return n->view_offs;
    }
    return n->src[1]->view_src != nullptr ? n->src[1]->view_offs : 0;
}

// src (contiguous) into dst, a view of rows at a wider pitch (a member's rows of a gathered
// result): the backends' own copy where it takes such layouts, else through the host row by row
bool copy_rows(wsp_ggml_backend_t from, wsp_ggml_backend_t to, wsp_ggml_tensor * src, wsp_ggml_tensor * dst);

} // namespace wsp::allgpu::tp
