// NCCL transfers between GPUs (see nccl.cuh). Without WSP_GGML_USE_NCCL no transfer prefers NCCL.

#include "device.cuh"
#include "nccl.cuh"

#include <cstdlib>
#include <mutex>
#include <vector>

#ifdef WSP_GGML_USE_NCCL
#    include <nccl.h>
#endif

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

// one rank per physical GPU, rank = CUDA device id
class Communicator {
public:
    static Communicator & get() {
        static Communicator c;
        return c;
    }

    bool       ready() const { return !comms_.empty(); }
    ncclComm_t comm(int physical) const { return comms_[(size_t) physical]; }

    ~Communicator() {
        for (ncclComm_t c : comms_) {
            (void) ncclCommDestroy(c);
        }
    }

private:
    Communicator() {
        if (std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES") != nullptr) {
            return; // Note [NCCL transfers]: no NCCL under virtual devices
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

    std::vector<ncclComm_t> comms_;
};

size_t min_bytes() {
    static const size_t v = [] {
        const char * env = std::getenv("WSP_GGML_NCCL_MIN_BYTES");
        return env ? (size_t) std::strtoull(env, nullptr, 10) : (size_t) 4 << 20;
    }();
    return v;
}

std::mutex & comm_mutex() {
    static std::mutex m;
    return m;
}

} // namespace

bool preferred(int a, int b, size_t bytes) {
    if (a == b || std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES") != nullptr) {
        return false;
    }
    return !peer_access(a, b) || bytes >= min_bytes();
}

bool copy(int a, int b, const void * src, void * dst, size_t bytes, cudaStream_t src_stream, cudaStream_t dst_stream) {
    std::lock_guard<std::mutex> lock(comm_mutex()); // NCCL groups of one host thread at a time
    Communicator &              c = Communicator::get();
    if (!c.ready()) {
        return false;
    }
    if (!WSP_NCCL_OK(ncclGroupStart(), a)) {
        return false;
    }
    const bool sent = WSP_NCCL_OK(ncclSend(src, bytes, ncclUint8, b, c.comm(a), src_stream), a);
    const bool recv = WSP_NCCL_OK(ncclRecv(dst, bytes, ncclUint8, a, c.comm(b), dst_stream), b);
    const bool done = WSP_NCCL_OK(ncclGroupEnd(), a);
    return sent && recv && done;
}

#else // without NCCL every transfer is a peer copy

bool preferred(int, int, size_t) {
    return false;
}

bool copy(int a, int, const void *, void *, size_t, cudaStream_t, cudaStream_t) {
    WSP_LOG_ERROR("NCCL: device %d asked for an NCCL copy in a build without NCCL\n", a);
    return false;
}

#endif

} // namespace wsp::cuda::nccl
