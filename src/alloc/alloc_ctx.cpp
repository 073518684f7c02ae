// Allocate every tensor of a context in buffers of one type: tensors are packed in order into
// buffers no larger than the type's max size; several buffers come back as one multi-buffer.

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"

#include "../core/impl.h"
#include "../split/split_buffer.h"

#include <vector>

namespace {

bool needs_memory(const wsp_ggml_tensor * t) {
    return t->data == nullptr && t->view_src == nullptr;
}

// undo a partial allocation: tensors placed in these buffers lose their placement, then the buffers go
void free_all(wsp_ggml_context * ctx, std::vector<wsp_ggml_backend_buffer_t> & buffers) {
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        for (wsp_ggml_backend_buffer_t b : buffers) {
            if (t->buffer == b) {
                t->buffer = nullptr;
                t->data   = nullptr;
            }
        }
    }
    for (wsp_ggml_backend_buffer_t b : buffers) {
        wsp_ggml_backend_buffer_free(b);
    }
    buffers.clear();
}

// allocate one buffer of `size` and place tensors [first, last) in it
bool alloc_span(wsp_ggml_context * ctx, wsp_ggml_backend_buffer_type_t buft, wsp_ggml_tensor * first,
                wsp_ggml_tensor * last, size_t size, std::vector<wsp_ggml_backend_buffer_t> & buffers) {
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_buft_alloc_buffer(buft, size);
    if (buffer == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_backend_alloc_ctx_tensors: failed to allocate a %s buffer of %zu bytes\n",
                      wsp_ggml_backend_buft_name(buft), size);
        return false;
    }
    buffers.push_back(buffer);
    if (!wsp::split::reserve(buffer, ctx, first, last)) { // Note [one allocation per device]
        return false;
    }
    wsp_ggml_tallocr talloc = wsp_ggml_tallocr_new(buffer);
    for (wsp_ggml_tensor * t = first; t != last; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (needs_memory(t) && wsp_ggml_tallocr_alloc(&talloc, t) != WSP_GGML_STATUS_SUCCESS) {
            return false;
        }
    }
    return true;
}

} // namespace

extern "C" {

struct wsp_ggml_backend_buffer * wsp_ggml_backend_alloc_ctx_tensors_from_buft(struct wsp_ggml_context *      ctx,
                                                                              wsp_ggml_backend_buffer_type_t buft) {
    if (!wsp_ggml_get_no_alloc(ctx)) {
        WSP_LOG_ERROR("%s: the context must be created with no_alloc = true\n", __func__);
        return nullptr;
    }
    const size_t alignment = wsp_ggml_backend_buft_get_alignment(buft);
    const size_t max_size  = wsp_ggml_backend_buft_get_max_size(buft);

    std::vector<wsp_ggml_backend_buffer_t> buffers;
    wsp_ggml_tensor *                      first = wsp_ggml_get_first_tensor(ctx);
    size_t                                 cur   = 0;
    for (wsp_ggml_tensor * t = first; t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (!needs_memory(t)) {
            continue;
        }
        const size_t size = WSP_GGML_PAD(wsp_ggml_backend_buft_get_alloc_size(buft, t), alignment);
        if (size > max_size) {
            WSP_LOG_ERROR("%s: %s needs %zu bytes, more than the maximum %s buffer size %zu\n", __func__,
                          wsp::describe(t).c_str(), size, wsp_ggml_backend_buft_name(buft), max_size);
            free_all(ctx, buffers);
            return nullptr;
        }
        if (cur + size > max_size) {
            if (!alloc_span(ctx, buft, first, t, cur, buffers)) {
                free_all(ctx, buffers);
                return nullptr;
            }
            first = t;
            cur   = 0;
        }
        cur += size;
    }
    if (buffers.empty() && cur == 0) {
        // empty tensors need no memory: as with a fully allocated context there is no buffer
        WSP_LOG_DEBUG("%s: all tensors in the context are already allocated or empty\n", __func__);
        return nullptr;
    }
    if (cur > 0 && !alloc_span(ctx, buft, first, nullptr, cur, buffers)) {
        free_all(ctx, buffers);
        return nullptr;
    }

    // views of tensors that now have memory
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (t->view_src != nullptr && t->buffer == nullptr && t->view_src->buffer != nullptr) {
            if (wsp_ggml_backend_view_init(t) != WSP_GGML_STATUS_SUCCESS) {
                free_all(ctx, buffers);
                return nullptr;
            }
        }
    }

    if (buffers.size() == 1) {
        return buffers[0];
    }
    wsp_ggml_backend_buffer_t multi = wsp_ggml_backend_multi_buffer_alloc_buffer(buffers.data(), buffers.size());
    if (multi == nullptr) {
        free_all(ctx, buffers);
    }
    return multi;
}

struct wsp_ggml_backend_buffer * wsp_ggml_backend_alloc_ctx_tensors(struct wsp_ggml_context * ctx,
                                                                    wsp_ggml_backend_t        backend) {
    return wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_get_default_buffer_type(backend));
}

} // extern "C"
