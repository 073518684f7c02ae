#pragma once

// The hip vendor (Note [vendors] in src/cuda/vendor.cuh): clang -x hip compiles the GPU sources
// for AMD GPUs against the HIP runtime (ROCm 5.2 as Debian packages it, up to ROCm 7), hipBLAS
// where it was found (WSP_GGML_USE_HIPBLAS) and RCCL where it was found (WSP_GGML_USE_NCCL).
// This file is the project's only CUDA-to-HIP name mapping: the sources keep the CUDA names and
// every one of them that HIP spells differently is defined here.
//
// Note [HIP warp size]: AMD's warp (wavefront) is 64 lanes on GCN and CDNA (gfx9: MI100, MI200,
// MI300) and 32 on RDNA (gfx10 and later). Host code sizes launches by it, so it is one number
// per build: CMake derives WSP_HIP_WARP_SIZE from the target list (which may not mix the two
// kinds) and the device pass checks it against the compiler's.

#include "ggml.h"

#ifndef HIP_ENABLE_WARP_SYNC_BUILTINS
#    define HIP_ENABLE_WARP_SYNC_BUILTINS 1 // ROCm >= 6.2: the __shfl_*_sync forms (no effect before)
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#ifdef WSP_GGML_USE_HIPBLAS
#    ifndef HIPBLAS_V2
#        define HIPBLAS_V2 // hipBLAS 2 (ROCm 6): hipDataType and hipblasComputeType_t, as cuBLAS has them
#    endif
#    include <hipblas/hipblas.h>
#endif
#ifdef WSP_GGML_USE_NCCL
#    include <rccl/rccl.h> // RCCL keeps NCCL's names
#endif

#include <cstdint>
#include <utility>

// ---- the warp (Note [HIP warp size])
#if !defined(WSP_HIP_WARP_SIZE) || (WSP_HIP_WARP_SIZE != 32 && WSP_HIP_WARP_SIZE != 64)
#    error "WSP_HIP_WARP_SIZE must be 32 or 64 (CMake sets it from the GPU targets)"
#endif
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != WSP_HIP_WARP_SIZE
#    error "this GPU target's wavefront differs from WSP_HIP_WARP_SIZE: build wave32 and wave64 targets separately"
#endif
#define WSP_GPU_WARP_SIZE WSP_HIP_WARP_SIZE
typedef unsigned long long wsp_lane_mask_t; // HIP's lane masks are 64 bits wide on every target
#if WSP_HIP_WARP_SIZE == 64
#    define WSP_GPU_FULL_MASK 0xffffffffffffffffull
#else
#    define WSP_GPU_FULL_MASK 0xffffffffull
#endif

// ---- features the kernels and the runtime code test
#define WSP_GPU_HAS_MMA_M16N8K16   0 // AMD's matrix cores have other shapes: the vector flash attention serves
#define WSP_GPU_HAS_MEMCPY_3D_PEER 0 // peer copies of rows go through hipMemcpy2DAsync (one address space)
#ifdef WSP_GGML_USE_HIPBLAS
#    define WSP_GPU_HAS_BLAS           1
#    define WSP_GPU_BLAS_SET_WORKSPACE 0 // rocBLAS manages its own workspace
#else
#    define WSP_GPU_HAS_BLAS           0 // our own GEMM (kernels/gemm.cu) serves every float mat-mul
#    define WSP_GPU_BLAS_SET_WORKSPACE 0
#endif

#define WSP_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

// ---- warp shuffles: ROCm 6.2 and later have the _sync forms (64-bit masks); older HIP has only
// the maskless ones, which are what the masked forms mean on lanes that run in lock step
#if HIP_VERSION < 60200000
#    define __shfl_xor_sync(mask, var, lane_mask, ...) __shfl_xor((var), (lane_mask), ##__VA_ARGS__)
#endif

// ---- device built-ins HIP lacks
// a.b + c over four signed bytes (host and device: tests/test_hip_vendor.cpp checks the portable form)
__host__ __device__ __forceinline__ int wsp_hip_dp4a(int a, int b, int c) {
#if defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__) || defined(__gfx950__) || defined(__gfx1030__)
    return __builtin_amdgcn_sdot4(a, b, c, false); // v_dot4_i32_i8
#else
    int s = c;
    for (int i = 0; i < 32; i += 8) {
        s += (int) (int8_t) (a >> i) * (int) (int8_t) (b >> i);
    }
    return s;
#endif
}
#define __dp4a wsp_hip_dp4a

// bfloat16 as storage (the kernels convert it through float): our own type and conversions, so
// one spelling serves ROCm 5, whose hip_bfloat16 is a class, and ROCm 6+, whose __hip_bfloat16 differs
struct wsp_hip_bfloat16 {
    uint16_t bits;
};

__host__ __device__ __forceinline__ float wsp_hip_bf16_to_float(wsp_hip_bfloat16 h) {
    return __builtin_bit_cast(float, (uint32_t) h.bits << 16);
}

// round to nearest, ties to even; NaN stays NaN (quiet), as core/fp16.h rounds on the CPU
__host__ __device__ __forceinline__ wsp_hip_bfloat16 wsp_hip_float_to_bf16(float f) {
    const uint32_t u = __builtin_bit_cast(uint32_t, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return { (uint16_t) ((u >> 16) | 0x40u) };
    }
    return { (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) };
}

#define __nv_bfloat16       wsp_hip_bfloat16
#define __bfloat162float    wsp_hip_bf16_to_float
#define __float2bfloat16_rn wsp_hip_float_to_bf16

// ---- the runtime
#define cudaDataType_t                    hipDataType
#define cudaDeviceCanAccessPeer           hipDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess        hipDeviceEnablePeerAccess
#define cudaDeviceGetAttribute            hipDeviceGetAttribute
#define cudaDeviceGetDefaultMemPool       hipDeviceGetDefaultMemPool
#define cudaDeviceGetPCIBusId             hipDeviceGetPCIBusId
#define cudaDeviceProp                    hipDeviceProp_t
#define cudaDevAttrMemoryPoolsSupported   hipDeviceAttributeMemoryPoolsSupported
#define cudaError_t                       hipError_t
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaEventCreateWithFlags          hipEventCreateWithFlags
#define cudaEventDestroy                  hipEventDestroy
#define cudaEventDisableTiming            hipEventDisableTiming
#define cudaEventRecord                   hipEventRecord
#define cudaEventSynchronize              hipEventSynchronize
#define cudaEvent_t                       hipEvent_t
#define cudaFree                          hipFree
#define cudaFreeAsync                     hipFreeAsync
#define cudaFreeHost                      hipHostFree
#define cudaGetDevice                     hipGetDevice
#define cudaGetDeviceCount                hipGetDeviceCount
#define cudaGetDeviceProperties           hipGetDeviceProperties
#define cudaGetErrorString                hipGetErrorString
#define cudaGetLastError                  hipGetLastError
#define cudaGraphDestroy                  hipGraphDestroy
#define cudaGraphExecDestroy              hipGraphExecDestroy
#define cudaGraphExec_t                   hipGraphExec_t
#define cudaGraphInstantiate              hipGraphInstantiateWithFlags // (exec, graph, flags), as CUDA 12's
#define cudaGraphLaunch                   hipGraphLaunch
#define cudaGraph_t                       hipGraph_t
#define cudaHostRegister                  hipHostRegister
#define cudaHostRegisterPortable          hipHostRegisterPortable
#define cudaHostUnregister                hipHostUnregister
#define cudaMalloc                        hipMalloc
#define cudaMallocAsync                   hipMallocAsync
#define cudaMallocHost(ptr, size)         hipHostMalloc((ptr), (size), hipHostMallocDefault)
#define cudaMemAccessDesc                 hipMemAccessDesc
#define cudaMemAccessFlagsProtReadWrite   hipMemAccessFlagsProtReadWrite
#define cudaMemGetInfo                    hipMemGetInfo
#define cudaMemLocationTypeDevice         hipMemLocationTypeDevice
#define cudaMemPoolAttrReleaseThreshold   hipMemPoolAttrReleaseThreshold
#define cudaMemPoolSetAccess              hipMemPoolSetAccess
#define cudaMemPoolSetAttribute           hipMemPoolSetAttribute
#define cudaMemPool_t                     hipMemPool_t
#define cudaMemcpy2DAsync                 hipMemcpy2DAsync
#define cudaMemcpyAsync                   hipMemcpyAsync
#define cudaMemcpyDefault                 hipMemcpyDefault
#define cudaMemcpyDeviceToDevice          hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost            hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice            hipMemcpyHostToDevice
#define cudaMemcpyKind                    hipMemcpyKind
#define cudaMemcpyPeerAsync               hipMemcpyPeerAsync
#define cudaMemsetAsync                   hipMemsetAsync
#define cudaSetDevice                     hipSetDevice
#define cudaStreamBeginCapture            hipStreamBeginCapture
#define cudaStreamCaptureModeThreadLocal  hipStreamCaptureModeThreadLocal
#define cudaStreamCreateWithFlags         hipStreamCreateWithFlags
#define cudaStreamDestroy                 hipStreamDestroy
#define cudaStreamEndCapture              hipStreamEndCapture
#define cudaStreamNonBlocking             hipStreamNonBlocking
#define cudaStreamPerThread               hipStreamPerThread
#define cudaStreamSynchronize             hipStreamSynchronize
#define cudaStreamWaitEvent               hipStreamWaitEvent
#define cudaStream_t                      hipStream_t
#define cudaSuccess                       hipSuccess
#define CUDA_R_16BF                       HIP_R_16BF
#define CUDA_R_16F                        HIP_R_16F
#define CUDA_R_32F                        HIP_R_32F

// ---- hipBLAS (cuBLAS's names)
#ifdef WSP_GGML_USE_HIPBLAS
#    define cublasComputeType_t          hipblasComputeType_t
#    define cublasCreate                 hipblasCreate
#    define cublasDestroy                hipblasDestroy
#    define cublasGemmBatchedEx          hipblasGemmBatchedEx
#    define cublasGemmEx                 hipblasGemmEx
#    define cublasGemmStridedBatchedEx   hipblasGemmStridedBatchedEx
#    define cublasHandle_t               hipblasHandle_t
#    define cublasSetStream              hipblasSetStream
#    define cublasStatus_t               hipblasStatus_t
#    define CUBLAS_COMPUTE_32F           HIPBLAS_COMPUTE_32F
#    define CUBLAS_COMPUTE_32F_FAST_TF32 HIPBLAS_COMPUTE_32F // rocBLAS has no TF32: F32 products
#    define CUBLAS_GEMM_DEFAULT          HIPBLAS_GEMM_DEFAULT
#    define CUBLAS_OP_N                  HIPBLAS_OP_N
#    define CUBLAS_OP_T                  HIPBLAS_OP_T
#    define CUBLAS_STATUS_SUCCESS        HIPBLAS_STATUS_SUCCESS
#endif

namespace wsp::gpu {

// hipBLAS is linked where found (Note [lazy cuBLAS] is the cuda vendor's)
inline bool blas_available() {
    return WSP_GPU_HAS_BLAS != 0;
}

// the only kernel launch of the sources (clang's HIP takes the triple chevrons)
template <typename... P, typename... A>
inline void enqueue_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                           A &&... args) {
    kernel<<<grid, block, shmem, stream>>>(std::forward<A>(args)...);
}

// callers test WSP_GPU_HAS_MMA_M16N8K16, which is 0 here: reaching this is a bug
__device__ __forceinline__ void mma_m16n8k16_f32_f16(float (&)[4], const uint32_t (&)[4], uint32_t, uint32_t) {
    __builtin_trap();
}

// the exec takes the graph's parameters where their topologies match (HIP's signature names the
// node that differs; CUDA 12's a result struct)
inline cudaError_t graph_exec_update(cudaGraphExec_t exec, cudaGraph_t graph) {
    hipGraphNode_t           node   = nullptr;
    hipGraphExecUpdateResult result = hipGraphExecUpdateSuccess;
    return hipGraphExecUpdate(exec, graph, &node, &result);
}

// a GPU runs what it is given: nothing watches the accesses
inline bool note_accesses(cudaStream_t, const wsp_ggml_tensor *) {
    return true;
}

} // namespace wsp::gpu
