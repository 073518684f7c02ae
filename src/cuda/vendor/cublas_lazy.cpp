// The cuBLAS functions the cuda vendor calls, resolved from libcublas.so.<major> on first use
// (Note [lazy cuBLAS] in cublas_lazy.h).

#include "cublas_lazy.h"

#include "../../core/log.h"

#include <dlfcn.h>

#include <string>

namespace wsp::gpu {

namespace {

// the library's own symbols (cublas_v2.h maps the short names to the _v2 ones)
struct Api {
    decltype(&::cublasCreate_v2)            create        = nullptr;
    decltype(&::cublasDestroy_v2)           destroy       = nullptr;
    decltype(&::cublasSetStream_v2)         set_stream    = nullptr;
    decltype(&::cublasSetWorkspace_v2)      set_workspace = nullptr;
    decltype(&::cublasGemmEx)               gemm          = nullptr;
    decltype(&::cublasGemmBatchedEx)        gemm_batched  = nullptr;
    decltype(&::cublasGemmStridedBatchedEx) gemm_strided  = nullptr;
    bool                                    loaded        = false;
};

template <class F>
bool resolve(void * lib, const char * name, F & fn, const std::string & path) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (fn == nullptr) {
        WSP_LOG_WARN("CUDA: %s lacks %s: float mat-muls run on our own GEMM\n", path.c_str(), name);
    }
    return fn != nullptr;
}

Api load() {
    Api               a;
    const std::string path = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void *            lib  = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char * why = dlerror();
        WSP_LOG_WARN("CUDA: cannot load %s (%s): float mat-muls run on our own GEMM\n", path.c_str(),
                     why ? why : "unknown error");
        return a;
    }
    a.loaded = resolve(lib, "cublasCreate_v2", a.create, path) && resolve(lib, "cublasDestroy_v2", a.destroy, path) &&
               resolve(lib, "cublasSetStream_v2", a.set_stream, path) &&
               resolve(lib, "cublasSetWorkspace_v2", a.set_workspace, path) &&
               resolve(lib, "cublasGemmEx", a.gemm, path) &&
               resolve(lib, "cublasGemmBatchedEx", a.gemm_batched, path) &&
               resolve(lib, "cublasGemmStridedBatchedEx", a.gemm_strided, path);
    if (!a.loaded) {
        dlclose(lib);
        return Api{};
    }
    // kept open for the process: handles may outlive any one backend
    return a;
}

const Api & api() {
    static const Api a = load();
    return a;
}

} // namespace

bool blas_available() {
    return api().loaded;
}

cublasStatus_t blas_create(cublasHandle_t * handle) {
    return api().loaded ? api().create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t blas_destroy(cublasHandle_t handle) {
    return api().loaded ? api().destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t blas_set_stream(cublasHandle_t handle, cudaStream_t stream) {
    return api().loaded ? api().set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t blas_set_workspace(cublasHandle_t handle, void * workspace, size_t bytes) {
    return api().loaded ? api().set_workspace(handle, workspace, bytes) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t blas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void * alpha, const void * A, cudaDataType_t Atype, int lda, const void * B,
                            cudaDataType_t Btype, int ldb, const void * beta, void * C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!api().loaded) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return api().gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                      computeType, algo);
}

cublasStatus_t blas_gemm_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void * alpha, const void * const A[], cudaDataType_t Atype,
                                    int lda, const void * const B[], cudaDataType_t Btype, int ldb, const void * beta,
                                    void * const C[], cudaDataType_t Ctype, int ldc, int batchCount,
                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!api().loaded) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return api().gemm_batched(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                              batchCount, computeType, algo);
}

cublasStatus_t blas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int m, int n, int k, const void * alpha, const void * A,
                                            cudaDataType_t Atype, int lda, long long int strideA, const void * B,
                                            cudaDataType_t Btype, int ldb, long long int strideB, const void * beta,
                                            void * C, cudaDataType_t Ctype, int ldc, long long int strideC,
                                            int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!api().loaded) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return api().gemm_strided(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
                              beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

} // namespace wsp::gpu
