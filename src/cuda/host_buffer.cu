// Pinned host memory: the "CUDA_Host" buffer type (page-locked, so copies to and from devices
// run at full speed and asynchronously), falling back to ordinary host memory with a message
// when pinning fails; and registration of caller memory as pinned.

#include "internal.cuh"

#include <cstring>

namespace wsp::cuda {

namespace {

struct HostBuffer {
    PinnedMemory memory;
};

void host_free(wsp_ggml_backend_buffer_t b) {
    delete static_cast<HostBuffer *>(b->context);
}

void * host_base(wsp_ggml_backend_buffer_t b) {
    return static_cast<HostBuffer *>(b->context)->memory.get();
}

void host_memset(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, uint8_t v, size_t off, size_t n) {
    std::memset(static_cast<char *>(t->data) + off, v, n);
}

void host_set(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, const void * data, size_t off, size_t n) {
    std::memcpy(static_cast<char *>(t->data) + off, data, n);
}

void host_get(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * t, void * data, size_t off, size_t n) {
    std::memcpy(data, static_cast<const char *>(t->data) + off, n);
}

bool host_cpy(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    wsp_ggml_backend_buffer_t sb = storage_buffer(src);
    if (sb != nullptr && wsp_ggml_backend_buffer_is_host(sb)) {
        std::memcpy(dst->data, src->data, wsp_ggml_nbytes(src));
        return true;
    }
    return false;
}

void host_clear(wsp_ggml_backend_buffer_t b, uint8_t v) {
    std::memset(host_base(b), v, b->size);
}

const wsp_ggml_backend_buffer_i host_iface = {
    /* .free_buffer   = */ host_free,
    /* .get_base      = */ host_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ host_memset,
    /* .set_tensor    = */ host_set,
    /* .get_tensor    = */ host_get,
    /* .cpy_tensor    = */ host_cpy,
    /* .clear         = */ host_clear,
    /* .reset         = */ nullptr,
};

const char * host_name(wsp_ggml_backend_buffer_type_t) {
    return WSP_GGML_CUDA_NAME "_Host";
}

wsp_ggml_backend_buffer_t host_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    PinnedMemory mem = alloc_pinned(size);
    if (!mem) {
        WSP_LOG_WARN(WSP_GGML_CUDA_NAME
                     ": cannot pin %zu bytes (%.1f MiB) of host memory; using ordinary host memory\n",
                     size, size / 1048576.0);
        return wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), size);
    }
    return wsp_ggml_backend_buffer_init(buft, host_iface, new HostBuffer{ std::move(mem) }, size);
}

size_t host_alignment(wsp_ggml_backend_buffer_type_t) {
    return 32; // as the CPU buffer type, so CPU kernels see the same layout
}

bool host_is_host(wsp_ggml_backend_buffer_type_t) {
    return true;
}

} // namespace

wsp_ggml_backend_buffer_type_t host_buffer_type() {
    static wsp_ggml_backend_buffer_type type = {
        { host_name, host_alloc, host_alignment, nullptr, nullptr, host_is_host },
        nullptr, // host memory: usable by the CPU device, set below when a device exists
        nullptr,
    };
    if (type.device == nullptr && !devices().empty()) {
        type.device = device(0);
    }
    return &type;
}

} // namespace wsp::cuda

extern "C" {

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_host_buffer_type(void) {
    return wsp::cuda::host_buffer_type();
}

bool wsp_ggml_backend_cuda_register_host_buffer(void * buffer, size_t size) {
    if (wsp::cuda::devices().empty() || buffer == nullptr || size == 0) {
        return false;
    }
    const cudaError_t err = cudaHostRegister(buffer, size, cudaHostRegisterPortable);
    if (err != cudaSuccess) {
        (void) cudaGetLastError();
        WSP_LOG_WARN(WSP_GGML_CUDA_NAME
                     ": cannot register %zu bytes of host memory at %p as pinned (%s); it stays pageable\n",
                     size, buffer, cudaGetErrorString(err));
        return false;
    }
    return true;
}

void wsp_ggml_backend_cuda_unregister_host_buffer(void * buffer) {
    if (wsp::cuda::devices().empty() || buffer == nullptr) {
        return;
    }
    const cudaError_t err = cudaHostUnregister(buffer);
    if (err != cudaSuccess) {
        (void) cudaGetLastError(); // not registered: nothing to undo
    }
}

} // extern "C"
