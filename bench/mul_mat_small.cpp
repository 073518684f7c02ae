// Small-batch MUL_MAT on the CPU backend, weights read from DRAM as in a decoder step: one graph
// holds G independent mul_mats, each with its own K x N weight, G chosen so that the weights total
// at least --min-mib (default 192 MiB, 4x a 32 MiB L3 and more); activations K x M, F32. Public API
// only (ggml.h, ggml-alloc.h, ggml-backend.h, ggml-cpu.h), so the same source builds against ours
// and against the ggml whisper.rn ships (bench/peers). Figures are the best of --runs computes.
//   mul_mat_small [--threads=2] [--runs=5] [--types=f32,f16,...] [--ms=1,2,4,8,16]
//                 [--shapes=1280x5120,5120x1280] [--min-mib=192] [--legacy] [--label=NAME] [--json=FILE]
// --legacy: through wsp_ggml_graph_compute_with_ctx (no backend, no threadpool: "legacy" rows), the
// weights in the plain CPU buffer type; with --min-mib=1, one weight that stays in the cache.
// Also the machine's memory read bandwidth (threads summing disjoint parts of a 512 MiB buffer
// with AVX2 loads), once at the start and again beside every row (its bw_frac is against the pass
// of the same moment, Note [probe beside the row]) and, where built with WSP_BENCH_OPENBLAS, cblas_sgemm on the F32
// weights.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#if defined(WSP_BENCH_OPENBLAS)
#    include <cblas.h>
#endif

#if defined(__x86_64__)
#    include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Shape {
    int64_t k, n;
};

struct Options {
    int                        threads = 2;
    int                        runs    = 5;
    double                     min_mib = 192;
    std::vector<wsp_ggml_type> types   = {
          WSP_GGML_TYPE_F32,  WSP_GGML_TYPE_F16,  WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q8_0,
          WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1
    };
    std::vector<int64_t> ms     = { 1, 2, 4, 8, 16 };
    std::vector<Shape>   shapes = { { 1280, 5120 } };
    std::string          label  = "ggml";
    std::string          json;
    bool                 plain  = false; // weights in the CPU buffer type even where an extra one fits
    bool                 legacy = false; // wsp_ggml_graph_compute_with_ctx instead of the backend ("legacy" rows)
};

// one measured row: an implementation ("ggml" or "openblas") on a type, shape and batch
struct Row {
    std::string impl, type, buft;
    int64_t     k, n, m, g;
    double      weight_mib, ms, gflops, weight_gbs, probe_gbs, bw_fraction, err;
};

// a timing and the check of its result: max |y - ref| / max |ref| over the checked rows
struct Timing {
    double seconds = -1, err = 0;
    double probe_gbs = 0; // the best probe pass beside the computes
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    std::stringstream        ss(s);
    for (std::string item; std::getline(ss, item, sep);) {
        if (!item.empty()) {
            out.push_back(item);
        }
    }
    return out;
}

bool parse_type(const std::string & name, wsp_ggml_type & t) {
    for (int i = 0; i < WSP_GGML_TYPE_COUNT; ++i) {
        const char * n = wsp_ggml_type_name(wsp_ggml_type(i));
        if (n && name == n) {
            t = wsp_ggml_type(i);
            return true;
        }
    }
    return false;
}

bool parse(int argc, char ** argv, Options & o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a   = argv[i];
        const size_t      eq  = a.find('=');
        const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
        if (key == "--threads" && std::atoi(value.c_str()) > 0) {
            o.threads = std::atoi(value.c_str());
        } else if (key == "--runs" && std::atoi(value.c_str()) > 0) {
            o.runs = std::atoi(value.c_str());
        } else if (key == "--min-mib" && std::atof(value.c_str()) > 0) {
            o.min_mib = std::atof(value.c_str());
        } else if (key == "--plain-buft" && value.empty()) {
            o.plain = true;
        } else if (key == "--legacy" && value.empty()) {
            o.legacy = true;
            o.plain  = true; // the legacy path computes on the tensors' memory: no repacked layout
        } else if (key == "--label" && !value.empty()) {
            o.label = value;
        } else if (key == "--json" && !value.empty()) {
            o.json = value;
        } else if (key == "--types" && !value.empty()) {
            o.types.clear();
            for (const auto & name : split(value, ',')) {
                wsp_ggml_type t;
                if (!parse_type(name, t)) {
                    std::fprintf(stderr, "mul_mat_small: unknown type %s\n", name.c_str());
                    return false;
                }
                o.types.push_back(t);
            }
        } else if (key == "--ms" && !value.empty()) {
            o.ms.clear();
            for (const auto & m : split(value, ',')) {
                if (std::atoll(m.c_str()) < 1) {
                    std::fprintf(stderr, "mul_mat_small: bad batch %s\n", m.c_str());
                    return false;
                }
                o.ms.push_back(std::atoll(m.c_str()));
            }
        } else if (key == "--shapes" && !value.empty()) {
            o.shapes.clear();
            for (const auto & s : split(value, ',')) {
                long long k = 0, n = 0;
                if (std::sscanf(s.c_str(), "%lldx%lld", &k, &n) != 2 || k < 1 || n < 1) {
                    std::fprintf(stderr, "mul_mat_small: bad shape %s (KxN)\n", s.c_str());
                    return false;
                }
                o.shapes.push_back({ k, n });
            }
        } else {
            std::fprintf(
                stderr,
                "usage: mul_mat_small [--threads=N] [--runs=R] [--types=f32,f16,bf16,q8_0,...] "
                "[--ms=1,2,4] [--shapes=1280x5120,...] [--min-mib=192] [--plain-buft] [--legacy] [--label=NAME] "
                "[--json=FILE]\n");
            return false;
        }
    }
    return true;
}

// Note [bandwidth probe]: each thread sums its own contiguous part as four interleaved streams
// (a mat-vec kernel reads several weight rows at once; one stream per core leaves bandwidth unused),
// with AVX2 loads into independent accumulators, so the loads are the only limit; the sum goes to a
// volatile so nothing is elided. A kernel may still come out a few percent above it.
#if defined(__x86_64__)
__attribute__((target("avx2"))) float sum_avx2(const float * p, size_t n) {
    constexpr int streams = 4;
    const size_t  len     = n / streams / 16 * 16;
    __m256        acc[streams];
    for (auto & a : acc) {
        a = _mm256_setzero_ps();
    }
    for (size_t i = 0; i < len; i += 16) {
        for (int j = 0; j < streams; ++j) {
            const float * q = p + size_t(j) * len + i;
            acc[j]          = _mm256_add_ps(acc[j], _mm256_add_ps(_mm256_load_ps(q), _mm256_load_ps(q + 8)));
        }
    }
    float out[8];
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
#else
// elsewhere, the compiler's vectors: four accumulators per stream
float sum_avx2(const float * p, size_t n) {
    float acc[4][4] = {};
    for (size_t i = 0; i + 4 <= n; i += 4) {
        for (int j = 0; j < 4; ++j) {
            acc[i / 4 % 4][j] += p[i + j];
        }
    }
    float s = 0;
    for (auto & a : acc) {
        for (float v : a) {
            s += v;
        }
    }
    return s;
}
#endif

// The probe's buffer, kept for the whole run: each measured row reads it between its computes
// (Note [probe beside the row]).
class Probe {
public:
    Probe(int threads, size_t bytes) : threads_(threads), n_(bytes / sizeof(float)) {
        buf_ = static_cast<float *>(std::aligned_alloc(64, n_ * sizeof(float)));
        if (buf_) {
            std::fill(buf_, buf_ + n_, 1.0f);
        }
    }
    ~Probe() { std::free(buf_); }
    Probe(const Probe &)             = delete;
    Probe & operator=(const Probe &) = delete;

    // GB/s of one pass over the buffer, 0 without one; first a pause in which a backend's workers,
    // spinning after a compute, go to sleep and leave the cores to the probe
    double once() {
        if (!buf_) {
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const size_t             part = n_ / size_t(threads_) / 64 * 64; // floats per thread
        std::vector<float>       sums(static_cast<size_t>(threads_));
        std::vector<std::thread> pool;
        const auto               t0 = std::chrono::steady_clock::now();
        for (int t = 0; t < threads_; ++t) {
            pool.emplace_back([&, t] { sums[size_t(t)] = sum_avx2(buf_ + size_t(t) * part, part); });
        }
        for (auto & th : pool) {
            th.join();
        }
        const double s = seconds_since(t0);
        for (float v : sums) {
            sink_ = sink_ + v;
        }
        return double(part * size_t(threads_) * sizeof(float)) / s / 1e9;
    }

    // the best of R passes
    double best(int runs) {
        double b = 0;
        for (int r = 0; r < runs; ++r) {
            b = std::max(b, once());
        }
        return b;
    }

private:
    int            threads_;
    size_t         n_;
    float *        buf_  = nullptr;
    volatile float sink_ = 0;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    for (auto & x : v) {
        x = dist(rng);
    }
    return v;
}

// The grid i-quants (IQ1_S ... IQ3_S): no build quantizes them by reference alike (ours has no
// quantizer, the client's needs its codebook search set up), so every build takes the same seeded
// random blocks, with a finite scale d of 1/1024 to 1/64 at byte 0 (IQ1_M's in the top nibbles of
// its four scale words, at byte 48)
bool is_grid_type(wsp_ggml_type t) {
    switch (t) {
        case WSP_GGML_TYPE_IQ2_XXS:
        case WSP_GGML_TYPE_IQ2_XS:
        case WSP_GGML_TYPE_IQ2_S:
        case WSP_GGML_TYPE_IQ3_XXS:
        case WSP_GGML_TYPE_IQ3_S:
        case WSP_GGML_TYPE_IQ1_S:
        case WSP_GGML_TYPE_IQ1_M: return true;
        default: return false;
    }
}

void random_grid_blocks(wsp_ggml_type t, std::vector<uint8_t> & q) {
    std::mt19937                          rng(4321);
    std::uniform_real_distribution<float> scale(1.0f / 1024, 1.0f / 64);
    for (auto & b : q) {
        b = uint8_t(rng());
    }
    const size_t bs = wsp_ggml_type_size(t);
    for (size_t at = 0; at + bs <= q.size(); at += bs) {
        const uint16_t h = wsp_ggml_fp32_to_fp16(rng() % 2 ? scale(rng) : -scale(rng));
        if (t == WSP_GGML_TYPE_IQ1_M) {
            for (int w = 0; w < 4; ++w) {
                uint8_t & top = q[at + 48 + 2 * w + 1];
                top           = uint8_t((top & 0x0f) | (((h >> (4 * w)) & 0xf) << 4));
            }
        } else {
            std::memcpy(&q[at], &h, sizeof(h));
        }
    }
}

// The G weights of one type and shape in a backend buffer, all with the same (quantized) content.
// output rows checked against a double-precision product of the dequantized weights
constexpr int64_t CHECK_ROWS = 16;
// beyond this the row is marked "!": activations quantized to 8 bits stay well under it
constexpr double MAX_ERR = 0.05;

struct Weights {
    wsp_ggml_context *             ctx = nullptr;
    wsp_ggml_backend_buffer_t      buf = nullptr;
    std::vector<wsp_ggml_tensor *> w;
    size_t                         bytes_each = 0;
    std::vector<float>             ref; // the first CHECK_ROWS rows, dequantized: the reference of the check
    ~Weights() {
        if (buf) {
            wsp_ggml_backend_buffer_free(buf);
        }
        if (ctx) {
            wsp_ggml_free(ctx);
        }
    }
};

// Note [weight placement]: the buffer type whisper.cpp gives a mat-mul weight on the CPU (its
// make_buft_list and select_weight_buft): the first of the CPU device's extra buffer types (the
// repacked layouts of upstream's CPU backend) whose device runs the op with the weight in it, else
// the plain CPU buffer type. Ours offers CPU_REPACK (Q4_x and Q5_x in groups of 8 rows; --plain-buft
// skips it).
wsp_ggml_backend_buffer_type_t weight_buft(wsp_ggml_type type, Shape s, bool plain) {
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    if (plain || !dev) {
        return wsp_ggml_backend_cpu_buffer_type();
    }
    auto get_extra = (wsp_ggml_backend_dev_get_extra_bufts_t) wsp_ggml_backend_reg_get_proc_address(
        wsp_ggml_backend_dev_backend_reg(dev), "wsp_ggml_backend_dev_get_extra_bufts");
    for (wsp_ggml_backend_buffer_type_t * b = get_extra ? get_extra(dev) : nullptr; b && *b; ++b) {
        wsp_ggml_init_params      ip  = { wsp_ggml_tensor_overhead() * 4, nullptr, true };
        wsp_ggml_context *        ctx = wsp_ggml_init(ip);
        wsp_ggml_tensor *         w   = wsp_ggml_new_tensor_2d(ctx, type, s.k, s.n);
        wsp_ggml_tensor *         op = wsp_ggml_mul_mat(ctx, w, wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, s.k, 1));
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(*b, 0);
        w->buffer                     = buf;
        const bool ok                 = buf && wsp_ggml_backend_dev_supports_op(dev, op);
        w->buffer                     = nullptr;
        if (buf) {
            wsp_ggml_backend_buffer_free(buf);
        }
        wsp_ggml_free(ctx);
        if (ok) {
            return *b;
        }
    }
    return wsp_ggml_backend_cpu_buffer_type();
}

bool make_weights(wsp_ggml_backend_buffer_type_t buft, wsp_ggml_type type, Shape s, double min_mib, Weights & ws) {
    ws.bytes_each           = wsp_ggml_row_size(type, s.k) * size_t(s.n);
    const int64_t        g  = std::max<int64_t>(1, int64_t(std::ceil(min_mib * 1048576.0 / double(ws.bytes_each))));
    wsp_ggml_init_params ip = { /* .mem_size = */ wsp_ggml_tensor_overhead() * size_t(g + 1),
                                /* .mem_buffer = */ nullptr, /* .no_alloc = */ true };
    ws.ctx                  = wsp_ggml_init(ip);
    for (int64_t i = 0; i < g; ++i) {
        ws.w.push_back(wsp_ggml_new_tensor_2d(ws.ctx, type, s.k, s.n));
    }
    ws.buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ws.ctx, buft);
    if (!ws.buf) {
        return false;
    }
    const std::vector<float> src = random_floats(size_t(s.k * s.n), 1234);
    std::vector<uint8_t>     q(ws.bytes_each);
    // through the type traits: whisper.rn's ggml.h names the quantize call wsp_ggml_wsp_quantize_chunk
    // (older builds of ours only wsp_ggml_quantize_chunk); from_float_ref is in every one (F32: a copy)
    if (type == WSP_GGML_TYPE_F32) {
        std::memcpy(q.data(), src.data(), q.size());
    } else if (is_grid_type(type)) {
        random_grid_blocks(type, q);
    } else {
        const auto * traits = wsp_ggml_get_type_traits(type);
        if (!traits || !traits->from_float_ref) {
            return false;
        }
        traits->from_float_ref(src.data(), q.data(), s.k * s.n);
    }
    const int64_t check = std::min(CHECK_ROWS, s.n) * s.k;
    ws.ref.resize(size_t(check));
    if (type == WSP_GGML_TYPE_F32) {
        std::memcpy(ws.ref.data(), src.data(), ws.ref.size() * sizeof(float));
    } else {
        wsp_ggml_get_type_traits(type)->to_float(q.data(), ws.ref.data(), check);
    }
    for (auto * t : ws.w) {
        wsp_ggml_backend_tensor_set(t, q.data(), 0, q.size());
    }
    return true;
}

// whether the backend runs mul_mat of this weight type with F32 activations
bool supported(wsp_ggml_backend_t backend, wsp_ggml_type type) {
    wsp_ggml_init_params ip  = { wsp_ggml_tensor_overhead() * 4, nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(ip);
    wsp_ggml_tensor *    a   = wsp_ggml_new_tensor_2d(ctx, type, 256, 16);
    wsp_ggml_tensor *    b   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 256, 4);
    const bool           ok  = wsp_ggml_backend_supports_op(backend, wsp_ggml_mul_mat(ctx, a, b));
    wsp_ggml_free(ctx);
    return ok;
}

Row make_row(const char * impl, const char * type, const char * buft, Shape s, int64_t m, int64_t g, size_t bytes_each,
             Timing t) {
    Row r{ impl, type, buft, s.k, s.n, m, g, 0, 0, 0, 0, t.probe_gbs, 0, t.err };
    r.weight_mib  = double(bytes_each) * double(g) / 1048576.0;
    r.ms          = t.seconds * 1e3;
    r.gflops      = 2.0 * double(s.k) * double(s.n) * double(m) * double(g) / t.seconds / 1e9;
    r.weight_gbs  = double(bytes_each) * double(g) / t.seconds / 1e9;
    r.bw_fraction = t.probe_gbs > 0 ? r.weight_gbs / t.probe_gbs : 0;
    return r;
}

// the best of R computes of one graph of G mul_mats at batch m; < 0 on a failure
double max_rel_err(const Weights & ws, Shape s, int64_t m, const std::vector<float> & xs,
                   const std::vector<float> & y) {
    double err = 0, scale = 0;
    for (int64_t j = 0; j < m; ++j) {
        for (int64_t i = 0; i < std::min(CHECK_ROWS, s.n); ++i) {
            double ref = 0;
            for (int64_t k = 0; k < s.k; ++k) {
                ref += double(ws.ref[size_t(i * s.k + k)]) * double(xs[size_t(j * s.k + k)]);
            }
            err   = std::max(err, std::fabs(double(y[size_t(j * s.n + i)]) - ref));
            scale = std::max(scale, std::fabs(ref));
        }
    }
    return scale > 0 ? err / scale : err;
}

// the graph of one mul_mat per weight, each reading x; returns the first weight's product
wsp_ggml_tensor * add_mul_mats(wsp_ggml_context * ctx, const Weights & ws, wsp_ggml_tensor * x, wsp_ggml_cgraph * gf) {
    wsp_ggml_tensor * y0 = nullptr;
    for (auto * w : ws.w) {
        wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, x);
        y0                  = y0 ? y0 : y;
        wsp_ggml_build_forward_expand(gf, y);
    }
    return y0;
}

// R timed runs of compute() (Note [probe beside the row]), after one that warms up: the best time
// into out.seconds, the best probe pass into out.probe_gbs; false when a compute failed
template <typename Compute>
bool time_runs(int runs, Probe & probe, Compute compute, Timing & out) {
    double best = 1e30;
    for (int r = 0; r <= runs; ++r) {
        if (r > 0) {
            out.probe_gbs = std::max(out.probe_gbs, probe.once());
            if (!compute()) {
                return false;
            }
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (!compute()) {
            return false;
        }
        if (r > 0) {
            best = std::min(best, seconds_since(t0));
        }
    }
    out.seconds = best;
    return true;
}

// Note [probe beside the row]: the memory bandwidth of this VM drifts by 2x over minutes, so a
// fraction against one probe at the start compares figures of different moments (0.7 to 1.3 for
// the same kernel). Each timed compute is preceded by a probe pass and an untimed compute (the
// probe lets the backend's threads fall asleep; the timed compute starts with them awake, as in a
// decoder's back-to-back graphs), and the row's fraction is its best compute over its best pass.
Timing time_batch(wsp_ggml_backend_t backend, const Weights & ws, Shape s, int64_t m, int runs, Probe & probe) {
    const size_t         g_nodes = ws.w.size();
    const size_t         gsize   = std::max<size_t>(64, 2 * g_nodes + 16);
    wsp_ggml_init_params ip      = {
             wsp_ggml_tensor_overhead() * (g_nodes + 2) + wsp_ggml_graph_overhead_custom(gsize, false), nullptr, true
    };
    wsp_ggml_context *        ctx = wsp_ggml_init(ip);
    wsp_ggml_tensor *         x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, s.k, m);
    wsp_ggml_cgraph *         gf  = wsp_ggml_new_graph_custom(ctx, gsize, false);
    wsp_ggml_tensor *         y0  = add_mul_mats(ctx, ws, x, gf);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(ctx, backend);
    Timing                    out;
    if (buf) {
        const std::vector<float> xs = random_floats(size_t(s.k * m), 99);
        wsp_ggml_backend_tensor_set(x, xs.data(), 0, xs.size() * sizeof(float));
        auto compute = [&] { return wsp_ggml_backend_graph_compute(backend, gf) == WSP_GGML_STATUS_SUCCESS; };
        if (!time_runs(runs, probe, compute, out)) {
            out.seconds = -1;
        } else {
            std::vector<float> y(size_t(s.n * m));
            wsp_ggml_backend_tensor_get(y0, y.data(), 0, y.size() * sizeof(float));
            out.err = max_rel_err(ws, s, m, xs, y);
        }
        wsp_ggml_backend_buffer_free(buf);
    }
    wsp_ggml_free(ctx);
    return out;
}

// The same through the API before backends (wsp_ggml_graph_compute_with_ctx: a context with memory,
// the work buffer taken from it on each call, no threadpool), as whisper.cpp's CPU-only helpers and
// older clients compute; best of R (probe passes as in time_batch)
Timing time_legacy(const Weights & ws, Shape s, int64_t m, int runs, int threads, Probe & probe) {
    const size_t g_nodes = ws.w.size();
    const size_t gsize   = std::max<size_t>(64, 2 * g_nodes + 16);
    const size_t outputs = size_t(s.n * m) * g_nodes * sizeof(float) + g_nodes * 64;
    // one work buffer per compute: the plan's size, taken 2 * runs + 1 times, and room for the plan
    const size_t             work = (size_t(s.k * m) * 4 + size_t(threads) * 64 + 4096) * size_t(2 * runs + 2);
    wsp_ggml_init_params     ip   = { wsp_ggml_tensor_overhead() * (g_nodes + 2) +
                                          wsp_ggml_graph_overhead_custom(gsize, false) + size_t(s.k * m) * 4 + outputs +
                                          work + (1 << 20),
                                      nullptr, false };
    wsp_ggml_context *       ctx  = wsp_ggml_init(ip);
    wsp_ggml_tensor *        x    = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, s.k, m);
    wsp_ggml_cgraph *        gf   = wsp_ggml_new_graph_custom(ctx, gsize, false);
    wsp_ggml_tensor *        y0   = add_mul_mats(ctx, ws, x, gf);
    const std::vector<float> xs   = random_floats(size_t(s.k * m), 99);
    std::memcpy(x->data, xs.data(), xs.size() * sizeof(float));
    Timing out;
    auto   compute = [&] { return wsp_ggml_graph_compute_with_ctx(ctx, gf, threads) == WSP_GGML_STATUS_SUCCESS; };
    if (!time_runs(runs, probe, compute, out)) {
        out.seconds = -1;
    } else {
        std::vector<float> y(size_t(s.n * m));
        std::memcpy(y.data(), y0->data, y.size() * sizeof(float));
        out.err = max_rel_err(ws, s, m, xs, y);
    }
    wsp_ggml_free(ctx);
    return out;
}

#if defined(WSP_BENCH_OPENBLAS)
// cblas_sgemm on the same F32 weights (row-major W_g is N x K): C_g = X W_g^T, best of R
// (probe passes as in time_batch)
Timing time_sgemm(const Weights & ws, Shape s, int64_t m, int runs, Probe & probe) {
    const std::vector<float> xs = random_floats(size_t(s.k * m), 99);
    std::vector<float>       c(size_t(s.n * m) * ws.w.size());
    double                   best = 1e30;
    Timing                   out;
    auto                     all = [&] {
        for (size_t i = 0; i < ws.w.size(); ++i) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(s.n), int(s.k), 1.0f, xs.data(), int(s.k),
                                            static_cast<const float *>(ws.w[i]->data), int(s.k), 0.0f, c.data() + i * size_t(s.n * m),
                                            int(s.n));
        }
    };
    for (int r = 0; r <= runs; ++r) {
        if (r > 0) {
            out.probe_gbs = std::max(out.probe_gbs, probe.once());
            all();
        }
        const auto t0 = std::chrono::steady_clock::now();
        all();
        if (r > 0) {
            best = std::min(best, seconds_since(t0));
        }
    }
    out.seconds = best;
    out.err     = max_rel_err(ws, s, m, xs, c); // the first weight's product, C_0 is m x N row-major
    return out;
}
#endif

void print_row(const Row & r) {
    char frac[16] = "";
    if (r.m == 1) {
        std::snprintf(frac, sizeof frac, "%.2f", r.bw_fraction);
    }
    std::printf("%-9s %-6s %5lldx%-5lld %3lld %4lld %8.1f %9.3f %9.1f %8.2f %8.2f %8s %8.1e%s  %s\n", r.impl.c_str(),
                r.type.c_str(), (long long) r.k, (long long) r.n, (long long) r.m, (long long) r.g, r.weight_mib, r.ms,
                r.gflops, r.weight_gbs, r.probe_gbs, frac, r.err, r.err > MAX_ERR ? "!" : " ", r.buft.c_str());
    std::fflush(stdout);
}

bool write_json(const Options & o, double bandwidth, const std::vector<Row> & rows,
                const std::vector<std::string> & skipped) {
    FILE * f = std::fopen(o.json.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "mul_mat_small: cannot write %s\n", o.json.c_str());
        return false;
    }
    std::fprintf(f, "{\"label\": \"%s\", \"threads\": %d, \"runs\": %d, \"min_weight_mib\": %.0f, ", o.label.c_str(),
                 o.threads, o.runs, o.min_mib);
    std::fprintf(f, "\"bandwidth_gbs\": %.3f, \"results\": [", bandwidth);
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row & r = rows[i];
        std::fprintf(f,
                     "%s\n  {\"impl\": \"%s\", \"type\": \"%s\", \"buft\": \"%s\", \"k\": %lld, \"n\": %lld, \"m\": "
                     "%lld, \"g\": %lld, "
                     "\"weight_mib\": %.2f, \"ms\": %.4f, \"gflops\": %.3f, \"weight_gbs\": %.3f, "
                     "\"bw_fraction\": %.4f, \"max_rel_err\": %.3e, \"probe_gbs\": %.3f}",
                     i ? "," : "", r.impl.c_str(), r.type.c_str(), r.buft.c_str(), (long long) r.k, (long long) r.n,
                     (long long) r.m, (long long) r.g, r.weight_mib, r.ms, r.gflops, r.weight_gbs, r.bw_fraction, r.err,
                     r.probe_gbs);
    }
    std::fprintf(f, "\n], \"skipped\": [");
    for (size_t i = 0; i < skipped.size(); ++i) {
        std::fprintf(f, "%s\"%s\"", i ? ", " : "", skipped[i].c_str());
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
    return true;
}

// the libraries' warnings and errors; their info lines (a repack line per weight) would bury the table
void log_warnings(enum wsp_ggml_log_level level, const char * text, void *) {
    if (level == WSP_GGML_LOG_LEVEL_WARN || level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        return 2;
    }
    wsp_ggml_log_set(log_warnings, nullptr);
    wsp_ggml_backend_t backend = wsp_ggml_backend_cpu_init();
    if (!backend) {
        std::fprintf(stderr, "mul_mat_small: no CPU backend\n");
        return 1;
    }
    wsp_ggml_backend_cpu_set_n_threads(backend, o.threads);
#if defined(WSP_BENCH_OPENBLAS)
    openblas_set_num_threads(o.threads);
#endif

    Probe        probe(o.threads, size_t(512) << 20);
    const double bandwidth = probe.best(5);
    std::printf("mul_mat_small (%s): %d threads, best of %d; weights >= %.0f MiB per graph; memory read "
                "bandwidth %.1f GB/s (%d threads, 512 MiB, AVX2)\n",
                o.label.c_str(), o.threads, o.runs, o.min_mib, bandwidth, o.threads);
    std::printf("%-9s %-6s %11s %3s %4s %8s %9s %9s %8s %8s %8s %8s   %s\n", "impl", "type", "KxN", "M", "G", "MiB",
                "ms", "GFLOP/s", "wGB/s", "probeGB/s", "bw_frac", "err", "weights in");

    std::vector<Row>         rows;
    std::vector<std::string> skipped;
    for (wsp_ggml_type type : o.types) {
        const char * name = wsp_ggml_type_name(type);
        if (!supported(backend, type)) {
            std::printf("%-9s %-6s skipped: the CPU backend does not support mul_mat of %s weights\n", o.label.c_str(),
                        name, name);
            skipped.push_back(name);
            continue;
        }
        for (Shape s : o.shapes) {
            Weights                              ws;
            const wsp_ggml_backend_buffer_type_t buft  = weight_buft(type, s, o.plain);
            const char *                         bname = wsp_ggml_backend_buft_name(buft);
            if (!make_weights(buft, type, s, o.min_mib, ws)) {
                std::fprintf(stderr, "mul_mat_small: cannot allocate or fill the %s weights\n", name);
                return 1;
            }
            for (int64_t m : o.ms) {
                const Timing t = o.legacy ? time_legacy(ws, s, m, o.runs, o.threads, probe)
                                          : time_batch(backend, ws, s, m, o.runs, probe);
                if (t.seconds <= 0) {
                    std::fprintf(stderr, "mul_mat_small: %s M=%lld failed\n", name, (long long) m);
                    return 1;
                }
                rows.push_back(
                    make_row(o.legacy ? "legacy" : "ggml", name, bname, s, m, int64_t(ws.w.size()), ws.bytes_each, t));
                print_row(rows.back());
            }
#if defined(WSP_BENCH_OPENBLAS)
            if (type == WSP_GGML_TYPE_F32 && wsp_ggml_backend_buffer_is_host(ws.buf)) {
                for (int64_t m : o.ms) {
                    const Timing t = time_sgemm(ws, s, m, o.runs, probe);
                    rows.push_back(make_row("openblas", name, "host", s, m, int64_t(ws.w.size()), ws.bytes_each, t));
                    print_row(rows.back());
                }
            }
#endif
        }
    }
    wsp_ggml_backend_free(backend);
    if (!o.json.empty() && !write_json(o, bandwidth, rows, skipped)) {
        return 1;
    }
    return 0;
}
