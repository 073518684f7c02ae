// The custom ops on the CPU: MAP_CUSTOM2 and MAP_CUSTOM3 (and their in-place forms) and CUSTOM
// (a new tensor of any type and shape over up to WSP_GGML_MAX_SRC arguments, or in place over a):
// the user's function sees its sources, userdata, and task indices 0..nth-1 with nth = n_tasks
// (capped by the threads) or every thread for WSP_GGML_N_TASKS_MAX; the results are what the
// functions compute. The builders' argument checks abort with a message.

#include "sim_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>

namespace wsp::test {
namespace {

// which (ith, nth) calls a node got
struct Calls {
    std::mutex                    mutex;
    std::set<std::pair<int, int>> seen;
    std::atomic<int>              count{ 0 };
    void                          add(int ith, int nth) {
                                 std::lock_guard<std::mutex> lock(mutex);
                                 seen.insert({ ith, nth });
                                 ++count;
    }
    // exactly the calls 0..nth-1 of nth tasks
    bool tasks_were(int nth) const {
        if (count.load() != nth || (int) seen.size() != nth) {
            return false;
        }
        int i = 0;
        for (const auto & c : seen) {
            if (c.first != i++ || c.second != nth) {
                return false;
            }
        }
        return true;
    }
};

struct User {
    Calls calls;
    float factor = 2.0f;
};

// rows of dst split over the tasks
void rows_of(const wsp_ggml_tensor * dst, int ith, int nth, int64_t & r0, int64_t & r1) {
    const int64_t rows = wsp_ggml_nrows(dst), per = (rows + nth - 1) / nth;
    r0 = std::min(rows, per * ith);
    r1 = std::min(rows, r0 + per);
}

float * row_f32(const wsp_ggml_tensor * t, int64_t r) {
    return reinterpret_cast<float *>(static_cast<char *>(t->data) + r * t->nb[1]);
}

// dst = a + factor * b (2-D contiguous F32)
void add_scaled(wsp_ggml_tensor * dst, const wsp_ggml_tensor * a, const wsp_ggml_tensor * b, int ith, int nth,
                void * ud) {
    auto * u = static_cast<User *>(ud);
    u->calls.add(ith, nth);
    int64_t r0, r1;
    rows_of(dst, ith, nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            row_f32(dst, r)[i] = row_f32(a, r)[i] + u->factor * row_f32(b, r)[i];
        }
    }
}

// dst = a * b + c
void fma3(wsp_ggml_tensor * dst, const wsp_ggml_tensor * a, const wsp_ggml_tensor * b, const wsp_ggml_tensor * c,
          int ith, int nth, void * ud) {
    static_cast<User *>(ud)->calls.add(ith, nth);
    int64_t r0, r1;
    rows_of(dst, ith, nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            row_f32(dst, r)[i] = row_f32(a, r)[i] * row_f32(b, r)[i] + row_f32(c, r)[i];
        }
    }
}

std::vector<double> combine(const std::vector<float> & a, const std::vector<float> & b,
                            const std::function<double(double, double)> & f) {
    std::vector<double> r(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        r[i] = f(a[i], b[i]);
    }
    return r;
}

class CustomOps : public ::testing::TestWithParam<bool> {}; // in place or not

TEST_P(CustomOps, MapCustom2) {
    const bool inplace = GetParam();
    for (int n_tasks : { 1, 3, WSP_GGML_N_TASKS_MAX }) {
        SCOPED_TRACE(n_tasks);
        Graph  g;
        User   u;
        auto * a   = g.input(WSP_GGML_TYPE_F32, { 37, 11 });
        auto * b   = g.input(WSP_GGML_TYPE_F32, { 37, 11 });
        auto * out = inplace ? wsp_ggml_map_custom2_inplace(g.ctx(), a, b, add_scaled, n_tasks, &u)
                             : wsp_ggml_map_custom2(g.ctx(), a, b, add_scaled, n_tasks, &u);
        EXPECT_EQ(out->op, WSP_GGML_OP_MAP_CUSTOM2);
        EXPECT_EQ(out->src[0], a);
        EXPECT_EQ(out->src[1], b);
        EXPECT_EQ(out->view_src, inplace ? a : nullptr);
        g.build(out);
        const auto av = random_values(37 * 11, 1), bv = random_values(37 * 11, 2);
        set_values(a, av);
        set_values(b, bv);
        ASSERT_EQ(g.run(4), WSP_GGML_STATUS_SUCCESS);
        EXPECT_TRUE(u.calls.tasks_were(n_tasks == WSP_GGML_N_TASKS_MAX ? 4 : n_tasks));
        if (inplace) {
            EXPECT_EQ(out->data, a->data);
        }
        EXPECT_LT(nmse(get_values(out), combine(av, bv, [](double x, double y) { return x + 2.0 * y; })), 1e-14);
    }
}

TEST_P(CustomOps, MapCustom3) {
    const bool inplace = GetParam();
    Graph      g;
    User       u;
    auto *     a   = g.input(WSP_GGML_TYPE_F32, { 5, 7, 3 });
    auto *     b   = g.input(WSP_GGML_TYPE_F32, { 5, 7, 3 });
    auto *     c   = g.input(WSP_GGML_TYPE_F32, { 5, 7, 3 });
    auto *     out = inplace ? wsp_ggml_map_custom3_inplace(g.ctx(), a, b, c, fma3, 2, &u)
                             : wsp_ggml_map_custom3(g.ctx(), a, b, c, fma3, 2, &u);
    EXPECT_EQ(out->op, WSP_GGML_OP_MAP_CUSTOM3);
    EXPECT_EQ(out->src[2], c);
    g.build(out);
    const auto av = random_values(105, 1), bv = random_values(105, 2), cv = random_values(105, 3);
    set_values(a, av);
    set_values(b, bv);
    set_values(c, cv);
    ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
    EXPECT_TRUE(u.calls.tasks_were(2));
    std::vector<double> ref(105);
    for (size_t i = 0; i < ref.size(); ++i) {
        ref[i] = (double) av[i] * bv[i] + cv[i];
    }
    EXPECT_LT(nmse(get_values(out), ref), 1e-14);
}

INSTANTIATE_TEST_SUITE_P(Custom, CustomOps, ::testing::Bool(), [](const ::testing::TestParamInfo<bool> & info) {
    return std::string(info.param ? "InPlace" : "New");
});

// CUSTOM over n arguments: dst (I32 [n_args, rows]) holds, per row r, the sum of argument k's row r
void sum_args(wsp_ggml_tensor * dst, int ith, int nth, void * ud) {
    static_cast<User *>(ud)->calls.add(ith, nth);
    int64_t r0, r1;
    rows_of(dst, ith, nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t k = 0; k < dst->ne[0]; ++k) {
            const wsp_ggml_tensor * s   = dst->src[k];
            double                  sum = 0.0;
            for (int64_t i = 0; i < s->ne[0]; ++i) {
                sum += row_f32(s, r)[i];
            }
            reinterpret_cast<int32_t *>(static_cast<char *>(dst->data) + r * dst->nb[1])[k] =
                (int32_t) std::lround(sum * 1000.0);
        }
    }
}

TEST(CustomOp, Custom4dOverEveryArgument) {
    for (int n_args : { 1, 4, WSP_GGML_MAX_SRC }) {
        SCOPED_TRACE(n_args);
        Graph                          g;
        User                           u;
        std::vector<wsp_ggml_tensor *> args;
        for (int k = 0; k < n_args; ++k) {
            args.push_back(g.input(WSP_GGML_TYPE_F32, { 3 + k, 6 }));
        }
        auto * out = wsp_ggml_custom_4d(g.ctx(), WSP_GGML_TYPE_I32, n_args, 6, 1, 1, args.data(), n_args, sum_args,
                                        WSP_GGML_N_TASKS_MAX, &u);
        EXPECT_EQ(out->op, WSP_GGML_OP_CUSTOM);
        EXPECT_EQ(out->type, WSP_GGML_TYPE_I32);
        for (int k = 0; k < n_args; ++k) {
            EXPECT_EQ(out->src[k], args[(size_t) k]);
        }
        g.build(out);
        std::vector<std::vector<float>> vals;
        for (int k = 0; k < n_args; ++k) {
            vals.push_back(random_values((size_t) wsp_ggml_nelements(args[(size_t) k]), 10 + k));
            set_values(args[(size_t) k], vals.back());
        }
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        EXPECT_TRUE(u.calls.tasks_were(2));
        const int32_t * got = static_cast<const int32_t *>(out->data);
        for (int64_t r = 0; r < 6; ++r) {
            for (int k = 0; k < n_args; ++k) {
                double sum = 0.0;
                for (int64_t i = 0; i < 3 + k; ++i) {
                    sum += vals[(size_t) k][(size_t) (r * (3 + k) + i)];
                }
                EXPECT_EQ(got[r * n_args + k], (int32_t) std::lround(sum * 1000.0)) << "row " << r << " arg " << k;
            }
        }
    }
}

// CUSTOM in place: src[0] is a, the arguments follow; a *= 1 + arg
void scale_by_arg(wsp_ggml_tensor * dst, int ith, int nth, void * ud) {
    static_cast<User *>(ud)->calls.add(ith, nth);
    if (ith != 0) {
        return;
    }
    float *       d   = static_cast<float *>(dst->data);
    const float * arg = static_cast<const float *>(dst->src[1]->data);
    for (int64_t i = 0; i < wsp_ggml_nelements(dst); ++i) {
        d[i] *= 1.0f + arg[i];
    }
}

TEST(CustomOp, CustomInplace) {
    Graph  g;
    User   u;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { 13, 2 });
    auto * x   = wsp_ggml_scale(g.ctx(), a, 3.0f); // a node of the graph, written in place
    auto * arg = g.input(WSP_GGML_TYPE_F32, { 13, 2 });
    auto * out = wsp_ggml_custom_inplace(g.ctx(), x, &arg, 1, scale_by_arg, 1, &u);
    EXPECT_EQ(out->op, WSP_GGML_OP_CUSTOM);
    EXPECT_EQ(out->src[0], x);
    EXPECT_EQ(out->src[1], arg);
    EXPECT_EQ(out->view_src, x);
    g.build(out);
    const auto av = random_values(26, 1), gv = random_values(26, 2);
    set_values(a, av);
    set_values(arg, gv);
    ASSERT_EQ(g.run(4), WSP_GGML_STATUS_SUCCESS);
    EXPECT_TRUE(u.calls.tasks_were(1));
    EXPECT_EQ(out->data, x->data);
    EXPECT_LT(nmse(get_values(out), combine(av, gv, [](double p, double q) { return 3.0 * p * (1.0 + q); })), 1e-14);
}

TEST(CustomOp, CpuSupportsEveryCustomNode) {
    wsp_ggml_context * ctx = wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  a   = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_Q4_0, 64, 2);
    User               u;
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_map_custom2(ctx, a, a, add_scaled, 1, &u)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_map_custom3(ctx, a, a, a, fma3, 1, &u)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(
        cpu, wsp_ggml_custom_4d(ctx, WSP_GGML_TYPE_F16, 3, 1, 1, 1, nullptr, 0, sum_args, 1, &u)));
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(ctx);
}

// Under the scheduler, a device that declines the custom ops (as CUDA does) leaves them to the
// CPU: they read copies of the device's results, and the device goes on from the CPU's result.
TEST(CustomOp, DeclinedByADeviceRunsOnTheCpu) {
    ForeignAccessGuard     guard;
    SimBackends            be(1, 0);
    wsp_ggml_backend_dev_t dev = sim_dev(0);
    wsp_ggml_backend_sim_set_op_supported(dev, WSP_GGML_OP_MAP_CUSTOM2, false);
    wsp_ggml_backend_sim_set_op_supported(dev, WSP_GGML_OP_CUSTOM, false);

    // leaves in the device's memory (as weights would be)
    wsp_ggml_context *        leaves = wsp_ggml_init({ 4 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *         a      = wsp_ggml_new_tensor_2d(leaves, WSP_GGML_TYPE_F32, 37, 5);
    wsp_ggml_tensor *         b      = wsp_ggml_new_tensor_2d(leaves, WSP_GGML_TYPE_F32, 37, 5);
    wsp_ggml_backend_buffer_t buf    = wsp_ggml_backend_alloc_ctx_tensors(leaves, be.sim(0));
    ASSERT_NE(buf, nullptr);
    const auto av = random_values(185, 1), bv = random_values(185, 2);
    wsp_ggml_backend_tensor_set(a, av.data(), 0, av.size() * sizeof(float));
    wsp_ggml_backend_tensor_set(b, bv.data(), 0, bv.size() * sizeof(float));

    wsp_ggml_context * ctx =
        wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    User              u, v;
    auto *            x      = wsp_ggml_scale(ctx, a, 3.0f);                                          // device
    auto *            y      = wsp_ggml_sqr(ctx, b);                                                  // device
    auto *            c2     = wsp_ggml_map_custom2(ctx, x, y, add_scaled, WSP_GGML_N_TASKS_MAX, &u); // CPU
    auto *            sum    = wsp_ggml_add(ctx, c2, a);                                              // device
    wsp_ggml_tensor * args[] = { sum };
    auto *            cnt    = wsp_ggml_custom_4d(ctx, WSP_GGML_TYPE_I32, 1, 5, 1, 1, args, 1, sum_args, 1, &v); // CPU
    wsp_ggml_cgraph * g      = wsp_ggml_new_graph(ctx);
    wsp_ggml_set_output(sum);
    wsp_ggml_set_output(cnt);
    wsp_ggml_build_forward_expand(g, sum);
    wsp_ggml_build_forward_expand(g, cnt);

    wsp_ggml_backend_sched_t sched =
        wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(), 64, false, true);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, x), be.sim(0));
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, c2), be.cpu());
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, sum), be.sim(0));
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, cnt), be.cpu());
    EXPECT_TRUE(u.calls.tasks_were(2));
    EXPECT_TRUE(v.calls.tasks_were(1));

    std::vector<float> got(185);
    wsp_ggml_backend_tensor_get(sum, got.data(), 0, got.size() * sizeof(float));
    std::vector<double> ref(185);
    for (size_t i = 0; i < ref.size(); ++i) {
        ref[i] = 3.0 * av[i] + 2.0 * (double) bv[i] * bv[i] + av[i];
    }
    EXPECT_LT(nmse(got, ref), 1e-13);
    std::vector<int32_t> counts(5);
    wsp_ggml_backend_tensor_get(cnt, counts.data(), 0, counts.size() * sizeof(int32_t));
    for (int r = 0; r < 5; ++r) {
        double row = 0.0;
        for (int i = 0; i < 37; ++i) {
            row += got[(size_t) (r * 37 + i)];
        }
        EXPECT_NEAR(counts[(size_t) r], row * 1000.0, 1.0) << "row " << r;
    }

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(leaves);
    wsp_ggml_backend_sim_set_op_supported(dev, WSP_GGML_OP_MAP_CUSTOM2, true);
    wsp_ggml_backend_sim_set_op_supported(dev, WSP_GGML_OP_CUSTOM, true);
}

class CustomDeath : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead(), nullptr, true });
        a_   = wsp_ggml_new_tensor_1d(ctx_, WSP_GGML_TYPE_F32, 8);
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_context * ctx_ = nullptr;
    wsp_ggml_tensor *  a_   = nullptr;
};

TEST_F(CustomDeath, NullFunction) {
    EXPECT_DEATH(wsp_ggml_map_custom2(ctx_, a_, a_, nullptr, 1, nullptr),
                 "wsp_ggml_map_custom2: the function of the custom op on .* is NULL");
}

TEST_F(CustomDeath, BadTaskCount) {
    EXPECT_DEATH(wsp_ggml_map_custom3_inplace(ctx_, a_, a_, a_, fma3, 0, nullptr),
                 "wsp_ggml_map_custom3_inplace: n_tasks must be positive or WSP_GGML_N_TASKS_MAX, got 0");
}

TEST_F(CustomDeath, TooManyArguments) {
    std::vector<wsp_ggml_tensor *> args(WSP_GGML_MAX_SRC + 1, a_);
    EXPECT_DEATH(
        wsp_ggml_custom_4d(ctx_, WSP_GGML_TYPE_F32, 1, 1, 1, 1, args.data(), (int) args.size(), sum_args, 1, nullptr),
        "wsp_ggml_custom_4d: 11 arguments, at most 10 fit");
    EXPECT_DEATH(wsp_ggml_custom_inplace(ctx_, a_, args.data(), WSP_GGML_MAX_SRC, scale_by_arg, 1, nullptr),
                 "wsp_ggml_custom_inplace: 10 arguments, at most 9 fit");
}

} // namespace
} // namespace wsp::test
