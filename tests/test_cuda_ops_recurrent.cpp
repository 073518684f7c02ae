// The CUDA kernels of the recurrent ops against the CPU backend, node by node on every CUDA
// device: SSM_CONV (contiguous, transposed, padded), SSM_SCAN (strided B and C, dt on both sides
// of softplus's 20), RWKV_WKV6, RWKV_WKV7 and GATED_LINEAR_ATTN (head sizes 1, 5, 64, several
// heads and sequences). What CUDA declines (head size above 64, the custom ops) runs on the CPU
// under the scheduler, next to CUDA nodes, with the same results. Skipped without a GPU.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// F32 recurrences of up to a few hundred terms, summed in another order (and with fused
// multiply-adds) on the device: relative differences ~1e-6
constexpr double TOL = 1e-9;

using Build = std::function<std::vector<wsp_ggml_tensor *>(wsp_ggml_context *)>;

// an input whose name picks its range: "decay" (0.5, 1), "small" +-0.1, "dt" (-4, 24),
// "A" (-2, -0.05), anything else +-1
wsp_ggml_tensor * input(wsp_ggml_context * ctx, const char * name, std::vector<int64_t> ne) {
    ne.resize(4, 1);
    wsp_ggml_tensor * t = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 4, ne.data());
    wsp_ggml_set_name(t, name);
    wsp_ggml_set_input(t);
    return t;
}

void fill_inputs_by_name(wsp_ggml_context * ctx) {
    uint32_t seed = 7;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (!(t->flags & WSP_GGML_TENSOR_FLAG_INPUT)) {
            continue;
        }
        const std::string name = wsp_ggml_get_name(t);
        float             lo = -1.0f, hi = 1.0f;
        if (name == "decay") {
            lo = 0.5f;
        } else if (name == "small") {
            lo = -0.1f, hi = 0.1f;
        } else if (name == "dt") {
            lo = -4.0f, hi = 24.0f;
        } else if (name == "A") {
            lo = -2.0f, hi = -0.05f;
        }
        set_values(t, random_values((size_t) wsp_ggml_nelements(t), ++seed, lo, hi));
    }
}

// every node of build's graph on each CUDA device (which must support it) against the CPU
void compare(const Build & build) {
    for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
        Graph                          g(1024);
        std::vector<wsp_ggml_tensor *> outs = build(g.ctx());
        g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
        fill_inputs_by_name(g.ctx());
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        for (wsp_ggml_tensor * o : outs) {
            EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, o)) << wsp_ggml_op_desc(o) << " " << shape_str(o);
        }
        struct Ctx {
            int checked = 0;
        } c;
        const bool ok = wsp_ggml_backend_compare_graph_backend(
            g.backend(), cuda, g.graph(),
            [](int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * ud) {
                if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1) || t1->op == WSP_GGML_OP_VIEW ||
                    t1->op == WSP_GGML_OP_PERMUTE) {
                    return true;
                }
                const std::vector<float> cpu = get_values(t1), gpu = device_values(t2);
                EXPECT_LT(nmse(gpu, cpu), TOL) << "node " << i << " " << wsp_ggml_op_desc(t1) << " " << shape_str(t1);
                ++static_cast<Ctx *>(ud)->checked;
                return true;
            },
            &c);
        EXPECT_TRUE(ok);
        EXPECT_EQ(c.checked, (int) outs.size());
        wsp_ggml_backend_free(cuda);
    }
}

TEST(CudaRecurrent, SsmConv) {
    REQUIRE_GPU();
    struct Case {
        int64_t d_conv, d_inner, n_t, n_s;
    };
    for (const Case & c : { Case{ 4, 37, 5, 3 }, Case{ 1, 1, 1, 1 }, Case{ 4, 300, 1, 2 }, Case{ 3, 7, 11, 1 } }) {
        SCOPED_TRACE(::testing::Message() << c.d_conv << " " << c.d_inner << " " << c.n_t << " " << c.n_s);
        compare([&](wsp_ggml_context * ctx) {
            const int64_t     L   = c.d_conv - 1 + c.n_t;
            wsp_ggml_tensor * w   = input(ctx, "w", { c.d_conv, c.d_inner });
            wsp_ggml_tensor * tr  = wsp_ggml_permute(ctx, input(ctx, "x", { c.d_inner, L, c.n_s }), 1, 0, 2, 3);
            wsp_ggml_tensor * big = input(ctx, "x", { L + 3, c.d_inner, c.n_s });
            wsp_ggml_tensor * pad =
                wsp_ggml_view_3d(ctx, big, L, c.d_inner, c.n_s, big->nb[1], big->nb[2], sizeof(float));
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_ssm_conv(ctx, input(ctx, "x", { L, c.d_inner, c.n_s }), w),
                                                   wsp_ggml_ssm_conv(ctx, tr, w), wsp_ggml_ssm_conv(ctx, pad, w) };
        });
    }
}

TEST(CudaRecurrent, SsmScan) {
    REQUIRE_GPU();
    struct Case {
        int64_t d_state, d_inner, n_t, n_s;
    };
    for (const Case & c : { Case{ 16, 64, 7, 2 }, Case{ 16, 131, 5, 3 }, Case{ 1, 1, 1, 1 }, Case{ 128, 5, 3, 1 },
                            Case{ 5, 31, 1, 2 } }) {
        SCOPED_TRACE(::testing::Message() << c.d_state << " " << c.d_inner << " " << c.n_t << " " << c.n_s);
        compare([&](wsp_ggml_context * ctx) {
            auto bc = [&]() {
                wsp_ggml_tensor * big = input(ctx, "bc", { c.d_state + 5, c.n_t, c.n_s });
                return wsp_ggml_view_3d(ctx, big, c.d_state, c.n_t, c.n_s, big->nb[1], big->nb[2], 2 * sizeof(float));
            };
            wsp_ggml_tensor * B = bc();
            wsp_ggml_tensor * C = bc();
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_ssm_scan(
                ctx, input(ctx, "s", { c.d_state, c.d_inner, c.n_s }), input(ctx, "x", { c.d_inner, c.n_t, c.n_s }),
                input(ctx, "dt", { c.d_inner, c.n_t, c.n_s }), input(ctx, "A", { c.d_state, c.d_inner }), B, C) };
        });
    }
}

enum class Rec { wkv6, wkv7, gla };

// the node over new leaves of `leaves` (ctx where NULL), each passed through a node (scale by 1)
// first with `through`
wsp_ggml_tensor * recurrent(wsp_ggml_context * ctx, Rec op, int64_t S, int64_t H, int64_t T, int64_t n_seqs,
                            wsp_ggml_context * leaves = nullptr, bool through = false) {
    leaves    = leaves != nullptr ? leaves : ctx;
    auto leaf = [&](const char * name, std::vector<int64_t> ne) {
        wsp_ggml_tensor * t = input(leaves, name, std::move(ne));
        return through ? wsp_ggml_scale(ctx, t, 1.0f) : t;
    };
    auto              tok   = [&](const char * name) { return leaf(name, { S, H, T }); };
    wsp_ggml_tensor * state = leaf("state", { S * S * H, n_seqs });
    switch (op) {
        case Rec::wkv6:
            return wsp_ggml_rwkv_wkv6(ctx, tok("k"), tok("v"), tok("r"), leaf("tf", { S, H }), tok("decay"), state);
        case Rec::wkv7:
            return wsp_ggml_rwkv_wkv7(ctx, tok("r"), tok("decay"), tok("k"), tok("v"), tok("small"), tok("small"),
                                      state);
        default: return wsp_ggml_gated_linear_attn(ctx, tok("k"), tok("v"), tok("q"), tok("decay"), state, 0.125f);
    }
}

TEST(CudaRecurrent, RwkvAndGatedLinearAttention) {
    REQUIRE_GPU();
    struct Case {
        int64_t S, H, per_seq, n_seqs;
    };
    for (Rec op : { Rec::wkv6, Rec::wkv7, Rec::gla }) {
        for (const Case & c : { Case{ 64, 3, 4, 2 }, Case{ 1, 1, 1, 1 }, Case{ 5, 3, 3, 1 }, Case{ 64, 1, 0, 2 } }) {
            SCOPED_TRACE(::testing::Message()
                         << (int) op << " S " << c.S << " H " << c.H << " per_seq " << c.per_seq << " " << c.n_seqs);
            compare([&](wsp_ggml_context * ctx) {
                return std::vector<wsp_ggml_tensor *>{ recurrent(ctx, op, c.S, c.H, c.per_seq * c.n_seqs, c.n_seqs) };
            });
        }
    }
}

// dst = a * b (the custom ops read host memory: the scheduler must have put them on the CPU)
void mul2(wsp_ggml_tensor * dst, const wsp_ggml_tensor * a, const wsp_ggml_tensor * b, int ith, int nth, void *) {
    const int64_t n = wsp_ggml_nelements(dst);
    for (int64_t i = ith; i < n; i += nth) {
        static_cast<float *>(dst->data)[i] =
            static_cast<const float *>(a->data)[i] * static_cast<const float *>(b->data)[i];
    }
}

// dst (I32 [1]) = the count of src[0]'s positive values
void count_positive(wsp_ggml_tensor * dst, int ith, int nth, void *) {
    if (ith != 0) {
        return;
    }
    int32_t       n = 0;
    const float * x = static_cast<const float *>(dst->src[0]->data);
    for (int64_t i = 0; i < wsp_ggml_nelements(dst->src[0]); ++i) {
        n += x[i] > 0.0f;
    }
    *static_cast<int32_t *>(dst->data) = n;
}

TEST(CudaRecurrent, SupportedIsExact) {
    REQUIRE_GPU();
    wsp_ggml_context * ctx  = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(0);
    for (Rec op : { Rec::wkv6, Rec::wkv7, Rec::gla }) {
        EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, recurrent(ctx, op, 64, 2, 2, 1)));
        EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, recurrent(ctx, op, 128, 2, 2, 1))); // head size above 64
    }
    wsp_ggml_tensor * s = input(ctx, "s", { 129, 4, 1 });
    wsp_ggml_tensor * B = input(ctx, "B", { 129, 2, 1 });
    EXPECT_FALSE(wsp_ggml_backend_supports_op( // d_state above 128
        cuda, wsp_ggml_ssm_scan(ctx, s, input(ctx, "x", { 4, 2, 1 }), input(ctx, "dt", { 4, 2, 1 }),
                                input(ctx, "A", { 129, 4 }), B, B)));
    wsp_ggml_tensor * a = input(ctx, "a", { 8 });
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_map_custom2(ctx, a, a, mul2, 1, nullptr)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(
        cuda, wsp_ggml_custom_4d(ctx, WSP_GGML_TYPE_I32, 1, 1, 1, 1, &a, 1, count_positive, 1, nullptr)));
    wsp_ggml_backend_free(cuda);
    wsp_ggml_free(ctx);
}

// ---- what CUDA declines runs on the CPU under the scheduler

struct Mixed {
    wsp_ggml_tensor *a, *b, *scaled, *custom, *added, *wide_wkv, *narrow_wkv, *counted;
};

// the leaves are made in `leaves`, the nodes in ctx
Mixed build_mixed(wsp_ggml_context * ctx, wsp_ggml_context * leaves) {
    Mixed m;
    m.a      = input(leaves, "a", { 64, 6 });
    m.b      = input(leaves, "b", { 64, 6 });
    m.scaled = wsp_ggml_scale(ctx, m.a, 2.0f); // CUDA
    // the CPU cannot read CUDA memory: what falls back to it reads nodes, which the scheduler copies
    m.custom     = wsp_ggml_map_custom2(ctx, m.scaled, wsp_ggml_scale(ctx, m.b, 1.0f), mul2, WSP_GGML_N_TASKS_MAX,
                                        nullptr);                         // CPU
    m.added      = wsp_ggml_add(ctx, m.custom, m.a);                      // CUDA
    m.wide_wkv   = recurrent(ctx, Rec::wkv6, 128, 1, 3, 1, leaves, true); // CPU (S > 64)
    m.narrow_wkv = recurrent(ctx, Rec::gla, 32, 2, 3, 1, leaves);         // CUDA
    wsp_ggml_tensor * args[] = { m.added };
    m.counted = wsp_ggml_custom_4d(ctx, WSP_GGML_TYPE_I32, 1, 1, 1, 1, args, 1, count_positive, 1, nullptr); // CPU
    return m;
}

TEST(CudaRecurrent, DeclinedNodesFallBackToTheCpu) {
    REQUIRE_GPU();
    // the reference: everything on the CPU
    Graph ref(256);
    Mixed r = build_mixed(ref.ctx(), ref.ctx());
    ref.build(r.added, { r.wide_wkv, r.narrow_wkv, r.counted });
    fill_inputs_by_name(ref.ctx());
    ASSERT_EQ(ref.run(2), WSP_GGML_STATUS_SUCCESS);

    std::vector<wsp_ggml_backend_t> backends = { wsp_ggml_backend_cuda_init(0), wsp_ggml_backend_cpu_init() };
    wsp_ggml_backend_sched_t        sched =
        wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 256, false, true);
    wsp_ggml_context * ctx =
        wsp_ggml_init({ 256 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    // the leaves live in CUDA memory (as a model's weights and state would), so the scheduler
    // starts from CUDA and must move what CUDA declines to the CPU
    wsp_ggml_context *        leaves = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    Mixed                     m      = build_mixed(ctx, leaves);
    wsp_ggml_backend_buffer_t buf    = wsp_ggml_backend_alloc_ctx_tensors(leaves, backends[0]);
    ASSERT_NE(buf, nullptr);
    // the same values as the reference's inputs, by creation order
    for (wsp_ggml_tensor *t = wsp_ggml_get_first_tensor(leaves), *u = wsp_ggml_get_first_tensor(ref.ctx());
         t != nullptr; t = wsp_ggml_get_next_tensor(leaves, t), u = wsp_ggml_get_next_tensor(ref.ctx(), u)) {
        while (!(u->flags & WSP_GGML_TENSOR_FLAG_INPUT)) {
            u = wsp_ggml_get_next_tensor(ref.ctx(), u);
        }
        const std::vector<float> v = get_values(u);
        wsp_ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
        t->flags &= ~WSP_GGML_TENSOR_FLAG_INPUT;
    }
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    for (wsp_ggml_tensor * out : { m.added, m.wide_wkv, m.narrow_wkv, m.counted }) {
        wsp_ggml_set_output(out);
        wsp_ggml_build_forward_expand(g, out);
    }
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(sched, g));
    ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(sched, g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, m.scaled), backends[0]);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, m.custom), backends[1]);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, m.wide_wkv), backends[1]);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, m.narrow_wkv), backends[0]);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(sched, m.counted), backends[1]);
    EXPECT_LT(nmse(device_values(m.added), get_values(r.added)), TOL);
    EXPECT_LT(nmse(device_values(m.wide_wkv), get_values(r.wide_wkv)), 1e-12);
    EXPECT_LT(nmse(device_values(m.narrow_wkv), get_values(r.narrow_wkv)), TOL);
    int32_t count = -1, want = -2;
    wsp_ggml_backend_tensor_get(m.counted, &count, 0, sizeof(count));
    std::memcpy(&want, r.counted->data, sizeof(want));
    EXPECT_EQ(count, want);
    EXPECT_GT(count, 0);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(leaves);
    wsp_ggml_free(ctx);
    for (wsp_ggml_backend_t b : backends) {
        wsp_ggml_backend_free(b);
    }
}

} // namespace
} // namespace wsp::test
