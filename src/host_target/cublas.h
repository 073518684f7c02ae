#pragma once

// The cuBLAS subset the CUDA backend calls (the cublas_v2 API: names, numeric codes and
// signatures of CUDA 12), for the host target. GEMMs are column-major, validated as cuBLAS
// documents, and run as host work in stream order on the handle's stream (so they are captured
// into CUDA graphs); Note [host cuBLAS] in cublas.cpp tells the numerics and what is checked.

#include <cstddef>

typedef struct CUstream_st * cudaStream_t; // as runtime.h: repeating a typedef is allowed

// library_types.h: the element types (only the real ones this project names)
typedef enum cudaDataType_t {
    CUDA_R_32F  = 0,
    CUDA_R_64F  = 1,
    CUDA_R_16F  = 2,
    CUDA_R_8I   = 3,
    CUDA_R_8U   = 8,
    CUDA_R_32I  = 10,
    CUDA_R_32U  = 12,
    CUDA_R_16BF = 14,
} cudaDataType;
typedef enum cudaDataType_t cudaDataType_t;

typedef enum {
    CUBLAS_STATUS_SUCCESS          = 0,
    CUBLAS_STATUS_NOT_INITIALIZED  = 1,
    CUBLAS_STATUS_ALLOC_FAILED     = 3,
    CUBLAS_STATUS_INVALID_VALUE    = 7,
    CUBLAS_STATUS_ARCH_MISMATCH    = 8,
    CUBLAS_STATUS_MAPPING_ERROR    = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR   = 14,
    CUBLAS_STATUS_NOT_SUPPORTED    = 15,
    CUBLAS_STATUS_LICENSE_ERROR    = 16,
} cublasStatus_t;

typedef enum {
    CUBLAS_OP_N        = 0,
    CUBLAS_OP_T        = 1,
    CUBLAS_OP_C        = 2,
    CUBLAS_OP_HERMITAN = 2,
    CUBLAS_OP_CONJG    = 3, // reserved by cuBLAS, which takes no operation of this value: rejected
} cublasOperation_t;

typedef enum {
    CUBLAS_COMPUTE_16F           = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC  = 65,
    CUBLAS_COMPUTE_32F           = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC  = 69,
    CUBLAS_COMPUTE_64F           = 70,
    CUBLAS_COMPUTE_64F_PEDANTIC  = 71,
    CUBLAS_COMPUTE_32I           = 72,
    CUBLAS_COMPUTE_32I_PEDANTIC  = 73,
    CUBLAS_COMPUTE_32F_FAST_16F  = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;

// the algorithm is a hint: every accepted value computes the same here
typedef enum {
    CUBLAS_GEMM_DEFAULT           = -1,
    CUBLAS_GEMM_ALGO0             = 0,
    CUBLAS_GEMM_ALGO23            = 23,
    CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
    CUBLAS_GEMM_DFALT_TENSOR_OP   = 99,
    CUBLAS_GEMM_ALGO0_TENSOR_OP   = 100,
    CUBLAS_GEMM_ALGO15_TENSOR_OP  = 115,
} cublasGemmAlgo_t;

typedef enum {
    CUBLAS_DEFAULT_MATH                              = 0,
    CUBLAS_TENSOR_OP_MATH                            = 1, // deprecated in cuBLAS: as the default here
    CUBLAS_PEDANTIC_MATH                             = 2,
    CUBLAS_TF32_TENSOR_OP_MATH                       = 3,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16, // a flag, or-ed with a mode
} cublasMath_t;

typedef struct cublasContext * cublasHandle_t;

// The handle belongs to the device current at creation; its default stream is the legacy one.
cublasStatus_t cublasCreate(cublasHandle_t * handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t * stream);
// null (with any size) returns to cuBLAS's own workspace; otherwise memory of the handle's device,
// 256-byte aligned, that must outlive every GEMM that uses it and the handle itself
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void * workspace, size_t workspace_size);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t * mode);
const char *   cublasGetStatusString(cublasStatus_t status);

// C = alpha op(A) op(B) + beta C; alpha and beta are host pointers (float for 32F compute types,
// __half for 16F ones)
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void * alpha, const void * A, cudaDataType Atype, int lda, const void * B,
                            cudaDataType Btype, int ldb, const void * beta, void * C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void * alpha, const void * A, cudaDataType Atype,
                                          int lda, long long int strideA, const void * B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void * beta, void * C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

// Aarray, Barray and Carray are arrays of batchCount pointers in device memory (read when the
// GEMM runs, as cuBLAS's kernels read them)
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void * alpha, const void * const Aarray[], cudaDataType Atype,
                                   int lda, const void * const Barray[], cudaDataType Btype, int ldb, const void * beta,
                                   void * const Carray[], cudaDataType Ctype, int ldc, int batchCount,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo);
