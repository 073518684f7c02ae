// encode's output as text or JSON (encode_report.h). The text lines are the tool's historical
// output; the JSON object carries the same figures with bytes unscaled, so that scripts need not
// parse MiB back out of text.

#include "cli/encode_report.h"

#include <cstdio>

namespace wsp::cli {

namespace {

constexpr double kMiB = 1048576.0;

const char * mode_name(Mode m) {
    return m == Mode::Layers ? "layers" : m == Mode::All ? "all" : "split";
}

} // namespace

EncodeReport::EncodeReport(const EncodeOptions & o) : o_(o) {
    if (!o_.json) {
        return;
    }
    const wsp::model::EncoderConfig & cfg = o_.cfg;
    j_.begin_object()
        .key("encoder")
        .begin_object()
        .field("describe", cfg.describe())
        .field("n_mels", cfg.n_mels)
        .field("n_ctx", cfg.n_ctx)
        .field("n_state", cfg.n_state)
        .field("n_head", cfg.n_head)
        .field("n_layer", cfg.n_layer)
        .field("type", wsp_ggml_type_name(cfg.wtype))
        .field("flash_attn", cfg.flash_attn)
        .end_object()
        .field("mode", mode_name(o_.mode))
        .field("sims", o_.n_sim);
}

void EncodeReport::devices(const std::vector<wsp_ggml_backend_dev_t> & devs, bool cpu_device, const std::string & why) {
    const size_t n_members = wsp_ggml_backend_all_gpu_member_count(devs[0]);
    if (!o_.json) {
        std::printf("encoder: %s\n", o_.cfg.describe().c_str());
        std::printf("chosen:  %s\n", why.c_str());
        for (wsp_ggml_backend_dev_t dev : devs) {
            std::printf("device:  %s (%s)\n", wsp_ggml_backend_dev_name(dev), wsp_ggml_backend_dev_description(dev));
        }
        for (size_t i = 0; i < n_members; ++i) {
            wsp_ggml_backend_dev_t m = wsp_ggml_backend_all_gpu_member(devs[0], i);
            std::printf("member:  %s (%s)\n", wsp_ggml_backend_dev_name(m), wsp_ggml_backend_dev_description(m));
        }
        std::printf("cpu:     %d threads%s\n", o_.n_threads, cpu_device ? "" : " (for ops the devices do not support)");
        return;
    }
    const auto named = [&](wsp_ggml_backend_dev_t dev) {
        j_.begin_object()
            .field("name", wsp_ggml_backend_dev_name(dev))
            .field("description", wsp_ggml_backend_dev_description(dev))
            .end_object();
    };
    j_.key("devices").begin_array();
    for (wsp_ggml_backend_dev_t dev : devs) {
        named(dev);
    }
    j_.end_array().key("members").begin_array();
    for (size_t i = 0; i < n_members; ++i) {
        named(wsp_ggml_backend_all_gpu_member(devs[0], i));
    }
    j_.end_array().field("cpu_threads", o_.n_threads).field("cpu_is_device", cpu_device).field("chosen", why);
}

void EncodeReport::placement(const std::string & text) {
    if (o_.json) {
        j_.field("weights", text);
    } else {
        std::printf("weights: %s\n", text.c_str());
    }
}

void EncodeReport::graph(const GraphFigures & g) {
    if (!o_.json) {
        std::printf("graph:   %d nodes in %d splits, %d copies, compute buffers %.1f MiB, weights %.1f MiB\n", g.nodes,
                    g.splits, g.copies, g.compute_bytes / kMiB, g.weight_bytes / kMiB);
        return;
    }
    j_.key("graph")
        .begin_object()
        .field("nodes", g.nodes)
        .field("splits", g.splits)
        .field("copies", g.copies)
        .field("compute_buffer_bytes", (uint64_t) g.compute_bytes)
        .field("weight_bytes", (uint64_t) g.weight_bytes)
        .end_object();
}

void EncodeReport::result(const ResultFigures & r) {
    if (!o_.json) {
        std::printf("result:  [%lld, %lld] mean %.6f std %.6f first %.6f %.6f %.6f %.6f\n", (long long) r.ne0,
                    (long long) r.ne1, r.mean, r.sd, r.first[0], r.first[1], r.first[2], r.first[3]);
        return;
    }
    j_.key("result").begin_object().key("shape").begin_array().value(r.ne0).value(r.ne1).end_array();
    j_.field("mean", r.mean).field("std", r.sd).key("first").begin_array();
    for (float v : r.first) {
        j_.value((double) v);
    }
    j_.end_array().end_object();
}

void EncodeReport::timing(const Timing & t, wsp_ggml_backend_dev_t dev0) {
    const double gflops = wsp::model::encoder_flops(o_.cfg) / (t.best_ms * 1e6);
    const double frames = o_.cfg.n_ctx / (t.best_ms / 1000.0);
    if (!o_.json) {
        std::printf("time:    best %.1f ms, mean %.1f ms over %d runs after 1 warm-up, %.1f GFLOP/s, %.0f frames/s\n",
                    t.best_ms, t.total_ms / t.runs, t.runs, gflops, frames);
    } else {
        j_.key("time")
            .begin_object()
            .field("runs", t.runs)
            .field("warmup_runs", 1)
            .field("best_ms", t.best_ms)
            .field("mean_ms", t.total_ms / t.runs)
            .field("gflops", gflops)
            .field("frames_per_s", frames)
            .end_object();
    }
    moved(t, dev0);
    counters(t);
}

// the counters per evaluation, of the devices that count (the CPU reads zeros and is left out)
void EncodeReport::counters(const Timing & t) {
    static const char * names[] = { "graph_computes", "kernel_launches", "graph_captures", "graph_replays",
                                    "host_syncs",     "device_allocs",   "plans_built" };
    bool                any     = false;
    for (const auto & [dev, c] : t.counters) {
        const uint64_t * v = &c.graph_computes;
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_CPU) {
            continue;
        }
        if (!any) {
            if (o_.json) {
                j_.key("counters").begin_object().field("per", "evaluation");
            }
            any = true;
        }
        if (o_.json) {
            j_.key(wsp_ggml_backend_dev_name(dev)).begin_object();
            for (size_t f = 0; f < 7; ++f) {
                j_.field(names[f], (double) v[f] / t.runs);
            }
            j_.end_object();
            continue;
        }
        std::printf("counters: %s per evaluation:", wsp_ggml_backend_dev_name(dev));
        for (size_t f = 0; f < 7; ++f) {
            std::printf(" %s %g", names[f], (double) v[f] / t.runs);
        }
        std::printf("\n");
    }
    if (any && o_.json) {
        j_.end_object();
    }
}

// What moved between the sims, and for --mode all what each member holds and the bound of tensor
// parallelism: all-reduces of the [n_ctx, n_state] f32 activations, two per layer and the front
// end's one (Note [split convolutions] in src/allgpu/plan.cpp), a ring moving 2(N-1)/N of each per
// device; per layer.
void EncodeReport::moved(const Timing & t, wsp_ggml_backend_dev_t dev0) {
    const wsp::model::EncoderConfig & cfg       = o_.cfg;
    const int                         n_layer   = cfg.n_layer;
    const bool                        all       = o_.mode == Mode::All;
    const size_t                      n         = all ? wsp_ggml_backend_all_gpu_member_count(dev0) : 0;
    const double                      per_layer = (2.0 * n_layer + 1.0) / n_layer; // all-reduces
    const double bound = all ? per_layer * 2.0 * (double) (n - 1) / (double) n * cfg.n_ctx * cfg.n_state * 4.0 : 0.0;
    const wsp_ggml_backend_all_gpu_traffic & tp = t.tp;
    if (o_.json) {
        if (o_.n_sim > 1) {
            j_.key("moved")
                .begin_object()
                .field("bytes_per_evaluation", t.moved)
                .field("bytes_per_layer", t.moved / n_layer);
            if (all) {
                j_.field("bytes_per_device_per_layer", t.moved / n_layer / (double) n)
                    .field("bound_bytes_per_device_per_layer", bound);
            }
            j_.end_object();
        }
        if (!all) {
            return;
        }
        j_.key("tensor_parallel")
            .begin_object()
            .field("used", tp.n_graphs != 0)
            .field("graphs", (uint64_t) tp.n_graphs)
            .field("all_reduces", (uint64_t) tp.n_all_reduces)
            .field("all_reduce_bytes", (uint64_t) tp.all_reduce)
            .field("all_reduce_bytes_per_device_per_layer", (double) tp.all_reduce / (double) n / n_layer)
            .field("sent_bytes", (uint64_t) tp.sent)
            .field("gathered_bytes", (uint64_t) tp.gathered)
            .end_object()
            .key("weights_by_member")
            .begin_array();
        for (size_t i = 0; i < n; ++i) {
            j_.begin_object()
                .field("name", wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(dev0, i)))
                .field("bytes", (uint64_t) wsp_ggml_backend_all_gpu_weight_bytes(dev0, i))
                .end_object();
        }
        j_.end_array();
        return;
    }
    if (o_.n_sim > 1) {
        std::printf("moved:   %.2f MiB between devices per evaluation, %.2f MiB per layer\n", t.moved / kMiB,
                    t.moved / kMiB / n_layer);
    }
    if (!all) {
        return;
    }
    if (o_.n_sim > 1) {
        std::printf("moved:   %.2f MiB per device per layer (total / %zu); bound per device per layer: %.2f MiB\n",
                    t.moved / kMiB / n_layer / (double) n, n, bound / kMiB);
    }
    if (tp.n_graphs == 0) {
        std::printf("tensor parallel: not used (the row split ran; WSP_GGML_ALL_GPU_TP=0 or the graph did not fit)\n");
    } else {
        const double reduce = (double) tp.all_reduce / kMiB;
        std::printf("tensor parallel: %zu all-reduces moving %.2f MiB (%.2f MiB per device per layer), %.2f MiB of "
                    "inputs sent, %.2f MiB gathered, per evaluation\n",
                    tp.n_all_reduces, reduce, reduce / (double) n / n_layer, tp.sent / kMiB, tp.gathered / kMiB);
    }
    std::printf("weights: by member");
    for (size_t i = 0; i < n; ++i) {
        std::printf("%s %s %.2f MiB", i == 0 ? "" : ",",
                    wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(dev0, i)),
                    wsp_ggml_backend_all_gpu_weight_bytes(dev0, i) / kMiB);
    }
    std::printf("\n");
}

void EncodeReport::check(double nmse, bool ok) {
    if (o_.json) {
        j_.key("check").begin_object().field("nmse", nmse).field("ok", ok).end_object();
    } else {
        std::printf("check:   NMSE vs double reference %.3e (%s)\n", nmse, ok ? "ok" : "FAILED");
    }
}

int EncodeReport::finish(int rc) {
    if (o_.json) {
        j_.field("ok", rc == 0).end_object();
        std::printf("%s\n", j_.str().c_str());
    }
    return rc;
}

} // namespace wsp::cli
