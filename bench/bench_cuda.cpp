// CUDA backend benches: mul_mat TFLOP/s for F32, F16 and BF16 weights at whisper shapes, next to
// cuBLAS called directly on the same shapes and types in the same run (the ratio is the
// backend's overhead: activation conversion and dispatch), and copy bandwidth host<->device
// (pinned) and device<->device. Without a GPU every case reports an error and nothing runs.

#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int64_t K = 1280, N = 5120;

bool have_gpu(benchmark::State & state) {
    if (wsp_ggml_backend_cuda_get_device_count() == 0) {
        state.SkipWithError("no CUDA device");
        return false;
    }
    return true;
}

void BM_backend_mul_mat(benchmark::State & state) {
    if (!have_gpu(state)) {
        return;
    }
    const wsp_ggml_type  type = (wsp_ggml_type) state.range(0);
    const int64_t        M    = state.range(1);
    wsp_ggml_backend_t   be   = wsp_ggml_backend_cuda_init(0);
    wsp_ggml_init_params p    = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx  = wsp_ggml_init(p);
    wsp_ggml_tensor *    w    = wsp_ggml_new_tensor_2d(ctx, type, K, N);
    wsp_ggml_tensor *    x    = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
    wsp_ggml_tensor *    y    = wsp_ggml_mul_mat(ctx, w, x);
    wsp_ggml_cgraph *    g    = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(ctx, be);
    wsp_ggml_backend_buffer_clear(buf, 0);
    for (auto _ : state) {
        wsp_ggml_backend_graph_compute(be, g);
    }
    state.counters["TFLOP/s"] =
        benchmark::Counter(2.0 * K * N * M * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(be);
}

void BM_cublas_direct(benchmark::State & state) {
    if (!have_gpu(state)) {
        return;
    }
    const int          t  = (int) state.range(0);
    const int64_t      M  = state.range(1);
    const cudaDataType dt = t == WSP_GGML_TYPE_F16 ? CUDA_R_16F : t == WSP_GGML_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const size_t       es = t == WSP_GGML_TYPE_F32 ? 4 : 2;
    void *             a = nullptr, *b = nullptr, *c = nullptr;
    cudaMalloc(&a, K * N * es);
    cudaMalloc(&b, K * M * es);
    cudaMalloc(&c, N * M * 4);
    cudaMemset(a, 0, K * N * es);
    cudaMemset(b, 0, K * M * es);
    cublasHandle_t h;
    cublasCreate(&h);
    const float alpha = 1.0f, beta = 0.0f;
    for (auto _ : state) {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, (int) M, (int) K, &alpha, a, dt, (int) K, b, dt, (int) K,
                     &beta, c, CUDA_R_32F, (int) N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cudaDeviceSynchronize();
    }
    state.counters["TFLOP/s"] =
        benchmark::Counter(2.0 * K * N * M * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

void BM_copy(benchmark::State & state) {
    if (!have_gpu(state)) {
        return;
    }
    const int    kind  = (int) state.range(0); // 0 host->device, 1 device->host, 2 device->device
    const size_t bytes = (size_t) 256 << 20;
    void *       host  = nullptr;
    void *       d0 = nullptr, *d1 = nullptr;
    cudaMallocHost(&host, bytes);
    cudaMalloc(&d0, bytes);
    cudaMalloc(&d1, bytes);
    for (auto _ : state) {
        if (kind == 0) {
            cudaMemcpy(d0, host, bytes, cudaMemcpyHostToDevice);
        } else if (kind == 1) {
            cudaMemcpy(host, d0, bytes, cudaMemcpyDeviceToHost);
        } else {
            cudaMemcpy(d1, d0, bytes, cudaMemcpyDeviceToDevice);
        }
    }
    state.counters["GB/s"] = benchmark::Counter((double) bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    cudaFreeHost(host);
    cudaFree(d0);
    cudaFree(d1);
}

void shapes(benchmark::internal::Benchmark * b) {
    for (int t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 }) {
        for (int m : { 1, 8, 1500 }) {
            b->Args({ t, m });
        }
    }
}

BENCHMARK(BM_backend_mul_mat)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cublas_direct)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_copy)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
