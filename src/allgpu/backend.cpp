// The all-GPU device's backend (Note [all-GPU device]): each graph runs by its plan over the
// members, tensor-parallel where it fits, by the row split where it does not.

#include "all_gpu.h"
#include "graph_key.h"
#include "runner.h"
#include "plan.h"

#include "../core/impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace wsp::allgpu {

namespace {

wsp_ggml_guid all_gpu_guid = { 0x61, 0x6c, 0x6c, 0x2d, 0x67, 0x70, 0x75, 0x73,
                               0x2d, 0x77, 0x73, 0x70, 0x2d, 0x67, 0x67, 0x6d };

struct BackendCtx {
    Device *                        device = nullptr;
    std::vector<wsp_ggml_backend_t> members; // main first
    std::unique_ptr<tp::Runner>     runner;  // runs the plans, keeps what it built
    // the units plans of alike graphs ended with (by tp::structure_of), so that a decoder's steps
    // plan in one pass
    std::unordered_map<uint64_t, std::unordered_map<int, int64_t>> units;

    ~BackendCtx() {
        runner.reset();
        for (wsp_ggml_backend_t b : members) {
            wsp_ggml_backend_free(b);
        }
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

// one host wait where the last run joined the members on the main member's stream (Note [joined
// members] in runner.h), else one per member
wsp_ggml_status b_synchronize(wsp_ggml_backend_t b) {
    MemberWork      work(*ctx_of(b).device);
    wsp_ggml_status status = WSP_GGML_STATUS_SUCCESS;
    const bool      joined = ctx_of(b).runner == nullptr || ctx_of(b).runner->joined();
    for (wsp_ggml_backend_t m : ctx_of(b).members) {
        if (joined && m != ctx_of(b).main()) {
            continue;
        }
        const wsp_ggml_status s = m->iface.synchronize ? m->iface.synchronize(m) : WSP_GGML_STATUS_SUCCESS;
        status                  = status == WSP_GGML_STATUS_SUCCESS ? s : status;
    }
    if (status == WSP_GGML_STATUS_SUCCESS && ctx_of(b).runner != nullptr) {
        ctx_of(b).runner->members_idle();
    }
    return status;
}

// Note [all-GPU events] in device.cpp: the device's event is its main member's, recorded there
void b_event_record(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    MemberWork         work(*ctx_of(b).device);
    wsp_ggml_backend_t main = ctx_of(b).main();
    main->iface.event_record(main, static_cast<wsp_ggml_backend_event_t>(e->context));
}

// the main member waits (the members wait for it as the next run starts); an event of another
// kind is the main member's to handle, as on one device
void b_event_wait(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    MemberWork               work(*ctx_of(b).device);
    wsp_ggml_backend_t       main = ctx_of(b).main();
    wsp_ggml_backend_event_t x =
        e->device == &ctx_of(b).device->dev ? static_cast<wsp_ggml_backend_event_t>(e->context) : e;
    if (main->iface.event_wait != nullptr) {
        main->iface.event_wait(main, x);
    } else {
        wsp_ggml_backend_event_synchronize(x);
    }
}

// WSP_GGML_ALL_GPU_TP=0 turns tensor parallelism off (the row split for every graph)
bool tp_enabled() {
    static const bool on = [] {
        const char * env = std::getenv("WSP_GGML_ALL_GPU_TP");
        return env == nullptr || std::strcmp(env, "0") != 0;
    }();
    return on;
}

// the plan of a graph not seen before: tensor-parallel where it fits (Note [tensor parallelism]),
// else the row split's (Note [row split plan]), the reason logged once
tp::Plan plan_of(BackendCtx & c, wsp_ggml_cgraph * g) {
    Device &  d = *c.device;
    tp::Graph tg{ g, d.tensor_split, nullptr, nullptr, nullptr };
    tg.spreadable     = [&d](const wsp_ggml_tensor * w) { return spreadable(d, w); };
    tg.sharded        = [&d](const wsp_ggml_tensor * r) { return d.cache_layout(r); };
    tg.keepable       = [&d](const wsp_ggml_tensor * r) { return r->buffer != nullptr && d.owns(r->buffer); };
    const bool shared = std::all_of(d.tensor_split.begin(), d.tensor_split.end(), [](float p) { return p > 0.0f; });
    if (!shared) {
        d.say_once("a member without a share of the split: mat-muls split by rows, gathered after each");
    }
    if (tp_enabled() && shared) {
        tp::Plan plan = tp::make_plan(tg, &c.units[tp::structure_of(g)]);
        if (plan.ok()) {
            return plan;
        }
        if (!plan.why_not.empty()) {
            d.say_once("a graph does not fit tensor parallelism (" + plan.why_not +
                       "): its mat-muls split by rows, gathered after each");
        }
    }
    return tp::row_split_plan(tg);
}

// the row split reads and writes the main member's copies: the sharded caches g touches are
// made whole there first (after the members' queued work)
void unshard_for_row_split(wsp_ggml_backend_t b, wsp_ggml_cgraph * g) {
    Device & d      = *ctx_of(b).device;
    bool     synced = false;
    for (int i = 0; i < g->n_nodes; ++i) {
        for (int j = -1; j < WSP_GGML_MAX_SRC; ++j) {
            const wsp_ggml_tensor * t = j < 0 ? g->nodes[i] : g->nodes[i]->src[j];
            if (t != nullptr && d.cache_layout(storage_of(t)) != nullptr) {
                if (!synced) {
                    b_synchronize(b);
                    synced = true;
                }
                d.unshard(storage_of(t), true);
            }
        }
    }
}

// the graph over every member by its plan; a graph seen before runs what was built for it
// (Note [kept member graphs] in runner.h)
wsp_ggml_status b_graph_compute(wsp_ggml_backend_t b, wsp_ggml_cgraph * g) {
    BackendCtx & c = ctx_of(b);
    Device &     d = *c.device;
    MemberWork   work(d);
    ++d.counters.graph_computes;
    tp::GraphKey        key   = tp::key_of(g, d.tensor_split);
    tp::Runner::Build * built = c.runner->find(key);
    if (built != nullptr && !c.runner->follow(*built, g)) { // its cache views fall elsewhere now
        c.runner->drop(built);
        built = nullptr;
    }
    wsp_ggml_status status = WSP_GGML_STATUS_SUCCESS;
    tp::GraphKey    alike;
    if (built == nullptr) { // Note [grown shapes]: a build of a graph alike but for its shapes, reshaped
        alike = tp::alike_key_of(g, d.tensor_split);
        built = c.runner->reshaped(alike, key, g);
        if (built != nullptr && !c.runner->follow(*built, g)) {
            c.runner->drop(built);
            built = nullptr;
        }
    }
    if (built == nullptr) {
        const tp::Plan plan = plan_of(c, g);
        ++d.counters.plans_built; // its member graphs count as the runner builds them
        if (plan.row_split) {
            unshard_for_row_split(b, g); // before the build: the pieces that go drop kept builds
        }
        built = c.runner->add(std::move(key), std::move(alike), g, plan, &status);
        if (built == nullptr) {
            return status; // logged
        }
    } else if (tp::Runner::row_split(*built)) {
        unshard_for_row_split(b, g); // a later graph may have sharded them again
    }
    tp::Moved moved;
    status = c.runner->run(*built, moved);
    c.runner->wrote(*built, g, status == WSP_GGML_STATUS_SUCCESS); // Note [member replicas]
    const wsp_ggml_backend_all_gpu_traffic mine{ moved.all_reduce, moved.n_all_reduces, moved.sent, moved.gathered,
                                                 tp::Runner::row_split(*built) ? size_t(0) : size_t(1) };
    wsp_ggml_backend_all_gpu_graph_cb      cb = nullptr;
    void *                                 ud = nullptr;
    {
        std::lock_guard<std::recursive_mutex> lock(d.mutex);
        d.traffic.all_reduce += mine.all_reduce;
        d.traffic.n_all_reduces += mine.n_all_reduces;
        d.traffic.sent += mine.sent;
        d.traffic.gathered += mine.gathered;
        d.traffic.n_graphs += mine.n_graphs;
        cb = d.graph_cb;
        ud = d.graph_cb_ud;
    }
    if (cb != nullptr) { // outside the lock: it may ask the device anything
        cb(g, &mine, ud);
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
    /* .event_record       = */ b_event_record,
    /* .event_wait         = */ b_event_wait,
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
    c->runner = std::make_unique<tp::Runner>(d, c->members);
    return new wsp_ggml_backend{ &all_gpu_guid, backend_iface, &d.dev, c.release() };
}

} // namespace wsp::allgpu
