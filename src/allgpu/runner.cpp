// Running tensor-parallel plans over the members (Note [tensor parallelism] in plan.h): a
// graph's member graphs built node by node, then run segment by segment. The boundaries between
// segments are in boundaries.cpp, the builds kept across runs in kept.cpp.

#include "runner_types.h"

#include "all_gpu.h"
#include "../core/impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace wsp::allgpu::tp {

Runner::Runner(Device & device, std::vector<wsp_ggml_backend_t> members)
    : device_(device), backends_(std::move(members)) {
    for (wsp_ggml_backend_t b : backends_) {
        members_.push_back(std::make_unique<Member>());
        members_.back()->backend = b;
    }
    fast_all_reduce_ = reinterpret_cast<wsp_ggml_backend_all_reduce_t>(
        wsp_ggml_backend_reg_get_proc_address(device.member_reg, "wsp_ggml_backend_all_reduce"));
    const char * reshape = std::getenv("WSP_GGML_ALL_GPU_RESHAPE");
    reshape_on_          = reshape == nullptr || std::strcmp(reshape, "0") != 0;
}

Runner::~Runner() {
    device_.drop_replicas(this);
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

namespace {

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

// im2col's kernel as a member reads it (Note [split convolutions] in plan.cpp): im2col reads only
// the kernel's widths (KW, and KH in 2-D), so a member gets a view of those widths over its own
// input, whose bytes it holds anyway, and no copy of the kernel; NULL where the input is smaller
wsp_ggml_tensor * kernel_shape(wsp_ggml_context * ctx, const wsp_ggml_tensor * n, wsp_ggml_tensor * input) {
    const wsp_ggml_tensor * kernel = n->src[0];
    const int64_t           kw = kernel->ne[0], kh = get_op_param_i32(n, 6) == 1 ? kernel->ne[1] : 1;
    if ((size_t) (kw * kh) * input->nb[0] > wsp_ggml_nbytes(input)) {
        return nullptr;
    }
    wsp_ggml_tensor * k = wsp_ggml_view_2d(ctx, input, kw, kh, (size_t) kw * input->nb[0], 0);
    wsp_ggml_set_name(k, "im2col kernel shape");
    return k;
}

// the graph gives n out: its last node, or one flagged as an output
bool gives_out(const wsp_ggml_cgraph * g, const wsp_ggml_tensor * n) {
    return n == g->nodes[g->n_nodes - 1] || (n->flags & WSP_GGML_TENSOR_FLAG_OUTPUT) != 0;
}

} // namespace

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
        // Note [member replicas]: a result an earlier graph left on every member is read there
        Replica * r = device_.replica_for(this, root, false);
        lroot       = r != nullptr ? r->copies[(size_t) m].tensor
                                   : wsp_ggml_new_tensor(pm.ctx, root->type, WSP_GGML_MAX_DIMS, root->ne);
        pm.inputs.emplace_back(at.local[0].count(root) ? at.local[0].at(root) : alias(at.b.members[0].ctx, root),
                               lroot);
        pm.input_roots.push_back(root);
        pm.input_replicas.push_back(r);
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
        case Take::COLUMNS:
            if (m == 0) { // the weight's own columns: rows of the range, at the weight's row pitch
                wsp_ggml_tensor * l = local_of(at, 0, src);
                return l == nullptr ? nullptr
                                    : wsp_ggml_view_2d(ctx, l, r.second - r.first, l->ne[1], l->nb[1],
                                                       wsp_ggml_row_size(l->type, r.first));
            }
            return device_.piece_of(src, m, PieceKind::COLUMNS, r.first, r.second);
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
    const bool        im2col = n->op == WSP_GGML_OP_IM2COL;
    for (int j = im2col ? 1 : 0; j < WSP_GGML_MAX_SRC; ++j) {
        if (n->src[j] != nullptr && (src[j] = take(at, m, n->src[j], np.take[j])) == nullptr) {
            return nullptr;
        }
    }
    if (im2col) { // Note [split convolutions]: the kernel's shape is all im2col reads of it
        src[0] = kernel_shape(ctx, n, src[1]);
        if (src[0] == nullptr && (src[0] = take(at, m, n->src[0], np.take[0])) == nullptr) {
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
                std::copy(n->nb, n->nb + WSP_GGML_MAX_DIMS, t->nb); // a copy into a strided view writes that layout
                at.b.own.push_back({ t, at.node });
            } else if (np.out.kind == State::REPL && gives_out(at.g, n)) { // Note [member replicas]
                Replica * r = device_.replica_for(this, n, true);
                if (r != nullptr) {
                    t->data   = r->copies[(size_t) m].tensor->data;
                    t->buffer = r->copies[(size_t) m].buffer;
                    if (m == 1) {
                        at.b.produces.emplace_back(at.node, r);
                    }
                }
            }
            break;
    }
    wsp_ggml_set_name(t, n->name);
    return t;
}

wsp_ggml_status Runner::build(Build & b, wsp_ggml_cgraph * g, const Plan & plan) {
    const size_t n_tensors = (size_t) (g->n_nodes + g->n_leafs) * 4 + 64;
    const size_t n_graph   = (size_t) g->n_nodes * 4 + 64;
    Building at{ b, std::vector<std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *>>(members_.size()), -1,
                 g };
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
                b.boundaries.back().push_back(plan.nodes[(size_t) plan.index.at(p)].out.kind == State::MAIN
                                                  ? from_main(at, p, np)
                                                  : all_reduced(at, p));
            }
            for (const wsp_ggml_tensor * p : np.gather_before) {
                b.boundaries.back().push_back(
                    all_gather(at, p, plan.nodes[(size_t) plan.index.at(p)].out, plan.row_split));
            }
        }
        at.node = i;
        for (size_t m = 0; m < members_.size() && !np.skip; ++m) {
            if (!on_member(np, (int) m)) {
                continue; // computed elsewhere; a MAIN result is received where it is read
            }
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
        b.boundaries.back().push_back(all_reduced(at, p));
    }
    for (int i = 0; i < g->n_nodes; ++i) { // split results the graph gives out: into its memory
        const NodePlan & np = plan.nodes[(size_t) i];
        for (size_t m = 0; m < members_.size() && np.gather; ++m) {
            if (!on_member(np, (int) m)) {
                continue; // no rows there (Note [row split plan])
            }
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
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(pm.ctx); t != nullptr;
             t                   = wsp_ggml_get_next_tensor(pm.ctx, t)) {
            if (t->data == nullptr && t->view_src == nullptr) {
                pm.placed.push_back(t); // by the allocator (Note [grown shapes])
            }
        }
        const size_t had = mb.galloc != nullptr ? wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0) : 0;
        if (mb.galloc == nullptr || !wsp_ggml_gallocr_alloc_graph(mb.galloc, pm.graph)) {
            WSP_LOG_ERROR("%s: cannot allocate the tensors of %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(mb.backend));
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
        if (wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0) != had) { // a new buffer: the others' tensors are gone
            builds_.remove_if([&b](const std::unique_ptr<Build> & k) { return k.get() != &b; });
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
    remember_shapes(b, g, plan, at);
    return prepare_all_reduces(b);
}

wsp_ggml_status Runner::run(Build & b, Moved & moved) {
    const size_t n_mem = members_.size();
    idle_              = false;
    joined_            = false;
    for (size_t m = 1; m < n_mem; ++m) { // Note [joined members]: after what the main member was given
        order_after((int) m, 0);
    }
    for (size_t m = 0; m < n_mem; ++m) {
        Member &           mb = *members_[m];
        Build::PerMember & pm = b.members[m];
        if (!pm.inputs.empty()) {
            order_after(0, (int) m); // the copies land in memory m's last run may still read
        }
        for (size_t j = 0; j < pm.inputs.size(); ++j) { // what the graph reads from outside, from the main member
            auto [from, to] = pm.inputs[j];
            if (device_.current(pm.input_replicas[j], from->data)) {
                continue; // Note [member replicas]: already here
            }
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
            if (!cross(x, moved)) {
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
    for (size_t m = 1; m < n_mem; ++m) { // Note [joined members]
        order_after(0, (int) m);
    }
    joined_ = true;
    return WSP_GGML_STATUS_SUCCESS;
}

void Runner::wrote(const Build & b, const wsp_ggml_cgraph * g, bool ran) {
    std::lock_guard<std::recursive_mutex> lock(device_.mutex);
    if (device_.replicas.empty()) {
        return;
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = g->nodes[i];
        if (!is_view_op(n->op) && n->data != nullptr) {
            device_.stale(n->data, wsp_ggml_nbytes(n));
        }
    }
    for (const auto & [node, r] : b.produces) {
        r->of = ran ? g->nodes[node]->data : nullptr;
    }
}

} // namespace wsp::allgpu::tp
