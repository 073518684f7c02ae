// Graph compute on the CPU through ggml-cpu.h: custom ops (task indices and counts), compute
// with a context work buffer, plans with and without a thread pool (pause / resume), the abort
// callback between nodes, unsupported ops, and the scalar accessors.

#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

namespace wsp::test {
namespace {

struct Ctx {
    explicit Ctx(size_t size, bool no_alloc = false) : ctx(wsp_ggml_init({ size, nullptr, no_alloc })) {}
    ~Ctx() { wsp_ggml_free(ctx); }
    wsp_ggml_context * ctx;
};

void fill(wsp_ggml_tensor * t, const std::vector<float> & v) {
    ASSERT_EQ(t->type, WSP_GGML_TYPE_F32);
    std::memcpy(t->data, v.data(), v.size() * sizeof(float));
}

// what the custom op saw: one entry per call
struct CustomLog {
    std::mutex                       mutex;
    std::vector<std::pair<int, int>> calls; // (ith, nth)
};

// dst = 2 a + ith-independent result; each task doubles its share of the rows
void double_rows(wsp_ggml_tensor * dst, const wsp_ggml_tensor * a, int ith, int nth, void * userdata) {
    auto * log = static_cast<CustomLog *>(userdata);
    {
        std::lock_guard<std::mutex> lock(log->mutex);
        log->calls.emplace_back(ith, nth);
    }
    const int64_t rows = wsp_ggml_nrows(a);
    for (int64_t r = ith; r < rows; r += nth) {
        const float * x = reinterpret_cast<const float *>(static_cast<const char *>(a->data) + r * a->nb[1]);
        float *       y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + r * dst->nb[1]);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            y[i] = 2.0f * x[i];
        }
    }
}

TEST(MapCustom1, TasksSeeTheirIndexAndCount) {
    struct Case {
        int n_tasks, n_threads, expect_nth;
    };
    const Case cases[] = { { 1, 2, 1 },
                           { 3, 2, 2 },
                           { 2, 4, 2 },
                           { WSP_GGML_N_TASKS_MAX, 1, 1 },
                           { WSP_GGML_N_TASKS_MAX, 2, 2 },
                           { WSP_GGML_N_TASKS_MAX, 3, 3 } };
    for (const Case & c : cases) {
        for (bool inplace : { false, true }) {
            Graph             g;
            CustomLog         log;
            wsp_ggml_tensor * a   = g.input(WSP_GGML_TYPE_F32, { 9, 13 });
            wsp_ggml_tensor * x   = wsp_ggml_scale(g.ctx(), a, 1.0f); // an intermediate for the in-place form
            wsp_ggml_tensor * out = inplace ? wsp_ggml_map_custom1_inplace(g.ctx(), x, double_rows, c.n_tasks, &log)
                                            : wsp_ggml_map_custom1(g.ctx(), x, double_rows, c.n_tasks, &log);
            g.build(out);
            fill_inputs(g, 81);
            const std::vector<float> va = get_values(a);
            ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
            std::set<int> seen;
            for (const auto & [ith, nth] : log.calls) {
                EXPECT_EQ(nth, c.expect_nth) << "n_tasks " << c.n_tasks << " threads " << c.n_threads;
                EXPECT_TRUE(seen.insert(ith).second) << "task " << ith << " ran twice";
                EXPECT_LT(ith, nth);
            }
            EXPECT_EQ((int) seen.size(), c.expect_nth);
            if (inplace) {
                EXPECT_EQ(out->data, x->data);
            }
            std::vector<double> ref(va.size());
            for (size_t i = 0; i < va.size(); ++i) {
                ref[i] = 2.0 * va[i];
            }
            all_close(get_values(out), ref, 0.0, 0.0, "custom op result");
        }
    }
}

// A pool with more threads than a node's task count: workers that sit a node out must neither
// run the next node twice nor miss it. Each node records its calls; every task runs once.
TEST(ThreadPool, NodesWithFewerTasksThanThreadsRunExactlyOnce) {
    constexpr int n_nodes = 2000;
    struct Counts {
        std::atomic<int> calls[n_nodes][4];
        std::atomic<int> bad_nth{ 0 };
    };
    auto counts = std::make_unique<Counts>();
    struct NodeData {
        Counts * counts;
        int      index;
        int      n_tasks;
    };
    std::vector<NodeData> data(n_nodes);
    Ctx c((n_nodes + 4) * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(n_nodes + 4, false) + (1 << 16));
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    for (int i = 0; i < n_nodes; ++i) {
        data[(size_t) i] = { counts.get(), i, 1 + (i * 7) % 4 };
        t                = wsp_ggml_map_custom1_inplace(
                           c.ctx, t,
                           [](wsp_ggml_tensor *, const wsp_ggml_tensor *, int ith, int nth, void * ud) {
                auto * d = static_cast<NodeData *>(ud);
                if (nth != std::min(d->n_tasks, 4)) {
                    d->counts->bad_nth++;
                }
                d->counts->calls[d->index][ith]++;
            },
                           data[(size_t) i].n_tasks, &data[(size_t) i]);
    }
    wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(c.ctx, n_nodes + 4, false);
    wsp_ggml_build_forward_expand(g, t);

    // poll 0: idle workers sleep at once (the wake-up path); poll 50: they spin first (the fast
    // path, slow here when 4 threads share fewer cores, hence fewer repetitions)
    for (uint32_t poll : { 0u, 50u }) {
        wsp_ggml_threadpool_params params = wsp_ggml_threadpool_params_default(4);
        params.poll                       = poll;
        wsp_ggml_threadpool * tp          = wsp_ggml_threadpool_new(&params);
        ASSERT_NE(tp, nullptr);
        for (int rep = 0; rep < (poll == 0 ? 4 : 1); ++rep) {
            for (auto & node : counts->calls) {
                for (auto & k : node) {
                    k = 0;
                }
            }
            wsp_ggml_cplan plan = wsp_ggml_graph_plan(g, 4, tp);
            // a lost wake-up or a double run shows as a hang: fail loudly instead of waiting forever
            auto done = std::async(std::launch::async, [&] { return wsp_ggml_graph_compute(g, &plan); });
            if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
                fprintf(stderr, "graph compute did not finish within 60 s: the thread pool is stuck\n");
                std::abort();
            }
            ASSERT_EQ(done.get(), WSP_GGML_STATUS_SUCCESS);
            int wrong = 0;
            for (int i = 0; i < n_nodes; ++i) {
                const int nth = std::min(data[(size_t) i].n_tasks, 4);
                for (int k = 0; k < 4; ++k) {
                    wrong += counts->calls[i][k] != (k < nth ? 1 : 0);
                }
            }
            ASSERT_EQ(wrong, 0) << "poll " << poll << " repetition " << rep;
            ASSERT_EQ(counts->bad_nth.load(), 0);
        }
        wsp_ggml_threadpool_free(tp);
    }
}

// x -> x * x + x, then cast to f16 (a copy node, so the plan needs a work buffer)
struct SmallGraph {
    Ctx               c;
    wsp_ggml_tensor * x;
    wsp_ggml_tensor * out;
    wsp_ggml_cgraph * g;

    explicit SmallGraph(size_t extra = 1 << 20)
        : c(64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead() + extra) {
        x   = wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F32, 301, 7);
        out = wsp_ggml_cast(c.ctx, wsp_ggml_add(c.ctx, wsp_ggml_mul(c.ctx, x, x), x), WSP_GGML_TYPE_F16);
        g   = wsp_ggml_new_graph(c.ctx);
        wsp_ggml_build_forward_expand(g, out);
        fill(x, random_values(301 * 7, 91, -2.0f, 2.0f));
    }

    void expect_result() {
        const std::vector<float> vx = get_values(x);
        std::vector<double>      ref(vx.size());
        for (size_t i = 0; i < vx.size(); ++i) {
            ref[i] = ieee_fp16_value(ieee_fp16_bits(vx[i] * vx[i] + vx[i]));
        }
        all_close(get_values(out), ref, 0.0, 0.0, "x * x + x as f16");
    }

    void clear_out() { std::memset(out->data, 0xff, wsp_ggml_nbytes(out)); }
};

TEST(GraphCompute, WithAContextWorkBuffer) {
    for (int n_threads : { 1, 2 }) {
        SmallGraph   sg;
        const size_t before = wsp_ggml_used_mem(sg.c.ctx);
        ASSERT_EQ(wsp_ggml_graph_compute_with_ctx(sg.c.ctx, sg.g, n_threads), WSP_GGML_STATUS_SUCCESS);
        EXPECT_GE(wsp_ggml_used_mem(sg.c.ctx) - before, wsp_ggml_graph_plan(sg.g, n_threads, nullptr).work_size);
        sg.expect_result();
    }
}

namespace {

// the kernel thread ids of the workers (ith > 0) that ran a custom op
struct WorkerIds {
    std::mutex     mutex;
    std::set<long> ids;
};

void record_worker(wsp_ggml_tensor * dst, const wsp_ggml_tensor * a, int ith, int, void * user) {
    auto & w = *static_cast<WorkerIds *>(user);
    if (ith > 0) {
        std::lock_guard<std::mutex> lock(w.mutex);
        w.ids.insert((long) syscall(SYS_gettid));
    }
    if (ith == 0) {
        std::memcpy(dst->data, a->data, wsp_ggml_nbytes(a));
    }
}

} // namespace

// Note [kept pools] (src/cpu/compute.cpp): a plan without a threadpool borrows the threads of the
// calls before it instead of starting its own; calls from several threads at once each get a
// pool and their own result
TEST(GraphCompute, PlanlessCallsKeepTheirThreads) {
    WorkerIds         w;
    Ctx               c(1 << 20);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 64);
    wsp_ggml_tensor * y = wsp_ggml_map_custom1(c.ctx, x, record_worker, 4, &w);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(c.ctx);
    wsp_ggml_build_forward_expand(g, y);
    fill(x, random_values(64, 5, -1.0f, 1.0f));
    wsp_ggml_cplan       plan = wsp_ggml_graph_plan(g, 4, nullptr);
    std::vector<uint8_t> work(plan.work_size + 1);
    plan.work_data = work.data();
    for (int i = 0; i < 30; ++i) {
        ASSERT_EQ(wsp_ggml_graph_compute(g, &plan), WSP_GGML_STATUS_SUCCESS);
    }
    EXPECT_EQ(get_values(y), get_values(x));
    // 30 calls of 4 threads: the same 3 workers (a thread per call and worker would be 90)
    EXPECT_EQ(w.ids.size(), 3u);

    std::vector<std::thread> callers;
    std::atomic<int>         wrong{ 0 };
    for (int t = 0; t < 4; ++t) {
        callers.emplace_back([&wrong] {
            for (int i = 0; i < 20; ++i) {
                SmallGraph sg;
                sg.clear_out();
                if (wsp_ggml_graph_compute_with_ctx(sg.c.ctx, sg.g, 2) != WSP_GGML_STATUS_SUCCESS) {
                    ++wrong;
                    continue;
                }
                const std::vector<float> vx = get_values(sg.x), vo = get_values(sg.out);
                for (size_t k = 0; k < vx.size(); ++k) {
                    if (vo[k] != (float) ieee_fp16_value(ieee_fp16_bits(vx[k] * vx[k] + vx[k]))) {
                        ++wrong;
                        break;
                    }
                }
            }
        });
    }
    for (std::thread & t : callers) {
        t.join();
    }
    EXPECT_EQ(wrong.load(), 0);
}

TEST(GraphCompute, PlanThenComputeWithAndWithoutAThreadPool) {
    SmallGraph     sg;
    wsp_ggml_cplan plan = wsp_ggml_graph_plan(sg.g, 2, nullptr);
    EXPECT_EQ(plan.n_threads, 2);
    EXPECT_EQ(plan.threadpool, nullptr);
    ASSERT_GT(plan.work_size, 0u);
    {
        LogCapture log; // the caller must provide the work buffer
        EXPECT_EQ(wsp_ggml_graph_compute(sg.g, &plan), WSP_GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("work")) << log.text();
    }
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    sg.clear_out();
    ASSERT_EQ(wsp_ggml_graph_compute(sg.g, &plan), WSP_GGML_STATUS_SUCCESS);
    sg.expect_result();
    EXPECT_EQ(wsp_ggml_graph_plan(sg.g, 0, nullptr).n_threads, WSP_GGML_DEFAULT_N_THREADS);

    wsp_ggml_threadpool_params params = wsp_ggml_threadpool_params_default(2);
    EXPECT_EQ(params.n_threads, 2);
    wsp_ggml_threadpool_params same = wsp_ggml_threadpool_params_default(2);
    EXPECT_TRUE(wsp_ggml_threadpool_params_match(&params, &same));
    same.poll = 7;
    EXPECT_FALSE(wsp_ggml_threadpool_params_match(&params, &same));
    wsp_ggml_threadpool * tp = wsp_ggml_threadpool_new(&params);
    ASSERT_NE(tp, nullptr);
    EXPECT_EQ(wsp_ggml_threadpool_get_n_threads(tp), 2);
    wsp_ggml_cplan tplan = wsp_ggml_graph_plan(sg.g, 5, tp); // the pool decides the thread count
    EXPECT_EQ(tplan.n_threads, 2);
    EXPECT_EQ(tplan.threadpool, tp);
    std::vector<uint8_t> twork(tplan.work_size);
    tplan.work_data = twork.data();
    for (int round = 0; round < 3; ++round) {
        sg.clear_out();
        if (round == 1) {
            wsp_ggml_threadpool_pause(tp); // a compute on a paused pool still completes
        }
        ASSERT_EQ(wsp_ggml_graph_compute(sg.g, &tplan), WSP_GGML_STATUS_SUCCESS);
        sg.expect_result();
        wsp_ggml_threadpool_resume(tp);
    }
    wsp_ggml_threadpool_free(tp);

    wsp_ggml_threadpool_params paused = wsp_ggml_threadpool_params_default(2);
    paused.paused                     = true;
    wsp_ggml_threadpool * tp2         = wsp_ggml_threadpool_new(&paused);
    wsp_ggml_cplan        plan2       = wsp_ggml_graph_plan(sg.g, 2, tp2);
    plan2.work_data                   = twork.data();
    sg.clear_out();
    ASSERT_EQ(wsp_ggml_graph_compute(sg.g, &plan2), WSP_GGML_STATUS_SUCCESS);
    sg.expect_result();
    wsp_ggml_threadpool_free(tp2);

    LogCapture                 log;
    wsp_ggml_threadpool_params none = wsp_ggml_threadpool_params_default(0);
    EXPECT_EQ(wsp_ggml_threadpool_new(&none), nullptr);
    EXPECT_TRUE(log.contains("n_threads")) << log.text();
    wsp_ggml_cplan bad = plan;
    bad.n_threads      = 0;
    EXPECT_EQ(wsp_ggml_graph_compute(sg.g, &bad), WSP_GGML_STATUS_FAILED);
}

TEST(GraphCompute, AbortCallbackStopsBetweenNodes) {
    for (int stop_at : { 0, 1, 4, 9 }) {
        Ctx               c(64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead() + (1 << 16));
        wsp_ggml_tensor * one = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 8);
        fill(one, std::vector<float>(8, 1.0f));
        std::vector<wsp_ggml_tensor *> nodes;
        wsp_ggml_tensor *              t = one;
        for (int i = 0; i < 10; ++i) {
            t = wsp_ggml_add(c.ctx, t, one); // node i holds i + 2
            nodes.push_back(t);
            fill(t, std::vector<float>(8, -1.0f)); // untouched marker
        }
        wsp_ggml_cgraph * g = wsp_ggml_new_graph(c.ctx);
        wsp_ggml_build_forward_expand(g, t);
        struct Abort {
            int calls   = 0;
            int stop_at = 0;
        } ab{ 0, stop_at };
        wsp_ggml_cplan plan = wsp_ggml_graph_plan(g, 2, nullptr);
        plan.abort_callback = [](void * d) {
            auto * a = static_cast<Abort *>(d);
            return a->calls++ == a->stop_at; // asked before each node
        };
        plan.abort_callback_data = &ab;
        EXPECT_EQ(wsp_ggml_graph_compute(g, &plan), WSP_GGML_STATUS_ABORTED);
        EXPECT_EQ(ab.calls, stop_at + 1);
        for (int i = 0; i < 10; ++i) {
            const float expect = i < stop_at ? (float) (i + 2) : -1.0f;
            EXPECT_EQ(static_cast<float *>(nodes[(size_t) i]->data)[3], expect)
                << "node " << i << ", stop at " << stop_at;
        }
    }
}

TEST(GraphCompute, UnsupportedOpsFailWithAMessage) {
    Ctx               c(16 * wsp_ggml_tensor_overhead() + 2 * wsp_ggml_graph_overhead() + (1 << 14));
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor * sum = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 1);
    sum->op               = WSP_GGML_OP_CROSS_ENTROPY_LOSS; // a training op: declared, no kernel
    sum->src[0]           = a;
    wsp_ggml_set_name(sum, "total");
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(c.ctx);
    wsp_ggml_build_forward_expand(g, sum);
    {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_graph_compute_with_ctx(c.ctx, g, 1), WSP_GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("CROSS_ENTROPY_LOSS")) << log.text();
        EXPECT_TRUE(log.contains("not supported")) << log.text();
        EXPECT_TRUE(log.contains("total")) << log.text();
    }
    // a known op with types its kernel refuses: integer addition
    wsp_ggml_tensor * i  = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_I32, 4);
    wsp_ggml_cgraph * g2 = wsp_ggml_new_graph(c.ctx);
    wsp_ggml_build_forward_expand(g2, wsp_ggml_add(c.ctx, i, i));
    LogCapture log;
    EXPECT_EQ(wsp_ggml_graph_compute_with_ctx(c.ctx, g2, 2), WSP_GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("ADD")) << log.text();
}

TEST(Accessors, ScalarsAndElements) {
    Ctx               c(1 << 16);
    wsp_ggml_tensor * i = wsp_ggml_new_i32(c.ctx, -17);
    EXPECT_EQ(i->type, WSP_GGML_TYPE_I32);
    EXPECT_EQ(wsp_ggml_get_i32_1d(i, 0), -17);
    wsp_ggml_tensor * f = wsp_ggml_new_f32(c.ctx, 2.5f);
    EXPECT_EQ(wsp_ggml_get_f32_1d(f, 0), 2.5f);
    EXPECT_EQ(wsp_ggml_nelements(f), 1);

    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_I32 }) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_3d(c.ctx, type, 5, 4, 3);
        EXPECT_EQ(wsp_ggml_set_f32(t, 3.0f), t);
        for (int k = 0; k < 60; ++k) {
            ASSERT_EQ(wsp_ggml_get_f32_1d(t, k), 3.0f);
        }
        wsp_ggml_set_i32(t, 7);
        EXPECT_EQ(wsp_ggml_get_i32_1d(t, 59), 7);
        for (int k = 0; k < 60; ++k) {
            wsp_ggml_set_f32_1d(t, k, (float) k);
        }
        // nd indices are (i0, i1, i2, i3); 1d indices are flat, row-major
        EXPECT_EQ(wsp_ggml_get_f32_nd(t, 2, 3, 1, 0), 2.0f + 5.0f * 3.0f + 20.0f);
        wsp_ggml_set_f32_nd(t, 4, 0, 2, 0, -1.0f);
        EXPECT_EQ(wsp_ggml_get_f32_1d(t, 44), -1.0f);
        wsp_ggml_set_i32_nd(t, 1, 1, 1, 0, 99);
        EXPECT_EQ(wsp_ggml_get_i32_nd(t, 1, 1, 1, 0), 99);
        EXPECT_EQ(wsp_ggml_get_i32_1d(t, 26), 99);
        wsp_ggml_set_i32_1d(t, 0, -4);
        EXPECT_EQ(wsp_ggml_get_f32_1d(t, 0), -4.0f);
        // on a permuted view the flat index follows the view's own shape
        wsp_ggml_tensor * p = wsp_ggml_permute(c.ctx, t, 1, 0, 2, 3); // [4, 5, 3]
        EXPECT_EQ(wsp_ggml_get_f32_1d(p, 1 + 4 * 2), wsp_ggml_get_f32_nd(t, 2, 1, 0, 0));
        EXPECT_EQ(wsp_ggml_get_f32_nd(p, 3, 4, 2, 0), wsp_ggml_get_f32_nd(t, 4, 3, 2, 0));
    }
    wsp_ggml_tensor * h = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F16, 2);
    wsp_ggml_set_f32_1d(h, 0, 0.1f); // stored as the nearest half
    EXPECT_EQ((double) wsp_ggml_get_f32_1d(h, 0), ieee_fp16_value(ieee_fp16_bits(0.1f)));
}

} // namespace
} // namespace wsp::test
