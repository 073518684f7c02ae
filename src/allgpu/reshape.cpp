// Note [grown shapes]: a decoder step whose KV cache is not padded (whisper.cpp without flash
// attention) reads one more position each step: its graph has the nodes, ops, sources and plan of
// the step before, and other shapes (the cache views, the scores, their soft_max, the mask). Such
// a graph is alike (alike_key_of: its key without shapes and without where outside tensors are),
// and the build kept for the step before follows it in place instead of being planned and built
// again:
//  - every member tensor of a node whose shape changed takes its new shape by the rule that made
//    it (runner.cpp): a computed node the node's shape with the split dimension cut to the
//    member's range, contiguous (the main member's own result: the node's strides); a reshape
//    contiguous; a permute or transpose its source's, moved; a view the node's; a member's view
//    of a sharded cache mapped again (Note [moved nodes] in kept.cpp);
//  - an outside tensor whose shape or place changed (the mask) is aliased anew on the main member
//    and its copy on the others takes its shape;
//  - each member graph whose tensors changed is placed again by the member's allocator (no device
//    allocation unless the shared buffer must grow, which drops the other builds as a build does).
// It refuses, and the graph is planned and built as before, where the plan could differ or a
// rule would: the node tensors are not the same (the build keys its member tensors by them), a
// split dimension changes length (the ranges would), or a tensor that crosses between members
// changes shape (an all-reduce's, a send's, an all-gather's, a gathered result, a cache write),
// or an outside weight or sharded cache changed. So a plan, its boundaries and its traffic are
// those of the build; only sizes along unsplit dimensions move.

#include "runner_types.h"

#include "all_gpu.h"

#include <cstring>
#include <unordered_set>

namespace wsp::allgpu::tp {

namespace {

Runner::Build::Shape shape_of(const wsp_ggml_tensor * t) {
    Runner::Build::Shape s{};
    std::copy(t->ne, t->ne + WSP_GGML_MAX_DIMS, s.ne);
    std::copy(t->nb, t->nb + WSP_GGML_MAX_DIMS, s.nb);
    s.data      = t->data;
    s.view_offs = t->view_offs;
    return s;
}

bool same_dims(const Runner::Build::Shape & a, const wsp_ggml_tensor * t) {
    return std::equal(a.ne, a.ne + WSP_GGML_MAX_DIMS, t->ne) && std::equal(a.nb, a.nb + WSP_GGML_MAX_DIMS, t->nb);
}

void set_contiguous(wsp_ggml_tensor * t, const int64_t * ne) {
    std::copy(ne, ne + WSP_GGML_MAX_DIMS, t->ne);
    t->nb[0] = wsp_ggml_type_size(t->type);
    t->nb[1] = t->nb[0] * (size_t) (t->ne[0] / wsp_ggml_blck_size(t->type));
    for (int d = 2; d < WSP_GGML_MAX_DIMS; ++d) {
        t->nb[d] = t->nb[d - 1] * (size_t) t->ne[d - 1];
    }
}

void set_view_offset(wsp_ggml_tensor * t, size_t offs_in_source) {
    std::memcpy(t->op_params, &offs_in_source, sizeof(offs_in_source)); // as view_4d wrote it
}

} // namespace

void Runner::remember_shapes(Build & b, const wsp_ggml_cgraph * g, const Plan & plan, Building & at) {
    const size_t n = (size_t) g->n_nodes;
    b.node_at.assign(g->nodes, g->nodes + n);
    b.node_shape.clear();
    b.node_out.clear();
    b.node_fixed.assign(n, 0);
    b.node_cache.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
        const NodePlan & np = plan.nodes[i];
        b.node_shape.push_back(shape_of(g->nodes[i]));
        b.node_out.push_back(np.out);
        if (np.gather || np.skip || (np.cache != nullptr && g->nodes[i]->op != WSP_GGML_OP_VIEW)) {
            b.node_fixed[i] = 1; // gathered to the main member, or a write into a cache
        }
        for (const auto * list : { &np.reduce_before, &np.gather_before }) {
            for (const wsp_ggml_tensor * p : *list) {
                b.node_fixed[(size_t) plan.index.at(p)] = 1; // crosses between the members
            }
        }
    }
    for (const auto & [node, r] : b.produces) {
        b.node_fixed[(size_t) node] = 1; // written into replicas of its shape (Note [member replicas])
    }
    b.sliced.clear();
    for (size_t i = 0; i < n; ++i) {
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (plan.nodes[i].take[j].how == Take::SLICE) {
                b.sliced.push_back(g->nodes[i]->src[j]);
            }
        }
    }
    for (const wsp_ggml_tensor * p : plan.reduce_at_end) {
        b.node_fixed[(size_t) plan.index.at(p)] = 1;
    }
    for (size_t c = 0; c < b.caches.size(); ++c) {
        b.node_cache[(size_t) b.caches[c].node] = (int) c;
    }
    b.outside.clear();
    std::unordered_set<const wsp_ggml_tensor *> met; // outside tensors listed so far
    for (const auto & local : at.local) {
        for (const auto & [t, lt] : local) {
            (void) lt;
            if (plan.index.count(t) == 0 && met.insert(t).second) {
                b.outside.emplace_back(t, shape_of(t));
            }
        }
    }
    b.local = std::move(at.local);
}

Runner::Build * Runner::reshaped(const GraphKey & alike, GraphKey key, const wsp_ggml_cgraph * g) {
    if (!reshape_on_) {
        return nullptr;
    }
    if (device_.generation.load() != generation_) { // a piece or a cache they read is gone
        drop_all();
        generation_ = device_.generation.load();
        return nullptr;
    }
    for (auto it = builds_.begin(); it != builds_.end(); ++it) {
        Build & b = **it;
        if (b.row_split || !(b.alike == alike)) {
            continue;
        }
        bool touched = false;
        if (!reshape(b, g, &touched)) {
            if (touched) { // half made into g's shapes: it runs neither graph; g is planned and built
                builds_.erase(it);
                return nullptr;
            }
            continue; // as it was: another alike build may follow g (a batch of another size kept)
        }
        b.key  = std::move(key);
        b.once = false; // seen again, in another shape: kept
        b.hits++;
        builds_.splice(builds_.begin(), builds_, it);
        return builds_.front().get();
    }
    return nullptr;
}

namespace {

// the members read root's bytes from replicas of its shape (Note [member replicas])
bool read_from_replica(const Runner::Build & b, const wsp_ggml_tensor * root) {
    for (const auto & pm : b.members) {
        for (size_t j = 0; j < pm.inputs.size(); ++j) {
            if (pm.input_roots[j] == root && pm.input_replicas[j] != nullptr) {
                return true;
            }
        }
    }
    return false;
}

} // namespace

bool Runner::reshape(Build & b, const wsp_ggml_cgraph * g, bool * touched) {
    *touched           = false;
    const size_t n     = (size_t) g->n_nodes;
    const size_t n_mem = members_.size();
    if (b.node_at.size() != n) {
        return false;
    }
    // first every check: nothing is changed where the build cannot follow
    std::vector<size_t> nodes, outs;
    for (size_t i = 0; i < n; ++i) {
        const wsp_ggml_tensor * node = g->nodes[i];
        if (node != b.node_at[i]) {
            return false; // the member tensors are keyed by the node tensors
        }
        if (same_dims(b.node_shape[i], node)) {
            continue;
        }
        const State & st = b.node_out[i];
        if (b.node_fixed[i] || (st.kind == State::SPLIT && node->ne[st.dim] != b.node_shape[i].ne[st.dim]) ||
            std::find(b.sliced.begin(), b.sliced.end(), node) != b.sliced.end()) {
            return false;
        }
        if (b.node_cache[i] >= 0) {
            const Build::CacheAt & c = b.caches[(size_t) b.node_cache[i]];
            const Layout *         L = device_.cache_layout(c.root);
            ViewMap                vm;
            if (c.write || L == nullptr ||
                !map_view(*L, node->ne, node->nb, node->view_offs, wsp_ggml_type_size(c.root->type), vm) ||
                vm.dim != c.vm.dim || vm.stride != c.vm.stride || vm.ranges != c.vm.ranges) {
                return false;
            }
        }
        nodes.push_back(i);
    }
    for (size_t k = 0; k < b.outside.size(); ++k) {
        const wsp_ggml_tensor * t = b.outside[k].first;
        if (b.outside[k].second == shape_of(t)) {
            continue;
        }
        const wsp_ggml_tensor * root = storage_of(t);
        if (is_weight(root) || device_.cache_layout(root) != nullptr ||
            std::find(b.sliced.begin(), b.sliced.end(), t) != b.sliced.end() || read_from_replica(b, root)) {
            return false;
        }
        outs.push_back(k);
    }
    if (nodes.empty() && outs.empty()) {
        return true; // only where the nodes are moved: follow() sees to it
    }
    if (!idle_) {
        wait_members(); // the members' queued work reads these tensors
    }
    *touched = true;
    std::vector<bool> replace(n_mem, false); // members whose graph is placed again
    for (size_t k : outs) {
        const wsp_ggml_tensor * t = b.outside[k].first;
        for (size_t m = 0; m < n_mem; ++m) {
            auto it = b.local[m].find(t);
            if (it == b.local[m].end()) {
                continue;
            }
            wsp_ggml_tensor * lt = it->second;
            if (t->view_src != nullptr) { // a view of a root from outside: t's shape, at t's offset
                std::copy(t->ne, t->ne + WSP_GGML_MAX_DIMS, lt->ne);
                std::copy(t->nb, t->nb + WSP_GGML_MAX_DIMS, lt->nb);
                lt->view_offs = t->view_offs;
                set_view_offset(lt, t->view_offs);
            } else if (m == 0) { // the main member's alias of t's memory
                std::copy(t->ne, t->ne + WSP_GGML_MAX_DIMS, lt->ne);
                std::copy(t->nb, t->nb + WSP_GGML_MAX_DIMS, lt->nb);
                lt->data   = t->data;
                lt->buffer = t->buffer;
            } else { // the member's copy of it, sent each run
                set_contiguous(lt, t->ne);
                replace[m] = true;
            }
        }
        for (Build::PerMember & pm : b.members) { // aliases made for the members' copies alone
            for (size_t j = 0; j < pm.inputs.size(); ++j) {
                if (pm.input_roots[j] == t) {
                    wsp_ggml_tensor * from = pm.inputs[j].first;
                    std::copy(t->ne, t->ne + WSP_GGML_MAX_DIMS, from->ne);
                    std::copy(t->nb, t->nb + WSP_GGML_MAX_DIMS, from->nb);
                    from->data   = t->data;
                    from->buffer = t->buffer;
                }
            }
        }
        b.outside[k].second = shape_of(t);
    }
    for (size_t i : nodes) {
        const wsp_ggml_tensor * node = g->nodes[i];
        const State &           st   = b.node_out[i];
        int64_t                 ne[WSP_GGML_MAX_DIMS];
        for (size_t m = 0; m < n_mem; ++m) {
            auto it = b.local[m].find(node);
            if (it == b.local[m].end()) {
                continue; // not computed there
            }
            wsp_ggml_tensor * lt = it->second;
            std::copy(node->ne, node->ne + WSP_GGML_MAX_DIMS, ne);
            if (st.kind == State::SPLIT) {
                ne[st.dim] = st.ranges[m].second - st.ranges[m].first;
            }
            if (b.node_cache[i] >= 0) { // the member's view of its part of the cache
                Build::CacheAt & c = b.caches[(size_t) b.node_cache[i]];
                int64_t          lne[WSP_GGML_MAX_DIMS];
                size_t           lnb[WSP_GGML_MAX_DIMS], loffs = 0;
                local_view(*device_.cache_layout(c.root), (int) m, c.vm, node->ne, node->nb, node->view_offs,
                           wsp_ggml_type_size(c.root->type), lne, lnb, &loffs);
                std::copy(lne, lne + WSP_GGML_MAX_DIMS, lt->ne);
                std::copy(lnb, lnb + WSP_GGML_MAX_DIMS, lt->nb);
                lt->view_offs = loffs;
                set_view_offset(lt, loffs);
                continue;
            }
            const wsp_ggml_tensor * src = lt->src[0]; // the member's own source (updated before: node order)
            switch (node->op) {
                case WSP_GGML_OP_VIEW:
                    if (st.kind == State::SPLIT) { // the whole of a split source
                        std::copy(src->ne, src->ne + WSP_GGML_MAX_DIMS, lt->ne);
                        std::copy(src->nb, src->nb + WSP_GGML_MAX_DIMS, lt->nb);
                    } else {
                        std::copy(ne, ne + WSP_GGML_MAX_DIMS, lt->ne);
                        std::copy(node->nb, node->nb + WSP_GGML_MAX_DIMS, lt->nb);
                    }
                    break;
                case WSP_GGML_OP_RESHAPE: set_contiguous(lt, ne); break;
                case WSP_GGML_OP_PERMUTE:
                    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) { // source dim d goes to axis op_params[d]
                        lt->ne[node->op_params[d]] = src->ne[d];
                        lt->nb[node->op_params[d]] = src->nb[d];
                    }
                    break;
                case WSP_GGML_OP_TRANSPOSE:
                    std::copy(src->ne, src->ne + WSP_GGML_MAX_DIMS, lt->ne);
                    std::copy(src->nb, src->nb + WSP_GGML_MAX_DIMS, lt->nb);
                    std::swap(lt->ne[0], lt->ne[1]);
                    std::swap(lt->nb[0], lt->nb[1]);
                    break;
                default:
                    if (m == 0 && st.kind != State::SPLIT) { // the graph's own memory, in its layout
                        std::copy(ne, ne + WSP_GGML_MAX_DIMS, lt->ne);
                        std::copy(node->nb, node->nb + WSP_GGML_MAX_DIMS, lt->nb);
                    } else {
                        set_contiguous(lt, ne);
                        replace[m] = true;
                    }
                    break;
            }
        }
        if (b.node_cache[i] >= 0) { // follow() maps it at its offsets from now on
            Build::CacheAt & c = b.caches[(size_t) b.node_cache[i]];
            std::copy(node->ne, node->ne + WSP_GGML_MAX_DIMS, c.ne);
            std::copy(node->nb, node->nb + WSP_GGML_MAX_DIMS, c.nb);
        }
        b.node_shape[i] = shape_of(node);
    }
    for (size_t m = 0; m < n_mem; ++m) { // the changed member graphs placed again
        if (!replace[m]) {
            continue;
        }
        Member &           mb = *members_[m];
        Build::PerMember & pm = b.members[m];
        for (wsp_ggml_tensor * t : pm.placed) {
            t->data   = nullptr;
            t->buffer = nullptr;
        }
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(pm.ctx); t != nullptr;
             t                   = wsp_ggml_get_next_tensor(pm.ctx, t)) {
            if (t->view_src != nullptr && t->view_src->data == nullptr) {
                t->data   = nullptr; // placed from its source below
                t->buffer = nullptr;
            }
        }
        const size_t had = wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0);
        if (!wsp_ggml_gallocr_alloc_graph(mb.galloc, pm.graph)) {
            WSP_LOG_ERROR("%s: cannot place the tensors of %s again\n", device_.name.c_str(),
                          wsp_ggml_backend_name(mb.backend));
            return false; // logged
        }
        if (wsp_ggml_gallocr_get_buffer_size(mb.galloc, 0) != had) { // a new buffer: the others' tensors are gone
            builds_.remove_if([&b](const std::unique_ptr<Build> & k) { return k.get() != &b; });
        }
    }
    for (size_t m = 0; m < n_mem; ++m) { // every view in the build's contexts at its source again
        Build::PerMember & pm = b.members[m];
        for (wsp_ggml_context * ctx : { pm.ctx, pm.ar_ctx }) {
            for (wsp_ggml_tensor * t = ctx != nullptr ? wsp_ggml_get_first_tensor(ctx) : nullptr; t != nullptr;
                 t                   = wsp_ggml_get_next_tensor(ctx, t)) {
                if (t->view_src != nullptr && t->view_src->data != nullptr) {
                    t->data   = (char *) t->view_src->data + t->view_offs;
                    t->buffer = t->view_src->buffer;
                }
            }
        }
    }
    return true;
}

} // namespace wsp::allgpu::tp
