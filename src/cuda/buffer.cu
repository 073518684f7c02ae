// Device buffer types ("CUDA<i>") and buffers: memory from the device's pool, tensor data moved
// with synchronous copies on a per-thread stream, copies between devices peer to peer.

#include "internal.cuh"

#include <cstring>
#include <string>
#include <vector>

namespace wsp::cuda {

namespace {

constexpr size_t ALIGNMENT = 128;

BufferCtx & ctx_of(wsp_ggml_backend_buffer_t b) {
    return *static_cast<BufferCtx *>(b->context);
}

int phys(wsp_ggml_backend_buffer_t b) {
    return physical_of(ctx_of(b).index);
}

void buf_free(wsp_ggml_backend_buffer_t b) {
    delete &ctx_of(b);
}

void * buf_base(wsp_ggml_backend_buffer_t b) {
    return ctx_of(b).memory.get();
}

// one synchronous transfer on the calling thread's stream, for device index `index`
bool transfer(int index, void * dst, const void * src, size_t n, cudaMemcpyKind kind) {
    const int   device = physical_of(index);
    DeviceGuard guard(device);
    return WSP_CUDA_OK(cudaMemcpyAsync(dst, src, n, kind, cudaStreamPerThread), device) &&
           WSP_CUDA_WAIT(cudaStreamSynchronize(cudaStreamPerThread), index);
}

void buf_memset(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, uint8_t v, size_t off, size_t n) {
    DeviceGuard guard(phys(b));
    WSP_CUDA_OK(cudaMemsetAsync(static_cast<char *>(t->data) + off, v, n, cudaStreamPerThread), phys(b));
    WSP_CUDA_WAIT(cudaStreamSynchronize(cudaStreamPerThread), ctx_of(b).index);
}

void buf_set(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t, const void * data, size_t off, size_t n) {
    transfer(ctx_of(b).index, static_cast<char *>(t->data) + off, data, n, cudaMemcpyHostToDevice);
}

void buf_get(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * t, void * data, size_t off, size_t n) {
    transfer(ctx_of(b).index, data, static_cast<const char *>(t->data) + off, n, cudaMemcpyDeviceToHost);
}

// dst is in this buffer; a source in any CUDA buffer is copied device to device
bool buf_cpy(wsp_ggml_backend_buffer_t b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    wsp_ggml_backend_buffer_t sb = storage_buffer(src);
    if (sb == nullptr || !is_cuda_buffer(sb)) {
        return false;
    }
    const int   from = physical_of(buffer_device(sb)), to = phys(b);
    DeviceGuard guard(from);
    return WSP_CUDA_OK(cudaMemcpyPeerAsync(dst->data, to, src->data, from, wsp_ggml_nbytes(src), cudaStreamPerThread),
                       from) &&
           WSP_CUDA_WAIT(cudaStreamSynchronize(cudaStreamPerThread), buffer_device(sb));
}

void buf_clear(wsp_ggml_backend_buffer_t b, uint8_t v) {
    DeviceGuard guard(phys(b));
    WSP_CUDA_OK(cudaMemsetAsync(ctx_of(b).memory.get(), v, b->size, cudaStreamPerThread), phys(b));
    WSP_CUDA_WAIT(cudaStreamSynchronize(cudaStreamPerThread), ctx_of(b).index);
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

struct BuftCtx {
    int         index;
    std::string name;
};

const char * buft_name(wsp_ggml_backend_buffer_type_t buft) {
    return static_cast<BuftCtx *>(buft->context)->name.c_str();
}

wsp_ggml_backend_buffer_t buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    const int    index = static_cast<BuftCtx *>(buft->context)->index;
    DeviceMemory mem   = alloc_device(index, size, "a buffer");
    if (!mem) {
        return nullptr;
    }
    auto * ctx = new BufferCtx{ index, std::move(mem) };
    return wsp_ggml_backend_buffer_init(buft, buffer_iface, ctx, size);
}

size_t buft_alignment(wsp_ggml_backend_buffer_type_t) {
    return ALIGNMENT;
}

size_t buft_max_size(wsp_ggml_backend_buffer_type_t buft) {
    return devices()[(size_t) static_cast<BuftCtx *>(buft->context)->index].total_memory;
}

} // namespace

bool is_cuda_buffer(wsp_ggml_backend_buffer_t buffer) {
    return buffer != nullptr && buffer->iface.get_base == buf_base;
}

bool is_cuda_buffer_type(wsp_ggml_backend_buffer_type_t buft) {
    return buft != nullptr && buft->iface.get_name == buft_name;
}

int buffer_device(wsp_ggml_backend_buffer_t buffer) {
    return ctx_of(buffer).index;
}

wsp_ggml_backend_buffer_type_t buffer_type_of(int index) {
    static std::vector<wsp_ggml_backend_buffer_type> types = [] {
        std::vector<wsp_ggml_backend_buffer_type> v;
        for (const DeviceInfo & d : devices()) {
            auto * ctx = new BuftCtx{ d.index, d.name };
            v.push_back(
                { { buft_name, buft_alloc, buft_alignment, buft_max_size, nullptr, nullptr }, device(d.index), ctx });
        }
        return v;
    }();
    if (index < 0 || (size_t) index >= types.size()) {
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME ": device %d does not exist (%zu devices)\n", index, types.size());
        return nullptr;
    }
    return &types[(size_t) index];
}

} // namespace wsp::cuda
