// The CUDA kernels of the convolution family against the CPU backend, node by node on every CUDA
// device: POOL_1D / POOL_2D (padding, windows in the padding), CONV_2D_DW (channels first and
// innermost), CONV_TRANSPOSE_1D / _2D, MUL_MAT_ID (float and quantized experts, broadcast b, an
// id out of range), OUT_PROD (broadcast, transposed b), and the im2col compositions end to end
// (conv_1d_1s, conv_1d_dw, conv_2d, conv_2d_dw). Without a GPU every case is skipped.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// F32 results agree to an NMSE of 1e-10 (sums in another order, FMA contraction: relative
// differences of ~1e-7); F16 / BF16 results are the same float rounded on both sides (one step of
// the type where the floats straddle a rounding boundary). Pooling is compared element by
// element: a window in the padding gives -FLT_MAX, which would swamp an NMSE.
constexpr double F32_TOL = 1e-10;

using Build = std::function<wsp_ggml_tensor *(wsp_ggml_context *)>;
// sets an input tensor and returns true, or returns false to leave it to the default fill
using Fill = std::function<bool(wsp_ggml_tensor *, uint32_t seed)>;

struct CheckCtx {
    int checked;
};

bool check_node(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * c = static_cast<CheckCtx *>(user_data);
    if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
        return true;
    }
    const std::string        what = "node " + std::to_string(i) + " " + wsp_ggml_op_desc(t1) + " " + shape_str(t1);
    const std::vector<float> cpu = get_values(t1), gpu = device_values(t2);
    if (t1->op == WSP_GGML_OP_POOL_1D || t1->op == WSP_GGML_OP_POOL_2D) {
        EXPECT_TRUE(all_close(gpu, std::vector<double>(cpu.begin(), cpu.end()), 1e-6, 1e-6, what));
    } else {
        const double tol = t1->type == WSP_GGML_TYPE_F32 ? F32_TOL : std::max(F32_TOL, nmse_bound(t1->type));
        EXPECT_LT(nmse(gpu, cpu), tol) << what;
    }
    ++c->checked;
    return true;
}

// every node of build's graph computed on each CUDA device and on the CPU, then compared
void compare(const Build & build, const Fill & fill = nullptr) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph             g(1024);
        wsp_ggml_tensor * out = build(g.ctx());
        g.build(out);
        uint32_t seed = 11;
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(g.ctx()); t; t = wsp_ggml_get_next_tensor(g.ctx(), t)) {
            if (!(t->flags & WSP_GGML_TENSOR_FLAG_INPUT) || (fill && fill(t, ++seed)) ||
                fill_random_blocks(t, ++seed)) {
                continue;
            }
            set_values(t, random_values((size_t) wsp_ggml_nelements(t), ++seed, -2.0f, 2.0f));
        }
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, out)) << wsp_ggml_op_desc(out) << " " << shape_str(out);
        CheckCtx c{ 0 };
        EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_node, &c));
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

wsp_ggml_tensor * input(wsp_ggml_context * ctx, wsp_ggml_type type, std::vector<int64_t> ne) {
    return operand(ctx, type, std::move(ne), Layout::Contiguous);
}

TEST(CudaConv, Pool1d) {
    REQUIRE_GPU();
    struct Case {
        std::vector<int64_t> ne;
        int                  k, s, p;
    };
    const Case cases[] = { { { 10, 3 }, 2, 2, 0 },
                           { { 37, 5, 2 }, 3, 1, 1 },
                           { { 1, 4 }, 1, 1, 0 },
                           { { 6, 2 }, 2, 1, 2 },
                           { { 300, 7 }, 5, 3, 2 } };
    size_t     ci      = 0;
    for (const Case & c : cases) {
        ++ci;
        for (size_t ti = 0; ti < float_types().size(); ++ti) {
            const wsp_ggml_type t = float_types()[ti];
            const Layout        l = LAYOUTS[(ci + ti) % 3]; // each type meets each layout over the cases
            for (wsp_ggml_op_pool op : { WSP_GGML_OP_POOL_MAX, WSP_GGML_OP_POOL_AVG }) {
                compare([&](wsp_ggml_context * ctx) {
                    return wsp_ggml_pool_1d(ctx, operand(ctx, t, c.ne, l), op, c.k, c.s, c.p);
                });
            }
        }
    }
}

TEST(CudaConv, Pool2d) {
    REQUIRE_GPU();
    struct Case {
        std::vector<int64_t> ne;
        int                  k0, k1, s0, s1;
        float                p0, p1;
    };
    const Case cases[] = { { { 8, 6, 3 }, 2, 2, 2, 2, 0, 0 },   { { 9, 7, 2, 2 }, 3, 3, 1, 1, 1, 1 },
                           { { 13, 5 }, 3, 1, 2, 1, 1, 0 },     { { 1, 1, 5 }, 1, 1, 1, 1, 0, 0 },
                           { { 33, 17, 4 }, 3, 2, 3, 2, 2, 1 }, { { 4, 4 }, 2, 2, 1, 1, 2, 2 } };
    size_t     ci      = 0;
    for (const Case & c : cases) {
        ++ci;
        for (size_t ti = 0; ti < float_types().size(); ++ti) {
            const wsp_ggml_type t = float_types()[ti];
            const Layout        l = LAYOUTS[(ci + ti) % 3]; // each type meets each layout over the cases
            for (wsp_ggml_op_pool op : { WSP_GGML_OP_POOL_MAX, WSP_GGML_OP_POOL_AVG }) {
                compare([&](wsp_ggml_context * ctx) {
                    return wsp_ggml_pool_2d(ctx, operand(ctx, t, c.ne, l), op, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1);
                });
            }
        }
    }
}

TEST(CudaConv, Conv2dDwDirect) {
    REQUIRE_GPU();
    struct Case {
        int64_t KW, KH, C, W, H, N;
        int     s0, s1, p0, p1, d0, d1;
    };
    const Case cases[] = { { 3, 3, 4, 8, 6, 1, 1, 1, 1, 1, 1, 1 },
                           { 5, 3, 17, 11, 9, 2, 2, 1, 2, 0, 1, 2 },
                           { 1, 1, 3, 5, 4, 1, 1, 1, 0, 0, 1, 1 },
                           { 2, 4, 33, 7, 13, 1, 3, 2, 1, 3, 2, 1 },
                           { 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 } };
    for (const Case & c : cases) {
        for (wsp_ggml_type t : float_types()) {
            for (bool channels_last : { false, true }) {
                compare([&](wsp_ggml_context * ctx) {
                    wsp_ggml_tensor * k =
                        input(ctx, t == WSP_GGML_TYPE_BF16 ? WSP_GGML_TYPE_F32 : t, { c.KW, c.KH, 1, c.C });
                    wsp_ggml_tensor * x = channels_last
                                              ? wsp_ggml_permute(ctx, input(ctx, t, { c.C, c.W, c.H, c.N }), 2, 0, 1, 3)
                                              : input(ctx, t, { c.W, c.H, c.C, c.N });
                    return wsp_ggml_conv_2d_dw_direct(ctx, k, x, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
                });
            }
        }
    }
}

TEST(CudaConv, ConvTranspose1d) {
    REQUIRE_GPU();
    struct Case {
        int64_t K, OC, IC, L;
        int     s;
    };
    const Case cases[] = {
        { 3, 2, 4, 7, 1 }, { 4, 5, 3, 9, 2 }, { 2, 3, 2, 5, 3 }, { 1, 1, 1, 1, 1 }, { 16, 7, 33, 13, 8 }
    };
    for (const Case & c : cases) {
        for (wsp_ggml_type t : float_types()) {
            for (Layout l : { Layout::Contiguous, Layout::Permuted }) {
                compare([&](wsp_ggml_context * ctx) {
                    return wsp_ggml_conv_transpose_1d(ctx, input(ctx, t, { c.K, c.OC, c.IC }),
                                                      operand(ctx, WSP_GGML_TYPE_F32, { c.L, c.IC }, l), c.s, 0, 1);
                });
            }
        }
    }
}

TEST(CudaConv, ConvTranspose2d) {
    REQUIRE_GPU();
    struct Case {
        int64_t KW, KH, OC, IC, W, H, N;
        int     s;
    };
    const Case cases[] = { { 3, 3, 2, 3, 4, 5, 1, 1 },
                           { 2, 2, 4, 5, 7, 3, 2, 2 },
                           { 3, 1, 1, 2, 5, 6, 1, 3 },
                           { 1, 1, 3, 1, 1, 1, 2, 2 },
                           { 4, 3, 5, 17, 9, 8, 1, 5 } };
    for (const Case & c : cases) {
        for (wsp_ggml_type t : float_types()) {
            compare([&](wsp_ggml_context * ctx) {
                return wsp_ggml_conv_transpose_2d_p0(
                    ctx, input(ctx, t, { c.KW, c.KH, c.OC, c.IC }),
                    operand(ctx, WSP_GGML_TYPE_F32, { c.W, c.H, c.IC, c.N }, Layout::Strided), c.s);
            });
        }
    }
}

// ids: distinct random experts per token, or one id out of range when `bad`
Fill expert_ids(int64_t n_as, bool bad) {
    return [n_as, bad](wsp_ggml_tensor * t, uint32_t seed) {
        if (t->type != WSP_GGML_TYPE_I32) {
            return false;
        }
        std::mt19937         rng(seed);
        std::vector<int32_t> ids;
        for (int64_t tok = 0; tok < t->ne[1]; ++tok) {
            std::vector<int32_t> all((size_t) n_as);
            for (int64_t e = 0; e < n_as; ++e) {
                all[(size_t) e] = (int32_t) e;
            }
            std::shuffle(all.begin(), all.end(), rng);
            for (int64_t e = 0; e < t->ne[0]; ++e) {
                ids.push_back(all[(size_t) (e % n_as)]);
            }
        }
        if (bad) {
            ids[ids.size() / 2] = (int32_t) n_as;
        }
        set_i32(t, ids);
        return true;
    };
}

TEST(CudaConv, MulMatId) {
    REQUIRE_GPU();
    struct Case {
        int64_t K, N, n_as, n_used, n_tok;
        bool    broadcast_b;
    };
    const Case                 cases[] = { { 64, 17, 4, 2, 5, false },
                                           { 96, 33, 8, 3, 7, true },
                                           { 32, 1, 1, 1, 1, false },
                                           { 160, 40, 6, 6, 3, false },
                                           { 64, 5, 3, 2, 37, true } };
    std::vector<wsp_ggml_type> types   = float_types();
    for (wsp_ggml_type q : quant_types()) {
        types.push_back(q);
    }
    for (const Case & c : cases) {
        for (wsp_ggml_type at : types) {
            const bool fl = at == WSP_GGML_TYPE_F32 || at == WSP_GGML_TYPE_F16 || at == WSP_GGML_TYPE_BF16;
            for (wsp_ggml_type bt : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
                compare(
                    [&](wsp_ggml_context * ctx) {
                        wsp_ggml_tensor * as =
                            operand(ctx, at, { c.K, c.N, c.n_as }, fl ? Layout::Strided : Layout::Contiguous);
                        wsp_ggml_tensor * b =
                            operand(ctx, bt, { c.K, c.broadcast_b ? 1 : c.n_used, c.n_tok }, Layout::Strided);
                        return wsp_ggml_mul_mat_id(ctx, as, b, input(ctx, WSP_GGML_TYPE_I32, { c.n_used, c.n_tok }));
                    },
                    expert_ids(c.n_as, false));
            }
        }
    }
    // an id outside the experts: a zero column on both
    compare(
        [](wsp_ggml_context * ctx) {
            return wsp_ggml_mul_mat_id(ctx, input(ctx, WSP_GGML_TYPE_F16, { 32, 9, 3 }),
                                       input(ctx, WSP_GGML_TYPE_F32, { 32, 2, 4 }),
                                       input(ctx, WSP_GGML_TYPE_I32, { 2, 4 }));
        },
        expert_ids(3, true));
}

// K-quant experts (rows of whole super-blocks; IQ4_NL, IQ4_XS, TQ1_0, TQ2_0 and, where the build
// read the client's codebooks, the grid i-quants too), dequantized element by element on both sides
TEST(CudaConv, MulMatIdKQuants) {
    REQUIRE_GPU();
    for (wsp_ggml_type at : { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q5_K,
                              WSP_GGML_TYPE_Q6_K, WSP_GGML_TYPE_IQ4_NL, WSP_GGML_TYPE_IQ4_XS, WSP_GGML_TYPE_TQ1_0,
                              WSP_GGML_TYPE_TQ2_0, WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ2_S,
                              WSP_GGML_TYPE_IQ3_XXS, WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_S, WSP_GGML_TYPE_IQ1_M }) {
        if (wsp_ggml_get_type_traits(at)->to_float == nullptr) {
            continue; // a grid i-quant in a build without the codebooks: CudaConv.SupportIsExact
        }
        SCOPED_TRACE(wsp_ggml_type_name(at));
        compare(
            [&](wsp_ggml_context * ctx) {
                wsp_ggml_tensor * as = operand(ctx, at, { 512, 9, 4 }, Layout::Contiguous);
                wsp_ggml_tensor * b  = operand(ctx, WSP_GGML_TYPE_F32, { 512, 2, 5 }, Layout::Strided);
                return wsp_ggml_mul_mat_id(ctx, as, b, input(ctx, WSP_GGML_TYPE_I32, { 2, 5 }));
            },
            expert_ids(4, false));
    }
}

TEST(CudaConv, OutProd) {
    REQUIRE_GPU();
    struct Case {
        std::vector<int64_t> a, b;
    };
    const Case cases[] = { { { 7, 5 }, { 3, 5 } },
                           { { 64, 33, 2, 1 }, { 17, 33, 4, 3 } },
                           { { 1, 1 }, { 1, 1 } },
                           { { 32, 9, 1, 2 }, { 6, 9, 3, 2 } },
                           { { 37, 1 }, { 41, 1 } } };
    for (const Case & c : cases) {
        for (wsp_ggml_type at :
             { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_0 }) {
            const bool fl = at == WSP_GGML_TYPE_F32 || at == WSP_GGML_TYPE_F16 || at == WSP_GGML_TYPE_BF16;
            if (!fl && c.a[0] % 32 != 0) {
                continue;
            }
            for (Layout lb : { Layout::Contiguous, Layout::Permuted }) {
                compare([&](wsp_ggml_context * ctx) {
                    return wsp_ggml_out_prod(ctx, operand(ctx, at, c.a, fl ? Layout::Strided : Layout::Contiguous),
                                             operand(ctx, WSP_GGML_TYPE_F32, c.b, lb));
                });
            }
        }
    }
}

TEST(CudaConv, Im2colCompositionsEndToEnd) {
    REQUIRE_GPU();
    for (wsp_ggml_type wt : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_1d_1s(ctx, input(ctx, wt, { 3, 80, 64 }), input(ctx, WSP_GGML_TYPE_F32, { 300, 80 }));
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_1d_2s(ctx, input(ctx, wt, { 3, 7, 11 }), input(ctx, WSP_GGML_TYPE_F32, { 41, 7 }));
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_1d_dw(ctx, input(ctx, wt, { 5, 1, 13 }),
                                       operand(ctx, WSP_GGML_TYPE_F32, { 31, 13, 2 }, Layout::Permuted), 2, 3, 1);
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_1d_dw_ph(ctx, input(ctx, wt, { 3, 1, 6 }), input(ctx, WSP_GGML_TYPE_F32, { 23, 6 }), 1,
                                          2);
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_2d(ctx, input(ctx, wt, { 3, 2, 3, 5 }),
                                    operand(ctx, WSP_GGML_TYPE_F32, { 11, 9, 3, 2 }, Layout::Strided), 2, 1, 1, 0, 1,
                                    2);
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_2d_sk_p0(ctx, input(ctx, wt, { 4, 4, 3, 8 }),
                                          input(ctx, WSP_GGML_TYPE_F32, { 16, 12, 3 }));
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_2d_s1_ph(ctx, input(ctx, wt, { 3, 3, 2, 4 }),
                                          input(ctx, WSP_GGML_TYPE_F32, { 9, 7, 2 }));
        });
        compare([&](wsp_ggml_context * ctx) {
            return wsp_ggml_conv_2d_dw(ctx, input(ctx, wt, { 3, 3, 1, 17 }),
                                       input(ctx, WSP_GGML_TYPE_F32, { 10, 8, 17, 2 }), 1, 2, 1, 1, 1, 1);
        });
    }
}

TEST(CudaConv, SupportIsExact) {
    REQUIRE_GPU();
    wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(0);
    ASSERT_NE(cuda, nullptr);
    wsp_ggml_context * ctx = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  x   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 32, 4, 3);
    wsp_ggml_tensor *  q   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_Q4_0, 32, 4, 3);
    wsp_ggml_tensor *  ids = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_I32, 2, 3);
    wsp_ggml_tensor *  b   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 32, 2, 3);
    wsp_ggml_tensor *  bq  = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_Q8_0, 32, 2, 3);
    // a grid i-quant: a CUDA dequantizer exactly where the build read the client's codebooks, as the CPU
    wsp_ggml_tensor * i2 = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_IQ2_XXS, 256, 4, 3);
    wsp_ggml_tensor * b2 = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 256, 2, 3);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_mul_mat_id(ctx, q, b, ids)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_mul_mat_id(ctx, x, bq, ids)));
    EXPECT_EQ(wsp_ggml_backend_supports_op(cuda, wsp_ggml_mul_mat_id(ctx, i2, b2, ids)),
              wsp_ggml_get_type_traits(WSP_GGML_TYPE_IQ2_XXS)->to_float != nullptr);
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_pool_1d(ctx, q, WSP_GGML_OP_POOL_MAX, 2, 2, 0)));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_out_prod(ctx, q, x)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_out_prod(ctx, x, q)));
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cuda);
}

} // namespace
} // namespace wsp::test
