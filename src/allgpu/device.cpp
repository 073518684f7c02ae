// The all-GPU reg and device (Note [all-GPU device]): its interface over the members, its shares
// (Note [new shares]), its public functions, and the hook that registers it over every reg with
// two or more GPUs (Note [reg hooks] in src/backend/reg_hooks.h).

#include "all_gpu.h"

#include "../backend/reg_hooks.h"
#include "../split/partition.h"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace wsp::allgpu {

namespace {

Device & dev_ctx(wsp_ggml_backend_dev_t dev) {
    return *static_cast<Device *>(dev->context);
}

const char * dev_name(wsp_ggml_backend_dev_t dev) {
    return dev_ctx(dev).name.c_str();
}

const char * dev_description(wsp_ggml_backend_dev_t dev) {
    Device &                              d = dev_ctx(dev);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    return d.descriptions.back().c_str();
}

void dev_memory(wsp_ggml_backend_dev_t dev, size_t * free_mem, size_t * total) {
    *free_mem = *total = 0;
    for (wsp_ggml_backend_dev_t m : dev_ctx(dev).members) {
        size_t f = 0, t = 0;
        wsp_ggml_backend_dev_memory(m, &f, &t);
        *free_mem += f;
        *total += t;
    }
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_props(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_dev_props * props) {
    Device & d         = dev_ctx(dev);
    props->name        = d.name.c_str();
    props->description = dev_description(dev);
    props->type        = WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->caps.async                = true;
    props->caps.host_buffer          = wsp_ggml_backend_dev_host_buffer_type(d.main()) != nullptr;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events               = d.main()->iface.event_new != nullptr; // Note [all-GPU events]
}

// Note [all-GPU events]: the device's event wraps one of its main member's, recorded on the main
// member's stream. A run of the device's backend starts with every member waiting for the main
// member and ends with the main member waiting for every member (Note [joined members] in
// runner.h), so an event recorded on the main member after a run stands for all of it, and work
// made to wait for one on the main member comes before every member's next run. A scheduler over
// the device then orders its copies by events, as with one device, not by host waits.
wsp_ggml_backend_event_t dev_event_new(wsp_ggml_backend_dev_t dev) {
    wsp_ggml_backend_dev_t main = dev_ctx(dev).main();
    if (main->iface.event_new == nullptr) {
        WSP_LOG_ERROR("%s: %s has no events\n", dev_name(dev), wsp_ggml_backend_dev_name(main));
        return nullptr;
    }
    wsp_ggml_backend_event_t inner = wsp_ggml_backend_event_new(main);
    return inner != nullptr ? new wsp_ggml_backend_event{ dev, inner } : nullptr;
}

void dev_event_free(wsp_ggml_backend_dev_t, wsp_ggml_backend_event_t e) {
    wsp_ggml_backend_event_free(static_cast<wsp_ggml_backend_event_t>(e->context));
    delete e;
}

void dev_event_sync(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_event_t e) {
    MemberWork work(dev_ctx(dev)); // the main member's host wait is the device's
    wsp_ggml_backend_event_synchronize(static_cast<wsp_ggml_backend_event_t>(e->context));
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t dev, const char *) {
    return backend_init(dev_ctx(dev));
}

wsp_ggml_backend_buffer_type_t dev_buft(wsp_ggml_backend_dev_t dev) {
    return &dev_ctx(dev).buft;
}

wsp_ggml_backend_buffer_type_t dev_host_buft(wsp_ggml_backend_dev_t dev) {
    return wsp_ggml_backend_dev_host_buffer_type(dev_ctx(dev).main());
}

bool dev_supports_op(wsp_ggml_backend_dev_t dev, const wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_supports_op(dev_ctx(dev).main(), op);
}

bool dev_supports_buft(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_buffer_type_t buft) {
    return buft == &dev_ctx(dev).buft || wsp_ggml_backend_dev_supports_buft(dev_ctx(dev).main(), buft);
}

bool dev_offload_op(wsp_ggml_backend_dev_t dev, const wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_offload_op(dev_ctx(dev).main(), op);
}

const wsp_ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buft,
    /* .get_host_buffer_type = */ dev_host_buft,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ dev_event_new,
    /* .event_free           = */ dev_event_free,
    /* .event_synchronize    = */ dev_event_sync,
};

//
// reg: one device
//

const char * reg_name(wsp_ggml_backend_reg_t reg) {
    return static_cast<Device *>(reg->context)->name.c_str();
}

size_t reg_count(wsp_ggml_backend_reg_t) {
    return 1;
}

wsp_ggml_backend_dev_t reg_get(wsp_ggml_backend_reg_t reg, size_t i) {
    return i == 0 ? &static_cast<Device *>(reg->context)->dev : nullptr;
}

// Note [all-GPU counters]
void read_counters(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_counters * out) {
    *out = dev_ctx(dev).counters.read();
}

void * reg_proc(wsp_ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, COUNTERS_PROC) == 0) {
        GetCountersFn fn = &read_counters; // the signature the public function calls
        return reinterpret_cast<void *>(fn);
    }
    return nullptr;
}

// WSP_GGML_TENSOR_SPLIT=3,1: shares per member (partition::parse); otherwise, or where it cannot
// be read (one warning), partition::default_shares: by free memory
std::vector<float> split_proportions(const std::vector<wsp_ggml_backend_dev_t> & members) {
    if (const char * env = std::getenv("WSP_GGML_TENSOR_SPLIT")) {
        std::vector<float> p;
        std::string        why;
        if (partition::parse(env, members.size(), &p, &why)) {
            return p;
        }
        WSP_LOG_WARN("WSP_GGML_TENSOR_SPLIT: %s; splitting by free memory instead\n", why.c_str());
    }
    return partition::default_shares(members);
}

// "all of SIM0 (75%), SIM1 (25%) of the mat-mul weights' rows"
std::string description_of(const Device & d) {
    double sum = 0.0;
    for (float p : d.tensor_split) {
        sum += p;
    }
    std::string desc = "all of";
    for (size_t i = 0; i < d.members.size(); ++i) {
        char part[96];
        std::snprintf(part, sizeof(part), "%s %s (%.0f%%)", i == 0 ? "" : ",", wsp_ggml_backend_dev_name(d.members[i]),
                      100.0 * d.tensor_split[i] / sum);
        desc += part;
    }
    return desc + " of the mat-mul weights' rows";
}
} // namespace

Device & device_of(wsp_ggml_backend_dev_t dev) {
    return dev_ctx(dev);
}

// Note [new shares]: the shares decide which rows each member's weight piece and cache part
// holds, and those are made once and then kept: new shares that kept them would
// compute with the old layout, and ones laid out anew beside them would hold the memory twice.
// So they all go here and are made again, by the new shares, when the next graph needs them:
// a sharded cache is first made whole in the main member's copy (its latest bytes are in the
// parts), as unshard(r, true) does. Every piece or cache that goes bumps the generation, which
// drops the runner's kept builds (Note [kept member graphs]).
// The members' queued work must be done (the caller synchronized the device's backends), and no
// graph may be computing on them: the backend reads tensor_split without the mutex.
void Device::set_shares(const std::vector<float> & shares) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (shares == tensor_split) {
        return;
    }
    std::vector<const wsp_ggml_tensor *> roots;
    for (const auto & [r, c] : caches) {
        roots.push_back(r);
    }
    for (const wsp_ggml_tensor * r : roots) {
        unshard(r, true);
    }
    for (auto & [key, p] : pieces) {
        free_piece(p);
    }
    pieces.clear();
    tensor_split = shares;
    descriptions.push_back(description_of(*this));
    ++generation;
}

void Device::say_once(const std::string & msg) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (said.insert(msg).second) {
        WSP_LOG_INFO("%s: %s\n", name.c_str(), msg.c_str());
    }
}

wsp_ggml_backend_reg_t make_reg(wsp_ggml_backend_reg_t reg) {
    if (reg == nullptr || is_all_gpu_reg(reg)) {
        return nullptr;
    }
    std::vector<wsp_ggml_backend_dev_t> gpus;
    for (size_t i = 0; i < wsp_ggml_backend_reg_dev_count(reg); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, i);
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            gpus.push_back(dev);
        }
    }
    if (gpus.size() < 2 || gpus.size() != wsp_ggml_backend_reg_dev_count(reg)) {
        return nullptr; // the split buffer type spans every device of a reg: a GPU-only reg is needed
    }
    // lives until exit, like every device, and stays reachable (not a leak to LeakSanitizer)
    static auto & all_devices = *new std::vector<Device *>;
    auto *        d           = new Device;
    all_devices.push_back(d);
    d->member_reg    = reg;
    d->members       = gpus;
    d->tensor_split  = split_proportions(gpus);
    d->default_split = d->tensor_split;
    d->name          = std::string(wsp_ggml_backend_reg_name(reg)) + "_All";
    d->descriptions.push_back(description_of(*d));
    d->reg  = { WSP_GGML_BACKEND_API_VERSION, { reg_name, reg_count, reg_get, reg_proc }, d };
    d->dev  = { device_iface, &d->reg, d };
    d->buft = { watched_buffer_type_iface(), &d->dev, d };
    return &d->reg;
}

bool is_all_gpu_reg(wsp_ggml_backend_reg_t reg) {
    return reg != nullptr && reg->iface.get_name == reg_name;
}

wsp_ggml_backend_reg_t member_reg(wsp_ggml_backend_reg_t all_reg) {
    return static_cast<Device *>(all_reg->context)->member_reg;
}

namespace {

wsp_ggml_backend_reg_t made_over(wsp_ggml_backend_reg_t r) {
    return is_all_gpu_reg(r) ? member_reg(r) : nullptr;
}

// WSP_GGML_ALL_GPUS=1: the all-GPU device is listed before every GPU device
bool listed_first() {
    const char * env = std::getenv("WSP_GGML_ALL_GPUS");
    return env != nullptr && std::atoi(env) != 0;
}

// Note [reg hooks]: every reg with two or more GPU devices gets an all-GPU device over them
const bool hooked = (backend::add_reg_hook({ make_reg, made_over, listed_first }), true);

} // namespace

} // namespace wsp::allgpu

using wsp::allgpu::Device;

extern "C" {

bool wsp_ggml_backend_dev_is_all_gpu(wsp_ggml_backend_dev_t dev) {
    return dev != nullptr && wsp::allgpu::is_all_gpu_reg(dev->reg);
}

size_t wsp_ggml_backend_all_gpu_member_count(wsp_ggml_backend_dev_t dev) {
    return wsp_ggml_backend_dev_is_all_gpu(dev) ? wsp::allgpu::device_of(dev).members.size() : 0;
}

wsp_ggml_backend_dev_t wsp_ggml_backend_all_gpu_member(wsp_ggml_backend_dev_t dev, size_t i) {
    if (i >= wsp_ggml_backend_all_gpu_member_count(dev)) {
        WSP_LOG_ERROR("%s: member %zu of %s does not exist\n", __func__, i,
                      dev ? wsp_ggml_backend_dev_name(dev) : "NULL");
        return nullptr;
    }
    return wsp::allgpu::device_of(dev).members[i];
}

wsp_ggml_backend_all_gpu_traffic wsp_ggml_backend_all_gpu_get_traffic(wsp_ggml_backend_dev_t dev) {
    if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
        return {};
    }
    Device &                              d = wsp::allgpu::device_of(dev);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    return d.traffic;
}

bool wsp_ggml_backend_all_gpu_set_graph_callback(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_all_gpu_graph_cb cb,
                                                 void * user_data) {
    if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
        WSP_LOG_ERROR("%s: %s is not an all-GPU device; no callback was set\n", __func__,
                      dev ? wsp_ggml_backend_dev_name(dev) : "NULL");
        return false;
    }
    Device &                              d = wsp::allgpu::device_of(dev);
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    d.graph_cb    = cb;
    d.graph_cb_ud = cb != nullptr ? user_data : nullptr;
    return true;
}

bool wsp_ggml_backend_all_gpu_set_tensor_split(wsp_ggml_backend_dev_t dev, const float * shares) {
    if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
        WSP_LOG_ERROR("%s: %s is not an all-GPU device; no shares were set\n", __func__,
                      dev ? wsp_ggml_backend_dev_name(dev) : "NULL");
        return false;
    }
    Device &           d = wsp::allgpu::device_of(dev);
    std::vector<float> s = d.default_split;
    if (shares != nullptr) {
        std::string why;
        if (!wsp::partition::check(shares, d.members.size(), &why)) {
            WSP_LOG_ERROR("%s: %s: %s; the shares stay as they were\n", __func__, d.name.c_str(), why.c_str());
            return false;
        }
        s.assign(shares, shares + d.members.size());
    }
    wsp::allgpu::MemberWork work(d); // making caches whole reads the members
    d.set_shares(s);
    return true;
}

} // extern "C"
