// The CUDA backend's runtime paths that only show with several devices or particular hardware:
// a kernel reading a peer's buffer (peer access must cover it), what a device claims it
// computes (views cuBLAS refuses, BF16 GEMMs below compute capability 8.0), the NCCL
// communicators' lifetime, and a backend that frees without an error. On a GPU machine they run on
// its GPUs; in CI on the host target's emulated devices (Note [host target]).

#include "cuda_util.h"
#include "ggml-alloc.h"
#include "ggml-cuda.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// the value of a feature the CUDA reg reports ("" when it does not)
std::string cuda_feature(const char * name) {
    auto get = (wsp_ggml_backend_feature * (*) (wsp_ggml_backend_reg_t))
        wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_cuda_reg(), "wsp_ggml_backend_get_features");
    for (wsp_ggml_backend_feature * f = get ? get(wsp_ggml_backend_cuda_reg()) : nullptr; f && f->name; ++f) {
        if (std::strcmp(f->name, name) == 0) {
            return f->value;
        }
    }
    return "";
}

// Note [peer access]: once the backend has enabled it, a kernel on device 0 reads a buffer of
// device 1 directly (device buffers come from cudaMalloc, which peer access covers).
// With one device, both buffers are on it.
TEST(CudaPeer, KernelReadsAPeersBuffer) {
    REQUIRE_GPU();
    REQUIRE_PEER_ACCESS(0, wsp_ggml_backend_cuda_get_device_count() > 1 ? 1 : 0); // Note [refused capabilities]
    const int                 n     = wsp_ggml_backend_cuda_get_device_count();
    const int                 other = n > 1 ? 1 : 0;
    const int64_t             len   = 1000;
    wsp_ggml_init_params      params{ 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *        peer_ctx = wsp_ggml_init(params);
    wsp_ggml_context *        ctx      = wsp_ggml_init(params);
    wsp_ggml_tensor *         a        = wsp_ggml_new_tensor_1d(peer_ctx, WSP_GGML_TYPE_F32, len);
    wsp_ggml_tensor *         b        = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, len);
    wsp_ggml_tensor *         sum      = wsp_ggml_add(ctx, a, b);
    wsp_ggml_backend_buffer_t peer_buf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(peer_ctx, wsp_ggml_backend_cuda_buffer_type(other));
    wsp_ggml_backend_buffer_t buf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cuda_buffer_type(0));
    ASSERT_NE(peer_buf, nullptr);
    ASSERT_NE(buf, nullptr);
    const std::vector<float> va = random_values((size_t) len, 1), vb = random_values((size_t) len, 2);
    wsp_ggml_backend_tensor_set(a, va.data(), 0, len * sizeof(float));
    wsp_ggml_backend_tensor_set(b, vb.data(), 0, len * sizeof(float));

    wsp_ggml_backend_t backend = wsp_ggml_backend_cuda_init(0);
    ASSERT_NE(backend, nullptr);
    wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, sum);
    ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, graph), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> out((size_t) len);
    wsp_ggml_backend_tensor_get(sum, out.data(), 0, len * sizeof(float));
    for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(out[(size_t) i], va[(size_t) i] + vb[(size_t) i]) << "element " << i;
    }
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_backend_buffer_free(peer_buf);
    wsp_ggml_free(ctx);
    wsp_ggml_free(peer_ctx);
}

// What supports_op claims, graph_compute delivers: a mul_mat whose weight rows overlap (row
// stride below K: cuBLAS refuses lda < K) is not claimed; a BF16 weight is claimed only where
// cuBLAS has BF16 GEMMs, and then computes as the CPU does. The host target runs this once at
// compute capability 7.5 (preset cuda-host-cc75).
TEST(CudaOps, SupportClaimsHoldForOverlappingRowsAndBf16) {
    REQUIRE_GPU();
    for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(wsp_ggml_backend_cuda_reg(), (size_t) d);
        Graph                  g;
        wsp_ggml_tensor *      base = g.input(WSP_GGML_TYPE_F32, { 64 * 40 });
        wsp_ggml_tensor *      x    = g.input(WSP_GGML_TYPE_F32, { 64, 8 });
        // 32 rows of 64 values, each starting half a row after the previous one
        wsp_ggml_tensor * overlapping = wsp_ggml_view_2d(g.ctx(), base, 64, 32, 32 * sizeof(float), 0);
        wsp_ggml_tensor * y           = wsp_ggml_mul_mat(g.ctx(), overlapping, x);
        EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(dev, y)) << "lda < K";

        auto bf16 = [](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_BF16, 64, 32);
            wsp_ggml_tensor * v = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 64, 8);
            wsp_ggml_set_input(w);
            wsp_ggml_set_input(v);
            return wsp_ggml_mul_mat(ctx, w, v);
        };
        Graph probe;
        if (wsp_ggml_backend_dev_supports_op(dev, bf16(probe.ctx()))) {
            compare_with_cpu(bf16, 1e-5);
        }
    }
}

// Note [NCCL lifetime]: the communicators are made with the first CUDA backend and destroyed with
// the last, whatever WSP_GGML_CUDA_VIRTUAL_DEVICES says when it is 0 (unset: not virtual).
TEST(CudaNccl, CommunicatorsLiveWithTheBackends) {
    REQUIRE_GPU();
    setenv("WSP_GGML_CUDA_VIRTUAL_DEVICES", "0", 1); // read at the first use: ctest runs a test per process
    const char * off   = std::getenv("WSP_GGML_CUDA_NCCL");
    const int    n     = wsp_ggml_backend_cuda_get_device_count();
    const bool   nccl  = cuda_feature("NCCL") == "1" && n >= 2 && !(off != nullptr && std::atoi(off) == 0);
    const auto   made  = "NCCL: communicator over " + std::to_string(n) + " GPUs\n";
    const auto   freed = "NCCL: communicator over " + std::to_string(n) + " GPUs destroyed";
    for (int round = 0; round < 2; ++round) {
        LogCapture                      log;
        std::vector<wsp_ggml_backend_t> backends;
        for (int d = 0; d < n; ++d) {
            backends.push_back(wsp_ggml_backend_cuda_init(d));
        }
        EXPECT_EQ(log.contains(made), nccl) << "round " << round << ": " << log.text();
        EXPECT_FALSE(log.contains(freed)) << "destroyed while backends are alive";
        for (size_t i = 0; i + 1 < backends.size(); ++i) {
            wsp_ggml_backend_free(backends[i]);
        }
        EXPECT_FALSE(log.contains(freed)) << "destroyed while a backend is alive";
        wsp_ggml_backend_free(backends.back());
        EXPECT_EQ(log.contains(freed), nccl) << "round " << round << ": " << log.text();
    }
}

// A backend that ran cuBLAS frees its handle before the handle's workspace: nothing is logged as
// an error (the host target reports a handle destroyed after its workspace).
TEST(CudaBackend, FreesWithoutError) {
    REQUIRE_GPU();
    for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
        LogCapture log;
        Graph      g;
        auto *     w = g.input(WSP_GGML_TYPE_F32, { 32, 16 });
        auto *     x = g.input(WSP_GGML_TYPE_F32, { 32, 4 });
        auto *     y = wsp_ggml_mul_mat(g.ctx(), w, x);
        g.build(y);
        set_values(w, random_values(32 * 16, 3));
        set_values(x, random_values(32 * 4, 4));
        EXPECT_EQ(cuda_output(g, y, d).size(), (size_t) 16 * 4);
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    }
}

// The happens-before checker watches the CUDA backend's streams on the host target: two backends
// of one device (two streams) writing the same tensor with nothing ordering them are reported, and
// the same work ordered by a synchronize is not. (A GPU has no checker: skipped there.)
TEST(CudaRace, UnorderedBackendsWritingOneTensorAreReported) {
    REQUIRE_GPU();
    if (cuda_feature("ARCHS") != "host") {
        GTEST_SKIP() << "the happens-before checker is the host target's (Note [host target])";
    }
    wsp_ggml_init_params      params{ 8 * wsp_ggml_tensor_overhead() + 2 * wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *        ctx = wsp_ggml_init(params);
    wsp_ggml_tensor *         x   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4096);
    wsp_ggml_tensor *         y   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4096);
    wsp_ggml_backend_buffer_t buf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cuda_buffer_type(0));
    ASSERT_NE(buf, nullptr);
    const std::vector<float> v = random_values(4096, 5);
    wsp_ggml_backend_tensor_set(x, v.data(), 0, v.size() * sizeof(float));
    wsp_ggml_cgraph * g1 = wsp_ggml_new_graph(ctx);
    wsp_ggml_cgraph * g2 = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g1, wsp_ggml_cpy(ctx, wsp_ggml_add(ctx, x, x), y));
    wsp_ggml_build_forward_expand(g2, wsp_ggml_cpy(ctx, wsp_ggml_mul(ctx, x, x), y));
    // the intermediates of each graph in a compute buffer of its own
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cuda_buffer_type(0));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g1));
    wsp_ggml_gallocr_t galloc2 = wsp_ggml_gallocr_new(wsp_ggml_backend_cuda_buffer_type(0));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc2, g2));
    wsp_ggml_backend_t a = wsp_ggml_backend_cuda_init(0), b = wsp_ggml_backend_cuda_init(0);

    const size_t before = wsp_ggml_backend_sim_races();
    {
        LogCapture log; // the race is logged as an error: captured, not printed
        ASSERT_EQ(wsp_ggml_backend_graph_compute_async(a, g1), WSP_GGML_STATUS_SUCCESS) << log.text();
        ASSERT_EQ(wsp_ggml_backend_graph_compute_async(b, g2), WSP_GGML_STATUS_SUCCESS) << log.text();
        wsp_ggml_backend_synchronize(a);
        wsp_ggml_backend_synchronize(b);
        EXPECT_GT(wsp_ggml_backend_sim_races(), before) << log.text();
    }
    expected_races = wsp_ggml_backend_sim_races();

    // ordered by the host: no race, and y is the second graph's result
    ASSERT_EQ(wsp_ggml_backend_graph_compute(a, g1), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_backend_graph_compute(b, g2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_sim_races(), expected_races);
    std::vector<float> out(4096);
    wsp_ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
    for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i], v[i] * v[i]) << "element " << i;
    }
    wsp_ggml_backend_free(a);
    wsp_ggml_backend_free(b);
    wsp_ggml_gallocr_free(galloc);
    wsp_ggml_gallocr_free(galloc2);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
}

} // namespace
} // namespace wsp::test
