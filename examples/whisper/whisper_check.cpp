// whisper_check: runs the real client, whisper.cpp, through whisper.h's public API on the CPU and on
// the device configuration (use_gpu, gpu_device 0: the first GPU device in the registry's order,
// see whisper_backend_init_gpu), and checks that the two agree:
//   - teacher-forced logits: the same fixed token sequence decoded step by step after encoding the
//     same audio; per step NMSE = sum((dev - cpu)^2) / sum(cpu^2) against a threshold;
//   - greedy decoding (whisper_full, no timestamps, language "en", temperature 0, no fallback):
//     identical token lists;
//   - with --reference-model R (the same weights unquantized): the CPU's teacher-forced logits of the
//     model against R's, within the quantization's error (--reference-nmse-max).
// Exit status: 0 when every check passes, 1 when one fails, 2 on bad arguments or a setup failure.

#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "ggml-counters.h"
#include "ggml-sim.h"
#include "whisper.h"

#include "greedy.h"
#include "wav.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string model;
    std::string wav;
    std::string expect_device;
    bool        flash         = false;
    int         threads       = 2;
    int         tokens        = 10;
    double      nmse_max      = 1e-6;
    bool        verbose       = false;
    bool        expect_tp     = false; // every encoder, cross and decoder graph tensor-parallel
    bool        expect_steady = false; // Note [steady step]: the device's counters of a steady step
    int         batch         = 5;     // tokens of the batched decode steps
    std::string reference_model;       // the same weights unquantized, for the quantization's error
    double      reference_nmse_max = 1e-2;
};

void usage(FILE * to) {
    std::fprintf(to,
                 "usage: whisper_check --model M --wav W [--flash] [--expect-device NAME] [--threads N] [--tokens N]\n"
                 "                     [--nmse-max X] [--expect-tensor-parallel] [--expect-steady] [--batch N]\n"
                 "                     [--reference-model R [--reference-nmse-max X]] [--verbose]\n"
                 "  --model M             whisper.cpp model file (ggml format)\n"
                 "  --wav W               16-bit PCM WAV, any rate, mono or stereo\n"
                 "  --flash               flash attention in every context\n"
                 "  --expect-device NAME  fail unless the device whisper.cpp picks (first GPU device) is NAME\n"
                 "  --threads N           CPU threads (2)\n"
                 "  --tokens N            ordinary tokens after the 4-token prompt; greedy max_tokens (10)\n"
                 "  --nmse-max X          per-step logits NMSE threshold (1e-6)\n"
                 "  --expect-tensor-parallel  fail unless the all-GPU device ran the encoder, cross and every\n"
                 "                        decoder graph tensor-parallel (none fell back to the row split)\n"
                 "  --expect-steady       fail unless the device's counters show steady steps after the warm-up\n"
                 "                        (Note [steady step] in whisper_check.cpp)\n"
                 "  --batch N             tokens of each batched decode step (5)\n"
                 "  --reference-model R   the same weights unquantized: the CPU's logits of the model against R's\n"
                 "  --reference-nmse-max X  their per-step NMSE threshold (1e-2)\n"
                 "  --verbose             whisper.cpp's and ggml's info log\n");
}

bool parse_int(const char * s, int lo, int & out) {
    char *     end = nullptr;
    const long v   = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > 100000) {
        return false;
    }
    out = int(v);
    return true;
}

bool parse_args(int argc, char ** argv, Options & o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a        = argv[i];
        const bool        has_next = i + 1 < argc;
        if (a == "--flash") {
            o.flash = true;
        } else if (a == "--verbose") {
            o.verbose = true;
        } else if (a == "--expect-tensor-parallel") {
            o.expect_tp = true;
        } else if (a == "--expect-steady") {
            o.expect_steady = true;
        } else if (a == "--batch" && has_next) {
            if (!parse_int(argv[++i], 1, o.batch)) {
                return false;
            }
        } else if (a == "--reference-model" && has_next) {
            o.reference_model = argv[++i];
        } else if (a == "--reference-nmse-max" && has_next) {
            char * end           = nullptr;
            o.reference_nmse_max = std::strtod(argv[++i], &end);
            if (end == nullptr || *end != '\0' || !(o.reference_nmse_max > 0)) {
                std::fprintf(stderr, "whisper_check: --reference-nmse-max needs a positive number\n");
                return false;
            }
        } else if (a == "--model" && has_next) {
            o.model = argv[++i];
        } else if (a == "--wav" && has_next) {
            o.wav = argv[++i];
        } else if (a == "--expect-device" && has_next) {
            o.expect_device = argv[++i];
        } else if (a == "--threads" && has_next) {
            if (!parse_int(argv[++i], 1, o.threads)) {
                return false;
            }
        } else if (a == "--tokens" && has_next) {
            if (!parse_int(argv[++i], 1, o.tokens)) {
                return false;
            }
        } else if (a == "--nmse-max" && has_next) {
            char * end = nullptr;
            o.nmse_max = std::strtod(argv[++i], &end);
            if (*end != '\0' || !(o.nmse_max >= 0.0)) {
                return false;
            }
        } else {
            std::fprintf(stderr, "whisper_check: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    return !o.model.empty() && !o.wav.empty();
}

// whisper.cpp's log: warnings and errors always, the rest with --verbose. Its line naming the GPU
// backend it initialised ("whisper_backend_init_gpu: using NAME backend") is kept, to check that
// whisper.cpp used the device we expect it to pick.
struct LogState {
    bool        verbose = false;
    std::string gpu_backend;
};
LogState g_log;

void log_callback(wsp_ggml_log_level level, const char * text, void *) {
    static const char prefix[] = "whisper_backend_init_gpu: using ";
    const char *      at       = std::strstr(text, prefix);
    if (at) {
        std::string rest  = at + sizeof(prefix) - 1;
        g_log.gpu_backend = rest.substr(0, rest.find(" backend"));
    }
    if (g_log.verbose || level == WSP_GGML_LOG_LEVEL_WARN || level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

const char * dev_type_name(enum wsp_ggml_backend_dev_type t) {
    switch (t) {
        case WSP_GGML_BACKEND_DEVICE_TYPE_CPU: return "CPU";
        case WSP_GGML_BACKEND_DEVICE_TYPE_GPU: return "GPU";
        case WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL: return "ACCEL";
    }
    return "?";
}

// Prints the registry's devices; returns the name of the first GPU device ("" when there is none),
// which is the one whisper_backend_init_gpu takes for gpu_device 0.
std::string list_devices() {
    std::string first_gpu;
    std::printf("devices:");
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_get(i);
        std::printf(" %s (%s)", wsp_ggml_backend_dev_name(dev), dev_type_name(wsp_ggml_backend_dev_type(dev)));
        if (first_gpu.empty() && wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            first_gpu = wsp_ggml_backend_dev_name(dev);
        }
    }
    std::printf("\n");
    return first_gpu;
}

struct ContextFree {
    void operator()(whisper_context * ctx) const { whisper_free(ctx); }
};
using ContextPtr = std::unique_ptr<whisper_context, ContextFree>;

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// the kinds of graph whisper.cpp runs (Note [graph kinds])
enum GraphKind { KIND_CONV, KIND_ENCODER, KIND_CROSS, KIND_DECODE, KIND_OTHER, N_KINDS };
constexpr const char * KIND_NAMES[N_KINDS] = { "conv", "encoder", "cross", "decode", "other" };

// the calling thread's CPU time, in microseconds
double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

// What one context computed: the logits after each teacher-forced step and the greedy tokens.
struct RunResult {
    std::vector<std::vector<float>> logits;
    std::vector<whisper_token>      tokens;
    int                             batch = 5; // tokens of a batched step
    std::string                     text;
    std::string                     gpu_backend; // what whisper.cpp said it initialised, "" for none
    int                             n_audio_ctx = 0;
    size_t tp_encode_graphs = 0, tp_decode_graphs = 0, steps = 0; // graphs the all-GPU device ran tensor-parallel
    // Note [graph kinds]: the graphs of the measured encode and steps by kind, and whether their
    // bytes add up to the device's count
    size_t kind_graphs[N_KINDS] = {};
    bool   kinds_ok             = true;
    // what the device was asked to do (Note [steady step]): the repeated encode, each decode step of
    // one token, each batched step
    wsp_ggml_backend_counters              encode{};
    std::vector<wsp_ggml_backend_counters> decode, batched;
};

// Note [steady step]: after a warm-up, a step that repeats (the same graph with other numbers)
// should be one replayed device graph: no kernel launched one by one, no allocation, and no host
// wait but the client's own (whisper.cpp synchronizes at the end of each compute and reads the
// logits: 2 per decode step; an encode is 3 computes, conv, encoder and cross). A device graph
// may be captured again when a node changes (the KV cache grows a cell per step without flash
// attention), as long as the step runs from it. --expect-steady fails the run unless every step
// keeps the waits and allocations, and at least 90% of the steps ran from a device graph.
constexpr uint64_t STEADY_DECODE_SYNCS = 2;
constexpr uint64_t STEADY_ENCODE_SYNCS = 3;

wsp_ggml_backend_counters read_counters(wsp_ggml_backend_dev_t dev) {
    wsp_ggml_backend_counters c{};
    wsp_ggml_backend_dev_get_counters(dev, &c);
    return c;
}

// b - a
wsp_ggml_backend_counters since(const wsp_ggml_backend_counters & a, const wsp_ggml_backend_counters & b) {
    return { b.graph_computes - a.graph_computes, b.kernel_launches - a.kernel_launches,
             b.graph_captures - a.graph_captures, b.graph_replays - a.graph_replays,
             b.host_syncs - a.host_syncs,         b.device_allocs - a.device_allocs,
             b.plans_built - a.plans_built };
}

// a step that ran from device graphs alone
bool replayed(const wsp_ggml_backend_counters & c) {
    return c.graph_replays >= 1 && c.kernel_launches == 0;
}

// "graph_computes 1-1 kernel_launches 0-0 ..." over the steps: the lowest and highest of each
std::string counter_ranges(const std::vector<wsp_ggml_backend_counters> & steps) {
    const char * names[] = { "graph_computes", "kernel_launches", "graph_captures", "graph_replays",
                             "host_syncs",     "device_allocs",   "plans_built" };
    std::string  out;
    for (size_t f = 0; f < 7; ++f) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (const wsp_ggml_backend_counters & c : steps) {
            const uint64_t v = (&c.graph_computes)[f];
            lo               = std::min(lo, v);
            hi               = std::max(hi, v);
        }
        out += (f ? " " : "") + std::string(names[f]) + " " + std::to_string(steps.empty() ? 0 : lo) +
               (lo == hi ? "" : "-" + std::to_string(hi));
    }
    return out;
}

void print_counters(const char * device, const RunResult & r) {
    std::printf("counters %s, encode: %s\n", device, counter_ranges({ r.encode }).c_str());
    for (const auto * steps : { &r.decode, &r.batched }) {
        const size_t n = (size_t) std::count_if(steps->begin(), steps->end(), replayed);
        std::printf("counters %s, %s: per step %s; %zu of %zu steps replayed device graphs alone\n", device,
                    steps == &r.decode ? "decode step of 1 token" : "batched decode step",
                    counter_ranges(*steps).c_str(), n, steps->size());
    }
    std::string built; // Note [grown shapes] (src/allgpu/reshape.cpp): which steps were planned or built
    for (const wsp_ggml_backend_counters & c : r.decode) {
        built += (built.empty() ? "" : " ") + std::to_string(c.plans_built);
    }
    std::printf("counters %s, plans and member graphs built by decode step: %s\n", device, built.c_str());
}

// Note [steady step]'s figures; prints what fails
bool steady(const RunResult & r) {
    bool ok = true;
    if (r.encode.host_syncs > STEADY_ENCODE_SYNCS || r.encode.device_allocs != 0 || !replayed(r.encode)) {
        std::printf(
            "FAIL: the repeated encode waited %llu times (at most %llu), allocated %llu times (0), launched %llu "
            "kernels (0) and replayed %llu device graphs (1 or more)\n",
            (unsigned long long) r.encode.host_syncs, (unsigned long long) STEADY_ENCODE_SYNCS,
            (unsigned long long) r.encode.device_allocs, (unsigned long long) r.encode.kernel_launches,
            (unsigned long long) r.encode.graph_replays);
        ok = false;
    }
    for (const auto * steps : { &r.decode, &r.batched }) {
        const char * what = steps == &r.decode ? "decode step" : "batched decode step";
        for (size_t i = 0; i < steps->size(); ++i) {
            const wsp_ggml_backend_counters & c = (*steps)[i];
            if (c.host_syncs > STEADY_DECODE_SYNCS || c.device_allocs != 0) {
                std::printf("FAIL: %s %zu waited %llu times (at most %llu) and allocated %llu times (0)\n", what, i,
                            (unsigned long long) c.host_syncs, (unsigned long long) STEADY_DECODE_SYNCS,
                            (unsigned long long) c.device_allocs);
                ok = false;
            }
        }
        const size_t n = (size_t) std::count_if(steps->begin(), steps->end(), replayed);
        if (steps->empty() || n * 10 < steps->size() * 9) {
            std::printf("FAIL: %zu of %zu %ss ran from device graphs alone (90%% needed)\n", n, steps->size(), what);
            ok = false;
        }
    }
    return ok;
}

// The fixed sequence: SOT, language "en" (multilingual models), transcribe, no-timestamps, then n
// ordinary tokens spread over the text vocabulary by a fixed stride.
std::vector<whisper_token> fixed_sequence(whisper_context * ctx, int n) {
    std::vector<whisper_token> seq = { whisper_token_sot(ctx) };
    if (whisper_is_multilingual(ctx)) {
        seq.push_back(whisper_token_lang(ctx, whisper_lang_id("en")));
        seq.push_back(whisper_token_transcribe(ctx));
    }
    seq.push_back(whisper_token_not(ctx));
    const int n_text = whisper_token_eot(ctx); // ordinary tokens are the ids below EOT
    for (int i = 0; i < n; ++i) {
        seq.push_back(whisper_token(1 + (int64_t(7919) * (i + 1)) % (n_text - 1)));
    }
    return seq;
}

// an all-GPU device's tensor-parallel traffic since `from`, per graph step
void print_traffic(const char * what, const wsp_ggml_backend_all_gpu_traffic & from,
                   const wsp_ggml_backend_all_gpu_traffic & t, wsp_ggml_backend_dev_t dev, size_t steps, int n_layer) {
    const size_t n   = wsp_ggml_backend_all_gpu_member_count(dev);
    const double kib = 1024.0 * (double) steps;
    std::printf("tensor parallel, %s: %zu graphs, %zu all-reduces moving %.1f KiB (%.2f KiB per device per layer), "
                "%.1f KiB sent, %.1f KiB gathered, per %s\n",
                what, (t.n_graphs - from.n_graphs) / steps, (t.n_all_reduces - from.n_all_reduces) / steps,
                (double) (t.all_reduce - from.all_reduce) / kib,
                (double) (t.all_reduce - from.all_reduce) / kib / (double) n / n_layer,
                (double) (t.sent - from.sent) / kib, (double) (t.gathered - from.gathered) / kib,
                steps == 1 ? "encode" : "decode step");
}

// Note [graph kinds]: what each graph whisper.cpp gives the all-GPU device moved
// (wsp_ggml_backend_all_gpu_set_graph_callback), by kind. A decode is one graph, a decoder step;
// an encode is three: the conv front end (im2col or a convolution), the encoder (attention) and
// the cross K/V (mat-muls of the encoder's output into the cross cache, no attention). The kind
// is told by the call being measured and the graph's ops; a graph that is none of them is
// "other" (a split of the scheduler's, where it cuts a graph).

struct KindTraffic {
    size_t                           graphs = 0;
    size_t                           bytes  = 0; // all-reduced, sent and gathered
    wsp_ggml_backend_all_gpu_traffic t{};
};

struct GraphTraffic {
    enum { NONE, ENCODE, DECODE } phase = NONE; // the whisper.cpp call measured now
    KindTraffic kinds[N_KINDS];
};

GraphKind kind_of(const wsp_ggml_cgraph * g, bool encoding) {
    bool conv = false, attention = false, mul_mat = false, rows = false;
    for (int i = 0; i < wsp_ggml_graph_n_nodes(const_cast<wsp_ggml_cgraph *>(g)); ++i) {
        switch (wsp_ggml_graph_node(const_cast<wsp_ggml_cgraph *>(g), i)->op) {
            case WSP_GGML_OP_IM2COL:
            case WSP_GGML_OP_CONV_TRANSPOSE_1D: conv = true; break;
            case WSP_GGML_OP_SOFT_MAX:
            case WSP_GGML_OP_FLASH_ATTN_EXT: attention = true; break;
            case WSP_GGML_OP_MUL_MAT: mul_mat = true; break;
            case WSP_GGML_OP_GET_ROWS: rows = true; break;
            default: break;
        }
    }
    if (!encoding) {
        return attention && rows ? KIND_DECODE : KIND_OTHER; // the token and position rows, self and cross attention
    }
    if (conv) {
        return KIND_CONV;
    }
    if (attention) {
        return KIND_ENCODER;
    }
    return mul_mat ? KIND_CROSS : KIND_OTHER;
}

void record_graph(const wsp_ggml_cgraph * g, const wsp_ggml_backend_all_gpu_traffic * moved, void * ud) {
    auto * gt = static_cast<GraphTraffic *>(ud);
    if (gt->phase == GraphTraffic::NONE) {
        return;
    }
    KindTraffic & k = gt->kinds[kind_of(g, gt->phase == GraphTraffic::ENCODE)];
    ++k.graphs;
    k.bytes += moved->all_reduce + moved->sent + moved->gathered;
    k.t.all_reduce += moved->all_reduce;
    k.t.n_all_reduces += moved->n_all_reduces;
    k.t.sent += moved->sent;
    k.t.gathered += moved->gathered;
    k.t.n_graphs += moved->n_graphs;
}

// the bytes by graph kind (per encode, and per decode step over `steps`); false where the kinds'
// sum is not the device's own count of the same calls
bool print_graph_kinds(const GraphTraffic & gt, const wsp_ggml_backend_all_gpu_traffic & total, size_t steps) {
    std::printf("moved by graph kind:");
    wsp_ggml_backend_all_gpu_traffic sum{};
    for (int k = 0; k < N_KINDS; ++k) {
        const KindTraffic & kt  = gt.kinds[k];
        const double        per = k == KIND_DECODE ? (double) steps : 1.0;
        sum.all_reduce += kt.t.all_reduce;
        sum.n_all_reduces += kt.t.n_all_reduces;
        sum.sent += kt.t.sent;
        sum.gathered += kt.t.gathered;
        sum.n_graphs += kt.t.n_graphs;
        if (kt.graphs == 0 && k == KIND_OTHER) {
            continue;
        }
        std::printf("%s %s %.1f KiB%s (%zu graph%s, %zu tensor-parallel; all-reduced %.1f, sent %.1f, gathered %.1f)",
                    k > 0 ? ";" : "", KIND_NAMES[k], (double) kt.bytes / 1024.0 / per,
                    k == KIND_DECODE ? " per step" : "", kt.graphs, kt.graphs == 1 ? "" : "s", kt.t.n_graphs,
                    (double) kt.t.all_reduce / 1024.0 / per, (double) kt.t.sent / 1024.0 / per,
                    (double) kt.t.gathered / 1024.0 / per);
    }
    const bool same = sum.all_reduce == total.all_reduce && sum.n_all_reduces == total.n_all_reduces &&
                      sum.sent == total.sent && sum.gathered == total.gathered && sum.n_graphs == total.n_graphs;
    std::printf("\nmoved by graph kind, summed: %s\n",
                same ? "the device's count" : "FAIL (not the device's count of the same calls)");
    return same;
}

// Batched decode steps (beam search and several decoders give whisper.cpp batches): a warm-up
// batch, then batches at successive positions, as a sequence grows
bool batched_steps(whisper_context * ctx, const std::vector<whisper_token> & seq, int threads,
                   wsp_ggml_backend_dev_t dev, RunResult & r) {
    const int n = r.batch;
    if ((int) seq.size() < n) {
        return true;
    }
    for (int step = -1; step < 4; ++step) {
        const int  n_past = step < 0 ? 0 : step * n;
        const auto c      = read_counters(dev);
        if (whisper_decode(ctx, &seq[(size_t) (std::max(step, 0) * n) % (seq.size() - (size_t) n + 1)], n, n_past,
                           threads) != 0) {
            std::fprintf(stderr, "whisper_check: a batched whisper_decode of %d tokens failed\n", n);
            return false;
        }
        if (step >= 0) {
            r.batched.push_back(since(c, read_counters(dev)));
        }
    }
    return true;
}

bool teacher_forced(whisper_context * ctx, const std::vector<float> & pcm, const std::vector<whisper_token> & seq,
                    int threads, RunResult & r) {
    if (whisper_pcm_to_mel(ctx, pcm.data(), int(pcm.size()), threads) != 0) {
        std::fprintf(stderr, "whisper_check: whisper_pcm_to_mel failed\n");
        return false;
    }
    // the all-GPU device whisper.cpp picked, if so: its traffic per encode and per decode step
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name(g_log.gpu_backend.c_str());
    all                        = all != nullptr && wsp_ggml_backend_dev_is_all_gpu(all) ? all : nullptr;
    if (whisper_encode(ctx, 0, threads) != 0) { // warm-up: one-time placements (weights spread, caches sharded)
        std::fprintf(stderr, "whisper_check: whisper_encode failed\n");
        return false;
    }
    // warm-up of the decoder too (its step 0 is decoded again below)
    if (whisper_decode(ctx, &seq[0], 1, 0, threads) != 0) {
        std::fprintf(stderr, "whisper_check: whisper_decode failed\n");
        return false;
    }
    // the device whisper.cpp runs on (NULL on the CPU: its counters read zeros)
    wsp_ggml_backend_dev_t dev        = wsp_ggml_backend_dev_by_name(g_log.gpu_backend.c_str());
    const auto             t_enc      = std::chrono::steady_clock::now();
    const auto             before_enc = wsp_ggml_backend_all_gpu_get_traffic(all);
    const size_t           sim_enc    = wsp_ggml_backend_sim_bytes_copied();
    const auto             c_enc      = read_counters(dev);
    GraphTraffic           by_kind; // Note [graph kinds]
    if (all != nullptr) {
        wsp_ggml_backend_all_gpu_set_graph_callback(all, record_graph, &by_kind);
    }
    by_kind.phase = GraphTraffic::ENCODE;
    if (whisper_encode(ctx, 0, threads) != 0) {
        std::fprintf(stderr, "whisper_check: whisper_encode failed\n");
        wsp_ggml_backend_all_gpu_set_graph_callback(all, nullptr, nullptr);
        return false;
    }
    by_kind.phase                  = GraphTraffic::DECODE;
    r.encode                       = since(c_enc, read_counters(dev));
    const double        ms_enc     = ms_since(t_enc);
    const auto          before_dec = wsp_ggml_backend_all_gpu_get_traffic(all);
    const size_t        sim_dec    = wsp_ggml_backend_sim_bytes_copied(); // sims count every copy
    const auto          t_dec      = std::chrono::steady_clock::now();
    const int           n_vocab    = whisper_n_vocab(ctx);
    std::vector<double> host_us; // the calling thread's CPU time per step (the sims compute on their own threads)
    for (size_t i = 0; i < seq.size(); ++i) {
        const auto   c  = read_counters(dev);
        const double h0 = thread_cpu_us();
        if (whisper_decode(ctx, &seq[i], 1, int(i), threads) != 0) {
            std::fprintf(stderr, "whisper_check: whisper_decode failed at step %zu\n", i);
            wsp_ggml_backend_all_gpu_set_graph_callback(all, nullptr, nullptr);
            return false;
        }
        host_us.push_back(thread_cpu_us() - h0);
        r.decode.push_back(since(c, read_counters(dev)));
        const float * l = whisper_get_logits(ctx);
        r.logits.emplace_back(l, l + n_vocab);
    }
    std::printf(
        "timing: encode (conv, encoder, cross K/V; after a warm-up) %.1f ms, decode %.2f ms per step over %zu steps\n",
        ms_enc, ms_since(t_dec) / (double) seq.size(), seq.size());
    std::sort(host_us.begin(), host_us.end());
    std::printf("host time: decode step median %.1f us of the calling thread's CPU time over %zu steps\n",
                host_us.empty() ? 0.0 : host_us[host_us.size() / 2], host_us.size());
    if (wsp_ggml_backend_sim_bytes_copied() > sim_enc) {
        std::printf("moved (sims): %.1f KiB per encode, %.1f KiB per decode step, to, from and between the sims\n",
                    (double) (sim_dec - sim_enc) / 1024.0,
                    (double) (wsp_ggml_backend_sim_bytes_copied() - sim_dec) / 1024.0 / (double) seq.size());
    }
    r.steps       = seq.size();
    by_kind.phase = GraphTraffic::NONE;
    if (all != nullptr) {
        wsp_ggml_backend_all_gpu_set_graph_callback(all, nullptr, nullptr);
        const auto after   = wsp_ggml_backend_all_gpu_get_traffic(all);
        r.tp_encode_graphs = before_dec.n_graphs - before_enc.n_graphs;
        r.tp_decode_graphs = after.n_graphs - before_dec.n_graphs;
        print_traffic("encode", before_enc, before_dec, all, 1, whisper_model_n_audio_layer(ctx));
        print_traffic("decode", before_dec, after, all, seq.size(), whisper_model_n_text_layer(ctx));
        const wsp_ggml_backend_all_gpu_traffic total{
            after.all_reduce - before_enc.all_reduce, after.n_all_reduces - before_enc.n_all_reduces,
            after.sent - before_enc.sent, after.gathered - before_enc.gathered, after.n_graphs - before_enc.n_graphs
        };
        r.kinds_ok = print_graph_kinds(by_kind, total, seq.size());
        for (int k = 0; k < N_KINDS; ++k) {
            r.kind_graphs[k] = by_kind.kinds[k].graphs;
        }
    }
    return batched_steps(ctx, seq, threads, dev, r);
}

bool greedy(whisper_context * ctx, const std::vector<float> & pcm, const Options & o, RunResult & r) {
    const whisper_full_params p = wsp::example::greedy_params(o.threads, o.tokens);
    if (whisper_full(ctx, p, pcm.data(), int(pcm.size())) != 0) {
        std::fprintf(stderr, "whisper_check: whisper_full failed\n");
        return false;
    }
    for (int s = 0; s < whisper_full_n_segments(ctx); ++s) {
        for (int t = 0; t < whisper_full_n_tokens(ctx, s); ++t) {
            r.tokens.push_back(whisper_full_get_token_id(ctx, s, t));
        }
        r.text += whisper_full_get_segment_text(ctx, s);
    }
    return true;
}

// Loads the model in a context of its own, runs both phases, frees the context.
bool run_context(const char * label, const Options & o, bool use_gpu, bool flash, const std::vector<float> & pcm,
                 RunResult & r) {
    const auto             t0 = std::chrono::steady_clock::now();
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu                = use_gpu;
    cp.flash_attn             = flash;
    cp.gpu_device             = 0;
    g_log.gpu_backend.clear();
    ContextPtr ctx(whisper_init_from_file_with_params(o.model.c_str(), cp));
    if (!ctx) {
        std::fprintf(stderr, "whisper_check: %s: could not load %s\n", label, o.model.c_str());
        return false;
    }
    r.gpu_backend       = g_log.gpu_backend;
    r.n_audio_ctx       = whisper_n_audio_ctx(ctx.get());
    const double t_load = ms_since(t0);
    const auto   t1     = std::chrono::steady_clock::now();
    const auto   seq    = fixed_sequence(ctx.get(), o.tokens);
    r.batch             = o.batch;
    if (!teacher_forced(ctx.get(), pcm, seq, o.threads, r)) {
        return false;
    }
    const double t_forced = ms_since(t1);
    const auto   t2       = std::chrono::steady_clock::now();
    if (!greedy(ctx.get(), pcm, o, r)) {
        return false;
    }
    std::printf("%-18s backend %-8s load %7.0f ms, mel+encode+%zu decode steps %7.0f ms, greedy %7.0f ms\n", label,
                r.gpu_backend.empty() ? "CPU" : r.gpu_backend.c_str(), t_load, seq.size(), t_forced, ms_since(t2));
    return true;
}

struct NmseResult {
    double worst      = 0.0;
    size_t worst_step = 0;
    bool   finite     = true;
};

NmseResult compare_logits(const RunResult & got, const RunResult & ref) {
    NmseResult res;
    for (size_t s = 0; s < ref.logits.size() && s < got.logits.size(); ++s) {
        double err = 0.0, norm = 0.0;
        for (size_t i = 0; i < ref.logits[s].size(); ++i) {
            const double d = double(got.logits[s][i]) - double(ref.logits[s][i]);
            err += d * d;
            norm += double(ref.logits[s][i]) * double(ref.logits[s][i]);
        }
        const double nmse = norm > 0.0 ? err / norm : err;
        if (!(nmse == nmse) || nmse > 1e300) {
            res.finite = false;
        }
        if (!(nmse <= res.worst)) {
            res.worst      = nmse;
            res.worst_step = s;
        }
    }
    return res;
}

std::string token_list(const std::vector<whisper_token> & tokens) {
    std::string s = "[";
    for (size_t i = 0; i < tokens.size(); ++i) {
        s += (i ? " " : "") + std::to_string(tokens[i]);
    }
    return s + "]";
}

bool load_audio(const Options & o, std::vector<float> & pcm) {
    std::vector<float> mono;
    int                rate = 0;
    std::string        error;
    if (!wsp::example::read_wav_mono(o.wav, mono, rate, &error)) {
        std::fprintf(stderr, "whisper_check: %s\n", error.c_str());
        return false;
    }
    pcm = wsp::example::resample(mono, rate, WHISPER_SAMPLE_RATE);
    std::printf("audio: %s, %.2f s at %d Hz -> %zu samples at %d Hz (Blackman-windowed sinc resampler)\n",
                o.wav.c_str(), double(mono.size()) / rate, rate, pcm.size(), WHISPER_SAMPLE_RATE);
    return !pcm.empty();
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) { // asked for: the usage on stdout, status 0
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    }
    if (!parse_args(argc, argv, o)) {
        usage(stderr);
        return 2;
    }
    g_log.verbose = o.verbose;
    whisper_log_set(log_callback, nullptr);

    std::vector<float> pcm;
    if (!load_audio(o, pcm)) {
        return 2;
    }
    std::printf("whisper.cpp %s, model %s, flash attention %s, %d threads\n", whisper_version(), o.model.c_str(),
                o.flash ? "on" : "off", o.threads);
    const std::string first_gpu = list_devices();
    bool              ok        = true;
    if (!o.expect_device.empty() && first_gpu != o.expect_device) {
        std::printf("FAIL: expected device %s, the first GPU device is %s\n", o.expect_device.c_str(),
                    first_gpu.empty() ? "none" : first_gpu.c_str());
        ok = false;
    }

    RunResult cpu, dev;
    if (!run_context("cpu (use_gpu=0)", o, false, o.flash, pcm, cpu)) {
        return 2;
    }
    if (!run_context("device (use_gpu=1)", o, true, o.flash, pcm, dev)) {
        std::printf("FAIL: the device run failed (above); what it computed before is compared below\n");
        ok = false;
    }
    const std::string used = dev.gpu_backend.empty() ? "CPU" : dev.gpu_backend;
    if (!dev.gpu_backend.empty()) {
        print_counters(used.c_str(), dev);
    }
    if (o.expect_steady) {
        const bool steady_ok = !dev.gpu_backend.empty() && steady(dev);
        std::printf("steady steps (Note [steady step]): %s\n", steady_ok ? "ok" : "FAIL");
        ok = ok && steady_ok;
    }
    std::printf("device used: %s (first GPU device in the registry: %s)\n", used.c_str(),
                first_gpu.empty() ? "none" : first_gpu.c_str());
    if (dev.gpu_backend != first_gpu) {
        std::printf("FAIL: whisper.cpp used %s, not the first GPU device %s\n", used.c_str(), first_gpu.c_str());
        ok = false;
    }

    const NmseResult nmse = compare_logits(dev, cpu);
    const bool       logits_ok =
        nmse.finite && dev.logits.size() == cpu.logits.size() && !cpu.logits.empty() && nmse.worst <= o.nmse_max;
    std::printf("teacher-forced logits: %zu steps of %zu, max NMSE %.3e at step %zu (threshold %.1e): %s\n",
                cpu.logits.size(), cpu.logits.empty() ? size_t(0) : cpu.logits[0].size(), nmse.worst, nmse.worst_step,
                o.nmse_max, logits_ok ? "ok" : "FAIL");
    ok = ok && logits_ok;

    if (o.flash) {
        // how far flash attention moves the CPU's own logits: the scale of a flash threshold
        RunResult cpu_plain;
        if (!run_context("cpu, no flash", o, false, false, pcm, cpu_plain)) {
            return 2;
        }
        // whisper.cpp's flash path attends over the audio context's K/V padded to a multiple of 256
        // positions, with no mask: the padding holds zeros, and those keys take part in every softmax,
        // so flash and non-flash differ by more than rounding unless n_audio_ctx is such a multiple
        const NmseResult f      = compare_logits(cpu, cpu_plain);
        const int        padded = (cpu.n_audio_ctx + 255) / 256 * 256;
        std::printf("cpu flash vs cpu non-flash logits (info): max NMSE %.3e at step %zu", f.worst, f.worst_step);
        if (padded != cpu.n_audio_ctx) {
            std::printf(" (flash also attends to the %d zero positions padding the audio context %d to %d)",
                        padded - cpu.n_audio_ctx, cpu.n_audio_ctx, padded);
        }
        std::printf("\n");
    }

    if (!o.reference_model.empty()) { // what quantizing the weights costs, on the CPU
        Options ro = o;
        ro.model   = o.reference_model;
        RunResult ref;
        if (!run_context("cpu, reference", ro, false, o.flash, pcm, ref)) {
            return 2;
        }
        const NmseResult q    = compare_logits(cpu, ref);
        const bool       q_ok = q.finite && ref.logits.size() == cpu.logits.size() && q.worst <= o.reference_nmse_max;
        std::printf("model vs reference model logits (cpu): max NMSE %.3e at step %zu (threshold %.1e): %s\n", q.worst,
                    q.worst_step, o.reference_nmse_max, q_ok ? "ok" : "FAIL");
        std::printf("greedy tokens reference: %s\n", token_list(ref.tokens).c_str());
        ok = ok && q_ok;
    }

    const bool tokens_ok = dev.tokens == cpu.tokens && !cpu.tokens.empty();
    std::printf("greedy tokens cpu:    %s\n", token_list(cpu.tokens).c_str());
    std::printf("greedy tokens device: %s\n", token_list(dev.tokens).c_str());
    std::printf("greedy text cpu: \"%s\"\n", cpu.text.c_str());
    std::printf("greedy tokens: %s\n", tokens_ok ? "identical" : "FAIL (differ or empty)");
    ok = ok && tokens_ok;

    if (o.expect_tp) { // the conv, encoder and cross graphs (Note [split convolutions]) and every step
        // Note [grown shapes]: from the third step on nothing is planned or built, padded cache or not
        size_t planned = 0;
        for (size_t i = 2; i < dev.decode.size(); ++i) {
            planned += dev.decode[i].plans_built;
        }
        const bool kept_ok = planned == 0;
        std::printf("plans and member graphs built after the second decode step: %zu: %s\n", planned,
                    kept_ok ? "ok" : "FAIL (a step was planned or built anew)");
        ok               = ok && kept_ok;
        const bool tp_ok = dev.tp_encode_graphs == 3 && dev.tp_decode_graphs == dev.steps;
        std::printf("tensor parallel: %zu encode graphs, %zu of %zu decode steps: %s\n", dev.tp_encode_graphs,
                    dev.tp_decode_graphs, dev.steps, tp_ok ? "ok" : "FAIL (a graph fell back to the row split)");
        // Note [graph kinds]: an encode is one graph of each kind, a step one decode graph, and
        // what they moved adds up to the device's count
        const bool kinds_ok = dev.kinds_ok && dev.kind_graphs[KIND_CONV] == 1 && dev.kind_graphs[KIND_ENCODER] == 1 &&
                              dev.kind_graphs[KIND_CROSS] == 1 && dev.kind_graphs[KIND_DECODE] == dev.steps &&
                              dev.kind_graphs[KIND_OTHER] == 0;
        std::printf("graph kinds: %zu conv, %zu encoder, %zu cross, %zu decode, %zu other: %s\n",
                    dev.kind_graphs[KIND_CONV], dev.kind_graphs[KIND_ENCODER], dev.kind_graphs[KIND_CROSS],
                    dev.kind_graphs[KIND_DECODE], dev.kind_graphs[KIND_OTHER],
                    kinds_ok ? "ok" : "FAIL (expected one of each per encode, one decode graph per step)");
        ok = ok && tp_ok && kinds_ok;
    }
    std::printf("SUMMARY: %s device=%s flash=%s steps=%zu max_nmse=%.3e tokens=%zu %s\n", ok ? "PASS" : "FAIL",
                used.c_str(), o.flash ? "on" : "off", cpu.logits.size(), nmse.worst, cpu.tokens.size(),
                tokens_ok ? "identical" : "differ");
    return ok ? 0 : 1;
}
