// MUL_MAT throughput of the CPU backend through the public API (graph, backend allocation,
// wsp_ggml_backend_graph_compute with 2 threads), next to OpenBLAS cblas_sgemm with 2 threads
// on the same shapes. Every figure is the best of N repetitions (the machine is shared): Google
// Benchmark's table, then a summary with ratios to sgemm, also written as JSON.
//   bench_mul_mat [--json=FILE] [--reps=N] [Google Benchmark flags]

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <benchmark/benchmark.h>

#if defined(WSP_BENCH_OPENBLAS)
#    include <cblas.h>
#endif

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace wsp::bench {

namespace {

constexpr int THREADS = 2;

struct Shape {
    const char *  name;
    int64_t       K, N, M;
    wsp_ggml_type b_type;
};

// whisper's encoder projection, its decoder steps, and a conv1d through im2col
const std::vector<Shape> & shapes() {
    static const std::vector<Shape> s = {
        { "encoder", 1280, 5120, 1500, WSP_GGML_TYPE_F32 }, { "decoder_M1", 1280, 5120, 1, WSP_GGML_TYPE_F32 },
        { "decoder_M2", 1280, 5120, 2, WSP_GGML_TYPE_F32 }, { "decoder_M4", 1280, 5120, 4, WSP_GGML_TYPE_F32 },
        { "decoder_M8", 1280, 5120, 8, WSP_GGML_TYPE_F32 }, { "conv_im2col", 3840, 1500, 1280, WSP_GGML_TYPE_F16 },
    };
    return s;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = dist(rng);
    }
    return v;
}

// host bytes of n_rows rows of `type` holding `values`
std::vector<uint8_t> encode(wsp_ggml_type type, const std::vector<float> & values, int64_t n_per_row) {
    const int64_t        n_rows = (int64_t) values.size() / n_per_row;
    std::vector<uint8_t> out(wsp_ggml_row_size(type, n_per_row) * (size_t) n_rows);
    switch (type) {
        case WSP_GGML_TYPE_F32: std::memcpy(out.data(), values.data(), out.size()); break;
        case WSP_GGML_TYPE_F16:
            wsp_ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<wsp_ggml_fp16_t *>(out.data()),
                                      (int64_t) values.size());
            break;
        case WSP_GGML_TYPE_BF16:
            wsp_ggml_fp32_to_bf16_row(values.data(), reinterpret_cast<wsp_ggml_bf16_t *>(out.data()),
                                      (int64_t) values.size());
            break;
        default: wsp_ggml_quantize_chunk(type, values.data(), out.data(), 0, n_rows, n_per_row, nullptr); break;
    }
    return out;
}

// one mul_mat node allocated on the CPU backend, inputs filled once
class MulMatCase {
public:
    MulMatCase(wsp_ggml_type a_type, const Shape & s) {
        wsp_ggml_init_params params = { 4 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
        ctx_                        = wsp_ggml_init(params);
        wsp_ggml_tensor * a         = wsp_ggml_new_tensor_2d(ctx_, a_type, s.K, s.N);
        wsp_ggml_tensor * b         = wsp_ggml_new_tensor_2d(ctx_, s.b_type, s.K, s.M);
        wsp_ggml_tensor * out       = wsp_ggml_mul_mat(ctx_, a, b);
        graph_                      = wsp_ggml_new_graph(ctx_);
        wsp_ggml_build_forward_expand(graph_, out);
        backend_ = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(backend_, THREADS);
        buffer_                        = wsp_ggml_backend_alloc_ctx_tensors(ctx_, backend_);
        const std::vector<uint8_t> ab  = encode(a_type, random_values((size_t) (s.K * s.N), 1), s.K);
        const std::vector<uint8_t> bb_ = encode(s.b_type, random_values((size_t) (s.K * s.M), 2), s.K);
        wsp_ggml_backend_tensor_set(a, ab.data(), 0, ab.size());
        wsp_ggml_backend_tensor_set(b, bb_.data(), 0, bb_.size());
    }
    ~MulMatCase() {
        wsp_ggml_backend_buffer_free(buffer_);
        wsp_ggml_backend_free(backend_);
        wsp_ggml_free(ctx_);
    }
    MulMatCase(const MulMatCase &)             = delete;
    MulMatCase & operator=(const MulMatCase &) = delete;

    bool run() { return wsp_ggml_backend_graph_compute(backend_, graph_) == WSP_GGML_STATUS_SUCCESS; }

private:
    wsp_ggml_context *        ctx_     = nullptr;
    wsp_ggml_cgraph *         graph_   = nullptr;
    wsp_ggml_backend_t        backend_ = nullptr;
    wsp_ggml_backend_buffer_t buffer_  = nullptr;
};

double flops(const Shape & s) {
    return 2.0 * (double) s.K * (double) s.N * (double) s.M;
}

void set_rate(benchmark::State & state, const Shape & s) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops(s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bench_mul_mat(benchmark::State & state, wsp_ggml_type a_type, Shape s) {
    // kept across repetitions: quantizing the encoder weight is not what we measure
    static std::map<std::string, std::unique_ptr<MulMatCase>> cache;
    std::unique_ptr<MulMatCase> & c = cache[std::string(wsp_ggml_type_name(a_type)) + s.name];
    if (!c) {
        c = std::make_unique<MulMatCase>(a_type, s);
    }
    for (auto _ : state) {
        if (!c->run()) {
            state.SkipWithError("graph compute failed");
            break;
        }
    }
    set_rate(state, s);
}

#if defined(WSP_BENCH_OPENBLAS)
// dst [M, N] = b [M, K] * a [N, K]^T, as mul_mat lays it out
void bench_sgemm(benchmark::State & state, Shape s) {
    openblas_set_num_threads(THREADS);
    const std::vector<float> a = random_values((size_t) (s.K * s.N), 1);
    const std::vector<float> b = random_values((size_t) (s.K * s.M), 2);
    std::vector<float>       c((size_t) (s.M * s.N));
    for (auto _ : state) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) s.M, (int) s.N, (int) s.K, 1.0f, b.data(), (int) s.K,
                    a.data(), (int) s.K, 0.0f, c.data(), (int) s.N);
        benchmark::DoNotOptimize(c.data());
    }
    set_rate(state, s);
}
#endif

// Records the best GFLOP/s of each benchmark over its repetitions and shows only the aggregates
// of repeated runs in the console table.
class BestOfReporter : public benchmark::ConsoleReporter {
public:
    // colours only on a terminal, so that redirected output stays plain text
    BestOfReporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_ColorTabular : OO_Tabular) {}

    void ReportRuns(const std::vector<Run> & runs) override {
        std::vector<Run> shown;
        for (const Run & r : runs) {
            if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
                const auto it = r.counters.find("GFLOP/s");
                if (it != r.counters.end()) {
                    double & best = best_[r.run_name.function_name];
                    best          = it->second.value > best ? it->second.value : best;
                }
            }
            if (r.run_type == Run::RT_Aggregate || r.repetitions <= 1) {
                shown.push_back(r);
            }
        }
        if (!shown.empty()) {
            ConsoleReporter::ReportRuns(shown);
        }
    }
    // 0 when the benchmark did not run
    double best(const std::string & name) const {
        const auto it = best_.find(name);
        return it == best_.end() ? 0.0 : it->second;
    }

private:
    std::map<std::string, double> best_;
};

const std::vector<wsp_ggml_type> & weight_types() {
    static const std::vector<wsp_ggml_type> t = { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q8_0,
                                                  WSP_GGML_TYPE_Q4_0 };
    return t;
}

std::string mm_name(wsp_ggml_type t, const Shape & s) {
    return std::string("mul_mat/") + wsp_ggml_type_name(t) + "/" + s.name;
}

std::string sgemm_name(const Shape & s) {
    return std::string("sgemm/") + s.name;
}

// the im2col conv is an F16 weight layer; the other shapes run every weight type
bool wanted(wsp_ggml_type t, const Shape & s) {
    return std::strcmp(s.name, "conv_im2col") != 0 || t == WSP_GGML_TYPE_F16;
}

void register_all(int reps) {
    for (const Shape & s : shapes()) {
        for (wsp_ggml_type t : weight_types()) {
            if (wanted(t, s)) {
                benchmark::RegisterBenchmark(mm_name(t, s).c_str(), bench_mul_mat, t, s)
                    ->UseRealTime()
                    ->Unit(benchmark::kMillisecond)
                    ->Repetitions(reps);
            }
        }
#if defined(WSP_BENCH_OPENBLAS)
        benchmark::RegisterBenchmark(sgemm_name(s).c_str(), bench_sgemm, s)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond)
            ->Repetitions(reps);
#endif
    }
}

std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string   a, b, c;
    f >> a >> b >> c;
    return f ? a + " " + b + " " + c : "unknown";
}

// "%.<prec>f" of v, or `none` when there is no figure (no reference measured)
std::string figure(double v, int prec, const char * none) {
    if (v <= 0.0) {
        return none;
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.*f", prec, v);
    return buf;
}

std::string json_header(int reps, const std::string & load_before) {
#if defined(WSP_BENCH_OPENBLAS)
    const std::string reference = "\"OpenBLAS cblas_sgemm\"";
#else
    const std::string reference = "null";
#endif
    return "{\n  \"threads\": " + std::to_string(THREADS) + ",\n  \"repetitions\": " + std::to_string(reps) +
           ",\n  \"statistic\": \"best\",\n  \"load_average_before\": \"" + load_before +
           "\",\n  \"load_average_after\": \"" + load_average() + "\",\n  \"sgemm_reference\": " + reference +
           ",\n  \"results\": [\n";
}

void summarize(const BestOfReporter & rep, int reps, const std::string & json_path, const std::string & load_before) {
    const double sgemm_enc = rep.best(sgemm_name(shapes()[0]));
    std::printf("\nmul_mat on the CPU backend, %d threads, best of %d repetitions (load average before: %s, after: "
                "%s)\n",
                THREADS, reps, load_before.c_str(), load_average().c_str());
    std::printf("%-12s %6s %6s %6s  %-6s %10s %12s %14s\n", "shape", "K", "N", "M", "weight", "GFLOP/s", "vs sgemm",
                "vs sgemm(enc)");
    std::string json = json_header(reps, load_before);
    char        line[512];
    for (const Shape & s : shapes()) {
        const double ref = rep.best(sgemm_name(s));
        for (wsp_ggml_type t : weight_types()) {
            const double g = rep.best(mm_name(t, s));
            if (g <= 0.0) {
                continue;
            }
            const double r_same = ref > 0 ? g / ref : 0.0, r_enc = sgemm_enc > 0 ? g / sgemm_enc : 0.0;
            std::printf("%-12s %6lld %6lld %6lld  %-6s %10.1f %12s %14s\n", s.name, (long long) s.K, (long long) s.N,
                        (long long) s.M, wsp_ggml_type_name(t), g, figure(r_same, 2, "-").c_str(),
                        figure(r_enc, 2, "-").c_str());
            std::snprintf(line, sizeof(line),
                          "%s    {\"shape\": \"%s\", \"K\": %lld, \"N\": %lld, \"M\": %lld, \"weight\": \"%s\", "
                          "\"activation\": \"%s\", \"gflops\": %.2f, \"sgemm_gflops\": %s, \"ratio_vs_sgemm\": %s, "
                          "\"ratio_vs_sgemm_encoder\": %s}",
                          json.back() == '\n' ? "" : ",\n", s.name, (long long) s.K, (long long) s.N, (long long) s.M,
                          wsp_ggml_type_name(t), wsp_ggml_type_name(s.b_type), g, figure(ref, 2, "null").c_str(),
                          figure(r_same, 3, "null").c_str(), figure(r_enc, 3, "null").c_str());
            json += line;
        }
        if (ref > 0) {
            std::printf("%-12s %6lld %6lld %6lld  %-6s %10.1f\n", s.name, (long long) s.K, (long long) s.N,
                        (long long) s.M, "sgemm", ref);
        }
    }
    json += "\n  ]\n}\n";
    std::ofstream out(json_path);
    out << json;
    std::printf("\n%s %s\n", out ? "wrote" : "could not write", json_path.c_str());
}

} // namespace

} // namespace wsp::bench

int main(int argc, char ** argv) {
    std::string         json_path = "bench_mul_mat.json";
    int                 reps      = 5;
    std::vector<char *> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--json=", 7) == 0) {
            json_path = argv[i] + 7;
        } else if (std::strncmp(argv[i], "--reps=", 7) == 0) {
            reps = std::atoi(argv[i] + 7) > 0 ? std::atoi(argv[i] + 7) : 1;
        } else {
            args.push_back(argv[i]);
        }
    }
    int n_args = (int) args.size();
    benchmark::Initialize(&n_args, args.data());
    if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) {
        return 1;
    }
    const std::string load_before = wsp::bench::load_average();
    wsp::bench::register_all(reps);
    wsp::bench::BestOfReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    wsp::bench::summarize(reporter, reps, json_path, load_before);
    benchmark::Shutdown();
    return 0;
}
