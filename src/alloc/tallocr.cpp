// Bump allocator over one buffer: tensors are placed one after the other, aligned.

#include "ggml-alloc.h"
#include "ggml-backend.h"

#include "../core/impl.h"

extern "C" {

struct wsp_ggml_tallocr wsp_ggml_tallocr_new(wsp_ggml_backend_buffer_t buffer) {
    void *       base  = wsp_ggml_backend_buffer_get_base(buffer);
    const size_t align = wsp_ggml_backend_buffer_get_alignment(buffer);
    if (align == 0 || (align & (align - 1)) != 0) {
        WSP_GGML_ABORT("wsp_ggml_tallocr_new: buffer alignment %zu is not a power of two", align);
    }
    wsp_ggml_tallocr talloc = { buffer, base, align,
                                WSP_GGML_PAD((size_t) (uintptr_t) base, align) - (size_t) (uintptr_t) base };
    return talloc;
}

enum wsp_ggml_status wsp_ggml_tallocr_alloc(struct wsp_ggml_tallocr * talloc, struct wsp_ggml_tensor * tensor) {
    size_t       size  = wsp_ggml_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    const size_t total = wsp_ggml_backend_buffer_get_size(talloc->buffer);
    size               = WSP_GGML_PAD(size, talloc->alignment);
    if (talloc->offset + size > total) {
        WSP_LOG_ERROR("%s: not enough space in the buffer to allocate %s (needed %zu, available %zu)\n", __func__,
                      wsp::describe(tensor).c_str(), size, total - talloc->offset);
        return WSP_GGML_STATUS_ALLOC_FAILED;
    }
    void * addr = static_cast<char *>(talloc->base) + talloc->offset;
    talloc->offset += size;
    return wsp_ggml_backend_tensor_alloc(talloc->buffer, tensor, addr);
}

} // extern "C"
