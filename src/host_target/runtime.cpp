// The runtime's core: the emulated machine (configuration, devices and their properties), the
// current device per host thread, stream handles, and errors with CUDA's last-error semantics.

// Note [host target]: the CUDA backend's .cu files are also compiled by g++ as C++, against
// headers that give CUDA's names (runtime.h, cuBLAS, NCCL, the device built-ins), so CI machines
// without a GPU run the same backend code. Devices are address ranges of host memory; kernels
// are host code (run_grid) that dereferences device pointers directly; streams are worker
// threads. What a GPU would punish, the runtime checks and reports with CUDA's error codes:
// memory of another device touched without peer access, copies outside live allocations,
// synchronous calls during capture, and (through the happens-before checker) accesses that no
// stream order, event or synchronize makes safe.

#include "runtime_impl.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace wsp::host_target {

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int         t_device     = 0;

// the pairs "a-b,c-d" of WSP_GGML_CUDA_HOST_PEER; "all" (or unset) and "none"
std::vector<std::vector<bool>> parse_peer(const char * text, int devices) {
    if (text == nullptr || std::strcmp(text, "all") == 0) {
        return {};
    }
    std::vector<std::vector<bool>> peer((size_t) devices, std::vector<bool>((size_t) devices, false));
    if (std::strcmp(text, "none") == 0) {
        return peer;
    }
    const char * p = text;
    while (*p != '\0') {
        int a = -1, b = -1, used = 0;
        if (std::sscanf(p, "%d-%d%n", &a, &b, &used) != 2) {
            WSP_LOG_ERROR("host target: cannot read WSP_GGML_CUDA_HOST_PEER at '%s'\n", p);
            break;
        }
        if (a >= 0 && b >= 0 && a < devices && b < devices) {
            peer[(size_t) a][(size_t) b] = true;
        }
        p += used;
        if (*p == ',') {
            ++p;
        }
    }
    return peer;
}

int env_int(const char * name, int fallback) {
    const char * v = std::getenv(name);
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

MachineConfig config_from_env() {
    MachineConfig c;
    c.devices          = std::min(env_int("WSP_GGML_CUDA_HOST_DEVICES", c.devices), MAX_DEVICES);
    const int cc       = env_int("WSP_GGML_CUDA_HOST_CC", c.cc_major * 10 + c.cc_minor);
    c.cc_major         = cc / 10;
    c.cc_minor         = cc % 10;
    c.sm_count         = env_int("WSP_GGML_CUDA_HOST_SMS", c.sm_count);
    c.memory           = (size_t) env_int("WSP_GGML_CUDA_HOST_MEMORY_MB", (int) (c.memory >> 20)) << 20;
    c.peer             = parse_peer(std::getenv("WSP_GGML_CUDA_HOST_PEER"), c.devices);
    const char * pools = std::getenv("WSP_GGML_CUDA_HOST_POOLS");
    c.pools            = pools == nullptr || std::atoi(pools) != 0;
    return c;
}

std::mutex        g_config_mutex;
MachineConfig *   g_pending = nullptr; // before the start
std::atomic<bool> g_started{ false };
Runtime *         g_runtime = nullptr; // never destroyed (header comment of runtime_impl.h)

MachineConfig & pending_locked() {
    if (g_pending == nullptr) {
        g_pending = new MachineConfig(config_from_env());
    }
    return *g_pending;
}

void fill_properties(Device & d, const MachineConfig & c) {
    cudaDeviceProp & p = d.prop;
    std::snprintf(p.name, sizeof(p.name), "WSP host target device %d (sm_%d%d)", d.index, c.cc_major, c.cc_minor);
    p.totalGlobalMem              = c.memory;
    p.sharedMemPerBlock           = MAX_SHARED;
    p.sharedMemPerBlockOptin      = MAX_SHARED;
    p.sharedMemPerMultiprocessor  = 2 * MAX_SHARED;
    p.totalConstMem               = 64 << 10;
    p.regsPerBlock                = 65536;
    p.warpSize                    = WSP_HOST_WARP_SIZE;
    p.maxThreadsPerBlock          = 1024;
    p.maxThreadsDim[0]            = 1024;
    p.maxThreadsDim[1]            = 1024;
    p.maxThreadsDim[2]            = 64;
    p.maxGridSize[0]              = 0x7fffffff;
    p.maxGridSize[1]              = 65535;
    p.maxGridSize[2]              = 65535;
    p.maxThreadsPerMultiProcessor = 2048;
    p.major                       = c.cc_major;
    p.minor                       = c.cc_minor;
    p.multiProcessorCount         = c.sm_count;
    p.l2CacheSize                 = 4 << 20;
    p.concurrentKernels           = 1;
    p.asyncEngineCount            = 2;
    p.unifiedAddressing           = 1;
    p.canMapHostMemory            = 1;
    p.managedMemory               = 0;
    p.integrated                  = 0;
    p.memoryPoolsSupported        = c.pools ? 1 : 0;
    p.pciBusID                    = d.index + 1;
}

Runtime * start() {
    auto * r    = new Runtime;
    r->config   = pending_locked();
    const int n = r->config.devices;
    if (r->config.peer.empty()) {
        r->config.peer.assign((size_t) n, std::vector<bool>((size_t) n, true));
    }
    r->peer_enabled.assign((size_t) n, std::vector<bool>((size_t) n, false));
    for (int i = 0; i < n; ++i) {
        auto d   = std::make_unique<Device>();
        d->index = i;
        fill_properties(*d, r->config);
        d->arena = std::make_unique<Arena>(r->config.memory);
        if (!d->arena->valid()) {
            WSP_LOG_ERROR("host target: cannot reserve %zu MiB of address space for device %d\n",
                          r->config.memory >> 20, i);
        }
        d->pool.device = i;
        d->pool.access.assign((size_t) n, cudaMemAccessFlagsProtNone);
        d->pool.access[(size_t) i] = cudaMemAccessFlagsProtReadWrite;
        r->devices.push_back(std::move(d));
    }
    return r;
}

// the per-thread default streams of the calling thread, finished when it exits
struct PerThreadStreams {
    std::shared_ptr<CUstream_st> by_device[MAX_DEVICES];
    ~PerThreadStreams() {
        for (auto & s : by_device) {
            if (s != nullptr) {
                std::lock_guard<std::mutex> lock(rt().mutex);
                rt().per_thread.erase(s.get());
            }
            s.reset(); // finishes its work: the thread's last copies complete, as on a GPU
        }
    }
};
thread_local PerThreadStreams t_per_thread;

struct ErrorText {
    cudaError_t  code;
    const char * name;
    const char * text;
};

const ErrorText k_errors[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
    { cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument" },
    { cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument" },
    { cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer" },
    { cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy" },
    { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
      "peer access is not supported between these two devices" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
    { cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state" },
    { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
    { cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered" },
    { cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled" },
    { cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled" },
    { cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
      "part or all of the requested memory range is already mapped" },
    { cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
      "pointer does not correspond to a registered memory region" },
    { cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure" },
    { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
    { cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
      "operation not permitted when stream is capturing" },
    { cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
      "operation failed due to a previous error during capture" },
    { cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
      "operation would result in a merge of separate capture sequences" },
    { cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
      "capture was not ended in the same stream as it began" },
    { cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work" },
    { cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
      "dependency created on uncaptured work in another stream" },
    { cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
      "operation would make the legacy stream depend on a capturing blocking stream" },
    { cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
      "operation not permitted on an event last recorded in a capturing stream" },
    { cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
      "attempt to terminate a thread-local capture sequence from another thread" },
    { cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

const ErrorText * error_text(cudaError_t e) {
    for (const ErrorText & t : k_errors) {
        if (t.code == e) {
            return &t;
        }
    }
    return nullptr;
}

} // namespace

cudaError_t set_last(cudaError_t err) {
    if (err != cudaSuccess) {
        t_last_error = err;
    }
    return err;
}

cudaError_t fail(cudaError_t err, const char * fmt, ...) {
    char    buf[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    WSP_LOG_ERROR("host target: %s (%s)\n", buf, cudaGetErrorName(err));
    return set_last(err);
}

Runtime & rt() {
    if (!g_started.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(g_config_mutex);
        if (g_runtime == nullptr) {
            g_runtime = start();
            g_started.store(true, std::memory_order_release);
        }
    }
    return *g_runtime;
}

const MachineConfig & machine() {
    if (g_started.load(std::memory_order_acquire)) {
        return g_runtime->config;
    }
    std::lock_guard<std::mutex> lock(g_config_mutex);
    return pending_locked();
}

bool configure(const MachineConfig & config) {
    std::lock_guard<std::mutex> lock(g_config_mutex);
    if (g_runtime != nullptr) {
        WSP_LOG_ERROR("host target: configure() after the runtime's first use; the machine stays as it is\n");
        return false;
    }
    if (config.devices < 1 || config.devices > MAX_DEVICES || config.memory < ALIGNMENT || config.sm_count < 1 ||
        (!config.peer.empty() && config.peer.size() != (size_t) config.devices)) {
        WSP_LOG_ERROR("host target: configure(): invalid machine (%d devices, %zu bytes each, peer %zux)\n",
                      config.devices, config.memory, config.peer.size());
        return false;
    }
    pending_locked() = config;
    return true;
}

bool valid_device(int device) {
    return device >= 0 && device < (int) rt().devices.size();
}

int current_device() {
    return t_device;
}

int arena_device(uintptr_t p) {
    for (const auto & d : rt().devices) {
        if (d->arena->contains(p)) {
            return d->index;
        }
    }
    return -1;
}

bool is_legacy(const CUstream_st * s) {
    for (const auto & d : rt().devices) {
        if (d->legacy.get() == s) {
            return true;
        }
    }
    return false;
}

std::shared_ptr<CUstream_st> resolve(cudaStream_t stream, cudaError_t * err) {
    Runtime & r = rt();
    *err        = cudaSuccess;
    const int d = t_device;
    if (stream == nullptr || stream == cudaStreamLegacy) {
        std::lock_guard<std::mutex> lock(r.mutex);
        Device &                    dev = *r.devices[(size_t) d];
        if (dev.legacy == nullptr) {
            dev.legacy = std::make_shared<CUstream_st>(d, 0u, "device " + std::to_string(d) + " legacy stream");
        }
        return dev.legacy;
    }
    if (stream == cudaStreamPerThread) {
        std::shared_ptr<CUstream_st> & s = t_per_thread.by_device[d];
        if (s == nullptr) {
            s = std::make_shared<CUstream_st>(d, (unsigned) cudaStreamNonBlocking,
                                              "device " + std::to_string(d) + " per-thread stream");
            std::lock_guard<std::mutex> lock(r.mutex);
            r.per_thread.emplace(s.get(), s);
        }
        return s;
    }
    std::lock_guard<std::mutex> lock(r.mutex);
    auto                        it = r.streams.find(stream);
    if (it == r.streams.end()) {
        *err = cudaErrorInvalidResourceHandle;
        return nullptr;
    }
    return it->second;
}

std::vector<std::shared_ptr<CUstream_st>> streams_of(int device) {
    Runtime &                                 r = rt();
    std::vector<std::shared_ptr<CUstream_st>> out;
    std::lock_guard<std::mutex>               lock(r.mutex);
    if (r.devices[(size_t) device]->legacy != nullptr) {
        out.push_back(r.devices[(size_t) device]->legacy);
    }
    for (const auto * m : { &r.streams, &r.per_thread }) {
        for (const auto & [raw, s] : *m) {
            if (s->device == device) {
                out.push_back(s);
            }
        }
    }
    return out;
}

cudaError_t synchronize_device(int device) {
    cudaError_t first = cudaSuccess;
    for (const auto & s : streams_of(device)) {
        const cudaError_t e = s->wait_idle(true);
        if (first == cudaSuccess) {
            first = e;
        }
    }
    return first;
}

} // namespace wsp::host_target

using namespace wsp::host_target;

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = t_last_error;
    t_last_error        = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    return t_last_error;
}

const char * cudaGetErrorString(cudaError_t error) {
    const ErrorText * t = error_text(error);
    return t != nullptr ? t->text : "unrecognized error code";
}

const char * cudaGetErrorName(cudaError_t error) {
    const ErrorText * t = error_text(error);
    return t != nullptr ? t->name : "cudaErrorUnknown";
}

cudaError_t cudaDriverGetVersion(int * version) {
    if (version == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    *version = 12080;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int * version) {
    return cudaDriverGetVersion(version);
}

cudaError_t cudaGetDeviceCount(int * count) {
    if (count == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    *count = (int) rt().devices.size();
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int * device) {
    if (device == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    rt();
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (!valid_device(device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp * prop, int device) {
    if (prop == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    *prop = rt().devices[(size_t) device]->prop;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int * value, enum cudaDeviceAttr attr, int device) {
    if (value == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    const cudaDeviceProp & p = rt().devices[(size_t) device]->prop;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
        case cudaDevAttrWarpSize: *value = p.warpSize; break;
        case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
        case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
        case cudaDevAttrMemoryPoolsSupported: *value = p.memoryPoolsSupported; break;
        default: return set_last(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char * pci_bus_id, int len, int device) {
    if (pci_bus_id == nullptr || len <= 0) {
        return set_last(cudaErrorInvalidValue);
    }
    if (!valid_device(device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    std::snprintf(pci_bus_id, (size_t) len, "0000:%02x:00.0", device + 1);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    rt();
    if (const cudaError_t e = check_capture_safe("cudaDeviceSynchronize"); e != cudaSuccess) {
        return e;
    }
    return set_last(synchronize_device(t_device));
}
