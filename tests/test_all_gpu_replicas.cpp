// Results kept on the members between graphs (Note [member replicas] in
// src/allgpu/replicas.cpp), over sims. Each case runs in a process of its own (ctest).

#include "all_gpu_tp_util.h"
#include "test_util.h"

#include "ggml-alloc.h"
#include "ggml-all-gpu.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <vector>

namespace wsp::test {
namespace {

// Note [member replicas] (src/allgpu/replicas.cpp): graph A ends in a result every member
// computes whole (W2 (W1 x) + x, the all-reduce then the residual), graph B reads it (W3 y, y a
// view of A's tensor, as whisper.cpp's encoder reads its front end's). Over 3 sims B finds y on
// every member and is sent nothing; a write to y from the host, or by another graph, makes the
// members' copies stale and B is sent y again, and reads the new bytes.
TEST(AllGpuTensorParallel, ResultsKeptOnMembersUntilWritten) {
    ASSERT_NE(wsp_ggml_backend_sim_register(3, 256), nullptr);
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name("SIM_All");
    ASSERT_NE(all, nullptr);
    constexpr int64_t              K = 24, N = 48, T = 5;
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(all);
    wsp_ggml_context *             wctx = wsp_ggml_init({ 3 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *              W1   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, N);
    wsp_ggml_tensor *              W2   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, K);
    wsp_ggml_tensor *              W3   = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, N);
    wsp_ggml_backend_buffer_t      wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> w1 = random_values((size_t) (K * N), 11), w2 = random_values((size_t) (K * N), 12),
                             w3 = random_values((size_t) (K * N), 13), xv = random_values((size_t) (K * T), 14);
    wsp_ggml_backend_tensor_set(W1, w1.data(), 0, w1.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(W2, w2.data(), 0, w2.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(W3, w3.data(), 0, w3.size() * sizeof(float));
    // W a [rows, cols] row-major weight times v [cols, T]
    auto mul = [](const std::vector<float> & W, const std::vector<double> & v, int64_t rows, int64_t cols) {
        std::vector<double> o((size_t) (rows * T));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < cols; ++c) {
                    o[(size_t) (t * rows + r)] += (double) W[(size_t) (r * cols + c)] * v[(size_t) (t * cols + c)];
                }
            }
        }
        return o;
    };
    const std::vector<double> xd(xv.begin(), xv.end());
    std::vector<double>       y_ref = mul(w2, mul(w1, xd, N, K), K, N);
    for (size_t i = 0; i < y_ref.size(); ++i) {
        y_ref[i] += xd[i];
    }

    wsp_ggml_backend_t backend = wsp_ggml_backend_dev_init(all, nullptr);
    // graph A, in memory of its own (as whisper.cpp's front end, by a scheduler of its own)
    wsp_ggml_context * actx =
        wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(actx, WSP_GGML_TYPE_F32, K, T);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * y = wsp_ggml_add(actx, wsp_ggml_mul_mat(actx, W2, wsp_ggml_mul_mat(actx, W1, x)), x);
    wsp_ggml_set_output(y);
    wsp_ggml_cgraph * ga = wsp_ggml_new_graph(actx);
    wsp_ggml_build_forward_expand(ga, y);
    wsp_ggml_gallocr_t aalloc = wsp_ggml_gallocr_new(buft);
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(aalloc, ga));
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    // graph B reads y, and graph C writes it (a copy of x into it)
    wsp_ggml_context * bctx =
        wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead() + 2 * wsp_ggml_graph_overhead(), nullptr, true });
    wsp_ggml_tensor * z = wsp_ggml_mul_mat(bctx, W3, wsp_ggml_view_tensor(bctx, y));
    wsp_ggml_set_output(z);
    wsp_ggml_cgraph * gb = wsp_ggml_new_graph(bctx);
    wsp_ggml_build_forward_expand(gb, z);
    wsp_ggml_gallocr_t balloc = wsp_ggml_gallocr_new(buft);
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(balloc, gb));
    wsp_ggml_cgraph * gc = wsp_ggml_new_graph(bctx);
    wsp_ggml_build_forward_expand(gc, wsp_ggml_cpy(bctx, wsp_ggml_scale(bctx, x, 2.0f), wsp_ggml_view_tensor(bctx, y)));
    wsp_ggml_gallocr_t calloc = wsp_ggml_gallocr_new(buft);
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(calloc, gc));

    const size_t y_bytes = wsp_ggml_nbytes(y);
    // runs B: its result against W3 y_expected, and what B was sent
    auto run_b = [&](const std::vector<double> & y_expected, const char * what) {
        const auto tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
        EXPECT_EQ(wsp_ggml_backend_graph_compute(backend, gb), WSP_GGML_STATUS_SUCCESS);
        const auto         tp1 = wsp_ggml_backend_all_gpu_get_traffic(all);
        std::vector<float> got((size_t) (N * T));
        wsp_ggml_backend_tensor_get(z, got.data(), 0, got.size() * sizeof(float));
        EXPECT_TRUE(all_close(got, mul(w3, y_expected, N, K), 1e-4, 1e-4, what)) << what;
        return tp1.sent - tp0.sent;
    };
    for (int round = 0; round < 2; ++round) {
        ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, ga), WSP_GGML_STATUS_SUCCESS);
        std::vector<float> yv((size_t) (K * T));
        wsp_ggml_backend_tensor_get(y, yv.data(), 0, yv.size() * sizeof(float));
        EXPECT_TRUE(all_close(yv, y_ref, 1e-4, 1e-4, "A's result"));
        EXPECT_EQ(run_b(y_ref, "B after A"), 0u) << "round " << round << ": y was sent, not found on the members";
        EXPECT_EQ(run_b(y_ref, "B again"), 0u) << "round " << round;

        // the host writes y: the members' copies are stale, B is sent the new bytes
        const std::vector<float> y2 = random_values((size_t) (K * T), 15 + round);
        wsp_ggml_backend_tensor_set(y, y2.data(), 0, y2.size() * sizeof(float));
        EXPECT_EQ(run_b(std::vector<double>(y2.begin(), y2.end()), "B after a set"), 2 * y_bytes) << "round " << round;

        // A again, then graph C writes y (2 x): stale again
        ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, ga), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(run_b(y_ref, "B after A again"), 0u);
        ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, gc), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> x2(xd);
        for (double & v : x2) {
            v *= 2.0;
        }
        EXPECT_EQ(run_b(x2, "B after C wrote y"), 2 * y_bytes) << "round " << round;
    }
    // A, B, C and B queued with no host wait between them, the members slowed unevenly: stream
    // order alone keeps each B reading the bytes of the graph before it (the sims' happens-before
    // checker sees any read of a replica not ordered after its write)
    for (size_t m = 0; m < wsp_ggml_backend_all_gpu_member_count(all); ++m) {
        wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_all_gpu_member(all, m), m == 2 ? 300 : 0);
    }
    const auto         tp0 = wsp_ggml_backend_all_gpu_get_traffic(all);
    std::vector<float> z1((size_t) (N * T)), z2(z1.size());
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend, ga), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend, gb), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_tensor_get_async(backend, z, z1.data(), 0, z1.size() * sizeof(float));
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend, gc), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(backend, gb), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_tensor_get_async(backend, z, z2.data(), 0, z2.size() * sizeof(float));
    wsp_ggml_backend_synchronize(backend);
    const auto          tp1 = wsp_ggml_backend_all_gpu_get_traffic(all);
    std::vector<double> x2(xd);
    for (double & v : x2) {
        v *= 2.0;
    }
    EXPECT_TRUE(all_close(z1, mul(w3, y_ref, N, K), 1e-4, 1e-4, "B after A, queued"));
    EXPECT_TRUE(all_close(z2, mul(w3, x2, N, K), 1e-4, 1e-4, "B after C, queued"));
    EXPECT_EQ(tp1.sent - tp0.sent, 2 * wsp_ggml_nbytes(x) + 2 * y_bytes) << "A is sent x; only the B after C is sent y";
    wsp_ggml_gallocr_free(aalloc);
    wsp_ggml_gallocr_free(balloc);
    wsp_ggml_gallocr_free(calloc);
    wsp_ggml_free(actx);
    wsp_ggml_free(bctx);
    wsp_ggml_backend_free(backend);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
}

} // namespace
} // namespace wsp::test
