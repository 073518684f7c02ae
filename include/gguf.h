#pragma once

// GGUF model-file container. For now only an empty context can be created; reading and
// writing files comes with the model-loading work.

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WSP_GGUF_VERSION 3

struct wsp_gguf_context;

WSP_GGML_API struct wsp_gguf_context * wsp_gguf_init_empty(void);
WSP_GGML_API void                      wsp_gguf_free(struct wsp_gguf_context * ctx);

WSP_GGML_API uint32_t wsp_gguf_get_version    (const struct wsp_gguf_context * ctx);
WSP_GGML_API size_t   wsp_gguf_get_alignment  (const struct wsp_gguf_context * ctx);
WSP_GGML_API int64_t  wsp_gguf_get_n_kv       (const struct wsp_gguf_context * ctx);
WSP_GGML_API int64_t  wsp_gguf_get_n_tensors  (const struct wsp_gguf_context * ctx);

#ifdef __cplusplus
}
#endif
