// Running a tensor-parallel plan over the members (Note [tensor parallelism] in tp.h).

#include "all_gpu.h"
#include "tp.h"

#include "../core/impl.h"

#include <cstring>

namespace wsp::allgpu::tp {

struct Runner::Member {
    wsp_ggml_backend_t   backend = nullptr;
    wsp_ggml_gallocr_t   galloc  = nullptr;
    wsp_ggml_context *   ctx     = nullptr; // this graph's local tensors
    std::vector<uint8_t> ctx_mem, ar_mem;   // the contexts' memory, kept from graph to graph
    wsp_ggml_cgraph *    graph = nullptr;
    std::vector<int>     ends; // graph->n_nodes at each all-reduce, then at the end
    std::unordered_map<const wsp_ggml_tensor *, wsp_ggml_tensor *>     local;
    std::vector<std::pair<const wsp_ggml_tensor *, wsp_ggml_tensor *>> inputs; // main's tensor, its copy here

    // the all-reduce's receiving slots, and the tensors it makes per graph
    wsp_ggml_backend_buffer_t scratch = nullptr;
    wsp_ggml_context *        ar_ctx  = nullptr;

    ~Member() {
        wsp_ggml_gallocr_free(galloc);
        wsp_ggml_free(ctx);
        wsp_ggml_free(ar_ctx);
        if (scratch != nullptr) {
            wsp_ggml_backend_buffer_free(scratch);
        }
    }
};

namespace {

constexpr size_t SLOT_ALIGN = 256;

size_t align_up(size_t n) {
    return (n + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
}

bool is_weight(const wsp_ggml_tensor * t) {
    return t->buffer != nullptr &&
           wsp_ggml_backend_buffer_get_usage(t->buffer) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
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

wsp_ggml_tensor * Runner::local_of(int m, const wsp_ggml_tensor * t) {
    Member & mb = *members_[m];
    if (auto it = mb.local.find(t); it != mb.local.end()) {
        return it->second;
    }
    if (m == 0) {
        return const_cast<wsp_ggml_tensor *>(t); // the main member holds everything from outside
    }
    // from outside the graph: a weight's copy made once, anything else copied per graph
    const wsp_ggml_tensor * root  = root_of(t);
    wsp_ggml_tensor *       lroot = nullptr;
    if (auto it = mb.local.find(root); it != mb.local.end()) {
        lroot = it->second;
    } else if (is_weight(root)) {
        lroot = device_.piece_of(root, m, PieceKind::WHOLE, 0, 0);
    } else {
        lroot = wsp_ggml_new_tensor(mb.ctx, root->type, WSP_GGML_MAX_DIMS, root->ne);
        mb.inputs.emplace_back(root, lroot);
    }
    if (lroot == nullptr) {
        return nullptr;
    }
    mb.local[root]        = lroot;
    wsp_ggml_tensor * res = lroot;
    if (t != root) {
        res = wsp_ggml_view_4d(mb.ctx, lroot, t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->nb[1], t->nb[2], t->nb[3],
                               t->view_offs);
        mb.local[t] = res;
    }
    return res;
}

wsp_ggml_tensor * Runner::take(int m, const wsp_ggml_tensor * src, const Take & how) {
    Member &    mb = *members_[m];
    const Range r  = how.ranges.empty() ? Range{} : how.ranges[m];
    switch (how.how) {
        case Take::AS_IS: return local_of(m, src);
        case Take::SLICE: {
            wsp_ggml_tensor * l = local_of(m, src);
            return l == nullptr ? nullptr : cut(mb.ctx, l, how.dim, r);
        }
        case Take::ROWS:
            if (m == 0) { // the weight's own rows
                return cut(mb.ctx, const_cast<wsp_ggml_tensor *>(src), 1, r);
            }
            return device_.piece_of(src, m, PieceKind::ROWS, r.first, r.second);
        case Take::COLUMNS: return device_.piece_of(src, m, PieceKind::COLUMNS, r.first, r.second);
    }
    return nullptr;
}

// member m's view of its part of a sharded cache, as np maps it
wsp_ggml_tensor * Runner::cache_view(int m, const NodePlan & np) {
    wsp_ggml_tensor *  piece = device_.cache_piece(np.cache, m);
    const tp::Layout * L     = device_.cache_layout(np.cache);
    if (piece == nullptr || L == nullptr) {
        return nullptr;
    }
    int64_t ne[WSP_GGML_MAX_DIMS];
    size_t  nb[WSP_GGML_MAX_DIMS], offs = 0;
    local_view(*L, m, np.cache_view, np.cache_ne, np.cache_nb, np.cache_offs, wsp_ggml_type_size(piece->type), ne, nb,
               &offs);
    return wsp_ggml_view_4d(members_[m]->ctx, piece, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offs);
}

wsp_ggml_tensor * Runner::make_node(int m, const wsp_ggml_tensor * n, const NodePlan & np) {
    Member & mb = *members_[m];
    if (np.out.kind == State::MAIN && m != 0) { // received from the main member before it is read
        return wsp_ggml_new_tensor(mb.ctx, n->type, WSP_GGML_MAX_DIMS, n->ne);
    }
    if (np.cache != nullptr && n->op == WSP_GGML_OP_VIEW) { // a read of a sharded cache
        return cache_view(m, np);
    }
    if (np.cache != nullptr) { // a write into one: the copy lands in this member's part
        wsp_ggml_tensor * src = take(m, n->src[0], np.take[0]);
        wsp_ggml_tensor * dst = cache_view(m, np);
        return src != nullptr && dst != nullptr ? wsp_ggml_cpy(mb.ctx, src, dst) : nullptr;
    }
    wsp_ggml_tensor * src[WSP_GGML_MAX_SRC]{};
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        if (n->src[j] != nullptr && (src[j] = take(m, n->src[j], np.take[j])) == nullptr) {
            return nullptr;
        }
    }
    int64_t ne[WSP_GGML_MAX_DIMS] = { n->ne[0], n->ne[1], n->ne[2], n->ne[3] };
    if (np.out.kind == State::SPLIT) {
        ne[np.out.dim] = np.out.ranges[m].second - np.out.ranges[m].first;
    }
    wsp_ggml_tensor * t = nullptr;
    switch (n->op) {
        case WSP_GGML_OP_RESHAPE: t = wsp_ggml_reshape_4d(mb.ctx, src[0], ne[0], ne[1], ne[2], ne[3]); break;
        case WSP_GGML_OP_PERMUTE:
            t = wsp_ggml_permute(mb.ctx, src[0], n->op_params[0], n->op_params[1], n->op_params[2], n->op_params[3]);
            break;
        case WSP_GGML_OP_TRANSPOSE: t = wsp_ggml_transpose(mb.ctx, src[0]); break;
        case WSP_GGML_OP_VIEW:
            if (np.out.kind == State::SPLIT) { // the whole of a split tensor
                t = wsp_ggml_view_tensor(mb.ctx, src[0]);
            } else {
                const size_t offs = n->view_offs - (n->src[0]->view_src != nullptr ? n->src[0]->view_offs : 0);
                t = wsp_ggml_view_4d(mb.ctx, src[0], ne[0], ne[1], ne[2], ne[3], n->nb[1], n->nb[2], n->nb[3], offs);
            }
            break;
        default:
            t     = wsp_ggml_new_tensor(mb.ctx, n->type, WSP_GGML_MAX_DIMS, ne);
            t->op = n->op;
            std::memcpy(t->op_params, n->op_params, sizeof(n->op_params));
            for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
                t->src[j] = src[j];
            }
            if (m == 0 && np.out.kind != State::SPLIT) { // the graph's own memory: its result is there
                t->data   = n->data;
                t->buffer = n->buffer;
            }
            break;
    }
    wsp_ggml_set_name(t, n->name);
    return t;
}

bool Runner::build(wsp_ggml_cgraph * g, const Plan & plan) {
    const size_t n_tensors = (size_t) (g->n_nodes + g->n_leafs) * 4 + 64;
    const size_t n_graph   = (size_t) g->n_nodes * 4 + 64;
    for (auto & mb : members_) {
        wsp_ggml_free(mb->ctx);
        mb->local.clear();
        mb->inputs.clear();
        mb->ends.clear();
        mb->ctx_mem.resize(std::max(mb->ctx_mem.size(), n_tensors * wsp_ggml_tensor_overhead() +
                                                            wsp_ggml_graph_overhead_custom(n_graph, false)));
        mb->ctx = wsp_ggml_init({ mb->ctx_mem.size(), mb->ctx_mem.data(), true });
        if (mb->ctx == nullptr) {
            return false;
        }
        mb->graph = wsp_ggml_new_graph_custom(mb->ctx, n_graph, false);
        ++device_.counters.plans_built; // a member graph (Note [all-GPU counters])
    }
    for (const auto & [r, L] : plan.layouts) { // caches this graph shards
        const Layout * kept = device_.cache_layout(r);
        if (kept != nullptr && kept->parts != L.parts) {
            device_.unshard(r, true); // sharded anew below (the members are idle: compute() waited)
            kept = nullptr;
        }
        if (kept == nullptr && !device_.shard(r, L)) {
            return false;
        }
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = g->nodes[i];
        for (size_t m = 0; m < members_.size() && !plan.nodes[i].skip; ++m) {
            Member & mb = *members_[m];
            if (!plan.nodes[i].reduce_before.empty()) {
                mb.ends.push_back(mb.graph->n_nodes);
            }
            wsp_ggml_tensor * t = make_node((int) m, n, plan.nodes[i]);
            if (t == nullptr) {
                WSP_LOG_ERROR("%s: cannot make %s on %s\n", device_.name.c_str(), n->name,
                              wsp_ggml_backend_name(mb.backend));
                return false;
            }
            mb.local[n] = t;
            wsp_ggml_build_forward_expand(mb.graph, t);
        }
    }
    gathers_.clear();
    for (int i = 0; i < g->n_nodes; ++i) { // split results the graph gives out: into its memory
        const NodePlan & np = plan.nodes[i];
        for (size_t m = 0; m < members_.size() && np.gather; ++m) {
            wsp_ggml_tensor * n   = g->nodes[i];
            wsp_ggml_tensor * dst = cut(members_[0]->ctx, n, np.out.dim, np.out.ranges[m]);
            wsp_ggml_backend_view_init(dst);
            if (m == 0) { // on the main member itself: a copy kernel (added by hand, as in all_reduce)
                wsp_ggml_graph_add_node(members_[0]->graph,
                                        wsp_ggml_cpy(members_[0]->ctx, members_[0]->local.at(n), dst));
            } else {
                gathers_.push_back({ (int) m, members_[m]->local.at(n), dst });
            }
        }
    }
    for (auto & mb : members_) {
        mb->ends.push_back(mb->graph->n_nodes);
        if (mb->galloc == nullptr) {
            mb->galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(mb->backend));
        }
        if (mb->galloc == nullptr || !wsp_ggml_gallocr_alloc_graph(mb->galloc, mb->graph)) {
            WSP_LOG_ERROR("%s: cannot allocate the tensors of %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(mb->backend));
            return false;
        }
    }
    return true;
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
bool Runner::all_reduce(const std::vector<wsp_ggml_tensor *> & parts) {
    const int n_mem = (int) members_.size();
    {
        std::lock_guard<std::recursive_mutex> lock(device_.mutex); // both ways move 2 (N-1)/N of it per member
        device_.traffic.all_reduce += 2 * (size_t) (n_mem - 1) * wsp_ggml_nbytes(parts[0]);
        device_.traffic.n_all_reduces++;
    }
    if (fast_all_reduce_ != nullptr &&
        fast_all_reduce_(backends_.data(), const_cast<wsp_ggml_tensor **>(parts.data()), n_mem)) {
        return true;
    }
    const int64_t n     = wsp_ggml_nelements(parts[0]);
    auto          chunk = [&](int c) { return Range{ n * c / n_mem, n * (c + 1) / n_mem }; };
    const size_t  slot  = align_up((size_t) ((n + n_mem - 1) / n_mem) * sizeof(float));
    for (auto & mb : members_) {
        const size_t want = slot * (size_t) (n_mem - 1);
        if (mb->scratch == nullptr || wsp_ggml_backend_buffer_get_size(mb->scratch) < want) {
            wsp_ggml_backend_synchronize(mb->backend); // the old slots may still be read
            if (mb->scratch != nullptr) {
                wsp_ggml_backend_buffer_free(mb->scratch);
            }
            mb->scratch = wsp_ggml_backend_alloc_buffer(mb->backend, want);
            if (mb->scratch == nullptr) {
                WSP_LOG_ERROR("%s: no room for the all-reduce's %zu bytes on %s\n", device_.name.c_str(), want,
                              wsp_ggml_backend_name(mb->backend));
                return false;
            }
        }
    }
    auto piece = [&](int m, int c) {
        const Range       r = chunk(c);
        wsp_ggml_tensor * v =
            wsp_ggml_view_1d(members_[m]->ar_ctx, parts[m], r.second - r.first, (size_t) r.first * sizeof(float));
        wsp_ggml_backend_view_init(v);
        return v;
    };
    // reduce-scatter: e receives chunk e from every d into slot (d < e ? d : d - 1)
    std::vector<std::vector<wsp_ggml_tensor *>> slots(n_mem);
    for (int e = 0; e < n_mem; ++e) {
        Member &    me   = *members_[e];
        const Range r    = chunk(e);
        char *      base = (char *) wsp_ggml_backend_buffer_get_base(me.scratch);
        for (int d = 0; d < n_mem; ++d) {
            if (d == e) {
                continue;
            }
            wsp_ggml_tensor * s = wsp_ggml_new_tensor_1d(me.ar_ctx, WSP_GGML_TYPE_F32, r.second - r.first);
            wsp_ggml_backend_tensor_alloc(me.scratch, s, base + slot * (size_t) slots[e].size());
            slots[e].push_back(s);
            wsp_ggml_backend_tensor_copy_async(backends_[d], backends_[e], piece(d, e), s);
        }
    }
    for (int e = 0; e < n_mem; ++e) {
        Member &          me  = *members_[e];
        wsp_ggml_cgraph * add = wsp_ggml_new_graph_custom(me.ar_ctx, n_mem + 4, false);
        wsp_ggml_tensor * sum = piece(e, e);
        for (wsp_ggml_tensor * s : slots[e]) { // added by hand: expanding would take in the graph before
            sum = wsp_ggml_add_inplace(me.ar_ctx, sum, s);
            wsp_ggml_graph_add_node(add, sum);
        }
        if (!init_views(add) || wsp_ggml_backend_graph_compute_async(me.backend, add) != WSP_GGML_STATUS_SUCCESS) {
            WSP_LOG_ERROR("%s: the all-reduce's sum failed on %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(me.backend));
            return false;
        }
    }
    // all-gather: e's summed chunk to every other member
    for (int e = 0; e < n_mem; ++e) {
        for (int d = 0; d < n_mem; ++d) {
            if (d != e) {
                wsp_ggml_backend_tensor_copy_async(backends_[e], backends_[d], piece(e, e), piece(d, e));
            }
        }
    }
    return true;
}

wsp_ggml_status Runner::compute(wsp_ggml_cgraph * g, const Plan & plan) {
    // the previous graph's tensors and slots are about to be reused
    for (wsp_ggml_backend_t b : backends_) {
        wsp_ggml_backend_synchronize(b);
    }
    if (!build(g, plan)) {
        return WSP_GGML_STATUS_ALLOC_FAILED;
    }
    size_t sent = 0, gathered = 0; // bytes, for the device's traffic
    // the PARTIAL tensors reduced at each boundary, in order
    std::vector<std::vector<const wsp_ggml_tensor *>> reduce;
    for (const NodePlan & np : plan.nodes) {
        if (!np.reduce_before.empty()) {
            reduce.emplace_back(np.reduce_before.begin(), np.reduce_before.end());
        }
    }
    reduce.emplace_back(plan.reduce_at_end.begin(), plan.reduce_at_end.end());
    size_t n_ar = 0;
    for (const auto & r : reduce) {
        n_ar += r.size();
    }
    const size_t n_mem = members_.size();
    for (size_t m = 0; m < n_mem; ++m) {
        Member & mb = *members_[m];
        wsp_ggml_free(mb.ar_ctx);
        const size_t n_t = n_ar * (4 * n_mem + 4) + 16;
        mb.ar_mem.resize(std::max(mb.ar_mem.size(), n_t * wsp_ggml_tensor_overhead() +
                                                        n_ar * wsp_ggml_graph_overhead_custom(n_mem + 4, false)));
        mb.ar_ctx = wsp_ggml_init({ mb.ar_mem.size(), mb.ar_mem.data(), true });
        for (auto & [from, to] : mb.inputs) { // what the graph reads from outside, from the main member
            wsp_ggml_backend_tensor_copy_async(backends_[0], mb.backend, const_cast<wsp_ggml_tensor *>(from), to);
            sent += wsp_ggml_nbytes(to);
        }
    }
    for (size_t s = 0; s < reduce.size(); ++s) {
        for (size_t m = 0; m < n_mem; ++m) {
            Member &        mb  = *members_[m];
            const int       end = mb.ends[s];
            wsp_ggml_cgraph seg = wsp::graph_view(mb.graph, s == 0 ? 0 : mb.ends[s - 1], end);
            if (seg.n_nodes > 0 && wsp_ggml_backend_graph_compute_async(mb.backend, &seg) != WSP_GGML_STATUS_SUCCESS) {
                WSP_LOG_ERROR("%s: %s failed\n", device_.name.c_str(), wsp_ggml_backend_name(mb.backend));
                return WSP_GGML_STATUS_FAILED;
            }
        }
        for (const wsp_ggml_tensor * p : reduce[s]) {
            std::vector<wsp_ggml_tensor *> parts;
            for (auto & mb : members_) {
                parts.push_back(mb->local.at(p));
            }
            if (plan.nodes[plan.index.at(p)].out.kind == State::MAIN) { // the main member's, to all
                for (size_t m = 1; m < n_mem; ++m) {
                    order_after(0, (int) m); // its copy is a leaf there, in memory m may have used before
                    wsp_ggml_backend_tensor_copy_async(backends_[0], backends_[m], parts[0], parts[m]);
                    sent += wsp_ggml_nbytes(parts[m]);
                }
            } else if (!all_reduce(parts)) {
                return WSP_GGML_STATUS_FAILED;
            }
        }
    }
    for (size_t m = 1; m < n_mem && !gathers_.empty(); ++m) {
        order_after((int) m, 0); // the main member's memory for the result may have held its earlier tensors
    }
    for (const Gather & x : gathers_) {
        if (!copy_rows(backends_[x.member], backends_[0], x.part, x.dst)) {
            return WSP_GGML_STATUS_FAILED;
        }
        gathered += wsp_ggml_nbytes(x.part);
    }
    std::lock_guard<std::recursive_mutex> lock(device_.mutex);
    device_.traffic.sent += sent;
    device_.traffic.gathered += gathered;
    device_.traffic.n_graphs++;
    return WSP_GGML_STATUS_SUCCESS;
}

} // namespace wsp::allgpu::tp
