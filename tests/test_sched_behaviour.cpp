// Scheduler behaviour on sim devices: placement follows the weights, unsupported ops fall back to
// the CPU, op_offload, manual assignment, the eval callback (order, observation, stop), reserve
// sizing, accessors and argument errors.

#include "sched_encoder.h"

#include <gtest/gtest.h>

#include <cmath>

namespace wsp::test {
namespace {

wsp_ggml_backend_dev_t device_of_buffer(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = t->view_src ? t->view_src : t;
    return s->buffer ? wsp_ggml_backend_buft_get_device(wsp_ggml_backend_buffer_get_type(s->buffer)) : nullptr;
}

TEST(SchedPlacement, FollowsTheWeights) {
    ForeignAccessGuard guard;
    SimBackends        be(3, 0);
    SchedEncoder       enc(small_encoder(false, 3), be, false);
    wsp_ggml_tensor *  mel   = nullptr;
    wsp_ggml_cgraph *  graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    int n_checked = 0;
    for (int i = 0; i < wsp_ggml_graph_n_nodes(graph); ++i) {
        wsp_ggml_tensor * node = wsp_ggml_graph_node(graph, i);
        if (node->op != WSP_GGML_OP_MUL_MAT || node->src[0]->buffer == nullptr ||
            wsp_ggml_backend_buffer_get_usage(node->src[0]->buffer) != WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            continue;
        }
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(enc.sched(), node);
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(wsp_ggml_backend_get_device(b), device_of_buffer(node->src[0])) << node->name;
        ++n_checked;
    }
    EXPECT_EQ(n_checked, 3 * 6); // q, k, v, o, mlp0, mlp1 per layer (the conv weights go through im2col)
}

TEST(SchedPlacement, UnsupportedOpsFallBackToTheCpu) {
    ForeignAccessGuard guard;
    SimBackends        be(2, 0);
    for (int i = 0; i < 2; ++i) {
        wsp_ggml_backend_sim_set_op_supported(sim_dev(i), WSP_GGML_OP_UNARY, false);
    }
    int splits_without = 0;
    {
        SchedEncoder      enc(small_encoder(false, 2), be, false);
        wsp_ggml_tensor * mel   = nullptr;
        wsp_ggml_cgraph * graph = enc.build(&mel);
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
        for (int i = 0; i < wsp_ggml_graph_n_nodes(graph); ++i) {
            wsp_ggml_tensor * node = wsp_ggml_graph_node(graph, i);
            if (node->op == WSP_GGML_OP_UNARY) {
                EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(enc.sched(), node), be.cpu()) << node->name;
            }
        }
        splits_without             = wsp_ggml_backend_sched_get_n_splits(enc.sched());
        const std::vector<float> x = enc.random_input(5);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), 1e-8);
    }
    for (int i = 0; i < 2; ++i) {
        wsp_ggml_backend_sim_set_op_supported(sim_dev(i), WSP_GGML_OP_UNARY, true);
    }
    SchedEncoder      enc(small_encoder(false, 2), be, false);
    wsp_ggml_tensor * mel   = nullptr;
    wsp_ggml_cgraph * graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    EXPECT_GT(splits_without, wsp_ggml_backend_sched_get_n_splits(enc.sched())); // the gelus cost extra splits
}

// y = W x with W in host memory marked as weights
struct HostWeightGraph {
    wsp_ggml_context *        wctx = nullptr;
    wsp_ggml_context *        ctx  = nullptr;
    wsp_ggml_backend_buffer_t wbuf = nullptr;
    wsp_ggml_tensor *         w = nullptr, *x = nullptr, *y = nullptr;
    wsp_ggml_cgraph *         graph = nullptr;

    explicit HostWeightGraph(int64_t batch) {
        wsp_ggml_init_params wp = { 4 * wsp_ggml_tensor_overhead(), nullptr, true };
        wctx                    = wsp_ggml_init(wp);
        w                       = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 32, 16);
        wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, wsp_ggml_backend_cpu_buffer_type());
        wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        wsp_ggml_init_params p = { 8 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
        ctx                    = wsp_ggml_init(p);
        x                      = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 32, batch);
        wsp_ggml_set_input(x);
        y     = wsp_ggml_mul_mat(ctx, w, x);
        graph = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(graph, y);
    }
    ~HostWeightGraph() {
        wsp_ggml_free(ctx);
        wsp_ggml_backend_buffer_free(wbuf);
        wsp_ggml_free(wctx);
    }
};

TEST(SchedPlacement, OpOffloadTakesLargeBatchesOffTheCpu) {
    ForeignAccessGuard guard;
    SimBackends        be(1, 0);
    for (const bool offload : { false, true }) {
        for (const int64_t batch : { 8, 64 }) {
            HostWeightGraph          g(batch);
            wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 2, 64, false, offload);
            ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g.graph));
            const bool on_device = offload && batch >= 32; // the sim device asks for batches of 32 and more
            EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(s, g.y), on_device ? be.sim(0) : be.cpu())
                << "offload " << offload << " batch " << batch;
            const std::vector<float> xv = random_values((size_t) (32 * batch), 3), wv = random_values(32 * 16, 4);
            wsp_ggml_backend_tensor_set(g.w, wv.data(), 0, wsp_ggml_nbytes(g.w));
            wsp_ggml_backend_tensor_set(g.x, xv.data(), 0, wsp_ggml_nbytes(g.x));
            ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g.graph), WSP_GGML_STATUS_SUCCESS);
            std::vector<float> out((size_t) (16 * batch));
            wsp_ggml_backend_tensor_get(g.y, out.data(), 0, wsp_ggml_nbytes(g.y));
            std::vector<double> ref(out.size());
            for (int64_t m = 0; m < batch; ++m) {
                for (int n = 0; n < 16; ++n) {
                    double acc = 0;
                    for (int k = 0; k < 32; ++k) {
                        acc += (double) wv[(size_t) (n * 32 + k)] * xv[(size_t) (m * 32 + k)];
                    }
                    ref[(size_t) (m * 16 + n)] = acc;
                }
            }
            EXPECT_LT(nmse(out, ref), 1e-10);
            wsp_ggml_backend_sched_free(s);
        }
    }
}

TEST(SchedPlacement, ManualAssignmentIsHonoured) {
    ForeignAccessGuard       guard;
    SimBackends              be(2, 0);
    HostWeightGraph          g(4);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 3, 64, false, false);
    wsp_ggml_backend_sched_set_tensor_backend(s, g.y, be.sim(1));
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g.graph));
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(s, g.y), be.sim(1));
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_splits(s), 1);
    wsp_ggml_backend_sched_free(s);
}

struct CallbackLog {
    std::vector<const wsp_ggml_tensor *> asked, observed;
    int                                  stop_after = -1; // observed count at which to stop
};

bool record_eval(wsp_ggml_tensor * t, bool ask, void * ud) {
    auto * log = static_cast<CallbackLog *>(ud);
    if (ask) {
        log->asked.push_back(t);
        return true; // observe every node
    }
    log->observed.push_back(t);
    return log->stop_after < 0 || (int) log->observed.size() < log->stop_after;
}

TEST(SchedEvalCallback, SeesEveryNodeInOrderAndCanStop) {
    ForeignAccessGuard guard;
    SimBackends        be(2, 20);
    SchedEncoder       enc(small_encoder(false, 2), be, false);
    wsp_ggml_tensor *  mel   = nullptr;
    wsp_ggml_cgraph *  graph = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
    const std::vector<float> x = enc.random_input(8);
    set_input(mel, x);

    CallbackLog log;
    wsp_ggml_backend_sched_set_eval_callback(enc.sched(), record_eval, &log);
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
    // every node, in graph order, asked then observed
    std::vector<const wsp_ggml_tensor *> nodes;
    for (int i = 0; i < wsp_ggml_graph_n_nodes(graph); ++i) {
        nodes.push_back(wsp_ggml_graph_node(graph, i));
    }
    EXPECT_EQ(log.asked, nodes);
    EXPECT_EQ(log.observed, nodes);
    EXPECT_LT(nmse(output_of(graph), enc.reference(x)), 1e-8);

    // stop after the 10th node: nothing later is offered or computed, so the output (whose memory
    // may be shared in place with early nodes) is not the encoder's result
    CallbackLog stop;
    stop.stop_after = 10;
    wsp_ggml_backend_sched_set_eval_callback(enc.sched(), record_eval, &stop);
    wsp_ggml_tensor *        out = wsp_ggml_graph_node(graph, -1);
    const std::vector<float> zeros((size_t) wsp_ggml_nelements(out), 0.0f);
    wsp_ggml_backend_tensor_set(out, zeros.data(), 0, wsp_ggml_nbytes(out));
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(stop.observed.size(), 10u);
    EXPECT_EQ(stop.asked.size(), 10u);
    EXPECT_GT(nmse(output_of(graph), enc.reference(x)), 1e-2);
    wsp_ggml_backend_sched_set_eval_callback(enc.sched(), nullptr, nullptr);
}

TEST(SchedBuffers, ReserveThenAllocDoesNotGrow) {
    ForeignAccessGuard guard;
    SimBackends        be(2, 0);
    SchedEncoder       enc(small_encoder(false, 2), be, true);
    wsp_ggml_tensor *  mel     = nullptr;
    wsp_ggml_cgraph *  reserve = enc.build(&mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_reserve(enc.sched(), reserve));
    std::vector<size_t> sizes;
    for (wsp_ggml_backend_t b : be.all()) {
        sizes.push_back(wsp_ggml_backend_sched_get_buffer_size(enc.sched(), b));
        EXPECT_GT(sizes.back(), 0u) << wsp_ggml_backend_name(b);
    }
    for (int it = 0; it < 3; ++it) {
        wsp_ggml_cgraph * graph = enc.build(&mel);
        wsp_ggml_backend_sched_reset(enc.sched());
        ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(enc.sched(), graph));
        const std::vector<float> x = enc.random_input(40 + (uint32_t) it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(enc.sched(), graph), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(graph), enc.reference(x)), 1e-8);
        for (size_t b = 0; b < be.all().size(); ++b) {
            EXPECT_EQ(wsp_ggml_backend_sched_get_buffer_size(enc.sched(), be.all()[b]), sizes[b]);
        }
    }
}

TEST(SchedApi, AccessorsAndArgumentErrors) {
    SimBackends              be(3, 0);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 4, 256, false, true);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_backends(s), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(wsp_ggml_backend_sched_get_backend(s, i), be.all()[(size_t) i]);
    }
    EXPECT_EQ(wsp_ggml_backend_sched_get_backend(s, 4), nullptr);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_copies(s), 1);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_splits(s), 0);
    wsp_ggml_backend_sched_free(s);

    // the CPU must come last, and 1..16 backends are accepted
    std::vector<wsp_ggml_backend_t> cpu_first = { be.cpu(), be.sim(0) };
    EXPECT_EQ(wsp_ggml_backend_sched_new(cpu_first.data(), nullptr, 2, 64, false, false), nullptr);
    EXPECT_EQ(wsp_ggml_backend_sched_new(be.all().data(), nullptr, 0, 64, false, false), nullptr);
    std::vector<wsp_ggml_backend_t> too_many(17, be.cpu());
    EXPECT_EQ(wsp_ggml_backend_sched_new(too_many.data(), nullptr, 17, 64, false, false), nullptr);
    // a buffer type the backend cannot use
    std::vector<wsp_ggml_backend_buffer_type_t> bufts = { wsp_ggml_backend_cpu_buffer_type(), nullptr, nullptr,
                                                          nullptr };
    EXPECT_EQ(wsp_ggml_backend_sched_new(be.all().data(), bufts.data(), 4, 64, false, false), nullptr);
}

TEST(SchedApi, CopiesFollowTheEnvironment) {
    SimBackends be(1, 0);
    setenv("WSP_GGML_SCHED_COPIES", "3", 1);
    wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 2, 64, true, false);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_copies(s), 3);
    wsp_ggml_backend_sched_free(s);
    unsetenv("WSP_GGML_SCHED_COPIES");
    s = wsp_ggml_backend_sched_new(be.all().data(), nullptr, 2, 64, true, false);
    EXPECT_EQ(wsp_ggml_backend_sched_get_n_copies(s), 4);
    wsp_ggml_backend_sched_free(s);
}

} // namespace
} // namespace wsp::test
