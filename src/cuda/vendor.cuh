#pragma once

// Note [vendors]: the GPU sources have one vendor header per target, and this is the only place
// that picks one. cuda (nvcc and the toolkit), host (g++ and src/host_target: the CUDA runtime,
// cuBLAS, NCCL and the device built-ins emulated on CPU threads and fibers, Note [host target])
// and hip (clang -x hip, the HIP runtime, hipBLAS and RCCL where found: src/hip/vendor.cuh). Each provides the CUDA
// names (the runtime, cuBLAS, NCCL when built with it, the device built-ins, __half / __nv_bfloat16) and, under names
// of our own:
//   WSP_GPU_WARP_SIZE, wsp_lane_mask_t, WSP_GPU_FULL_MASK   the warp and its lane masks
//   WSP_GPU_HAS_MMA_M16N8K16                                 mma.sync m16n8k16 F16 -> F32 exists
//   WSP_GPU_HAS_BLAS                                         cuBLAS's names exist (cuBLAS, hipBLAS);
//                                                           0: our own GEMM serves every float mat-mul
//   WSP_GPU_BLAS_SET_WORKSPACE                               the BLAS takes a workspace of ours
//   wsp::gpu::blas_available()                               the BLAS could be loaded (cuda opens
//                                                           cuBLAS on first use, Note [lazy cuBLAS])
//   WSP_GPU_HAS_MEMCPY_3D_PEER                               cudaMemcpy3DPeerAsync exists
//   WSP_DYNAMIC_SHARED(type, name)                          the block's dynamic shared memory
//   wsp::gpu::enqueue_kernel(kernel, grid, block, shmem, stream, args...)   the one kernel launch
//                                                           (through wsp::gpu::launch, counters.cuh)
//   wsp::gpu::mma_m16n8k16_f32_f16(d, a, b0, b1)            one warp's tensor-core tile
//   wsp::gpu::graph_exec_update(exec, graph)                a graph's parameters into an exec
//   wsp::gpu::note_accesses(stream, node)                   the bytes a node's kernels touch (false:
//                                                           memory the device cannot reach)
// Kernels and runtime code test these feature names, never the vendor.

#if defined(WSP_GGML_CUDA_HOST)
#    include "vendor/host.cuh"
#elif defined(WSP_GGML_USE_HIP)
#    include "../hip/vendor.cuh"
#else
#    include "vendor/cuda.cuh"
#endif
