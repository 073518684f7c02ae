// GGUF context: for now an empty container (no keys, no tensors) with its version and
// alignment; reading and writing files comes with model loading.

#include "gguf.h"

#include "impl.h"

#include <new>

struct wsp_gguf_context {
    uint32_t version   = WSP_GGUF_VERSION;
    size_t   alignment = 32;
    int64_t  n_kv      = 0;
    int64_t  n_tensors = 0;
};

extern "C" {

struct wsp_gguf_context * wsp_gguf_init_empty(void) {
    auto * ctx = new (std::nothrow) wsp_gguf_context;
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
    return ctx;
}

void wsp_gguf_free(struct wsp_gguf_context * ctx) {
    delete ctx;
}

uint32_t wsp_gguf_get_version(const struct wsp_gguf_context * ctx) {
    return ctx->version;
}

size_t wsp_gguf_get_alignment(const struct wsp_gguf_context * ctx) {
    return ctx->alignment;
}

int64_t wsp_gguf_get_n_kv(const struct wsp_gguf_context * ctx) {
    return ctx->n_kv;
}

int64_t wsp_gguf_get_n_tensors(const struct wsp_gguf_context * ctx) {
    return ctx->n_tensors;
}

} // extern "C"
