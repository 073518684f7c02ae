// Note [lazy cuBLAS] (src/cuda/vendor/cublas_lazy.h): the nvcc build does not load cuBLAS into a
// process until a GPU runs a float mat-mul, so a process on a machine without a GPU (or one that
// only uses the CPU) does not pay libcublasLt's resident memory. Built for the nvcc build only:
// the host target and HIP link their BLAS.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace {

// a shared object whose path contains name is mapped into this process
bool mapped(const std::string & name) {
    std::ifstream maps("/proc/self/maps");
    std::string   line;
    while (std::getline(maps, line)) {
        if (line.find(name) != std::string::npos) {
            return true;
        }
    }
    return false;
}

// out = a * b for a K x N weight of type wt and M rows of b, on the given backend
std::vector<float> mul_mat_on(wsp_ggml_backend_t backend, wsp_ggml_type wt, const std::vector<float> & a,
                              const std::vector<float> & b, int64_t K, int64_t N, int64_t M) {
    wsp_ggml_init_params ip  = { 3 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(ip);
    wsp_ggml_tensor *    ta  = wsp_ggml_new_tensor_2d(ctx, wt, K, N);
    wsp_ggml_tensor *    tb  = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
    wsp_ggml_tensor *    out = wsp_ggml_mul_mat(ctx, ta, tb);
    wsp_ggml_cgraph *    gf  = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(gf, out);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(ctx, backend);
    EXPECT_NE(buf, nullptr);
    std::vector<uint16_t> a16(a.size());
    wsp_ggml_fp32_to_fp16_row(a.data(), reinterpret_cast<wsp_ggml_fp16_t *>(a16.data()), (int64_t) a.size());
    wsp_ggml_backend_tensor_set(ta, a16.data(), 0, wsp_ggml_nbytes(ta));
    wsp_ggml_backend_tensor_set(tb, b.data(), 0, wsp_ggml_nbytes(tb));
    EXPECT_EQ(wsp_ggml_backend_graph_compute(backend, gf), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> result((size_t) (N * M));
    wsp_ggml_backend_tensor_get(out, result.data(), 0, result.size() * sizeof(float));
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    return result;
}

} // namespace

// Every registered device listed, a mat-mul on the CPU: cuBLAS is not in the process.
TEST(LazyCublas, NotLoadedByTheRegistryOrTheCpu) {
    ASSERT_GT(wsp_ggml_backend_dev_count(), 0u);
    ASSERT_NE(wsp_ggml_backend_reg_by_name("CUDA"), nullptr) << "an nvcc build registers the CUDA backend";
    const int64_t      K = 64, N = 16, M = 3;
    const auto         a   = wsp::test::random_values((size_t) (K * N), 1);
    const auto         b   = wsp::test::random_values((size_t) (K * M), 2);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    const auto out = mul_mat_on(cpu, WSP_GGML_TYPE_F16, a, b, K, N, M);
    wsp_ggml_backend_free(cpu);
    EXPECT_NE(out[0], 0.0f);
    EXPECT_FALSE(mapped("libcublas")) << "cuBLAS was loaded without a GPU mat-mul";
}

// A float mat-mul on a GPU opens cuBLAS, and its result matches the CPU's.
TEST(LazyCublas, LoadedByAGpuFloatMatMul) {
    if (wsp_ggml_backend_cuda_get_device_count() == 0) {
        GTEST_SKIP() << "no CUDA GPU here: the loading on first use needs one";
    }
    const char * own = std::getenv("WSP_GGML_CUDA_OWN_GEMM");
    if (own != nullptr && std::atoi(own) != 0) {
        GTEST_SKIP() << "WSP_GGML_CUDA_OWN_GEMM is set: float mat-muls do not use cuBLAS";
    }
    const int64_t      K = 256, N = 64, M = 24;
    const auto         a   = wsp::test::random_values((size_t) (K * N), 3);
    const auto         b   = wsp::test::random_values((size_t) (K * M), 4);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_cuda_init(0);
    ASSERT_NE(gpu, nullptr);
    const auto want = mul_mat_on(cpu, WSP_GGML_TYPE_F16, a, b, K, N, M);
    const auto got  = mul_mat_on(gpu, WSP_GGML_TYPE_F16, a, b, K, N, M);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
    EXPECT_TRUE(mapped("libcublas"));
    EXPECT_LT(wsp::test::nmse(got, want), 1e-5);
}
