#pragma once

// The cuda vendor (Note [vendors]): nvcc, the CUDA runtime, cuBLAS and NCCL of the toolkit.

#include "ggml.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cublas_lazy.h" // cuBLAS opened on first use (Note [lazy cuBLAS])

#ifdef WSP_GGML_USE_NCCL
#    include <nccl.h>
#endif

#include <cstdint>
#include <utility>

#define WSP_GPU_WARP_SIZE 32
typedef unsigned wsp_lane_mask_t;
#define WSP_GPU_FULL_MASK 0xffffffffu

// in the device pass, the architecture decides; the host pass only needs the name to exist
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#    define WSP_GPU_HAS_MMA_M16N8K16 1
#else
#    define WSP_GPU_HAS_MMA_M16N8K16 0
#endif

#define WSP_GPU_HAS_BLAS           1
#define WSP_GPU_BLAS_SET_WORKSPACE 1
#define WSP_GPU_HAS_MEMCPY_3D_PEER 1

#define WSP_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

namespace wsp::gpu {

// the only <<<...>>> of the sources: a kernel with its launch configuration on a stream
template <typename... P, typename... A>
inline void enqueue_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                           A &&... args) {
    kernel<<<grid, block, shmem, stream>>>(std::forward<A>(args)...);
}

// d = a * b + d on one m16n8k16 tile, F16 inputs, F32 accumulators (PTX ISA "Matrix Fragments
// for mma.m16n8k16"): with g = lane / 4 and t = lane % 4, a[0..3] hold A(g, 2t..2t+1),
// A(g+8, 2t..), A(g, 2t+8..), A(g+8, 2t+8..); b0 holds B(2t..2t+1, g), b1 B(2t+8..2t+9, g);
// d[0..3] hold D(g, 2t), D(g, 2t+1), D(g+8, 2t), D(g+8, 2t+1). The lower half of each word is
// the lower index.
__device__ __forceinline__ void mma_m16n8k16_f32_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap(); // callers test WSP_GPU_HAS_MMA_M16N8K16 (and the device's compute capability)
#endif
}

// the exec takes the graph's parameters where their topologies match (CUDA 12's signature)
inline cudaError_t graph_exec_update(cudaGraphExec_t exec, cudaGraph_t graph) {
    cudaGraphExecUpdateResultInfo info{};
    return cudaGraphExecUpdate(exec, graph, &info);
}

// a GPU runs what it is given: nothing watches the accesses
inline bool note_accesses(cudaStream_t, const wsp_ggml_tensor *) {
    return true;
}

} // namespace wsp::gpu
