// The math family's reductions and norms on the CPU against double references: SUM, SUM_ROWS,
// ARGMAX (ties, -inf rows, NaN), COUNT_EQUAL, RMS_NORM, L2_NORM and GROUP_NORM (groups that do not
// divide the channels, more groups than channels) over float types, layouts, odd sizes, in place
// and thread counts.

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace wsp::test {
namespace {

const std::vector<Layout> LAYOUTS = { Layout::Contiguous, Layout::Permuted, Layout::Strided };

double rtol_of(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 ? 2e-6 : type_eps(t);
}

std::string trace(wsp_ggml_type t, Layout l, const std::vector<int64_t> & ne, int nth) {
    std::string s = std::string(wsp_ggml_type_name(t)) + " " + layout_name(l) + " [";
    for (int64_t n : ne) {
        s += std::to_string(n) + ",";
    }
    return s + "] threads " + std::to_string(nth);
}

// ---- SUM and SUM_ROWS

TEST(MathReduce, SumAndSumRows) {
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 1031 }, { 37, 5, 3, 2 }, { 3, 257 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                for (int nth : { 1, 3 }) {
                    SCOPED_TRACE(trace(type, layout, ne, nth));
                    Graph  g;
                    auto * a    = make_operand(g, type, ne, layout);
                    auto * sum  = wsp_ggml_sum(g.ctx(), a);
                    auto * rows = wsp_ggml_sum_rows(g.ctx(), a);
                    ASSERT_EQ(sum->type, type);
                    ASSERT_EQ(rows->type, type);
                    ASSERT_EQ(wsp_ggml_nelements(sum), 1);
                    ASSERT_EQ(rows->ne[0], 1);
                    g.build(sum, { rows });
                    const std::vector<float> x =
                        round_trip(type, random_values((size_t) wsp_ggml_nelements(a), 20, -1.0f, 1.5f));
                    set_values(a, x);
                    ASSERT_EQ(g.run(nth), WSP_GGML_STATUS_SUCCESS);
                    const size_t        ne0 = (size_t) a->ne[0];
                    std::vector<double> row_ref(x.size() / ne0, 0.0);
                    double              total = 0.0;
                    for (size_t i = 0; i < x.size(); ++i) {
                        row_ref[i / ne0] += x[i];
                        total += x[i];
                    }
                    // sums of signed values may cancel: the error is relative to the sum of |x|
                    all_close(get_values(sum), { total }, 1e-6 * (double) x.size(), rtol_of(type), "sum");
                    all_close(get_values(rows), row_ref, 1e-6 * (double) ne0, rtol_of(type), "sum_rows");
                }
            }
        }
    }
}

// ---- ARGMAX

TEST(MathReduce, ArgmaxFirstIndexOfTheMaximum) {
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
            for (int64_t ne0 : { 1, 7, 1031 }) {
                SCOPED_TRACE(trace(type, layout, { ne0 }, 2));
                Graph  g;
                auto * a   = make_operand(g, type, { ne0, 6 }, layout);
                auto * out = wsp_ggml_argmax(g.ctx(), a);
                ASSERT_EQ(out->type, WSP_GGML_TYPE_I32);
                ASSERT_EQ(out->ne[0], 6);
                g.build(out);
                // few distinct values, so maxima repeat; row 3 all -inf, row 4 NaN in front
                std::vector<float> x = random_values((size_t) (ne0 * 6), 21, 0.0f, 5.0f);
                for (float & v : x) {
                    v = std::floor(v);
                }
                for (int64_t i = 0; i < ne0; ++i) {
                    x[(size_t) (3 * ne0 + i)] = -INFINITY;
                }
                x[(size_t) (4 * ne0)] = NAN;
                set_values(a, x);
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                std::vector<double> ref(6);
                for (int64_t r = 0; r < 6; ++r) {
                    int64_t best = 0;
                    float   mx   = -INFINITY;
                    for (int64_t i = 0; i < ne0; ++i) {
                        const float v = x[(size_t) (r * ne0 + i)];
                        if (v > mx) {
                            mx   = v;
                            best = i;
                        }
                    }
                    ref[(size_t) r] = (double) best;
                }
                all_close(get_values(out), ref, 0.0, 0.0, "argmax");
            }
        }
    }
}

// ---- COUNT_EQUAL

int64_t count_equal_of(const wsp_ggml_tensor * out) {
    int64_t n = -1;
    std::memcpy(&n, out->data, sizeof(n));
    return n;
}

TEST(MathReduce, CountEqual) {
    for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
        for (const std::vector<int64_t> & ne :
             std::vector<std::vector<int64_t>>{ { 1 }, { 37, 5, 3 }, { 1031, 7 }, { 5, 3, 2, 2 } }) {
            for (int nth : { 1, 3 }) {
                SCOPED_TRACE(trace(WSP_GGML_TYPE_I32, layout, ne, nth));
                Graph  g;
                auto * a   = make_operand(g, WSP_GGML_TYPE_I32, ne, layout);
                auto * b   = make_operand(g, WSP_GGML_TYPE_I32, ne, Layout::Contiguous);
                auto * out = wsp_ggml_count_equal(g.ctx(), a, b);
                ASSERT_EQ(out->type, WSP_GGML_TYPE_I64);
                g.build(out);
                const size_t             n  = (size_t) wsp_ggml_nelements(a);
                const std::vector<float> ua = random_values(n, 22, 0.0f, 3.0f), ub = random_values(n, 23, 0.0f, 3.0f);
                std::vector<int32_t>     va(n), vb(n);
                int64_t                  want = 0;
                for (size_t i = 0; i < n; ++i) {
                    va[i] = (int32_t) ua[i];
                    vb[i] = (int32_t) ub[i];
                    want += va[i] == vb[i];
                }
                set_i32(a, va);
                set_i32(b, vb);
                ASSERT_EQ(g.run(nth), WSP_GGML_STATUS_SUCCESS);
                EXPECT_EQ(count_equal_of(out), want);
            }
        }
    }
}

// ---- RMS_NORM and L2_NORM

std::vector<double> row_norm_ref(const std::vector<float> & x, size_t ne0, float eps, bool rms) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / ne0; ++r) {
        double s = 0.0;
        for (size_t i = 0; i < ne0; ++i) {
            s += (double) x[r * ne0 + i] * x[r * ne0 + i];
        }
        const double scale = rms ? 1.0 / std::sqrt(s / (double) ne0 + eps) : 1.0 / std::max(std::sqrt(s), (double) eps);
        for (size_t i = 0; i < ne0; ++i) {
            y[r * ne0 + i] = x[r * ne0 + i] * scale;
        }
    }
    return y;
}

TEST(MathNorm, RmsAndL2RowsTypesLayoutsInPlace) {
    for (bool rms : { true, false }) {
        for (wsp_ggml_type type : float_types()) {
            for (Layout layout : LAYOUTS) {
                for (int64_t ne0 : { 1, 17, 384, 1031 }) {
                    for (bool inplace : { false, true }) {
                        SCOPED_TRACE(std::string(rms ? "rms " : "l2 ") + trace(type, layout, { ne0 }, 3) +
                                     (inplace ? " inplace" : ""));
                        const float eps = rms ? 1e-6f : 1e-12f;
                        Graph       g;
                        auto *      a   = make_operand(g, type, { ne0, 5, 2 }, layout);
                        auto *      out = rms ? (inplace ? wsp_ggml_rms_norm_inplace(g.ctx(), a, eps)
                                                         : wsp_ggml_rms_norm(g.ctx(), a, eps))
                                              : (inplace ? wsp_ggml_l2_norm_inplace(g.ctx(), a, eps)
                                                         : wsp_ggml_l2_norm(g.ctx(), a, eps));
                        g.build(out);
                        const std::vector<float> x =
                            round_trip(type, random_values((size_t) wsp_ggml_nelements(a), 24, -2.0f, 3.0f));
                        set_values(a, x);
                        ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
                        EXPECT_EQ(out->data == a->data, inplace);
                        all_close(get_values(out), row_norm_ref(x, (size_t) ne0, eps, rms), 1e-6, rtol_of(type),
                                  rms ? "rms_norm" : "l2_norm");
                    }
                }
            }
        }
    }
}

TEST(MathNorm, EpsDominatesSmallRows) {
    // a zero row gives zeros; a row whose norm is below eps is divided by eps
    Graph  g;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { 4, 2 });
    auto * l2  = wsp_ggml_l2_norm(g.ctx(), a, 0.5f);
    auto * rms = wsp_ggml_rms_norm(g.ctx(), a, 0.25f);
    g.build(l2, { rms });
    const std::vector<float> x = { 0, 0, 0, 0, 0.1f, -0.1f, 0.2f, 0 };
    set_values(a, x);
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    all_close(get_values(l2), row_norm_ref(x, 4, 0.5f, false), 1e-7, 1e-6, "l2_norm");
    all_close(get_values(rms), row_norm_ref(x, 4, 0.25f, true), 1e-7, 1e-6, "rms_norm");
}

// ---- GROUP_NORM

std::vector<double> group_norm_ref(const std::vector<float> & x, const std::vector<int64_t> & ne, int n_groups,
                                   float eps) {
    std::vector<double> y(x.size());
    const int64_t       per = (ne[2] + n_groups - 1) / n_groups, plane = ne[0] * ne[1];
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t gi = 0; gi < n_groups; ++gi) {
            const int64_t c0 = std::min(gi * per, ne[2]), c1 = std::min(c0 + per, ne[2]);
            const size_t  b = (size_t) ((i3 * ne[2] + c0) * plane), e = (size_t) ((i3 * ne[2] + c1) * plane);
            if (b == e) {
                continue;
            }
            double mean = 0.0, var = 0.0;
            for (size_t k = b; k < e; ++k) {
                mean += x[k];
            }
            mean /= (double) (e - b);
            for (size_t k = b; k < e; ++k) {
                var += (x[k] - mean) * (x[k] - mean);
            }
            var /= (double) (e - b);
            for (size_t k = b; k < e; ++k) {
                y[k] = (x[k] - mean) / std::sqrt(var + eps);
            }
        }
    }
    return y;
}

TEST(MathNorm, GroupNormGroupings) {
    const std::vector<int64_t> ne = { 5, 4, 7, 2 };
    for (int n_groups : { 1, 3, 7, 10 }) {
        for (wsp_ggml_type type : float_types()) {
            for (Layout layout : LAYOUTS) {
                for (bool inplace : { false, true }) {
                    SCOPED_TRACE("groups " + std::to_string(n_groups) + " " + trace(type, layout, ne, 3) +
                                 (inplace ? " inplace" : ""));
                    Graph  g;
                    auto * a   = make_operand(g, type, ne, layout);
                    auto * out = inplace ? wsp_ggml_group_norm_inplace(g.ctx(), a, n_groups, 1e-6f)
                                         : wsp_ggml_group_norm(g.ctx(), a, n_groups, 1e-6f);
                    EXPECT_EQ(out->op_params[0], n_groups);
                    g.build(out);
                    const std::vector<float> x =
                        round_trip(type, random_values((size_t) wsp_ggml_nelements(a), 25, 1.0f, 4.0f));
                    set_values(a, x);
                    ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
                    EXPECT_EQ(out->data == a->data, inplace);
                    all_close(get_values(out), group_norm_ref(x, ne, n_groups, 1e-6f), 1e-5, rtol_of(type),
                              "group_norm");
                }
            }
        }
    }
}

TEST(MathNorm, GroupNormLargeGroupThreads) {
    for (int nth : { 1, 2, 4 }) {
        Graph  g;
        auto * a   = g.input(WSP_GGML_TYPE_F32, { 64, 33, 32 });
        auto * out = wsp_ggml_group_norm(g.ctx(), a, 32 / 3 + 1, 1e-5f);
        g.build(out);
        const std::vector<float> x = random_values((size_t) wsp_ggml_nelements(a), 26, -1.0f, 1.0f);
        set_values(a, x);
        ASSERT_EQ(g.run(nth), WSP_GGML_STATUS_SUCCESS);
        all_close(get_values(out), group_norm_ref(x, { 64, 33, 32, 1 }, 32 / 3 + 1, 1e-5f), 1e-5, 2e-6,
                  "group_norm threads " + std::to_string(nth));
    }
}

} // namespace
} // namespace wsp::test
