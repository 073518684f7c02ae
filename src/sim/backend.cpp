// Sim backends: one stream each. Async set/get/copy and graph compute are stream commands; the
// graph runs node by node with the CPU kernels after checking that every tensor the kernel
// reads or writes lives in this device's memory (Note [foreign memory check]).

#include "sim.h"

#include "../core/impl.h"
#include "../cpu/compute.h"

#include <cstring>

namespace wsp::sim {

namespace {

wsp_ggml_guid sim_guid = { 0x5e, 0x1d, 0x0a, 0x3c, 0x88, 0x41, 0x4f, 0x6b,
                           0xa2, 0x17, 0x90, 0xc4, 0x2d, 0x73, 0xe6, 0x0b };

Backend & ctx_of(wsp_ggml_backend_t b) {
    return *static_cast<Backend *>(b->context);
}

const char * backend_name(wsp_ggml_backend_t b) {
    return ctx_of(b).device->name.c_str();
}

void backend_free(wsp_ggml_backend_t b) {
    delete &ctx_of(b); // the stream drains its queue first
    delete b;
}

bool take_copy_fault(Device & dev, std::string & err, const char * what) {
    if (Device::take(dev.fail_copy)) {
        err = std::string("injected copy fault: ") + what + " not performed";
        return false;
    }
    return true;
}

void set_async(wsp_ggml_backend_t b, wsp_ggml_tensor * t, const void * data, size_t off, size_t size) {
    Device & dev = *ctx_of(b).device;
    char *   dst = static_cast<char *>(t->data) + off;
    ctx_of(b).stream->enqueue([&dev, dst, data, size](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_set_async")) {
            return false;
        }
        count_copy(size);
        std::memcpy(dst, data, size);
        return true;
    });
}

void get_async(wsp_ggml_backend_t b, const wsp_ggml_tensor * t, void * data, size_t off, size_t size) {
    Device &     dev = *ctx_of(b).device;
    const char * src = static_cast<const char *>(t->data) + off;
    ctx_of(b).stream->enqueue([&dev, src, data, size](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_get_async")) {
            return false;
        }
        count_copy(size);
        std::memcpy(data, src, size);
        return true;
    });
}

// device-to-device: the copy runs on the source stream after its queued work, and the
// destination stream waits for it; anything involving host memory takes the synchronous path
bool cpy_async(wsp_ggml_backend_t src_b, wsp_ggml_backend_t dst_b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    if (!wsp_ggml_backend_is_sim(src_b) || !wsp_ggml_backend_is_sim(dst_b) || owner_of(src->data) == nullptr ||
        owner_of(dst->data) == nullptr) {
        return false;
    }
    Device &     dev  = *ctx_of(src_b).device;
    const void * from = src->data;
    void *       to   = dst->data;
    const size_t n    = wsp_ggml_nbytes(src);
    ctx_of(src_b).stream->enqueue([&dev, from, to, n](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_copy_async")) {
            return false;
        }
        count_copy(n);
        std::memcpy(to, from, n);
        return true;
    });
    if (src_b != dst_b) {
        Event done;
        done.record(*ctx_of(src_b).stream);
        done.wait(*ctx_of(dst_b).stream);
    }
    return true;
}

wsp_ggml_status backend_sync(wsp_ggml_backend_t b) {
    const wsp_ggml_status status = ctx_of(b).stream->synchronize();
    if (ctx_of(b).device->sync_copy_failed.exchange(false)) {
        WSP_LOG_ERROR("%s: a synchronous copy to or from this device failed\n", backend_name(b));
        return WSP_GGML_STATUS_FAILED;
    }
    return status;
}

bool is_noop(const wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_NONE || t->op == WSP_GGML_OP_VIEW || t->op == WSP_GGML_OP_RESHAPE ||
           t->op == WSP_GGML_OP_PERMUTE || t->op == WSP_GGML_OP_TRANSPOSE;
}

// Note [foreign memory check]: a device kernel may only touch its own memory. Every tensor a
// node reads (sources) or writes (the node) must lie in this device's arena; anything else
// (another device, host memory) means the scheduler or a backend forgot a copy, so the kernel
// fails, the access is logged naming both places, and a counter lets tests assert silence.
bool check_memory(Device & dev, const wsp_ggml_tensor * node) {
    bool ok = true;
    if (node->data != nullptr && !dev.arena->contains(node->data)) {
        report_foreign_access(dev, wsp_ggml_op_desc(node), node, "writes");
        ok = false;
    }
    for (const wsp_ggml_tensor * s : node->src) {
        if (s != nullptr && s->data != nullptr && !wsp_ggml_is_empty(s) && !dev.arena->contains(s->data)) {
            report_foreign_access(dev, wsp_ggml_op_desc(node), s, "reads");
            ok = false;
        }
    }
    return ok;
}

bool run_graph(Backend & be, wsp_ggml_cgraph * graph, std::string & err) {
    Device & dev = *be.device;
    if (Device::take(dev.fail_kernel)) {
        err = "injected kernel fault";
        return false;
    }
    const size_t need = wsp::cpu::graph_work_size(graph, 1);
    if (be.work.size() < need) {
        be.work.resize(need);
    }
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * node = graph->nodes[i];
        if (is_noop(node) || wsp_ggml_is_empty(node)) {
            continue;
        }
        if (!check_memory(dev, node)) {
            err = std::string("kernel ") + wsp_ggml_op_desc(node) + " touched memory outside " + dev.name;
            return false;
        }
        wsp_ggml_cgraph one = wsp::graph_view(graph, i, i + 1);
        if (wsp::cpu::graph_compute(&one, nullptr, 1, be.work.data(), be.work.size(), nullptr, nullptr) !=
            WSP_GGML_STATUS_SUCCESS) {
            err = std::string("kernel ") + wsp_ggml_op_desc(node) + " failed on " + describe(node);
            return false;
        }
    }
    return true;
}

wsp_ggml_status graph_compute(wsp_ggml_backend_t b, wsp_ggml_cgraph * graph) {
    Backend * be = &ctx_of(b);
    // the graph (a view into the caller's graph arrays) must stay alive until the stream runs it
    ctx_of(b).stream->enqueue([be, g = *graph](std::string & err) mutable { return run_graph(*be, &g, err); });
    return WSP_GGML_STATUS_SUCCESS;
}

void event_record(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    static_cast<EventCtx *>(e->context)->event.record(*ctx_of(b).stream);
}

void event_wait(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    if (device_of(e->device) == nullptr) {
        // an event of another kind of device: wait for it on the host, in stream order
        wsp_ggml_backend_event_synchronize(e);
        return;
    }
    static_cast<EventCtx *>(e->context)->event.wait(*ctx_of(b).stream);
}

const wsp_ggml_backend_i backend_iface = {
    /* .get_name           = */ backend_name,
    /* .free               = */ backend_free,
    /* .set_tensor_async   = */ set_async,
    /* .get_tensor_async   = */ get_async,
    /* .cpy_tensor_async   = */ cpy_async,
    /* .synchronize        = */ backend_sync,
    /* .graph_plan_create  = */ nullptr,
    /* .graph_plan_free    = */ nullptr,
    /* .graph_plan_update  = */ nullptr,
    /* .graph_plan_compute = */ nullptr,
    /* .graph_compute      = */ graph_compute,
    /* .event_record       = */ event_record,
    /* .event_wait         = */ event_wait,
};

} // namespace

wsp_ggml_backend_t backend_init(Device & dev) {
    auto * be = new Backend{ &dev, std::make_unique<Stream>(dev.name, dev.delay_us), {} };
    return new wsp_ggml_backend{ &sim_guid, backend_iface, &dev.dev, be };
}

} // namespace wsp::sim

extern "C" bool wsp_ggml_backend_is_sim(wsp_ggml_backend_t backend) {
    return backend != nullptr && wsp_ggml_guid_matches(backend->guid, &wsp::sim::sim_guid);
}
