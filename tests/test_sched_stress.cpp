// Stress: 8 schedulers on 8 threads, 1000 graphs each, over sim devices shared by all threads.
// Each graph is built anew (reset, alloc, compute) with its own input and checked against a
// double reference; no value may be wrong and no kernel may touch foreign memory.

#include "sim_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace wsp::test {
namespace {

constexpr int K = 24, H = 16, BATCH = 3;

// y = 0.5 * relu(W1 relu(W0 x + b0)) with W0, b0 on one sim device and W1 on another
struct Worker {
    int                       id;
    SimBackends *             be; // two sim backends and the CPU
    wsp_ggml_context *        wctx  = nullptr;
    wsp_ggml_backend_buffer_t b0buf = nullptr, b1buf = nullptr;
    wsp_ggml_tensor *         w0 = nullptr, *bias0 = nullptr, *w1 = nullptr;
    std::vector<float>        vw0, vb0, vw1;

    Worker(int id_, SimBackends * be_) : id(id_), be(be_) {
        wsp_ggml_init_params p = { 8 * wsp_ggml_tensor_overhead(), nullptr, true };
        wctx                   = wsp_ggml_init(p);
        w0                     = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, H);
        bias0                  = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, H);
        w1                     = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, H, H);
        // allocate W0, b0 on the first device and W1 on the second, by temporarily hiding tensors
        b0buf = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_get_default_buffer_type(be->sim(0)), 8192);
        b1buf = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_get_default_buffer_type(be->sim(1)), 4096);
        wsp_ggml_tallocr t0 = wsp_ggml_tallocr_new(b0buf), t1 = wsp_ggml_tallocr_new(b1buf);
        EXPECT_EQ(wsp_ggml_tallocr_alloc(&t0, w0), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(wsp_ggml_tallocr_alloc(&t0, bias0), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(wsp_ggml_tallocr_alloc(&t1, w1), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_buffer_set_usage(b0buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        wsp_ggml_backend_buffer_set_usage(b1buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        vw0 = random_values(K * H, 10 + (uint32_t) id);
        vb0 = random_values(H, 20 + (uint32_t) id);
        vw1 = random_values(H * H, 30 + (uint32_t) id);
        wsp_ggml_backend_tensor_set(w0, vw0.data(), 0, wsp_ggml_nbytes(w0));
        wsp_ggml_backend_tensor_set(bias0, vb0.data(), 0, wsp_ggml_nbytes(bias0));
        wsp_ggml_backend_tensor_set(w1, vw1.data(), 0, wsp_ggml_nbytes(w1));
    }
    ~Worker() {
        wsp_ggml_backend_buffer_free(b0buf);
        wsp_ggml_backend_buffer_free(b1buf);
        wsp_ggml_free(wctx);
    }

    std::vector<double> reference(const std::vector<float> & x) const {
        std::vector<double> out((size_t) H * BATCH);
        for (int m = 0; m < BATCH; ++m) {
            double h[H];
            for (int n = 0; n < H; ++n) {
                double a = vb0[(size_t) n];
                for (int k = 0; k < K; ++k) {
                    a += (double) vw0[(size_t) (n * K + k)] * x[(size_t) (m * K + k)];
                }
                h[n] = a > 0 ? a : 0;
            }
            for (int n = 0; n < H; ++n) {
                double a = 0;
                for (int k = 0; k < H; ++k) {
                    a += (double) vw1[(size_t) (n * H + k)] * h[k];
                }
                out[(size_t) (m * H + n)] = 0.5 * (a > 0 ? a : 0);
            }
        }
        return out;
    }

    // runs n graphs; returns the number of wrong results
    int run(int n) {
        wsp_ggml_backend_sched_t sched =
            wsp_ggml_backend_sched_new(be->all().data(), nullptr, 3, 64, id % 2 == 1, true);
        int wrong = 0;
        for (int it = 0; it < n; ++it) {
            wsp_ggml_init_params p   = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
            wsp_ggml_context *   ctx = wsp_ggml_init(p);
            wsp_ggml_tensor *    x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, BATCH);
            wsp_ggml_set_input(x);
            wsp_ggml_tensor * h = wsp_ggml_relu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w0, x), bias0));
            wsp_ggml_tensor * y = wsp_ggml_scale(ctx, wsp_ggml_relu(ctx, wsp_ggml_mul_mat(ctx, w1, h)), 0.5f);
            wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
            wsp_ggml_build_forward_expand(g, y);
            wsp_ggml_backend_sched_reset(sched);
            bool                     ok = wsp_ggml_backend_sched_alloc_graph(sched, g);
            const std::vector<float> xv = random_values(K * BATCH, (uint32_t) (1000 * id + it));
            if (ok) {
                wsp_ggml_backend_tensor_set(x, xv.data(), 0, wsp_ggml_nbytes(x));
                ok = wsp_ggml_backend_sched_graph_compute(sched, g) == WSP_GGML_STATUS_SUCCESS;
            }
            std::vector<float> out((size_t) H * BATCH);
            if (ok) {
                wsp_ggml_backend_tensor_get(y, out.data(), 0, wsp_ggml_nbytes(y));
            }
            if (!ok || nmse(out, reference(xv)) > 1e-10) {
                ++wrong;
            }
            wsp_ggml_free(ctx);
        }
        wsp_ggml_backend_sched_free(sched);
        return wrong;
    }
};

TEST(SchedStress, EightSchedulersEightThreads) {
    ForeignAccessGuard       guard;
    constexpr int            N_THREADS = 8, N_GRAPHS = 1000;
    std::atomic<int>         wrong{ 0 };
    std::vector<std::thread> threads;
    for (int t = 0; t < N_THREADS; ++t) {
        threads.emplace_back([t, &wrong] {
            // the thread's own streams on two of the shared devices, and its own CPU backend
            SimBackends be({ t % SIM_DEVICES, (t + 1) % SIM_DEVICES }, 0, 1);
            Worker      w(t, &be);
            wrong += w.run(N_GRAPHS);
        });
    }
    for (std::thread & th : threads) {
        th.join();
    }
    EXPECT_EQ(wrong.load(), 0);
}

} // namespace
} // namespace wsp::test
