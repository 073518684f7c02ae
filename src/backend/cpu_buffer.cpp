// Host-memory buffers: the CPU buffer type ("CPU", 64-byte aligned allocations, tensors
// aligned to 32 bytes) and buffers over caller-owned memory ("CPU_Mapped", never freed here).

#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#    include <sys/mman.h>
#endif

namespace {

constexpr size_t TENSOR_ALIGNMENT = 32;
constexpr size_t BASE_ALIGNMENT   = 64;

// Note [huge pages]: a decoder step streams every weight once; on 4 KiB pages that is a TLB miss
// per 4 KiB (the second-level TLB covers 16 MiB, a base model is 150 MiB). Buffers of at least
// HUGE_MIN bytes are 2 MiB aligned and asked for transparent huge pages (Linux, where THP is in
// "madvise" mode the common default). WSP_GGML_CPU_HUGE_PAGES=0 turns it off.
constexpr size_t HUGE_PAGE = (size_t) 2 << 20;
constexpr size_t HUGE_MIN  = (size_t) 8 << 20;

bool huge_pages_wanted() {
    static const bool wanted = [] {
        const char * env = std::getenv("WSP_GGML_CPU_HUGE_PAGES");
        return env == nullptr || std::atoi(env) != 0;
    }();
    return wanted;
}

} // namespace

void * wsp::host_buffer_alloc(size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= HUGE_MIN && huge_pages_wanted()) {
        const size_t padded = WSP_GGML_PAD(size, HUGE_PAGE);
        void *       data   = std::aligned_alloc(HUGE_PAGE, padded);
        if (data != nullptr) {
            madvise(data, padded, MADV_HUGEPAGE); // advice only: 4 KiB pages if refused
        }
        return data;
    }
#endif
    return std::aligned_alloc(BASE_ALIGNMENT, WSP_GGML_PAD(size, BASE_ALIGNMENT));
}

namespace {

void * cpu_get_base(wsp_ggml_backend_buffer_t buffer) {
    return buffer->context;
}

void cpu_free(wsp_ggml_backend_buffer_t buffer) {
    std::free(buffer->context);
}

void cpu_memset_tensor(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    std::memset(static_cast<char *>(tensor->data) + offset, value, size);
}

void cpu_set_tensor(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * tensor, const void * data, size_t offset,
                    size_t size) {
    std::memcpy(static_cast<char *>(tensor->data) + offset, data, size);
}

void cpu_get_tensor(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * tensor, void * data, size_t offset,
                    size_t size) {
    std::memcpy(data, static_cast<const char *>(tensor->data) + offset, size);
}

bool cpu_cpy_tensor(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * s = wsp::storage_of(src);
    if (s->buffer != nullptr && wsp_ggml_backend_buffer_is_host(s->buffer)) {
        std::memcpy(dst->data, src->data, wsp_ggml_nbytes(src));
        return true;
    }
    return false;
}

void cpu_clear(wsp_ggml_backend_buffer_t buffer, uint8_t value) {
    std::memset(buffer->context, value, buffer->size);
}

const wsp_ggml_backend_buffer_i cpu_buffer_iface = {
    /* .free_buffer   = */ cpu_free,
    /* .get_base      = */ cpu_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ cpu_memset_tensor,
    /* .set_tensor    = */ cpu_set_tensor,
    /* .get_tensor    = */ cpu_get_tensor,
    /* .cpy_tensor    = */ cpu_cpy_tensor,
    /* .clear         = */ cpu_clear,
    /* .reset         = */ nullptr,
};

// same as above, but the memory belongs to the caller
const wsp_ggml_backend_buffer_i cpu_from_ptr_iface = {
    /* .free_buffer   = */ nullptr,
    /* .get_base      = */ cpu_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ cpu_memset_tensor,
    /* .set_tensor    = */ cpu_set_tensor,
    /* .get_tensor    = */ cpu_get_tensor,
    /* .cpy_tensor    = */ cpu_cpy_tensor,
    /* .clear         = */ cpu_clear,
    /* .reset         = */ nullptr,
};

const char * cpu_buft_name(wsp_ggml_backend_buffer_type_t) {
    return "CPU";
}

const char * cpu_mapped_buft_name(wsp_ggml_backend_buffer_type_t) {
    return "CPU_Mapped";
}

wsp_ggml_backend_buffer_t cpu_buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    void * data = wsp::host_buffer_alloc(size);
    if (data == nullptr) {
        WSP_LOG_ERROR("%s: failed to allocate a CPU buffer of %zu bytes (%.1f MiB)\n", __func__, size,
                      (double) size / (1024.0 * 1024.0));
        return nullptr;
    }
    wsp_ggml_backend_buffer_t b = wsp_ggml_backend_buffer_init(buft, cpu_buffer_iface, data, size);
    if (b == nullptr) {
        std::free(data);
    }
    return b;
}

wsp_ggml_backend_buffer_t cpu_mapped_buft_alloc(wsp_ggml_backend_buffer_type_t, size_t size) {
    WSP_LOG_ERROR("CPU_Mapped buffers wrap caller memory (wsp_ggml_backend_cpu_buffer_from_ptr) and cannot be "
                  "allocated (%zu bytes asked)\n",
                  size);
    return nullptr;
}

size_t cpu_buft_alignment(wsp_ggml_backend_buffer_type_t) {
    return TENSOR_ALIGNMENT;
}

bool cpu_buft_is_host(wsp_ggml_backend_buffer_type_t) {
    return true;
}

wsp_ggml_backend_buffer_type cpu_buft = {
    /* .iface = */ {
        /* .get_name       = */ cpu_buft_name,
        /* .alloc_buffer   = */ cpu_buft_alloc,
        /* .get_alignment  = */ cpu_buft_alignment,
        /* .get_max_size   = */ nullptr,
        /* .get_alloc_size = */ nullptr,
        /* .is_host        = */ cpu_buft_is_host,
    },
    /* .device  = */ nullptr, // set by the CPU backend's registration
    /* .context = */ nullptr,
};

wsp_ggml_backend_buffer_type cpu_mapped_buft = {
    /* .iface = */ {
        /* .get_name       = */ cpu_mapped_buft_name,
        /* .alloc_buffer   = */ cpu_mapped_buft_alloc,
        /* .get_alignment  = */ cpu_buft_alignment,
        /* .get_max_size   = */ nullptr,
        /* .get_alloc_size = */ nullptr,
        /* .is_host        = */ cpu_buft_is_host,
    },
    /* .device  = */ nullptr,
    /* .context = */ nullptr,
};

} // namespace

extern "C" {

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cpu_buffer_type(void) {
    return &cpu_buft;
}

wsp_ggml_backend_buffer_t wsp_ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    if (ptr == nullptr) {
        WSP_LOG_ERROR("%s: ptr is NULL\n", __func__);
        return nullptr;
    }
    if ((uintptr_t) ptr % TENSOR_ALIGNMENT != 0) {
        WSP_LOG_ERROR("%s: ptr %p is not aligned to %zu bytes\n", __func__, ptr, TENSOR_ALIGNMENT);
        return nullptr;
    }
    cpu_mapped_buft.device = cpu_buft.device;
    return wsp_ggml_backend_buffer_init(&cpu_mapped_buft, cpu_from_ptr_iface, ptr, size);
}

} // extern "C"
