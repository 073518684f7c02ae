#pragma once

// The op table: each op maps to {supported, launch}, defined side by side in the op's file under
// kernels/, so what the device claims in supports_op and what graph_compute can run cannot drift
// apart. launch enqueues on the backend's stream and returns false (logged) when it cannot.
// Each op file hands out its entry from a function: clang's HIP emits a namespace-scope constant
// on the device side too, where the host functions it points to do not exist.

#include "internal.cuh"

namespace wsp::cuda {

struct LaunchCtx {
    int          index;    // device index
    int          physical; // CUDA device id
    cudaStream_t stream;
    BackendCtx & backend;

    ScratchArena & scratch() { return *backend.scratch; } // Note [scratch arena]
};

struct OpEntry {
    bool (*supported)(const wsp_ggml_tensor * node);
    bool (*launch)(LaunchCtx & ctx, wsp_ggml_tensor * node);
};

// NULL when CUDA has no kernel for the node's op
const OpEntry * op_entry(const wsp_ggml_tensor * node);

inline bool op_supported(const wsp_ggml_tensor * node) {
    const OpEntry * e = op_entry(node);
    return e != nullptr && e->supported(node);
}

// views, reshapes and permutes only change metadata
inline bool is_noop(const wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_NONE || t->op == WSP_GGML_OP_VIEW || t->op == WSP_GGML_OP_RESHAPE ||
           t->op == WSP_GGML_OP_PERMUTE || t->op == WSP_GGML_OP_TRANSPOSE;
}

} // namespace wsp::cuda
