#pragma once

// The small questions every layer asks of a tensor (the scheduler, the buffers, the all-GPU
// device's planner and runner), answered once: is it a view op, whose memory it is, which buffer
// holds it, is it a weight.

#include "ggml-backend.h"
#include "ggml.h"

namespace wsp {

// ops that make a view of their source and compute nothing
inline bool is_view_op(wsp_ggml_op op) {
    return op == WSP_GGML_OP_VIEW || op == WSP_GGML_OP_RESHAPE || op == WSP_GGML_OP_PERMUTE ||
           op == WSP_GGML_OP_TRANSPOSE;
}

inline bool is_view_op(const wsp_ggml_tensor * t) {
    return is_view_op(t->op);
}

// the tensor that owns the memory of t (t itself unless t is a view)
inline const wsp_ggml_tensor * storage_of(const wsp_ggml_tensor * t) {
    return t->view_src != nullptr ? t->view_src : t;
}

// the buffer that holds t's bytes (a view's source's), NULL where t is not allocated
inline wsp_ggml_backend_buffer_t buffer_of(const wsp_ggml_tensor * t) {
    return storage_of(t)->buffer;
}

// t lives in a buffer of weights
inline bool is_weight(const wsp_ggml_tensor * t) {
    return t->buffer != nullptr &&
           wsp_ggml_backend_buffer_get_usage(t->buffer) == WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

} // namespace wsp
