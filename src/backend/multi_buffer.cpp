// Multi-buffer: one buffer handle that owns several buffers of the same type. It is what
// alloc_ctx_tensors returns when the tensors of a context exceed the type's max buffer size.

#include "ggml-backend-impl.h"

#include "../core/impl.h"

#include <vector>

namespace {

struct MultiBuffer {
    std::vector<wsp_ggml_backend_buffer_t> buffers;
};

void multi_free(wsp_ggml_backend_buffer_t buffer) {
    auto * ctx = static_cast<MultiBuffer *>(buffer->context);
    for (wsp_ggml_backend_buffer_t b : ctx->buffers) {
        wsp_ggml_backend_buffer_free(b);
    }
    delete ctx;
}

void multi_clear(wsp_ggml_backend_buffer_t buffer, uint8_t value) {
    auto * ctx = static_cast<MultiBuffer *>(buffer->context);
    for (wsp_ggml_backend_buffer_t b : ctx->buffers) {
        wsp_ggml_backend_buffer_clear(b, value);
    }
}

const wsp_ggml_backend_buffer_i multi_iface = {
    /* .free_buffer   = */ multi_free,
    /* .get_base      = */ nullptr,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ nullptr,
    /* .set_tensor    = */ nullptr,
    /* .get_tensor    = */ nullptr,
    /* .cpy_tensor    = */ nullptr,
    /* .clear         = */ multi_clear,
    /* .reset         = */ nullptr,
};

} // namespace

extern "C" {

wsp_ggml_backend_buffer_t wsp_ggml_backend_multi_buffer_alloc_buffer(wsp_ggml_backend_buffer_t * buffers,
                                                                     size_t                      n_buffers) {
    if (n_buffers == 0) {
        WSP_LOG_ERROR("%s: no buffers given\n", __func__);
        return nullptr;
    }
    auto * ctx  = new MultiBuffer{ std::vector<wsp_ggml_backend_buffer_t>(buffers, buffers + n_buffers) };
    size_t size = 0;
    for (size_t i = 0; i < n_buffers; ++i) {
        size += wsp_ggml_backend_buffer_get_size(buffers[i]);
    }
    wsp_ggml_backend_buffer_t mb = wsp_ggml_backend_buffer_init(buffers[0]->buft, multi_iface, ctx, size);
    if (mb == nullptr) {
        delete ctx; // the caller still owns the parts
    }
    return mb;
}

bool wsp_ggml_backend_buffer_is_multi_buffer(wsp_ggml_backend_buffer_t buffer) {
    return buffer->iface.free_buffer == multi_free;
}

void wsp_ggml_backend_multi_buffer_set_usage(wsp_ggml_backend_buffer_t          buffer,
                                             enum wsp_ggml_backend_buffer_usage usage) {
    if (!wsp_ggml_backend_buffer_is_multi_buffer(buffer)) {
        WSP_LOG_ERROR("%s: not a multi-buffer\n", __func__);
        return;
    }
    auto * ctx = static_cast<MultiBuffer *>(buffer->context);
    for (wsp_ggml_backend_buffer_t b : ctx->buffers) {
        wsp_ggml_backend_buffer_set_usage(b, usage);
    }
}

} // extern "C"
