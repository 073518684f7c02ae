// wsp-ggml-cli: the project's command-line tool.
//   devices              list the registered backends and their devices
//   encode [options]     run a whisper-shaped encoder with random weights and print its result and time
//   write-model [opts]   write a whisper.cpp model file with random weights (model/whisper_file.h)
// The encoder runs through the scheduler on every GPU the registry has (the CPU where there is
// none, or N sim devices with --sim N): with several devices the layers' mat-mul weights are
// spread by rows over them with the devices' split buffer type (--mode split), whole layers go
// to the devices in turn (--mode layers), or everything goes to the registry's all-GPU device,
// which spreads the devices' work itself (--mode all, include/ggml-all-gpu.h). One untimed
// evaluation comes first, so that one-time copies stay out of the figures. --check compares the
// result with the double-precision reference.

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

enum class Mode { Split, Layers, All };

struct EncodeOptions {
    EncoderConfig      cfg;
    int                n_threads = 2;
    int                runs      = 3;
    bool               check     = false;
    std::string        device    = "auto"; // auto (every GPU, else the CPU), cpu, or a device name
    int                n_sim     = 0;      // > 0: this many sim devices instead of GPUs
    Mode               mode      = Mode::Split;
    std::vector<float> tensor_split;     // proportions per device (empty: even)
    std::string        tensor_split_arg; // as given, for WSP_GGML_TENSOR_SPLIT (--mode all)
};

void usage() {
    std::printf(
        "usage: wsp-ggml-cli devices\n"
        "       wsp-ggml-cli encode [--threads N] [--runs N] [--ctx N] [--state N] [--heads N] [--layers N]\n"
        "                           [--mels N] [--type f32|f16|bf16|q8_0|q5_1|q5_0|q4_1|q4_0] [--flash] [--check]\n"
        "                           [--device auto|cpu|NAME] [--sim N] [--mode split|layers|all]\n"
        "                           [--tensor-split A,B,...]\n"
        "  --runs N        timed evaluations (default 3), after one untimed warm-up evaluation: one-time\n"
        "                  copies (weights spread at first use) stay out of the times and of moved:\n"
        "  --device auto   every GPU of the registry (the CPU where there is none); NAME: one device\n"
        "  --sim N         N simulated devices (CPU kernels, device memory, async streams) instead of GPUs\n"
        "  --mode split    several devices: every layer's mat-mul weights spread by rows (default)\n"
        "  --mode layers   several devices: whole layers on the devices in turn\n"
        "  --mode all      the registry's all-GPU device (SIM_All with --sim N, N >= 2; CUDA_All, ...): the\n"
        "                  weights whole in its buffer type, the scheduler over it and the CPU; its backend\n"
        "                  spreads the work over its members (--device NAME picks one all-GPU device)\n"
        "  --tensor-split  proportions per device; with --mode all, WSP_GGML_TENSOR_SPLIT for the all-GPU device\n"
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
            const std::string m = i + 1 < argc ? argv[++i] : "";
            ok                  = m == "split" || m == "layers" || m == "all";
            o.mode              = m == "layers" ? Mode::Layers : m == "all" ? Mode::All : Mode::Split;
        } else if (a == "--tensor-split")
            ok = i + 1 < argc && parse_split(argv[++i], o.tensor_split) && (o.tensor_split_arg = argv[i], true);
        else
            ok = false;
        if (!ok) {
            std::fprintf(stderr, "invalid argument: %s\n", a.c_str());
            return false;
        }
    }
    if (o.mode == Mode::All && o.n_sim == 1) {
        std::fprintf(stderr, "--mode all needs two or more devices: --sim N with N >= 2\n");
        return false;
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

// n sim devices without delays; nullptr with a message when they cannot be made
wsp_ggml_backend_reg_t register_sims(int n) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_sim_register(n, 16384);
    if (reg == nullptr || wsp_ggml_backend_reg_dev_count(reg) < (size_t) n) {
        std::fprintf(stderr, "cannot create %d sim devices\n", n);
        return nullptr;
    }
    for (int i = 0; i < n; ++i) {
        wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_reg_dev_get(reg, (size_t) i), 0);
    }
    return reg;
}

// --mode all: the all-GPU device over the sims (when sims is not NULL) or over a GPU registry
// (the one named by --device, else the first); nullptr with a message where there is none
wsp_ggml_backend_dev_t pick_all_gpu(const EncodeOptions & o, wsp_ggml_backend_reg_t sims) {
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_get(i);
        if (!wsp_ggml_backend_dev_is_all_gpu(dev)) {
            continue;
        }
        const wsp_ggml_backend_reg_t members =
            wsp_ggml_backend_dev_backend_reg(wsp_ggml_backend_all_gpu_member(dev, 0));
        const bool named = o.device == "auto" || o.device == wsp_ggml_backend_dev_name(dev);
        if (named && (sims == nullptr || members == sims)) {
            return dev;
        }
    }
    std::fprintf(stderr, "no all-GPU device%s%s: it needs a registry of two or more GPUs (or --sim N, N >= 2)\n",
                 o.device == "auto" ? "" : " named ", o.device == "auto" ? "" : o.device.c_str());
    return nullptr;
}

// The devices the encoder runs on, in order; empty with a message when the choice is invalid.
std::vector<wsp_ggml_backend_dev_t> pick_devices(const EncodeOptions & o) {
    std::vector<wsp_ggml_backend_dev_t> devs;
    wsp_ggml_backend_reg_t              sims = nullptr;
    if (o.n_sim > 0 && (sims = register_sims(o.n_sim)) == nullptr) {
        return {};
    }
    if (sims == nullptr) {
        wsp_ggml_backend_load_all();
    }
    if (o.mode == Mode::All) {
        wsp_ggml_backend_dev_t all = pick_all_gpu(o, sims);
        return all != nullptr ? std::vector<wsp_ggml_backend_dev_t>{ all } : devs;
    }
    if (sims != nullptr) {
        for (int i = 0; i < o.n_sim; ++i) {
            devs.push_back(wsp_ggml_backend_reg_dev_get(sims, (size_t) i));
        }
        return devs;
    }
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

// one backend per device, then the CPU (last: it takes what the devices do not support); empty
// with a message when one cannot start
std::vector<wsp_ggml_backend_t> start_backends(const std::vector<wsp_ggml_backend_dev_t> & devs, int n_threads) {
    std::vector<wsp_ggml_backend_t> backends;
    wsp_ggml_backend_t              cpu  = nullptr;
    auto                            fail = [&](const char * what) {
        std::fprintf(stderr, "%s\n", what);
        for (wsp_ggml_backend_t x : backends) {
            wsp_ggml_backend_free(x);
        }
        return std::vector<wsp_ggml_backend_t>{};
    };
    for (wsp_ggml_backend_dev_t dev : devs) {
        wsp_ggml_backend_t b = wsp_ggml_backend_dev_init(dev, nullptr);
        if (b == nullptr) {
            return fail((std::string("cannot start a backend on ") + wsp_ggml_backend_dev_name(dev)).c_str());
        }
        backends.push_back(b);
        cpu = wsp_ggml_backend_is_cpu(b) ? b : cpu;
    }
    if (cpu == nullptr) {
        cpu = wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
        if (cpu == nullptr) {
            return fail("no CPU backend");
        }
        backends.push_back(cpu);
    }
    wsp_ggml_backend_cpu_set_n_threads(cpu, n_threads);
    return backends;
}

// the weights placed by the mode (front end and final norm on the first device; the layers split,
// in turn, or whole on the one device); false with a message
bool place_weights(const EncodeOptions & o, const std::vector<wsp_ggml_backend_dev_t> & devs, EncoderWeights & w) {
    std::vector<wsp_ggml_backend_buffer_type_t> layer_bufts;
    wsp_ggml_backend_buffer_type_t              matmul_buft = nullptr;
    const size_t                                n_dev       = devs.size();
    if (o.mode == Mode::All) {
        // whole, in buffers of the main member flagged WEIGHTS (allocate() does): the all-GPU
        // backend spreads each mat-mul weight's rows over the members when it first meets it
        std::printf("weights: whole in %s's buffer type (memory of %s), spread by its backend at first use\n",
                    wsp_ggml_backend_dev_name(devs[0]),
                    wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(devs[0], 0)));
    } else if (n_dev > 1 && o.mode == Mode::Layers) {
        for (size_t d = 0; d < n_dev; ++d) {
            layer_bufts.push_back(wsp_ggml_backend_dev_buffer_type(devs[d]));
        }
        std::printf("weights: layer i on device i %% %zu\n", n_dev);
    } else if (n_dev > 1) {
        matmul_buft = split_buffer_type(devs, o.tensor_split);
        if (matmul_buft == nullptr) {
            return false;
        }
        std::printf("weights: every layer's mat-mul weights split by rows over %zu devices (%s)\n", n_dev,
                    wsp_ggml_backend_buft_name(matmul_buft));
    }
    if (!w.allocate(wsp_ggml_backend_dev_buffer_type(devs[0]), layer_bufts, matmul_buft)) {
        std::fprintf(stderr, "cannot allocate the weights\n");
        return false;
    }
    return true;
}

struct Timing {
    bool                             ok      = false;
    double                           best_ms = 1e30, total_ms = 0.0;
    double                           moved = 0.0; // bytes to, from and between sim devices per timed evaluation
    wsp_ggml_backend_all_gpu_traffic tp{};        // an all-GPU device's tensor-parallel traffic, per evaluation
};

// one untimed warm-up evaluation (one-time copies: weights spread at first use), then the timed runs
Timing evaluate(wsp_ggml_backend_sched_t sched, wsp_ggml_cgraph * graph, int runs, wsp_ggml_backend_dev_t dev0) {
    Timing t;
    t.ok                = wsp_ggml_backend_sched_graph_compute(sched, graph) == WSP_GGML_STATUS_SUCCESS;
    const size_t copied = wsp_ggml_backend_sim_bytes_copied(); // sims count what moves between devices
    const auto   tp0    = wsp_ggml_backend_all_gpu_get_traffic(dev0);
    for (int r = 0; r < runs && t.ok; ++r) {
        const int64_t t0 = wsp_ggml_time_us();
        t.ok             = wsp_ggml_backend_sched_graph_compute(sched, graph) == WSP_GGML_STATUS_SUCCESS;
        const double ms  = (wsp_ggml_time_us() - t0) / 1000.0;
        t.best_ms        = std::min(t.best_ms, ms);
        t.total_ms += ms;
    }
    t.moved       = (double) (wsp_ggml_backend_sim_bytes_copied() - copied) / runs;
    const auto tp = wsp_ggml_backend_all_gpu_get_traffic(dev0);
    t.tp          = { (tp.all_reduce - tp0.all_reduce) / runs, (tp.n_all_reduces - tp0.n_all_reduces) / runs,
                      (tp.sent - tp0.sent) / runs, (tp.gathered - tp0.gathered) / runs, (tp.n_graphs - tp0.n_graphs) / runs };
    return t;
}

// what moved between the sims, and for --mode all what each member holds and the bound of tensor
// parallelism: two all-reduces of the [n_ctx, n_state] f32 activations per layer, a ring moving
// 2(N-1)/N of each per device
void print_moved(const EncodeOptions & o, wsp_ggml_backend_dev_t dev0, double moved,
                 const wsp_ggml_backend_all_gpu_traffic & tp) {
    const EncoderConfig & cfg = o.cfg;
    const double          mib = 1048576.0;
    if (o.n_sim > 1) {
        std::printf("moved:   %.2f MiB between devices per evaluation, %.2f MiB per layer\n", moved / mib,
                    moved / mib / cfg.n_layer);
    }
    if (o.mode != Mode::All) {
        return;
    }
    const size_t n = wsp_ggml_backend_all_gpu_member_count(dev0);
    if (o.n_sim > 1) {
        const double bound = 2.0 * 2.0 * (double) (n - 1) / (double) n * cfg.n_ctx * cfg.n_state * 4.0;
        std::printf("moved:   %.2f MiB per device per layer (total / %zu); bound per device per layer: %.2f MiB\n",
                    moved / mib / cfg.n_layer / (double) n, n, bound / mib);
    }
    if (tp.n_graphs == 0) {
        std::printf("tensor parallel: not used (the row split ran; WSP_GGML_ALL_GPU_TP=0 or the graph did not fit)\n");
    } else {
        const double reduce = (double) tp.all_reduce / mib;
        std::printf("tensor parallel: %zu all-reduces moving %.2f MiB (%.2f MiB per device per layer), %.2f MiB of "
                    "inputs sent, %.2f MiB gathered, per evaluation\n",
                    tp.n_all_reduces, reduce, reduce / (double) n / cfg.n_layer, tp.sent / mib, tp.gathered / mib);
    }
    std::printf("weights: by member");
    for (size_t i = 0; i < n; ++i) {
        std::printf("%s %s %.2f MiB", i == 0 ? "" : ",",
                    wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(dev0, i)),
                    wsp_ggml_backend_all_gpu_weight_bytes(dev0, i) / mib);
    }
    std::printf("\n");
}

// NMSE of the result against the double-precision reference: 0 when it holds, 2 when not
int check_result(const EncoderWeights & w, const std::vector<float> & input, const std::vector<float> & y) {
    const std::vector<double> ref = wsp::model::reference_encoder(w, input);
    double                    err = 0.0, norm = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        err += (y[i] - ref[i]) * (y[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    const double nmse = err / norm;
    std::printf("check:   NMSE vs double reference %.3e (%s)\n", nmse, nmse < 1e-6 ? "ok" : "FAILED");
    return nmse < 1e-6 ? 0 : 2;
}

// runs the allocated graph and reports; 0, 1 (compute failed) or 2 (check failed)
int run_encoder(const EncodeOptions & o, const EncoderWeights & weights, wsp_ggml_backend_sched_t sched,
                const std::vector<wsp_ggml_backend_t> & backends, wsp_ggml_cgraph * graph, wsp_ggml_tensor * mel,
                wsp_ggml_backend_dev_t dev0) {
    const EncoderConfig &    cfg   = o.cfg;
    const std::vector<float> input = wsp::model::random_mel(cfg, 42);
    wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
    wsp_ggml_tensor * out = wsp_ggml_graph_node(graph, -1);
    const Timing      t   = evaluate(sched, graph, o.runs, dev0);
    if (!t.ok) {
        std::fprintf(stderr, "compute failed\n");
        return 1;
    }
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
    std::printf("time:    best %.1f ms, mean %.1f ms over %d runs after 1 warm-up, %.1f GFLOP/s, %.0f frames/s\n",
                t.best_ms, t.total_ms / o.runs, o.runs, wsp::model::encoder_flops(cfg) / (t.best_ms * 1e6),
                cfg.n_ctx / (t.best_ms / 1000.0));
    print_moved(o, dev0, t.moved, t.tp);
    return o.check ? check_result(weights, input, y) : 0;
}

int cmd_encode(const EncodeOptions & o) {
    // the all-GPU device reads its proportions when its registry is registered (pick_devices)
    if (o.mode == Mode::All && !o.tensor_split_arg.empty()) {
        setenv("WSP_GGML_TENSOR_SPLIT", o.tensor_split_arg.c_str(), 1);
    }
    const EncoderConfig &                     cfg  = o.cfg;
    const std::vector<wsp_ggml_backend_dev_t> devs = pick_devices(o);
    if (devs.empty()) {
        return 1;
    }
    const size_t n_parts = o.mode == Mode::All ? wsp_ggml_backend_all_gpu_member_count(devs[0]) : devs.size();
    if (!o.tensor_split.empty() && o.tensor_split.size() != n_parts) {
        std::fprintf(stderr, "--tensor-split has %zu parts for %zu devices\n", o.tensor_split.size(), n_parts);
        return 1;
    }
    std::vector<wsp_ggml_backend_t> backends = start_backends(devs, o.n_threads);
    if (backends.empty()) {
        return 1;
    }
    auto free_backends = [&] {
        for (wsp_ggml_backend_t x : backends) {
            wsp_ggml_backend_free(x);
        }
    };

    std::printf("encoder: %s\n", cfg.describe().c_str());
    for (wsp_ggml_backend_dev_t dev : devs) {
        std::printf("device:  %s (%s)\n", wsp_ggml_backend_dev_name(dev), wsp_ggml_backend_dev_description(dev));
    }
    for (size_t i = 0; i < wsp_ggml_backend_all_gpu_member_count(devs[0]); ++i) {
        wsp_ggml_backend_dev_t m = wsp_ggml_backend_all_gpu_member(devs[0], i);
        std::printf("member:  %s (%s)\n", wsp_ggml_backend_dev_name(m), wsp_ggml_backend_dev_description(m));
    }
    std::printf("cpu:     %d threads%s\n", o.n_threads,
                wsp_ggml_backend_is_cpu(backends[0]) ? "" : " (for ops the devices do not support)");

    EncoderWeights weights(cfg);
    if (!place_weights(o, devs, weights)) {
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
    wsp_ggml_backend_sched_t sched     = wsp_ggml_backend_sched_new(
            backends.data(), nullptr, (int) backends.size(), wsp::model::encoder_graph_size(cfg), devs.size() > 1, true);
    int rc = 1;
    if (sched == nullptr || !wsp_ggml_backend_sched_alloc_graph(sched, graph)) {
        std::fprintf(stderr, "cannot allocate the compute graph\n");
    } else {
        rc = run_encoder(o, weights, sched, backends, graph, mel, devs[0]);
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
