// MUL_MAT_ID and OUT_PROD on the CPU backend against double-precision references (float and
// quantized weights, broadcast b, strided and transposed operands, 1 to 3 threads), an expert id
// out of range, what the CPU claims to support, and the builders' shape checks of the whole
// convolution family (each abort in a child process).

#include "ggml-backend.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace wsp::test {
namespace {

std::vector<int32_t> random_ids(int64_t n_used, int64_t n_tok, int64_t n_as, uint32_t seed) {
    std::mt19937         rng(seed);
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < n_tok; ++t) {
        // distinct experts per token, as a router picks them
        std::vector<int32_t> all((size_t) n_as);
        for (int64_t e = 0; e < n_as; ++e) {
            all[(size_t) e] = (int32_t) e;
        }
        std::shuffle(all.begin(), all.end(), rng);
        for (int64_t e = 0; e < n_used; ++e) {
            ids.push_back(all[(size_t) (e % n_as)]);
        }
    }
    return ids;
}

// dst[:, e, t] = as[:, :, ids[e, t]] x b[:, e % n_b, t]
std::vector<double> ref_mul_mat_id(const std::vector<float> & as, const std::vector<float> & b,
                                   const std::vector<int32_t> & ids, int64_t K, int64_t N, int64_t n_as, int64_t n_b,
                                   int64_t n_used, int64_t n_tok) {
    std::vector<double> out;
    for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t e = 0; e < n_used; ++e) {
            const int32_t ex = ids[(size_t) (t * n_used + e)];
            for (int64_t i = 0; i < N; ++i) {
                double acc = 0.0;
                if (ex >= 0 && ex < n_as) {
                    for (int64_t k = 0; k < K; ++k) {
                        acc += (double) as[(size_t) ((ex * N + i) * K + k)] * b[(size_t) ((t * n_b + e % n_b) * K + k)];
                    }
                }
                out.push_back(acc);
            }
        }
    }
    return out;
}

struct MmidCase {
    int64_t K, N, n_as, n_used, n_tok;
    bool    broadcast_b; // b [K, 1, n_tok]
};

const MmidCase MMID_CASES[] = {
    { 64, 17, 4, 2, 5, false },  { 96, 33, 8, 3, 7, true }, { 32, 1, 1, 1, 1, false },
    { 160, 40, 6, 6, 3, false }, { 64, 5, 3, 2, 37, true },
};

TEST(MulMatId, MatchesPerExpertProducts) {
    std::vector<wsp_ggml_type> types = float_types();
    for (wsp_ggml_type q : quant_types()) {
        types.push_back(q);
    }
    for (const MmidCase & c : MMID_CASES) {
        for (wsp_ggml_type at : types) {
            for (wsp_ggml_type bt : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
                const int64_t     n_b = c.broadcast_b ? 1 : c.n_used;
                const bool        fl  = at == WSP_GGML_TYPE_F32 || at == WSP_GGML_TYPE_F16 || at == WSP_GGML_TYPE_BF16;
                Graph             g;
                wsp_ggml_tensor * as =
                    make_operand(g, at, { c.K, c.N, c.n_as }, fl ? Layout::Strided : Layout::Contiguous);
                wsp_ggml_tensor * b   = make_operand(g, bt, { c.K, n_b, c.n_tok }, Layout::Strided);
                wsp_ggml_tensor * ids = g.input(WSP_GGML_TYPE_I32, { c.n_used, c.n_tok });
                wsp_ggml_tensor * out = wsp_ggml_mul_mat_id(g.ctx(), as, b, ids);
                ASSERT_EQ(out->ne[0], c.N);
                ASSERT_EQ(out->ne[1], c.n_used);
                ASSERT_EQ(out->ne[2], c.n_tok);
                g.build(out);
                fill_inputs(g, 23);
                const std::vector<int32_t> idv = random_ids(c.n_used, c.n_tok, c.n_as, 29);
                set_i32(ids, idv);
                const auto ref =
                    ref_mul_mat_id(get_values(as), get_values(b), idv, c.K, c.N, c.n_as, n_b, c.n_used, c.n_tok);
                for (int n_threads : { 1, 2, 3 }) {
                    ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                    EXPECT_LT(nmse(get_values(out), ref), 1e-10)
                        << "mul_mat_id " << shape_str(as) << " x " << shape_str(b) << " threads " << n_threads;
                }
            }
        }
    }
}

TEST(MulMatId, ExpertOutOfRangeGivesZerosAndALoggedError) {
    Graph             g;
    wsp_ggml_tensor * as  = g.input(WSP_GGML_TYPE_F32, { 8, 3, 2 });
    wsp_ggml_tensor * b   = g.input(WSP_GGML_TYPE_F32, { 8, 2, 2 });
    wsp_ggml_tensor * ids = g.input(WSP_GGML_TYPE_I32, { 2, 2 });
    wsp_ggml_tensor * out = wsp_ggml_mul_mat_id(g.ctx(), as, b, ids);
    g.build(out);
    fill_inputs(g, 31);
    const std::vector<int32_t> idv = { 1, 7, -1, 0 };
    set_i32(ids, idv);
    LogCapture log;
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_TRUE(log.contains("expert id")) << log.text();
    const auto ref = ref_mul_mat_id(get_values(as), get_values(b), idv, 8, 3, 2, 2, 2, 2);
    EXPECT_TRUE(all_close(get_values(out), ref, 1e-6, 1e-6, "mul_mat_id with invalid ids"));
}

// dst[i, j, i2, i3] = sum_l a[i, l, i2 / r2, i3 / r3] * b[j, l, i2, i3]
std::vector<double> ref_out_prod(const wsp_ggml_tensor * a, const wsp_ggml_tensor * b) {
    const std::vector<float> va = get_values(a), vb = get_values(b);
    const int64_t            m = a->ne[0], k = a->ne[1], n = b->ne[0];
    std::vector<double>      out;
    for (int64_t i3 = 0; i3 < b->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < b->ne[2]; ++i2) {
            const int64_t a2 = i2 / (b->ne[2] / a->ne[2]), a3 = i3 / (b->ne[3] / a->ne[3]);
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < m; ++i) {
                    double acc = 0.0;
                    for (int64_t l = 0; l < k; ++l) {
                        acc += (double) va[(size_t) (((a3 * a->ne[2] + a2) * k + l) * m + i)] *
                               vb[(size_t) (((i3 * b->ne[2] + i2) * k + l) * n + j)];
                    }
                    out.push_back(acc);
                }
            }
        }
    }
    return out;
}

TEST(OutProd, MatchesSumOfOuterProducts) {
    struct Case {
        std::vector<int64_t> a, b;
    };
    const Case cases[] = {
        { { 7, 5 }, { 3, 5 } },   { { 64, 33, 2, 1 }, { 17, 33, 4, 3 } },
        { { 1, 1 }, { 1, 1 } },   { { 32, 9, 1, 2 }, { 6, 9, 3, 2 } },
        { { 37, 1 }, { 41, 1 } }, // k = 1: one outer product
    };
    for (const Case & c : cases) {
        for (wsp_ggml_type at :
             { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_1 }) {
            if (!(at == WSP_GGML_TYPE_F32 || at == WSP_GGML_TYPE_F16 || at == WSP_GGML_TYPE_BF16) && c.a[0] % 32 != 0) {
                continue;
            }
            for (Layout lb : { Layout::Contiguous, Layout::Permuted }) {
                const bool        fl = at == WSP_GGML_TYPE_F32 || at == WSP_GGML_TYPE_F16 || at == WSP_GGML_TYPE_BF16;
                Graph             g;
                wsp_ggml_tensor * a   = make_operand(g, at, c.a, fl ? Layout::Strided : Layout::Contiguous);
                wsp_ggml_tensor * b   = make_operand(g, WSP_GGML_TYPE_F32, c.b, lb);
                wsp_ggml_tensor * out = wsp_ggml_out_prod(g.ctx(), a, b);
                g.build(out);
                fill_inputs(g, 37);
                const auto ref = ref_out_prod(a, b);
                for (int n_threads : { 1, 2, 3 }) {
                    ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                    EXPECT_LT(nmse(get_values(out), ref), 1e-10)
                        << "out_prod " << shape_str(a) << " x " << shape_str(b) << " threads " << n_threads;
                }
            }
        }
    }
}

TEST(ConvFamilySupport, CpuClaimsWhatItComputes) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    wsp_ggml_context * ctx = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 32, 4, 3);
    wsp_ggml_tensor *  q   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_Q4_0, 32, 4, 3);
    wsp_ggml_tensor *  ids = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_I32, 2, 3);
    wsp_ggml_tensor *  b   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 32, 2, 3);
    wsp_ggml_tensor *  bq  = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_Q8_0, 32, 2, 3);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_mul_mat_id(ctx, q, b, ids)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_mul_mat_id(ctx, x, bq, ids))); // quantized activations
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_pool_2d(ctx, x, WSP_GGML_OP_POOL_AVG, 2, 2, 2, 2, 0, 0)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_pool_1d(ctx, q, WSP_GGML_OP_POOL_MAX, 2, 2, 0)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_out_prod(ctx, q, x)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cpu, wsp_ggml_out_prod(ctx, x, q))); // quantized b
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cpu);
}

class ConvDeath : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(wsp_ggml_type type, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        return wsp_ggml_new_tensor(ctx_, type, 4, ne.data());
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(ConvDeath, BuildersRejectBadShapes) {
    wsp_ggml_tensor * k = t(WSP_GGML_TYPE_F16, { 3, 4, 2 });
    EXPECT_DEATH(wsp_ggml_conv_transpose_1d(ctx_, k, t(WSP_GGML_TYPE_F32, { 9, 2 }), 1, 1, 1),
                 "wsp_ggml_conv_transpose_1d: .*p0 == 0");
    EXPECT_DEATH(wsp_ggml_conv_transpose_1d(ctx_, k, t(WSP_GGML_TYPE_F32, { 9, 3 }), 1, 0, 1),
                 "wsp_ggml_conv_transpose_1d: .*a->ne\\[2\\] == b->ne\\[1\\]");
    EXPECT_DEATH(
        wsp_ggml_conv_transpose_2d_p0(ctx_, t(WSP_GGML_TYPE_F16, { 3, 3, 2, 5 }), t(WSP_GGML_TYPE_F32, { 8, 8, 4 }), 2),
        "wsp_ggml_conv_transpose_2d_p0: .*a->ne\\[3\\] == b->ne\\[2\\]");
    EXPECT_DEATH(wsp_ggml_conv_2d_dw_direct(ctx_, t(WSP_GGML_TYPE_F32, { 3, 3, 2, 4 }),
                                            t(WSP_GGML_TYPE_F32, { 8, 8, 4 }), 1, 1, 1, 1, 1, 1),
                 "wsp_ggml_conv_2d_dw_direct: .*a->ne\\[2\\] == 1");
    EXPECT_DEATH(wsp_ggml_conv_2d(ctx_, t(WSP_GGML_TYPE_F16, { 3, 3, 2, 4 }), t(WSP_GGML_TYPE_F32, { 8, 8, 3 }), 1, 1,
                                  0, 0, 1, 1),
                 "wsp_ggml_conv_2d: .*a->ne\\[2\\] == b->ne\\[2\\]");
    EXPECT_DEATH(wsp_ggml_conv_1d_dw(ctx_, t(WSP_GGML_TYPE_F32, { 3, 1, 4 }), t(WSP_GGML_TYPE_F32, { 9, 5 }), 1, 1, 1),
                 "wsp_ggml_conv_1d_dw: .*a->ne\\[2\\] == b->ne\\[1\\]");
    EXPECT_DEATH(wsp_ggml_pool_1d(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2 }), WSP_GGML_OP_POOL_MAX, 7, 1, 1),
                 "wsp_ggml_pool_1d: a window of 7 does not fit");
    EXPECT_DEATH(wsp_ggml_pool_2d(ctx_, t(WSP_GGML_TYPE_F32, { 4, 4 }), WSP_GGML_OP_POOL_AVG, 2, 0, 1, 1, 0, 0),
                 "wsp_ggml_pool_2d: .*k1 > 0");
}

TEST_F(ConvDeath, ProductsRejectBadShapes) {
    wsp_ggml_tensor * as  = t(WSP_GGML_TYPE_F32, { 16, 8, 4 });
    wsp_ggml_tensor * b   = t(WSP_GGML_TYPE_F32, { 16, 2, 5 });
    wsp_ggml_tensor * ids = t(WSP_GGML_TYPE_I32, { 2, 5 });
    EXPECT_DEATH(wsp_ggml_mul_mat_id(ctx_, as, b, t(WSP_GGML_TYPE_F32, { 2, 5 })),
                 "wsp_ggml_mul_mat_id: .*ids->type == WSP_GGML_TYPE_I32");
    EXPECT_DEATH(wsp_ggml_mul_mat_id(ctx_, as, t(WSP_GGML_TYPE_F32, { 16, 2, 4 }), ids),
                 "wsp_ggml_mul_mat_id: .*ids->ne\\[1\\] == b->ne\\[2\\]");
    EXPECT_DEATH(wsp_ggml_mul_mat_id(ctx_, as, t(WSP_GGML_TYPE_F32, { 16, 3, 5 }), t(WSP_GGML_TYPE_I32, { 2, 5 })),
                 "wsp_ggml_mul_mat_id: .*ids->ne\\[0\\] % b->ne\\[1\\] == 0");
    EXPECT_DEATH(wsp_ggml_mul_mat_id(ctx_, as, t(WSP_GGML_TYPE_F32, { 15, 2, 5 }), ids),
                 "wsp_ggml_mul_mat_id: .*as->ne\\[0\\] == b->ne\\[0\\]");
    EXPECT_DEATH(wsp_ggml_out_prod(ctx_, t(WSP_GGML_TYPE_F32, { 4, 3 }), t(WSP_GGML_TYPE_F32, { 5, 2 })),
                 "wsp_ggml_out_prod: .*a->ne\\[1\\] == b->ne\\[1\\]");
    EXPECT_DEATH(wsp_ggml_out_prod(ctx_, t(WSP_GGML_TYPE_F32, { 4, 3, 2 }), t(WSP_GGML_TYPE_F32, { 5, 3, 3 })),
                 "wsp_ggml_out_prod: .*b->ne\\[2\\] % a->ne\\[2\\] == 0");
}

} // namespace
} // namespace wsp::test
