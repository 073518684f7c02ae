// gpu_probe: what the GPU check (scripts/gpu-check.sh) asks of a machine before any suite runs, one
// line per probe, "<probe> PASS|FAIL|SKIP|REFUSED <what was seen>": the driver and runtime versions,
// the device list, a kernel of the architectures this bundle was built for, a stream-ordered
// allocation from the default pool, cudaHostRegister of malloc'd memory, cuBLAS opened by its
// soname and from the toolkit's folder, NCCL's version and the peer-access matrix. REFUSED is a
// capability the hardware declines (pinning, peer access): the suites that need it skip, so it is
// no failure. cuBLAS and NCCL are opened with dlopen, so that a machine without them gets a line,
// not a loader error. Exit status: 1 when a probe failed, else 0.
//   gpu_probe [--expect-gpu] [--toolkit-lib DIR]
// Without --expect-gpu a machine with no driver or no GPU is SKIP (the dry run); with it, FAIL.

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef WSP_PROBE_ARCHS
#    define WSP_PROBE_ARCHS "unknown"
#endif

namespace {

struct Options {
    bool        expect_gpu = false;
    std::string toolkit_lib; // the toolkit's library folder, where cuBLAS is looked up by path
};

int g_failed = 0;

void line(const char * probe, const char * status, const std::string & what) {
    std::printf("%-8s %-7s %s\n", probe, status, what.c_str());
    std::fflush(stdout);
    if (std::strcmp(status, "FAIL") == 0) {
        ++g_failed;
    }
}

std::string err(cudaError_t e) {
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string version(int v) { // 13000 -> "13.0"
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// the file a dlopen handle came from
std::string origin(void * lib) {
    link_map * map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
        return "?";
    }
    return map->l_name;
}

std::string dl_error() {
    const char * e = dlerror();
    return e ? e : "unknown error";
}

// the runtime and the driver it talks to; a driver older than the runtime refuses every call
void probe_runtime(const Options & o) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    Dl_info     info{};
    std::string from = "?";
    if (dladdr(reinterpret_cast<void *>(&cudaRuntimeGetVersion), &info) != 0 && info.dli_fname != nullptr) {
        from = info.dli_fname;
    }
    const std::string what = "driver " + (driver ? version(driver) : std::string("none")) + ", runtime " +
                             version(runtime) + " from " + from + " (built with " + version(CUDART_VERSION) +
                             "); toolkit folder " + (o.toolkit_lib.empty() ? "not found" : o.toolkit_lib);
    if (driver == 0) {
        line("runtime", o.expect_gpu ? "FAIL" : "SKIP", what + ": no NVIDIA driver");
    } else if (driver < runtime) {
        line("runtime", "FAIL", what + ": the driver is older than the runtime");
    } else {
        line("runtime", "PASS", what);
    }
}

int probe_devices(const Options & o) {
    int               n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void) cudaGetLastError();
        line("devices", o.expect_gpu ? "FAIL" : "SKIP", "no GPU: " + (e != cudaSuccess ? err(e) : "0 devices"));
        return 0;
    }
    std::string what = std::to_string(n) + ":";
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
            line("devices", "FAIL", "cudaGetDeviceProperties(" + std::to_string(d) + ") failed");
            return 0;
        }
        char bus[32] = {};
        cudaDeviceGetPCIBusId(bus, (int) sizeof(bus), d);
        char buf[256];
        std::snprintf(buf, sizeof(buf), " [%d] %s sm_%d%d, %d SMs, %.1f GiB, PCI %s;", d, p.name, p.major, p.minor,
                      p.multiProcessorCount, (double) p.totalGlobalMem / (1 << 30), bus);
        what += buf;
    }
    what.pop_back();
    line("devices", "PASS", what);
    return n;
}

__global__ void fill(int * out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 3 * i + 1;
    }
}

// a kernel of this build on every device: "no kernel image" here explains every suite's failures
void probe_kernel(int n_dev) {
    if (n_dev == 0) {
        line("kernel", "SKIP", "no GPU");
        return;
    }
    const int n = 1000;
    for (int d = 0; d < n_dev; ++d) {
        cudaSetDevice(d);
        int *       dev = nullptr;
        cudaError_t e   = cudaMalloc(&dev, n * sizeof(int));
        if (e == cudaSuccess) {
            fill<<<(n + 255) / 256, 256>>>(dev, n);
            e = cudaGetLastError();
        }
        std::vector<int> host(n, 0);
        if (e == cudaSuccess) {
            e = cudaMemcpy(host.data(), dev, n * sizeof(int), cudaMemcpyDeviceToHost);
        }
        cudaFree(dev);
        if (e != cudaSuccess) {
            (void) cudaGetLastError();
            line("kernel", "FAIL", "device " + std::to_string(d) + ", code for sm " WSP_PROBE_ARCHS ": " + err(e));
            return;
        }
        for (int i = 0; i < n; ++i) {
            if (host[(size_t) i] != 3 * i + 1) {
                line("kernel", "FAIL", "device " + std::to_string(d) + ": wrong value at " + std::to_string(i));
                return;
            }
        }
    }
    line("kernel", "PASS", "code for sm " WSP_PROBE_ARCHS " ran on " + std::to_string(n_dev) + " device(s)");
}

// 64 MiB from each device's default pool on a stream of its own, as the backend's scratch is
void probe_pool(int n_dev) {
    if (n_dev == 0) {
        line("pool", "SKIP", "no GPU");
        return;
    }
    const size_t bytes = size_t(64) << 20;
    for (int d = 0; d < n_dev; ++d) {
        int pools = 0;
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, d);
        if (!pools) {
            line("pool", "REFUSED",
                 "device " + std::to_string(d) + " has no memory pools (the backend uses cudaMalloc)");
            return;
        }
        cudaSetDevice(d);
        cudaMemPool_t pool   = nullptr;
        cudaStream_t  stream = nullptr;
        void *        p      = nullptr;
        cudaError_t   e      = cudaDeviceGetDefaultMemPool(&pool, d);
        if (e == cudaSuccess) {
            e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        }
        if (e == cudaSuccess) {
            e = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
        }
        if (e == cudaSuccess) {
            e = cudaMemsetAsync(p, 0, bytes, stream);
        }
        if (e == cudaSuccess) {
            e = cudaFreeAsync(p, stream);
        }
        if (e == cudaSuccess) {
            e = cudaStreamSynchronize(stream);
        }
        if (stream) {
            cudaStreamDestroy(stream);
        }
        if (e != cudaSuccess) {
            (void) cudaGetLastError();
            line("pool", "FAIL", "device " + std::to_string(d) + ", 64 MiB from the default pool: " + err(e));
            return;
        }
    }
    line("pool", "PASS",
         "64 MiB from the default pool of " + std::to_string(n_dev) + " device(s): allocated, set, freed");
}

// the backend pins a client's memory with cudaHostRegister (register_host_buffer); some hosts
// (virtual machines, sandboxes) refuse it
void probe_pinning(int n_dev) {
    if (n_dev == 0) {
        line("pinning", "SKIP", "no GPU");
        return;
    }
    const size_t bytes = size_t(1) << 20;
    void *       host  = std::malloc(bytes);
    std::memset(host, 1, bytes);
    cudaSetDevice(0);
    cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        std::free(host);
        line("pinning", "REFUSED",
             "cudaHostRegister of 1 MiB of malloc'd memory: " + err(e) + "; the suites that pin skip");
        return;
    }
    void * dev = nullptr;
    e          = cudaMalloc(&dev, bytes);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, 0);
    }
    if (e == cudaSuccess) {
        e = cudaDeviceSynchronize();
    }
    cudaFree(dev);
    const cudaError_t u = cudaHostUnregister(host);
    std::free(host);
    if (e != cudaSuccess || u != cudaSuccess) {
        (void) cudaGetLastError();
        line("pinning", "FAIL", "pinned 1 MiB, then " + err(e != cudaSuccess ? e : u));
        return;
    }
    line("pinning", "PASS", "cudaHostRegister of 1 MiB of malloc'd memory: pinned, copied to device 0, unregistered");
}

// the backend opens libcublas.so.<major> by its soname on the first float mat-mul (Note [lazy
// cuBLAS]); the soname must resolve, and the toolkit's own copy must load
std::string cublas_version(void * lib) {
    using GetProperty = cublasStatus_t (*)(libraryPropertyType, int *);
    auto get          = reinterpret_cast<GetProperty>(dlsym(lib, "cublasGetProperty"));
    int  major = 0, minor = 0, patch = 0;
    if (get == nullptr || get(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        get(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS || get(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
        return "no cublasGetProperty";
    }
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

void probe_cublas(const Options & o, int n_dev) {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    bool              ok     = true;
    std::string       what   = "by soname " + soname + ": ";
    void *            lib    = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
        what += origin(lib) + " (" + cublas_version(lib) + ")";
        using Create  = cublasStatus_t (*)(cublasHandle_t *);
        using Destroy = cublasStatus_t (*)(cublasHandle_t);
        auto create   = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
        auto destroy  = reinterpret_cast<Destroy>(dlsym(lib, "cublasDestroy_v2"));
        if (n_dev > 0) {
            cublasHandle_t       h = nullptr;
            const cublasStatus_t s = create ? create(&h) : CUBLAS_STATUS_NOT_INITIALIZED;
            if (s == CUBLAS_STATUS_SUCCESS) {
                destroy(h);
                what += ", a handle made on device 0";
            } else {
                what += ", cublasCreate failed (status " + std::to_string((int) s) + ")";
                ok = false;
            }
        }
    } else {
        what += "not loaded (" + dl_error() + "): float mat-muls would take our own GEMM";
        ok = false;
    }
    if (o.toolkit_lib.empty()) {
        what += "; by path: no toolkit folder found";
        ok = false;
    } else {
        const std::string path = o.toolkit_lib + "/" + soname;
        void *            tk   = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (tk != nullptr) {
            what += "; by path " + path + ": loaded (" + cublas_version(tk) + ")";
            dlclose(tk);
        } else {
            what += "; by path " + path + ": not loaded (" + dl_error() + ")";
            ok = false;
        }
    }
    if (lib != nullptr) {
        dlclose(lib);
    }
    line("cublas", ok ? "PASS" : "FAIL", what);
}

// NCCL moves data between GPUs where it beats a peer copy (Note [NCCL] in src/cuda/nccl.cuh)
void probe_nccl() {
    void * lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        line("nccl", "SKIP", "absent: libnccl.so.2 not loaded (" + dl_error() + ")");
        return;
    }
    using GetVersion = int (*)(int *); // ncclResult_t ncclGetVersion(int *)
    auto get         = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
    int  v           = 0;
    if (get == nullptr || get(&v) != 0) {
        line("nccl", "FAIL", origin(lib) + ": ncclGetVersion failed");
    } else {
        // NCCL 2.9 and later: major * 10000 + minor * 100 + patch
        line("nccl", "PASS",
             std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
                 " from " + origin(lib));
    }
    dlclose(lib);
}

// cudaDeviceCanAccessPeer for every ordered pair; the backend enables what it allows (Note [peer
// access] in src/cuda/device.cu) and stages the rest through the host
void probe_peer(int n_dev) {
    if (n_dev < 2) {
        line("peer", "SKIP", n_dev ? "1 device: no pairs" : "no GPU");
        return;
    }
    std::string matrix;
    bool        all = true;
    for (int a = 0; a < n_dev; ++a) {
        matrix += (a ? " " : "") + std::to_string(a) + ":";
        for (int b = 0; b < n_dev; ++b) {
            int can = a == b;
            if (a != b && cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) {
                (void) cudaGetLastError();
                can = 0;
            }
            matrix += a == b ? "-" : can ? "y" : "n";
            all = all && can;
        }
    }
    line("peer", all ? "PASS" : "REFUSED",
         "access from row to column: " + matrix + (all ? "" : "; the suites that need peer access skip"));
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--expect-gpu") == 0) {
            o.expect_gpu = true;
        } else if (std::strcmp(argv[i], "--toolkit-lib") == 0 && i + 1 < argc) {
            o.toolkit_lib = argv[++i];
        } else {
            std::fprintf(stderr, "usage: gpu_probe [--expect-gpu] [--toolkit-lib DIR]\n");
            return 2;
        }
    }
    probe_runtime(o);
    const int n_dev = probe_devices(o);
    probe_kernel(n_dev);
    probe_pool(n_dev);
    probe_pinning(n_dev);
    probe_cublas(o, n_dev);
    probe_nccl();
    probe_peer(n_dev);
    return g_failed ? 1 : 0;
}
