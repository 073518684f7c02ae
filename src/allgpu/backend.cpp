// The all-GPU device's backend (Note [all-GPU device]): each graph runs through a scheduler over
// the members, each spreadable mat-mul weight replaced by its shadow while the graph runs.

#include "all_gpu.h"
#include "graph_key.h"
#include "runner.h"
#include "plan.h"

#include "ggml-cpu.h"

#include "../core/impl.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace wsp::allgpu {

namespace {

wsp_ggml_guid all_gpu_guid = { 0x61, 0x6c, 0x6c, 0x2d, 0x67, 0x70, 0x75, 0x73,
                               0x2d, 0x77, 0x73, 0x70, 0x2d, 0x67, 0x67, 0x6d };

// the graphs given to the backend have at most this many nodes before the split mat-muls expand
constexpr size_t GRAPH_SIZE = 8192;

struct BackendCtx {
    Device *                        device = nullptr;
    std::vector<wsp_ggml_backend_t> members; // main first
    wsp_ggml_backend_t              cpu   = nullptr;
    wsp_ggml_backend_sched_t        sched = nullptr;
    std::unique_ptr<tp::Runner>     runner; // tensor parallelism (Note [tensor parallelism])
    // the units plans of alike graphs ended with (by tp::structure_of), so that a decoder's steps
    // plan in one pass
    std::unordered_map<uint64_t, std::unordered_map<int, int64_t>> units;

    ~BackendCtx() {
        runner.reset();
        wsp_ggml_backend_sched_free(sched);
        for (wsp_ggml_backend_t b : members) {
            wsp_ggml_backend_free(b);
        }
        wsp_ggml_backend_free(cpu);
    }
    wsp_ggml_backend_t main() const { return members[0]; }
};

BackendCtx & ctx_of(wsp_ggml_backend_t b) {
    return *static_cast<BackendCtx *>(b->context);
}

// an all-GPU backend stands for its main member where one tensor is concerned
wsp_ggml_backend_t main_of(wsp_ggml_backend_t b) {
    return b != nullptr && wsp_ggml_guid_matches(b->guid, &all_gpu_guid) ? ctx_of(b).main() : b;
}

const char * b_name(wsp_ggml_backend_t b) {
    return ctx_of(b).device->name.c_str();
}

void b_free(wsp_ggml_backend_t b) {
    MemberWork work(*ctx_of(b).device); // the device outlives its backends
    delete &ctx_of(b);
    delete b;
}

void b_set_async(wsp_ggml_backend_t b, wsp_ggml_tensor * t, const void * data, size_t offset, size_t size) {
    MemberWork work(*ctx_of(b).device);
    ctx_of(b).device->forget(t);
    wsp_ggml_backend_tensor_set_async(ctx_of(b).main(), t, data, offset, size);
}

void b_get_async(wsp_ggml_backend_t b, const wsp_ggml_tensor * t, void * data, size_t offset, size_t size) {
    MemberWork work(*ctx_of(b).device);
    wsp_ggml_backend_tensor_get_async(ctx_of(b).main(), t, data, offset, size);
}

// called on the destination's backend; the members' own copy does the work where it can
bool b_cpy_async(wsp_ggml_backend_t src_b, wsp_ggml_backend_t dst_b, const wsp_ggml_tensor * src,
                 wsp_ggml_tensor * dst) {
    MemberWork         work(*ctx_of(dst_b).device);
    wsp_ggml_backend_t main = ctx_of(dst_b).main();
    if (main->iface.cpy_tensor_async == nullptr || !main->iface.cpy_tensor_async(main_of(src_b), main, src, dst)) {
        return false;
    }
    ctx_of(dst_b).device->forget(dst);
    return true;
}

wsp_ggml_status b_synchronize(wsp_ggml_backend_t b) {
    MemberWork      work(*ctx_of(b).device);
    wsp_ggml_status status = WSP_GGML_STATUS_SUCCESS;
    for (wsp_ggml_backend_t m : ctx_of(b).members) {
        const wsp_ggml_status s = m->iface.synchronize ? m->iface.synchronize(m) : WSP_GGML_STATUS_SUCCESS;
        status                  = status == WSP_GGML_STATUS_SUCCESS ? s : status;
    }
    if (status == WSP_GGML_STATUS_SUCCESS && ctx_of(b).runner != nullptr) {
        ctx_of(b).runner->members_idle();
    }
    return status;
}

// WSP_GGML_ALL_GPU_TP=0 turns tensor parallelism off (the row split for every graph)
bool tp_enabled() {
    static const bool on = [] {
        const char * env = std::getenv("WSP_GGML_ALL_GPU_TP");
        return env == nullptr || std::strcmp(env, "0") != 0;
    }();
    return on;
}

// runs the graph Megatron-style where it fits (Note [tensor parallelism]); false where it does not.
// A graph seen before runs what was built for it (Note [kept member graphs] in runner.h).
bool try_tensor_parallel(BackendCtx & c, wsp_ggml_cgraph * g, wsp_ggml_status * status) {
    Device & d = *c.device;
    if (!tp_enabled()) {
        return false;
    }
    for (float p : d.tensor_split) {
        if (p <= 0.0f) {
            d.say_once("a member without a share of the split: mat-muls split by rows, gathered after each");
            return false;
        }
    }
    tp::GraphKey        key   = tp::key_of(g, d.tensor_split);
    tp::Runner::Build * built = c.runner->find(key);
    if (built != nullptr && !c.runner->follow(*built, g)) { // its cache views fall elsewhere now
        c.runner->drop(built);
        built = nullptr;
    }
    if (built == nullptr) {
        tp::Graph tg{ g, d.tensor_split, nullptr, nullptr, nullptr };
        tg.spreadable       = [&d](const wsp_ggml_tensor * w) { return spreadable(d, w); };
        tg.sharded          = [&d](const wsp_ggml_tensor * r) { return d.cache_layout(r); };
        tg.keepable         = [&d](const wsp_ggml_tensor * r) { return r->buffer != nullptr && d.owns(r->buffer); };
        const tp::Plan plan = tp::make_plan(tg, &c.units[tp::structure_of(g)]);
        if (plan.ok()) {
            ++d.counters.plans_built; // its member graphs count as the runner builds them
        } else if (!plan.why_not.empty()) {
            d.say_once("a graph does not fit tensor parallelism (" + plan.why_not +
                       "): its mat-muls split by rows, gathered after each");
        }
        built = c.runner->add(std::move(key), g, plan, status);
        if (built == nullptr) {
            return true; // *status says what failed
        }
    }
    if (!tp::Runner::planned(*built)) {
        return false;
    }
    tp::Moved moved;
    *status = c.runner->run(*built, moved);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    d.traffic.all_reduce += moved.all_reduce;
    d.traffic.n_all_reduces += moved.n_all_reduces;
    d.traffic.sent += moved.sent;
    d.traffic.gathered += moved.gathered;
    d.traffic.n_graphs++;
    return true;
}

// the graph over every member: tensor-parallel where it fits; otherwise spreadable weights read
// through their shadows (rows per member, gathered) while it runs
wsp_ggml_status b_graph_compute(wsp_ggml_backend_t b, wsp_ggml_cgraph * g) {
    BackendCtx &    c = ctx_of(b);
    MemberWork      work(*c.device);
    wsp_ggml_status status = WSP_GGML_STATUS_SUCCESS;
    ++c.device->counters.graph_computes;
    if (try_tensor_parallel(c, g, &status)) {
        return status;
    }
    // the row split reads and writes the main member's copies: sharded caches made whole there
    bool synced = false;
    for (int i = 0; i < g->n_nodes; ++i) {
        for (int j = -1; j < WSP_GGML_MAX_SRC; ++j) {
            const wsp_ggml_tensor * t = j < 0 ? g->nodes[i] : g->nodes[i]->src[j];
            if (t != nullptr && c.device->cache_layout(storage_of(t)) != nullptr) {
                if (!synced) {
                    b_synchronize(b);
                    synced = true;
                }
                c.device->unshard(storage_of(t), true);
            }
        }
    }
    std::vector<std::pair<wsp_ggml_tensor *, wsp_ggml_tensor *>> swapped; // node, its own weight
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        if (node->op != WSP_GGML_OP_MUL_MAT || !spreadable(*c.device, node->src[0])) {
            continue;
        }
        wsp_ggml_tensor * shadow = c.device->shadow_of(node->src[0]);
        if (shadow != nullptr) { // else logged: the main member computes it whole
            swapped.emplace_back(node, node->src[0]);
            node->src[0] = shadow;
        }
    }
    wsp_ggml_backend_sched_reset(c.sched); // the graph's nodes change from call to call
    status = wsp_ggml_backend_sched_graph_compute(c.sched, g);
    // reset above, the scheduler planned the graph anew: its assignment and one graph per split
    c.device->counters.plans_built += 1 + (uint64_t) wsp_ggml_backend_sched_get_n_splits(c.sched);
    for (auto & [node, weight] : swapped) {
        node->src[0] = weight;
    }
    return status;
}

const wsp_ggml_backend_i backend_iface = {
    /* .get_name           = */ b_name,
    /* .free               = */ b_free,
    /* .set_tensor_async   = */ b_set_async,
    /* .get_tensor_async   = */ b_get_async,
    /* .cpy_tensor_async   = */ b_cpy_async,
    /* .synchronize        = */ b_synchronize,
    /* .graph_plan_create  = */ nullptr,
    /* .graph_plan_free    = */ nullptr,
    /* .graph_plan_update  = */ nullptr,
    /* .graph_plan_compute = */ nullptr,
    /* .graph_compute      = */ b_graph_compute,
    /* .event_record       = */ nullptr,
    /* .event_wait         = */ nullptr,
};

} // namespace

wsp_ggml_backend_t backend_init(Device & d) {
    MemberWork work(d);
    auto       c = std::make_unique<BackendCtx>();
    c->device    = &d;
    for (wsp_ggml_backend_dev_t m : d.members) {
        wsp_ggml_backend_t mb = wsp_ggml_backend_dev_init(m, nullptr);
        if (mb == nullptr) {
            WSP_LOG_ERROR("%s: cannot start a backend on %s\n", d.name.c_str(), wsp_ggml_backend_dev_name(m));
            return nullptr;
        }
        c->members.push_back(mb);
    }
    c->cpu = wsp_ggml_backend_cpu_init();
    if (c->cpu == nullptr) {
        WSP_LOG_ERROR("%s: cannot start the CPU backend its scheduler needs\n", d.name.c_str());
        return nullptr;
    }
    std::vector<wsp_ggml_backend_t> all = c->members;
    all.push_back(c->cpu);
    c->sched = wsp_ggml_backend_sched_new(all.data(), nullptr, (int) all.size(), GRAPH_SIZE, false, false);
    if (c->sched == nullptr) {
        WSP_LOG_ERROR("%s: cannot make the scheduler over its members\n", d.name.c_str());
        return nullptr;
    }
    c->runner = std::make_unique<tp::Runner>(d, c->members);
    return new wsp_ggml_backend{ &all_gpu_guid, backend_iface, &d.dev, c.release() };
}

} // namespace wsp::allgpu
