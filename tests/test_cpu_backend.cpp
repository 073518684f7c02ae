// The CPU backend through the backend API: backend object, thread count, graph compute and
// plans, supports_op, the CPU device and reg with their proc addresses, buffers over caller
// memory, and tensor data access with bounds checks.

#include "test_util.h"

#include "ggml-backend-impl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

namespace wsp::test {
namespace {

struct Backend {
    wsp_ggml_backend_t b = wsp_ggml_backend_cpu_init();
    ~Backend() { wsp_ggml_backend_free(b); }
};

// c = a * b + a over [n] with a graph allocated on the CPU buffer type
struct AddMulGraph {
    Graph              g;
    wsp_ggml_tensor *  a;
    wsp_ggml_tensor *  b;
    wsp_ggml_tensor *  out;
    std::vector<float> va, vb;

    explicit AddMulGraph(int64_t n = 5003) {
        a   = g.input(WSP_GGML_TYPE_F32, { n });
        b   = g.input(WSP_GGML_TYPE_F32, { n });
        out = wsp_ggml_add(g.ctx(), wsp_ggml_mul(g.ctx(), a, b), a);
        g.build(out);
        fill_inputs(g, 17);
        va = get_values(a);
        vb = get_values(b);
    }

    void clear_out() { std::memset(out->data, 0, wsp_ggml_nbytes(out)); }

    void expect_result(const char * what) {
        std::vector<double> ref(va.size());
        for (size_t i = 0; i < va.size(); ++i) {
            ref[i] = (double) va[i] * vb[i] + va[i];
        }
        all_close(get_values(out), ref, 1e-6, 1e-6, what);
    }
};

TEST(CpuBackend, IdentityAndDefaults) {
    Backend cpu;
    ASSERT_NE(cpu.b, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_name(cpu.b), "CPU");
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(cpu.b));
    EXPECT_FALSE(wsp_ggml_backend_is_cpu(nullptr));
    EXPECT_NE(wsp_ggml_backend_guid(cpu.b), nullptr);
    Backend other;
    EXPECT_TRUE(wsp_ggml_guid_matches(wsp_ggml_backend_guid(cpu.b), wsp_ggml_backend_guid(other.b)));
    EXPECT_EQ(wsp_ggml_backend_get_default_buffer_type(cpu.b), wsp_ggml_backend_cpu_buffer_type());
    EXPECT_EQ(wsp_ggml_backend_get_alignment(cpu.b), 32u);
    EXPECT_EQ(wsp_ggml_backend_get_max_size(cpu.b), SIZE_MAX);
    EXPECT_STREQ(wsp_ggml_backend_buft_name(wsp_ggml_backend_cpu_buffer_type()), "CPU");
    EXPECT_TRUE(wsp_ggml_backend_buft_is_host(wsp_ggml_backend_cpu_buffer_type()));
    EXPECT_TRUE(wsp_ggml_backend_supports_buft(cpu.b, wsp_ggml_backend_cpu_buffer_type()));
    HostBufferType host("Host", 32, SIZE_MAX);
    EXPECT_TRUE(wsp_ggml_backend_supports_buft(cpu.b, host.buft()));
    wsp_ggml_backend_synchronize(cpu.b); // nothing queued: returns at once
}

TEST(CpuBackend, ThreadCountsAndGraphCompute) {
    AddMulGraph m;
    Backend     cpu;
    for (int n : { 1, 2, 3 }) {
        wsp_ggml_backend_cpu_set_n_threads(cpu.b, n);
        m.clear_out();
        ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
        m.expect_result("graph_compute");
    }
    {
        LogCapture log; // 0 threads is refused and the previous count stays
        wsp_ggml_backend_cpu_set_n_threads(cpu.b, 0);
        EXPECT_TRUE(log.contains("n_threads")) << log.text();
        wsp_ggml_backend_cpu_set_n_threads(cpu.b, -3);
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 2);
    }
    m.clear_out();
    ASSERT_EQ(wsp_ggml_backend_graph_compute_async(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_backend_synchronize(cpu.b);
    m.expect_result("graph_compute_async");

    wsp_ggml_threadpool_params params = wsp_ggml_threadpool_params_default(2);
    wsp_ggml_threadpool *      tp     = wsp_ggml_threadpool_new(&params);
    wsp_ggml_backend_cpu_set_threadpool(cpu.b, tp);
    m.clear_out();
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
    m.expect_result("graph_compute on a user thread pool");
    wsp_ggml_backend_cpu_set_threadpool(cpu.b, nullptr);
    wsp_ggml_threadpool_free(tp);
    m.clear_out();
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
    m.expect_result("graph_compute after the pool is gone");
}

TEST(CpuBackend, GraphPlans) {
    AddMulGraph m;
    Backend     cpu;
    wsp_ggml_backend_cpu_set_n_threads(cpu.b, 2);
    wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(cpu.b, m.g.graph());
    ASSERT_NE(plan, nullptr);
    for (int i = 0; i < 2; ++i) {
        m.clear_out();
        ASSERT_EQ(wsp_ggml_backend_graph_plan_compute(cpu.b, plan), WSP_GGML_STATUS_SUCCESS);
        m.expect_result("plan_compute");
    }
    wsp_ggml_backend_graph_plan_free(cpu.b, plan);
    wsp_ggml_backend_graph_plan_free(cpu.b, nullptr); // freeing nothing is fine
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_graph_plan_compute(cpu.b, nullptr), WSP_GGML_STATUS_FAILED);
}

// A plan made with one thread count still computes after the count changes: the scratch a
// node needs grows with the number of tasks (here the cast to F16 gathers rows per task).
TEST(CpuBackend, PlanSurvivesAThreadCountChange) {
    Graph             g;
    wsp_ggml_tensor * a = g.input(WSP_GGML_TYPE_F32, { 4096, 8 });
    wsp_ggml_tensor * out =
        wsp_ggml_cast(g.ctx(), wsp_ggml_cont(g.ctx(), wsp_ggml_transpose(g.ctx(), a)), WSP_GGML_TYPE_F16);
    g.build(out);
    const std::vector<float> v = random_values(4096 * 8, 3);
    set_values(a, v);
    wsp_ggml_backend_cpu_set_n_threads(g.backend(), 1);
    wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(g.backend(), g.graph());
    ASSERT_NE(plan, nullptr);
    wsp_ggml_backend_cpu_set_n_threads(g.backend(), 2);
    ASSERT_EQ(wsp_ggml_backend_graph_plan_compute(g.backend(), plan), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> got = get_values(out);
    for (int64_t r = 0; r < 4096; ++r) {
        for (int64_t c = 0; c < 8; ++c) {
            ASSERT_EQ(got[(size_t) (r * 8 + c)],
                      wsp_ggml_fp16_to_fp32(wsp_ggml_fp32_to_fp16(v[(size_t) (c * 4096 + r)])));
        }
    }
    wsp_ggml_backend_graph_plan_free(g.backend(), plan);
}

TEST(CpuBackend, AbortCallback) {
    AddMulGraph m;
    Backend     cpu;
    int         calls = 0;
    wsp_ggml_backend_cpu_set_abort_callback(
        cpu.b,
        [](void * d) {
            return ++*static_cast<int *>(d) >= 2; // let the first node run, stop before the second
        },
        &calls);
    m.clear_out();
    EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_ABORTED);
    EXPECT_EQ(calls, 2);
    // the last node (the add) did not run: at most the product is there, computed in place
    EXPECT_NE(get_values(m.out)[7], (float) ((double) m.va[7] * m.vb[7] + m.va[7]));
    wsp_ggml_backend_cpu_set_abort_callback(cpu.b, nullptr, nullptr);
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
    m.expect_result("after clearing the abort callback");
}

TEST(CpuBackend, SupportsOp) {
    Backend            cpu;
    wsp_ggml_context * ctx = wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead(), nullptr, true });
    auto t = [&](wsp_ggml_type type, int64_t ne0, int64_t ne1) { return wsp_ggml_new_tensor_2d(ctx, type, ne0, ne1); };
    wsp_ggml_tensor * x = t(WSP_GGML_TYPE_F32, 256, 4);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_add(ctx, x, x)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_mul_mat(ctx, t(WSP_GGML_TYPE_F16, 256, 8), x)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_mul_mat(ctx, t(WSP_GGML_TYPE_Q4_0, 256, 8), x)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_cast(ctx, x, WSP_GGML_TYPE_Q8_0)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(
        cpu.b, wsp_ggml_get_rows(ctx, t(WSP_GGML_TYPE_Q5_1, 256, 9), t(WSP_GGML_TYPE_I32, 3, 1))));
    // K-quant weights are read through their dequantizer; CPY converts to them by the reference quantizer
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_mul_mat(ctx, t(WSP_GGML_TYPE_Q4_K, 256, 8), x)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_cast(ctx, x, WSP_GGML_TYPE_Q6_K)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(
        cpu.b, wsp_ggml_get_rows(ctx, t(WSP_GGML_TYPE_Q2_K, 256, 9), t(WSP_GGML_TYPE_I32, 3, 1))));
    // the i-quants of grids are read through their dequantizer where the build has the client's
    // codebooks (Note [client codebooks]) and refused where it does not; no quantizer: no CPY to them
    EXPECT_EQ(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_mul_mat(ctx, t(WSP_GGML_TYPE_IQ2_XXS, 256, 8), x)),
              wsp_ggml_get_type_traits(WSP_GGML_TYPE_IQ2_XXS)->to_float != nullptr);
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_cast(ctx, x, WSP_GGML_TYPE_IQ2_XXS)));
    // a training op: no kernel
    wsp_ggml_tensor * loss = t(WSP_GGML_TYPE_F32, 1, 1);
    loss->op               = WSP_GGML_OP_CROSS_ENTROPY_LOSS;
    loss->src[0]           = x;
    loss->src[1]           = x;
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu.b, loss));
    wsp_ggml_tensor * i = t(WSP_GGML_TYPE_I32, 4, 1);
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu.b, wsp_ggml_add(ctx, i, i)));
    EXPECT_FALSE(wsp_ggml_backend_offload_op(cpu.b, wsp_ggml_add(ctx, x, x)));
    wsp_ggml_free(ctx);
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string   line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            const size_t b     = line.find_first_not_of(" \t", colon + 1);
            return b == std::string::npos ? "" : line.substr(b);
        }
    }
    return "";
}

TEST(CpuBackend, DeviceAndReg) {
    Backend                cpu;
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_get_device(cpu.b);
    ASSERT_NE(dev, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_dev_name(dev), "CPU");
    const std::string model = cpu_model_name();
    if (!model.empty()) {
        EXPECT_EQ(wsp_ggml_backend_dev_description(dev), model);
    }
    EXPECT_EQ(wsp_ggml_backend_dev_type(dev), WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    size_t free_mem = 0, total = 0;
    wsp_ggml_backend_dev_memory(dev, &free_mem, &total);
    EXPECT_GT(total, 0u);
    EXPECT_GT(free_mem, 0u);
    EXPECT_LE(free_mem, total);
    wsp_ggml_backend_dev_props props = {};
    wsp_ggml_backend_dev_get_props(dev, &props);
    EXPECT_STREQ(props.name, "CPU");
    EXPECT_STREQ(props.description, wsp_ggml_backend_dev_description(dev));
    EXPECT_EQ(props.type, WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_GT(props.memory_total, 0u);
    EXPECT_TRUE(props.caps.buffer_from_host_ptr);
    EXPECT_EQ(wsp_ggml_backend_dev_buffer_type(dev), wsp_ggml_backend_cpu_buffer_type());
    EXPECT_EQ(wsp_ggml_backend_buft_get_device(wsp_ggml_backend_cpu_buffer_type()), dev);
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_buft(dev, wsp_ggml_backend_cpu_buffer_type()));

    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_dev_backend_reg(dev);
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg, wsp_ggml_backend_cpu_reg());
    EXPECT_STREQ(wsp_ggml_backend_reg_name(reg), "CPU");
    EXPECT_EQ(wsp_ggml_backend_reg_dev_count(reg), 1u);
    EXPECT_EQ(wsp_ggml_backend_reg_dev_get(reg, 0), dev);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("CPU"), reg);
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("CPU"), dev);
    EXPECT_EQ(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU), dev);

    wsp_ggml_backend_t b2 = wsp_ggml_backend_dev_init(dev, "n_threads=2");
    ASSERT_NE(b2, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(b2));
    EXPECT_EQ(wsp_ggml_backend_get_device(b2), dev);
    wsp_ggml_backend_free(b2);
    wsp_ggml_backend_t b3 = wsp_ggml_backend_init_by_name("CPU", nullptr);
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(b3));
    wsp_ggml_backend_free(b3);
}

TEST(CpuBackend, ProcAddresses) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_cpu_reg();
    auto                   set_n_threads =
        (wsp_ggml_backend_set_n_threads_t) wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_set_n_threads");
    auto set_abort = (wsp_ggml_backend_set_abort_callback_t) wsp_ggml_backend_reg_get_proc_address(
        reg, "wsp_ggml_backend_set_abort_callback");
    auto get_features =
        (wsp_ggml_backend_get_features_t) wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features");
    auto extra_bufts = (wsp_ggml_backend_dev_get_extra_bufts_t) wsp_ggml_backend_reg_get_proc_address(
        reg, "wsp_ggml_backend_dev_get_extra_bufts");
    ASSERT_NE(set_n_threads, nullptr);
    ASSERT_NE(set_abort, nullptr);
    ASSERT_NE(get_features, nullptr);
    ASSERT_NE(extra_bufts, nullptr);
    EXPECT_EQ(wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_no_such_function"), nullptr);

    AddMulGraph m;
    Backend     cpu;
    set_n_threads(cpu.b, 2);
    m.clear_out();
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_SUCCESS);
    m.expect_result("after set_n_threads through the proc address");
    set_abort(
        cpu.b, [](void *) { return true; }, nullptr);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu.b, m.g.graph()), WSP_GGML_STATUS_ABORTED);

    const wsp_ggml_backend_feature * f = get_features(reg);
    ASSERT_NE(f, nullptr);
    std::set<std::string> names;
    for (; f->name != nullptr; ++f) {
        ASSERT_NE(f->value, nullptr);
        names.insert(f->name);
    }
    EXPECT_EQ(names.count("AVX2") > 0, wsp_ggml_cpu_has_avx2() != 0);
    EXPECT_EQ(names.count("F16C") > 0, wsp_ggml_cpu_has_f16c() != 0);
    wsp_ggml_backend_buffer_type_t * bufts = extra_bufts(wsp_ggml_backend_get_device(cpu.b));
    ASSERT_NE(bufts, nullptr);
    size_t n = 0;
    while (bufts[n] != nullptr) {
        ++n;
    }
    EXPECT_LT(n, 16u); // NULL-terminated
}

TEST(CpuBuffer, FromCallerMemory) {
    const size_t size = 4096;
    void *       mem  = std::aligned_alloc(64, size);
    ASSERT_NE(mem, nullptr);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_cpu_buffer_from_ptr(mem, size);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_base(buf), mem);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), size);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_host(buf));
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), "CPU_Mapped");
    wsp_ggml_context * ctx    = wsp_ggml_init({ 4 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  t      = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 16);
    wsp_ggml_tallocr   talloc = wsp_ggml_tallocr_new(buf);
    ASSERT_EQ(wsp_ggml_tallocr_alloc(&talloc, t), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(t->data, mem);
    const std::vector<float> v = random_values(16, 3);
    wsp_ggml_backend_tensor_set(t, v.data(), 0, 64);
    EXPECT_EQ(std::memcmp(mem, v.data(), 64), 0);
    wsp_ggml_backend_buffer_free(buf);
    std::memset(mem, 0, size); // still the caller's
    wsp_ggml_free(ctx);

    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_cpu_buffer_from_ptr(static_cast<char *>(mem) + 4, 64), nullptr);
    EXPECT_TRUE(log.contains("aligned")) << log.text();
    EXPECT_EQ(wsp_ggml_backend_cpu_buffer_from_ptr(nullptr, 64), nullptr);
    wsp_ggml_backend_dev_t    dev = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    wsp_ggml_backend_buffer_t b2  = wsp_ggml_backend_dev_buffer_from_host_ptr(dev, mem, size, size);
    ASSERT_NE(b2, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_base(b2), mem);
    wsp_ggml_backend_buffer_free(b2);
    std::free(mem);
}

TEST(CpuBuffer, TensorAccessIsBoundsChecked) {
    wsp_ggml_context *        ctx = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *         t   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 10);
    wsp_ggml_tensor *         u   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 10);
    wsp_ggml_tensor *         nob = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 10); // never allocated
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 256);
    wsp_ggml_tallocr          ta  = wsp_ggml_tallocr_new(buf);
    ASSERT_EQ(wsp_ggml_tallocr_alloc(&ta, t), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(wsp_ggml_tallocr_alloc(&ta, u), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_alloc_size(buf, t), 40u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_alignment(buf), 32u);

    wsp_ggml_backend_buffer_clear(buf, 0xab);
    for (int i = 0; i < 40; ++i) {
        ASSERT_EQ(static_cast<uint8_t *>(t->data)[i], 0xab);
    }
    const std::vector<float> v = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    wsp_ggml_backend_tensor_set(t, v.data(), 0, 40);
    wsp_ggml_backend_tensor_set(t, v.data(), 8, 12); // 3 floats at element 2
    std::vector<float> got(10, -1.0f);
    wsp_ggml_backend_tensor_get(t, got.data(), 0, 40);
    EXPECT_EQ(got, (std::vector<float>{ 1, 2, 1, 2, 3, 6, 7, 8, 9, 10 }));
    wsp_ggml_backend_tensor_memset(t, 0, 36, 4);
    EXPECT_EQ(wsp_ggml_get_f32_1d(t, 9), 0.0f);

    const std::vector<uint8_t> before(static_cast<uint8_t *>(t->data), static_cast<uint8_t *>(t->data) + 40);
    LogCapture                 log;
    wsp_ggml_backend_tensor_set(t, v.data(), 4, 40); // one float past the end
    wsp_ggml_backend_tensor_set(t, v.data(), 44, 0); // nothing to write: no message
    wsp_ggml_backend_tensor_memset(t, 7, 0, 41);
    wsp_ggml_backend_tensor_set(t, v.data(), SIZE_MAX - 2, 8); // offset + size would wrap around
    std::vector<float> dst(12, -5.0f);
    wsp_ggml_backend_tensor_get(t, dst.data(), 8, 36);
    wsp_ggml_backend_tensor_set(nob, v.data(), 0, 4);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 5) << log.text();
    EXPECT_TRUE(log.contains("out of the bounds")) << log.text();
    EXPECT_TRUE(log.contains("not allocated")) << log.text();
    EXPECT_EQ(std::vector<uint8_t>(static_cast<uint8_t *>(t->data), static_cast<uint8_t *>(t->data) + 40), before);
    EXPECT_EQ(dst, std::vector<float>(12, -5.0f));
    for (int i = 0; i < 40; ++i) {
        ASSERT_EQ(static_cast<uint8_t *>(u->data)[i], 0xab) << "the neighbour was written";
    }

    wsp_ggml_backend_tensor_copy(t, u);
    EXPECT_EQ(std::memcmp(t->data, u->data, 40), 0);
    wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(buf), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_type(buf), wsp_ggml_backend_cpu_buffer_type());
    wsp_ggml_backend_buffer_reset(buf);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);

    // zero-sized buffers are valid and hold nothing
    wsp_ggml_backend_buffer_t empty = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 0);
    ASSERT_NE(empty, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(empty), 0u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_base(empty), nullptr);
    wsp_ggml_backend_buffer_clear(empty, 1);
    wsp_ggml_backend_buffer_free(empty);
}

} // namespace
} // namespace wsp::test
