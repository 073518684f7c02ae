// wsp-ggml-cli: the project's command-line tool.
//   devices              list the registered backends and their devices
//   encode [options]     run a whisper-shaped encoder with random weights and print its result and time
// The encoder runs on the CPU backend; --check compares it with the double-precision reference.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include "model/whisper_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using wsp::model::EncoderConfig;
using wsp::model::EncoderWeights;

struct EncodeOptions {
    EncoderConfig cfg;
    int           n_threads = 2;
    int           runs      = 3;
    bool          check     = false;
};

void usage() {
    std::printf(
        "usage: wsp-ggml-cli devices\n"
        "       wsp-ggml-cli encode [--threads N] [--runs N] [--ctx N] [--state N] [--heads N] [--layers N]\n"
        "                           [--mels N] [--type f32|f16|bf16|q8_0|q5_1|q5_0|q4_1|q4_0] [--flash] [--check]\n");
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
        if (a == "--threads") ok = next(o.n_threads);
        else if (a == "--runs") ok = next(o.runs);
        else if (a == "--ctx") ok = next(o.cfg.n_ctx);
        else if (a == "--state") ok = next(o.cfg.n_state);
        else if (a == "--heads") ok = next(o.cfg.n_head);
        else if (a == "--layers") ok = next(o.cfg.n_layer);
        else if (a == "--mels") ok = next(o.cfg.n_mels);
        else if (a == "--flash") o.cfg.flash_attn = true;
        else if (a == "--check") o.check = true;
        else if (a == "--type") ok = i + 1 < argc && parse_type(argv[++i], o.cfg.wtype);
        else ok = false;
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
    return 0;
}

int cmd_encode(const EncodeOptions & o) {
    const EncoderConfig & cfg     = o.cfg;
    wsp_ggml_backend_t    backend = wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    if (backend == nullptr) {
        std::fprintf(stderr, "no CPU backend\n");
        return 1;
    }
    wsp_ggml_backend_cpu_set_n_threads(backend, o.n_threads);
    std::printf("encoder: %s\n", cfg.describe().c_str());
    std::printf("device:  %s (%s), %d threads\n", wsp_ggml_backend_name(backend),
                wsp_ggml_backend_dev_description(wsp_ggml_backend_get_device(backend)), o.n_threads);

    EncoderWeights weights(cfg);
    if (!weights.allocate(wsp_ggml_backend_get_default_buffer_type(backend))) {
        std::fprintf(stderr, "cannot allocate the weights\n");
        wsp_ggml_backend_free(backend);
        return 1;
    }
    weights.randomize(1234);

    const size_t         n_tensors = wsp::model::encoder_graph_tensors(cfg);
    wsp_ggml_init_params params    = { n_tensors * wsp_ggml_tensor_overhead() +
                                           wsp_ggml_graph_overhead_custom(wsp::model::encoder_graph_size(cfg), false),
                                       nullptr, true };
    wsp_ggml_context *   ctx       = wsp_ggml_init(params);
    wsp_ggml_tensor *    mel       = nullptr;
    wsp_ggml_cgraph *    graph     = wsp::model::build_encoder_graph(weights, ctx, &mel);
    wsp_ggml_gallocr_t   galloc    = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(backend));
    int                  rc        = 1;
    if (!wsp_ggml_gallocr_alloc_graph(galloc, graph)) {
        std::fprintf(stderr, "cannot allocate the compute graph\n");
    } else {
        const std::vector<float> input = wsp::model::random_mel(cfg, 42);
        wsp_ggml_backend_tensor_set(mel, input.data(), 0, input.size() * sizeof(float));
        wsp_ggml_tensor * out = wsp_ggml_graph_node(graph, -1);

        double best_ms = 1e30, total_ms = 0.0;
        bool   ok      = true;
        for (int r = 0; r < o.runs && ok; ++r) {
            const int64_t t0 = wsp_ggml_time_us();
            ok               = wsp_ggml_backend_graph_compute(backend, graph) == WSP_GGML_STATUS_SUCCESS;
            const double ms  = (wsp_ggml_time_us() - t0) / 1000.0;
            best_ms          = std::min(best_ms, ms);
            total_ms += ms;
        }
        if (ok) {
            std::vector<float> y((size_t) wsp_ggml_nelements(out));
            wsp_ggml_backend_tensor_get(out, y.data(), 0, y.size() * sizeof(float));
            double mean = 0.0, sq = 0.0;
            for (float v : y) {
                mean += v;
                sq += (double) v * v;
            }
            mean /= (double) y.size();
            const double sd = std::sqrt(std::max(0.0, sq / (double) y.size() - mean * mean));
            std::printf("graph:   %d nodes, compute buffer %.1f MiB, weights %.1f MiB\n", wsp_ggml_graph_n_nodes(graph),
                        wsp_ggml_gallocr_get_buffer_size(galloc, 0) / 1048576.0,
                        [&] {
                            double s = 0;
                            for (wsp_ggml_tensor * t : weights.all()) s += (double) wsp_ggml_nbytes(t);
                            return s / 1048576.0;
                        }());
            std::printf("result:  [%lld, %lld] mean %.6f std %.6f first %.6f %.6f %.6f %.6f\n", (long long) out->ne[0],
                        (long long) out->ne[1], mean, sd, y[0], y[1], y[2], y[3]);
            std::printf("time:    best %.1f ms, mean %.1f ms over %d runs, %.1f GFLOP/s, %.0f frames/s\n", best_ms,
                        total_ms / o.runs, o.runs, wsp::model::encoder_flops(cfg) / (best_ms * 1e6),
                        cfg.n_ctx / (best_ms / 1000.0));
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
    wsp_ggml_gallocr_free(galloc);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(backend);
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
    usage();
    return 1;
}
