// wsp-ggml-cli encode: a whisper-shaped encoder with random weights through the scheduler on every
// GPU the registry has (the CPU where there is none, or N sim devices with --sim N). With several
// devices the layers' mat-mul weights are spread by rows over them with the devices' split buffer
// type (--mode split), whole layers go to the devices in turn (--mode layers), or everything goes
// to the registry's all-GPU device, which spreads the devices' work itself (--mode all,
// include/ggml-all-gpu.h). One untimed evaluation comes first, so that one-time copies stay out
// of the figures. --check compares the result with the double-precision reference.

#include "cli/commands.h"
#include "cli/encode_report.h"

#include "ggml-all-gpu.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"
#include "ggml.h"
#include "split/partition.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace wsp::cli {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

namespace {

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

// why pick_devices chose devs, in words: the option that named them, or for --device auto every
// GPU, or no GPU with each GPU reg's reason for having none (its NO_DEVICES feature)
std::string why_chosen(const EncodeOptions & o, const std::vector<wsp_ggml_backend_dev_t> & devs) {
    if (o.n_sim > 0) {
        return "--sim " + std::to_string(o.n_sim);
    }
    if (o.device != "auto") {
        return "--device " + o.device;
    }
    if (wsp_ggml_backend_dev_type(devs[0]) != WSP_GGML_BACKEND_DEVICE_TYPE_CPU) {
        return devs.size() == 1 ? "the machine's one GPU" : "every GPU of the machine";
    }
    std::string why = "no GPU";
    for (size_t i = 0; i < wsp_ggml_backend_reg_count(); ++i) {
        wsp_ggml_backend_reg_t reg          = wsp_ggml_backend_reg_get(i);
        auto                   get_features = reinterpret_cast<wsp_ggml_backend_get_features_t>(
            wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features"));
        for (const wsp_ggml_backend_feature * f = get_features ? get_features(reg) : nullptr; f && f->name; ++f) {
            if (std::strcmp(f->name, "NO_DEVICES") == 0) {
                why += std::string(why == "no GPU" ? ": " : "; ") + wsp_ggml_backend_reg_name(reg) + " has none, " +
                       f->value;
            }
        }
    }
    return why;
}

// The split buffer type of the devices' registry over exactly these devices, by shares (one per
// device); nullptr with a message where the registry has none.
wsp_ggml_backend_buffer_type_t split_buffer_type(const std::vector<wsp_ggml_backend_dev_t> & devs,
                                                 const std::vector<float> &                  shares) {
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
                split[i]    = shares[d];
                main_device = main_device < 0 ? (int) i : main_device;
            }
        }
    }
    return fn(main_device, split.data());
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
bool place_weights(const EncodeOptions & o, const std::vector<wsp_ggml_backend_dev_t> & devs,
                   const std::vector<float> & shares, EncoderWeights & w, EncodeReport & report) {
    std::vector<wsp_ggml_backend_buffer_type_t> layer_bufts;
    wsp_ggml_backend_buffer_type_t              matmul_buft = nullptr;
    const size_t                                n_dev       = devs.size();
    char                                        text[256];
    if (o.mode == Mode::All) {
        // whole, in buffers of the main member flagged WEIGHTS (allocate() does): the all-GPU
        // backend spreads each mat-mul weight's rows over the members when it first meets it
        std::snprintf(
            text, sizeof(text), "whole in %s's buffer type (memory of %s), spread by its backend at first use",
            wsp_ggml_backend_dev_name(devs[0]), wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(devs[0], 0)));
        report.placement(text);
    } else if (n_dev > 1 && o.mode == Mode::Layers) {
        for (size_t d = 0; d < n_dev; ++d) {
            layer_bufts.push_back(wsp_ggml_backend_dev_buffer_type(devs[d]));
        }
        std::snprintf(text, sizeof(text), "layer i on device i %% %zu", n_dev);
        report.placement(text);
    } else if (n_dev > 1) {
        matmul_buft = split_buffer_type(devs, shares);
        if (matmul_buft == nullptr) {
            return false;
        }
        std::snprintf(text, sizeof(text), "every layer's mat-mul weights split by rows over %zu devices (%s)", n_dev,
                      wsp_ggml_backend_buft_name(matmul_buft));
        report.placement(text);
    }
    if (!w.allocate(wsp_ggml_backend_dev_buffer_type(devs[0]), layer_bufts, matmul_buft)) {
        std::fprintf(stderr, "cannot allocate the weights\n");
        return false;
    }
    return true;
}

// "run i/N" on stderr, rewritten in place with \r; only where stderr is a terminal, so that logs
// and pipes never see it
class Progress {
public:
    explicit Progress(int runs) : on_(runs > 1 && isatty(2) == 1) {}
    ~Progress() { show(""); }

    Progress(const Progress &)             = delete;
    Progress & operator=(const Progress &) = delete;

    void show(const std::string & text) {
        if (!on_) {
            return;
        }
        // spaces over what is left of a longer previous line
        const int pad = std::max(0, width_ - (int) text.size());
        std::fprintf(stderr, "\r%s%*s\r%s", text.c_str(), pad, "", text.empty() ? "" : text.c_str());
        std::fflush(stderr);
        width_ = (int) text.size();
    }

private:
    bool on_;
    int  width_ = 0;
};

// one untimed warm-up evaluation (one-time copies: weights spread at first use), then the timed runs
Timing evaluate(wsp_ggml_backend_sched_t sched, wsp_ggml_cgraph * graph, int runs,
                const std::vector<wsp_ggml_backend_dev_t> & devs) {
    wsp_ggml_backend_dev_t dev0 = devs[0];
    Timing                 t;
    Progress               progress(runs);
    t.runs = runs;
    progress.show("warm-up ...");
    t.ok                = wsp_ggml_backend_sched_graph_compute(sched, graph) == WSP_GGML_STATUS_SUCCESS;
    const size_t copied = wsp_ggml_backend_sim_bytes_copied(); // sims count what moves between devices
    const auto   tp0    = wsp_ggml_backend_all_gpu_get_traffic(dev0);
    // the devices and an all-GPU device's members, as counted before the timed runs
    for (wsp_ggml_backend_dev_t d : devs) {
        t.counters.push_back({ d, {} });
        for (size_t m = 0; m < wsp_ggml_backend_all_gpu_member_count(d); ++m) {
            t.counters.push_back({ wsp_ggml_backend_all_gpu_member(d, m), {} });
        }
    }
    for (auto & [d, c] : t.counters) {
        wsp_ggml_backend_dev_get_counters(d, &c);
    }
    for (int r = 0; r < runs && t.ok; ++r) {
        char line[128];
        if (r == 0) {
            std::snprintf(line, sizeof(line), "run %d/%d ...", r + 1, runs);
        } else {
            std::snprintf(line, sizeof(line), "run %d/%d ... (best %.1f ms so far)", r + 1, runs, t.best_ms);
        }
        progress.show(line);
        const int64_t t0 = wsp_ggml_time_us();
        t.ok             = wsp_ggml_backend_sched_graph_compute(sched, graph) == WSP_GGML_STATUS_SUCCESS;
        const double ms  = (wsp_ggml_time_us() - t0) / 1000.0;
        t.best_ms        = std::min(t.best_ms, ms);
        t.total_ms += ms;
    }
    for (auto & [d, c] : t.counters) {
        wsp_ggml_backend_counters now{};
        wsp_ggml_backend_dev_get_counters(d, &now);
        uint64_t *       before = &c.graph_computes;
        const uint64_t * after  = &now.graph_computes;
        for (size_t f = 0; f < sizeof(c) / sizeof(uint64_t); ++f) {
            before[f] = after[f] - before[f];
        }
    }
    t.moved       = (double) (wsp_ggml_backend_sim_bytes_copied() - copied) / runs;
    const auto tp = wsp_ggml_backend_all_gpu_get_traffic(dev0);
    t.tp          = { (tp.all_reduce - tp0.all_reduce) / runs, (tp.n_all_reduces - tp0.n_all_reduces) / runs,
                      (tp.sent - tp0.sent) / runs, (tp.gathered - tp0.gathered) / runs, (tp.n_graphs - tp0.n_graphs) / runs };
    return t;
}

// NMSE of the result against the double-precision reference: 0 when it holds, 2 when not
int check_result(const EncoderWeights & w, const std::vector<float> & input, const std::vector<float> & y,
                 EncodeReport & report) {
    const std::vector<double> ref = wsp::model::reference_encoder(w, input);
    double                    err = 0.0, norm = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        err += (y[i] - ref[i]) * (y[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    const double nmse = err / norm;
    report.check(nmse, nmse < 1e-6);
    return nmse < 1e-6 ? 0 : EXIT_CHECK;
}

// runs the allocated graph and reports; 0, 1 (compute failed) or 2 (check failed)
int run_encoder(const EncodeOptions & o, const EncoderWeights & weights, wsp_ggml_backend_sched_t sched,
                const std::vector<wsp_ggml_backend_t> & backends, wsp_ggml_cgraph * graph, wsp_ggml_tensor * mel,
                const std::vector<wsp_ggml_backend_dev_t> & devs, EncodeReport & report) {
    const std::vector<float> input = wsp::model::random_mel(o.cfg, 42);
    wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
    wsp_ggml_tensor * out = wsp_ggml_graph_node(graph, -1);
    const Timing      t   = evaluate(sched, graph, o.runs, devs);
    if (!t.ok) {
        std::fprintf(stderr, "compute failed\n");
        return 1;
    }
    std::vector<float> y((size_t) wsp_ggml_nelements(out));
    wsp_ggml_backend_tensor_get(out, y.data(), 0, y.size() * sizeof(float));
    ResultFigures r;
    double        sq = 0.0;
    for (float v : y) {
        r.mean += v;
        sq += (double) v * v;
    }
    r.mean /= (double) y.size();
    r.sd  = std::sqrt(std::max(0.0, sq / (double) y.size() - r.mean * r.mean));
    r.ne0 = out->ne[0];
    r.ne1 = out->ne[1];
    std::copy_n(y.begin(), std::min<size_t>(4, y.size()), r.first);

    GraphFigures g;
    g.nodes  = wsp_ggml_graph_n_nodes(graph);
    g.splits = wsp_ggml_backend_sched_get_n_splits(sched);
    g.copies = wsp_ggml_backend_sched_get_n_copies(sched);
    for (wsp_ggml_backend_t b : backends) {
        g.compute_bytes += wsp_ggml_backend_sched_get_buffer_size(sched, b);
    }
    for (wsp_ggml_tensor * w : weights.all()) {
        g.weight_bytes += wsp_ggml_nbytes(w);
    }
    report.graph(g);
    report.result(r);
    report.timing(t, devs[0]);
    return o.check ? check_result(weights, input, y, report) : 0;
}

// the weights, the graph and the scheduler over the started backends; then run_encoder
int build_and_run(const EncodeOptions & o, const std::vector<wsp_ggml_backend_dev_t> & devs,
                  const std::vector<float> & shares, std::vector<wsp_ggml_backend_t> & backends,
                  EncodeReport & report) {
    const EncoderConfig & cfg = o.cfg;
    EncoderWeights        weights(cfg);
    if (!place_weights(o, devs, shares, weights, report)) {
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
        rc = run_encoder(o, weights, sched, backends, graph, mel, devs, report);
    }
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    return rc;
}

// the shares of --tensor-split (partition::parse: one parser, one message), or the default ones
// (partition::default_shares); --mode all: the all-GPU device takes them. 0, else EXIT_USAGE (shares
// that do not parse or fit the devices) or EXIT_FAILED (the device refused them), with a message
int shares_of(const EncodeOptions & o, const std::vector<wsp_ggml_backend_dev_t> & devs, std::vector<float> & shares) {
    const bool   all     = o.mode == Mode::All;
    const size_t n_parts = all ? wsp_ggml_backend_all_gpu_member_count(devs[0]) : devs.size();
    if (o.tensor_split.empty()) {
        shares = all ? std::vector<float>{} : wsp::partition::default_shares(devs); // all: the device's own
        return 0;
    }
    std::string why;
    if (!wsp::partition::parse(o.tensor_split.c_str(), n_parts, &shares, &why)) {
        std::fprintf(stderr, "--tensor-split: %s\n", why.c_str());
        return EXIT_USAGE;
    }
    if (all && !wsp_ggml_backend_all_gpu_set_tensor_split(devs[0], shares.data())) {
        std::fprintf(stderr, "--tensor-split: %s did not take the shares %s\n", wsp_ggml_backend_dev_name(devs[0]),
                     o.tensor_split.c_str());
        return EXIT_FAILED;
    }
    return 0;
}

} // namespace

int cmd_encode(const EncodeOptions & o) {
    const std::vector<wsp_ggml_backend_dev_t> devs = pick_devices(o);
    if (devs.empty()) {
        return 1;
    }
    std::vector<float> shares;
    if (const int rc = shares_of(o, devs, shares); rc != 0) {
        return rc;
    }
    std::vector<wsp_ggml_backend_t> backends = start_backends(devs, o.n_threads);
    if (backends.empty()) {
        return 1;
    }
    EncodeReport report(o);
    report.devices(devs, wsp_ggml_backend_is_cpu(backends[0]), why_chosen(o, devs));
    const int rc = build_and_run(o, devs, shares, backends, report);
    for (wsp_ggml_backend_t x : backends) {
        wsp_ggml_backend_free(x);
    }
    return report.finish(rc);
}

} // namespace wsp::cli
