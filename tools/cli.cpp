// wsp-ggml-cli: the project's command-line tool.
//   devices              list the registered backends and their devices
//   encode [options]     run a whisper-shaped encoder with random weights and print its result and time
//   write-model [opts]   write a whisper.cpp model file with random weights (model/whisper_file.h)
// The encoder runs through the scheduler on every GPU the registry has (the CPU where there is
// none, or N sim devices with --sim N): with several devices the layers' mat-mul weights are
// spread by rows over them with the devices' split buffer type (--mode split) or whole layers go
// to the devices in turn (--mode layers). --check compares the result with the double-precision
// reference.

#include "ggml-all-gpu.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"

#include "model/whisper_encoder.h"
#include "model/whisper_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

struct EncodeOptions {
    EncoderConfig      cfg;
    int                n_threads = 2;
    int                runs      = 3;
    bool               check     = false;
    std::string        device    = "auto"; // auto (every GPU, else the CPU), cpu, or a device name
    int                n_sim     = 0;      // > 0: this many sim devices instead of GPUs
    bool               layers    = false;  // whole layers per device instead of split mat-mul weights
    std::vector<float> tensor_split;       // proportions per device (empty: even)
};

void usage() {
    std::printf(
        "usage: wsp-ggml-cli devices\n"
        "       wsp-ggml-cli encode [--threads N] [--runs N] [--ctx N] [--state N] [--heads N] [--layers N]\n"
        "                           [--mels N] [--type f32|f16|bf16|q8_0|q5_1|q5_0|q4_1|q4_0] [--flash] [--check]\n"
        "                           [--device auto|cpu|NAME] [--sim N] [--mode split|layers] [--tensor-split A,B,...]\n"
        "  --device auto   every GPU of the registry (the CPU where there is none); NAME: one device\n"
        "  --sim N         N simulated devices (CPU kernels, device memory, async streams) instead of GPUs\n"
        "  --mode split    several devices: every layer's mat-mul weights spread by rows (default)\n"
        "  --mode layers   several devices: whole layers on the devices in turn\n"
        "       wsp-ggml-cli write-model --out FILE [--size tiny|base|small|medium|large]\n"
        "                           [--type f16|f32|q8_0|q5_1|q5_0|q4_1|q4_0] [--seed N] [--audio-ctx N]\n"
        "                           [--text-ctx N] [--vocab N] [--mels N] [--state N] [--heads N] [--layers N]\n"
        "                           [--audio-heads N] [--text-heads N] [--audio-layers N] [--text-layers N]\n"
        "  --size          dimensions of the public whisper model (default tiny); the options below override them\n"
        "  --type          mat-mul weights and token embedding (default f16); conv kernels stay f16, the rest f32\n"
        "  --seed N        weights are a function of the seed and the tensor name (default 1)\n"
        "  --audio-ctx N   encoder positions, 1..1500 (default 1500): the encoder reads the first 2*N mel frames\n"
        "                  (N * 20 ms) of every 30 s window and ignores the rest, like whisper.cpp's audio_ctx;\n"
        "                  a multiple of 256 keeps whisper.cpp's flash-attention path (which attends over N\n"
        "                  rounded up to 256 positions, unmasked) equal to its plain path\n"
        "  --text-ctx N    decoder positions (default 448)\n"
        "  --vocab N       51864 English-only, 51865 multilingual (default), 51866 large-v3 layout\n"
        "  --mels N        mel bands (default 80)\n"
        "  --state N       audio and text state (whisper.cpp requires them equal); a multiple of the heads\n"
        "                  (and of 32 for quantized types)\n"
        "  --heads N / --layers N   audio and text; --audio-* / --text-* set one side only\n");
}

bool parse_type(const char * s, wsp_ggml_type & type) {
    for (int t = 0; t < WSP_GGML_TYPE_COUNT; ++t) {
        if (wsp_ggml_blck_size((wsp_ggml_type) t) != 0 && std::strcmp(s, wsp_ggml_type_name((wsp_ggml_type) t)) == 0) {
            type = (wsp_ggml_type) t;
            return true;
        }
    }
    return false;
}

// "3,1" -> {3, 1}; every part a non-negative number, at least one positive
bool parse_split(const char * s, std::vector<float> & out) {
    out.clear();
    float sum = 0.0f;
    while (*s != '\0') {
        char *      end = nullptr;
        const float v   = std::strtof(s, &end);
        if (end == s || v < 0.0f || (*end != ',' && *end != '\0')) {
            return false;
        }
        out.push_back(v);
        sum += v;
        s = *end == ',' ? end + 1 : end;
    }
    return sum > 0.0f;
}

bool parse_encode(int argc, char ** argv, EncodeOptions & o) {
    for (int i = 2; i < argc; ++i) {
        const std::string a    = argv[i];
        auto              next = [&](int & v) {
            if (i + 1 >= argc) {
                return false;
            }
            v = std::atoi(argv[++i]);
            return v > 0;
        };
        bool ok = true;
        if (a == "--threads")
            ok = next(o.n_threads);
        else if (a == "--runs")
            ok = next(o.runs);
        else if (a == "--ctx")
            ok = next(o.cfg.n_ctx);
        else if (a == "--state")
            ok = next(o.cfg.n_state);
        else if (a == "--heads")
            ok = next(o.cfg.n_head);
        else if (a == "--layers")
            ok = next(o.cfg.n_layer);
        else if (a == "--mels")
            ok = next(o.cfg.n_mels);
        else if (a == "--flash")
            o.cfg.flash_attn = true;
        else if (a == "--check")
            o.check = true;
        else if (a == "--type")
            ok = i + 1 < argc && parse_type(argv[++i], o.cfg.wtype);
        else if (a == "--device")
            ok = i + 1 < argc && (o.device = argv[++i], true);
        else if (a == "--sim")
            ok = next(o.n_sim);
        else if (a == "--mode") {
            ok = i + 1 < argc && (std::strcmp(argv[i + 1], "split") == 0 || std::strcmp(argv[i + 1], "layers") == 0);
            o.layers = ok && std::strcmp(argv[++i], "layers") == 0;
        } else if (a == "--tensor-split")
            ok = i + 1 < argc && parse_split(argv[++i], o.tensor_split);
        else
            ok = false;
        if (!ok) {
            std::fprintf(stderr, "invalid argument: %s\n", a.c_str());
            return false;
        }
    }
    if (o.cfg.n_state % o.cfg.n_head != 0) {
        std::fprintf(stderr, "--state must be a multiple of --heads\n");
        return false;
    }
    if (wsp_ggml_is_quantized(o.cfg.wtype) && o.cfg.n_state % 32 != 0) {
        std::fprintf(stderr, "quantized weights need --state to be a multiple of 32\n");
        return false;
    }
    return true;
}

// a whole argument as an integer in [lo, hi]
bool parse_int(const char * s, long long lo, long long hi, long long & out) {
    char *          end = nullptr;
    const long long v   = std::strtoll(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    out = v;
    return true;
}

// write-model's options into cfg and out; false with a message on an invalid or missing one
bool parse_write_model(int argc, char ** argv, wsp::model::WhisperFileConfig & cfg, std::string & out) {
    std::string size = "tiny";
    // the dimension options and the fields each sets
    const std::vector<std::pair<std::string, std::vector<int32_t *>>> dims = {
        { "--audio-ctx", { &cfg.n_audio_ctx } },
        { "--text-ctx", { &cfg.n_text_ctx } },
        { "--vocab", { &cfg.n_vocab } },
        { "--mels", { &cfg.n_mels } },
        { "--state", { &cfg.n_audio_state, &cfg.n_text_state } },
        { "--heads", { &cfg.n_audio_head, &cfg.n_text_head } },
        { "--layers", { &cfg.n_audio_layer, &cfg.n_text_layer } },
        { "--audio-heads", { &cfg.n_audio_head } },
        { "--text-heads", { &cfg.n_text_head } },
        { "--audio-layers", { &cfg.n_audio_layer } },
        { "--text-layers", { &cfg.n_text_layer } },
    };
    // overrides apply after the preset, in any order on the command line
    std::vector<std::pair<int32_t *, long long>> overrides;
    for (int i = 2; i < argc; ++i) {
        const std::string a     = argv[i];
        const char *      value = i + 1 < argc ? argv[++i] : nullptr;
        long long         v     = 0;
        auto              dim   = std::find_if(dims.begin(), dims.end(), [&](const auto & d) { return d.first == a; });
        bool              ok    = value != nullptr;
        if (a == "--out") {
            ok = ok && (out = value, true);
        } else if (a == "--size") {
            ok = ok && (size = value, true);
        } else if (a == "--type") {
            ok = ok && wsp::model::whisper_file_type(value, cfg.wtype);
        } else if (a == "--seed") {
            ok = ok && parse_int(value, 0, INT64_MAX, v) && (cfg.seed = (uint64_t) v, true);
        } else if (dim != dims.end()) {
            ok = ok && parse_int(value, 0, INT32_MAX, v);
            for (int32_t * f : dim->second) {
                overrides.emplace_back(f, v);
            }
        } else {
            ok = false;
        }
        if (!ok) {
            std::fprintf(stderr, "write-model: invalid argument: %s %s\n", a.c_str(), value ? value : "");
            return false;
        }
    }
    if (out.empty()) {
        std::fprintf(stderr, "write-model: --out FILE is required\n");
        return false;
    }
    if (!wsp::model::whisper_file_preset(size, cfg)) {
        std::fprintf(stderr, "write-model: unknown --size %s (tiny, base, small, medium, large)\n", size.c_str());
        return false;
    }
    for (const auto & o : overrides) {
        *o.first = (int32_t) o.second;
    }
    return true;
}

int cmd_write_model(const wsp::model::WhisperFileConfig & cfg, const std::string & out) {
    std::string error;
    size_t      bytes = 0;
    if (!wsp::model::write_whisper_model(cfg, out, &error, &bytes)) {
        std::fprintf(stderr, "write-model: %s\n", error.c_str());
        return 1;
    }
    std::printf("wrote %s: %s, seed %llu, %zu bytes (%.1f MiB)\n", out.c_str(), cfg.describe().c_str(),
                (unsigned long long) cfg.seed, bytes, bytes / 1048576.0);
    return 0;
}

int cmd_devices() {
    wsp_ggml_backend_load_all();
    std::printf("%zu backends, %zu devices\n", wsp_ggml_backend_reg_count(), wsp_ggml_backend_dev_count());
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t     dev = wsp_ggml_backend_dev_get(i);
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        const char * type = props.type == WSP_GGML_BACKEND_DEVICE_TYPE_CPU   ? "CPU"
                            : props.type == WSP_GGML_BACKEND_DEVICE_TYPE_GPU ? "GPU"
                                                                             : "ACCEL";
        std::printf("  %-8s %-5s %-40s %8.0f / %8.0f MiB free (reg %s)\n", props.name, type, props.description,
                    props.memory_free / 1048576.0, props.memory_total / 1048576.0,
                    wsp_ggml_backend_reg_name(wsp_ggml_backend_dev_backend_reg(dev)));
    }
    // each registry, with its device count and the features it reports (GPU targets, NCCL, BLAS)
    for (size_t i = 0; i < wsp_ggml_backend_reg_count(); ++i) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_reg_get(i);
        std::printf("  reg %-6s %zu devices", wsp_ggml_backend_reg_name(reg), wsp_ggml_backend_reg_dev_count(reg));
        auto get_features = reinterpret_cast<wsp_ggml_backend_get_features_t>(
            wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features"));
        for (const wsp_ggml_backend_feature * f = get_features ? get_features(reg) : nullptr; f && f->name; ++f) {
            std::printf("  %s=%s", f->name, f->value);
        }
        std::printf("\n");
    }
    return 0;
}

// The devices the encoder runs on, in order; empty with a message when the choice is invalid.
std::vector<wsp_ggml_backend_dev_t> pick_devices(const EncodeOptions & o) {
    std::vector<wsp_ggml_backend_dev_t> devs;
    if (o.n_sim > 0) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_sim_register(o.n_sim, 16384);
        if (reg == nullptr || wsp_ggml_backend_reg_dev_count(reg) < (size_t) o.n_sim) {
            std::fprintf(stderr, "cannot create %d sim devices\n", o.n_sim);
            return {};
        }
        for (int i = 0; i < o.n_sim; ++i) {
            wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, (size_t) i);
            wsp_ggml_backend_sim_set_delay_us(dev, 0);
            devs.push_back(dev);
        }
        return devs;
    }
    wsp_ggml_backend_load_all();
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev  = wsp_ggml_backend_dev_get(i);
        const bool             gpu  = wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
        const bool             cpu  = wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_CPU;
        const char *           name = wsp_ggml_backend_dev_name(dev);
        // auto: the single GPUs (an all-GPU device is them again, as one; it is chosen by name)
        const bool single = gpu && !wsp_ggml_backend_dev_is_all_gpu(dev);
        if ((o.device == "auto" && single) || (o.device == "cpu" && cpu) || o.device == name) {
            devs.push_back(dev);
        }
    }
    if (devs.empty() && o.device == "auto") {
        devs.push_back(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU));
    }
    if (devs.empty() || devs[0] == nullptr) {
        std::fprintf(stderr, "no device named %s (see wsp-ggml-cli devices)\n", o.device.c_str());
        return {};
    }
    return devs;
}

// The split buffer type of the devices' registry over exactly these devices (proportions from
// --tensor-split, even otherwise); nullptr with a message where the registry has none.
wsp_ggml_backend_buffer_type_t split_buffer_type(const std::vector<wsp_ggml_backend_dev_t> & devs,
                                                 const std::vector<float> &                  proportions) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_dev_backend_reg(devs[0]);
    auto                   fn  = (wsp_ggml_backend_split_buffer_type_t) wsp_ggml_backend_reg_get_proc_address(
                           reg, "wsp_ggml_backend_split_buffer_type");
    if (fn == nullptr) {
        std::fprintf(stderr, "the %s registry has no split buffer type\n", wsp_ggml_backend_reg_name(reg));
        return nullptr;
    }
    std::vector<float> split(std::max<size_t>(wsp_ggml_backend_reg_dev_count(reg), 1), 0.0f);
    int                main_device = -1;
    for (size_t d = 0; d < devs.size(); ++d) {
        if (wsp_ggml_backend_dev_backend_reg(devs[d]) != reg) {
            std::fprintf(stderr, "split weights need devices of one registry\n");
            return nullptr;
        }
        for (size_t i = 0; i < wsp_ggml_backend_reg_dev_count(reg); ++i) {
            if (wsp_ggml_backend_reg_dev_get(reg, i) == devs[d]) {
                split[i]    = proportions.empty() ? 1.0f : proportions[d];
                main_device = main_device < 0 ? (int) i : main_device;
            }
        }
    }
    return fn(main_device, split.data());
}

double weights_mib(const EncoderWeights & w) {
    double s = 0;
    for (wsp_ggml_tensor * t : w.all()) {
        s += (double) wsp_ggml_nbytes(t);
    }
    return s / 1048576.0;
}

int cmd_encode(const EncodeOptions & o) {
    const EncoderConfig &                     cfg  = o.cfg;
    const std::vector<wsp_ggml_backend_dev_t> devs = pick_devices(o);
    if (devs.empty()) {
        return 1;
    }
    if (!o.tensor_split.empty() && o.tensor_split.size() != devs.size()) {
        std::fprintf(stderr, "--tensor-split has %zu parts for %zu devices\n", o.tensor_split.size(), devs.size());
        return 1;
    }
    // one backend per device, then the CPU (last: it takes what the devices do not support)
    std::vector<wsp_ggml_backend_t> backends;
    wsp_ggml_backend_t              cpu = nullptr;
    for (wsp_ggml_backend_dev_t dev : devs) {
        wsp_ggml_backend_t b = wsp_ggml_backend_dev_init(dev, nullptr);
        if (b == nullptr) {
            std::fprintf(stderr, "cannot start a backend on %s\n", wsp_ggml_backend_dev_name(dev));
            for (wsp_ggml_backend_t x : backends) {
                wsp_ggml_backend_free(x);
            }
            return 1;
        }
        backends.push_back(b);
        cpu = wsp_ggml_backend_is_cpu(b) ? b : cpu;
    }
    if (cpu == nullptr) {
        cpu = wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
        if (cpu == nullptr) {
            std::fprintf(stderr, "no CPU backend\n");
            for (wsp_ggml_backend_t x : backends) {
                wsp_ggml_backend_free(x);
            }
            return 1;
        }
        backends.push_back(cpu);
    }
    wsp_ggml_backend_cpu_set_n_threads(cpu, o.n_threads);
    auto free_backends = [&] {
        for (wsp_ggml_backend_t x : backends) {
            wsp_ggml_backend_free(x);
        }
    };

    std::printf("encoder: %s\n", cfg.describe().c_str());
    for (size_t d = 0; d < devs.size(); ++d) {
        std::printf("device:  %s (%s)\n", wsp_ggml_backend_dev_name(devs[d]),
                    wsp_ggml_backend_dev_description(devs[d]));
    }
    std::printf("cpu:     %d threads%s\n", o.n_threads,
                wsp_ggml_backend_is_cpu(backends[0]) ? "" : " (for ops the devices do not support)");

    // weights: front end and final norm on the first device; layers split or in turn
    EncoderWeights                              weights(cfg);
    std::vector<wsp_ggml_backend_buffer_type_t> layer_bufts;
    wsp_ggml_backend_buffer_type_t              matmul_buft = nullptr;
    const size_t                                n_dev       = devs.size();
    if (n_dev > 1 && o.layers) {
        for (size_t d = 0; d < n_dev; ++d) {
            layer_bufts.push_back(wsp_ggml_backend_dev_buffer_type(devs[d]));
        }
        std::printf("weights: layer i on device i %% %zu\n", n_dev);
    } else if (n_dev > 1) {
        matmul_buft = split_buffer_type(devs, o.tensor_split);
        if (matmul_buft == nullptr) {
            free_backends();
            return 1;
        }
        std::printf("weights: every layer's mat-mul weights split by rows over %zu devices (%s)\n", n_dev,
                    wsp_ggml_backend_buft_name(matmul_buft));
    }
    if (!weights.allocate(wsp_ggml_backend_dev_buffer_type(devs[0]), layer_bufts, matmul_buft)) {
        std::fprintf(stderr, "cannot allocate the weights\n");
        free_backends();
        return 1;
    }
    weights.randomize(1234);

    const size_t             n_tensors = wsp::model::encoder_graph_tensors(cfg);
    wsp_ggml_init_params     params    = { n_tensors * wsp_ggml_tensor_overhead() +
                                               wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg), false),
                                           nullptr, true };
    wsp_ggml_context *       ctx       = wsp_ggml_init(params);
    wsp_ggml_tensor *        mel       = nullptr;
    wsp_ggml_cgraph *        graph     = wsp::model::build_encoder_graph(weights, ctx, &mel);
    wsp_ggml_backend_sched_t sched     = wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(),
                                                                    wsp::model::encoder_graph_size(cfg), n_dev > 1, true);
    int                      rc        = 1;
    if (sched == nullptr || !wsp_ggml_backend_sched_alloc_graph(sched, graph)) {
        std::fprintf(stderr, "cannot allocate the compute graph\n");
    } else {
        const std::vector<float> input = wsp::model::random_mel(cfg, 42);
        wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
        wsp_ggml_tensor * out = wsp_ggml_graph_node(graph, -1);

        double       best_ms = 1e30, total_ms = 0.0;
        bool         ok     = true;
        const size_t copied = wsp_ggml_backend_sim_bytes_copied(); // sims count what moves between devices
        for (int r = 0; r < o.runs && ok; ++r) {
            const int64_t t0 = wsp_ggml_time_us();
            ok               = wsp_ggml_backend_sched_graph_compute(sched, graph) == WSP_GGML_STATUS_SUCCESS;
            const double ms  = (wsp_ggml_time_us() - t0) / 1000.0;
            best_ms          = std::min(best_ms, ms);
            total_ms += ms;
        }
        const double moved = (double) (wsp_ggml_backend_sim_bytes_copied() - copied) / o.runs;
        if (ok) {
            std::vector<float> y((size_t) wsp_ggml_nelements(out));
            wsp_ggml_backend_tensor_get(out, y.data(), 0, y.size() * sizeof(float));
            double mean = 0.0, sq = 0.0;
            for (float v : y) {
                mean += v;
                sq += (double) v * v;
            }
            mean /= (double) y.size();
            const double sd         = std::sqrt(std::max(0.0, sq / (double) y.size() - mean * mean));
            double       compute_mb = 0.0;
            for (wsp_ggml_backend_t b : backends) {
                compute_mb += wsp_ggml_backend_sched_get_buffer_size(sched, b) / 1048576.0;
            }
            std::printf("graph:   %d nodes in %d splits, %d copies, compute buffers %.1f MiB, weights %.1f MiB\n",
                        wsp_ggml_graph_n_nodes(graph), wsp_ggml_backend_sched_get_n_splits(sched),
                        wsp_ggml_backend_sched_get_n_copies(sched), compute_mb, weights_mib(weights));
            std::printf("result:  [%lld, %lld] mean %.6f std %.6f first %.6f %.6f %.6f %.6f\n", (long long) out->ne[0],
                        (long long) out->ne[1], mean, sd, y[0], y[1], y[2], y[3]);
            std::printf("time:    best %.1f ms, mean %.1f ms over %d runs, %.1f GFLOP/s, %.0f frames/s\n", best_ms,
                        total_ms / o.runs, o.runs, wsp::model::encoder_flops(cfg) / (best_ms * 1e6),
                        cfg.n_ctx / (best_ms / 1000.0));
            if (o.n_sim > 1) {
                std::printf("moved:   %.2f MiB between devices per evaluation, %.2f MiB per layer\n", moved / 1048576.0,
                            moved / 1048576.0 / cfg.n_layer);
            }
            rc = 0;
            if (o.check) {
                const std::vector<double> ref = wsp::model::reference_encoder(weights, input);
                double                    err = 0.0, norm = 0.0;
                for (size_t i = 0; i < y.size(); ++i) {
                    err += (y[i] - ref[i]) * (y[i] - ref[i]);
                    norm += ref[i] * ref[i];
                }
                const double nmse = err / norm;
                std::printf("check:   NMSE vs double reference %.3e (%s)\n", nmse, nmse < 1e-6 ? "ok" : "FAILED");
                rc = nmse < 1e-6 ? 0 : 2;
            }
        } else {
            std::fprintf(stderr, "compute failed\n");
        }
    }
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    free_backends();
    return rc;
}

} // namespace

int main(int argc, char ** argv) {
    wsp_ggml_time_init();
    if (argc < 2) {
        usage();
        return 1;
    }
    const std::string cmd = argv[1];
    if (cmd == "devices") {
        return cmd_devices();
    }
    if (cmd == "encode") {
        EncodeOptions o;
        if (!parse_encode(argc, argv, o)) {
            usage();
            return 1;
        }
        return cmd_encode(o);
    }
    if (cmd == "write-model") {
        wsp::model::WhisperFileConfig cfg;
        std::string                   out;
        if (!parse_write_model(argc, argv, cfg, out)) {
            usage();
            return 1;
        }
        return cmd_write_model(cfg, out);
    }
    usage();
    return 1;
}
