// The builds kept across runs (Note [kept member graphs] in runner.h): found by key, added,
// dropped, evicted, and pointed at where a graph's nodes are now (Note [moved nodes]).

#include "runner_types.h"

#include "all_gpu.h"

#include <algorithm>
#include <cstring>

namespace wsp::allgpu::tp {

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

Runner::Build * Runner::add(GraphKey key, GraphKey alike, wsp_ggml_cgraph * g, const Plan & plan,
                            wsp_ggml_status * status) {
    auto b       = std::make_unique<Build>();
    b->spare     = &spare_;
    b->key       = std::move(key);
    b->alike     = std::move(alike);
    b->row_split = plan.row_split;
    b->once      = sighted_.count(b->key.hash) == 0;
    if (b->once) {
        if (sighted_.size() >= SIGHTED) {
            sighted_.clear();
        }
        sighted_.insert(b->key.hash);
    }
    // a build may shard caches from the main member's copies and grow the members' buffers:
    // nothing may be running on them
    wait_members();
    if (device_.generation.load() != generation_) { // since find: a piece or a cache they read went
        builds_.clear();
        generation_ = device_.generation.load();
    }
    // the graph built to run once goes: its blocks, in pages touched already, make this one
    builds_.remove_if([](const std::unique_ptr<Build> & k) { return k->once; });
    const uint64_t before = device_.generation.load();
    builds_.push_front(std::move(b)); // kept first: a buffer it grows drops only the others
    Build & made = *builds_.front();
    *status      = build(made, g, plan);
    if (*status != WSP_GGML_STATUS_SUCCESS) {
        builds_.remove_if([&made](const std::unique_ptr<Build> & k) { return k.get() == &made; });
        return nullptr;
    }
    if (device_.generation.load() != before) { // it sharded a cache anew: the others read the old pieces
        builds_.remove_if([&made](const std::unique_ptr<Build> & k) { return k.get() != &made; });
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

bool Runner::row_split(const Build & b) {
    return b.row_split;
}

} // namespace wsp::allgpu::tp
