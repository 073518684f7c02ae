// Overlapped evaluations: several sched_graph_compute_async calls in a row with no synchronize
// between them, outputs read with tensor_get_async on the backend that holds them, then one
// synchronize and every output checked against a double reference. The devices get delays so
// that streams run far behind the host and behind each other.

#include "backend_util.h"
#include "sched_encoder.h"
#include "sim_util.h"
#include "split_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace wsp::test {
namespace {

constexpr int64_t N = 256; // elements per vector

wsp_ggml_context * graph_ctx(size_t n_tensors = 64) {
    wsp_ggml_init_params p = { n_tensors * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    return wsp_ggml_init(p);
}

// Splits A[a] B[b] A[c] B[d] where d reads B's copy of a, made for b: the split of d copies
// nothing. A never waits for B, so it runs evaluations ahead while B lags behind; the copy of a
// for a later evaluation must not land before d of an earlier one read it.
// a = 2x, b = a + a, c = 3a, d = b + a; c and d are outputs.
TEST(SchedOverlap, TrailingSplitThatReusesACopy) {
    ForeignAccessGuard guard;
    SimBackends        be(2, 0);
    wsp_ggml_backend_sim_set_delay_us(sim_dev(1), 300);
    wsp_ggml_context * ctx = graph_ctx();
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * a = wsp_ggml_scale(ctx, x, 2.0f);
    wsp_ggml_tensor * b = wsp_ggml_add(ctx, a, a);
    wsp_ggml_tensor * c = wsp_ggml_scale(ctx, a, 3.0f);
    wsp_ggml_tensor * d = wsp_ggml_add(ctx, b, a);
    wsp_ggml_set_output(c);
    wsp_ggml_set_output(d);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, b);
    wsp_ggml_build_forward_expand(g, c);
    wsp_ggml_build_forward_expand(g, d);

    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 3, 64, true, false);
    wsp_ggml_backend_sched_set_tensor_backend(s, a, be.sim(0));
    wsp_ggml_backend_sched_set_tensor_backend(s, b, be.sim(1));
    wsp_ggml_backend_sched_set_tensor_backend(s, c, be.sim(0));
    wsp_ggml_backend_sched_set_tensor_backend(s, d, be.sim(1));
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    ASSERT_EQ(wsp_ggml_backend_sched_get_n_splits(s), 4);

    constexpr int                   EVALS = 12;
    std::vector<std::vector<float>> xs, cs(EVALS, std::vector<float>(N)), ds(EVALS, std::vector<float>(N));
    for (int it = 0; it < EVALS; ++it) {
        xs.push_back(random_values(N, 500 + (uint32_t) it));
        wsp_ggml_backend_tensor_set(x, xs.back().data(), 0, wsp_ggml_nbytes(x));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(s, g), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_tensor_get_async(be.sim(0), c, cs[(size_t) it].data(), 0, wsp_ggml_nbytes(c));
        wsp_ggml_backend_tensor_get_async(be.sim(1), d, ds[(size_t) it].data(), 0, wsp_ggml_nbytes(d));
    }
    wsp_ggml_backend_sched_synchronize(s);
    int wrong = 0;
    for (int it = 0; it < EVALS; ++it) {
        std::vector<double> rc(N), rd(N);
        for (int64_t i = 0; i < N; ++i) {
            rc[(size_t) i] = 6.0 * xs[(size_t) it][(size_t) i];
            rd[(size_t) i] = 6.0 * xs[(size_t) it][(size_t) i];
        }
        wrong += nmse(cs[(size_t) it], rc) > 1e-12;
        wrong += nmse(ds[(size_t) it], rd) > 1e-12;
    }
    EXPECT_EQ(wrong, 0) << "of " << 2 * EVALS << " outputs";
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_sim_set_delay_us(sim_dev(1), 0);
}

// A chain over the sim devices: h_{i+1} = relu(W_i h_i) / 2 + h_i with W_i on device i % n_dev,
// h_0 = x a graph input on the CPU; the last h is the output, on the last weight's device.
struct Chain {
    static constexpr int64_t               K = 48, M = 5;
    int                                    n_dev, n_layers;
    wsp_ggml_context *                     wctx = nullptr;
    std::vector<wsp_ggml_backend_buffer_t> bufs;
    std::vector<wsp_ggml_tensor *>         w;
    std::vector<std::vector<float>>        wv;

    Chain(SimBackends & be, int n_layers_) : n_dev(be.n_sim()), n_layers(n_layers_) {
        wsp_ggml_init_params p = { (size_t) n_layers * wsp_ggml_tensor_overhead(), nullptr, true };
        wctx                   = wsp_ggml_init(p);
        for (int l = 0; l < n_layers; ++l) {
            w.push_back(wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, K));
            wsp_ggml_format_name(w.back(), "w%d", l);
        }
        for (int l = 0; l < n_layers; ++l) {
            wsp_ggml_backend_buffer_t b = wsp_ggml_backend_buft_alloc_buffer(
                wsp_ggml_backend_get_default_buffer_type(be.sim(l % n_dev)), wsp_ggml_nbytes(w[(size_t) l]) + 256);
            wsp_ggml_tallocr ta = wsp_ggml_tallocr_new(b);
            EXPECT_EQ(wsp_ggml_tallocr_alloc(&ta, w[(size_t) l]), WSP_GGML_STATUS_SUCCESS);
            wsp_ggml_backend_buffer_set_usage(b, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            bufs.push_back(b);
            wv.push_back(random_values((size_t) (K * K), 40 + (uint32_t) l, -0.3f, 0.3f));
            wsp_ggml_backend_tensor_set(w[(size_t) l], wv.back().data(), 0, wsp_ggml_nbytes(w[(size_t) l]));
        }
    }
    ~Chain() {
        for (auto b : bufs) {
            wsp_ggml_backend_buffer_free(b);
        }
        wsp_ggml_free(wctx);
    }

    // builds the graph in ctx; returns the output, the input in *x
    wsp_ggml_tensor * build(wsp_ggml_context * ctx, wsp_ggml_cgraph * g, wsp_ggml_tensor ** x) const {
        *x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
        wsp_ggml_set_input(*x);
        wsp_ggml_tensor * h = *x;
        for (int l = 0; l < n_layers; ++l) {
            h = wsp_ggml_add(ctx,
                             wsp_ggml_scale(ctx, wsp_ggml_relu(ctx, wsp_ggml_mul_mat(ctx, w[(size_t) l], h)), 0.5f), h);
        }
        wsp_ggml_set_output(h);
        wsp_ggml_build_forward_expand(g, h);
        return h;
    }

    // how many outputs differ from the reference of their input
    int wrong(const std::vector<std::vector<float>> & xs, const std::vector<std::vector<float>> & outs) const {
        int n = 0;
        for (size_t it = 0; it < xs.size(); ++it) {
            n += nmse(outs[it], reference(xs[it])) > 1e-10;
        }
        return n;
    }

    std::vector<double> reference(const std::vector<float> & x) const {
        std::vector<double> h(x.begin(), x.end()), next(h.size());
        for (int l = 0; l < n_layers; ++l) {
            for (int64_t m = 0; m < M; ++m) {
                for (int64_t n = 0; n < K; ++n) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; ++k) {
                        acc += (double) wv[(size_t) l][(size_t) (n * K + k)] * h[(size_t) (m * K + k)];
                    }
                    next[(size_t) (m * K + n)] = 0.5 * (acc > 0 ? acc : 0) + h[(size_t) (m * K + n)];
                }
            }
            h.swap(next);
        }
        return h;
    }
};

struct OverlapCase {
    int      n_sim;
    int      delay_us;
    uint32_t seed; // of the random delays (0: none)
};

// random delays on the first n sims for the life of a test
struct Jitter {
    int n;
    Jitter(int n_sim, uint32_t seed, int max_us = 150) : n(seed != 0 ? n_sim : 0) {
        for (int i = 0; i < n; ++i) {
            wsp_ggml_backend_sim_set_jitter_us(sim_dev(i), max_us, seed + (uint32_t) i);
        }
    }
    ~Jitter() {
        for (int i = 0; i < n; ++i) {
            wsp_ggml_backend_sim_set_jitter_us(sim_dev(i), 0, 0);
        }
    }
};

class SchedOverlapChain : public ::testing::TestWithParam<OverlapCase> {};

// the same allocated graph computed N times without a synchronize in between
TEST_P(SchedOverlapChain, SameGraph) {
    const OverlapCase &      oc = GetParam();
    ForeignAccessGuard       guard;
    SimBackends              be(oc.n_sim, oc.delay_us);
    Chain                    chain(be, 2 * oc.n_sim + 1);
    wsp_ggml_context *       ctx = graph_ctx(256);
    wsp_ggml_cgraph *        g   = wsp_ggml_new_graph(ctx);
    wsp_ggml_tensor *        x   = nullptr;
    wsp_ggml_tensor *        out = chain.build(ctx, g, &x);
    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(), 256, true, false);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    wsp_ggml_backend_t out_backend = wsp_ggml_backend_sched_get_tensor_backend(s, out);
    ASSERT_TRUE(wsp_ggml_backend_is_sim(out_backend));

    constexpr int                   EVALS = 8;
    std::vector<std::vector<float>> xs, outs(EVALS, std::vector<float>((size_t) wsp_ggml_nelements(out)));
    for (int it = 0; it < EVALS; ++it) {
        xs.push_back(random_values((size_t) wsp_ggml_nelements(x), 700 + (uint32_t) it));
        wsp_ggml_backend_tensor_set(x, xs.back().data(), 0, wsp_ggml_nbytes(x));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(s, g), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_tensor_get_async(out_backend, out, outs[(size_t) it].data(), 0, wsp_ggml_nbytes(out));
    }
    wsp_ggml_backend_sched_synchronize(s);
    EXPECT_EQ(chain.wrong(xs, outs), 0) << "of " << EVALS << " evaluations";
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
}

// a new graph for every evaluation: reset, alloc, compute_async, get_async; no synchronize
TEST_P(SchedOverlapChain, NewGraphEachTime) {
    const OverlapCase &      oc = GetParam();
    ForeignAccessGuard       guard;
    SimBackends              be(oc.n_sim, oc.delay_us);
    Chain                    chain(be, 2 * oc.n_sim + 1);
    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(), 256, true, false);
    constexpr int                   EVALS = 8;
    std::vector<wsp_ggml_context *> ctxs;
    std::vector<std::vector<float>> xs, outs;
    for (int it = 0; it < EVALS; ++it) {
        ctxs.push_back(graph_ctx(256));
        wsp_ggml_cgraph * g   = wsp_ggml_new_graph(ctxs.back());
        wsp_ggml_tensor * x   = nullptr;
        wsp_ggml_tensor * out = chain.build(ctxs.back(), g, &x);
        wsp_ggml_backend_sched_reset(s);
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
        xs.push_back(random_values((size_t) wsp_ggml_nelements(x), 800 + (uint32_t) it));
        outs.emplace_back((size_t) wsp_ggml_nelements(out));
        wsp_ggml_backend_tensor_set(x, xs.back().data(), 0, wsp_ggml_nbytes(x));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(s, g), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_tensor_get_async(wsp_ggml_backend_sched_get_tensor_backend(s, out), out, outs.back().data(), 0,
                                          wsp_ggml_nbytes(out));
    }
    wsp_ggml_backend_sched_synchronize(s);
    EXPECT_EQ(chain.wrong(xs, outs), 0) << "of " << EVALS << " evaluations";
    wsp_ggml_backend_sched_free(s);
    for (auto c : ctxs) {
        wsp_ggml_free(c);
    }
}

std::string overlap_name(const ::testing::TestParamInfo<OverlapCase> & info) {
    return std::to_string(info.param.n_sim) + "sim_delay" + std::to_string(info.param.delay_us) + "_seed" +
           std::to_string(info.param.seed);
}

INSTANTIATE_TEST_SUITE_P(Sched, SchedOverlapChain,
                         ::testing::Values(OverlapCase{ 2, 0, 0 }, OverlapCase{ 2, 200, 0 }, OverlapCase{ 2, 0, 1 },
                                           OverlapCase{ 2, 0, 2 }, OverlapCase{ 4, 0, 0 }, OverlapCase{ 4, 100, 0 },
                                           OverlapCase{ 4, 0, 3 }, OverlapCase{ 4, 0, 4 }),
                         overlap_name);

// The whisper-shaped encoder with its layers spread over the sims (front end and final norm on
// SIM0, so the output stays on a device and every compute returns before the work is done),
// evaluated 100 times with no synchronize in between, equal to the double reference each time.
class SchedOverlapEncoder : public ::testing::TestWithParam<OverlapCase> {};

TEST_P(SchedOverlapEncoder, HundredOverlappedEvaluations) {
    const OverlapCase & oc = GetParam();
    ForeignAccessGuard  guard;
    SimBackends         be(oc.n_sim, oc.delay_us);
    Jitter              jitter(oc.n_sim, oc.seed, 60);
    SchedEncoder        enc(small_encoder(oc.seed % 2 == 1, oc.n_sim), be, true, true, true);
    wsp_ggml_tensor *   mel   = nullptr;
    wsp_ggml_cgraph *   graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    wsp_ggml_tensor *  out         = wsp_ggml_graph_node(graph, -1);
    wsp_ggml_backend_t out_backend = wsp_ggml_backend_sched_get_tensor_backend(enc.sched(), out);
    ASSERT_TRUE(wsp_ggml_backend_is_sim(out_backend));
    constexpr int                   EVALS = 100;
    std::vector<std::vector<float>> outs(EVALS, std::vector<float>((size_t) wsp_ggml_nelements(out)));
    for (int it = 0; it < EVALS; ++it) {
        set_input(mel, enc.random_input(1000 + (uint32_t) (it % 7)));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute_async(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_tensor_get_async(out_backend, out, outs[(size_t) it].data(), 0, wsp_ggml_nbytes(out));
    }
    wsp_ggml_backend_sched_synchronize(enc.sched());
    std::vector<std::vector<double>> refs;
    for (int k = 0; k < 7; ++k) {
        refs.push_back(enc.reference(enc.random_input(1000 + (uint32_t) k)));
    }
    int wrong = 0;
    for (int it = 0; it < EVALS; ++it) {
        wrong += nmse(outs[(size_t) it], refs[(size_t) (it % 7)]) > 1e-8;
    }
    EXPECT_EQ(wrong, 0) << "of " << EVALS << " evaluations";
}

INSTANTIATE_TEST_SUITE_P(Sched, SchedOverlapEncoder,
                         ::testing::Values(OverlapCase{ 2, 0, 0 }, OverlapCase{ 2, 0, 5 }, OverlapCase{ 4, 0, 6 },
                                           OverlapCase{ 4, 0, 7 }),
                         overlap_name);

// Two streams of one device share its buffer type, so the consumer reads the producer's output in
// place, without a copy: it must still run after the producer. The producer's stream is held by a
// gate, opened from another thread after a while (a scheduler that waited on the host would
// otherwise never return).
TEST(SchedOverlap, BackendsThatShareABufferTypeAreOrdered) {
    ForeignAccessGuard guard;
    SimBackends        be({ 0, 0 }, 0, 2); // two streams of SIM0
    wsp_ggml_context * ctx = graph_ctx();
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * a = wsp_ggml_scale(ctx, x, 3.0f);  // stream 0
    wsp_ggml_tensor * b = wsp_ggml_add(ctx, a, a);       // stream 1, reads a in place
    wsp_ggml_tensor * c = wsp_ggml_scale(ctx, b, 0.25f); // stream 1
    wsp_ggml_set_output(c);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, c);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 3, 64, true, false);
    wsp_ggml_backend_sched_set_tensor_backend(s, a, be.sim(0));
    wsp_ggml_backend_sched_set_tensor_backend(s, b, be.sim(1));
    wsp_ggml_backend_sched_set_tensor_backend(s, c, be.sim(1));
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    const std::vector<float> xv = random_values(N, 3);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, wsp_ggml_nbytes(x));

    StreamGate gate(be.sim(0));
    gate.close();
    std::thread           opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        gate.open();
    });
    const wsp_ggml_status status = wsp_ggml_backend_sched_graph_compute_async(s, g);
    std::vector<float>    out(N);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(s, b), be.sim(1)) << "pinned";
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(s, c), be.sim(1)) << "pinned";
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_splits(s), 2); // a, then b and c
    wsp_ggml_backend_tensor_get_async(be.sim(1), c, out.data(), 0, wsp_ggml_nbytes(c));
    wsp_ggml_backend_sched_synchronize(s);
    opener.join();
    ASSERT_EQ(status, WSP_GGML_STATUS_SUCCESS);
    std::vector<double> ref(N);
    for (int64_t i = 0; i < N; ++i) {
        ref[(size_t) i] = 1.5 * xv[(size_t) i];
    }
    EXPECT_LT(nmse(out, ref), 1e-12);
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
}

// y = 3 (2 x): the pins hold through reserve and through allocations until a reset
struct TwoScales {
    wsp_ggml_context * ctx = graph_ctx();
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_tensor *  a   = wsp_ggml_scale(ctx, x, 2.0f);
    wsp_ggml_tensor *  b   = wsp_ggml_scale(ctx, a, 3.0f);
    wsp_ggml_cgraph *  g   = wsp_ggml_new_graph(ctx);
    TwoScales() {
        wsp_ggml_set_input(x);
        wsp_ggml_set_output(b);
        wsp_ggml_build_forward_expand(g, b);
    }
    ~TwoScales() { wsp_ggml_free(ctx); }
    void check(wsp_ggml_backend_sched_t s) const {
        const std::vector<float> xv = random_values(N, 4);
        wsp_ggml_backend_tensor_set(x, xv.data(), 0, wsp_ggml_nbytes(x));
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
        std::vector<float> out(N);
        wsp_ggml_backend_tensor_get(b, out.data(), 0, wsp_ggml_nbytes(b));
        std::vector<double> ref(N);
        for (int64_t i = 0; i < N; ++i) {
            ref[(size_t) i] = 6.0 * xv[(size_t) i];
        }
        EXPECT_LT(nmse(out, ref), 1e-12);
    }
};

// two sims and the CPU under one scheduler, parallel off
struct PinScheduler {
    ForeignAccessGuard       guard;
    SimBackends              be{ 2, 0 };
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 3, 64, false, false);
    ~PinScheduler() { wsp_ggml_backend_sched_free(s); }
    void pin(wsp_ggml_tensor * t, int sim) { wsp_ggml_backend_sched_set_tensor_backend(s, t, be.sim(sim)); }
    wsp_ggml_backend_t where(wsp_ggml_tensor * t) { return wsp_ggml_backend_sched_get_tensor_backend(s, t); }
};

TEST(SchedPins, ReserveAndAllocKeepPinsMadeSinceTheLastReset) {
    PinScheduler p;
    TwoScales    g1;
    p.pin(g1.a, 1);
    ASSERT_TRUE(wsp_ggml_backend_sched_reserve(p.s, g1.g));
    EXPECT_GE(wsp_ggml_backend_sched_get_buffer_size(p.s, p.be.sim(1)), wsp_ggml_nbytes(g1.a))
        << "reserve kept the pin";
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(p.s, g1.g));
    EXPECT_EQ(p.where(g1.a), p.be.sim(1)) << "alloc after reserve kept the pin";
    g1.check(p.s);

    // a pin made after an allocation, without a reset, holds for the next allocation
    TwoScales g2;
    p.pin(g2.b, 0);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(p.s, g2.g));
    EXPECT_EQ(p.where(g2.b), p.be.sim(0));
    g2.check(p.s);

    // a reset drops them
    wsp_ggml_backend_sched_reset(p.s);
    TwoScales g3;
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(p.s, g3.g));
    EXPECT_EQ(p.where(g3.b), p.be.cpu());
    g3.check(p.s);
}

// An allocated graph keeps its memory; allocating it again after a pin moved a node elsewhere is
// refused with a message, not a kernel reading memory out of its reach
TEST(SchedPins, ReallocatingAGraphWhoseNodeMovedIsRefused) {
    PinScheduler p;
    TwoScales    g;
    p.pin(g.a, 1);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(p.s, g.g));
    g.check(p.s);
    p.pin(g.a, 0);
    LogCapture log;
    EXPECT_FALSE(wsp_ggml_backend_sched_alloc_graph(p.s, g.g));
    EXPECT_TRUE(log.contains("build the graph again")) << log.text();
}

// tensor_copy from a split weight into a sim tensor goes through the slices, not the handle
TEST(SchedSplitWeight, TensorCopyFromASplitWeight) {
    ForeignAccessGuard       guard;
    const std::vector<float> split = { 1.0f, 1.0f, 0.0f, 0.0f };
    sim_reg();
    wsp_ggml_context *        ctx = graph_ctx();
    wsp_ggml_tensor *         w   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 16, 10);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_sim_split_buffer_type(0, split.data()));
    ASSERT_NE(wbuf, nullptr);
    const std::vector<float> wv = random_values(160, 5);
    wsp_ggml_backend_tensor_set(w, wv.data(), 0, wsp_ggml_nbytes(w));
    wsp_ggml_context *        ctx2 = graph_ctx();
    wsp_ggml_tensor *         dst  = wsp_ggml_new_tensor_2d(ctx2, WSP_GGML_TYPE_F32, 16, 10);
    wsp_ggml_backend_buffer_t dbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx2, wsp_ggml_backend_dev_buffer_type(sim_dev(1)));
    wsp_ggml_backend_tensor_copy(w, dst);
    std::vector<float> out(160);
    wsp_ggml_backend_tensor_get(dst, out.data(), 0, wsp_ggml_nbytes(dst));
    EXPECT_EQ(out, wv);
    wsp_ggml_backend_buffer_free(dbuf);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(ctx2);
    wsp_ggml_free(ctx);
}

// the eval callback of a split mul_mat sees the user's MUL_MAT, computed, and nothing internal
TEST(SchedSplitWeight, EvalCallbackSeesTheMulMat) {
    ForeignAccessGuard        guard;
    const std::vector<float>  split = { 1.0f, 2.0f, 1.0f, 0.0f };
    SimBackends               be(3, 0);
    wsp_ggml_context *        wctx = graph_ctx();
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 32, 40);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_sim_split_buffer_type(0, split.data()));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> wv = random_values(32 * 40, 6);
    wsp_ggml_backend_tensor_set(w, wv.data(), 0, wsp_ggml_nbytes(w));

    wsp_ggml_context * ctx = graph_ctx();
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 32, 3);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, x);
    wsp_ggml_set_name(y, "y");
    wsp_ggml_tensor * z = wsp_ggml_scale(ctx, y, 2.0f);
    wsp_ggml_set_name(z, "z");
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, z);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 4, 64, false, false);

    struct Seen {
        std::vector<std::string>        names;
        std::vector<int>                ops;
        std::vector<std::vector<float>> values;
    } seen;
    wsp_ggml_backend_sched_set_eval_callback(
        s,
        [](wsp_ggml_tensor * t, bool ask, void * ud) {
            auto * sn = static_cast<Seen *>(ud);
            if (!ask) {
                sn->names.push_back(t->name);
                sn->ops.push_back(t->op);
                std::vector<float> v((size_t) wsp_ggml_nelements(t));
                wsp_ggml_backend_tensor_get(t, v.data(), 0, wsp_ggml_nbytes(t));
                sn->values.push_back(v);
            }
            return true;
        },
        &seen);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    const std::vector<float> xv = random_values(32 * 3, 7);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, wsp_ggml_nbytes(x));
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(seen.names, (std::vector<std::string>{ "y", "z" }));
    EXPECT_EQ(seen.ops[0], WSP_GGML_OP_MUL_MAT);
    std::vector<double> ref(40 * 3);
    for (int m = 0; m < 3; ++m) {
        for (int n = 0; n < 40; ++n) {
            double acc = 0;
            for (int k = 0; k < 32; ++k) {
                acc += (double) wv[(size_t) (n * 32 + k)] * xv[(size_t) (m * 32 + k)];
            }
            ref[(size_t) (m * 40 + n)] = acc;
        }
    }
    EXPECT_LT(nmse(seen.values[0], ref), 1e-10) << "the callback sees y once every slice has landed";
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
}

// The split mul_mat overlaps its devices: with the activations produced on the main device
// (SIM0), SIM1's slice starts while SIM0 is still inside its own slice. SIM0's mul_mat kernel is
// held until SIM1's has started; a schedule that queued SIM1's input copy behind SIM0's slice
// could never let it start (the hold then gives up after 20 s and the test fails).
struct OverlapProbe {
    std::mutex              mutex;
    std::condition_variable cv;
    bool                    sim1_started = false;
    bool                    timed_out    = false;
    int                     main_held    = 0;

    static void on_sim0(const wsp_ggml_tensor * node, void * ud) {
        auto * p = static_cast<OverlapProbe *>(ud);
        if (node->op != WSP_GGML_OP_MUL_MAT) {
            return;
        }
        std::unique_lock<std::mutex> lock(p->mutex);
        p->main_held += 1;
        if (!p->cv.wait_for(lock, std::chrono::seconds(20), [&] { return p->sim1_started; })) {
            p->timed_out = true;
        }
    }
    static void on_sim1(const wsp_ggml_tensor * node, void * ud) {
        auto * p = static_cast<OverlapProbe *>(ud);
        if (node->op != WSP_GGML_OP_MUL_MAT) {
            return;
        }
        {
            std::lock_guard<std::mutex> lock(p->mutex);
            p->sim1_started = true;
        }
        p->cv.notify_all();
    }
};

TEST(SchedSplitWeight, OtherDevicesComputeWhileTheMainDeviceDoesItsRows) {
    ForeignAccessGuard        guard;
    const std::vector<float>  split = { 1.0f, 1.0f, 0.0f, 0.0f };
    SimBackends               be(2, 0);
    constexpr int64_t         K = 64, ROWS = 96, M = 7;
    wsp_ggml_context *        wctx = graph_ctx();
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, K, ROWS);
    wsp_ggml_backend_buffer_t wbuf =
        wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_sim_split_buffer_type(0, split.data()));
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> wv = random_values((size_t) (K * ROWS), 8);
    wsp_ggml_backend_tensor_set(w, wv.data(), 0, wsp_ggml_nbytes(w));

    wsp_ggml_context * ctx = graph_ctx();
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, M);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * h = wsp_ggml_scale(ctx, x, 2.0f); // on SIM0
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, h);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 3, 64, false, false);
    wsp_ggml_backend_sched_set_tensor_backend(s, h, be.sim(0));
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    const std::vector<float> xv = random_values((size_t) (K * M), 9);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, wsp_ggml_nbytes(x));

    OverlapProbe probe;
    wsp_ggml_backend_sim_set_kernel_hook(sim_dev(0), OverlapProbe::on_sim0, &probe);
    wsp_ggml_backend_sim_set_kernel_hook(sim_dev(1), OverlapProbe::on_sim1, &probe);
    const wsp_ggml_status status = wsp_ggml_backend_sched_graph_compute(s, g);
    wsp_ggml_backend_sim_set_kernel_hook(sim_dev(0), nullptr, nullptr);
    wsp_ggml_backend_sim_set_kernel_hook(sim_dev(1), nullptr, nullptr);
    ASSERT_EQ(status, WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(probe.main_held, 1) << "SIM0 computes its rows with one mul_mat";
    EXPECT_FALSE(probe.timed_out) << "SIM1's slice could not start while SIM0 computed its own";

    std::vector<float> out((size_t) (ROWS * M));
    wsp_ggml_backend_tensor_get(y, out.data(), 0, wsp_ggml_nbytes(y));
    std::vector<double> ref((size_t) (ROWS * M));
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < ROWS; ++n) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) {
                acc += (double) wv[(size_t) (n * K + k)] * 2.0 * xv[(size_t) (m * K + k)];
            }
            ref[(size_t) (m * ROWS + n)] = acc;
        }
    }
    EXPECT_LT(nmse(out, ref), 1e-10);
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
}

} // namespace
} // namespace wsp::test
