// Split mat-mul over 1, 2 and 4 sim devices: y = W x with W (F16, K x N) spread evenly over the
// devices by a split buffer, scheduled with the CPU last. Reports the time per evaluation and the
// bytes the devices copied per evaluation (activations to each device holding rows, slices of y
// back to the main device). Sim devices run the CPU kernels on one thread each, so on a machine
// with fewer cores than devices the time measures the scheduling more than the parallelism.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int64_t K = 1024, N = 4096, M = 32;

void BM_split_mul_mat(benchmark::State & state) {
    const int              n_dev = (int) state.range(0);
    wsp_ggml_backend_reg_t reg   = wsp_ggml_backend_sim_register(4, 256);
    std::vector<float>     split(4, 0.0f);
    for (int d = 0; d < n_dev; ++d) {
        split[(size_t) d] = 1.0f;
    }
    std::vector<wsp_ggml_backend_t> backends;
    for (int d = 0; d < n_dev; ++d) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, (size_t) d);
        wsp_ggml_backend_sim_set_delay_us(dev, 0);
        backends.push_back(wsp_ggml_backend_dev_init(dev, nullptr));
    }
    backends.push_back(wsp_ggml_backend_cpu_init());

    wsp_ggml_init_params      wp   = { 4 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *        wctx = wsp_ggml_init(wp);
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F16, K, N);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_sim_split_buffer_type(0, split.data()));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<wsp_ggml_fp16_t>          wv((size_t) (K * N));
    std::mt19937                          rng(1);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    for (auto & h : wv) {
        h = wsp_ggml_fp32_to_fp16(dist(rng));
    }
    wsp_ggml_backend_tensor_set(w, wv.data(), 0, wv.size() * sizeof(wsp_ggml_fp16_t));

    wsp_ggml_init_params p   = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, x);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 64, false, false);
    wsp_ggml_backend_sched_alloc_graph(s, g);
    std::vector<float> xv((size_t) (K * M), 0.5f);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

    size_t copied = 0;
    for (auto _ : state) {
        const size_t before = wsp_ggml_backend_sim_bytes_copied();
        wsp_ggml_backend_sched_graph_compute(s, g);
        copied += wsp_ggml_backend_sim_bytes_copied() - before;
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * K * N * M * (double) state.iterations() * 1e-9, benchmark::Counter::kIsRate);
    state.counters["KiB_copied"] = (double) copied / (double) state.iterations() / 1024.0;
    state.counters["splits"]     = wsp_ggml_backend_sched_get_n_splits(s);

    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
    for (wsp_ggml_backend_t b : backends) {
        wsp_ggml_backend_free(b);
    }
}

BENCHMARK(BM_split_mul_mat)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

} // namespace

BENCHMARK_MAIN();
