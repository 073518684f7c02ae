// Sim backends: one stream each. Async set/get/copy and graph compute are stream commands that
// bind everything they use when they are queued (Note [binding at queue time]); when one runs,
// the happens-before checker sees its accesses first, then the bytes move or the nodes compute
// with the CPU kernels, after a check that every tensor a kernel reads or writes lives in this
// device's memory (Note [foreign memory check]).

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
    // the stream drains its queue first: a host wait (Note [sim counters])
    ++ctx_of(b).device->counters.host_syncs;
    delete &ctx_of(b);
    delete b;
}

bool take_copy_fault(Device & dev, std::string & err, const char * what) {
    if (Device::take(dev.fail_copy)) {
        err = std::string("injected copy fault: ") + what + " not performed";
        return false;
    }
    return true;
}

race::What what_of(const Stream & stream, const std::string & text) {
    return race::text_label(stream.name() + ": " + text);
}

void set_async(wsp_ggml_backend_t b, wsp_ggml_tensor * t, const void * data, size_t off, size_t size) {
    Device &         dev    = *ctx_of(b).device;
    Stream &         stream = *ctx_of(b).stream;
    char *           dst    = static_cast<char *>(t->data) + off;
    const race::What what   = what_of(stream, "tensor_set_async of " + describe(t));
    stream.enqueue([&dev, &stream, dst, data, size, what](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_set_async")) {
            return false;
        }
        const bool ordered = check_accesses(stream.agent(), {}, bytes(dst, size), what, err);
        count_copy(size);
        std::memcpy(host_view(dst), data, size);
        return ordered;
    });
}

void get_async(wsp_ggml_backend_t b, const wsp_ggml_tensor * t, void * data, size_t off, size_t size) {
    Device &         dev    = *ctx_of(b).device;
    Stream &         stream = *ctx_of(b).stream;
    const char *     src    = static_cast<const char *>(t->data) + off;
    const race::What what   = what_of(stream, "tensor_get_async of " + describe(t));
    stream.enqueue([&dev, &stream, src, data, size, what](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_get_async")) {
            return false;
        }
        const bool ordered = check_accesses(stream.agent(), bytes(src, size), {}, what, err);
        count_copy(size);
        std::memcpy(data, host_view(src), size);
        return ordered;
    });
}

// the rows of a tensor whose elements lie back to back within each row: address of row r
struct Rows {
    const char * data;
    int64_t      ne1, ne2;
    size_t       nb1, nb2, nb3;
    const char * row(int64_t r) const {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        return data + (size_t) i1 * nb1 + (size_t) i2 * nb2 + (size_t) i3 * nb3;
    }
};

Rows rows_of(const wsp_ggml_tensor * t) {
    return { static_cast<const char *>(t->data), t->ne[1], t->ne[2], t->nb[1], t->nb[2], t->nb[3] };
}

// device to device, on the source stream after its queued work; the destination stream waits
// for it. Layouts may differ (a slice landing in the rows of a larger tensor) where each row's
// elements lie back to back on both sides. Anything involving host memory takes the
// synchronous path.
bool cpy_async(wsp_ggml_backend_t src_b, wsp_ggml_backend_t dst_b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    if (!wsp_ggml_backend_is_sim(src_b) || !wsp_ggml_backend_is_sim(dst_b) || owner_of(src->data) == nullptr ||
        owner_of(dst->data) == nullptr || src->type != dst->type || !wsp_ggml_are_same_shape(src, dst)) {
        return false;
    }
    const bool contiguous = wsp_ggml_is_contiguous(src) && wsp_ggml_is_contiguous(dst);
    const bool row_wise   = src->nb[0] == wsp_ggml_type_size(src->type) && dst->nb[0] == wsp_ggml_type_size(dst->type);
    if (!contiguous && !row_wise) {
        return false;
    }
    Device &                 dev    = *ctx_of(src_b).device;
    Stream &                 stream = *ctx_of(src_b).stream;
    std::vector<race::Range> reads, writes;
    race::tensor_ranges(src, reads);
    race::tensor_ranges(dst, writes);
    const race::What what  = what_of(stream, "copy " + describe(src) + " -> " + describe(dst));
    const size_t     total = wsp_ggml_nbytes(src);
    const size_t     row   = wsp_ggml_row_size(src->type, src->ne[0]);
    const int64_t    nrows = contiguous ? 1 : wsp_ggml_nrows(src);
    const Rows       from = rows_of(src), to = rows_of(dst);
    stream.enqueue([&dev, &stream, reads, writes, what, contiguous, total, row, nrows, from, to](std::string & err) {
        if (!take_copy_fault(dev, err, "tensor_copy_async")) {
            return false;
        }
        const bool ordered = check_accesses(stream.agent(), reads, writes, what, err);
        if (contiguous) {
            count_copy(total);
            std::memcpy(host_view(to.data), host_view(from.data), total);
            return ordered;
        }
        count_copy(row * (size_t) nrows);
        for (int64_t r = 0; r < nrows; ++r) {
            std::memcpy(host_view(to.row(r)), host_view(from.row(r)), row);
        }
        return ordered;
    });
    if (src_b != dst_b) {
        Event done;
        done.record(stream);
        done.wait(*ctx_of(dst_b).stream);
    }
    return true;
}

wsp_ggml_status backend_sync(wsp_ggml_backend_t b) {
    ++ctx_of(b).device->counters.host_syncs;
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

// Note [binding at queue time]: a CUDA launch copies its arguments when it is queued; the
// caller may then change or free its tensor structs and graph (the scheduler points sources at
// other copies for the next evaluation, a reset drops its internal nodes). A sim kernel does the
// same: graph_compute copies every node it will run and their sources, with the data pointers
// already translated to the device's bytes, and works on the copies only.
struct BoundGraph;

// the label of a bound kernel: formatted only if a race names it
class KernelLabel : public race::Label {
public:
    KernelLabel(const BoundGraph * g, const wsp_ggml_tensor * node) : g_(g), node_(node) {}
    std::string text() const override;

private:
    const BoundGraph *      g_;
    const wsp_ggml_tensor * node_; // its bound copy
};

struct BoundGraph {
    std::string                    stream;  // its name, for labels that outlive it
    std::vector<wsp_ggml_tensor>   tensors; // copies; reserved up front, so pointers stay put
    std::vector<wsp_ggml_tensor *> nodes;   // into tensors
    std::vector<race::Range>       ranges;  // every node's reads then writes, device addresses
    std::vector<uint32_t>          first;   // node i: reads [first[2i], first[2i+1]), writes to first[2i+2]
    std::vector<KernelLabel>       labels;  // per node
    std::string                    foreign; // a memory error found when binding
};

std::string KernelLabel::text() const {
    return g_->stream + ": kernel " + wsp_ggml_op_desc(node_) + " " + describe(node_);
}

// Note [foreign memory check]: a device kernel may only touch its own memory. Every tensor a
// node reads (sources) or writes (the node) must lie in this device's arena; anything else
// (another device, host memory) means the scheduler or a backend forgot a copy, so the kernel
// fails, the access is logged naming both places, and a counter lets tests assert silence.
bool own_memory(Device & dev, const wsp_ggml_tensor * node, const wsp_ggml_tensor * t, const char * role) {
    if (t->data == nullptr || wsp_ggml_is_empty(t) || dev.arena->contains(t->data)) {
        return true;
    }
    report_foreign_access(dev, wsp_ggml_op_desc(node), t, role);
    return false;
}

std::shared_ptr<BoundGraph> bind(Device & dev, const Stream & stream, const wsp_ggml_cgraph * graph) {
    auto bg    = std::make_shared<BoundGraph>();
    bg->stream = stream.name();
    bg->tensors.reserve((size_t) graph->n_nodes * (1 + WSP_GGML_MAX_SRC));
    bg->first.push_back(0);
    // each tensor copied once: the slot of its pointer in a hash set holds the copy's index
    const size_t                   capacity = HashSet::capacity_for((size_t) graph->n_nodes * (1 + WSP_GGML_MAX_SRC));
    std::vector<wsp_ggml_tensor *> keys(capacity);
    std::vector<uint32_t>          used(HashSet::bitset_words(capacity), 0), copy_index(capacity);
    HashSet                        seen{ capacity, used.data(), keys.data() };
    auto                           copy = [&](const wsp_ggml_tensor * t) {
        bool         inserted = false;
        const size_t slot     = seen.insert(const_cast<wsp_ggml_tensor *>(t), inserted);
        if (!inserted) {
            return &bg->tensors[copy_index[slot]];
        }
        copy_index[slot] = (uint32_t) bg->tensors.size();
        bg->tensors.push_back(*t);
        wsp_ggml_tensor * c = &bg->tensors.back();
        if (c->data != nullptr && dev.arena->contains(c->data)) {
            c->data = dev.arena->host(c->data);
        }
        return c;
    };
    for (int i = 0; i < graph->n_nodes; ++i) {
        const wsp_ggml_tensor * node = graph->nodes[i];
        if (is_noop(node) || wsp_ggml_is_empty(node)) {
            continue;
        }
        bool ok = own_memory(dev, node, node, "writes");
        for (const wsp_ggml_tensor * s : node->src) {
            ok = (s == nullptr || own_memory(dev, node, s, "reads")) && ok;
        }
        if (!ok && bg->foreign.empty()) {
            bg->foreign = std::string("kernel ") + wsp_ggml_op_desc(node) + " touched memory outside " + dev.name;
        }
        for (const wsp_ggml_tensor * s : node->src) {
            if (s != nullptr) {
                race::tensor_ranges(s, bg->ranges);
            }
        }
        bg->first.push_back((uint32_t) bg->ranges.size());
        race::tensor_ranges(node, bg->ranges);
        bg->first.push_back((uint32_t) bg->ranges.size());
        wsp_ggml_tensor * c = copy(node);
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (node->src[j] != nullptr) {
                c->src[j] = copy(node->src[j]);
            }
        }
        bg->nodes.push_back(c);
    }
    bg->labels.reserve(bg->nodes.size());
    for (const wsp_ggml_tensor * c : bg->nodes) {
        bg->labels.emplace_back(bg.get(), c);
    }
    return bg;
}

// WSP_GGML_SIM_FAULT_CORRUPT: the first value of the graph's last F32 result becomes -2x - 1 (x
// itself only near -1/3; NaN stays NaN), as a device with a silent fault would leave it
void corrupt_last_result(BoundGraph & bg) {
    for (auto it = bg.nodes.rbegin(); it != bg.nodes.rend(); ++it) {
        wsp_ggml_tensor * node = *it;
        if (node->type == WSP_GGML_TYPE_F32 && wsp_ggml_nelements(node) > 0 && node->data != nullptr) {
            float * x = static_cast<float *>(node->data);
            x[0]      = -2.0f * x[0] - 1.0f;
            return;
        }
    }
}

bool run_graph(Backend & be, const std::shared_ptr<BoundGraph> & bgp, std::string & err) {
    BoundGraph & bg  = *bgp;
    Device &     dev = *be.device;
    if (Device::take(dev.fail_kernel)) {
        err = "injected kernel fault";
        return false;
    }
    if (!bg.foreign.empty()) {
        err = bg.foreign;
        return false;
    }
    wsp_ggml_cgraph all{};
    all.size          = (int) bg.nodes.size();
    all.n_nodes       = (int) bg.nodes.size();
    all.nodes         = bg.nodes.data();
    const size_t need = wsp::cpu::graph_work_size(&all, 1);
    if (be.work.size() < need) {
        be.work.resize(need);
    }
    const wsp_ggml_backend_sim_kernel_hook hook      = dev.hook.load();
    void * const                           hook_data = dev.hook_data.load();
    bool                                   ordered   = true;
    for (size_t i = 0; i < bg.nodes.size(); ++i) {
        wsp_ggml_tensor * node = bg.nodes[i];
        // a race fails the command once the kernels have run: what they computed stays visible
        std::string         race;
        const race::Range * r = bg.ranges.data();
        const race::What    what(bgp, &bg.labels[i]); // shares the bound graph's life
        if (!check_accesses(be.stream->agent(), r + bg.first[2 * i], bg.first[2 * i + 1] - bg.first[2 * i],
                            r + bg.first[2 * i + 1], bg.first[2 * i + 2] - bg.first[2 * i + 1], what, race) &&
            ordered) {
            ordered = false;
            err     = race;
        }
        if (hook != nullptr) {
            hook(node, hook_data);
        }
        wsp_ggml_cgraph one = wsp::graph_view(&all, (int) i, (int) i + 1);
        if (wsp::cpu::graph_compute(&one, nullptr, 1, be.work.data(), be.work.size(), nullptr, nullptr) !=
            WSP_GGML_STATUS_SUCCESS) {
            err = std::string("kernel ") + wsp_ggml_op_desc(node) + " failed on " + describe(node);
            return false;
        }
    }
    if (Device::take(dev.corrupt_next) || dev.corrupt_always) {
        corrupt_last_result(bg);
    }
    return ordered;
}

wsp_ggml_status graph_compute(wsp_ggml_backend_t b, wsp_ggml_cgraph * graph) {
    Backend *                   be = &ctx_of(b);
    std::shared_ptr<BoundGraph> bg = bind(*be->device, *be->stream, graph);
    // counted when queued, as a launch is (Note [sim counters]): the bound nodes are the kernels
    ++be->device->counters.graph_computes;
    be->device->counters.kernel_launches += bg->nodes.size();
    be->stream->enqueue([be, bg](std::string & err) { return run_graph(*be, bg, err); });
    return WSP_GGML_STATUS_SUCCESS;
}

void event_record(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    static_cast<EventCtx *>(e->context)->event.record(*ctx_of(b).stream);
}

void event_wait(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    if (device_of(e->device) == nullptr) {
        // an event of another kind of device: wait for it on the host, in stream order (a host wait
        // of this call, counted here: the event's device may count none, Note [sim counters])
        ++ctx_of(b).device->counters.host_syncs;
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
    const int index = dev.n_streams.fetch_add(1);
    auto *    be    = new Backend{
        &dev, {}, std::make_unique<Stream>(dev.name + " stream " + std::to_string(index), index, dev.delays)
    };
    return new wsp_ggml_backend{ &sim_guid, backend_iface, &dev.dev, be };
}

} // namespace wsp::sim

extern "C" bool wsp_ggml_backend_is_sim(wsp_ggml_backend_t backend) {
    return backend != nullptr && wsp_ggml_guid_matches(backend->guid, &wsp::sim::sim_guid);
}
