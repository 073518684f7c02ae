// Sim devices: buffer type and buffers over each device's arena, the device and reg objects,
// fault and op switches, and registration (explicit or from WSP_GGML_SIM_DEVICES).

#include "sim.h"

#include "../core/impl.h"
#include "../cpu/kernel.h"
#include "../split/split_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace wsp::sim {

namespace {

constexpr size_t ALIGNMENT = 64;

std::vector<std::unique_ptr<Device>> & devices() {
    static std::vector<std::unique_ptr<Device>> d;
    return d;
}

std::atomic<size_t> g_foreign_accesses{ 0 };
std::atomic<size_t> g_bytes_copied{ 0 };

Device & dev_ctx(wsp_ggml_backend_buffer_type_t buft) {
    return *static_cast<Device *>(buft->context);
}

//
// buffers
//

struct Buffer {
    Device * device;
    void *   base;
};

Device & buf_dev(wsp_ggml_backend_buffer_t b) {
    return *static_cast<Buffer *>(b->context)->device;
}

void buf_free(wsp_ggml_backend_buffer_t b) {
    auto * ctx = static_cast<Buffer *>(b->context);
    race::checker().forget({ (uintptr_t) ctx->base, (uintptr_t) ctx->base + b->size });
    ctx->device->arena->release(ctx->base);
    delete ctx;
}

void * buf_base(wsp_ggml_backend_buffer_t b) {
    return static_cast<Buffer *>(b->context)->base;
}

bool copy_allowed(Device & dev, const char * what) {
    if (Device::take(dev.fail_copy)) {
        WSP_LOG_ERROR("%s: injected copy fault: %s not performed\n", dev.name.c_str(), what);
        dev.sync_copy_failed.store(true);
        return false;
    }
    return true;
}

void buf_memset(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, uint8_t v, size_t off, size_t size) {
    char * dst = static_cast<char *>(t->data) + off;
    if (copy_allowed(buf_dev(b), "memset")) {
        check_host_access({}, bytes(dst, size), "tensor_memset of " + describe(t));
        std::memset(host_view(dst), v, size);
    }
}

void buf_set(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, const void * data, size_t off, size_t size) {
    char * dst = static_cast<char *>(t->data) + off;
    if (copy_allowed(buf_dev(b), "tensor_set")) {
        check_host_access({}, bytes(dst, size), "tensor_set of " + describe(t));
        count_copy(size);
        std::memcpy(host_view(dst), data, size);
    }
}

void buf_get(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * t, void * data, size_t off, size_t size) {
    const char * src = static_cast<const char *>(t->data) + off;
    if (copy_allowed(buf_dev(b), "tensor_get")) {
        check_host_access(bytes(src, size), {}, "tensor_get of " + describe(t));
        count_copy(size);
        std::memcpy(data, host_view(src), size);
    }
}

// dst is here; src may be on any sim device or in host memory. Anything else (a split weight's
// handle, another kind of device) is not memory this device can read: the caller stages it
// through the host.
bool buf_cpy(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    wsp_ggml_backend_buffer_t sbuf = src->view_src ? src->view_src->buffer : src->buffer;
    if (owner_of(src->data) == nullptr && (sbuf == nullptr || !wsp_ggml_backend_buffer_is_host(sbuf))) {
        return false;
    }
    if (copy_allowed(buf_dev(b), "tensor_copy")) {
        const size_t n = wsp_ggml_nbytes(src);
        check_host_access(owner_of(src->data) ? bytes(src->data, n) : std::vector<race::Range>{}, bytes(dst->data, n),
                          "tensor_copy " + describe(src) + " -> " + describe(dst));
        count_copy(n);
        std::memcpy(host_view(dst->data), host_view(src->data), n);
    }
    return true;
}

void buf_clear(wsp_ggml_backend_buffer_t b, uint8_t v) {
    check_host_access({}, bytes(buf_base(b), b->size), "buffer_clear of " + buf_dev(b).name);
    std::memset(host_view(buf_base(b)), v, b->size);
}

const wsp_ggml_backend_buffer_i buffer_iface = {
    /* .free_buffer   = */ buf_free,
    /* .get_base      = */ buf_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ buf_memset,
    /* .set_tensor    = */ buf_set,
    /* .get_tensor    = */ buf_get,
    /* .cpy_tensor    = */ buf_cpy,
    /* .clear         = */ buf_clear,
    /* .reset         = */ nullptr,
};

const char * buft_name(wsp_ggml_backend_buffer_type_t buft) {
    return dev_ctx(buft).name.c_str();
}

wsp_ggml_backend_buffer_t buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    Device & dev = dev_ctx(buft);
    if (Device::take(dev.fail_alloc)) {
        WSP_LOG_ERROR("%s: injected allocation fault: buffer of %zu bytes not allocated\n", dev.name.c_str(), size);
        return nullptr;
    }
    ++dev.counters.device_allocs; // the arena is asked, whether or not it has room (Note [sim counters])
    void * base = dev.arena->allocate(size, ALIGNMENT);
    if (base == nullptr) {
        WSP_LOG_ERROR("%s: out of memory: cannot allocate %zu bytes (%.1f MiB); %zu of %zu bytes in use\n",
                      dev.name.c_str(), size, size / 1048576.0, dev.arena->used(), dev.arena->capacity());
        return nullptr;
    }
    // Note [NaN memory]: new memory, and memory that another buffer had, holds NaN (bytes 0xFF:
    // NaN in f32, f16 and bf16, a NaN scale in every quantized block), so a kernel that reads what
    // nobody wrote produces NaN instead of a plausible zero; its access history starts anew.
    std::memset(dev.arena->host(base), 0xFF, size);
    race::checker().forget({ (uintptr_t) base, (uintptr_t) base + size });
    auto * ctx = new Buffer{ &dev, base };
    return wsp_ggml_backend_buffer_init(buft, buffer_iface, ctx, size);
}

size_t buft_alignment(wsp_ggml_backend_buffer_type_t) {
    return ALIGNMENT;
}

size_t buft_max_size(wsp_ggml_backend_buffer_type_t buft) {
    return dev_ctx(buft).arena->capacity();
}

//
// device
//

Device & ctx_of(wsp_ggml_backend_dev_t d) {
    return *static_cast<Device *>(d->context);
}

const char * dev_name(wsp_ggml_backend_dev_t d) {
    return ctx_of(d).name.c_str();
}

const char * dev_description(wsp_ggml_backend_dev_t d) {
    return ctx_of(d).description.c_str();
}

void dev_memory(wsp_ggml_backend_dev_t d, size_t * free, size_t * total) {
    const Arena & a = *ctx_of(d).arena;
    *total          = a.capacity();
    *free           = a.capacity() - a.used();
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_props(wsp_ggml_backend_dev_t d, wsp_ggml_backend_dev_props * props) {
    props->name        = dev_name(d);
    props->description = dev_description(d);
    props->type        = WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(d, &props->memory_free, &props->memory_total);
    props->caps = { /* async */ true, /* host_buffer */ false, /* buffer_from_host_ptr */ false, /* events */ true };
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t d, const char *) {
    return backend_init(ctx_of(d));
}

wsp_ggml_backend_buffer_type_t dev_buffer_type(wsp_ggml_backend_dev_t d) {
    return &ctx_of(d).buft;
}

// Kernels never read a split tensor: the scheduler gives each device its slice of a split
// mul_mat (src/sched/expand_split.cpp). Anything else on a split tensor is refused, once logged.
bool reads_split_tensor(const Device & dev, const wsp_ggml_tensor * op) {
    for (const wsp_ggml_tensor * src : op->src) {
        if (src != nullptr && wsp::split::is_split_buffer(src->view_src ? src->view_src->buffer : src->buffer)) {
            static std::atomic<bool> logged{ false };
            if (!logged.exchange(true)) {
                WSP_LOG_WARN("%s: %s reads the split tensor %s; only mul_mat uses split weights, and the scheduler "
                             "computes it per device\n",
                             dev.name.c_str(), wsp_ggml_op_desc(op), describe(src).c_str());
            }
            return true;
        }
    }
    return false;
}

// custom ops run a user's host function, which no GPU can: like the CUDA backend, a sim declines
// them and the scheduler leaves them to the CPU (its graph_compute still runs one handed to it
// directly, which the sim suites use as a hook into a stream)
bool is_custom(const wsp_ggml_tensor * op) {
    return op->op == WSP_GGML_OP_MAP_CUSTOM1 || op->op == WSP_GGML_OP_MAP_CUSTOM2 ||
           op->op == WSP_GGML_OP_MAP_CUSTOM3 || op->op == WSP_GGML_OP_CUSTOM;
}

bool dev_supports_op(wsp_ggml_backend_dev_t d, const wsp_ggml_tensor * op) {
    Device & dev = ctx_of(d);
    return dev.op_supported[(size_t) op->op].load() && !is_custom(op) && !reads_split_tensor(dev, op) &&
           wsp::cpu::supports_op(op);
}

// a split buffer type is this device's when it is the main device: split weights are leafs
// whose nodes the scheduler keeps on the main device
bool dev_supports_buft(wsp_ggml_backend_dev_t d, wsp_ggml_backend_buffer_type_t buft) {
    return buft == &ctx_of(d).buft || (wsp::split::is_split_buffer_type(buft) && wsp::split::main_device(buft) == d);
}

// like a GPU: worth taking an op with host weights only for a large enough batch
bool dev_offload_op(wsp_ggml_backend_dev_t, const wsp_ggml_tensor * op) {
    return op->op == WSP_GGML_OP_MUL_MAT && op->ne[1] >= 32;
}

wsp_ggml_backend_event_t dev_event_new(wsp_ggml_backend_dev_t d) {
    return new wsp_ggml_backend_event{ d, new EventCtx };
}

void dev_event_free(wsp_ggml_backend_dev_t, wsp_ggml_backend_event_t e) {
    delete static_cast<EventCtx *>(e->context);
    delete e;
}

void dev_event_sync(wsp_ggml_backend_dev_t d, wsp_ggml_backend_event_t e) {
    ++ctx_of(d).counters.host_syncs;
    static_cast<EventCtx *>(e->context)->event.synchronize();
}

const wsp_ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ dev_event_new,
    /* .event_free           = */ dev_event_free,
    /* .event_synchronize    = */ dev_event_sync,
};

//
// reg
//

const char * reg_name(wsp_ggml_backend_reg_t) {
    return "SIM";
}

size_t reg_count(wsp_ggml_backend_reg_t) {
    return devices().size();
}

wsp_ggml_backend_dev_t reg_get(wsp_ggml_backend_reg_t, size_t i) {
    return i < devices().size() ? &devices()[i]->dev : nullptr;
}

wsp_ggml_backend_buffer_type_t split_buffer_type(int main_device, const float * tensor_split);

// Note [sim counters]
void read_counters(wsp_ggml_backend_dev_t d, wsp_ggml_backend_counters * out) {
    *out = ctx_of(d).counters.read();
}

void * reg_proc(wsp_ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, "wsp_ggml_backend_split_buffer_type") == 0) {
        return reinterpret_cast<void *>(&split_buffer_type);
    }
    if (std::strcmp(name, COUNTERS_PROC) == 0) {
        GetCountersFn fn = &read_counters; // the signature the public function calls
        return reinterpret_cast<void *>(fn);
    }
    return nullptr;
}

wsp_ggml_backend_reg sim_reg = { WSP_GGML_BACKEND_API_VERSION, { reg_name, reg_count, reg_get, reg_proc }, nullptr };

// quantized split weights are cut at multiples of this many rows (the granularity kernels get)
constexpr int SIM_QUANT_ROWS = 8;

wsp_ggml_backend_buffer_type_t split_buffer_type(int main_device, const float * tensor_split) {
    return wsp::split::buffer_type(&sim_reg, main_device, tensor_split, SIM_QUANT_ROWS);
}

bool create_devices(int n, size_t memory_mb) {
    for (int i = 0; i < n; ++i) {
        auto dev         = std::make_unique<Device>();
        dev->index       = i;
        dev->name        = "SIM" + std::to_string(i);
        dev->description = "Simulated GPU " + std::to_string(i) + " (" + std::to_string(memory_mb) +
                           " MiB, CPU kernels on a stream thread)";
        dev->arena = std::make_unique<Arena>(memory_mb * 1024 * 1024);
        if (!dev->arena->valid()) {
            WSP_LOG_ERROR("SIM: cannot reserve %zu MiB of address space for %s\n", memory_mb, dev->name.c_str());
            devices().clear();
            return false;
        }
        dev->op_supported = std::vector<std::atomic<bool>>(WSP_GGML_OP_COUNT);
        for (auto & s : dev->op_supported) {
            s.store(true);
        }
        dev->buft           = { { buft_name, buft_alloc, buft_alignment, buft_max_size, nullptr, nullptr },
                                &dev->dev,
                                dev.get() };
        dev->dev            = { device_iface, &sim_reg, dev.get() };
        const char * delay  = std::getenv("WSP_GGML_SIM_DELAY_US");
        const char * jitter = std::getenv("WSP_GGML_SIM_JITTER_US");
        const char * seed   = std::getenv("WSP_GGML_SIM_SEED");
        dev->delays.fixed_us.store(delay ? std::max(0, std::atoi(delay)) : 0);
        dev->delays.jitter_us.store(jitter ? std::max(0, std::atoi(jitter)) : 0);
        dev->delays.seed.store(seed ? (uint32_t) std::strtoul(seed, nullptr, 10) : 0);
        const char * corrupt = std::getenv("WSP_GGML_SIM_CORRUPT");
        dev->corrupt_always  = corrupt != nullptr && std::atoi(corrupt) != 0;
        devices().push_back(std::move(dev));
    }
    return true;
}

} // namespace

wsp_ggml_backend_reg_t create_devices_once(int n_devices, size_t memory_mb) {
    static std::mutex           mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (n_devices < 1 || n_devices > 16) {
        WSP_LOG_ERROR("sim: n_devices must be 1 to 16, got %d\n", n_devices);
        return nullptr;
    }
    if (memory_mb == 0) {
        const char * env = std::getenv("WSP_GGML_SIM_MEMORY_MB");
        memory_mb        = env && std::atoi(env) > 0 ? (size_t) std::atoi(env) : 1024;
    }
    if (const char * checks = std::getenv("WSP_GGML_SIM_RACE_CHECKS"); checks != nullptr && std::atoi(checks) == 0) {
        race::checker().set_enabled(false);
    }
    if (!devices().empty()) {
        if ((int) devices().size() != n_devices) {
            WSP_LOG_ERROR("sim: %zu sim devices already exist; cannot make %d\n", devices().size(), n_devices);
        }
        return &sim_reg;
    }
    return create_devices(n_devices, memory_mb) ? &sim_reg : nullptr;
}

Device * device_of(wsp_ggml_backend_dev_t d) {
    return d != nullptr && d->reg == &sim_reg ? static_cast<Device *>(d->context) : nullptr;
}

Device * owner_of(const void * p) {
    for (auto & d : devices()) {
        if (d->arena->contains(p)) {
            return d.get();
        }
    }
    return nullptr;
}

std::string owner_name(const void * p) {
    const Device * d = owner_of(p);
    return d ? d->name : std::string("host memory");
}

void * host_view(const void * p) {
    const Device * d = owner_of(p);
    return d ? d->arena->host(p) : const_cast<void *>(p);
}

bool check_accesses(int agent, const race::Range * reads, size_t n_reads, const race::Range * writes, size_t n_writes,
                    const race::What & what, std::string & err) {
    std::string conflict;
    const bool  reads_ok  = race::checker().read(agent, reads, n_reads, what, &conflict);
    const bool  writes_ok = race::checker().write(agent, writes, n_writes, what, &conflict);
    if (!reads_ok || !writes_ok) {
        err = "race: " + conflict;
        return false;
    }
    return true;
}

void check_host_access(const std::vector<race::Range> & reads, const std::vector<race::Range> & writes,
                       const std::string & what) {
    race::Checker &  c     = race::checker();
    const int        agent = c.host_agent();
    const race::What w     = race::text_label("host thread: " + what);
    c.read(agent, reads, w, nullptr);
    c.write(agent, writes, w, nullptr);
}

void count_copy(size_t bytes) {
    g_bytes_copied.fetch_add(bytes, std::memory_order_relaxed);
}

void report_foreign_access(const Device & dev, const char * op, const wsp_ggml_tensor * t, const char * role) {
    g_foreign_accesses.fetch_add(1);
    WSP_LOG_ERROR("%s: FOREIGN MEMORY ACCESS: kernel %s on %s %s %s, which lives in %s (a copy is missing)\n",
                  dev.name.c_str(), op, dev.name.c_str(), role, describe(t).c_str(), owner_name(t->data).c_str());
}

} // namespace wsp::sim

using namespace wsp::sim;

extern "C" {

void wsp_ggml_backend_sim_inject_fault(wsp_ggml_backend_dev_t device, enum wsp_ggml_sim_fault fault) {
    Device * d = device_of(device);
    if (d == nullptr) {
        WSP_LOG_ERROR("%s: not a sim device\n", __func__);
        return;
    }
    switch (fault) {
        case WSP_GGML_SIM_FAULT_ALLOC: d->fail_alloc.store(true); break;
        case WSP_GGML_SIM_FAULT_COPY: d->fail_copy.store(true); break;
        case WSP_GGML_SIM_FAULT_KERNEL: d->fail_kernel.store(true); break;
        case WSP_GGML_SIM_FAULT_CORRUPT: d->corrupt_next.store(true); break;
    }
}

void wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_dev_t device, int delay_us) {
    if (Device * d = device_of(device)) {
        d->delays.fixed_us.store(delay_us < 0 ? 0 : delay_us);
    } else {
        WSP_LOG_ERROR("%s: not a sim device\n", __func__);
    }
}

void wsp_ggml_backend_sim_set_jitter_us(wsp_ggml_backend_dev_t device, int max_us, uint32_t seed) {
    if (Device * d = device_of(device)) {
        d->delays.seed.store(seed);
        d->delays.jitter_us.store(max_us < 0 ? 0 : max_us);
    } else {
        WSP_LOG_ERROR("%s: not a sim device\n", __func__);
    }
}

void wsp_ggml_backend_sim_set_kernel_hook(wsp_ggml_backend_dev_t device, wsp_ggml_backend_sim_kernel_hook hook,
                                          void * user_data) {
    if (Device * d = device_of(device)) {
        d->hook_data.store(user_data);
        d->hook.store(hook);
    } else {
        WSP_LOG_ERROR("%s: not a sim device\n", __func__);
    }
}

size_t wsp_ggml_backend_sim_races(void) {
    return wsp::race::checker().races();
}

void wsp_ggml_backend_sim_set_race_checks(bool on) {
    wsp::race::checker().set_enabled(on);
}

void wsp_ggml_backend_sim_set_op_supported(wsp_ggml_backend_dev_t device, enum wsp_ggml_op op, bool supported) {
    Device * d = device_of(device);
    if (d == nullptr || op < 0 || op >= WSP_GGML_OP_COUNT) {
        WSP_LOG_ERROR("%s: not a sim device or invalid op\n", __func__);
        return;
    }
    d->op_supported[(size_t) op].store(supported);
}

size_t wsp_ggml_backend_sim_bytes_copied(void) {
    return g_bytes_copied.load();
}

size_t wsp_ggml_backend_sim_foreign_accesses(void) {
    return g_foreign_accesses.load();
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_sim_split_buffer_type(int main_device, const float * tensor_split) {
    if (devices().empty()) {
        WSP_LOG_ERROR("%s: no sim devices exist\n", __func__);
        return nullptr;
    }
    return split_buffer_type(main_device, tensor_split);
}

size_t wsp_ggml_backend_sim_memory_used(wsp_ggml_backend_dev_t device) {
    Device * d = device_of(device);
    return d ? d->arena->used() : 0;
}

size_t wsp_ggml_backend_sim_buffer_count(wsp_ggml_backend_dev_t device) {
    Device * d = device_of(device);
    return d ? d->arena->blocks() : 0;
}

} // extern "C"
