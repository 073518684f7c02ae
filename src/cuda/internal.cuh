#pragma once

// The CUDA backend's objects shared between its files: per-device context (buffer type and
// device handle), buffers, and the backend (one stream, created lazily, with its cuBLAS handle).

#include "ggml-backend-impl.h"
#include "ggml-cuda.h"

#include "counters.cuh"
#include "device.cuh"
#include "graph.cuh"
#include "handles.cuh"

#include <memory>

namespace wsp::cuda {

struct BufferCtx {
    int          index; // device index
    DeviceMemory memory;
};

struct BackendCtx {
    int    index;
    int    physical;
    Stream stream_owner;
#if WSP_GPU_HAS_BLAS
    DeviceMemory blas_workspace; // given to cuBLAS so that its calls can be captured
    BlasHandle   blas_owner;     // after its workspace: destroyed before it is freed
#endif
    Event                         copy_done; // recorded after an outgoing device-to-device copy
    std::unique_ptr<ScratchArena> scratch;   // Note [scratch arena]; freed before the stream
    std::unique_ptr<GraphCache>   graphs;    // Note [CUDA graphs]

    // null when the stream cannot be created (logged)
    cudaStream_t stream();
#if WSP_GPU_HAS_BLAS
    // null when cuBLAS cannot be set up (logged)
    cublasHandle_t blas();
#endif
};

wsp_ggml_backend_reg_t         reg();
wsp_ggml_backend_dev_t         device(int index);
wsp_ggml_backend_buffer_type_t buffer_type_of(int index);

bool is_cuda_buffer(wsp_ggml_backend_buffer_t buffer);
bool is_cuda_buffer_type(wsp_ggml_backend_buffer_type_t buft);
int  buffer_device(wsp_ggml_backend_buffer_t buffer); // device index

bool         is_cuda_backend(wsp_ggml_backend_t backend);
BackendCtx & backend_ctx(wsp_ggml_backend_t backend);

wsp_ggml_backend_t             backend_init(int index);
wsp_ggml_backend_buffer_type_t host_buffer_type();

// the reg's proc "wsp_ggml_backend_all_reduce" (Note [NCCL all-reduce])
bool all_reduce(wsp_ggml_backend_t * backends, wsp_ggml_tensor ** tensors, int n);

// the device memory of a tensor (views resolve to their source)
inline wsp_ggml_backend_buffer_t storage_buffer(const wsp_ggml_tensor * t) {
    return t->view_src ? t->view_src->buffer : t->buffer;
}

} // namespace wsp::cuda
