// The CPU backend, its device ("CPU", the processor's name, the system's memory) and its reg.
// A backend owns a thread pool (unless given one) and a work buffer that grows as graphs need.

#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

#include "compute.h"
#include "kernel.h"
#include "repack.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#    include <sys/sysinfo.h>
#endif

namespace {

using wsp::cpu::ThreadPool;

// Scratch for the kernels (graph_work_size: the largest node's need). Never zero-filled: the
// kernels write before they read, and pages a graph does not reach stay unmapped instead of
// adding to the process's resident memory.
class WorkBuffer {
public:
    // at least `need` bytes; false (logged) when they cannot be allocated, keeping the old buffer
    bool reserve(size_t need) {
        if (need <= size_) {
            return true;
        }
        std::unique_ptr<uint8_t[]> grown(new (std::nothrow) uint8_t[need]);
        if (!grown) {
            WSP_LOG_ERROR("CPU backend: cannot allocate a work buffer of %zu bytes\n", need);
            return false;
        }
        data_ = std::move(grown);
        size_ = need;
        return true;
    }
    uint8_t * data() const { return data_.get(); }
    size_t    size() const { return size_; }

private:
    std::unique_ptr<uint8_t[]> data_;
    size_t                     size_ = 0;
};

struct CpuBackend {
    int                         n_threads = 1;
    std::unique_ptr<ThreadPool> own_pool;
    wsp_ggml_threadpool *       user_pool = nullptr;
    WorkBuffer                  work;
    wsp_ggml_abort_callback     abort_cb   = nullptr;
    void *                      abort_data = nullptr;

    ThreadPool * pool() {
        if (user_pool != nullptr) {
            return user_pool->pool;
        }
        if (n_threads <= 1) {
            return nullptr;
        }
        if (!own_pool || own_pool->n_threads() != n_threads) {
            own_pool = std::make_unique<ThreadPool>(n_threads, 50, false);
        }
        return own_pool.get();
    }

    wsp_ggml_status compute(wsp_ggml_cgraph * graph) {
        ThreadPool * tp      = pool();
        const int    threads = tp ? tp->n_threads() : 1;
        const size_t need    = wsp::cpu::graph_work_size(graph, threads);
        if (!work.reserve(need)) {
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
        return wsp::cpu::graph_compute(graph, tp, threads, work.data(), work.size(), abort_cb, abort_data);
    }
};

struct CpuPlan {
    wsp_ggml_cgraph graph;
    WorkBuffer      work;
};

wsp_ggml_guid cpu_guid = { 0x43, 0x2f, 0x5a, 0x1e, 0x77, 0x09, 0x4c, 0xb2,
                           0x91, 0x3d, 0x6e, 0x58, 0xa4, 0x0f, 0xc7, 0x21 };

CpuBackend * ctx_of(wsp_ggml_backend_t backend) {
    return static_cast<CpuBackend *>(backend->context);
}

const char * backend_name(wsp_ggml_backend_t) {
    return "CPU";
}

void backend_free(wsp_ggml_backend_t backend) {
    delete ctx_of(backend);
    delete backend;
}

wsp_ggml_backend_graph_plan_t plan_create(wsp_ggml_backend_t backend, const wsp_ggml_cgraph * cgraph) {
    CpuBackend * ctx  = ctx_of(backend);
    auto *       plan = new (std::nothrow) CpuPlan;
    if (plan == nullptr) {
        return nullptr;
    }
    plan->graph     = *cgraph;
    ThreadPool * tp = ctx->pool();
    if (!plan->work.reserve(wsp::cpu::graph_work_size(cgraph, tp ? tp->n_threads() : 1))) {
        delete plan;
        return nullptr;
    }
    return plan;
}

void plan_free(wsp_ggml_backend_t, wsp_ggml_backend_graph_plan_t plan) {
    delete static_cast<CpuPlan *>(plan);
}

void plan_update(wsp_ggml_backend_t backend, wsp_ggml_backend_graph_plan_t p, const wsp_ggml_cgraph * cgraph) {
    auto *       plan = static_cast<CpuPlan *>(p);
    ThreadPool * tp   = ctx_of(backend)->pool();
    plan->graph       = *cgraph;
    (void) plan->work.reserve(wsp::cpu::graph_work_size(cgraph, tp ? tp->n_threads() : 1)); // else compute reports it
}

wsp_ggml_status plan_compute(wsp_ggml_backend_t backend, wsp_ggml_backend_graph_plan_t p) {
    auto *       plan = static_cast<CpuPlan *>(p);
    CpuBackend * ctx  = ctx_of(backend);
    ThreadPool * tp   = ctx->pool();
    // the thread count may have changed since the plan was made, and with it the scratch size
    const size_t need = wsp::cpu::graph_work_size(&plan->graph, tp ? tp->n_threads() : 1);
    if (!plan->work.reserve(need)) {
        return WSP_GGML_STATUS_ALLOC_FAILED;
    }
    return wsp::cpu::graph_compute(&plan->graph, tp, tp ? tp->n_threads() : 1, plan->work.data(), plan->work.size(),
                                   ctx->abort_cb, ctx->abort_data);
}

wsp_ggml_status backend_graph_compute(wsp_ggml_backend_t backend, wsp_ggml_cgraph * cgraph) {
    return ctx_of(backend)->compute(cgraph);
}

const wsp_ggml_backend_i cpu_backend_iface = {
    /* .get_name           = */ backend_name,
    /* .free               = */ backend_free,
    /* .set_tensor_async   = */ nullptr,
    /* .get_tensor_async   = */ nullptr,
    /* .cpy_tensor_async   = */ nullptr,
    /* .synchronize        = */ nullptr,
    /* .graph_plan_create  = */ plan_create,
    /* .graph_plan_free    = */ plan_free,
    /* .graph_plan_update  = */ plan_update,
    /* .graph_plan_compute = */ plan_compute,
    /* .graph_compute      = */ backend_graph_compute,
    /* .event_record       = */ nullptr,
    /* .event_wait         = */ nullptr,
};

//
// device
//

std::string read_cpu_name() {
#if defined(__linux__)
    std::ifstream in("/proc/cpuinfo");
    std::string   line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) {
                size_t b = line.find_first_not_of(" \t", colon + 1);
                return b == std::string::npos ? std::string("CPU") : line.substr(b);
            }
        }
    }
#endif
    return "CPU";
}

const char * dev_name(wsp_ggml_backend_dev_t) {
    return "CPU";
}

const char * dev_description(wsp_ggml_backend_dev_t) {
    static const std::string name = read_cpu_name();
    return name.c_str();
}

void dev_memory(wsp_ggml_backend_dev_t, size_t * free, size_t * total) {
#if defined(__linux__)
    struct sysinfo si;
    if (sysinfo(&si) == 0) {
        *total = (size_t) si.totalram * si.mem_unit;
        *free  = (size_t) (si.freeram + si.bufferram) * si.mem_unit;
        return;
    }
#endif
    *total = 0;
    *free  = 0;
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_CPU;
}

void dev_props(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_dev_props * props) {
    props->name        = dev_name(dev);
    props->description = dev_description(dev);
    props->type        = dev_type(dev);
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->caps = {
        /* .async                = */ false,
        /* .host_buffer          = */ false,
        /* .buffer_from_host_ptr = */ true,
        /* .events               = */ false,
    };
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t, const char * params) {
    wsp_ggml_backend_t backend = wsp_ggml_backend_cpu_init();
    int                n       = 0;
    // optional "n_threads=N"
    if (backend != nullptr && params != nullptr && std::sscanf(params, "n_threads=%d", &n) == 1 && n > 0) {
        wsp_ggml_backend_cpu_set_n_threads(backend, n);
    }
    return backend;
}

wsp_ggml_backend_buffer_type_t dev_buffer_type(wsp_ggml_backend_dev_t) {
    return wsp_ggml_backend_cpu_buffer_type();
}

wsp_ggml_backend_buffer_t dev_buffer_from_host_ptr(wsp_ggml_backend_dev_t, void * ptr, size_t size, size_t) {
    return wsp_ggml_backend_cpu_buffer_from_ptr(ptr, size);
}

bool dev_supports_op(wsp_ggml_backend_dev_t, const wsp_ggml_tensor * op) {
    // every source must be readable by the CPU: host memory, or a weight in the 8-row layout
    // (a tensor that does not fit the layout belongs in the plain CPU buffer, not in CPU_REPACK)
    for (const wsp_ggml_tensor * src : op->src) {
        if (src == nullptr || src->buffer == nullptr || wsp_ggml_backend_buffer_is_host(src->buffer)) {
            continue;
        }
        if (src->buffer->buft != wsp::cpu::repack_buffer_type() || !wsp::cpu::stored_repacked(src)) {
            return false;
        }
    }
    return wsp::cpu::supports_op(op);
}

bool dev_supports_buft(wsp_ggml_backend_dev_t, wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_buft_is_host(buft) || buft == wsp::cpu::repack_buffer_type();
}

const wsp_ggml_backend_device_i cpu_device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ dev_buffer_from_host_ptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

//
// reg
//

const char * reg_name(wsp_ggml_backend_reg_t) {
    return "CPU";
}

size_t reg_device_count(wsp_ggml_backend_reg_t) {
    return 1;
}

wsp_ggml_backend_dev_t reg_device(wsp_ggml_backend_reg_t reg, size_t index);

wsp_ggml_backend_feature * cpu_features(wsp_ggml_backend_reg_t) {
    // what the running CPU supports (cpu_features.cpp), by upstream's names
    static std::vector<wsp_ggml_backend_feature> features = [] {
        const std::pair<const char *, int (*)(void)> flags[] = {
            { "SSE3", wsp_ggml_cpu_has_sse3 },
            { "SSSE3", wsp_ggml_cpu_has_ssse3 },
            { "AVX", wsp_ggml_cpu_has_avx },
            { "AVX_VNNI", wsp_ggml_cpu_has_avx_vnni },
            { "AVX2", wsp_ggml_cpu_has_avx2 },
            { "F16C", wsp_ggml_cpu_has_f16c },
            { "FMA", wsp_ggml_cpu_has_fma },
            { "BMI2", wsp_ggml_cpu_has_bmi2 },
            { "AVX512", wsp_ggml_cpu_has_avx512 },
            { "AVX512_VBMI", wsp_ggml_cpu_has_avx512_vbmi },
            { "AVX512_VNNI", wsp_ggml_cpu_has_avx512_vnni },
            { "AVX512_BF16", wsp_ggml_cpu_has_avx512_bf16 },
            { "AMX_INT8", wsp_ggml_cpu_has_amx_int8 },
            { "NEON", wsp_ggml_cpu_has_neon },
            { "ARM_FMA", wsp_ggml_cpu_has_arm_fma },
            { "FP16_VA", wsp_ggml_cpu_has_fp16_va },
            { "MATMUL_INT8", wsp_ggml_cpu_has_matmul_int8 },
            { "SVE", wsp_ggml_cpu_has_sve },
            { "DOTPROD", wsp_ggml_cpu_has_dotprod },
            { "SME", wsp_ggml_cpu_has_sme },
            { "RISCV_V", wsp_ggml_cpu_has_riscv_v },
            { "VSX", wsp_ggml_cpu_has_vsx },
            { "VXE", wsp_ggml_cpu_has_vxe },
            { "NNPA", wsp_ggml_cpu_has_nnpa },
            { "WASM_SIMD", wsp_ggml_cpu_has_wasm_simd },
        };
        std::vector<wsp_ggml_backend_feature> f;
        for (const auto & [name, has] : flags) {
            if (has()) {
                f.push_back({ name, "1" });
            }
        }
        static const std::string sve_cnt = std::to_string(wsp_ggml_cpu_get_sve_cnt());
        if (wsp_ggml_cpu_get_sve_cnt() > 0) {
            f.push_back({ "SVE_CNT", sve_cnt.c_str() });
        }
        f.push_back({ nullptr, nullptr });
        return f;
    }();
    return features.data();
}

// Note [Q4_0x8 repack] (repack.h): the buffer type clients offer MUL_MAT weights first;
// WSP_GGML_CPU_REPACK=0 leaves the list empty (side-by-side benches of the plain layout)
wsp_ggml_backend_buffer_type_t * cpu_extra_bufts(wsp_ggml_backend_dev_t) {
    static wsp_ggml_backend_buffer_type_t repack[] = { wsp::cpu::repack_buffer_type(), nullptr };
    static wsp_ggml_backend_buffer_type_t none[]   = { nullptr };
    const char *                          env      = std::getenv("WSP_GGML_CPU_REPACK");
    return env != nullptr && std::strcmp(env, "0") == 0 ? none : repack;
}

void cpu_set_n_threads_proc(wsp_ggml_backend_t backend, int n_threads) {
    wsp_ggml_backend_cpu_set_n_threads(backend, n_threads);
}

void * reg_proc_address(wsp_ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, "wsp_ggml_backend_set_n_threads") == 0) {
        return reinterpret_cast<void *>(&cpu_set_n_threads_proc);
    }
    if (std::strcmp(name, "wsp_ggml_backend_set_abort_callback") == 0) {
        return reinterpret_cast<void *>(&wsp_ggml_backend_cpu_set_abort_callback);
    }
    if (std::strcmp(name, "wsp_ggml_backend_get_features") == 0) {
        return reinterpret_cast<void *>(&cpu_features);
    }
    if (std::strcmp(name, "wsp_ggml_backend_dev_get_extra_bufts") == 0) {
        return reinterpret_cast<void *>(&cpu_extra_bufts);
    }
    return nullptr;
}

const wsp_ggml_backend_reg_i cpu_reg_iface = {
    /* .get_name         = */ reg_name,
    /* .get_device_count = */ reg_device_count,
    /* .get_device       = */ reg_device,
    /* .get_proc_address = */ reg_proc_address,
};

wsp_ggml_backend_reg cpu_reg = { WSP_GGML_BACKEND_API_VERSION, cpu_reg_iface, nullptr };

wsp_ggml_backend_device cpu_device = { cpu_device_iface, &cpu_reg, nullptr };

wsp_ggml_backend_dev_t reg_device(wsp_ggml_backend_reg_t, size_t index) {
    return index == 0 ? &cpu_device : nullptr;
}

// Note [CPU buffer type device]: the CPU buffer type lives in the base library, which cannot name
// the CPU device; wsp_ggml_backend_cpu_reg() links the two, here as soon as this library loads, so
// wsp_ggml_backend_buft_get_device never sees the CPU type without its device.
[[maybe_unused]] const bool g_cpu_buft_linked = [] {
    wsp_ggml_backend_cpu_buffer_type()->device = &cpu_device;
    wsp::cpu::repack_buffer_type()->device     = &cpu_device;
    return true;
}();

int default_threads() {
    const unsigned hw = std::thread::hardware_concurrency();
    return (int) std::min<unsigned>(hw == 0 ? 1u : hw, (unsigned) WSP_GGML_DEFAULT_N_THREADS);
}

} // namespace

extern "C" {

wsp_ggml_backend_t wsp_ggml_backend_cpu_init(void) {
    wsp_ggml_backend_cpu_reg(); // links the CPU buffer type to the CPU device
    auto * ctx = new (std::nothrow) CpuBackend;
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
        return nullptr;
    }
    ctx->n_threads = default_threads();
    auto * backend = new (std::nothrow) wsp_ggml_backend{ &cpu_guid, cpu_backend_iface, &cpu_device, ctx };
    if (backend == nullptr) {
        delete ctx;
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
    return backend;
}

bool wsp_ggml_backend_is_cpu(wsp_ggml_backend_t backend) {
    return backend != nullptr && wsp_ggml_guid_matches(backend->guid, &cpu_guid);
}

void wsp_ggml_backend_cpu_set_n_threads(wsp_ggml_backend_t backend_cpu, int n_threads) {
    if (!wsp_ggml_backend_is_cpu(backend_cpu)) {
        WSP_LOG_ERROR("%s: backend %s is not the CPU backend\n", __func__, wsp_ggml_backend_name(backend_cpu));
        return;
    }
    if (n_threads <= 0 || n_threads > WSP_GGML_MAX_N_THREADS) {
        WSP_LOG_ERROR("%s: n_threads must be 1 to %d, got %d\n", __func__, WSP_GGML_MAX_N_THREADS, n_threads);
        return;
    }
    ctx_of(backend_cpu)->n_threads = n_threads;
}

void wsp_ggml_backend_cpu_set_threadpool(wsp_ggml_backend_t backend_cpu, wsp_ggml_threadpool_t threadpool) {
    if (!wsp_ggml_backend_is_cpu(backend_cpu)) {
        WSP_LOG_ERROR("%s: backend %s is not the CPU backend\n", __func__, wsp_ggml_backend_name(backend_cpu));
        return;
    }
    CpuBackend * ctx = ctx_of(backend_cpu);
    ctx->user_pool   = threadpool;
    if (threadpool != nullptr) {
        ctx->own_pool.reset();
    }
}

void wsp_ggml_backend_cpu_set_abort_callback(wsp_ggml_backend_t backend_cpu, wsp_ggml_abort_callback abort_callback,
                                             void * abort_callback_data) {
    if (!wsp_ggml_backend_is_cpu(backend_cpu)) {
        WSP_LOG_ERROR("%s: backend %s is not the CPU backend\n", __func__, wsp_ggml_backend_name(backend_cpu));
        return;
    }
    ctx_of(backend_cpu)->abort_cb   = abort_callback;
    ctx_of(backend_cpu)->abort_data = abort_callback_data;
}

wsp_ggml_backend_reg_t wsp_ggml_backend_cpu_reg(void) {
    // the host buffer type (in the base library) learns its device once, whatever thread comes first
    static const bool linked = (wsp_ggml_backend_cpu_buffer_type()->device = &cpu_device,
                                wsp::cpu::repack_buffer_type()->device     = &cpu_device, true);
    (void) linked;
    return &cpu_reg;
}

void wsp_ggml_cpu_init(void) {
    wsp_ggml_backend_cpu_reg();
}

} // extern "C"
