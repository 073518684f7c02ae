// CUDA op benches through the backend, at whisper (large) shapes: mul_mat TFLOP/s with Q8_0 and
// Q4_0 weights next to F16 weights (cuBLAS) on the same shapes, across the dot/GEMM threshold;
// flash_attn_ext TFLOP/s for the encoder (1500 x 1500) and a decoder step (1 x 1500); soft_max,
// add, the F32 -> F16 / BF16 activation conversion, same-type strided copies, GELU / SCALE and a
// bias add in GB/s with the fraction of the H200's copy bandwidth. Each iteration queues RUNS graph
// computes and waits once, so launch latency is amortised as in a real decode loop. Without a GPU
// every case reports an error and nothing runs.

#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include <benchmark/benchmark.h>

#include <functional>
#include <string>

namespace {

constexpr int     RUNS           = 20;     // graph computes per timed iteration
constexpr double  H200_COPY_GBPS = 4300.0; // device-to-device copy, read + write counted
constexpr int64_t K = 1280, N = 5120;      // whisper large: d_model x 4 d_model

// one graph on CUDA device 0 with zeroed inputs; empty when there is no GPU
class CudaGraph {
public:
    CudaGraph(benchmark::State & state, const std::function<wsp_ggml_tensor *(wsp_ggml_context *)> & build) {
        if (wsp_ggml_backend_cuda_get_device_count() == 0) {
            state.SkipWithError("no CUDA device");
            return;
        }
        be_                    = wsp_ggml_backend_cuda_init(0);
        wsp_ggml_init_params p = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
        ctx_                   = wsp_ggml_init(p);
        graph_                 = wsp_ggml_new_graph(ctx_);
        wsp_ggml_build_forward_expand(graph_, build(ctx_));
        buf_ = wsp_ggml_backend_alloc_ctx_tensors(ctx_, be_);
        if (buf_ == nullptr) {
            state.SkipWithError("cannot allocate the graph on CUDA0");
            return;
        }
        wsp_ggml_backend_buffer_clear(buf_, 0);
        ok_ = wsp_ggml_backend_graph_compute(be_, graph_) == WSP_GGML_STATUS_SUCCESS; // warm-up
        if (!ok_) {
            state.SkipWithError("graph compute failed");
        }
    }
    ~CudaGraph() {
        wsp_ggml_backend_buffer_free(buf_);
        wsp_ggml_free(ctx_);
        wsp_ggml_backend_free(be_);
    }
    CudaGraph(const CudaGraph &)             = delete;
    CudaGraph & operator=(const CudaGraph &) = delete;

    bool ok() const { return ok_; }

    // RUNS computes, then wait for them
    void run() {
        for (int i = 0; i < RUNS; ++i) {
            wsp_ggml_backend_graph_compute_async(be_, graph_);
        }
        wsp_ggml_backend_synchronize(be_);
    }

private:
    wsp_ggml_backend_t        be_    = nullptr;
    wsp_ggml_context *        ctx_   = nullptr;
    wsp_ggml_cgraph *         graph_ = nullptr;
    wsp_ggml_backend_buffer_t buf_   = nullptr;
    bool                      ok_    = false;
};

void time_graph(benchmark::State & state, CudaGraph & g, double work, const char * unit, double peak) {
    if (!g.ok()) {
        return;
    }
    for (auto _ : state) {
        g.run();
    }
    state.counters[unit] = benchmark::Counter(work * RUNS, benchmark::Counter::kIsIterationInvariantRate);
    if (peak > 0.0) {
        // per-run time is elapsed / (iterations * RUNS); this is the share of peak bandwidth
        state.counters["of_peak"] =
            benchmark::Counter(work * RUNS / peak, benchmark::Counter::kIsIterationInvariantRate);
    }
}

// dst[N, M] = W[K, N]^T x[K, M], W quantized (dot path for M <= 8, dequantize + cuBLAS above) or F16
void BM_mul_mat(benchmark::State & state) {
    const auto    type = (wsp_ggml_type) state.range(0);
    const int64_t M    = state.range(1);
    CudaGraph     g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(ctx, type, K, N);
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
        return wsp_ggml_mul_mat(ctx, w, x);
    });
    state.SetLabel(wsp_ggml_type_name(type));
    time_graph(state, g, 2.0 * K * N * M * 1e-12, "TFLOP/s", 0.0);
}

void mul_mat_shapes(benchmark::internal::Benchmark * b) {
    for (int t : { WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_F16 }) {
        // 1, 8, 1500 are whisper's; 16..64 locate the dot/GEMM crossover (Note [mmq paths])
        for (int m : { 1, 8, 16, 32, 64, 1500 }) {
            b->Args({ t, m });
        }
    }
}

// q [64, n_q, 20], k/v [64, 1500, 20] F16, no mask: 4 n_q n_kv D heads flops
void BM_flash_attn(benchmark::State & state) {
    const int64_t n_q = state.range(0), n_kv = 1500, D = 64, heads = 20;
    CudaGraph     g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * q = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, D, n_q, heads);
        wsp_ggml_tensor * k = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, D, n_kv, heads);
        wsp_ggml_tensor * v = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, D, n_kv, heads);
        return wsp_ggml_flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
    });
    state.SetLabel(n_q == 1 ? "decoder step" : "encoder");
    time_graph(state, g, 4.0 * n_q * n_kv * D * heads * 1e-12, "TFLOP/s", 0.0);
}

// the encoder's unfused attention scores: soft_max over [1500, 1500, 20] F32, read once, written once
void BM_soft_max(benchmark::State & state) {
    const int64_t n = 1500, heads = 20;
    CudaGraph     g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, n, n, heads);
        return wsp_ggml_soft_max_ext(ctx, x, nullptr, 0.125f, 0.0f);
    });
    const double  bytes = 2.0 * n * n * heads * sizeof(float);
    time_graph(state, g, bytes * 1e-9, "GB/s", H200_COPY_GBPS);
}

// a residual add at the encoder's width: [1280, 1500] + [1280, 1500] F32, two reads and a write
void BM_add(benchmark::State & state) {
    const int64_t n = 1500;
    CudaGraph     g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * a = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, n);
        wsp_ggml_tensor * b = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, n);
        return wsp_ggml_add(ctx, a, b);
    });
    const double  bytes = 3.0 * K * n * sizeof(float);
    time_graph(state, g, bytes * 1e-9, "GB/s", H200_COPY_GBPS);
}

// ---- elementwise and copy kernels (cpy.cu, unary.cu, binary.cu, scale.cu): GB/s read + written

constexpr int64_t T = 1500, HEADS = 20, HEAD_DIM = 64; // whisper large's encoder: frames, heads

double bytes_of(wsp_ggml_type type, int64_t n) {
    return (double) wsp_ggml_row_size(type, n);
}

// the activation conversion that mul_mat does for F16 / BF16 weights (Note [vector conversion]),
// as a cast of [1280, 1500] F32: 0 contiguous (one row of vectors), 1 the heads of Q permuted
// ([64, 1500, 20] rows 256 bytes apart: vectors per row), 2 transposed (element by element)
void BM_convert(benchmark::State & state) {
    const auto to     = (wsp_ggml_type) state.range(0);
    const int  layout = (int) state.range(1);
    CudaGraph  g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, T);
        if (layout == 1) {
            x = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, x, HEAD_DIM, HEADS, T), 0, 2, 1, 3);
        } else if (layout == 2) {
            x = wsp_ggml_transpose(ctx, x);
        }
        return wsp_ggml_cast(ctx, x, to);
    });
    state.SetLabel(std::string("f32 -> ") + wsp_ggml_type_name(to) +
                   (layout == 0   ? " contiguous"
                    : layout == 1 ? " heads permuted"
                                  : " transposed"));
    time_graph(state, g, (bytes_of(WSP_GGML_TYPE_F32, K * T) + bytes_of(to, K * T)) * 1e-9, "GB/s", H200_COPY_GBPS);
}

// same-type copies in words (Note [word copies]): the heads of the attention output merged back
// (cont of [64, 20, 1500] permuted: rows of 64 elements, 16-byte words), and a transpose (one word
// per element)
void BM_copy_same_type(benchmark::State & state) {
    const auto type       = (wsp_ggml_type) state.range(0);
    const bool transposed = state.range(1) != 0;
    CudaGraph  g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_3d(ctx, type, HEAD_DIM, T, HEADS);
        return wsp_ggml_cont(ctx, transposed ? wsp_ggml_transpose(ctx, x) : wsp_ggml_permute(ctx, x, 0, 2, 1, 3));
    });
    state.SetLabel(std::string(wsp_ggml_type_name(type)) + (transposed ? " transposed" : " heads merged"));
    time_graph(state, g, 2.0 * bytes_of(type, HEAD_DIM * T * HEADS) * 1e-9, "GB/s", H200_COPY_GBPS);
}

// a unary op over the MLP's hidden activation ([5120, 1500]): 0 GELU, 1 SCALE
void BM_unary(benchmark::State & state) {
    const auto    type = (wsp_ggml_type) state.range(0);
    const bool    gelu = state.range(1) == 0;
    const int64_t n    = N * T;
    CudaGraph     g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, type, N, T);
        return gelu ? wsp_ggml_gelu(ctx, x) : wsp_ggml_scale(ctx, x, 0.125f);
    });
    state.SetLabel(std::string(gelu ? "gelu " : "scale ") + wsp_ggml_type_name(type));
    time_graph(state, g, 2.0 * bytes_of(type, n) * 1e-9, "GB/s", H200_COPY_GBPS);
}

// a bias added to [1280, 1500] (b broadcast over the rows), F32 bias whatever the activation type
void BM_add_bias(benchmark::State & state) {
    const auto type = (wsp_ggml_type) state.range(0);
    CudaGraph  g(state, [&](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, type, K, T);
        wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, K);
        return wsp_ggml_add(ctx, x, b);
    });
    state.SetLabel(wsp_ggml_type_name(type));
    time_graph(state, g, 2.0 * bytes_of(type, K * T) * 1e-9, "GB/s", H200_COPY_GBPS);
}

BENCHMARK(BM_mul_mat)->Apply(mul_mat_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_flash_attn)->Arg(1500)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_soft_max)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_add)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_convert)
    ->ArgsProduct({ { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 }, { 0, 1, 2 } })
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_copy_same_type)
    ->ArgsProduct({ { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }, { 0, 1 } })
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_unary)
    ->ArgsProduct({ { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }, { 0, 1 } })
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_add_bias)->Arg(WSP_GGML_TYPE_F32)->Arg(WSP_GGML_TYPE_F16)->UseRealTime()->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
