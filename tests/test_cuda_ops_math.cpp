// The math family's CUDA kernels against the CPU backend, node by node on every CUDA device: LOG,
// SIN, COS, CLAMP, LEAKY_RELU, ADD1, add_cast, the in-place forms of ggml.h's ops, SUM, SUM_ROWS,
// ARGMAX, COUNT_EQUAL, RMS_NORM, L2_NORM, GROUP_NORM, ACC, SET, DIAG and the causal masks, over
// float types, shapes of 1, primes and lengths that are not multiples of 32, permuted and strided
// operands and in-place nodes. Without a GPU every case is skipped with the reason.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// F32 results agree to an NMSE of 1e-10 (accurate device math and another order of additions
// differ by ~1e-7 relative); F16 / BF16 may flip one rounding step (nmse_bound); integers exactly;
// non-finite values must match exactly
constexpr double F32_TOL = 1e-10;

using Build = std::function<std::vector<wsp_ggml_tensor *>(wsp_ggml_context *)>;
using Fill  = std::function<bool(wsp_ggml_tensor *, uint32_t seed)>;

struct CompareCtx {
    int checked;
};

bool check_node(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * c = static_cast<CompareCtx *>(user_data);
    if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
        return true;
    }
    const std::string what = "node " + std::to_string(i) + " " + wsp_ggml_op_desc(t1) + " " + shape_str(t1);
    if (t1->type == WSP_GGML_TYPE_I64) { // COUNT_EQUAL: one contiguous value
        int64_t gpu = -1;
        wsp_ggml_backend_tensor_get(t2, &gpu, 0, sizeof(gpu));
        EXPECT_EQ(gpu, *static_cast<const int64_t *>(t1->data)) << what;
    } else if (t1->type == WSP_GGML_TYPE_I32) {
        EXPECT_EQ(device_values(t2), get_values(t1)) << what;
    } else {
        const double tol = t1->type == WSP_GGML_TYPE_F32 ? F32_TOL : std::max(F32_TOL, nmse_bound(t1->type));
        expect_close(device_values(t2), get_values(t1), tol, what);
    }
    ++c->checked;
    return true;
}

// inputs: fill(t, seed) where it says so, else uniform values in [lo, hi) (ints in [0, 4) for I32)
void fill_all(wsp_ggml_context * ctx, const Fill & fill, float lo, float hi) {
    uint32_t seed = 31;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (!(t->flags & WSP_GGML_TENSOR_FLAG_INPUT) || t->data == nullptr) {
            continue;
        }
        ++seed;
        if (fill && fill(t, seed)) {
            continue;
        }
        const std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed, lo, hi);
        if (t->type == WSP_GGML_TYPE_I32) {
            std::vector<int32_t> k(v.size());
            for (size_t i = 0; i < v.size(); ++i) {
                k[i] = (int32_t) std::floor(v[i] * 4.0f);
            }
            set_i32(t, k);
        } else {
            set_values(t, v);
        }
    }
}

// every node of build's graph computed on each CUDA device and on the CPU, then compared
void compare(const Build & build, const Fill & fill = nullptr, float lo = -1.0f, float hi = 1.0f) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph                          g(4096);
        std::vector<wsp_ggml_tensor *> outs = build(g.ctx());
        ASSERT_FALSE(outs.empty());
        g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
        fill_all(g.ctx(), fill, lo, hi);
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        for (wsp_ggml_tensor * t : outs) {
            EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, t)) << wsp_ggml_op_desc(t) << " " << shape_str(t);
        }
        CompareCtx c{ 0 };
        EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_node, &c));
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

std::string trace(wsp_ggml_type t, Layout l, const std::vector<int64_t> & ne) {
    return std::string(wsp_ggml_type_name(t)) + " " + layout_name(l) + " ne0 " + std::to_string(ne[0]);
}

const std::vector<std::vector<int64_t>> SHAPES = { { 1 }, { 37, 5, 3 }, { 1031, 3 }, { 7, 3, 2, 5 } };

// ---- LOG, SIN, COS, CLAMP, LEAKY_RELU, ADD1

TEST(CudaMath, MapsTypesLayoutsAndInPlace) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : SHAPES) {
                SCOPED_TRACE(trace(type, layout, ne));
                auto op = [&](wsp_ggml_context * ctx) { return operand(ctx, type, ne, layout); };
                compare(
                    [&](wsp_ggml_context * ctx) {
                        wsp_ggml_tensor * s = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1);
                        wsp_ggml_set_input(s);
                        return std::vector<wsp_ggml_tensor *>{
                            wsp_ggml_sin(ctx, op(ctx)),
                            wsp_ggml_sin_inplace(ctx, op(ctx)),
                            wsp_ggml_cos(ctx, op(ctx)),
                            wsp_ggml_cos_inplace(ctx, op(ctx)),
                            wsp_ggml_clamp(ctx, op(ctx), -0.5f, 1.25f),
                            wsp_ggml_leaky_relu(ctx, op(ctx), 0.1f, false),
                            wsp_ggml_leaky_relu(ctx, op(ctx), 0.3f, true),
                            wsp_ggml_add1(ctx, op(ctx), s),
                            wsp_ggml_add1_inplace(ctx, op(ctx), s),
                        };
                    },
                    nullptr, -4.0f, 4.0f);
                compare(
                    [&](wsp_ggml_context * ctx) {
                        return std::vector<wsp_ggml_tensor *>{ wsp_ggml_log(ctx, op(ctx)),
                                                               wsp_ggml_log_inplace(ctx, op(ctx)) };
                    },
                    nullptr, 0.05f, 4.0f);
            }
        }
    }
}

TEST(CudaMath, InPlaceFormsOfExistingKernels) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        compare(
            [&](wsp_ggml_context * ctx) {
                auto                           op   = [&](Layout l) { return operand(ctx, type, { 37, 5, 3 }, l); };
                std::vector<wsp_ggml_tensor *> outs = {
                    wsp_ggml_dup_inplace(ctx, op(Layout::Permuted)),
                    wsp_ggml_sub_inplace(ctx, op(Layout::Strided),
                                         operand(ctx, type, { 37, 1, 3 }, Layout::Contiguous)),
                    wsp_ggml_div_inplace(ctx, op(Layout::Contiguous), operand(ctx, type, { 1, 5 }, Layout::Contiguous)),
                    wsp_ggml_sqr_inplace(ctx, op(Layout::Permuted)),
                    wsp_ggml_sqrt_inplace(ctx, op(Layout::Strided)),
                    wsp_ggml_soft_max_inplace(ctx, op(Layout::Contiguous)),
                };
                using UnaryInPlace = wsp_ggml_tensor * (*) (wsp_ggml_context *, wsp_ggml_tensor *);
                for (UnaryInPlace f : { wsp_ggml_abs_inplace, wsp_ggml_sgn_inplace, wsp_ggml_neg_inplace,
                                        wsp_ggml_step_inplace, wsp_ggml_tanh_inplace, wsp_ggml_elu_inplace,
                                        wsp_ggml_relu_inplace, wsp_ggml_sigmoid_inplace, wsp_ggml_gelu_erf_inplace,
                                        wsp_ggml_gelu_quick_inplace, wsp_ggml_silu_inplace, wsp_ggml_exp_inplace }) {
                    outs.push_back(f(ctx, op(Layout::Strided)));
                }
                return outs;
            },
            nullptr, 0.25f, 3.0f);
    }
}

TEST(CudaMath, AddCastEveryResultType) {
    REQUIRE_GPU();
    for (wsp_ggml_type ta : float_types()) {
        for (wsp_ggml_type tr : float_types()) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(ta)) + " -> " + wsp_ggml_type_name(tr));
            compare([&](wsp_ggml_context * ctx) {
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_add_cast(
                    ctx, operand(ctx, ta, { 67, 5, 3 }, Layout::Permuted),
                    operand(ctx, WSP_GGML_TYPE_F32, { 67, 1, 3 }, Layout::Contiguous), tr) };
            });
        }
    }
}

// ---- ADD, SUB, MUL, DIV, SCALE: the typed instances and the AnyFloat one (Note [typed elementwise
// kernels] in src/cuda/kernels/elementwise.cuh), broadcasts, layouts, whisper's widths

// a binary node whose result has another type than a (the builders keep a's; both backends take
// any float types)
wsp_ggml_tensor * binary_as(wsp_ggml_context * ctx, wsp_ggml_op op, wsp_ggml_tensor * a, wsp_ggml_tensor * b,
                            wsp_ggml_type type) {
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, type, 4, a->ne);
    r->op               = op;
    r->src[0]           = a;
    r->src[1]           = b;
    return r;
}

TEST(CudaMath, BinaryAndScaleTypeMixesBroadcastsAndLayouts) {
    REQUIRE_GPU();
    // DIV: divisors kept away from 0
    const Fill positive = [](wsp_ggml_tensor * t, uint32_t seed) {
        set_values(t, random_values((size_t) wsp_ggml_nelements(t), seed, 0.5f, 2.0f));
        return true;
    };
    const wsp_ggml_op ops[] = { WSP_GGML_OP_ADD, WSP_GGML_OP_SUB, WSP_GGML_OP_MUL, WSP_GGML_OP_DIV };
    for (wsp_ggml_type ta : float_types()) {
        for (wsp_ggml_type tb : float_types()) {
            for (const auto & shape : SHAPES) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(ta)) + " " + wsp_ggml_type_name(tb) + " ne0 " +
                             std::to_string(shape[0]));
                std::vector<int64_t> ne = shape;
                ne.resize(4, 1);
                // b: a's shape, rows broadcast (dims 1 and 3), columns broadcast, one value
                const std::vector<std::vector<int64_t>> b_shapes = {
                    ne, { ne[0], 1, ne[2], 1 }, { 1, ne[1], 1, ne[3] }, { 1 }
                };
                const wsp_ggml_type other = ta == WSP_GGML_TYPE_F32 ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32;
                compare(
                    [&](wsp_ggml_context * ctx) {
                        std::vector<wsp_ggml_tensor *> outs;
                        for (Layout layout : LAYOUTS) {
                            for (size_t k = 0; k < b_shapes.size(); ++k) {
                                const wsp_ggml_op op = ops[k % 4];
                                wsp_ggml_tensor * b =
                                    operand(ctx, tb, b_shapes[k], k == 0 ? layout : Layout::Contiguous);
                                outs.push_back(binary_as(ctx, op, operand(ctx, ta, ne, layout), b, ta));
                            }
                            outs.push_back(binary_as(ctx, ops[(int) layout % 4], operand(ctx, ta, ne, layout),
                                                     operand(ctx, tb, ne, Layout::Strided), other));
                            outs.push_back(wsp_ggml_scale(ctx, operand(ctx, ta, ne, layout), 0.25f));
                            outs.push_back(wsp_ggml_scale_inplace(ctx, operand(ctx, ta, ne, layout), -3.0f));
                        }
                        return outs;
                    },
                    positive);
            }
            // b repeated along every dim (1 < b's ne < a's ne: the modulo of each index)
            SCOPED_TRACE(std::string(wsp_ggml_type_name(ta)) + " " + wsp_ggml_type_name(tb) + " repeated");
            compare(
                [&](wsp_ggml_context * ctx) {
                    std::vector<wsp_ggml_tensor *> outs;
                    for (Layout layout : LAYOUTS) {
                        for (const std::vector<int64_t> & nb : { std::vector<int64_t>{ 3, 2, 3, 1 }, { 2, 4, 1, 2 } }) {
                            outs.push_back(binary_as(ctx, ops[outs.size() % 4],
                                                     operand(ctx, ta, { 6, 4, 6, 2 }, layout),
                                                     operand(ctx, tb, nb, layout), ta));
                        }
                    }
                    return outs;
                },
                positive);
        }
    }
}

// whisper's widths: contiguous operands are one row of 1280 x 300 elements (Note [collapsed dims]),
// a bias broadcast over 300 rows, and a permuted view
TEST(CudaMath, ElementwiseAtWhisperWidths) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        compare([&](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * x    = operand(ctx, type, { 1280, 300 }, Layout::Contiguous);
            wsp_ggml_tensor * bias = operand(ctx, WSP_GGML_TYPE_F32, { 1280 }, Layout::Contiguous);
            return std::vector<wsp_ggml_tensor *>{
                wsp_ggml_gelu(ctx, x),
                wsp_ggml_add(ctx, x, bias),
                wsp_ggml_mul(ctx, x, operand(ctx, type, { 1280, 300 }, Layout::Contiguous)),
                wsp_ggml_scale(ctx, x, 0.125f),
                wsp_ggml_silu(ctx, operand(ctx, type, { 300, 1280 }, Layout::Permuted)),
            };
        });
    }
}

// ---- reductions

TEST(CudaMath, SumAndSumRows) {
    REQUIRE_GPU();
    std::vector<std::vector<int64_t>> shapes = SHAPES;
    shapes.push_back({ 3, 257 });
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(trace(type, layout, ne));
                compare(
                    [&](wsp_ggml_context * ctx) {
                        return std::vector<wsp_ggml_tensor *>{
                            wsp_ggml_sum(ctx, operand(ctx, type, ne, layout)),
                            wsp_ggml_sum_rows(ctx, operand(ctx, type, ne, layout)),
                        };
                    },
                    nullptr, -1.0f, 1.5f);
            }
        }
    }
}

TEST(CudaMath, SumOfAMillionValues) {
    REQUIRE_GPU();
    compare(
        [](wsp_ggml_context * ctx) {
            return std::vector<wsp_ggml_tensor *>{
                wsp_ggml_sum(ctx, operand(ctx, WSP_GGML_TYPE_F32, { 4099, 300 }, Layout::Contiguous)),
                wsp_ggml_sum_rows(ctx, operand(ctx, WSP_GGML_TYPE_F32, { 4099, 300 }, Layout::Strided)),
            };
        },
        nullptr, 0.0f, 1.0f);
}

// few distinct values (ties), one row of -inf, NaN at the front of another
bool fill_argmax(wsp_ggml_tensor * t, uint32_t seed) {
    if (t->type == WSP_GGML_TYPE_I32) {
        return false;
    }
    std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed, 0.0f, 5.0f);
    const size_t       n = (size_t) t->ne[0];
    for (float & x : v) {
        x = std::floor(x);
    }
    if (t->ne[1] > 4) {
        std::fill(v.begin() + 3 * n, v.begin() + 4 * n, -INFINITY);
        v[4 * n] = NAN;
    }
    set_values(t, v);
    return true;
}

TEST(CudaMath, ArgmaxTiesInfAndNaN) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
            for (int64_t ne0 : { 1, 7, 1031, 5000 }) {
                SCOPED_TRACE(trace(type, layout, { ne0 }));
                compare(
                    [&](wsp_ggml_context * ctx) {
                        return std::vector<wsp_ggml_tensor *>{ wsp_ggml_argmax(
                            ctx, operand(ctx, type, { ne0, 6 }, layout)) };
                    },
                    fill_argmax);
            }
        }
    }
}

TEST(CudaMath, CountEqual) {
    REQUIRE_GPU();
    for (Layout layout : { Layout::Contiguous, Layout::Permuted, Layout::Strided }) {
        for (const auto & ne : std::vector<std::vector<int64_t>>{ { 1 }, { 37, 5, 3 }, { 1031, 7 }, { 4099, 300 } }) {
            SCOPED_TRACE(trace(WSP_GGML_TYPE_I32, layout, ne));
            compare([&](wsp_ggml_context * ctx) {
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_count_equal(
                    ctx, operand(ctx, WSP_GGML_TYPE_I32, ne, layout),
                    operand(ctx, WSP_GGML_TYPE_I32, ne, Layout::Contiguous)) };
            });
        }
    }
}

// ---- norms

TEST(CudaMath, RmsAndL2Norm) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1, 3 }, { 37, 5, 3 }, { 384, 7 }, { 4099, 2 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(trace(type, layout, ne));
                compare(
                    [&](wsp_ggml_context * ctx) {
                        return std::vector<wsp_ggml_tensor *>{
                            wsp_ggml_rms_norm(ctx, operand(ctx, type, ne, layout), 1e-6f),
                            wsp_ggml_rms_norm_inplace(ctx, operand(ctx, type, ne, layout), 1e-1f),
                            wsp_ggml_l2_norm(ctx, operand(ctx, type, ne, layout), 1e-12f),
                            wsp_ggml_l2_norm_inplace(ctx, operand(ctx, type, ne, layout), 2.0f),
                        };
                    },
                    nullptr, -2.0f, 3.0f);
            }
        }
    }
}

TEST(CudaMath, GroupNorm) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            SCOPED_TRACE(trace(type, layout, { 5 }));
            compare(
                [&](wsp_ggml_context * ctx) {
                    std::vector<wsp_ggml_tensor *> outs;
                    for (int n_groups : { 1, 3, 7, 10 }) {
                        outs.push_back(
                            wsp_ggml_group_norm(ctx, operand(ctx, type, { 5, 4, 7, 2 }, layout), n_groups, 1e-6f));
                        outs.push_back(wsp_ggml_group_norm_inplace(ctx, operand(ctx, type, { 5, 4, 7, 2 }, layout),
                                                                   n_groups, 1e-2f));
                    }
                    outs.push_back(wsp_ggml_group_norm(ctx, operand(ctx, type, { 64, 33, 32 }, layout), 11, 1e-5f));
                    return outs;
                },
                nullptr, 1.0f, 4.0f);
        }
    }
}

// ---- ACC, SET, DIAG, masks

TEST(CudaMath, AccAndSetOverViews) {
    REQUIRE_GPU();
    for (wsp_ggml_type ta : float_types()) {
        for (bool inplace : { false, true }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(ta)) + (inplace ? " inplace" : ""));
            compare([&](wsp_ggml_context * ctx) {
                std::vector<wsp_ggml_tensor *> outs;
                for (bool acc : { true, false }) {
                    wsp_ggml_tensor * a   = operand(ctx, ta, { 10, 6, 3 }, Layout::Contiguous);
                    wsp_ggml_tensor * b   = operand(ctx, WSP_GGML_TYPE_F32, { 4, 3, 2 }, Layout::Permuted);
                    const size_t      nb1 = 2 * a->nb[1], nb2 = a->nb[2], off = 3 * wsp_ggml_type_size(ta);
                    outs.push_back(acc ? (inplace ? wsp_ggml_acc_inplace(ctx, a, b, nb1, nb2, a->nb[3], off)
                                                  : wsp_ggml_acc(ctx, a, b, nb1, nb2, a->nb[3], off))
                                       : (inplace ? wsp_ggml_set_inplace(ctx, a, b, nb1, nb2, a->nb[3], off)
                                                  : wsp_ggml_set(ctx, a, b, nb1, nb2, a->nb[3], off)));
                }
                wsp_ggml_tensor * a = operand(ctx, ta, { 33, 7 }, Layout::Strided);
                wsp_ggml_tensor * s1 =
                    inplace ? wsp_ggml_set_1d_inplace(ctx, a, operand(ctx, ta, { 5 }, Layout::Contiguous), 8)
                            : wsp_ggml_set_1d(ctx, a, operand(ctx, ta, { 5 }, Layout::Contiguous), 8);
                wsp_ggml_tensor * b2 = operand(ctx, ta, { 4, 2 }, Layout::Contiguous);
                outs.push_back(inplace ? wsp_ggml_set_2d_inplace(ctx, s1, b2, 3 * a->nb[1], a->nb[1])
                                       : wsp_ggml_set_2d(ctx, s1, b2, 3 * a->nb[1], a->nb[1]));
                return outs;
            });
        }
    }
}

TEST(CudaMath, SetOfI32) {
    REQUIRE_GPU();
    for (bool inplace : { false, true }) {
        compare([&](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * a = operand(ctx, WSP_GGML_TYPE_I32, { 10, 4 }, Layout::Contiguous);
            wsp_ggml_tensor * b = operand(ctx, WSP_GGML_TYPE_I32, { 3, 2 }, Layout::Permuted);
            return std::vector<wsp_ggml_tensor *>{ inplace ? wsp_ggml_set_2d_inplace(ctx, a, b, 2 * a->nb[1], 4 * 4)
                                                           : wsp_ggml_set_2d(ctx, a, b, 2 * a->nb[1], 4 * 4) };
        });
    }
}

TEST(CudaMath, DiagAndMasks) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            SCOPED_TRACE(trace(type, layout, { 9 }));
            compare([&](wsp_ggml_context * ctx) {
                std::vector<wsp_ggml_tensor *> outs = { wsp_ggml_diag(ctx,
                                                                      operand(ctx, type, { 7, 1, 3, 2 }, layout)) };
                for (int n_past : { 0, 2, -1 }) {
                    outs.push_back(wsp_ggml_diag_mask_inf(ctx, operand(ctx, type, { 9, 5, 3 }, layout), n_past));
                    outs.push_back(wsp_ggml_diag_mask_inf_inplace(ctx, operand(ctx, type, { 33, 40 }, layout), n_past));
                    outs.push_back(wsp_ggml_diag_mask_zero(ctx, operand(ctx, type, { 9, 5, 3 }, layout), n_past));
                    outs.push_back(wsp_ggml_diag_mask_zero_inplace(ctx, operand(ctx, type, { 1, 1 }, layout), n_past));
                }
                return outs;
            });
        }
    }
}

} // namespace
} // namespace wsp::test
