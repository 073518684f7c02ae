// Running tensor-parallel plans over the members, their builds kept (Note [kept member graphs] in
// runner.h).

#include "runner.h"

#include "all_gpu.h"

#include "../core/impl.h"

#include <algorithm>
#include <cstring>

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
    bool     planned = false;
    bool     once    = false; // a graph seen once: it goes when the next graph is built
    uint64_t hits    = 0;     // runs found by key
    struct PerMember {
        Block              mem;             // ctx's memory
        wsp_ggml_context * ctx   = nullptr; // the member graph's tensors
        wsp_ggml_cgraph *  graph = nullptr;
        std::vector<int>   ends; // graph->n_nodes at each all-reduce, then at the end
        // what the graph reads from outside: the main member's memory, its copy here
        std::vector<std::pair<wsp_ggml_tensor *, wsp_ggml_tensor *>> inputs;
        Block                                                        ar_mem; // ar_ctx's memory
        wsp_ggml_context * ar_ctx = nullptr; // the all-reduces' tensors and sums on this member
    };
    std::vector<PerMember>             members;
    std::vector<std::vector<Boundary>> boundaries; // per segment
    struct Gather {
        int               member;
        wsp_ggml_tensor * part; // its local result
        wsp_ggml_tensor * dst;  // its rows of the graph's own tensor, on the main member
    };
    std::vector<Gather> gathers;

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
};

namespace {

constexpr size_t SLOT_ALIGN = 256;

size_t align_up(size_t n) {
    return (n + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
}

// the offset of a node's view of a sharded cache: its own (a read), its destination's (a write)
size_t cache_offset(const wsp_ggml_tensor * n, bool write) {
    if (!write) {
        return n->view_offs;
    }
    return n->src[1]->view_src != nullptr ? n->src[1]->view_offs : 0;
}

// chunk c of n elements over n_mem members
Range chunk_of(int64_t n, int n_mem, int c) {
    return Range{ n * c / n_mem, n * (c + 1) / n_mem };
}

// the receiving slot of one chunk: the largest chunk's floats, aligned
size_t slot_bytes(const wsp_ggml_tensor * part, int n_mem) {
    return align_up((size_t) ((wsp_ggml_nelements(part) + n_mem - 1) / n_mem) * sizeof(float));
}

// a view node's offset in its source's bytes
size_t offset_in_source(const wsp_ggml_tensor * n) {
    return n->view_offs - (n->src[0]->view_src != nullptr ? n->src[0]->view_offs : 0);
}

// view of t with ne[dim] cut to r
wsp_ggml_tensor * cut(wsp_ggml_context * ctx, wsp_ggml_tensor * t, int dim, Range r) {
    int64_t ne[WSP_GGML_MAX_DIMS] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
    ne[dim]                       = r.second - r.first;
    return wsp_ggml_view_4d(ctx, t, ne[0], ne[1], ne[2], ne[3], t->nb[1], t->nb[2], t->nb[3],
                            (size_t) r.first * t->nb[dim]);
}

// gives every view in g (nodes and leafs) its data from its source
bool init_views(wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * t = g->nodes[i];
        if (t->data == nullptr && t->view_src != nullptr && wsp_ggml_backend_view_init(t) != WSP_GGML_STATUS_SUCCESS) {
            return false;
        }
    }
    return true;
}

// src (contiguous) into dst, a view of rows at a wider pitch (a member's rows of a gathered
// result): the backends' own copy where it takes such layouts, else through the host row by row
bool copy_rows(wsp_ggml_backend_t from, wsp_ggml_backend_t to, wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    if (to->iface.cpy_tensor_async != nullptr && to->iface.cpy_tensor_async(from, to, src, dst)) {
        return true;
    }
    wsp_ggml_backend_synchronize(from);
    wsp_ggml_backend_synchronize(to);
    const size_t         row = wsp_ggml_row_size(src->type, src->ne[0]);
    std::vector<uint8_t> bytes(wsp_ggml_nbytes(src));
    wsp_ggml_backend_tensor_get(src, bytes.data(), 0, bytes.size());
    for (int64_t r = 0; r < wsp_ggml_nrows(src); ++r) {
        const int64_t i1 = r % src->ne[1], i2 = r / src->ne[1] % src->ne[2], i3 = r / (src->ne[1] * src->ne[2]);
        const size_t  at = i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        wsp_ggml_backend_tensor_set(dst, bytes.data() + (size_t) r * row, at, row);
    }
    return true;
}

} // namespace

Runner::Runner(Device & device, std::vector<wsp_ggml_backend_t> members)
    : device_(device), backends_(std::move(members)) {
    for (wsp_ggml_backend_t b : backends_) {
        members_.push_back(std::make_unique<Member>());
        members_.back()->backend = b;
    }
    fast_all_reduce_ = reinterpret_cast<wsp_ggml_backend_all_reduce_t>(
        wsp_ggml_backend_reg_get_proc_address(device.member_reg, "wsp_ggml_backend_all_reduce"));
}

Runner::~Runner() {
    for (wsp_ggml_backend_event_t e : events_) {
        if (e != nullptr) {
            wsp_ggml_backend_event_free(e);
        }
    }
}

void Runner::order_after(int waiter, int m) {
    if (events_.empty()) {
        events_.resize(members_.size(), nullptr);
        for (size_t i = 0; i < members_.size(); ++i) {
            events_[i] = wsp_ggml_backend_event_new(wsp_ggml_backend_get_device(backends_[i]));
        }
    }
    if (events_[m] == nullptr || backends_[waiter]->iface.event_wait == nullptr) {
        wsp_ggml_backend_synchronize(backends_[m]);
        return;
    }
    wsp_ggml_backend_event_record(events_[m], backends_[m]);
    wsp_ggml_backend_event_wait(backends_[waiter], events_[m]);
}

// the main member's stand-in for a tensor from outside the graph: the same memory, type and
// strides, so a kept build refers to no tensor of the caller's (whose graph may be gone)
wsp_ggml_tensor * alias(wsp_ggml_context * ctx, const wsp_ggml_tensor * t) {
    wsp_ggml_tensor * a = wsp_ggml_new_tensor(ctx, t->type, WSP_GGML_MAX_DIMS, t->ne);
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        a->nb[d] = t->nb[d];
    }
    a->data   = t->data;
    a->buffer = t->buffer;
    wsp_ggml_set_name(a, t->name);
    return a;
}

wsp_ggml_tensor * Runner::local_of(Building & at, int m, const wsp_ggml_tensor * t) {
    auto & local = at.local[(size_t) m];
    if (auto it = local.find(t); it != local.end()) {
        return it->second;
    }
    // from outside the graph: the main member's own memory; on the others a weight's copy made
    // once, anything else copied per run
    Build::PerMember &      pm    = at.b.members[(size_t) m];
    const wsp_ggml_tensor * root  = storage_of(t);
    wsp_ggml_tensor *       lroot = nullptr;
    if (auto it = local.find(root); it != local.end()) {
        lroot = it->second;
    } else if (m == 0) {
        lroot = alias(pm.ctx, root);
    } else if (is_weight(root)) {
        lroot = device_.piece_of(root, m, PieceKind::WHOLE, 0, 0);
    } else {
        lroot = wsp_ggml_new_tensor(pm.ctx, root->type, WSP_GGML_MAX_DIMS, root->ne);
        pm.inputs.emplace_back(at.local[0].count(root) ? at.local[0].at(root) : alias(at.b.members[0].ctx, root),
                               lroot);
    }
    if (lroot == nullptr) {
        return nullptr;
    }
    local[root]           = lroot;
    wsp_ggml_tensor * res = lroot;
    if (t != root) {
        res      = wsp_ggml_view_4d(pm.ctx, lroot, t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->nb[1], t->nb[2], t->nb[3],
                                    t->view_offs);
        local[t] = res;
    }
    return res;
}

wsp_ggml_tensor * Runner::take(Building & at, int m, const wsp_ggml_tensor * src, const Take & how) {
    wsp_ggml_context * ctx = at.b.members[(size_t) m].ctx;
    const Range        r   = how.ranges.empty() ? Range{} : how.ranges[m];
    switch (how.how) {
        case Take::AS_IS: return local_of(at, m, src);
        case Take::SLICE: {
            wsp_ggml_tensor * l = local_of(at, m, src);
            return l == nullptr ? nullptr : cut(ctx, l, how.dim, r);
        }
        case Take::ROWS:
            if (m == 0) { // the weight's own rows
                wsp_ggml_tensor * l = local_of(at, 0, src);
                return l == nullptr ? nullptr : cut(ctx, l, 1, r);
            }
            return device_.piece_of(src, m, PieceKind::ROWS, r.first, r.second);
        case Take::COLUMNS: return device_.piece_of(src, m, PieceKind::COLUMNS, r.first, r.second);
    }
    return nullptr;
}

// member m's view of its part of a sharded cache, as np maps it
wsp_ggml_tensor * Runner::cache_view(Building & at, int m, const NodePlan & np) {
    wsp_ggml_tensor *  piece = device_.cache_piece(np.cache, m);
    const tp::Layout * L     = device_.cache_layout(np.cache);
    if (piece == nullptr || L == nullptr) {
        return nullptr;
    }
    int64_t ne[WSP_GGML_MAX_DIMS];
    size_t  nb[WSP_GGML_MAX_DIMS], offs = 0;
    local_view(*L, m, np.cache_view, np.cache_ne, np.cache_nb, np.cache_offs, wsp_ggml_type_size(piece->type), ne, nb,
               &offs);
    return wsp_ggml_view_4d(at.b.members[(size_t) m].ctx, piece, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offs);
}

wsp_ggml_tensor * Runner::make_node(Building & at, int m, const wsp_ggml_tensor * n, const NodePlan & np) {
    wsp_ggml_context * ctx = at.b.members[(size_t) m].ctx;
    if (np.out.kind == State::MAIN && m != 0) { // received from the main member before it is read
        return wsp_ggml_new_tensor(ctx, n->type, WSP_GGML_MAX_DIMS, n->ne);
    }
    if (np.cache != nullptr) { // a read of a sharded cache, or a write into one (into this member's part)
        const bool write = n->op != WSP_GGML_OP_VIEW;
        if (m == 0) {
            Build::CacheAt c{ at.node, write, np.cache, {}, {}, np.cache_view, {}, {} };
            std::copy(np.cache_ne, np.cache_ne + WSP_GGML_MAX_DIMS, c.ne);
            std::copy(np.cache_nb, np.cache_nb + WSP_GGML_MAX_DIMS, c.nb);
            at.b.caches.push_back(std::move(c));
        }
        Build::CacheAt &  c    = at.b.caches.back();
        wsp_ggml_tensor * view = cache_view(at, m, np);
        wsp_ggml_tensor * src  = write ? take(at, m, n->src[0], np.take[0]) : nullptr;
        wsp_ggml_tensor * copy = write && src != nullptr && view != nullptr ? wsp_ggml_cpy(ctx, src, view) : nullptr;
        c.view.push_back(view);
        c.copy.push_back(copy);
        return write ? copy : view;
    }
    wsp_ggml_tensor * src[WSP_GGML_MAX_SRC]{};
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        if (n->src[j] != nullptr && (src[j] = take(at, m, n->src[j], np.take[j])) == nullptr) {
            return nullptr;
        }
    }
    int64_t ne[WSP_GGML_MAX_DIMS] = { n->ne[0], n->ne[1], n->ne[2], n->ne[3] };
    if (np.out.kind == State::SPLIT) {
        ne[np.out.dim] = np.out.ranges[m].second - np.out.ranges[m].first;
    }
    wsp_ggml_tensor * t = nullptr;
    switch (n->op) {
        case WSP_GGML_OP_RESHAPE: t = wsp_ggml_reshape_4d(ctx, src[0], ne[0], ne[1], ne[2], ne[3]); break;
        case WSP_GGML_OP_PERMUTE:
            t = wsp_ggml_permute(ctx, src[0], n->op_params[0], n->op_params[1], n->op_params[2], n->op_params[3]);
            break;
        case WSP_GGML_OP_TRANSPOSE: t = wsp_ggml_transpose(ctx, src[0]); break;
        case WSP_GGML_OP_VIEW:
            if (np.out.kind == State::SPLIT) { // the whole of a split tensor
                t = wsp_ggml_view_tensor(ctx, src[0]);
            } else {
                t = wsp_ggml_view_4d(ctx, src[0], ne[0], ne[1], ne[2], ne[3], n->nb[1], n->nb[2], n->nb[3],
                                     offset_in_source(n));
                at.b.views.push_back({ t, src[0], at.node });
            }
            break;
        default:
            t     = wsp_ggml_new_tensor(ctx, n->type, WSP_GGML_MAX_DIMS, ne);
            t->op = n->op;
            std::memcpy(t->op_params, n->op_params, sizeof(n->op_params));
            for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
                t->src[j] = src[j];
            }
            if (m == 0 && np.out.kind != State::SPLIT) { // the graph's own memory: its result is there
                t->data   = n->data;
                t->buffer = n->buffer;
                at.b.own.push_back({ t, at.node });
            }
            break;
    }
    wsp_ggml_set_name(t, n->name);
    return t;
}

// Note [all-gathered sources]: p (SPLIT by `split`) made whole on every member before the node
// that reads it: each member's whole is a leaf of its graph, its own part copied in by a node of
// its graph, the others' parts by the boundary's copies; what reads p from here on reads the whole
Runner::Boundary Runner::all_gather(Building & at, const wsp_ggml_tensor * p, const State & split) {
    const size_t n_mem = members_.size();
    Boundary     x;
    x.kind = Boundary::ALL_GATHER;
    x.into.assign(n_mem, std::vector<wsp_ggml_tensor *>(n_mem, nullptr));
    for (size_t m = 0; m < n_mem; ++m) {
        x.parts.push_back(at.local[m].at(p));
    }
    for (size_t e = 0; e < n_mem; ++e) {
        wsp_ggml_context * ctx   = at.b.members[e].ctx;
        wsp_ggml_tensor *  whole = wsp_ggml_new_tensor(ctx, p->type, WSP_GGML_MAX_DIMS, p->ne);
        wsp_ggml_format_name(whole, "%s (gathered)", p->name);
        for (size_t d = 0; d < n_mem; ++d) {
            wsp_ggml_tensor * place = cut(ctx, whole, split.dim, split.ranges[d]);
            if (d == e) {
                wsp_ggml_build_forward_expand(at.b.members[e].graph, wsp_ggml_cpy(ctx, x.parts[e], place));
            } else {
                x.into[e][d] = place;
            }
        }
        at.local[e][p] = whole;
    }
    return x;
}

wsp_ggml_status Runner::build(Build & b, wsp_ggml_cgraph * g, const Plan & plan) {
    const size_t n_tensors = (size_t) (g->n_nodes + g->n_leafs) * 4 + 64;
    const size_t n_graph   = (size_t) g->n_nodes * 4 + 64;
    Building     at{ b, std::vector<std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *>>(members_.size()) };
    b.members.resize(members_.size());
    for (Build::PerMember & pm : b.members) {
        pm.mem = take_block(n_tensors * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(n_graph, false));
        pm.ctx = wsp_ggml_init({ pm.mem.size, pm.mem.bytes.get(), true });
        if (pm.ctx == nullptr) {
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
        pm.graph = wsp_ggml_new_graph_custom(pm.ctx, n_graph, false);
        ++device_.counters.plans_built; // a member graph (Note [all-GPU counters])
    }
    for (const auto & [r, L] : plan.layouts) { // caches this graph shards
        const Layout * kept = device_.cache_layout(r);
        if (kept != nullptr && kept->parts != L.parts) {
            device_.unshard(r, true); // sharded anew below (the members are idle: add() waited)
            kept = nullptr;
        }
        if (kept == nullptr && !device_.shard(r, L)) {
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        const wsp_ggml_tensor * n  = g->nodes[i];
        const NodePlan &        np = plan.nodes[(size_t) i];
        if (!np.reduce_before.empty() || !np.gather_before.empty()) { // a boundary before this node
            for (Build::PerMember & pm : b.members) {
                pm.ends.push_back(pm.graph->n_nodes);
            }
            b.boundaries.emplace_back();
            for (const wsp_ggml_tensor * p : np.reduce_before) {
                Boundary x;
                x.kind = plan.nodes[(size_t) plan.index.at(p)].out.kind == State::MAIN ? Boundary::FROM_MAIN
                                                                                       : Boundary::ALL_REDUCE;
                for (size_t m = 0; m < members_.size(); ++m) {
                    x.parts.push_back(at.local[m].at(p));
                }
                b.boundaries.back().push_back(std::move(x));
            }
            for (const wsp_ggml_tensor * p : np.gather_before) {
                b.boundaries.back().push_back(all_gather(at, p, plan.nodes[(size_t) plan.index.at(p)].out));
            }
        }
        at.node = i;
        for (size_t m = 0; m < members_.size() && !np.skip; ++m) {
            wsp_ggml_tensor * t = make_node(at, (int) m, n, np);
            if (t == nullptr) {
                WSP_LOG_ERROR("%s: cannot make %s on %s\n", device_.name.c_str(), n->name,
                              wsp_ggml_backend_name(backends_[m]));
                return WSP_GGML_STATUS_FAILED;
            }
            at.local[m][n] = t;
            wsp_ggml_build_forward_expand(b.members[m].graph, t);
        }
    }
    b.boundaries.emplace_back();
    for (const wsp_ggml_tensor * p : plan.reduce_at_end) {
        Boundary x;
        for (size_t m = 0; m < members_.size(); ++m) {
            x.parts.push_back(at.local[m].at(p));
        }
        b.boundaries.back().push_back(std::move(x));
    }
    for (int i = 0; i < g->n_nodes; ++i) { // split results the graph gives out: into its memory
        const NodePlan & np = plan.nodes[(size_t) i];
        for (size_t m = 0; m < members_.size() && np.gather; ++m) {
            const wsp_ggml_tensor * n   = g->nodes[i];
            wsp_ggml_context *      ctx = b.members[0].ctx;
            wsp_ggml_tensor *       own = alias(ctx, n);
            wsp_ggml_tensor *       dst = cut(ctx, own, np.out.dim, np.out.ranges[m]);
            b.own.push_back({ own, i });
            wsp_ggml_backend_view_init(dst);
            if (m == 0) { // on the main member itself: a copy kernel (added by hand, as in all_reduce)
                wsp_ggml_graph_add_node(b.members[0].graph, wsp_ggml_cpy(ctx, at.local[0].at(n), dst));
            } else {
                b.gathers.push_back({ (int) m, at.local[m].at(n), dst });
            }
        }
    }
    for (size_t m = 0; m < members_.size(); ++m) {
        Member &           mb = *members_[m];
        Build::PerMember & pm = b.members[m];
        pm.ends.push_back(pm.graph->n_nodes);
        if (mb.galloc == nullptr) {
            mb.galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(mb.backend));
        }
        const size_t had = mb.galloc != nullptr ? wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0) : 0;
        if (mb.galloc == nullptr || !wsp_ggml_gallocr_alloc_graph(mb.galloc, pm.graph)) {
            WSP_LOG_ERROR("%s: cannot allocate the tensors of %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(mb.backend));
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
        if (wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0) != had) { // a new buffer: the others' tensors are gone
            builds_.remove_if([&b](const std::unique_ptr<Build> & k) { return k.get() != &b && k->planned; });
        }
    }
    for (const auto & seg : b.boundaries) { // the all-gathers' places in the wholes, now allocated
        for (const Boundary & x : seg) {
            for (const auto & row : x.into) {
                for (wsp_ggml_tensor * v : row) {
                    if (v != nullptr) {
                        wsp_ggml_backend_view_init(v);
                    }
                }
            }
        }
    }
    b.seen.clear();
    for (int i = 0; i < g->n_nodes; ++i) {
        b.seen.emplace_back(g->nodes[i]->data, g->nodes[i]->view_offs);
    }
    return prepare_all_reduces(b);
}

wsp_ggml_status Runner::prepare_all_reduces(Build & b) {
    const int n_mem = (int) members_.size();
    size_t    slot = 0, n_ar = 0;
    for (const auto & seg : b.boundaries) {
        for (const Boundary & x : seg) {
            if (x.kind == Boundary::ALL_REDUCE) {
                slot = std::max(slot, slot_bytes(x.parts[0], n_mem));
                ++n_ar;
            }
        }
    }
    if (n_ar == 0) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    // the slots, shared by every build's all-reduces (each member's receives come one after
    // another on its stream): grown here, where the members are idle (add() waited)
    const size_t want  = slot * (size_t) (n_mem - 1);
    bool         grown = false;
    for (auto & mb : members_) {
        if (mb->scratch == nullptr || wsp_ggml_backend_buffer_get_size(mb->scratch) < want) {
            if (mb->scratch != nullptr) {
                wsp_ggml_backend_buffer_free(mb->scratch);
            }
            mb->scratch = wsp_ggml_backend_alloc_buffer(mb->backend, want);
            grown       = true;
            if (mb->scratch == nullptr) {
                WSP_LOG_ERROR("%s: no room for the all-reduce's %zu bytes on %s\n", device_.name.c_str(), want,
                              wsp_ggml_backend_name(mb->backend));
                return WSP_GGML_STATUS_ALLOC_FAILED;
            }
        }
    }
    if (grown) { // the other builds' slots were in the buffers just freed
        builds_.remove_if([&b](const std::unique_ptr<Build> & k) { return k.get() != &b && k->planned; });
    }
    for (int m = 0; m < n_mem; ++m) {
        Build::PerMember & pm  = b.members[(size_t) m];
        const size_t       n_t = n_ar * (size_t) (4 * n_mem + 4) + 16;
        pm.ar_mem =
            take_block(n_t * wsp_ggml_tensor_overhead() + n_ar * wsp_ggml_graph_overhead_custom(n_mem + 4, false));
        pm.ar_ctx = wsp_ggml_init({ pm.ar_mem.size, pm.ar_mem.bytes.get(), true });
        if (pm.ar_ctx == nullptr) {
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
    }
    for (auto & seg : b.boundaries) {
        for (Boundary & x : seg) {
            if (x.kind != Boundary::ALL_REDUCE) {
                continue;
            }
            const int64_t n = wsp_ggml_nelements(x.parts[0]);
            x.piece.assign((size_t) n_mem, {});
            x.slots.assign((size_t) n_mem, {});
            x.add.assign((size_t) n_mem, nullptr);
            for (int m = 0; m < n_mem; ++m) {
                wsp_ggml_context * ctx = b.members[(size_t) m].ar_ctx;
                for (int c = 0; c < n_mem; ++c) {
                    const Range       r = chunk_of(n, n_mem, c);
                    wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx, x.parts[(size_t) m], r.second - r.first,
                                                           (size_t) r.first * sizeof(float));
                    wsp_ggml_backend_view_init(v);
                    x.piece[(size_t) m].push_back(v);
                }
            }
            for (int e = 0; e < n_mem; ++e) {
                wsp_ggml_context * ctx  = b.members[(size_t) e].ar_ctx;
                const Range        r    = chunk_of(n, n_mem, e);
                char *             base = (char *) wsp_ggml_backend_buffer_get_base(members_[(size_t) e]->scratch);
                wsp_ggml_cgraph *  add  = wsp_ggml_new_graph_custom(ctx, n_mem + 4, false);
                wsp_ggml_tensor *  sum  = x.piece[(size_t) e][(size_t) e];
                for (int d = 0; d < n_mem; ++d) {
                    if (d == e) {
                        continue;
                    }
                    wsp_ggml_tensor * s = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, r.second - r.first);
                    wsp_ggml_backend_tensor_alloc(members_[(size_t) e]->scratch, s,
                                                  base + slot * x.slots[(size_t) e].size());
                    x.slots[(size_t) e].push_back(s);
                    // added by hand: expanding would take in the graph before
                    sum = wsp_ggml_add_inplace(ctx, sum, s);
                    wsp_ggml_graph_add_node(add, sum);
                }
                if (!init_views(add)) {
                    return WSP_GGML_STATUS_FAILED;
                }
                x.add[(size_t) e] = add;
            }
        }
    }
    return WSP_GGML_STATUS_SUCCESS;
}

// Note [all-reduce by copies]: without the reg's own all-reduce, a reduce-scatter then an
// all-gather by peer copies. parts[m] is split in as many chunks as members; member e receives
// chunk e of every other member into its slots and adds them to its own (so it holds the sum of
// chunk e), then sends that chunk to every other member. Each member sends and receives
// 2 (N-1)/N of the tensor, the least an all-reduce can move. Every copy runs on its source's
// stream after the work queued there, and its destination's stream waits for it; the all-gather
// also orders each member's next writes into another's slots after that member's sums (a swap of
// whole parts between two members would save a phase but let the next all-reduce overwrite a
// slot still being read; the sims' checker caught it). Every member ends with the same bits (one
// member sums each chunk), so the REPL work after it, done on every member, agrees everywhere.
bool Runner::all_reduce(const Boundary & x, Moved & moved) {
    const int n_mem = (int) members_.size();
    moved.all_reduce += 2 * (size_t) (n_mem - 1) * wsp_ggml_nbytes(x.parts[0]); // both ways, 2 (N-1)/N per member
    moved.n_all_reduces++;
    if (fast_all_reduce_ != nullptr &&
        fast_all_reduce_(backends_.data(), const_cast<wsp_ggml_tensor **>(x.parts.data()), n_mem)) {
        return true;
    }
    // reduce-scatter: e receives chunk e from every d into its slots, in member order
    for (int e = 0; e < n_mem; ++e) {
        size_t k = 0;
        for (int d = 0; d < n_mem; ++d) {
            if (d != e) {
                wsp_ggml_backend_tensor_copy_async(backends_[(size_t) d], backends_[(size_t) e],
                                                   x.piece[(size_t) d][(size_t) e], x.slots[(size_t) e][k++]);
            }
        }
    }
    for (int e = 0; e < n_mem; ++e) {
        if (wsp_ggml_backend_graph_compute_async(backends_[(size_t) e], x.add[(size_t) e]) != WSP_GGML_STATUS_SUCCESS) {
            WSP_LOG_ERROR("%s: the all-reduce's sum failed on %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(backends_[(size_t) e]));
            return false;
        }
    }
    // all-gather: e's summed chunk to every other member
    for (int e = 0; e < n_mem; ++e) {
        for (int d = 0; d < n_mem; ++d) {
            if (d != e) {
                wsp_ggml_backend_tensor_copy_async(backends_[(size_t) e], backends_[(size_t) d],
                                                   x.piece[(size_t) e][(size_t) e], x.piece[(size_t) d][(size_t) e]);
            }
        }
    }
    return true;
}

Runner::Block Runner::take_block(size_t size) {
    auto best = spare_.end(); // the smallest spare block that is large enough
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
        if (it->size >= size && (best == spare_.end() || it->size < best->size)) {
            best = it;
        }
    }
    if (best == spare_.end()) { // not zeroed: a context writes what it uses
        return Block{ std::unique_ptr<uint8_t[]>(new uint8_t[size]), size };
    }
    Block k = std::move(*best);
    spare_.erase(best);
    return k;
}

void Runner::wait_members() {
    for (wsp_ggml_backend_t m : backends_) {
        wsp_ggml_backend_synchronize(m);
    }
    idle_ = true;
}

void Runner::drop(Build * b) {
    wait_members(); // queued work reads the build's tensors and graphs
    builds_.remove_if([b](const std::unique_ptr<Build> & k) { return k.get() == b; });
}

void Runner::drop_all() {
    if (!builds_.empty()) {
        wait_members(); // queued work reads the builds' tensors and graphs
        builds_.clear();
    }
}

Runner::Build * Runner::find(const GraphKey & key) {
    if (device_.generation.load() != generation_) { // a piece or a cache they read is gone
        drop_all();
        generation_ = device_.generation.load();
        return nullptr;
    }
    for (auto it = builds_.begin(); it != builds_.end(); ++it) {
        if ((*it)->key == key) {
            (*it)->once = false; // seen again: kept
            (*it)->hits++;
            builds_.splice(builds_.begin(), builds_, it);
            return builds_.front().get();
        }
    }
    return nullptr;
}

Runner::Build * Runner::add(GraphKey key, wsp_ggml_cgraph * g, const Plan & plan, wsp_ggml_status * status) {
    auto b     = std::make_unique<Build>();
    b->spare   = &spare_;
    b->key     = std::move(key);
    b->planned = plan.ok();
    b->once    = sighted_.count(b->key.hash) == 0;
    if (b->once) {
        if (sighted_.size() >= SIGHTED) {
            sighted_.clear();
        }
        sighted_.insert(b->key.hash);
    }
    if (b->planned) {
        // a build may shard caches from the main member's copies and grow the members' buffers:
        // nothing may be running on them
        wait_members();
        // the graph built to run once goes: its blocks, in pages touched already, make this one
        builds_.remove_if([](const std::unique_ptr<Build> & k) { return k->once && k->planned; });
        const uint64_t before = device_.generation.load();
        builds_.push_front(std::move(b)); // kept first: a buffer it grows drops only the others
        Build & made = *builds_.front();
        *status      = build(made, g, plan);
        if (*status != WSP_GGML_STATUS_SUCCESS) {
            builds_.remove_if([&made](const std::unique_ptr<Build> & k) { return k.get() == &made; });
            return nullptr;
        }
        if (device_.generation.load() != before) { // it sharded a cache anew: the others read the old pieces
            builds_.remove_if([&made](const std::unique_ptr<Build> & k) { return k.get() != &made && k->planned; });
        }
    } else {
        builds_.push_front(std::move(b));
    }
    if (builds_.size() > CAPACITY) { // the least recently run never found again, else the least recently run
        wait_members();
        auto gone = std::find_if(builds_.rbegin(), builds_.rend(), [](const auto & k) { return k->hits == 0; });
        builds_.erase(gone != builds_.rend() ? std::next(gone).base() : std::prev(builds_.end()));
    }
    generation_ = device_.generation.load(); // what it made (sharded caches, pieces) is current
    return builds_.front().get();
}

// Note [moved nodes]: a kept build follows the graph's nodes to where they are now. A member view
// of a sharded cache is mapped again at the node's new offset; where it falls on other parts
// than before (another plan would be needed) the build cannot follow and false is returned. The
// member tensors that are a node's memory take its new address, the views at a node's offset
// take the new offset, and every view in the build's contexts is pointed again at its source.
// The members must be done with the build's last run first (a sim reads a node's tensor when it
// runs it): they are, when the device's backend was synchronized since (whisper.cpp does after
// every step), else they are waited for.
bool Runner::follow(Build & b, const wsp_ggml_cgraph * g) {
    if (!b.planned) { // nothing built: the row split runs graphs like it
        return true;
    }
    bool moved = false;
    for (int i = 0; i < g->n_nodes && !moved; ++i) {
        moved = b.seen[(size_t) i] != std::make_pair(g->nodes[i]->data, g->nodes[i]->view_offs);
    }
    if (!moved) {
        return true;
    }
    for (const Build::CacheAt & c : b.caches) { // can every cache view follow?
        const wsp_ggml_tensor * n    = g->nodes[c.node];
        const size_t            offs = cache_offset(n, c.write);
        const Layout *          L    = device_.cache_layout(c.root);
        ViewMap                 vm;
        if (L == nullptr || !map_view(*L, c.ne, c.nb, offs, wsp_ggml_type_size(c.root->type), vm) ||
            vm.dim != c.vm.dim || vm.stride != c.vm.stride || vm.ranges != c.vm.ranges) {
            return false;
        }
    }
    if (!idle_) {
        wait_members();
    }
    for (const Build::CacheAt & c : b.caches) {
        const wsp_ggml_tensor * n    = g->nodes[c.node];
        const size_t            offs = cache_offset(n, c.write);
        const Layout &          L    = *device_.cache_layout(c.root);
        for (size_t m = 0; m < members_.size(); ++m) {
            int64_t ne[WSP_GGML_MAX_DIMS];
            size_t  nb[WSP_GGML_MAX_DIMS], loffs = 0;
            local_view(L, (int) m, c.vm, c.ne, c.nb, offs, wsp_ggml_type_size(c.root->type), ne, nb, &loffs);
            c.view[m]->view_offs = loffs;
            std::memcpy(c.view[m]->op_params, &loffs, sizeof(loffs)); // a view's offset, as view_4d wrote it
            if (c.copy[m] != nullptr) {
                c.copy[m]->view_offs = loffs;
            }
        }
    }
    for (const Build::Own & o : b.own) {
        o.t->data   = g->nodes[o.node]->data;
        o.t->buffer = g->nodes[o.node]->buffer;
    }
    for (const Build::ViewAt & v : b.views) { // in node order: a base that is a view moved first
        const size_t offs = offset_in_source(g->nodes[v.node]);
        v.t->view_offs    = v.base->view_offs + offs;
        std::memcpy(v.t->op_params, &offs, sizeof(offs));
    }
    for (Build::PerMember & pm : b.members) {
        for (wsp_ggml_context * ctx : { pm.ctx, pm.ar_ctx }) {
            for (wsp_ggml_tensor * t = ctx != nullptr ? wsp_ggml_get_first_tensor(ctx) : nullptr; t != nullptr;
                 t                   = wsp_ggml_get_next_tensor(ctx, t)) {
                if (t->view_src != nullptr) {
                    t->data   = (char *) t->view_src->data + t->view_offs;
                    t->buffer = t->view_src->buffer;
                }
            }
        }
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        b.seen[(size_t) i] = { g->nodes[i]->data, g->nodes[i]->view_offs };
    }
    return true;
}

void Runner::members_idle() {
    idle_ = true;
}

bool Runner::planned(const Build & b) {
    return b.planned;
}

wsp_ggml_status Runner::run(Build & b, Moved & moved) {
    const size_t n_mem = members_.size();
    idle_              = false;
    for (size_t m = 0; m < n_mem; ++m) {
        Member &           mb = *members_[m];
        Build::PerMember & pm = b.members[m];
        if (!pm.inputs.empty()) {
            order_after(0, (int) m); // the copies land in memory m's last run may still read
        }
        for (auto & [from, to] : pm.inputs) { // what the graph reads from outside, from the main member
            wsp_ggml_backend_tensor_copy_async(backends_[0], mb.backend, from, to);
            moved.sent += wsp_ggml_nbytes(to);
        }
    }
    for (size_t s = 0; s < b.boundaries.size(); ++s) {
        for (size_t m = 0; m < n_mem; ++m) {
            Build::PerMember & pm  = b.members[m];
            wsp_ggml_cgraph    seg = wsp::graph_view(pm.graph, s == 0 ? 0 : pm.ends[s - 1], pm.ends[s]);
            if (seg.n_nodes > 0 &&
                wsp_ggml_backend_graph_compute_async(backends_[m], &seg) != WSP_GGML_STATUS_SUCCESS) {
                WSP_LOG_ERROR("%s: %s failed\n", device_.name.c_str(), wsp_ggml_backend_name(backends_[m]));
                return WSP_GGML_STATUS_FAILED;
            }
        }
        for (const Boundary & x : b.boundaries[s]) {
            if (x.kind == Boundary::FROM_MAIN) { // the main member's, to all
                for (size_t m = 1; m < n_mem; ++m) {
                    order_after(0, (int) m); // its copy is a leaf there, in memory m may have used before
                    wsp_ggml_backend_tensor_copy_async(backends_[0], backends_[m], x.parts[0], x.parts[m]);
                    moved.sent += wsp_ggml_nbytes(x.parts[m]);
                }
            } else if (x.kind == Boundary::ALL_GATHER) { // every part to every other member's whole
                for (size_t e = 0; e < n_mem; ++e) {
                    for (size_t d = 0; d < n_mem; ++d) {
                        if (d == e) {
                            continue;
                        }
                        order_after((int) d, (int) e); // e's whole is a leaf, in memory e may have used before
                        if (!copy_rows(backends_[d], backends_[e], x.parts[d], x.into[e][d])) {
                            return WSP_GGML_STATUS_FAILED;
                        }
                        moved.gathered += wsp_ggml_nbytes(x.parts[d]);
                    }
                }
            } else if (!all_reduce(x, moved)) {
                return WSP_GGML_STATUS_FAILED;
            }
        }
    }
    for (size_t m = 1; m < n_mem && !b.gathers.empty(); ++m) {
        order_after((int) m, 0); // the main member's memory for the result may have held its earlier tensors
    }
    for (const Build::Gather & x : b.gathers) {
        if (!copy_rows(backends_[x.member], backends_[0], x.part, x.dst)) {
            return WSP_GGML_STATUS_FAILED;
        }
        moved.gathered += wsp_ggml_nbytes(x.part);
    }
    return WSP_GGML_STATUS_SUCCESS;
}

} // namespace wsp::allgpu::tp
