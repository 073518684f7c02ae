#pragma once

// The host vendor (Note [vendors], Note [host target]): g++ compiles the GPU sources against
// src/host_target, which runs kernels on CPU threads (blocks) and fibers (threads) and emulates
// the CUDA runtime, cuBLAS and NCCL on WSP_GGML_CUDA_HOST_DEVICES devices.

#include "ggml.h"

#include "../../host_target/cublas.h"
#include "../../host_target/device.h"
#include "../../host_target/half.h"
#include "../../host_target/runtime.h"
#include "../../host_target/target.h"

#ifdef WSP_GGML_USE_NCCL
#    include "../../host_target/nccl.h"
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// WSP_GPU_WARP_SIZE, wsp_lane_mask_t and WSP_GPU_FULL_MASK come from device.h
#define WSP_GPU_HAS_MMA_M16N8K16 (WSP_GPU_WARP_SIZE == 32)

#define WSP_GPU_HAS_BLAS           1 // the host target's cuBLAS subset
#define WSP_GPU_BLAS_SET_WORKSPACE 1
#define WSP_GPU_HAS_MEMCPY_3D_PEER 1

#define WSP_DYNAMIC_SHARED(type, name) type * name = static_cast<type *>(::wsp::host_target::dynamic_shared_memory())

namespace wsp::gpu {

// the BLAS is linked (Note [lazy cuBLAS] is the cuda vendor's)
inline bool blas_available() {
    return true;
}

// The arguments are converted to the kernel's parameter types when the launch is queued (as
// CUDA copies them then), and every thread of the grid calls the kernel with them.
template <typename... P, typename... A>
inline void enqueue_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                           A &&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "a kernel launch passes every parameter");
    using Params = std::tuple<std::decay_t<P>...>;
    auto params  = std::make_shared<const Params>(std::forward<A>(args)...);
    // the pointer parameters, for the runtime's ownership check (Note [argument check])
    const void * pointers[sizeof...(P) + 1] = {};
    size_t       n_pointers                 = 0;
    std::apply(
        [&](const auto &... v) {
            auto add = [&](const auto & x) {
                if constexpr (std::is_pointer_v<std::decay_t<decltype(x)>>) {
                    pointers[n_pointers++] = static_cast<const void *>(x);
                }
            };
            (add(v), ...);
        },
        *params);
    (void) ::wsp::host_target::launch_kernel(
        stream, grid, block, shmem, pointers, n_pointers, [kernel, params] { std::apply(kernel, *params); },
        __PRETTY_FUNCTION__);
}

inline void mma_m16n8k16_f32_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    ::wsp::host_target::mma_m16n8k16_f32_f16(d, a, b0, b1);
}

// the exec takes the graph's parameters where their topologies match (CUDA 12's signature;
// Note [graph update] in src/host_target/graph_capture.cpp)
inline cudaError_t graph_exec_update(cudaGraphExec_t exec, cudaGraph_t graph) {
    cudaGraphExecUpdateResultInfo info{};
    return cudaGraphExecUpdate(exec, graph, &info);
}

// "CUDA0 stream: MUL_MAT 'ffn_up'", made only when a race names it
class NodeLabel : public ::wsp::race::Label {
public:
    explicit NodeLabel(const wsp_ggml_tensor * node) : op_(wsp_ggml_op_desc(node)), name_(node->name) {}
    std::string text() const override { return "kernels of " + op_ + " '" + name_ + "'"; }

private:
    std::string op_, name_;
};

// Kernels take raw pointers, so the host target learns from the backend which bytes a node's
// kernels read (its sources) and write (itself), in stream order, for the happens-before checker.
// false (logged) when the node touches memory its device cannot reach (Note [ownership])
inline bool note_accesses(cudaStream_t stream, const wsp_ggml_tensor * node) {
    std::vector<::wsp::race::Range> reads, writes;
    for (const wsp_ggml_tensor * s : node->src) {
        if (s != nullptr && s->data != nullptr) {
            ::wsp::race::tensor_ranges(s, reads);
        }
    }
    ::wsp::race::tensor_ranges(node, writes);
    const cudaError_t err = ::wsp::host_target::note_accesses(stream, std::move(reads), std::move(writes),
                                                              std::make_shared<NodeLabel>(node));
    if (err != cudaSuccess) {
        (void) cudaGetLastError(); // reported here: not again by the next launch check
        return false;
    }
    return true;
}

} // namespace wsp::gpu
