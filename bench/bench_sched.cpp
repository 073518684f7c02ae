// Scheduler overhead per node: reset + alloc_graph + graph_compute of a chain of 1000 scale
// nodes on a 64-element tensor, so that the kernels cost next to nothing and the figure is the
// scheduler's (assignment, splits, allocation) and the backends' dispatch. Cases: the CPU alone
// (2 threads), and 4 sim devices plus the CPU with the chain cut into 4 parts (one per device),
// delays off. Reported as ns per node; --json=FILE also writes the figures as JSON.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int N_NODES = 1000;
constexpr int N_ELEMS = 64;

struct Chain {
    wsp_ggml_context *             ctx   = nullptr;
    wsp_ggml_cgraph *              graph = nullptr;
    wsp_ggml_tensor *              input = nullptr;
    std::vector<wsp_ggml_tensor *> nodes;

    Chain() {
        wsp_ggml_init_params params = { (N_NODES + 16) * wsp_ggml_tensor_overhead() +
                                            wsp_ggml_graph_overhead_custom(N_NODES + 16, false),
                                        nullptr, true };
        ctx                         = wsp_ggml_init(params);
        input                       = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N_ELEMS);
        wsp_ggml_set_input(input);
        wsp_ggml_tensor * cur = input;
        for (int i = 0; i < N_NODES; ++i) {
            cur = wsp_ggml_scale(ctx, cur, 1.0001f);
            nodes.push_back(cur);
        }
        wsp_ggml_set_output(cur);
        graph = wsp_ggml_new_graph_custom(ctx, N_NODES + 16, false);
        wsp_ggml_build_forward_expand(graph, cur);
    }
    ~Chain() { wsp_ggml_free(ctx); }
};

std::map<std::string, double> g_ns_per_node;

void run_chain(benchmark::State & state, std::vector<wsp_ggml_backend_t> backends, bool spread) {
    Chain                    chain;
    wsp_ggml_backend_sched_t sched =
        wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), N_NODES + 16, false, false);
    const int          n_dev = (int) backends.size() - 1;
    std::vector<float> x(N_ELEMS, 1.0f);
    auto               alloc = [&] {
        wsp_ggml_backend_sched_reset(sched);
        if (spread) {
            for (int i = 0; i < N_NODES; ++i) {
                wsp_ggml_backend_sched_set_tensor_backend(sched, chain.nodes[(size_t) i],
                                                                        backends[(size_t) (i * n_dev / N_NODES)]);
            }
        }
        return wsp_ggml_backend_sched_alloc_graph(sched, chain.graph);
    };
    if (!alloc()) {
        state.SkipWithError("alloc_graph failed");
        return;
    }
    wsp_ggml_backend_tensor_set(chain.input, x.data(), 0, sizeof(float) * N_ELEMS);
    int64_t wall_us = 0;
    for (auto _ : state) {
        const int64_t t0 = wsp_ggml_time_us();
        alloc();
        wsp_ggml_backend_sched_graph_compute(sched, chain.graph);
        wall_us += wsp_ggml_time_us() - t0;
    }
    // wall time: the sim streams work on threads of their own
    state.counters["ns_per_node"] = 1000.0 * (double) wall_us / ((double) state.iterations() * N_NODES);
    state.counters["splits"]      = wsp_ggml_backend_sched_get_n_splits(sched);
    wsp_ggml_backend_sched_free(sched);
}

void BM_sched_cpu(benchmark::State & state) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    run_chain(state, { cpu }, false);
    wsp_ggml_backend_free(cpu);
}

void BM_sched_sim4(benchmark::State & state) {
    wsp_ggml_backend_reg_t          reg = wsp_ggml_backend_sim_register(4, 64);
    std::vector<wsp_ggml_backend_t> backends;
    for (int i = 0; i < 4; ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, (size_t) i);
        wsp_ggml_backend_sim_set_delay_us(dev, 0);
        backends.push_back(wsp_ggml_backend_dev_init(dev, nullptr));
    }
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    backends.push_back(cpu);
    run_chain(state, backends, true);
    for (wsp_ggml_backend_t b : backends) {
        wsp_ggml_backend_free(b);
    }
}

BENCHMARK(BM_sched_cpu)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_sched_sim4)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();

// collects ns/node from the runs for the summary and the JSON file
class Collector : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run> & runs) override {
        for (const Run & r : runs) {
            auto it = r.counters.find("ns_per_node");
            if (it != r.counters.end()) {
                g_ns_per_node[r.benchmark_name()] = it->second.value;
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
};

} // namespace

int main(int argc, char ** argv) {
    std::string         json = "bench_sched.json";
    std::vector<char *> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--json=", 7) == 0) {
            json = argv[i] + 7;
        } else {
            args.push_back(argv[i]);
        }
    }
    int n = (int) args.size();
    benchmark::Initialize(&n, args.data());
    Collector reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    std::printf("\nscheduler overhead (reset + alloc_graph + compute, chain of %d scale nodes):\n", N_NODES);
    FILE * f = std::fopen(json.c_str(), "w");
    if (f != nullptr) {
        std::fprintf(f, "{\n  \"nodes\": %d,\n  \"ns_per_node\": {", N_NODES);
    }
    bool first = true;
    for (const auto & kv : g_ns_per_node) {
        std::printf("  %-20s %8.1f ns/node (%.3f us)\n", kv.first.c_str(), kv.second, kv.second / 1000.0);
        if (f != nullptr) {
            std::fprintf(f, "%s\n    \"%s\": %.2f", first ? "" : ",", kv.first.c_str(), kv.second);
        }
        first = false;
    }
    if (f != nullptr) {
        std::fprintf(f, "\n  }\n}\n");
        std::fclose(f);
    }
    return 0;
}
