// The device list and peer access (see device.cuh).

#include "device.cuh"

#include <cstdlib>
#include <mutex>

namespace wsp::cuda {

namespace {

std::vector<std::vector<bool>> g_peer;       // [a][b] for physical devices
std::vector<bool>              g_pools;      // [physical]
std::string                    g_no_devices; // no_devices_reason()

std::string pci_bus_id(int dev) {
    char id[32] = {};
    if (cudaDeviceGetPCIBusId(id, (int) sizeof(id), dev) != cudaSuccess) {
        (void) cudaGetLastError();
        return "unknown";
    }
    return id;
}

// Note [peer access]: enabled once for every pair the hardware allows, never toggled per batch;
// copies between devices without it go through cudaMemcpyPeerAsync, which stages through the host.
// cudaDeviceEnablePeerAccess covers cudaMalloc memory (our buffers) only: memory of a stream-ordered
// pool (scratch, Note [memory pool]) is reachable from a peer once the pool grants it, so device a
// is also given read-write access to b's default pool.
bool grant_pool_access(int a, int b) {
    if (!g_pools[(size_t) b]) {
        return true;
    }
    cudaMemPool_t pool = nullptr;
    if (!WSP_CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, b), b)) {
        return false;
    }
    cudaMemAccessDesc desc = {};
    desc.location.type     = cudaMemLocationTypeDevice;
    desc.location.id       = a;
    desc.flags             = cudaMemAccessFlagsProtReadWrite;
    return WSP_CUDA_OK(cudaMemPoolSetAccess(pool, &desc, 1), b);
}

void enable_peer_access(int n_physical) {
    g_peer.assign((size_t) n_physical, std::vector<bool>((size_t) n_physical, false));
    for (int a = 0; a < n_physical; ++a) {
        g_peer[(size_t) a][(size_t) a] = true;
        for (int b = 0; b < n_physical; ++b) {
            int can = 0;
            if (a == b || cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can) {
                (void) cudaGetLastError();
                continue;
            }
            DeviceGuard       guard(a);
            const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
            (void) cudaGetLastError();
            if ((err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled) && grant_pool_access(a, b)) {
                g_peer[(size_t) a][(size_t) b] = true;
            }
        }
    }
}

std::vector<DeviceInfo> read_devices() {
    std::vector<DeviceInfo> list;
    int                     n   = 0; // cudaGetDeviceCount leaves it untouched on failure
    const cudaError_t       err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n <= 0) {
        (void) cudaGetLastError();
        g_no_devices =
            std::string("no usable GPU (") + (err != cudaSuccess ? cudaGetErrorString(err) : "device count 0") + ")";
        WSP_LOG_INFO(WSP_GGML_CUDA_NAME ": %s; the " WSP_GGML_CUDA_NAME " backend has no devices\n",
                     g_no_devices.c_str());
        return list;
    }
    g_pools.assign((size_t) n, false);
    for (int i = 0; i < n; ++i) {
        int pools = 0;
        if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, i) == cudaSuccess) {
            g_pools[(size_t) i] = pools != 0;
        }
        (void) cudaGetLastError();
    }
    const int virtual_n = virtual_device_count();
    const int count     = virtual_n > 0 ? virtual_n : n;
    for (int i = 0; i < count && i < 16; ++i) {
        const int      phys = virtual_n > 0 ? 0 : i;
        cudaDeviceProp prop = {};
        if (!WSP_CUDA_OK(cudaGetDeviceProperties(&prop, phys), phys)) {
            continue;
        }
        DeviceInfo d;
        d.index       = (int) list.size();
        d.physical    = phys;
        d.name        = std::string(WSP_GGML_CUDA_NAME) + std::to_string(d.index);
        d.description = std::string(prop.name) + " (PCI " + pci_bus_id(phys) + ")";
        if (virtual_n > 0) {
            d.description += " virtual " + std::to_string(i) + " of " + std::to_string(virtual_n);
        }
        d.total_memory = prop.totalGlobalMem;
        d.cc_major     = prop.major;
        d.cc_minor     = prop.minor;
        d.sm_count     = prop.multiProcessorCount;
        list.push_back(d);
    }
    enable_peer_access(n);
    return list;
}

} // namespace

int virtual_device_count() {
    const char * env = std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES");
    const int    n   = env != nullptr ? std::atoi(env) : 0;
    return n > 0 ? n : 0;
}

bool pools_supported(int physical) {
    devices();
    return physical >= 0 && (size_t) physical < g_pools.size() && g_pools[(size_t) physical];
}

const std::vector<DeviceInfo> & devices() {
    static const std::vector<DeviceInfo> list = read_devices();
    return list;
}

const std::string & no_devices_reason() {
    devices();
    return g_no_devices;
}

bool peer_access(int a, int b) {
    devices();
    return a >= 0 && b >= 0 && (size_t) a < g_peer.size() && (size_t) b < g_peer.size() &&
           g_peer[(size_t) a][(size_t) b];
}

} // namespace wsp::cuda
