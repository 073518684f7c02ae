// NCCL transfers and the all-reduce between GPUs (see nccl.cuh). Without WSP_GGML_USE_NCCL no
// transfer prefers NCCL and no all-reduce runs.

#include "counters.cuh"
#include "device.cuh"
#include "nccl.cuh"

#include <cstdlib>
#include <mutex>
#include <vector>

namespace wsp::cuda::nccl {

#ifdef WSP_GGML_USE_NCCL

namespace {

bool check_nccl(ncclResult_t r, const char * call, int device) {
    if (r == ncclSuccess) {
        return true;
    }
    WSP_LOG_ERROR("NCCL error %d (%s) on device %d in %s\n", (int) r, ncclGetErrorString(r), device, call);
    return false;
}

#    define WSP_NCCL_OK(call, device) check_nccl((call), #    call, (device))

// Note [NCCL transfers]: not under virtual devices, nor when WSP_GGML_CUDA_NCCL=0
bool wanted() {
    static const bool on = [] {
        const char * env = std::getenv("WSP_GGML_CUDA_NCCL");
        return virtual_device_count() == 0 && (env == nullptr || std::atoi(env) != 0);
    }();
    return on;
}

size_t min_bytes() {
    static const size_t v = [] {
        const char * env = std::getenv("WSP_GGML_NCCL_MIN_BYTES");
        return env ? (size_t) std::strtoull(env, nullptr, 10) : (size_t) 4 << 20;
    }();
    return v;
}

// Note [NCCL lifetime]: one rank per physical GPU (rank = CUDA device id), the communicators made
// when the first CUDA backend is created and destroyed with the last one: never in the middle of
// a pipeline (ncclCommInitAll synchronizes every GPU), never by a static destructor (which may run
// after the CUDA runtime has been torn down at exit).
class Communicator {
public:
    bool       ready() const { return !comms_.empty(); }
    int        size() const { return (int) comms_.size(); }
    ncclComm_t comm(int physical) const { return comms_[(size_t) physical]; }

    void create() {
        if (!wanted()) {
            return;
        }
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
            (void) cudaGetLastError();
            return;
        }
        std::vector<ncclComm_t> comms((size_t) n, nullptr);
        std::vector<int>        devs((size_t) n);
        for (int i = 0; i < n; ++i) {
            devs[(size_t) i] = i;
        }
        if (WSP_NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()), 0)) {
            comms_ = std::move(comms);
            WSP_LOG_INFO("NCCL: communicator over %d GPUs\n", n);
        }
    }

    void destroy() {
        for (size_t i = 0; i < comms_.size(); ++i) {
            WSP_NCCL_OK(ncclCommDestroy(comms_[i]), (int) i);
        }
        if (!comms_.empty()) {
            WSP_LOG_INFO("NCCL: communicator over %zu GPUs destroyed\n", comms_.size());
        }
        comms_.clear();
    }

private:
    std::vector<ncclComm_t> comms_;
};

std::mutex & comm_mutex() {
    static std::mutex m;
    return m;
}

// guarded by comm_mutex(); never destroyed at exit (Note [NCCL lifetime])
Communicator & communicator() {
    static Communicator * c = new Communicator();
    return *c;
}

int g_users = 0; // CUDA backends alive, guarded by comm_mutex()

} // namespace

void acquire() {
    std::lock_guard<std::mutex> lock(comm_mutex());
    if (g_users++ == 0) {
        communicator().create();
    }
}

void release() {
    std::lock_guard<std::mutex> lock(comm_mutex());
    if (g_users > 0 && --g_users == 0) {
        communicator().destroy();
    }
}

bool preferred(int a, int b, size_t bytes) {
    if (a == b || !wanted()) {
        return false;
    }
    return !peer_access(a, b) || bytes >= min_bytes();
}

bool copy(int a, int b, const void * src, void * dst, size_t bytes, cudaStream_t src_stream, cudaStream_t dst_stream) {
    std::lock_guard<std::mutex> lock(comm_mutex()); // NCCL groups of one host thread at a time
    Communicator &              c = communicator();
    if (!c.ready()) {
        return false;
    }
    if (!WSP_NCCL_OK(ncclGroupStart(), a)) {
        return false;
    }
    const bool sent = WSP_NCCL_OK(ncclSend(src, bytes, ncclUint8, b, c.comm(a), src_stream), a);
    const bool recv = WSP_NCCL_OK(ncclRecv(dst, bytes, ncclUint8, a, c.comm(b), dst_stream), b);
    const bool done = WSP_NCCL_OK(ncclGroupEnd(), a);
    count_launch(index_of_physical(a)); // a send kernel and a receive kernel
    count_launch(index_of_physical(b));
    return sent && recv && done;
}

bool all_reduce(int n, const int * devices, float * const * bufs, size_t count, const cudaStream_t * streams) {
    std::lock_guard<std::mutex> lock(comm_mutex()); // NCCL groups of one host thread at a time
    Communicator &              c = communicator();
    if (!wanted() || !c.ready() || n != c.size()) {
        return false; // Note [NCCL all-reduce]: every rank takes part, or none
    }
    std::vector<bool> taking_part((size_t) n, false);
    for (int i = 0; i < n; ++i) {
        if (devices[i] < 0 || devices[i] >= n || taking_part[(size_t) devices[i]]) {
            return false; // a rank twice (one GPU as two participants)
        }
        taking_part[(size_t) devices[i]] = true;
    }
    if (!WSP_NCCL_OK(ncclGroupStart(), devices[0])) {
        return false;
    }
    bool queued = true;
    for (int i = 0; i < n && queued; ++i) {
        DeviceGuard guard(devices[i]);
        queued = WSP_NCCL_OK(ncclAllReduce(bufs[i], bufs[i], count, ncclFloat, ncclSum, c.comm(devices[i]), streams[i]),
                             devices[i]);
        count_launch(index_of_physical(devices[i]));
    }
    const bool done = WSP_NCCL_OK(ncclGroupEnd(), devices[0]);
    return queued && done;
}

#else // without NCCL every transfer is a peer copy

void acquire() {}

void release() {}

bool preferred(int, int, size_t) {
    return false;
}

bool copy(int a, int, const void *, void *, size_t, cudaStream_t, cudaStream_t) {
    WSP_LOG_ERROR("NCCL: device %d asked for an NCCL copy in a build without NCCL\n", a);
    return false;
}

bool all_reduce(int, const int *, float * const *, size_t, const cudaStream_t *) {
    return false; // Note [NCCL all-reduce]: the caller sums by peer copies
}

#endif

} // namespace wsp::cuda::nccl
