// Whisper-shaped encoder throughput (frames of audio context per second) through the scheduler:
//   cpu                 the CPU backend alone (only where there is no GPU)
//   one/<dev>           the first GPU (the ops it lacks on the CPU)
//   split/<N>           every layer's mat-mul weights split by rows over N devices
//   data_parallel/<N>   N copies of the model, one per device, each encoding its own input at once
// The devices are the registry's GPUs (run under WSP_GGML_CUDA_VIRTUAL_DEVICES=N to split one GPU
// into N); without GPUs, sim devices stand in for them (their figures measure the scheduling,
// not a GPU: sim kernels are the CPU's, one thread per device).
// Model: whisper "tiny"-like on the CPU and sim devices, "small"-like (n_state 768, 12 layers,
// flash attention) on GPUs; --benchmark_filter selects.

#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"

#include "model/whisper_encoder.h"

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

constexpr int CPU_THREADS = 2;

EncoderConfig tiny() {
    return EncoderConfig{}; // n_state 384, 6 heads, 4 layers, F16 weights
}

EncoderConfig small() {
    EncoderConfig c;
    c.n_state    = 768;
    c.n_head     = 12;
    c.n_layer    = 12;
    c.flash_attn = true;
    return c;
}

// One encoder model on a set of devices with its scheduler and graph, input already uploaded.
class Encoder {
public:
    // devs empty: the CPU alone; several devs: mat-mul weights split over them
    Encoder(const EncoderConfig & cfg, const std::vector<wsp_ggml_backend_dev_t> & devs) : weights_(cfg) {
        for (wsp_ggml_backend_dev_t dev : devs) {
            backends_.push_back(wsp_ggml_backend_dev_init(dev, nullptr));
        }
        wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(cpu, CPU_THREADS);
        backends_.push_back(cpu);
        for (wsp_ggml_backend_t b : backends_) {
            if (b == nullptr) {
                error_ = "cannot start a backend";
                return;
            }
        }
        wsp_ggml_backend_buffer_type_t matmul = nullptr;
        if (devs.size() > 1) {
            matmul = split_type(devs);
            if (matmul == nullptr) {
                error_ = "the devices' registry has no split buffer type";
                return;
            }
        }
        if (!weights_.allocate(wsp_ggml_backend_get_default_buffer_type(backends_[0]), {}, matmul)) {
            error_ = "cannot allocate the weights";
            return;
        }
        weights_.randomize(7);
        wsp_ggml_init_params p = { wsp::model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                       wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg), false),
                                   nullptr, true };
        ctx_                   = wsp_ggml_init(p);
        wsp_ggml_tensor * mel  = nullptr;
        graph_                 = wsp::model::build_encoder_graph(weights_, ctx_, &mel);
        sched_                 = wsp_ggml_backend_sched_new(backends_.data(), nullptr, (int) backends_.size(),
                                                            wsp::model::encoder_graph_size(cfg), devs.size() > 1, true);
        if (sched_ == nullptr || !wsp_ggml_backend_sched_alloc_graph(sched_, graph_)) {
            error_ = "cannot allocate the graph";
            return;
        }
        const std::vector<float> input = wsp::model::random_mel(cfg, 3);
        wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
    }

    ~Encoder() {
        wsp_ggml_backend_sched_free(sched_);
        wsp_ggml_free(ctx_);
        for (wsp_ggml_backend_t b : backends_) {
            wsp_ggml_backend_free(b);
        }
    }

    Encoder(const Encoder &)             = delete;
    Encoder & operator=(const Encoder &) = delete;

    const std::string & error() const { return error_; }

    bool run() { return wsp_ggml_backend_sched_graph_compute(sched_, graph_) == WSP_GGML_STATUS_SUCCESS; }

    // one evaluation per pipeline copy: first-use allocations, cuBLAS handles, and every copy's
    // input buffers touched once (a parallel scheduler rotates through them)
    bool warm_up() {
        for (int i = 0; i < wsp_ggml_backend_sched_get_n_copies(sched_); ++i) {
            if (!run()) {
                return false;
            }
        }
        return true;
    }

    int n_splits() const { return wsp_ggml_backend_sched_get_n_splits(sched_); }

private:
    static wsp_ggml_backend_buffer_type_t split_type(const std::vector<wsp_ggml_backend_dev_t> & devs) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_dev_backend_reg(devs[0]);
        auto                   fn  = (wsp_ggml_backend_split_buffer_type_t) wsp_ggml_backend_reg_get_proc_address(
                               reg, "wsp_ggml_backend_split_buffer_type");
        if (fn == nullptr) {
            return nullptr;
        }
        std::vector<float> split(wsp_ggml_backend_reg_dev_count(reg), 0.0f);
        for (size_t i = 0; i < split.size(); ++i) {
            for (wsp_ggml_backend_dev_t d : devs) {
                split[i] = wsp_ggml_backend_reg_dev_get(reg, i) == d ? 1.0f : split[i];
            }
        }
        return fn(0, split.data());
    }

    EncoderWeights                  weights_;
    std::vector<wsp_ggml_backend_t> backends_;
    wsp_ggml_context *              ctx_   = nullptr;
    wsp_ggml_cgraph *               graph_ = nullptr;
    wsp_ggml_backend_sched_t        sched_ = nullptr;
    std::string                     error_;
};

void report(benchmark::State & state, const EncoderConfig & cfg, int n_encodes) {
    const double n             = (double) state.iterations() * n_encodes;
    state.counters["frames/s"] = benchmark::Counter(n * cfg.n_ctx, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] =
        benchmark::Counter(n * wsp::model::encoder_flops(cfg) * 1e-9, benchmark::Counter::kIsRate);
    state.counters["encodes/run"] = n_encodes;
}

// one model on devs (the CPU alone when empty)
void BM_encoder(benchmark::State & state, EncoderConfig cfg, std::vector<wsp_ggml_backend_dev_t> devs) {
    Encoder enc(cfg, devs);
    if (!enc.error().empty()) {
        state.SkipWithError(enc.error().c_str());
        return;
    }
    if (!enc.warm_up()) {
        state.SkipWithError("compute failed");
        return;
    }
    for (auto _ : state) {
        if (!enc.run()) {
            state.SkipWithError("compute failed");
            return;
        }
    }
    report(state, cfg, 1);
    state.counters["splits"] = enc.n_splits();
}

// one model per device, all encoding at once (one host thread each)
void BM_data_parallel(benchmark::State & state, EncoderConfig cfg, std::vector<wsp_ggml_backend_dev_t> devs) {
    std::vector<std::unique_ptr<Encoder>> encs;
    for (wsp_ggml_backend_dev_t dev : devs) {
        encs.push_back(std::make_unique<Encoder>(cfg, std::vector<wsp_ggml_backend_dev_t>{ dev }));
        if (!encs.back()->error().empty() || !encs.back()->warm_up()) {
            state.SkipWithError("cannot set up one of the models");
            return;
        }
    }
    for (auto _ : state) {
        std::vector<std::thread> threads;
        std::vector<char>        ok(encs.size(), 0);
        for (size_t i = 0; i < encs.size(); ++i) {
            threads.emplace_back([&, i] { ok[i] = encs[i]->run(); });
        }
        for (std::thread & t : threads) {
            t.join();
        }
        for (char o : ok) {
            if (!o) {
                state.SkipWithError("compute failed");
                return;
            }
        }
    }
    report(state, cfg, (int) encs.size());
}

void register_all() {
    wsp_ggml_backend_load_all();
    std::vector<wsp_ggml_backend_dev_t> gpus;
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_get(i);
        // the single GPUs: an all-GPU device is these again, as one
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU &&
            !wsp_ggml_backend_dev_is_all_gpu(dev)) {
            gpus.push_back(dev);
        }
    }
    const bool          have_gpu = !gpus.empty();
    const EncoderConfig cfg      = have_gpu ? small() : tiny();
    const std::string   model    = have_gpu ? "small" : "tiny";
    if (!have_gpu) {
        wsp_ggml_backend_reg_t sim = wsp_ggml_backend_sim_register(4, 4096);
        for (size_t i = 0; sim != nullptr && i < wsp_ggml_backend_reg_dev_count(sim); ++i) {
            wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_reg_dev_get(sim, i), 0);
            gpus.push_back(wsp_ggml_backend_reg_dev_get(sim, i));
        }
    }
    auto reg = [](const std::string & name, auto fn, const EncoderConfig & c, std::vector<wsp_ggml_backend_dev_t> d) {
        benchmark::RegisterBenchmark(name.c_str(), fn, c, std::move(d))
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(1.0);
    };
    if (!have_gpu) { // the small model on the CPU would take most of the GPU check's time
        reg("encoder_" + model + "/cpu", BM_encoder, cfg, {});
    }
    if (!gpus.empty()) {
        reg("encoder_" + model + "/one/" + wsp_ggml_backend_dev_name(gpus[0]), BM_encoder, cfg, { gpus[0] });
    }
    for (size_t n = 2; n <= gpus.size(); n *= 2) {
        std::vector<wsp_ggml_backend_dev_t> d(gpus.begin(), gpus.begin() + (long) n);
        reg("encoder_" + model + "/split/" + std::to_string(n), BM_encoder, cfg, d);
        reg("encoder_" + model + "/data_parallel/" + std::to_string(n), BM_data_parallel, cfg, d);
    }
}

} // namespace

int main(int argc, char ** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
