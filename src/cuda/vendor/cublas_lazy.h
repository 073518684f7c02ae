#pragma once

// Note [lazy cuBLAS]: libcublasLt costs about 150 MiB of resident memory the moment it is
// loaded (its relocations and static data), which a process that links it pays on a machine
// without a GPU too: a CPU transcription became 150 MiB heavier than the ggml our clients ship.
// So the cuda vendor does not link cuBLAS: it opens libcublas.so.<major> (the toolkit's major
// version we compiled against) on the first cuBLAS call, which only a device that exists makes,
// and the sources' cuBLAS names are redirected to the wrappers below by cuda.cuh. Where the
// library cannot be opened, blas_available() is false and float mat-muls take our own GEMM,
// as WSP_GGML_CUDA_OWN_GEMM=1 would, after one logged warning.

#include <cublas_v2.h>

namespace wsp::gpu {

// cuBLAS is loaded (opens it on the first call)
bool blas_available();

cublasStatus_t blas_create(cublasHandle_t * handle);
cublasStatus_t blas_destroy(cublasHandle_t handle);
cublasStatus_t blas_set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t blas_set_workspace(cublasHandle_t handle, void * workspace, size_t bytes);
cublasStatus_t blas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void * alpha, const void * A, cudaDataType_t Atype, int lda, const void * B,
                            cudaDataType_t Btype, int ldb, const void * beta, void * C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t blas_gemm_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void * alpha, const void * const A[], cudaDataType_t Atype,
                                    int lda, const void * const B[], cudaDataType_t Btype, int ldb, const void * beta,
                                    void * const C[], cudaDataType_t Ctype, int ldc, int batchCount,
                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t blas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int m, int n, int k, const void * alpha, const void * A,
                                            cudaDataType_t Atype, int lda, long long int strideA, const void * B,
                                            cudaDataType_t Btype, int ldb, long long int strideB, const void * beta,
                                            void * C, cudaDataType_t Ctype, int ldc, long long int strideC,
                                            int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo);

} // namespace wsp::gpu

// the sources keep cuBLAS's names (Note [vendors]); these make them the wrappers
#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSetWorkspace
#define cublasCreate               wsp::gpu::blas_create
#define cublasDestroy              wsp::gpu::blas_destroy
#define cublasSetStream            wsp::gpu::blas_set_stream
#define cublasSetWorkspace         wsp::gpu::blas_set_workspace
#define cublasGemmEx               wsp::gpu::blas_gemm_ex
#define cublasGemmBatchedEx        wsp::gpu::blas_gemm_batched_ex
#define cublasGemmStridedBatchedEx wsp::gpu::blas_gemm_strided_batched_ex
