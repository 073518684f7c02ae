// Split mat-mul on sim devices: y = W x with W's rows spread evenly over n devices by a split
// buffer, scheduled with the CPU last. Two cases:
//  - from_host: W F16 K=1024 x N=4096, x (M=32) a graph input on the host, n = 1, 2, 4;
//  - from_main: W F32 1024 x 1024, x (M=128) produced on SIM0 (the main device) just before the
//    mul_mat, as inside a model, against the same mul_mat with W whole on SIM0 (n = 0 below). Here
//    the other devices' input copies must leave SIM0 before its own slice computes for the
//    devices to overlap.
// Reports the time per evaluation, the bytes the devices copied per evaluation (activations to
// each device holding rows, slices of y back to the main device) and the splits. Each sim device
// runs the CPU kernels on one thread of its own, so n devices can overlap up to the machine's
// cores (2 in CI: 4 devices share them). The peer: the same mul_mat on the CPU backend with 1
// and 2 threads, in the same run: the machine's own two-core scaling of that kernel, which bounds
// what two sim devices can reach.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

struct Case {
    wsp_ggml_type type;
    int64_t       K, N, M;
    bool          from_main; // x computed on SIM0 (else a host input)
};

void run(benchmark::State & state, const Case & c) {
    const int              n_dev = (int) state.range(0); // 0: W whole on SIM0
    wsp_ggml_backend_reg_t reg   = wsp_ggml_backend_sim_register(4, 256);
    std::vector<float>     split(4, 0.0f);
    for (int d = 0; d < std::max(n_dev, 1); ++d) {
        split[(size_t) d] = 1.0f;
    }
    std::vector<wsp_ggml_backend_t> backends;
    for (int d = 0; d < std::max(n_dev, 1); ++d) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, (size_t) d);
        wsp_ggml_backend_sim_set_delay_us(dev, 0);
        backends.push_back(wsp_ggml_backend_dev_init(dev, nullptr));
    }
    backends.push_back(wsp_ggml_backend_cpu_init());

    wsp_ggml_init_params           wp   = { 4 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *             wctx = wsp_ggml_init(wp);
    wsp_ggml_tensor *              w    = wsp_ggml_new_tensor_2d(wctx, c.type, c.K, c.N);
    wsp_ggml_backend_buffer_type_t buft = n_dev == 0
                                              ? wsp_ggml_backend_dev_buffer_type(wsp_ggml_backend_reg_dev_get(reg, 0))
                                              : wsp_ggml_backend_sim_split_buffer_type(0, split.data());
    wsp_ggml_backend_buffer_t      wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<float>                    wf((size_t) (c.K * c.N));
    std::mt19937                          rng(1);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    for (auto & v : wf) {
        v = dist(rng);
    }
    std::vector<uint8_t> wb(wsp_ggml_nbytes(w));
    wsp_ggml_get_type_traits(c.type)->from_float_ref(wf.data(), wb.data(), c.K * c.N);
    wsp_ggml_backend_tensor_set(w, wb.data(), 0, wb.size());

    wsp_ggml_init_params p   = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, c.K, c.M);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * h = c.from_main ? wsp_ggml_scale(ctx, x, 1.0f) : x;
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, h);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 64, false, false);
    if (c.from_main) {
        wsp_ggml_backend_sched_set_tensor_backend(s, h, backends[0]);
    }
    wsp_ggml_backend_sched_alloc_graph(s, g);
    std::vector<float> xv((size_t) (c.K * c.M), 0.5f);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

    size_t copied = 0;
    for (auto _ : state) {
        const size_t before = wsp_ggml_backend_sim_bytes_copied();
        wsp_ggml_backend_sched_graph_compute(s, g);
        copied += wsp_ggml_backend_sim_bytes_copied() - before;
    }
    state.counters["GFLOP/s"] = benchmark::Counter(
        2.0 * (double) (c.K * c.N * c.M) * (double) state.iterations() * 1e-9, benchmark::Counter::kIsRate);
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

void BM_split_from_host(benchmark::State & state) {
    run(state, { WSP_GGML_TYPE_F16, 1024, 4096, 32, false });
}

void BM_split_from_main(benchmark::State & state) {
    run(state, { WSP_GGML_TYPE_F32, 1024, 1024, 128, true });
}

// the ceiling: the CPU backend's own scaling from 1 to n threads on the from_main mul_mat
void BM_cpu_threads(benchmark::State & state) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, (int) state.range(0));
    wsp_ggml_init_params p   = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    w   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 1024, 1024);
    wsp_ggml_tensor *    x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 1024, 128);
    wsp_ggml_tensor *    y   = wsp_ggml_mul_mat(ctx, w, x);
    wsp_ggml_cgraph *    g   = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(ctx, cpu);
    std::vector<float>        v((size_t) 1024 * 1024, 0.01f);
    wsp_ggml_backend_tensor_set(w, v.data(), 0, wsp_ggml_nbytes(w));
    wsp_ggml_backend_tensor_set(x, v.data(), 0, wsp_ggml_nbytes(x));
    for (auto _ : state) {
        wsp_ggml_backend_graph_compute(cpu, g);
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * 1024 * 1024 * 128 * (double) state.iterations() * 1e-9, benchmark::Counter::kIsRate);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cpu);
}

BENCHMARK(BM_split_from_host)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
// Arg(0): the same graph with W whole on SIM0, the reference the split is measured against
BENCHMARK(BM_split_from_main)->Arg(0)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_cpu_threads)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

} // namespace

BENCHMARK_MAIN();
